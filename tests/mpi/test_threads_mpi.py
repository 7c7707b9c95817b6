"""Ranks x threads under real ``mpiexec``: 2 ranks x 2 threads reproduce one rank's run."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tests.fieldio import read_fields
from tests.mpi.conftest import require_mpiexec, run_mpi

CAVITY_3D = ["--set", "mesh.cells=[12,12,12]", "--set", "boundary.front.type=wall",
             "--set", "boundary.back.type=wall", "--set", "solver.dt=0.05",
             "--set", "output.plots=false", "--set", "postprocess.cavity=false",
             "--steps", "10", "--quiet"]


@pytest.mark.mpi
def test_2_ranks_x_2_threads_equal_serial(tmp_path):
    """The 3D cavity on 2 ranks x 2 threads (thresholds lowered to 1 row, so that every
    AMG level but the coarsest and the momentum solve run on thread blocks, and their
    compiled solves exchange halos from compiled code) against 1 rank x 1 thread: U and p
    equal to the solver tolerance, the same pressure iterations within one per solve."""
    exe = require_mpiexec()
    runs = {}
    for ranks, nthreads in ((1, 1), (2, 2)):
        out = tmp_path / f"r{ranks}t{nthreads}"
        auto = ["--set", 'parallel.thread_wait="auto"'] if nthreads > 1 else []
        res = run_mpi(exe, ranks, "-m", "haloflow", "run", "cavity", "-o", str(out),
                      "--threads", str(nthreads), *CAVITY_3D, *auto, timeout=180,
                      env={"NUMBA_NUM_THREADS": str(nthreads), "HALOFLOW_THREAD_MIN_ROWS": "1"})
        assert res.returncode == 0, f"--- stdout ---\n{res.stdout}\n--- stderr ---\n{res.stderr}"
        runs[ranks] = (read_fields(out), json.loads((out / "summary.json").read_text()),
                       json.loads((out / "profile.json").read_text()))
    (f1, s1, _), (f2, s2, p2) = runs[1], runs[2]
    assert (s2["ranks"], s2["threads"]) == (2, 2) and p2["threads"]["threaded"]
    assert p2["per_step"]["compiled_exchanges"] > 0  # the solves stayed compiled
    if "OMP_WAIT_POLICY" not in os.environ and hasattr(os, "sched_getaffinity"):
        # thread_wait "auto": 2 ranks x 2 threads spin briefly only where 4 cores are theirs
        fits = 4 <= len(os.sched_getaffinity(0))
        assert p2["threads"]["wait_policy"] == ("default" if fits else "passive")
    for k in ("U", "p"):
        scale = np.abs(f1[k]).max()
        assert scale > 0.1
        d = np.abs(f2[k] - f1[k]).max()
        assert d < 1e-7 * scale, f"max |d{k}| {d:.3g}"
    assert abs(s2["p_iters_mean"] - s1["p_iters_mean"]) <= 1.0
