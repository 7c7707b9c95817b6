"""Run ``python -m haloflow`` in a subprocess under a memory limit and a timeout.

Bad input must end in one line and exit 2, never in a traceback, a hang or an allocation of
gigabytes: the address-space limit (``RLIMIT_AS``) turns such an allocation into a
MemoryError, which the tests then see as a failure (exit 1, "MemoryError"), and the timeout
turns a hang into one.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MEMORY = 1536 << 20  # bytes: a run on a tiny mesh needs well under this (numba included)


def haloflow(*args, memory: int = MEMORY, timeout: float = 120, cwd=None, env=None):
    """``haloflow ARGS`` -> CompletedProcess; a run past ``timeout`` s fails the test."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
        "NUMBA_NUM_THREADS": "1", **(env or {})}
    full_env.pop("HALOFLOW_TRACEBACK", None)
    return subprocess.run([sys.executable, "-m", "haloflow", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env=full_env, preexec_fn=limit)


def one_line(res, code: int = 2) -> str:
    """The single stderr line of a run that must exit with ``code``."""
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == code and len(lines) == 1 and "Traceback" not in res.stderr, (
        f"exit {res.returncode}, expected {code} and one line\n--- stderr ---\n{res.stderr}")
    assert lines[0].isprintable(), lines[0]
    return lines[0]
