"""Issue 48, item 4: the performance model counts what the code does.

A 3D cavity of 12^3 cells runs 3 steps on 1 rank (the calibration) and on 4, 8 and 16 ranks
(oversubscribed here: timings ignored).  For each rank count the busiest rank's halo
exchanges, messages, bytes, allreduces and allgathers per step in the run's profile.json
(``counts.busiest``) must equal the model's (``study.model.counts``: the 1-rank profile on the
real partition at that rank count, as ``haloflow predict`` builds it) within 5 %; so must
the 16-rank run's with its coarse level agglomerated onto 4 ranks (RCB's parts), and the
ranks each level sits on.

Iterations: the pressure solve's iterations change by a few per step with the rank count
(summation order).  The model scales the pressure and momentum solves' share of its counts
(the profile's ``counts.phases``) by the ratio of the run's iterations (its ``per_step``
``p_iters`` and ``u_iters``) to the calibration's, and the comparison is per step: a count
that depends on the iterations is compared at the same iterations, the rest as it is.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from haloflow.parallel.decompose import decompose
from haloflow.study import model as M
from haloflow.study import predict as PR

CASE = ["--set", "mesh.cells=[12,12,12]", "--set", "boundary.front.type=wall",
        "--set", "boundary.back.type=wall", "--set", "output.plots=false",
        "--set", "postprocess.cavity=false", "--steps", "3", "--quiet"]
RANKS = (4, 8, 16)
KEYS = ("exchanges", "messages", "bytes", "allreduces", "gathers")
AGGLOMERATE = 100  # rows per rank: the 432-row coarse level on 4 of 16 ranks


def _run(haloflow_mpi, n, outdir, *extra) -> dict:
    res = haloflow_mpi(n, "run", "cavity", "-o", str(outdir), *CASE, *extra, timeout=240)
    assert res.returncode == 0, f"--- stdout ---\n{res.stdout}\n--- stderr ---\n{res.stderr}"
    return json.loads((outdir / "profile.json").read_text())


def compare(w: M.Workload, halo: M.Halo, prof: dict) -> dict:
    """``{key: (measured, modelled)}`` per step for the busiest rank of ``prof`` (one node:
    the oversubscribed run's)."""
    ps = prof["per_step"]
    got = M.counts(w, halo, {"p_iters": ps["p_iters"], "u_iters": ps["u_iters"]},
                   per_node=halo.ranks)
    return {k: (prof["counts"]["busiest"][k], got[f"{k}_per_step"]) for k in KEYS}


@pytest.mark.mpi
def test_model_counts_equal_the_profiles_on_4_8_16_ranks(haloflow_mpi, tmp_path):
    one = _run(haloflow_mpi, 1, tmp_path / "n1")
    path = tmp_path / "n1" / "profile.json"
    _, w = PR.load_profile(path)
    assert set(w.split) == {"solve_p", "solve_U"} and w.iters["p_iters"] > 0
    assert one["counts"]["busiest"]["messages"] == 0  # one rank sends nothing
    built = PR.run_mesh(path, w, print)
    assert built is not None  # the real partition, not a process grid
    hs = PR.partition_halos(built, w, list(RANKS), print)
    net = M.network("infiniband-fdr")
    rows = {r["ranks"]: r for r in M.summary(M.sweep(w, hs, net, net, 4))["rows"]}
    bad = []
    for n in RANKS:
        prof = _run(haloflow_mpi, n, tmp_path / f"n{n}")
        assert prof["ranks"] == n
        # predict.json's rows: the model's counts at the calibration's iterations
        at_profile = M.counts(w, hs[n])
        assert {k: rows[n][k] for k in at_profile} == at_profile
        assert rows[n]["level_ranks"] == [n] * len(prof["amg"]["levels"])
        for k, (meas, model) in compare(w, hs[n], prof).items():
            print(f"{n} ranks {k}: measured {meas:.1f}, model {model:.1f}")
            if abs(model - meas) > 0.05 * meas:
                bad.append(f"{n} ranks, {k} per step: measured {meas:.1f}, model {model:.1f}")
    # the coarse level on 4 of 16 ranks (``solver.pressure.agglomerate``): the model's
    # leaders and their merged halos count what the run sends.  On RCB's parts: the model
    # sizes an agglomerated level's messages from the fine faces between the merged groups,
    # within 5 % there; on the grid's slabs of this box the bytes come out 6.7 % low
    prof = _run(haloflow_mpi, 16, tmp_path / "agglomerated", "--set",
                f"solver.pressure.agglomerate={AGGLOMERATE}", "--set",
                "parallel.decomposition=rcb")
    mesh = built[0]
    ni = mesh.n_internal
    rcb = M.halo_of_partition(mesh.owner[:ni], mesh.neighbour, decompose(mesh, 16, "rcb"), 16)
    wa = replace(w, agglomerate=AGGLOMERATE)
    modelled = M.counts(wa, rcb, per_node=16)["level_ranks"]
    assert [lv["ranks"] for lv in prof["amg"]["levels"]] == modelled == [16, 4, 16]
    for k, (meas, model) in compare(wa, rcb, prof).items():
        print(f"16 ranks, agglomerated, {k}: measured {meas:.1f}, model {model:.1f}")
        if abs(model - meas) > 0.05 * meas:
            bad.append(f"16 ranks agglomerated, {k}: measured {meas:.1f}, model {model:.1f}")
    assert not bad, "; ".join(bad)
