"""Thin MPI helpers: the world communicator and 'one rank fails, the whole job ends'."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import traceback
from contextlib import contextmanager


class UserError(Exception):
    """A problem the user can fix (bad input, divergence); reported in one line."""

    exit_code = 2


def get_comm():
    from mpi4py import MPI

    return MPI.COMM_WORLD


def one_line(msg: str) -> str:
    """``msg`` as one line of plain text: newlines, terminal escapes and other control
    characters from user input (a key, a patch or file name) are written as escapes."""
    msg = msg.rstrip()
    if msg.isprintable():
        return msg
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in msg)


def _say(msg: str) -> None:
    sys.stderr.write(one_line(msg) + "\n")
    sys.stderr.flush()


def _abort(comm, code: int) -> None:
    """``MPI_Abort`` after this rank's one line: MPICH's own report of the abort
    (``Abort(2) on node 1 ...``; ``MPIR_CVAR_SUPPRESS_ABORT_MESSAGE`` only empties its
    text) would be a second line, so this process's stderr is closed to it first."""
    sys.stderr.flush()
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)
    except OSError:
        pass
    comm.Abort(code)


@contextmanager
def fail_fast(comm, collective_errors=(UserError,)):
    """Turn any exception into a one-line message and a non-zero exit of the whole job.

    Errors that every rank raises together (``collective_errors``: bad case file, divergence
    detected through an allreduce) are printed once by rank 0 and exit cleanly with their
    code.  Anything else may have happened on one rank only while the others wait in a
    collective, so that rank prints its message and calls ``MPI_Abort``, which ends every
    rank at once instead of leaving them to hang; that one line is all the job prints.
    """
    try:
        yield
    except collective_errors as e:
        code = getattr(e, "exit_code", 2)
        if not getattr(e, "collective", True) and comm.size > 1:  # this rank's alone
            _say(f"haloflow: error on rank {comm.rank}: {e}")
            _abort(comm, code)
        if comm.rank == 0:
            _say(f"haloflow: error: {e}")
        sys.exit(code)
    except KeyboardInterrupt:
        _say(f"haloflow: interrupted on rank {comm.rank}")
        if comm.size > 1:
            _abort(comm, 130)
        sys.exit(130)
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - report anything, then end every rank
        where = f" on rank {comm.rank}" if comm.size > 1 else ""
        _say(f"haloflow: error{where}: {type(e).__name__}: {e}")
        if os.environ.get("HALOFLOW_TRACEBACK"):
            traceback.print_exc()
        if comm.size > 1:
            _abort(comm, 1)
        sys.exit(1)


def _libmpi_path() -> str | None:
    """The MPI library mpi4py loaded (the same one, also when it was opened by path)."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            for line in f:
                path = line.split()[-1]
                if os.path.basename(path).startswith("libmpi.so"):
                    return path
    except OSError:
        pass
    return ctypes.util.find_library("mpi")


def libmpi() -> ctypes.CDLL | None:
    """The MPI library mpi4py loaded, opened with ctypes (None where it cannot be found)."""
    from mpi4py import MPI

    path = _libmpi_path()
    try:
        return ctypes.CDLL(path) if path else ctypes.CDLL(MPI.__file__)
    except OSError:
        return None
