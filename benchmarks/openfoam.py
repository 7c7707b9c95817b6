"""What the benchmarks against OpenFOAM share: finding it, running its tools, a quiet machine.

Imported by pitzdaily.py, cylinder_openfoam.py and race.py (run as scripts from this folder).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

BASHRCS = ("/usr/share/openfoam/etc/bashrc", "/usr/lib/openfoam/openfoam/etc/bashrc")
HEAD = "FoamFile {{ version 2.0; format ascii; class {cls}; object {obj}; }}\n"


# -- a quiet machine ---------------------------------------------------------------------------

def busy(dt: float = 1.0) -> float | None:
    """Fraction of all cores busy over ``dt`` seconds (/proc/stat), None where unknown."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]  # total, idle + iowait

    try:
        t0, i0 = sample()
        time.sleep(dt)
        t1, i1 = sample()
    except OSError:
        return None
    return 1.0 - (i1 - i0) / max(t1 - t0, 1)


def wait_quiet(threshold: float, limit: float) -> float | None:
    """Wait (up to ``limit`` s) until other jobs use less than ``threshold`` of the cores;
    the busy fraction last seen."""
    end = time.monotonic() + limit
    b = busy()
    while b is not None and b > threshold and time.monotonic() < end:
        b = busy()
    return b


# -- OpenFOAM ----------------------------------------------------------------------------------

def add_side_by_side_options(ap) -> None:
    """The options every haloflow-against-OpenFOAM benchmark takes: rank counts, repeats,
    haloflow overrides, and how long to wait for idle cores before each run."""
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-openfoam", action="store_true", help="haloflow only")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a key of the haloflow case (repeatable)")
    ap.add_argument("--quiet-below", type=float, default=0.15, metavar="F",
                    help="before each run wait until less than this fraction of the cores "
                         "is busy (other users' jobs), at most --quiet-wait s")
    ap.add_argument("--quiet-wait", type=float, default=120.0, metavar="S")


def foam_env() -> str | None:
    """A shell prefix that puts OpenFOAM on the path, or None when it is not installed."""
    if os.environ.get("WM_PROJECT_DIR") and shutil.which("simpleFoam"):
        return ""
    for rc in (os.environ.get("FOAM_BASHRC"), *BASHRCS):
        if rc and Path(rc).is_file():
            return f"set +u; source {rc} >/dev/null 2>&1; "
    return None


def run_foam(env: str, case: Path, cmd: str, log: Path) -> float:
    """Run an OpenFOAM command line in ``case`` with its output in ``log``; the wall seconds.
    A failure stops the benchmark with the end of the log."""
    t = time.perf_counter()
    res = subprocess.run(["bash", "-c", f"{env}cd {case} && {cmd} > {log} 2>&1"],
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    wall = time.perf_counter() - t
    if res.returncode:
        raise SystemExit(f"{cmd} failed in {case}: see the end of {log}:\n"
                         + "\n".join(log.read_text().splitlines()[-15:]))
    return wall


def mpirun_command() -> str:
    """OpenFOAM's own mpirun; Open MPI refuses root and more ranks than cores without flags."""
    try:
        v = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout
    except OSError:
        return "mpirun"
    return "mpirun --allow-run-as-root --oversubscribe" if "Open MPI" in v else "mpirun"
