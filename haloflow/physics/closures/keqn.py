"""The one-equation SGS model (Yoshizawa 1986; OpenFOAM's ``kEqn``): transported SGS energy.

``dk/dt + div(phi k) - div((nu + nut) grad k) = 2 nut devD:D - Ce k^1.5 / Delta`` with
``nut = Ck Delta sqrt(k)`` (``Ck`` 0.094, ``Ce`` 1.048): production explicit, dissipation
implicit as ``Sp = -Ce sqrt(k) / Delta``, k bounded below by zero after each solve.  k is a
:class:`~.transport.Transport` field: hybrid convection (upwind with ``solver.convection =
"upwind"``), the flow's time scheme, zero at walls, ``physics.k_inlet`` at inlets and on
inflow through outlets.  k starts at ``physics.k_init``, or where that is not given at the
local equilibrium of the initial velocity (the Smagorinsky model's k).  Its ghosts and
those of ``nut`` ride the next step's first pressure correction (see the closures package).
"""

from __future__ import annotations

import math

import numba as nb

from .eddy import EddyViscosity, strain_invariants
from .smagorinsky import smagorinsky_nut
from .transport import Transport, scalar_boundary


@nb.njit(cache=True)
def keqn_sources(gradU, delta, k, nut, ce, n, Sp, Su):
    """Production ``Su = 2 nut devD:D`` and dissipation ``Sp = -Ce sqrt(k) / Delta``."""
    for c in range(n):
        dd, _ = strain_invariants(gradU, c)
        Su[c] = 2.0 * nut[c] * max(dd, 0.0)
        Sp[c] = -ce * math.sqrt(max(k[c], 0.0)) / delta[c]


@nb.njit(cache=True)
def keqn_nut(k, delta, ck, n, nut):
    for c in range(n):
        nut[c] = ck * delta[c] * math.sqrt(max(k[c], 0.0))


class KEqn(EddyViscosity):
    """One-equation SGS energy model; ``physics.Ck``, ``Ce``, ``k_init``, ``k_inlet``."""

    name = "kEqn"

    def __init__(self, lmesh, physics, ctx):
        super().__init__(lmesh, physics, ctx)
        s = ctx.solver
        kind, value = scalar_boundary(lmesh, ctx.boundary, {"inlet": physics.k_inlet,
                                                           "outlet": physics.k_inlet})
        self.k_init = physics.k_init
        self.eq = Transport("k", lmesh, ctx.fc, ctx.pattern, ctx.exchanger, ctx.red,
                            ctx.workspace, ctx.scratch, ctx.timers, kind=kind, value=value,
                            convection="upwind" if s.convection == "upwind" else "hybrid",
                            time_scheme=s.time_scheme, steady=ctx.steady, settings=s.momentum,
                            lower_bound=0.0, gradient=ctx.gradient, nonorth=ctx.nonorth)
        self.k = self.eq.x
        self.eq.gamma = self.nu_face  # DkEff = nu + nut, on faces as momentum sees it
        self.ghosts = (self.nut, self.k)

    def start(self, flow) -> None:
        """k from ``k_init`` or the local equilibrium of the initial velocity; its ``nut``."""
        self._gradient(flow)
        self._damp(flow)
        n = self.lm.n_owned
        if self.k_init is None:
            smagorinsky_nut(self.gradU, self.delta, self.Ck, self.Ce, n, self.k, self.nut)
        else:
            self.k[:] = self.k_init
        keqn_nut(self.k, self.delta, self.Ck, n, self.nut)
        self.ctx.exchanger.exchange(self.ghosts)
        self.refresh()

    def eddy(self, flow) -> None:
        """One step of the k equation with the current flux, then ``nut`` from the new k."""
        n, T = self.lm.n_owned, self.ctx.timers
        eq = self.eq
        with T("fluxes"):
            keqn_sources(self.gradU, self.delta, self.k, self.nut, self.Ce, n, eq.Sp, eq.Su)
        self.info = eq.solve(flow.phi, flow.dt)
        with T("fluxes"):
            keqn_nut(self.k, self.delta, self.Ck, n, self.nut)

    def refresh(self) -> None:
        super().refresh()
        self.eq.refresh_gradient()  # k's ghosts are current too

    def take_pending(self) -> tuple:
        return self.eq.take_pending()

    def state(self) -> tuple[dict, dict]:
        arrays, extra = super().state()
        a, e = self.eq.state()
        return arrays | a, extra | e

    def restore(self, values: dict, extra: dict) -> None:
        super().restore(values, extra)
        self.eq.restore(values, extra)
