"""What the benchmarks against OpenFOAM share: finding it, running its tools, their options.

Imported by the scripts that race OpenFOAM (race.py, pitzdaily.py, pitzdaily_les.py, tgv.py,
cylinder_openfoam.py); the quiet-machine helpers are in _common.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

BASHRCS = ("/usr/share/openfoam/etc/bashrc", "/usr/lib/openfoam/openfoam/etc/bashrc")
HEAD = "FoamFile {{ version 2.0; format ascii; class {cls}; object {obj}; }}\n"


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
