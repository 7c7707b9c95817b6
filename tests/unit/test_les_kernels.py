"""The LES closures' kernels against their analytic values: Smagorinsky's ``nut = (Cs
Delta)^2 |S|`` in uniform shear, WALE's zero in pure shear and its value in an irrotational
plane strain, kEqn's production equal to its dissipation at local equilibrium, and the
dynamic coefficient of a linear velocity field, whose resolved (Leonard) stress the test
filter gives exactly: the covariance of the filter's cell centres seen through the velocity
gradient."""

from __future__ import annotations

import math

import numpy as np
import pytest

from haloflow.case import load_case
from haloflow.mesh.blocks import box
from haloflow.parallel.local import build_local
from haloflow.physics.closures import dynamic as D
from haloflow.physics.closures.keqn import keqn_nut, keqn_sources
from haloflow.physics.closures.smagorinsky import smagorinsky_nut
from haloflow.physics.closures.wale import wale_nut

CK, CE, CW = 0.094, 1.048, 0.325  # OpenFOAM's defaults, the case's
RATES = np.array([0.5, 1.0, 3.0, 10.0])  # shear or strain rate per cell, 1/s
DELTAS = np.array([0.01, 0.02, 0.05, 0.1])


def gradients(*components) -> np.ndarray:
    """``g[d, e, c] = d u_d / d x_e``: ``RATES[c]`` times the given (d, e, value) entries."""
    g = np.zeros((3, 3, len(RATES)))
    for d, e, v in components:
        g[d, e] = v * RATES
    return g


def test_case_constants_give_the_classical_smagorinsky_constant():
    """The taylor_green_3d case (an LES) carries OpenFOAM's Ck, Ce and WALE's Cw; through
    ``Cs^2 = Ck sqrt(Ck/Ce)`` they are Lilly's Cs = 0.167."""
    ph = load_case("taylor_green_3d", ['physics.closure="smagorinsky"']).physics
    assert (ph.Ck, ph.Ce, ph.Cw) == (CK, CE, CW)
    assert math.sqrt(CK * math.sqrt(CK / CE)) == pytest.approx(0.1675, abs=5e-4)


def test_smagorinsky_in_uniform_shear():
    """u = (a y, 0, 0): |S| = sqrt(2 S:S) = a, nut = (Cs Delta)^2 a, and the SGS energy
    ``k = (nut / (Ck Delta))^2``; a pure dilatation (no deviatoric strain) gives none."""
    n = len(RATES)
    k, nut = np.zeros(n), np.zeros(n)
    smagorinsky_nut(gradients((0, 1, 1.0)), DELTAS, CK, CE, n, k, nut)
    cs2 = CK * math.sqrt(CK / CE)
    want = cs2 * DELTAS ** 2 * RATES
    assert nut == pytest.approx(want, rel=1e-12)
    assert k == pytest.approx((want / (CK * DELTAS)) ** 2, rel=1e-12)
    smagorinsky_nut(gradients((0, 0, 1.0), (1, 1, 1.0), (2, 2, 1.0)), DELTAS, CK, CE, n, k, nut)
    assert np.abs(nut).max() < 1e-15 and np.abs(k).max() < 1e-15


def test_dynamic_viscosity_in_uniform_shear():
    """The dynamic model's ``nut = Cs^2 Delta^2 |S|`` for a given coefficient, and its k."""
    n = len(RATES)
    S = np.zeros((6, n))
    D.strain_rate(gradients((0, 1, 1.0)), n, S)
    k, nut = np.zeros(n), np.zeros(n)
    D.dynamic_nut(S, DELTAS, 0.03, CK, n, k, nut)
    assert nut == pytest.approx(0.03 * DELTAS ** 2 * RATES, rel=1e-12)
    assert k == pytest.approx((nut / (CK * DELTAS)) ** 2, rel=1e-12)


def test_wale_vanishes_in_pure_shear_not_in_plane_strain():
    """Pure shear u = (a y, 0, 0): g^2 = 0, so nut = 0 (WALE's defining property, where
    Smagorinsky's is not).  Irrotational plane strain u = (a x, -a y, 0): Sd:Sd = 2 a^4 / 3,
    D:D = 2 a^2, nut = (Cw Delta)^2 (Sd:Sd)^1.5 / ((D:D)^2.5 + (Sd:Sd)^1.25)."""
    n = len(RATES)
    k, nut, g2 = np.zeros(n), np.full(n, -1.0), np.zeros((3, 3))
    wale_nut(gradients((0, 1, 1.0)), DELTAS, CK, CW, n, g2, k, nut)
    assert np.all(nut == 0.0) and np.all(k == 0.0)
    wale_nut(gradients((0, 0, 1.0), (1, 1, -1.0)), DELTAS, CK, CW, n, g2, k, nut)
    a = RATES
    sd2, dd = 2.0 * a ** 4 / 3.0, 2.0 * a ** 2
    want = (CW * DELTAS) ** 2 * sd2 ** 1.5 / (dd ** 2.5 + sd2 ** 1.25)
    assert nut == pytest.approx(want, rel=1e-12)
    assert nut == pytest.approx(0.08696 * (CW * DELTAS) ** 2 * a, rel=1e-4)  # the number
    assert k == pytest.approx((nut / (CK * DELTAS)) ** 2, rel=1e-12)


def test_keqn_production_equals_dissipation_at_equilibrium():
    """With k at the local equilibrium of a shear (Smagorinsky's k) and ``nut = Ck Delta
    sqrt(k)``, production ``2 nut devD:D`` equals dissipation ``Ce k^1.5 / Delta`` (the k
    equation's sources, ``Su + Sp k``, cancel); at twice that k dissipation wins."""
    n = len(RATES)
    g = gradients((0, 1, 1.0), (1, 0, 0.3), (2, 2, 0.2))  # shear, rotation and dilatation
    k, nut = np.zeros(n), np.zeros(n)
    smagorinsky_nut(g, DELTAS, CK, CE, n, k, nut)
    nut[:] = 0.0
    keqn_nut(k, DELTAS, CK, n, nut)
    Sp, Su = np.zeros(n), np.zeros(n)
    keqn_sources(g, DELTAS, k, nut, CE, n, Sp, Su)
    dissipation = CE * k ** 1.5 / DELTAS
    assert np.all(Su > 0) and Su == pytest.approx(dissipation, rel=1e-12)
    assert Su + Sp * k == pytest.approx(np.zeros(n), abs=1e-12 * Su.max())
    k2 = 2.0 * k
    keqn_nut(k2, DELTAS, CK, n, nut)
    keqn_sources(g, DELTAS, k2, nut, CE, n, Sp, Su)
    assert np.all(Su + Sp * k2 < 0)


def _covariance_of_filter_members(lm) -> np.ndarray:
    """Per owned cell, the covariance (3 x 3) of the centres of the cells the test filter
    averages: itself and its face neighbours."""
    n, ni = lm.n_owned, lm.n_internal
    x = lm.geometry.cell_centres
    members = [[c] for c in range(n)]
    for f in range(ni):
        a, b = lm.owner[f], lm.neighbour[f]
        members[a].append(b)
        members[b].append(a)
    out = np.zeros((n, 3, 3))
    for c, m in enumerate(members):
        d = x[m] - x[m].mean(axis=0)
        out[c] = d.T @ d / len(m)
    return out


def test_dynamic_coefficient_of_a_linear_field():
    """u = A x on a graded box: every filtered average of u is that of the centres, so the
    resolved stress is ``L = A C A^T`` with C the covariance of each cell's filter members
    (boundary cells included), and with a uniform strain rate S the model tensor is ``M = 2
    Delta^2 (1 - alpha^2) |S| S``.  Lilly's coefficient ``<L:M> / <M:M>`` from germano_sums
    equals that computed here, for a strain with ``(A A^T):S`` not zero."""
    mesh = box((5, 4, 6), lengths=(1.0, 0.8, 1.2), grading=(2.0, 1.0, 0.5))
    lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    A = np.array([[0.7, 0.4, -0.2], [-0.1, 0.5, 0.3], [0.6, -0.2, -1.2]])  # traceless
    x = lm.geometry.cell_centres
    n = lm.n_owned
    u = (x @ A.T).T.copy()
    g = np.repeat(A[:, :, None], lm.n_cells, axis=2)
    S = np.zeros((6, lm.n_cells))
    D.strain_rate(g, n, S)
    vol = lm.geometry.cell_volumes
    delta = np.cbrt(vol)
    lm_sum, mm_sum = D.germano_sums(lm.owner, lm.neighbour, n, u, S, vol, delta,
                                    D.ALPHA ** 2, D.filter_counts(lm.owner, lm.neighbour, n),
                                    np.zeros((n, 21)), np.zeros((2, 6)))
    Sm = 0.5 * (A + A.T)
    mag = math.sqrt(2.0 * np.sum(Sm * Sm))
    C = _covariance_of_filter_members(lm)
    L = np.einsum("ij,cjk,lk->cil", A, C, A)
    M = (2.0 * delta[:n] ** 2 * (1.0 - 4.0) * mag)[:, None, None] * Sm  # alpha = 2
    want_lm = np.sum(vol[:n] * np.einsum("cij,cij->c", L, M))
    want_mm = np.sum(vol[:n] * np.einsum("cij,cij->c", M, M))
    assert abs(want_lm) > 1e-3 * math.sqrt(want_mm * np.sum(vol[:n] * np.einsum(
        "cij,cij->c", L, L)))  # L and M not orthogonal: the coefficient is not trivially 0
    assert mm_sum == pytest.approx(want_mm, rel=1e-12)
    assert lm_sum == pytest.approx(want_lm, rel=1e-10)
    assert lm_sum / mm_sum == pytest.approx(want_lm / want_mm, rel=1e-10)
