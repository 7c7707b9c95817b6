"""Inlet velocity profiles from a table: a CSV file of velocity against one coordinate.

The file's header names the coordinate and the three velocity components,
``y,Ux,Uy,Uz`` (the coordinate is ``x``, ``y`` or ``z``); ``#`` starts a comment; the
coordinates must increase from row to row.  A face gets the velocity linearly interpolated
at its centre's coordinate, so a measured or computed profile (a developed duct flow, a
boundary layer) can drive an inlet.  The file is read when the case is checked, so a bad
table stops the run before it starts, with the file and line.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

AXES = ("x", "y", "z")
COMPONENTS = ("Ux", "Uy", "Uz")


class TableError(ValueError):
    """The table cannot be used; the message names the file and, where it can, the line."""


@dataclass
class ProfileTable:
    axis: int  # 0, 1, 2: the coordinate the velocity varies with
    coord: np.ndarray  # (n,) increasing
    U: np.ndarray  # (n, 3)

    def at(self, s: np.ndarray, what: str) -> np.ndarray:
        """Velocity at coordinates ``s``; ``what`` names the patch in the error raised when
        ``s`` leaves the table's range (by more than 1e-6 of it)."""
        lo, hi = self.coord[0], self.coord[-1]
        tol = 1e-6 * (hi - lo)
        if len(s) and (s.min() < lo - tol or s.max() > hi + tol):
            raise TableError(f"{what}: the table covers {AXES[self.axis]} from {lo:g} to "
                             f"{hi:g}, but the patch's faces reach {s.min():g} to {s.max():g}; "
                             "extend the table to the patch's edges")
        return np.stack([np.interp(s, self.coord, self.U[:, d]) for d in range(3)], axis=1)


def read_table(path: str | Path) -> ProfileTable:
    """Read and check a profile table (see the module docstring for the format)."""
    from .. import limits
    from .netpipe_file import read_small_text

    p = Path(path)
    # a regular file of at most the ceiling: /dev/zero or a huge file is never read through
    text = read_small_text(p, TableError, limits.MAX_TABLE_BYTES)
    rows = [(i + 1, line.split("#", 1)[0].strip()) for i, line in enumerate(text.splitlines())]
    rows = [(n, line) for n, line in rows if line]
    if not rows:
        raise TableError(f"{p}: empty; expected a header such as 'y,Ux,Uy,Uz' and rows")
    n0, head = rows[0]
    names = [h.strip() for h in next(csv.reader([head]))]
    if len(names) != 4 or names[0] not in AXES or tuple(names[1:]) != COMPONENTS:
        raise TableError(f"{p}: line {n0}: header {head!r}: expected the coordinate (x, y or "
                         "z) and Ux,Uy,Uz, e.g. 'y,Ux,Uy,Uz'")
    data = []
    for n, line in rows[1:]:
        cells = [c.strip() for c in next(csv.reader([line]))]
        if len(cells) != 4:
            raise TableError(f"{p}: line {n}: {len(cells)} values, expected 4 "
                             f"({', '.join(names)})")
        try:
            vals = [float(c) for c in cells]
        except ValueError:
            raise TableError(f"{p}: line {n}: {line!r} is not four numbers") from None
        if not all(math.isfinite(v) for v in vals):
            raise TableError(f"{p}: line {n}: values must be finite")
        if data and vals[0] <= data[-1][1][0]:
            raise TableError(f"{p}: line {n}: {names[0]} = {vals[0]:g} does not increase "
                             f"(the row before has {data[-1][1][0]:g})")
        data.append((n, vals))
    if len(data) < 2:
        raise TableError(f"{p}: {len(data)} rows; a profile needs at least 2")
    arr = np.array([v for _, v in data])
    return ProfileTable(AXES.index(names[0]), arr[:, 0].copy(), arr[:, 1:].copy())

