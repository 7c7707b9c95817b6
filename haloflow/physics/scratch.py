"""Scratch arrays of one rank's step, shared by the equations that take turns with them.

The momentum and pressure equations assemble one after the other and copy their
coefficients into their own matrices, so one set of cell and face arrays serves both (and
the step's monitor): about 7 doubles per cell less than a set each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Scratch:
    diag: np.ndarray  # (n_cells,) matrix diagonal being assembled
    lower: np.ndarray  # (n_internal,) neighbour coefficients being assembled
    upper: np.ndarray  # (n_internal,)
    rhs: np.ndarray  # (n_cells,) right-hand side of the solve in progress
    work: np.ndarray  # (n_cells,) products and sums within one kernel call

    @classmethod
    def of(cls, lmesh) -> Scratch:
        n, ni = lmesh.n_cells, lmesh.n_internal
        return cls(np.zeros(n), np.zeros(ni), np.zeros(ni), np.zeros(n), np.zeros(n))
