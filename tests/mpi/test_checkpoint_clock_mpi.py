"""Checkpoints by wall-clock time (``output.checkpoint_every_s``) on 2 ranks: rank 0's clock
decides and every rank writes the same checkpoints with it, one file each, readable, of the
step its name says."""

from __future__ import annotations

import json

import pytest
from mpi4py import MPI

from haloflow.io.checkpoint import list_checkpoints, read_arrays

CAVITY = ["--set", "mesh.cells=[12,12,1]", "--set", "solver.dt=0.01", "--quiet",
          "--set", "output.plots=false", "--set", "output.fields=false",
          "--set", "postprocess.cavity=false", "--set", "output.checkpoint_keep=100"]


def _steps(folder) -> list[int]:
    """The step of each checkpoint file in ``folder``, checked against its contents."""
    steps = []
    for path in list_checkpoints(str(folder)):
        ck, arrays = read_arrays(path)  # every field against its checksum
        assert path.endswith(f"step-{ck.step:09d}.ckpt"), (path, ck.step)
        assert ck.time == pytest.approx(0.01 * ck.step, rel=1e-12)
        assert ck.n_cells == 144 and arrays["U"].shape == (3, 144)
        steps.append(ck.step)
    return steps


@pytest.mark.mpi
@pytest.mark.parametrize("every_s, want", [("1e-9", [1, 2, 3, 4, 5]), ("1e6", [5])])
def test_checkpoint_every_s_on_two_ranks(haloflow_mpi, tmp_path, every_s, want):
    """An interval shorter than any step: a checkpoint after every step; longer than the
    run: only the one at its end (checkpoint_every is 0 in both)."""
    out = tmp_path / "run"
    res = haloflow_mpi(2, "run", "cavity", "-o", str(out), *CAVITY, "--steps", "5",
                       "--set", f"output.checkpoint_every_s={every_s}", timeout=180)
    assert res.returncode == 0, res.stderr
    assert _steps(out / "checkpoint") == want
    s = json.loads((out / "summary.json").read_text())
    assert s["ranks"] == 2 and s["checkpoints_written"] == len(want)
    assert s["last_checkpoint"].endswith("step-000000005.ckpt")


@pytest.mark.parallel(ranks=[2], timeout=180)
def test_the_ranks_follow_rank_0s_clock(nranks, tmp_path, monkeypatch):
    """Each rank's clock advances at each reading, rank 0's by 1 s and rank 1's by 100 s,
    with ``checkpoint_every_s = 2.5``: by rank 0's clock one is due at steps 3 (t = 3 since
    0) and 6 (t = 7 since 4, the reading at the write after step 3), then the run's end at
    8; a rank that went by its own clock would write after every step and leave the other
    waiting in the write's collectives."""
    from haloflow.case import load_case
    from haloflow.run import schedule
    from haloflow.run.loop import run_loop
    from haloflow.run.setup import setup

    comm = MPI.COMM_WORLD
    tick = 1.0 if comm.rank == 0 else 100.0

    class Ticking(schedule.Schedule):
        def __init__(self, output, red, start_step=0):
            readings = iter(range(10**6))
            super().__init__(output, red, start_step, clock=lambda: tick * next(readings))

    monkeypatch.setattr(schedule, "Schedule", Ticking)
    out = comm.bcast(str(tmp_path), root=0)
    case = load_case("cavity", ["mesh.cells=[12,12,1]", "solver.dt=0.01", "solver.max_steps=8",
                                "output.plots=false", "postprocess.cavity=false",
                                "output.checkpoint_every_s=2.5", "output.checkpoint_keep=100"])
    run = setup(case, comm, 1, lambda *a: None)
    try:
        loop = run_loop(run, lambda *a: None, True, outdir=out)
    finally:
        for e in run.exchangers():
            e.close()
    got = comm.allgather((loop.checkpoints, loop.checkpoint))
    assert got[0] == got[1] and got[0][0] == 3, got
    comm.Barrier()
    assert _steps(f"{out}/checkpoint") == [3, 6, 8]
