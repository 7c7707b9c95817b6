"""Gradients and explicit (deferred) corrections on any polyhedral mesh.

Gradients are Gauss (linear interpolation) or least squares (exact for linear fields on any
mesh, skewed ones included).  The corrections are the explicit parts of face quantities
whose implicit parts use the face geometry of :mod:`haloflow.mesh.fv`: the non-orthogonal
part ``k . grad(phi)_f`` of diffusion and of the pressure flux, and linear-upwind
convection.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..mesh.core import centre_deltas
from ..mesh.fv import FaceCoeffs
from .bcs import visited_owner
from .patches import EMPTY, FIXED, ZERO_GRADIENT

GRADIENTS = ("gauss", "least-squares")


# -- gradients ---------------------------------------------------------------------------------

@nb.njit(cache=True)
def _half_faces(grad, ni, n_interior, first):
    """The internal faces of a gradient's half: ``first`` the interior ones (and ``grad``
    zeroed), else the interface ones."""
    if first:
        grad[:, :] = 0.0
        return 0, n_interior
    return n_interior, ni


@nb.njit(cache=True)
def gauss_gradient_part(owner, neighbour, weight, sf, vol, axes, phi, bkind, bvalue, grad,
                        n_interior, first):
    """Half of the Gauss gradient, so that it can overlap a halo exchange of ``phi``.

    ``first``: zero ``grad`` and sum the interior faces (both cells owned: no ghost value
    needed).  Otherwise: the interface and boundary faces, then divide by the volume.  The
    two halves visit the faces in the same order as one pass, so the result is bitwise the
    same whether or not the exchange was overlapped.  ``axes`` (three flags) are the
    directions summed: a 2D mesh's faces have no area normal to its empty patches, so that
    row stays zero without a third of the scattered additions (0.82x the time on pitzDaily).
    """
    ni = len(neighbour)
    f0, f1 = _half_faces(grad, ni, n_interior, first)
    for f in range(f0, f1):
        o = owner[f]
        n = neighbour[f]
        pf = weight[f] * phi[o] + (1.0 - weight[f]) * phi[n]
        for d in range(3):
            if axes[d]:
                grad[d, o] += pf * sf[f, d]
                grad[d, n] -= pf * sf[f, d]
    if first:
        return
    for f in range(ni, len(owner)):
        b = f - ni
        k = bkind[b]
        if k == EMPTY:
            continue
        o = owner[f]
        pf = bvalue[b] if k == FIXED else phi[o]
        for d in range(3):
            if axes[d]:
                grad[d, o] += pf * sf[f, d]
    for c in range(len(vol)):
        iv = 1.0 / vol[c]
        for d in range(3):
            grad[d, c] *= iv


@nb.njit(cache=True)
def lsq_gradient_part(owner, neighbour, lo, ln, lb, phi, bkind, bvalue, grad, n_interior,
                      first):
    """Half of the least-squares gradient (same split as :func:`gauss_gradient_part`).

    ``grad_P = sum_f c_Pf (phi_f - phi_P)`` with the per-face vectors of
    :func:`lsq_vectors`; a zero-gradient face adds nothing.
    """
    ni = len(neighbour)
    f0, f1 = _half_faces(grad, ni, n_interior, first)
    for f in range(f0, f1):
        o = owner[f]
        n = neighbour[f]
        dphi = phi[n] - phi[o]
        for d in range(3):
            grad[d, o] += lo[f, d] * dphi
            grad[d, n] += ln[f, d] * dphi
    if first:
        return
    for f in range(ni, len(owner)):
        b = f - ni
        if bkind[b] != FIXED:
            continue
        o = owner[f]
        dphi = bvalue[b] - phi[o]
        for d in range(3):
            grad[d, o] += lb[b, d] * dphi


def lsq_vectors(lmesh, empty: np.ndarray, comps) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-face least-squares vectors ``w G^-1 d`` (weights ``1/|d|^2``) of the owner and the
    neighbour of internal faces and the owner of boundary faces; zero for ghost cells, whose
    gradients come from their own rank.  Directions normal to ``empty`` patches (not in
    ``comps``) get a unit entry in ``G`` so that the 2D matrix is invertible."""
    g = lmesh.geometry
    ni, n = lmesh.n_internal, lmesh.n_owned
    cc, fc = g.cell_centres, g.face_centres
    own, nbr = lmesh.owner[:ni], lmesh.neighbour
    bown = lmesh.owner[ni:]
    d = centre_deltas(lmesh)
    db = fc[ni:] - cc[bown]
    w = 1.0 / np.einsum("ij,ij->i", d, d)
    wb = np.where(empty, 0.0, 1.0 / np.einsum("ij,ij->i", db, db))
    G = np.zeros((lmesh.n_cells, 3, 3))
    dd = w[:, None, None] * d[:, :, None] * d[:, None, :]
    np.add.at(G, own, dd)
    np.add.at(G, nbr, dd)
    np.add.at(G, bown, wb[:, None, None] * db[:, :, None] * db[:, None, :])
    for e in range(3):
        if e not in comps:
            G[:, e, e] += 1.0
    Ginv = np.zeros_like(G)
    Ginv[:n] = np.linalg.inv(G[:n])
    lo = np.where((own < n)[:, None], w[:, None] * np.einsum("fij,fj->fi", Ginv[own], d), 0.0)
    ln = np.where((nbr < n)[:, None], w[:, None] * np.einsum("fij,fj->fi", Ginv[nbr], d), 0.0)
    lb = wb[:, None] * np.einsum("fij,fj->fi", Ginv[bown], db)
    return lo, ln, lb


class Gradient:
    """The case's gradient scheme on one LocalMesh: ``part(...)`` halves for overlapping a
    halo exchange, or one call.  Rows of ghost cells are meaningless until exchanged."""

    def __init__(self, lmesh, fc: FaceCoeffs, scheme: str, empty: np.ndarray, comps):
        if scheme not in GRADIENTS:
            raise ValueError(f"unknown gradient scheme {scheme!r} (expected one of {GRADIENTS})")
        self.scheme = scheme
        lm = lmesh
        self.n_interior = lm.n_interior
        owner = visited_owner(lm, empty)  # empty patches left out of the face loops
        if scheme == "gauss":
            self._kernel = gauss_gradient_part
            axes = tuple(bool(d in comps) for d in range(3))  # the solved directions
            self._args = (owner, lm.neighbour, fc.weight, lm.geometry.face_areas,
                          lm.geometry.cell_volumes, axes)
        else:
            self._kernel = lsq_gradient_part
            self._args = (owner, lm.neighbour, *lsq_vectors(lm, empty, comps))

    def part(self, phi, bkind, bvalue, grad, first: bool) -> None:
        self._kernel(*self._args, phi, bkind, bvalue, grad, self.n_interior, first)

    def __call__(self, phi, bkind, bvalue, grad) -> None:
        self.part(phi, bkind, bvalue, grad, True)
        self.part(phi, bkind, bvalue, grad, False)


# -- explicit (deferred) corrections -----------------------------------------------------------

@nb.njit(cache=True)
def nonorth_diffusion_source(owner, neighbour, weight, corr, gradU, comps, nu_f, b):
    """Deferred non-orthogonal part of the diffusion of each velocity component:
    ``nu_f k . grad(u_d)_f`` into the owner and out of the neighbour (``gradU[d, e, cell]``,
    ghost rows exchanged; ``nu_f`` the effective viscosity per face, or one entry for
    all)."""
    per_face = len(nu_f) > 1
    for f in range(len(neighbour)):
        o = owner[f]
        n = neighbour[f]
        w = weight[f]
        nu = nu_f[f if per_face else 0]
        for d in comps:
            s = 0.0
            for e in comps:
                s += corr[f, e] * (w * gradU[d, e, o] + (1.0 - w) * gradU[d, e, n])
            b[d, o] += nu * s
            b[d, n] -= nu * s


@nb.njit(cache=True)
def transposed_stress(owner, neighbour, sf, nu_face, nu, gradU, n_owned, gnut, stress):
    """The explicit part of the eddy stress, ``div(nut T(grad U))``, integrated over each
    owned cell: ``stress[d, c] = V grad(nut) . d U / d x_d``, the form it takes when
    ``div U = 0`` (the rest, ``nut grad(div U)``, vanishes to the pressure solver's
    tolerance).  The laplacian alone dissipates ``nut grad U : grad U``, which in a vortex
    core is far more than the ``2 nut D : D`` of the stress it stands for.  ``V grad(nut)``
    is Gauss's sum of ``nut_f S_f`` with ``nut_f = nu_face - nu`` (zero on walls), so no
    ghost gradient is needed; ``gnut`` is scratch of shape ``(3, n)``."""
    gnut[:, :] = 0.0
    ni = len(neighbour)
    for f in range(len(owner)):
        s = nu_face[f] - nu
        o = owner[f]
        for e in range(3):
            gnut[e, o] += s * sf[f, e]
            if f < ni:
                gnut[e, neighbour[f]] -= s * sf[f, e]
    for c in range(n_owned):
        for d in range(3):
            stress[d, c] = (gnut[0, c] * gradU[0, d, c] + gnut[1, c] * gradU[1, d, c]
                            + gnut[2, c] * gradU[2, d, c])


@nb.njit(cache=True)
def transpose_stress_source(owner, neighbour, weight, gdiff, sf, nu_face, u_kind, ub, U,
                            gradU, comps, g, b):
    """OpenFOAM's explicit ``div(nu dev2(T(grad U)))`` of its laminar (and turbulence)
    models, which simpleFoam and pimpleFoam add and icoFoam does not: ``nu grad(div U)``,
    zero in the continuum, but not in the discrete equations where the velocity gradient is
    singular (an inlet meeting a wall).  Gauss with linear interpolation of the cells'
    gradients; on a boundary face the cell's gradient with its normal part replaced by the
    face's ``(U_b - U_P) / (n . (x_f - x_P))`` (``gdiff / |S|``, the face coefficients'),
    as OpenFOAM's Gauss gradient corrects its boundary values.  ``gradU[d, e] = dU_d /
    dx_e``; ``owner`` over the visited faces;
    ``g``: a (3, 3) scratch for a face's gradient; ``nu_face``: per face, or one entry for
    all."""
    ni = len(neighbour)
    per_face = len(nu_face) > 1
    for f in range(len(owner)):
        o = owner[f]
        if f < ni:
            n = neighbour[f]
            w = weight[f]
            for d in comps:
                for e in comps:
                    g[d, e] = w * gradU[d, e, o] + (1.0 - w) * gradU[d, e, n]
        else:
            k = f - ni
            if u_kind[k] == EMPTY:
                continue
            area = np.sqrt(sf[f, 0] ** 2 + sf[f, 1] ** 2 + sf[f, 2] ** 2)
            for d in comps:
                sn = (ub[d, k] - U[d, o]) * gdiff[f] / area
                for e in comps:
                    sn -= sf[f, e] / area * gradU[d, e, o]
                for e in comps:
                    g[d, e] = gradU[d, e, o] + sf[f, e] / area * sn
        tr = 0.0
        for d in comps:
            tr += g[d, d]
        for j in comps:
            s = -2.0 / 3.0 * tr * sf[f, j]
            for i in comps:
                s += sf[f, i] * g[i, j]
            s *= nu_face[f if per_face else 0]
            b[j, o] += s
            if f < ni:
                b[j, neighbour[f]] -= s


@nb.njit(cache=True)
def nonorth_flux_correction(owner, neighbour, weight, corr, rAU, grad, comps, phiH):
    """Move the non-orthogonal part of the pressure flux, ``rAU_f k . grad(p)_f`` from the
    latest pressure, into the predicted flux, so that the pressure equation (implicit in
    ``gdiff``) and the corrected fluxes share it: continuity holds to solver tolerance."""
    for f in range(len(neighbour)):
        o = owner[f]
        n = neighbour[f]
        w = weight[f]
        s = 0.0
        for e in comps:
            s += corr[f, e] * (w * grad[e, o] + (1.0 - w) * grad[e, n])
        phiH[f] -= (w * rAU[o] + (1.0 - w) * rAU[n]) * s


@nb.njit(cache=True, inline="always")
def face_flux(V, sf, f, o, n, w):
    """Internal face ``f``'s flux of the cell vector field ``V`` interpolated linearly
    (weight ``w`` on the owner ``o``, the rest on the neighbour ``n``): ``(w V_o + (1 - w)
    V_n) . S_f``, summed over x, y, z in that order."""
    s = 0.0
    for d in range(3):
        s += (w * V[d, o] + (1.0 - w) * V[d, n]) * sf[f, d]
    return s


@nb.njit(cache=True)
def _memory_face(phi0, u0, rauf, beta, rdt) -> float:
    """One face's ``flux_memory`` term for the old flux ``phi0`` and the interpolated old
    velocity's flux ``u0``."""
    corr = phi0 - u0
    if rdt == 0.0:
        return beta * corr
    c = 1.0 - min(abs(corr) / (abs(phi0) + 1e-15), 1.0)
    return rauf * c * rdt * corr


@nb.njit(cache=True)
def flux_memory(owner, neighbour, weight, sf, U0, phi0, rAU, ukind, beta, rdt, phiH):
    """Add to the predicted flux ``phiH`` a share of the old flux ``phi0``'s departure from
    the old velocity ``U0`` interpolated to the face, on internal faces and faces of
    zero-gradient velocity (fixed-value faces carry no H/A; empty and symmetry faces no
    flux).  ``rdt == 0``: SIMPLE's relaxation memory, ``beta (phi0 - U0_f . S)`` with
    ``beta = 1 - alpha_U`` (Majumdar 1988: relaxing the momentum equation puts ``(1 -
    alpha) U_old`` into H/A while scaling the Rhie-Chow pressure term by ``alpha``; this
    term cancels the first, so the converged flux and velocity do not depend on the
    relaxation).  Else OpenFOAM's Euler ``ddtCorr``, ``rAU_f c rdt (phi0 - U0_f . S)`` with
    v1912's coupling ``c = 1 - min(|phi0 - U0_f . S| / |phi0|, 1)`` (1e-15 in the
    denominator, its SMALL).  Ghost rows of ``U0`` and ``rAU`` are current."""
    ni = len(neighbour)
    for f in range(ni):
        o = owner[f]
        n = neighbour[f]
        w = weight[f]
        s = face_flux(U0, sf, f, o, n, w)
        phiH[f] += _memory_face(phi0[f], s, w * rAU[o] + (1.0 - w) * rAU[n], beta, rdt)
    for f in range(ni, len(owner)):
        if ukind[f - ni] != ZERO_GRADIENT:
            continue
        o = owner[f]
        s = 0.0
        for d in range(3):
            s += U0[d, o] * sf[f, d]
        phiH[f] += _memory_face(phi0[f], s, rAU[o], beta, rdt)


@nb.njit(cache=True)
def linear_upwind_source(owner, neighbour, phi, fc, fcn, cc, gradU, comps, b):
    """Deferred correction from upwind to linear-upwind: the upwind value extrapolated to
    the face centre with the upwind cell's gradient (second order, not strictly bounded).
    ``fcn``: the face centres as the neighbour sees them (different across periodic
    pairs)."""
    for f in range(len(neighbour)):
        o = owner[f]
        n = neighbour[f]
        F = phi[f]
        u = o if F >= 0.0 else n
        x = fc[f] if F >= 0.0 else fcn[f]
        for d in comps:
            s = 0.0
            for e in comps:
                s += gradU[d, e, u] * (x[e] - cc[u, e])
            b[d, o] -= F * s
            b[d, n] += F * s


@nb.njit(cache=True)
def cubic_source(owner, neighbour, weight, phi, d, U, gradU, comps, b):
    """Deferred correction from linear to cubic face values (OpenFOAM's ``cubic``): the
    cubic through both cells' values and gradients, ``kSc (U_P - U_N) + kP d.grad U_P +
    kN d.grad U_N`` beyond linear, ``d`` from owner to neighbour centre.  On a uniform mesh
    ``(d/8).(grad U_P - grad U_N)``: fourth order, symmetric in the two cells, with less
    dispersion error on an LES's grid-scale eddies.  Not energy-neutral where the flux
    varies from face to face: a nearly inviscid vortex (12³, nu 1e-5, to t = 3) loses about
    1 % more energy than with linear."""
    for f in range(len(neighbour)):
        o = owner[f]
        n = neighbour[f]
        w = weight[f]
        ksc = w * (1.0 - w * (3.0 - 2.0 * w))
        kp = (1.0 - w) * (1.0 - w) * w
        kn = w * w * (w - 1.0)
        F = phi[f]
        for c in comps:
            s = ksc * (U[c, o] - U[c, n])
            for e in comps:
                s += d[f, e] * (kp * gradU[c, e, o] + kn * gradU[c, e, n])
            b[c, o] -= F * s
            b[c, n] += F * s


# -- bounded convection of a scalar ------------------------------------------------------------

# TVD limiters psi(r) of a limited linear scheme (the code the kernel takes)
LIMITERS = {"limited-linear": 1, "van-leer": 2}


@nb.njit(cache=True)
def limited_source(owner, neighbour, weight, phi, d, grad, comps, T, limiter, b):
    """Deferred correction from upwind to a TVD-limited linear face value of the scalar
    ``T``: ``F psi(r) (T_lin - T_C)`` out of the owner and into the neighbour, C the upwind
    cell.  ``r = 2 d . grad(T)_C / (T_N - T_P) - 1`` (``d`` from owner to neighbour centre)
    is OpenFOAM's NVD/TVD ratio on any mesh: the upwind cell's gradient stands in for the
    far-upwind cell.  ``limiter`` 1: limitedLinear, ``max(min(2 r, 1), 0)``; 2: van Leer,
    ``(r + |r|) / (1 + |r|)``.  Linear where the field is smooth, upwind at an extremum, so
    the converged field keeps within its boundary values where linear overshoots."""
    for f in range(len(neighbour)):
        o = owner[f]
        n = neighbour[f]
        F = phi[f]
        c = o if F >= 0.0 else n
        gradf = T[n] - T[o]
        gradcf = 0.0
        for e in comps:
            gradcf += d[f, e] * grad[e, c]
        if abs(gradcf) >= 1000.0 * abs(gradf):  # as OpenFOAM: no division by ~0
            r = 2000.0 * (1.0 if gradcf >= 0.0 else -1.0) * (1.0 if gradf >= 0.0 else -1.0) - 1.0
        else:
            r = 2.0 * gradcf / gradf - 1.0
        if limiter == 1:
            psi = max(min(2.0 * r, 1.0), 0.0)
        else:
            psi = (r + abs(r)) / (1.0 + abs(r))
        if psi == 0.0:
            continue
        w = weight[f]
        corr = F * psi * (w * T[o] + (1.0 - w) * T[n] - T[c])
        b[o] -= corr
        b[n] += corr
