"""``haloflow predict`` against a real run on this machine: 1-rank runs of the 128^2 cavity
calibrate the model (the fastest run's profile.json), the model predicts 2 ranks on shared
memory (the curve measured by ``haloflow netpipe`` on 2 ranks), and 2-rank runs of the same
case measure.  The fastest 2-rank run's s/step must be within ``BAND`` of the prediction.

The calibration runs go two at a time, one per core, so the profile's compute seconds are
those of a core whose neighbour is busy, as in the 2-rank run.  A virtual machine's two
cores can be two hardware threads of one physical core, or share its caches: the CI VM ran
one rank alone 1.5 times faster per step than each of two ranks side by side, and a model
calibrated on the idle node then missed by that factor.  Every run is a job of its own, as
a user's (not a kept-up job that ran other cases before it).

The model assumes each rank has a core to itself, and on a machine shared with other jobs
a rank is descheduled part of the time while its partner waits for it: on the 2-core
development VM with 1-5 other busy processes the 2-rank runs took 2-26 times the
prediction, their ranks on their cores 0.60-0.71 of the loop's wall time.  So each run is
judged by its own profile: MPICH polls while a rank waits, so a rank that had its core was
on it the whole loop, and only runs whose every rank's CPU seconds reach ``BUSY`` of the
loop's wall seconds count; if no calibration run or no 2-rank run did, the test skips,
saying so, rather than judge the model on what the other jobs did.  ``BAND`` is 0.8-1.4
(a fastest run above it is measured RUNS times more, for bursts on a VM's shared cores that
the CPU share does not see); a model off by 2x (its compute divided by the ranks twice)
fails at 2.0.  docs/model.md gives the model's acceptance as within 20 % at this size on an
idle machine."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.limited import haloflow

CASE = ["--set", "mesh.cells=[128,128,1]", "--set", "solver.dt=0.02", "--steps", "20",
        "--quiet", "--set", "output.plots=false", "--set", "output.fields=false",
        "--set", "postprocess.cavity=false"]
BUSY = 0.9  # a rank's CPU seconds over the loop's wall seconds, at least, to count
BAND = (0.8, 1.4)  # measured s/step over predicted, on 2 ranks with a core each
RUNS = 3


def _profile(d, n: int, seen: list) -> dict | None:
    """The profile in ``d`` if every rank had its core, else None; (ranks, CPU share,
    s/step) into ``seen``."""
    p = json.loads((d / "profile.json").read_text())
    share = min(c / w for c, w in zip(p["cpu_s"]["per_rank"], p["loop_s"]["per_rank"],
                                      strict=True))
    seen.append((n, round(share, 2), round(p["s_per_step"], 5)))
    return p | {"dir": d} if share >= BUSY else None


def _fastest(haloflow_mpi, n: int, out, seen: list) -> dict | None:
    """Of ``RUNS`` runs on ``n`` ranks, the profile of the fastest whose ranks all had their
    cores (None if none did).  1-rank runs go in pairs, side by side, to load both cores."""
    copies = 2 if n == 1 else 1
    runs = []
    with ThreadPoolExecutor(copies) as pool:
        for k in range(RUNS):
            dirs = [out / f"n{n}-{k}-{c}" for c in range(copies)]
            jobs = [pool.submit(haloflow_mpi, n, "run", "cavity", "-o", str(d), *CASE,
                                timeout=120, fresh=True) for d in dirs]
            for d, job in zip(dirs, jobs, strict=True):
                res = job.result()
                assert res.returncode == 0, res.stderr
                runs.append(_profile(d, n, seen))
    return min((p for p in runs if p is not None), key=lambda p: p["s_per_step"],
               default=None)


@pytest.mark.mpi
def test_predicted_time_per_step_on_two_ranks_matches_a_real_run(haloflow_mpi, tmp_path):
    seen = []
    one = _fastest(haloflow_mpi, 1, tmp_path, seen)
    if one is None:
        pytest.skip(f"no 1-rank run had its core (ranks, CPU share, s/step): {seen}")
    shm = tmp_path / "shm.out"
    res = haloflow_mpi(2, "netpipe", "--quiet", "--max", "1M", "--perturb", "0",
                       "--trial-time", "0.005", "-o", str(shm), timeout=120)
    assert res.returncode == 0, res.stderr
    res = haloflow("predict", "--profile", one["dir"] / "profile.json", "--ranks", "1,2",
                   "--network", "shm", "--shm", shm, "--cores-per-node", "2", "--quiet",
                   "-o", tmp_path / "predict")
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "predict" / "predict.json").read_text())
    rows = {r["ranks"]: r for r in doc["networks"][0]["rows"]}
    assert rows[1]["step_s"] == pytest.approx(one["s_per_step"], rel=0.03)  # calibrated
    two = _fastest(haloflow_mpi, 2, tmp_path, seen)
    if two is None:
        pytest.skip(f"no 2-rank run had both its cores (ranks, CPU share, s/step): {seen}; "
                    f"predicted {rows[2]['step_s']:.4g} s/step")
    if two["s_per_step"] > BAND[1] * rows[2]["step_s"]:  # a burst: RUNS more, the fastest
        (tmp_path / "more").mkdir()
        more = _fastest(haloflow_mpi, 2, tmp_path / "more", seen)
        if more is not None and more["s_per_step"] < two["s_per_step"]:
            two = more
    ratio = two["s_per_step"] / rows[2]["step_s"]
    assert BAND[0] <= ratio <= BAND[1], (ratio, rows[2], seen)
