"""Laminar flow: the molecular viscosity on every face, no fields of its own."""

from __future__ import annotations

import numpy as np


class Laminar:
    """``nu_face = nu`` everywhere: one entry, which the momentum kernels read for every
    face (a per-face copy of one number costs 24 bytes per cell of a 3D mesh)."""

    name = "laminar"
    ghosts = ()

    def __init__(self, lmesh, physics, ctx=None):
        self.nu = float(physics.nu)
        self.nu_face = np.full(1, self.nu)

    def start(self, flow) -> None:
        """Nothing to start from."""

    def solve(self, flow) -> None:
        """Nothing to solve: the viscosity is a constant."""

    def refresh(self) -> None:
        """Nothing to rebuild."""

    def take_pending(self) -> tuple:
        """No ghost rows to carry."""
        return ()
