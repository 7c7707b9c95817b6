"""Dynamic Smagorinsky (Germano et al. 1991, Lilly 1992): the coefficient from the resolved
scales themselves, one value over the whole domain.

Filtering the resolved velocity once more (a test filter, ``alpha`` times the grid width)
gives the stress the scales between the two filters carry, ``L = (u u)^ - u^ u^``, which the
model must equal as ``Cs^2 M``, ``M = 2 Delta^2 ((|S| S)^ - alpha^2 |S^| S^)``.  Lilly's least
squares over the domain, ``Cs^2 = <L:M> / <M:M>`` (volume averages, clipped at zero), then
``nut = Cs^2 Delta^2 |S|``, ``|S| = sqrt(2 S:S)``.  A laminar or uniform flow gives no
resolved small scales, so ``L`` and the coefficient vanish: no eddy viscosity during a
transition's laminar start, where the fixed-coefficient models already dissipate.  One
value for the domain suits homogeneous flows (the Taylor-Green vortex); walls and
inhomogeneous flows want local averaging, not done here.

The test filter is the mean of a cell and its face neighbours (``alpha`` = 2, the usual
ratio); ``S^`` is the filtered strain rate.  The filter needs the velocity and the strain
rate of the neighbours across a rank boundary, so the step's velocity and strain rate (nine
fields) ride the next step's first exchange with the other closures' ghosts (no message of
their own), and the coefficient and ``nut`` follow in ``refresh`` on every local cell, ghosts
included, after one allreduce of two sums.  The viscosity thus lags as the other closures'
does, and every partition computes the same coefficient.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from .eddy import EddyViscosity

ALPHA = 2.0


@nb.njit(cache=True)
def strain_rate(g, n, S):
    """``S[m, c]`` of the owned cells, the symmetric pairs in the order xx, yy, zz, xy, xz,
    yz."""
    for c in range(n):
        S[0, c] = g[0, 0, c]
        S[1, c] = g[1, 1, c]
        S[2, c] = g[2, 2, c]
        S[3, c] = 0.5 * (g[0, 1, c] + g[1, 0, c])
        S[4, c] = 0.5 * (g[0, 2, c] + g[2, 0, c])
        S[5, c] = 0.5 * (g[1, 2, c] + g[2, 1, c])


@nb.njit(cache=True, inline="always")
def _mag(S, c):
    s2 = S[0, c] ** 2 + S[1, c] ** 2 + S[2, c] ** 2 \
        + 2.0 * (S[3, c] ** 2 + S[4, c] ** 2 + S[5, c] ** 2)
    return math.sqrt(2.0 * s2)


@nb.njit(cache=True, inline="always")
def _add_cell(U, S, c, acc, t):
    """Add the 21 filtered quantities of cell ``c`` to ``acc[t]``: u (3), u u (6), S (6),
    |S| S (6), the pairs in ``strain_rate``'s order."""
    u0, u1, u2 = U[0, c], U[1, c], U[2, c]
    m = _mag(S, c)
    acc[t, 0] += u0
    acc[t, 1] += u1
    acc[t, 2] += u2
    acc[t, 3] += u0 * u0
    acc[t, 4] += u1 * u1
    acc[t, 5] += u2 * u2
    acc[t, 6] += u0 * u1
    acc[t, 7] += u0 * u2
    acc[t, 8] += u1 * u2
    for k in range(6):
        acc[t, 9 + k] += S[k, c]
        acc[t, 15 + k] += m * S[k, c]


def filter_counts(owner, neighbour, n) -> np.ndarray:
    """How many cells the test filter averages over each owned cell: itself and its face
    neighbours (a mesh property, found once)."""
    ni = len(neighbour)
    return 1.0 + np.bincount(owner[:ni][owner[:ni] < n], minlength=n)[:n] \
        + np.bincount(neighbour[neighbour < n], minlength=n)[:n]


@nb.njit(cache=True)
def germano_sums(owner, neighbour, n, U, S, vol, delta, alpha2, cnt, acc, work):
    """``(sum vol L:M, sum vol M:M)`` over the owned cells ``0..n-1``; ``cnt``: each cell's
    filter members (:func:`filter_counts`); ``acc`` (n x 21) and ``work`` (2 x 6): work
    arrays."""
    acc[:n] = 0.0
    for c in range(n):
        _add_cell(U, S, c, acc, c)
    for f in range(len(neighbour)):
        a, b = owner[f], neighbour[f]
        if a < n:
            _add_cell(U, S, b, acc, a)
        if b < n:
            _add_cell(U, S, a, acc, b)
    lm = 0.0
    mm = 0.0
    sh, lk = work[0], work[1]
    twice = (1.0, 1.0, 1.0, 2.0, 2.0, 2.0)  # the off-diagonal pairs count twice in A:B
    for c in range(n):
        q = acc[c]
        w = 1.0 / cnt[c]
        u0, u1, u2 = q[0] * w, q[1] * w, q[2] * w
        lk[0] = q[3] * w - u0 * u0
        lk[1] = q[4] * w - u1 * u1
        lk[2] = q[5] * w - u2 * u2
        lk[3] = q[6] * w - u0 * u1
        lk[4] = q[7] * w - u0 * u2
        lk[5] = q[8] * w - u1 * u2
        s2 = 0.0
        for k in range(6):
            sh[k] = q[9 + k] * w
            s2 += twice[k] * sh[k] * sh[k]
        msh = math.sqrt(2.0 * s2)
        d2 = 2.0 * delta[c] * delta[c]
        for k in range(6):
            mk = d2 * (q[15 + k] * w - alpha2 * msh * sh[k])
            lm += vol[c] * twice[k] * lk[k] * mk
            mm += vol[c] * twice[k] * mk * mk
    return lm, mm


@nb.njit(cache=True)
def dynamic_nut(S, delta, cs2, ck, n_owned, k, nut):
    """``nut`` of every local cell (ghosts too: their strain rate is current), ``k`` of the
    owned ones."""
    for c in range(len(nut)):
        nut[c] = cs2 * delta[c] * delta[c] * _mag(S, c)
    for c in range(n_owned):
        kc = nut[c] / (ck * delta[c])
        k[c] = kc * kc


class DynamicSmagorinsky(EddyViscosity):
    """Smagorinsky with ``Cs^2`` from Germano's identity, one value over the domain."""

    name = "dynamicSmagorinsky"

    def __init__(self, lmesh, physics, ctx):
        super().__init__(lmesh, physics, ctx)
        n = lmesh.n_cells
        self.S = np.zeros((6, n))
        self.u = np.zeros((3, n))  # the velocity the strain rate came from
        self.acc = np.zeros((lmesh.n_owned, 21))
        self.work = np.zeros((2, 6))
        self.cnt = filter_counts(lmesh.owner, lmesh.neighbour, lmesh.n_owned)
        self.cs2 = 0.0
        self.ghosts = (*self.S, *self.u)

    def eddy(self, flow) -> None:
        """The strain rate and the velocity of the owned cells, for the next ``refresh``."""
        n = self.lm.n_owned
        with self.ctx.timers("fluxes"):
            strain_rate(self.gradU, n, self.S)
            self.u[:, :n] = flow.U[:, :n]

    def refresh(self) -> None:
        """``Cs^2`` from the filtered fields (ghosts current), ``nut`` on every local cell,
        then the face viscosity and stress as every closure's."""
        lm, ctx = self.lm, self.ctx
        n = lm.n_owned
        with ctx.timers("fluxes"):
            a, b = germano_sums(lm.owner, lm.neighbour, n, self.u, self.S,
                                lm.geometry.cell_volumes, self.delta, ALPHA * ALPHA,
                                self.cnt, self.acc, self.work)
        a, b = ctx.red.sum(a, b)
        self.cs2 = max(a / b, 0.0) if b > 0.0 else 0.0
        with ctx.timers("fluxes"):
            dynamic_nut(self.S, self.delta, self.cs2, self.Ck, n, self.k, self.nut)
        super().refresh()

    def state(self) -> tuple[dict, dict]:
        """Every closure's, and the strain rate and velocity the next ``refresh`` filters."""
        values, extra = super().state()
        return {**values, "strain_rate": (self.S, "cell"), "strain_velocity": (self.u, "cell")}, \
            extra

    def restore(self, values: dict, extra: dict) -> None:
        super().restore(values, extra)
        self.S[...] = values["strain_rate"].reshape(self.S.shape)
        self.u[...] = values["strain_velocity"].reshape(self.u.shape)
