"""Run a script or ``-m module`` on the ranks of an MPI job, then check the job's size.

``python launch.py N script args...`` or ``python launch.py N -m module args...``.  The
wrong launcher starts N separate 1-rank jobs that would each pass a serial check; here every
rank compares ``COMM_WORLD.size`` with N once the target has run (so that a target choosing
its own MPI thread level initialises MPI itself) and exits with status 3 if they differ.
"""

from __future__ import annotations

import os
import runpy
import sys


def _check_size(want: int) -> None:
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized():
        return  # the target ended before it used MPI: its own exit status tells
    size = mpi.COMM_WORLD.size
    if size != want:
        sys.stderr.write(f"launch.py: the job has {size} rank(s), {want} were launched "
                         "(wrong mpiexec?)\n")
        sys.stderr.flush()
        os._exit(3)


def main() -> None:
    want, target, rest = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    try:
        if target == "-m":
            sys.argv = [rest[0], *rest[1:]]
            runpy.run_module(rest[0], run_name="__main__", alter_sys=True)
        else:
            sys.argv = [target, *rest]
            runpy.run_path(target, run_name="__main__")
    finally:
        _check_size(want)


if __name__ == "__main__":
    main()
