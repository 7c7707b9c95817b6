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


def run_case(case, outdir: Path, comm, threads: int = 1, force: bool = False,
             quiet: bool = False) -> dict:
    """Run ``case`` on ``comm``; returns the summary dict on rank 0 ({} elsewhere)."""
    from .loop import run_loop
    from .memory import return_freed_arrays
    from .outdir import open_outdir, release, write_error
    from .report import Log, finish, log_setup, write_results
    from .setup import set_threads, setup

    t_start = time.perf_counter()
    return_freed_arrays()
    root = comm.rank == 0
    set_threads(threads)
    open_outdir(outdir, force, comm)
    try:
        log = Log(outdir / "log.txt" if root else None, quiet=quiet or not root)
        if root:
            (outdir / "case.toml").write_text(case.to_toml(), encoding="utf-8")
        run = setup(case, comm, threads, log)
        log_setup(run, outdir, log)
        loop = run_loop(run, log, quiet)
        entries = write_results(run, outdir)
        return finish(run, loop, entries, outdir, log, t_start)
    except OSError as e:  # a full disk or a read-only folder: one line, exit 2
        raise write_error(e, outdir) from None
    finally:
        if root:
            release(outdir)


__all__ = ["DivergedError", "RunError", "run_case"]
