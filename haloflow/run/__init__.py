"""One run, from a validated Case to the files in its output directory.

Rank 0 builds and partitions the global mesh and scatters the LocalMeshes; every rank then
steps the solver; rank 0 alone logs, shows progress and writes the run-level files, while
the field files are written by every rank for its own cells.  The steps, one module each:
:mod:`.outdir` (where), :mod:`.setup` (mesh to solver), :mod:`.loop` (the steps) and
:mod:`.report` (what is left behind); the post-processors come from :mod:`haloflow.post`.
"""

from __future__ import annotations

import time
from pathlib import Path

from ..mpiutil import UserError


class RunError(UserError):
    """The run cannot start or go on (bad output directory, too many threads)."""


class DivergedError(UserError):
    """The solution blew up; every rank detects it in the same allreduce."""

    exit_code = 3


class Interrupted(UserError):
    """A signal stopped the run after a step; its checkpoint and results are written.  The
    exit code is the shell's for that signal (130 for SIGINT, 143 for SIGTERM)."""

    def __init__(self, msg: str, signum: int):
        super().__init__(msg)
        self.exit_code = 128 + signum


def run_case(case, outdir: Path, comm, threads: int = 1, force: bool = False,
             quiet: bool = False, restart: str | None = None,
             decomposed: Path | None = None) -> dict:
    """Run ``case`` on ``comm``; returns the summary dict on rank 0 ({} elsewhere).
    ``restart``: a checkpoint file to go on from (the case must be the one it was
    written by: :func:`haloflow.io.checkpoint.case_hash`).  ``decomposed``: the folder of
    ``haloflow decompose`` whose parts the ranks read (the mesh is not built)."""
    from .setup import check_ranks, set_threads, setup

    t_start = time.perf_counter()
    check_ranks(case, comm.size)
    # before the solvers' modules load OpenMP, which reads its wait policy once, at its start
    wait_policy = set_threads(threads, case.parallel.thread_wait, comm)

    from ..io.checkpoint import CheckpointError
    from .loop import run_loop
    from .memory import return_freed_arrays
    from .outdir import discard, open_outdir, record, release, write_error
    from .report import Log, finish, log_setup, write_results

    return_freed_arrays()
    root = comm.rank == 0
    made = open_outdir(outdir, force, comm)
    refused = False  # a restart its checkpoint refuses leaves no folder behind
    try:
        log = Log(outdir / "log.txt" if root else None, quiet=quiet or not root)
        if root:
            (outdir / "case.toml").write_text(case.to_toml(), encoding="utf-8")
            record(outdir)  # a run that dies early still leaves a folder --force may replace
        run = setup(case, comm, threads, log, decomposed)
        run.wait_policy = wait_policy
        log_setup(run, outdir, log)
        try:
            start = _restore(run, restart, log) if restart else 0
        except CheckpointError:
            refused = True
            log.close()
            raise
        try:
            loop = run_loop(run, log, quiet, outdir, start)
        except DivergedError as e:
            if root:
                _diverged_summary(outdir, case, str(e))
            raise
        if loop.timeline is not None:
            loop.timeline.write(outdir)
        entries = write_results(run, outdir)
        summary = finish(run, loop, entries, outdir, log, t_start, restart)
        if loop.status == "interrupted":
            import signal

            raise Interrupted(f"interrupted by {loop.signal} after step {loop.last_step}; "
                              f"restart with: haloflow run --restart {outdir}",
                              int(signal.Signals[loop.signal]))
        return summary
    except OSError as e:  # a full disk or a read-only folder: one line, exit 2
        raise write_error(e, outdir) from None
    finally:
        if root and refused:
            discard(outdir, made)
        elif root:
            record(outdir)
            release(outdir)


def _restore(run, path: str, log) -> int:
    """Collective: the solver's state from checkpoint ``path``; the step it was written
    after (the new run goes on from there)."""
    from .checkpointing import read_checked, restore

    lm = run.lmesh
    ck = read_checked(path, run.case, run.comm, lm.n_cells_global, lm.n_faces_global)
    with run.timers("setup"):
        restore(run, ck)
    log(f"restarted from {path}: step {ck.step}, t = {ck.time:.6g}")
    return ck.step


def _diverged_summary(outdir: Path, case, why: str) -> None:
    """Rank 0: summary.json of a run that blew up, so its folder never looks complete; the
    checkpoints and field series it wrote before stay."""
    import json

    from ..io.checkpoint import list_checkpoints
    from .checkpointing import FOLDER

    found = list_checkpoints(str(outdir / FOLDER))
    summary = {"case": case.name, "status": "diverged", "message": why,
               "last_checkpoint": found[-1] if found else None}
    with open(outdir / "summary.json", "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)


__all__ = ["DivergedError", "Interrupted", "RunError", "run_case"]
