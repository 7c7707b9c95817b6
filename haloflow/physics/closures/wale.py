"""WALE (Nicoud and Ducros 1999): an eddy viscosity that vanishes in pure shear and at walls.

With ``g`` the velocity gradient, ``D`` its symmetric part and ``Sd = dev(symm(g g))``,
``nut = (Cw Delta)^2 (Sd:Sd)^(3/2) / ((D:D)^(5/2) + (Sd:Sd)^(5/4))`` (``Cw`` 0.325), written
as OpenFOAM does through an SGS energy ``k = (Cw^2 Delta / Ck)^2 (Sd:Sd)^3 / (...)^2`` and
``nut = Ck Delta sqrt(k)``, so ``Ck`` only scales the reported ``k``.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .eddy import EddyViscosity


@nb.njit(cache=True)
def wale_nut(g, delta, ck, cw, n, g2, k, nut):
    """``k`` and ``nut`` of the owned cells ``0..n-1`` (zero where the velocity is uniform;
    ``g2``: a 3 x 3 work array)."""
    for c in range(n):
        for i in range(3):
            for j in range(3):
                s = 0.0
                for m in range(3):
                    s += g[i, m, c] * g[m, j, c]
                g2[i, j] = s
        tr = (g2[0, 0] + g2[1, 1] + g2[2, 2]) / 3.0
        sd2 = 0.0
        dd = 0.0
        for i in range(3):
            for j in range(3):
                sd = 0.5 * (g2[i, j] + g2[j, i]) - (tr if i == j else 0.0)
                sd2 += sd * sd
                s = 0.5 * (g[i, j, c] + g[j, i, c])
                dd += s * s
        den = dd ** 2.5 + sd2 ** 1.25
        if sd2 <= 0.0 or den <= 0.0:
            k[c] = 0.0
            nut[c] = 0.0
            continue
        a = cw * cw * delta[c]
        nut[c] = a * delta[c] * sd2 ** 1.5 / den
        k[c] = (a / ck) ** 2 * sd2 ** 3 / (den * den)


class WALE(EddyViscosity):
    """Wall-adapting local eddy viscosity; ``physics.Cw``."""

    name = "wale"

    def __init__(self, lmesh, physics, ctx):
        super().__init__(lmesh, physics, ctx)
        self.Cw = float(physics.Cw)
        self.g2 = np.zeros((3, 3))

    def eddy(self, flow) -> None:
        with self.ctx.timers("fluxes"):
            wale_nut(self.gradU, self.delta, self.Ck, self.Cw, self.lm.n_owned, self.g2,
                     self.k, self.nut)
