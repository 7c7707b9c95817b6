"""Laminar flow: the molecular viscosity on every face, no fields of its own."""

from __future__ import annotations

import numpy as np


class Laminar:
    """``nu_face = nu`` everywhere, filled once."""

    name = "laminar"
    ghosts = ()

    def __init__(self, lmesh, physics, ctx=None):
        self.nu = float(physics.nu)
        self.nu_face = np.full(lmesh.n_faces, self.nu)

    def start(self, flow) -> None:
        """Nothing to start from."""

    def solve(self, flow) -> None:
        """Nothing to solve: the viscosity is a constant."""

    def refresh(self) -> None:
        """Nothing to rebuild."""

    def take_pending(self) -> tuple:
        """No ghost rows to carry."""
        return ()
