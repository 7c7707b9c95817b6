"""The Smagorinsky model as OpenFOAM writes it: the SGS energy in local equilibrium.

Production ``2 nut devD:D`` balances dissipation ``Ce k^1.5 / Delta`` with
``nut = Ck Delta sqrt(k)``, so ``k = 2 Ck/Ce Delta^2 devD:D`` (incompressible) and
``nut = Ck Delta sqrt(k)``.  The keys are ``Ck`` (0.094) and ``Ce`` (1.048); the classical
constant follows, ``Cs^2 = Ck sqrt(Ck/Ce)`` with ``nut = (Cs Delta)^2 sqrt(2 D:D)``:
Cs = 0.167 for the defaults.
"""

from __future__ import annotations

import math

import numba as nb

from .eddy import EddyViscosity, strain_invariants


@nb.njit(cache=True)
def smagorinsky_nut(gradU, delta, ck, ce, n, k, nut):
    """``k`` and ``nut`` of the owned cells ``0..n-1``."""
    for c in range(n):
        dd, _ = strain_invariants(gradU, c)
        kc = max(2.0 * ck / ce * delta[c] * delta[c] * dd, 0.0)
        k[c] = kc
        nut[c] = ck * delta[c] * math.sqrt(kc)


class Smagorinsky(EddyViscosity):
    """``nut = Ck Delta sqrt(2 Ck/Ce Delta^2 devD:D)``."""

    name = "smagorinsky"

    def eddy(self, flow) -> None:
        with self.ctx.timers("fluxes"):
            smagorinsky_nut(self.gradU, self.delta, self.Ck, self.Ce, self.lm.n_owned, self.k,
                            self.nut)
