"""A coarse pitzdaily_les for tests: the case's own blockMeshDict with fewer cells (3 across
the span, the fewest a periodic pair allows, and a third or less of the streamwise cells;
6084 cells), written to a folder of the caller's (every rank its own)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from haloflow.case import load_case

DICT = Path(__file__).resolve().parents[1] / "haloflow" / "cases" / "pitzdaily_les" / \
    "blockMeshDict"
COARSE = {"(18 30 20)": "(3 30 3)", "(180 27 20)": "(30 27 3)", "(180 30 20)": "(30 30 3)",
          "(25 27 20)": "(4 27 3)", "(25 30 20)": "(4 30 3)"}
CELLS = (3 * 30 + 30 * 27 + 30 * 30 + 4 * 27 + 4 * 30) * 3
# serial and parallel runs compared to 1e-8: every linear solve to round-off
TIGHT = ["solver.pressure.tol=1e-12", "solver.pressure.rel_tol=0", "solver.momentum.tol=1e-12"]

# kEqn on the coarse case, 4 steps, every solve to round-off (TIGHT): volume means of k and
# nut, the largest nut, as `.venv/bin/python -c "from tests.unit.test_pitzdaily_les import
# keqn_statistics as f; print(f()[0])"` prints them; serial and 3-rank runs agree to 1e-8
# (tests/mpi/test_pitzdaily_les_mpi.py, which checks these too), so 1e-6 is round-off's margin.
# Measured: Ck 1 % high moves them by 1.8-2.0 %, Ce 1 % high by 5e-6 to 1.3e-5, nu 20 % high
# by 6e-4 to 5e-3: all outside the band.
KEQN_REFERENCE = (7.359220271425e-04, 2.865768310060e-07, 3.025822720735e-04)


def coarse_dict(folder: Path | None = None) -> Path:
    """The coarse blockMeshDict, in ``folder`` (default: a new temporary one)."""
    text = DICT.read_text()
    for full, few in COARSE.items():
        assert full in text, full
        text = text.replace(full, few)
    folder = Path(tempfile.mkdtemp(prefix="pitzdaily-les-")) if folder is None else folder
    path = folder / "blockMeshDict"
    path.write_text(text)
    return path


def coarse_case(extra=(), folder: Path | None = None):
    """pitzdaily_les on the coarse mesh, dt 2e-5 (Courant number about 0.5)."""
    return load_case("pitzdaily_les", [f'mesh.file="{coarse_dict(folder)}"', "solver.dt=2e-5",
                                       *extra])
