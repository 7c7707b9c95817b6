"""What the benchmark scripts share: where the checkout, its results and the venv's tools
are, and waiting for a quiet machine before a timed run.

Run a script as ``.venv/bin/python benchmarks/NAME.py``: Python puts this folder first on the
module path, so ``import _common`` and the scripts' imports of each other need no path edits.
A haloflow that is installed or on ``PYTHONPATH`` is the one measured (a before/after run
with ``PYTHONPATH=<other tree>`` times that tree); only where none is importable (a bare
machine running ``python3 benchmarks/gpu.py`` from a checkout) does importing this module
add the checkout's own.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
BIN = Path(sys.executable).parent  # the venv's mpiexec and haloflow, beside its python

if importlib.util.find_spec("haloflow") is None:
    sys.path.append(str(REPO))


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


def read_fields(outdir: Path, name: str = "cavity") -> dict:
    """A run's fields read back from its ``.vtu`` pieces, every array in global cell order."""
    import meshio
    import numpy as np

    pieces = sorted((Path(outdir) / "fields").glob(f"{name}_*.vtu"))
    if not pieces:
        raise SystemExit(f"no field pieces in {outdir}/fields")
    data: dict[str, list] = {}
    for piece in pieces:
        for k, v in meshio.read(piece).cell_data.items():
            data.setdefault(k, []).append(np.concatenate(v))
    out = {k: np.concatenate(v) for k, v in data.items()}
    order = np.argsort(out["cell_id"])
    if not np.array_equal(out["cell_id"][order], np.arange(len(order))):
        raise SystemExit(f"{outdir}: cells missing or written twice")
    return {k: v[order] for k, v in out.items()}
