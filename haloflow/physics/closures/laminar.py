"""Laminar flow: the molecular viscosity on every face, no fields of its own."""

from __future__ import annotations

import numpy as np


class Laminar:
    """``nu_face = nu`` everywhere, filled once."""

    name = "laminar"

    def __init__(self, lmesh, physics):
        self.nu = float(physics.nu)
        self.nu_face = np.full(lmesh.n_faces, self.nu)

    def solve(self, flow) -> None:
        """Nothing to solve: the viscosity is a constant."""
