"""The tracing library, compiled on first use with the target MPI's compiler wrapper into a
per-user cache folder (one build per source text and compiler), so that it is linked to the
same libmpi as the traced program: the MPICH wheel's ``mpicc`` beside this Python for haloflow
and mpi4py programs, Open MPI's ``mpicc`` (Debian: ``libopenmpi-dev``) for OpenFOAM."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from . import TraceError

SOURCE = Path(__file__).with_name("pmpi_trace.c")


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "haloflow" / "pmpi_trace"


def find_mpicc(given: str | None = None) -> str:
    """The MPI compiler wrapper: the one given, else the MPICH wheel's beside this Python,
    else ``mpicc`` on PATH."""
    if given:
        path = shutil.which(given)
        if path is None:
            raise TraceError(f"--mpicc {given}: no such compiler wrapper")
        return path
    venv = Path(sys.executable).parent / "mpicc"
    if venv.exists():
        return str(venv)
    path = shutil.which("mpicc")
    if path is None:
        raise TraceError("no MPI compiler wrapper: neither the MPICH wheel's mpicc beside "
                         f"{sys.executable} nor mpicc on PATH (for Open MPI: apt-get install "
                         "libopenmpi-dev); give one with --mpicc")
    return path


def library(mpicc: str | None = None) -> Path:
    """The compiled library for ``mpicc`` (found as ``find_mpicc`` does), built now if the
    cache has none for this source and compiler."""
    cc = find_mpicc(mpicc)
    source = SOURCE.read_bytes()
    tag = hashlib.sha256(source + os.path.realpath(cc).encode()).hexdigest()[:16]
    out = cache_dir() / f"libpmpi_trace-{tag}.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    cmd = [cc, "-O2", "-fPIC", "-shared", "-o", str(tmp), str(SOURCE), "-lz"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except OSError as e:
        raise TraceError(f"cannot run the MPI compiler wrapper {cc} ({e.strerror})") from None
    if r.returncode != 0 or not tmp.exists():
        first = next((ln for ln in r.stderr.splitlines() if "error" in ln),
                     (r.stderr.strip().splitlines() or ["no output"])[-1])
        tmp.unlink(missing_ok=True)
        raise TraceError(f"{cc} could not build the tracing library ({first.strip()}); "
                         "it needs the MPI headers and zlib (apt-get install zlib1g-dev)")
    os.replace(tmp, out)
    return out
