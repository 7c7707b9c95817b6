"""The pressure equation: Rhie-Chow fluxes, the pressure system and its solve, corrected fluxes.

Face fluxes are built from the interpolated ``H/A`` and a compact pressure gradient
(Rhie-Chow); on non-orthogonal meshes the explicit part of the pressure flux moves into the
predicted flux, so the pressure equation and the corrected fluxes stay exactly consistent:
after each correction the fluxes are divergence-free to the pressure solver's tolerance.
The system is solved by CG with AMG (K-cycle, flexible CG) or Jacobi preconditioning; with
no fixed pressure anywhere it is singular and the free constant is pinned to a zero mean.
Tolerances follow OpenFOAM's p / pFinal: every solve stops at ``tol`` or ``rel_tol`` times
its initial residual, except the final one of a time step (the last non-orthogonal solve of
the last corrector), which uses ``final_rel_tol``: intermediate corrections need no exact
solve, the fluxes a step ends with do.
"""

from __future__ import annotations

import base64
import binascii

import numba as nb
import numpy as np

from ..io.checkpoint import CheckpointError
from ..linalg.amg import AMG
from ..linalg.flexible import CG1_VECTORS
from ..linalg.kcycle import compiled_solver
from ..linalg.krylov import SolveInfo
from ..linalg.lowsync import PIPECG_VECTORS
from ..linalg.matrix import DistMatrix
from ..linalg.measure import NormalisedResidual
from ..linalg.methods import pressure_method
from ..parallel.faceblocks import for_threads
from .context import Context
from .patches import EMPTY, FIXED, ZERO_GRADIENT
from .schemes import face_flux, nonorth_flux_correction

FACTOR_BASIS = "amg_factor_basis"  # a checkpoint's extra: base64 of little-endian doubles


def _basis_array(text) -> np.ndarray:
    """A checkpoint's :data:`FACTOR_BASIS` back as an array of finite doubles."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (TypeError, ValueError, binascii.Error):
        raw = b"?"
    a = np.frombuffer(raw, dtype="<f8") if len(raw) % 8 == 0 else np.zeros(0)
    if len(a) == 0 or not np.isfinite(a).all():
        raise CheckpointError(f"checkpoint entry {FACTOR_BASIS}: expected base64 text of "
                              "finite little-endian doubles")
    return a.astype(np.float64)


# The boundary faces' loops are helpers of their own, called once per kernel: a helper that
# takes arrays and branches, called once per face, costs two atomic reference counts per
# array and call (numba's pruning of them fails across the branches), 4-7x the face loop
# on a mesh of mostly boundary faces (2D pitzDaily).  Branch-free helpers per face are free.
@nb.njit(cache=True)
def _boundary_fluxes(owner, ni, ukind, uvalue, HbyA, sf, gdiff, rAU, pkind, phiH, g):
    """``phiH`` and ``g`` on the boundary faces: the wall's or inlet's velocity flux, or
    H/A's where the velocity is extrapolated; the coupling of a fixed pressure."""
    for f in range(ni, len(owner)):
        b = f - ni
        o = owner[f]
        k = ukind[b]
        s = 0.0
        if k == FIXED:
            for d in range(3):
                s += uvalue[b, d] * sf[f, d]
        elif k == ZERO_GRADIENT:
            for d in range(3):
                s += HbyA[d, o] * sf[f, d]
        phiH[f] = s
        g[f] = rAU[o] * gdiff[f] if pkind[b] == FIXED else 0.0


@nb.njit(cache=True)
def _boundary_system(owner, ni, phiH, g, pkind, pvalue, diag, rhs):
    """The boundary faces' share of the pressure system: their fluxes, and the fixed
    pressure's coupling."""
    for f in range(ni, len(owner)):
        b = f - ni
        o = owner[f]
        rhs[o] -= phiH[f]
        if pkind[b] == FIXED:
            diag[o] += g[f]
            rhs[o] += g[f] * pvalue[b]


@nb.njit(cache=True)
def predicted_fluxes(owner, neighbour, weight, sf, gdiff, HbyA, rAU, ukind, uvalue, pkind,
                     phiH, g, f0, f1, boundary):
    """Face flux of H/A and the pressure-Laplacian coefficient rAU_f |S|^2/(S.d) on internal
    faces ``[f0, f1)`` and, if ``boundary``, on the boundary faces."""
    ni = len(neighbour)
    for f in range(f0, f1):
        o = owner[f]
        n = neighbour[f]
        w = weight[f]
        phiH[f] = face_flux(HbyA, sf, f, o, n, w)
        g[f] = (w * rAU[o] + (1.0 - w) * rAU[n]) * gdiff[f]
    if boundary:
        _boundary_fluxes(owner, ni, ukind, uvalue, HbyA, sf, gdiff, rAU, pkind, phiH, g)


@nb.njit(cache=True, inline="always")
def _add_face(o, n, gf, phif, diag, rhs):
    """An internal face's share of the pressure system: coupling ``gf``, flux ``phif`` (its
    off-diagonal entries, ``-gf`` both ways, are the matrix's ``fill_symmetric`` of ``g``)."""
    diag[o] += gf
    diag[n] += gf
    rhs[o] -= phif
    rhs[n] += phif


@nb.njit(cache=True)
def pressure_system(owner, neighbour, phiH, g, pkind, pvalue, n_cells, diag, rhs):
    """sum_f g_f (p_P - p_N) = -sum_f phiH_f (+ fixed-pressure boundary terms)."""
    ni = len(neighbour)
    for c in range(n_cells):
        diag[c] = 0.0
        rhs[c] = 0.0
    for f in range(ni):
        _add_face(owner[f], neighbour[f], g[f], phiH[f], diag, rhs)
    _boundary_system(owner, ni, phiH, g, pkind, pvalue, diag, rhs)


@nb.njit(cache=True)
def correct_fluxes(owner, neighbour, phiH, g, p, pkind, pvalue, phi, f0, f1, boundary):
    """Conservative fluxes from the new pressure on internal faces ``[f0, f1)`` (and the
    boundary faces if ``boundary``)."""
    ni = len(neighbour)
    for f in range(f0, f1):
        phi[f] = phiH[f] - g[f] * (p[neighbour[f]] - p[owner[f]])
    if not boundary:
        return
    for f in range(ni, len(owner)):
        b = f - ni
        if pkind[b] == FIXED:
            phi[f] = phiH[f] - g[f] * (pvalue[b] - p[owner[f]])
        else:
            phi[f] = phiH[f]


@nb.njit(cache=True)
def fluxes_and_system(owner, neighbour, weight, sf, gdiff, HbyA, rAU, ukind, uvalue, pkind,
                      pvalue, phiH, g, f0, n_cells, diag, rhs):
    """:func:`predicted_fluxes` on the internal faces from ``f0`` and the boundary faces, and
    :func:`pressure_system` of all faces, in one pass where ``f0`` is 0 (the faces before
    ``f0`` were predicted while the ghosts of ``H/A`` were in flight).  Each face and cell
    sees exactly the operations of the two kernels, in their order."""
    ni = len(neighbour)
    h0, h1, h2 = HbyA[0], HbyA[1], HbyA[2]  # rows: a fifth faster than HbyA[d, cell]
    for c in range(n_cells):
        diag[c] = 0.0
        rhs[c] = 0.0
    for f in range(ni):
        o = owner[f]
        n = neighbour[f]
        s, gf = _face_flux(f, o, n, weight, sf, gdiff, h0, h1, h2, rAU, phiH, g, f0)
        if f >= f0:
            phiH[f] = s
            g[f] = gf
        _add_face(o, n, gf, s, diag, rhs)
    _boundary_fluxes(owner, ni, ukind, uvalue, HbyA, sf, gdiff, rAU, pkind, phiH, g)
    _boundary_system(owner, ni, phiH, g, pkind, pvalue, diag, rhs)


@nb.njit(cache=True)
def fluxes_and_rhs(owner, neighbour, weight, sf, gdiff, HbyA, rAU, ukind, uvalue, pkind,
                   pvalue, phiH, g, f0, n_cells, rhs):
    """:func:`fluxes_and_system` where the matrix is the one already filled (PISO's later
    correctors: ``V/A``, and so every coupling ``g``, is unchanged): the predicted fluxes and
    the right-hand side alone, operation for operation as the whole kernel makes them; ``g``
    is read, not made again (the compiler drops the coupling ``_face_flux`` would return)."""
    ni = len(neighbour)
    h0, h1, h2 = HbyA[0], HbyA[1], HbyA[2]
    for c in range(n_cells):
        rhs[c] = 0.0
    for f in range(ni):
        o = owner[f]
        n = neighbour[f]
        s, _ = _face_flux(f, o, n, weight, sf, gdiff, h0, h1, h2, rAU, phiH, g, f0)
        if f >= f0:
            phiH[f] = s
        rhs[o] -= s
        rhs[n] += s
    for f in range(ni, len(owner)):  # _boundary_fluxes' phiH, _boundary_system's rhs
        b = f - ni
        o = owner[f]
        k = ukind[b]
        s = 0.0
        if k == FIXED:
            for d in range(3):
                s += uvalue[b, d] * sf[f, d]
        elif k == ZERO_GRADIENT:
            for d in range(3):
                s += HbyA[d, o] * sf[f, d]
        phiH[f] = s
        rhs[o] -= s
        if pkind[b] == FIXED:
            rhs[o] += g[f] * pvalue[b]


@nb.njit(cache=True)
def correct_gauss(owner, neighbour, weight, sf, vol, phiH, g, p, pkind, pvalue, phi, grad, U,
                  HbyA, rAU, comps, n_owned, f0, f1, last):
    """:func:`correct_fluxes`, the Gauss gradient of ``p`` and :func:`correct_velocity` in
    one pass over the faces ``[f0, f1)``, then, if ``last``, the boundary faces, the
    division by the volume and the velocity; ``f0 == 0`` zeroes the gradient first.  The
    same operations in the same order as those three kernels (and the two halves of
    :func:`~haloflow.physics.schemes.gauss_gradient_part`), so the results are bitwise
    theirs."""
    ni = len(neighbour)
    g0, g1, g2 = grad[0], grad[1], grad[2]
    if f0 == 0:
        grad[:, :] = 0.0
    for f in range(f0, f1):
        o = owner[f]
        n = neighbour[f]
        po = p[o]
        pn = p[n]
        phi[f] = phiH[f] - g[f] * (pn - po)
        pf = weight[f] * po + (1.0 - weight[f]) * pn
        a = pf * sf[f, 0]
        g0[o] += a
        g0[n] -= a
        a = pf * sf[f, 1]
        g1[o] += a
        g1[n] -= a
        a = pf * sf[f, 2]
        g2[o] += a
        g2[n] -= a
    if last:
        _gauss_tail(owner, ni, sf, vol, phiH, g, p, pkind, pvalue, phi, grad, U, HbyA, rAU,
                    comps, n_owned)


@nb.njit(cache=True, inline="always")
def _face_value(f, o, n, weight, p):
    """p interpolated to internal face f."""
    return weight[f] * p[o] + (1.0 - weight[f]) * p[n]


@nb.njit(cache=True, inline="always")
def _gauss_face(f, o, n, weight, sf, phiH, g, p, phi):
    """Internal face f of :func:`correct_gauss_blocks`: its conservative flux into
    ``phi``, and its Gauss-gradient term p_f S_f, as :func:`correct_gauss` computes them
    (whose own loop stays as written: through this function it took 4-7 % longer per call
    at 48^3, least of 16 calls, two pairs of runs on a busy machine)."""
    phi[f] = phiH[f] - g[f] * (p[n] - p[o])
    pf = _face_value(f, o, n, weight, p)
    return pf * sf[f, 0], pf * sf[f, 1], pf * sf[f, 2]


@nb.njit(cache=True)
def _gauss_tail(owner, ni, sf, vol, phiH, g, p, pkind, pvalue, phi, grad, U, HbyA, rAU, comps,
                n_owned):
    """:func:`correct_gauss` after the internal faces: the boundary faces, the division by
    the volume and the velocity."""
    for f in range(ni, len(owner)):
        b = f - ni
        k = pkind[b]
        o = owner[f]
        if k == FIXED:
            phi[f] = phiH[f] - g[f] * (pvalue[b] - p[o])
        else:
            phi[f] = phiH[f]
        if k == EMPTY:
            continue
        pf = pvalue[b] if k == FIXED else p[o]
        for d in range(3):
            grad[d, o] += pf * sf[f, d]
    for c in range(len(vol)):
        iv = 1.0 / vol[c]
        for d in range(3):
            grad[d, c] *= iv
    for d in comps:
        for c in range(n_owned):
            U[d, c] = HbyA[d, c] - rAU[c] * grad[d, c]


@nb.njit(cache=True, parallel=True)
def correct_gauss_blocks(owner, neighbour, weight, sf, vol, phiH, g, p, pkind, pvalue, phi,
                         grad, U, HbyA, rAU, comps, n_owned, f0, f1, last, cells, own_ptr, own,
                         in_ptr, incoming):
    """:func:`correct_gauss` with the internal faces shared among the threads by
    :class:`~haloflow.parallel.faceblocks.FaceBlocks` (its arrays last): each thread zeroes
    and sums the gradient of its own cells only, the same terms in the same order."""
    g0, g1, g2 = grad[0], grad[1], grad[2]
    for t in nb.prange(len(cells) - 1):
        lo, hi = cells[t], cells[t + 1]
        if f0 == 0:
            for c in range(lo, hi):
                g0[c] = 0.0
                g1[c] = 0.0
                g2[c] = 0.0
        for m in range(in_ptr[t], in_ptr[t + 1]):  # faces from earlier blocks: n's half
            f = incoming[m]
            if f0 <= f < f1:
                n = neighbour[f]
                pf = _face_value(f, owner[f], n, weight, p)
                g0[n] -= pf * sf[f, 0]
                g1[n] -= pf * sf[f, 1]
                g2[n] -= pf * sf[f, 2]
        for m in range(own_ptr[t], own_ptr[t + 1]):
            f = own[m]
            if f < f0 or f >= f1:
                continue
            o = owner[f]
            n = neighbour[f]
            a0, a1, a2 = _gauss_face(f, o, n, weight, sf, phiH, g, p, phi)
            g0[o] += a0
            g1[o] += a1
            g2[o] += a2
            if lo <= n < hi:
                g0[n] -= a0
                g1[n] -= a1
                g2[n] -= a2
    if last:
        _gauss_tail(owner, len(neighbour), sf, vol, phiH, g, p, pkind, pvalue, phi, grad, U,
                    HbyA, rAU, comps, n_owned)


@nb.njit(cache=True, parallel=True)
def fluxes_and_system_blocks(owner, neighbour, weight, sf, gdiff, HbyA, rAU, ukind, uvalue,
                             pkind, pvalue, phiH, g, f0, n_cells, diag, rhs, cells, own_ptr,
                             own, in_ptr, incoming):
    """:func:`fluxes_and_system` with the internal faces shared among the threads as in
    :func:`correct_gauss_blocks` (``n_cells``: the blocks' cells); a face from an earlier
    block is computed again by the thread of its neighbour, the same arithmetic."""
    h0, h1, h2 = HbyA[0], HbyA[1], HbyA[2]
    for t in nb.prange(len(cells) - 1):
        lo, hi = cells[t], cells[t + 1]
        for c in range(lo, hi):
            diag[c] = 0.0
            rhs[c] = 0.0
        for m in range(in_ptr[t], in_ptr[t + 1]):
            f = incoming[m]
            s, gf = _face_flux(f, owner[f], neighbour[f], weight, sf, gdiff, h0, h1, h2, rAU,
                               phiH, g, f0)
            n = neighbour[f]
            diag[n] += gf
            rhs[n] += s
        for m in range(own_ptr[t], own_ptr[t + 1]):
            f = own[m]
            o = owner[f]
            n = neighbour[f]
            s, gf = _face_flux(f, o, n, weight, sf, gdiff, h0, h1, h2, rAU, phiH, g, f0)
            if f >= f0:
                phiH[f] = s
                g[f] = gf
            diag[o] += gf
            rhs[o] -= s
            if lo <= n < hi:
                diag[n] += gf
                rhs[n] += s
    ni = len(neighbour)
    _boundary_fluxes(owner, ni, ukind, uvalue, HbyA, sf, gdiff, rAU, pkind, phiH, g)
    _boundary_system(owner, ni, phiH, g, pkind, pvalue, diag, rhs)


@nb.njit(cache=True, inline="always")
def _face_flux(f, o, n, weight, sf, gdiff, h0, h1, h2, rAU, phiH, g, f0):
    """Internal face f's predicted flux and coupling as :func:`fluxes_and_system` makes
    them (faces before ``f0``: as predicted before)."""
    if f < f0:
        return phiH[f], g[f]
    w = weight[f]
    w1 = 1.0 - w
    s = 0.0
    s += (w * h0[o] + w1 * h0[n]) * sf[f, 0]
    s += (w * h1[o] + w1 * h1[n]) * sf[f, 1]
    s += (w * h2[o] + w1 * h2[n]) * sf[f, 2]
    return s, (w * rAU[o] + w1 * rAU[n]) * gdiff[f]


@nb.njit(cache=True)
def relax_pressure(p, p_prev, alpha):
    """``p = p_prev + alpha (p - p_prev)`` on every cell: ghosts too, since both are current."""
    for c in range(len(p)):
        p[c] = p_prev[c] + alpha * (p[c] - p_prev[c])


def correct_velocity(U, HbyA, rAU, grad, comps, n, work) -> None:
    """``U = H/A - (V/A) grad p`` on the ``n`` owned cells (``work``: scratch)."""
    for d in comps:
        np.multiply(rAU[:n], grad[d, :n], out=work[:n])
        np.subtract(HbyA[d, :n], work[:n], out=U[d, :n])


class Pressure:
    """The pressure equation of ``p`` (and its gradient ``grad``) on one rank, with the
    face fluxes ``phi`` it makes conservative.

    ``phiH`` (the predicted fluxes) and ``g`` (the Laplacian's face coefficients) are built
    from ``H/A`` and ``V/A``; ``n_nonorth`` correctors repeat the solve with the
    non-orthogonal part of the latest pressure on non-orthogonal meshes (``nonorth``)."""

    def __init__(self, p, grad, phi, ctx: Context, *, n_nonorth: int, singular: bool,
                 settings, halo: str, device=None):
        lm = ctx.lmesh
        fc, bc, comps, gradient, pattern = ctx.fc, ctx.bc, ctx.comps, ctx.gradient, ctx.pattern
        exchanger, red, workspace, scratch, timers = (ctx.exchanger, ctx.red, ctx.workspace,
                                                      ctx.scratch, ctx.timers)
        nonorth = ctx.nonorth
        nf = lm.n_faces
        self.p, self.grad, self.phi = p, grad, phi
        self.lm, self.fc, self.bc, self.comps, self.gradient = lm, fc, bc, comps, gradient
        self.owner = bc.visited_owner(lm)  # empty patches left out of the face loops
        self.axes = tuple(int(d) for d in comps)  # for the face kernels (see momentum.py)
        self.ex, self.red, self.ws, self.timers = exchanger, red, workspace, timers
        self.nonorth, self.n_nonorth, self.singular = nonorth, n_nonorth, singular
        self.cfg, self.halo = settings, halo
        self.krylov, self.precond = pressure_method(settings.method)
        # the vectors the method takes (CG and FCG: 4, fewer than the momentum solver's)
        self._vectors = {"cg1": CG1_VECTORS, "pipecg": PIPECG_VECTORS}.get(
            self.krylov.__name__, 4)
        workspace.reserve(self._vectors)
        self.sf = lm.geometry.face_areas
        self.P = DistMatrix(pattern, exchanger, timers)
        self.amg = None  # built from the first matrix
        self.amg_basis = None  # V/A of that matrix: a restart rebuilds the same hierarchy
        self._rau = None  # the V/A of the solve in progress
        self.compiled = None  # the whole AMG solve as one numba call, where available
        self.device = device  # a device backend the solve runs on (None: the host)
        if device is not None and settings.method != "amg-cg":
            from ..mpiutil import UserError

            raise UserError(f"solver.backend = {device.name!r} solves the pressure by amg-cg "
                            f"only so far (solver.pressure.method = {settings.method!r})")
        if device is not None and settings.agglomerate:
            from ..mpiutil import UserError

            raise UserError(f"solver.backend = {device.name!r} keeps every AMG level on every "
                            "rank so far: solver.pressure.agglomerate must be 0, not "
                            f"{settings.agglomerate}")
        self.phiH = np.zeros(nf)
        self.g = np.zeros(nf)
        self.phiH0 = np.zeros(nf) if nonorth else None
        # assembled here, copied into P: the scratch the momentum equation reuses
        self.diag = scratch.diag
        self.rhs, self.work = scratch.rhs, scratch.work
        self.p_field = (p,)
        self.normalised = None  # a NormalisedResidual: report OpenFOAM's initial residual
        self.last_guess = None  # a FinalGuess: where a step's last solve starts (PISO's)
        self.grad_fields = tuple(grad[e] for e in comps)
        self._assembled = False  # the system was assembled with the predicted fluxes
        self._gauss = gradient.scheme == "gauss"  # flux, gradient, velocity in one kernel
        self._face_blocks = None  # the face loops' thread blocks (face_blocks)
        self.grad_current = False  # ``grad`` is that of ``p`` (after :meth:`correct`)

    def face_blocks(self) -> tuple | None:
        """The arrays of the face loops' thread blocks (:mod:`..parallel.faceblocks`) while
        the threaded kernels are bound, else None; made once per thread count."""
        fb = for_threads(self._face_blocks, self.owner, self.lm.neighbour, self.lm.n_cells)
        self._face_blocks = fb
        return None if fb is None else fb.arrays()

    def predict_fluxes(self, HbyA, rAU, h_fields, system: bool = False,
                       matrix: bool = True) -> None:
        """``phiH`` and ``g`` from ``H/A`` and ``V/A``, exchanging ``h_fields`` (their owned
        components): interior faces need no ghost value, so with an overlapping strategy
        they are computed while the messages fly, interface and boundary faces after.
        ``system``: assemble the pressure equation in the same pass (its solve then starts
        from it; only where nothing changes ``phiH`` in between).  ``matrix=False``: ``V/A``
        is that of the last call, so ``g`` and the matrix stand and a one-thread rank makes
        the fluxes and the right-hand side alone (PISO's later correctors; the solve is
        then told ``new_matrix=False``)."""
        lm, bc, fc, T = self.lm, self.bc, self.fc, self.timers
        pre = (self.owner, lm.neighbour, fc.weight, self.sf, fc.gdiff, HbyA, rAU,
               bc.u_kind, bc.u_value, bc.p_kind, self.phiH, self.g)
        ni, nint = lm.n_internal, lm.n_interior
        f0 = nint if self.ex.overlaps else 0
        if f0:
            with T("halo"):
                h = self.ex.start(h_fields)
            with T("fluxes"):
                predicted_fluxes(*pre, 0, nint, False)
            with T("halo"):
                self.ex.finish(h)
        else:
            with T("halo"):
                self.ex.exchange(h_fields)
        fb = self.face_blocks() if system else None
        if system and not matrix and fb is None:
            with T("fluxes"):
                fluxes_and_rhs(*pre[:10], bc.p_value, *pre[10:], f0, lm.n_cells, self.rhs)
            self._assembled = True
            return
        if system:
            with T("fluxes"):
                if fb is None:
                    fluxes_and_system(*pre[:10], bc.p_value, *pre[10:], f0, lm.n_cells,
                                      self.diag, self.rhs)
                else:
                    fluxes_and_system_blocks(*pre[:10], bc.p_value, *pre[10:], f0, lm.n_cells,
                                             self.diag, self.rhs, *fb)
            self._assembled = True
            return
        with T("fluxes"):
            predicted_fluxes(*pre, f0, ni, True)

    def solve(self, rAU, final: bool, new_matrix: bool = True) -> SolveInfo:
        """The pressure equation from ``phiH``, solved into ``p``; on non-orthogonal meshes
        with the part from the latest pressure gradient, ghosts included, then
        ``n_nonorth`` repeats with the part from the pressure just solved.  ``final``: the
        step's last correction, whose last solve stops at ``final_rel_tol``.
        ``new_matrix``: ``rAU`` changed since the last solve; else the matrix (which only
        ``rAU`` and the boundary kinds make) is the one already filled and the AMG is not
        refreshed (PISO's later correctors: the same bits, one refresh less)."""
        cfg = self.cfg
        self._rau = rAU
        if not self.nonorth:
            return self._solve(new_matrix, cfg.final_rel_tol if final else cfg.rel_tol, final)
        lm, bc, fc, T = self.lm, self.bc, self.fc, self.timers
        self.phiH0[:] = self.phiH
        for k in range(1 + self.n_nonorth):
            if k:
                with T("halo"):
                    self.ex.exchange(self.p_field)
                with T("fluxes"):
                    self.gradient(self.p, bc.p_kind, bc.p_value, self.grad)
                self.phiH[:] = self.phiH0
            with T("halo"):
                self.ex.exchange(self.grad_fields)
            with T("fluxes"):
                nonorth_flux_correction(self.owner, lm.neighbour, fc.weight, fc.corr, rAU,
                                        self.grad, self.axes, self.phiH)
            final_solve = final and k == self.n_nonorth
            last = self._solve(k == 0 and new_matrix,
                               cfg.final_rel_tol if final_solve else cfg.rel_tol, final_solve)
            if k == 0:
                info = last
            else:
                info.iters += last.iters
                info.res, info.converged = last.res, info.converged and last.converged
        return info

    def _solve(self, first: bool, rel_tol: float, last: bool = False) -> SolveInfo:
        """Assemble and solve the pressure equation from ``phiH`` to ``tol`` or ``rel_tol``;
        ``first``: the matrix is new (filled from the assembly, the AMG refreshed); ``last``:
        the step's last solve, started along the previous step's last change where
        ``last_guess`` is set (its ``finish`` is the caller's, once ``p`` is exchanged; the
        normalised initial residual, a report, is that of the start before it)."""
        lm, bc, T = self.lm, self.bc, self.timers
        n = lm.n_owned
        with T("assemble"):
            if not self._assembled:
                pressure_system(self.owner, lm.neighbour, self.phiH, self.g, bc.p_kind,
                                bc.p_value, lm.n_cells, self.diag, self.rhs)
            self._assembled = False
            if first:
                self.P.fill_symmetric(self.diag, self.g)
            if self.singular:  # make the all-Neumann system consistent
                mean = self.red.sum(float(self.rhs[:n].sum()))[0] / lm.n_cells_global
                self.rhs[:n] -= mean
        res0 = self._normalised()
        guess = self.last_guess if last else None
        with T("solve_p"):
            if guess is not None:
                guess.start(self.P, self.rhs, self.p, self.red)
            cfg = self.cfg
            args = (self.P, self.rhs, self.p, cfg.tol, cfg.max_iter, self.red, self.ws)
            if self.precond == "amg":
                if self.amg is None:  # aggregates from the first matrix, then refreshed
                    self.first_amg(self._rau)
                elif first:
                    (self.compiled or self.amg).refresh()
                if self.compiled is not None:
                    info = self.compiled.solve(*args[1:5], self.ws, rel_tol)
                else:
                    info = self.krylov(*args, self.amg.apply, rel_tol)
            else:
                info = self.krylov(*args, rel_tol=rel_tol)
            if self.singular:  # pin the free constant: zero mean pressure
                mean = self.red.sum(float(self.p[:n].sum()))[0] / lm.n_cells_global
                self.p[:n] -= mean
        if res0 is not None:
            info.res0 = res0
        return info

    def _normalised(self):
        """OpenFOAM's normalised initial residual of the assembled system, or None unless
        asked for.  The pressure's ghosts are current: every correction exchanges them
        (:meth:`correct`, SIMPLE's update), as does each non-orthogonal repeat."""
        if self.normalised is None:
            return None
        return self.normalised(*self._rows)[0]

    def measure_normalised(self) -> None:
        """Report OpenFOAM's normalised initial residual (``solver.residual_norm``)."""
        lm = self.lm
        self.normalised = NormalisedResidual(self.P, (0,), lm.n_owned, lm.n_cells_global,
                                             self.red)
        self._rows = self.p.reshape(1, -1), self.rhs.reshape(1, -1)  # views, made once

    def device_profile(self) -> dict | None:
        """The device solve's copies and bytes each way so far (None on the host)."""
        return self.compiled.profile() if self.device is not None and self.compiled else None

    def first_amg(self, rau) -> None:
        """The AMG from the first matrix (in ``P``), made of ``V/A`` = ``rau``, which a
        restart keeps to build the same hierarchy."""
        self._rau = rau
        self._build_amg()
        self.amg_basis = rau.copy()

    def _build_amg(self) -> None:
        # the levels' work vectors in the workspace's rows the Krylov method leaves free:
        # the momentum solver's, idle while the pressure is solved
        self.amg = AMG(self.P, self.lm, self.red, strategy=self.halo, timers=self.timers,
                       cycle=self.cfg.cycle, work=self.ws.spare(self._vectors),
                       dims=len(self.comps), agglomerate=self.cfg.agglomerate,
                       aggregation=self.cfg.aggregation)
        if self.device is None:
            self.compiled = compiled_solver(self.amg, self.krylov)
        else:
            from ..linalg.device_solve import DeviceSolve

            aware = self.ex.space.name.startswith("device-aware")  # else MPI on host buffers
            self.compiled = DeviceSolve(self.amg, self.device, self.halo,
                                        "device-aware" if aware else "device")

    def state(self) -> tuple[dict, dict]:
        """For a restart: the V/A the AMG hierarchy was built from (its aggregates depend
        on that first matrix; a hierarchy built from a later one would precondition, and
        round, differently), and the entries the coarsest level's factors were made from
        (the factors are kept until the level moves away from them).  Nothing here changes
        the run."""
        if self.amg_basis is None:
            return {}, {}
        extra = {}
        basis = self.amg.factor_basis() if self.amg is not None else None
        if basis is not None:
            extra[FACTOR_BASIS] = base64.b64encode(basis.astype("<f8").tobytes()).decode()
        return {"amg_basis": (self.amg_basis, "cell")}, extra

    def restore(self, values: dict, extra: dict) -> None:
        """Rebuild the AMG from the matrix of the saved V/A (ghosts included), as the
        original run built it, with the coarsest level factored as it was; the next solve
        refreshes it with its own matrix."""
        if "amg_basis" not in values or self.precond != "amg":
            return
        lm, bc, fc = self.lm, self.bc, self.fc
        rau = values["amg_basis"].reshape(-1)
        predicted_fluxes(self.owner, lm.neighbour, fc.weight, self.sf, fc.gdiff,
                         np.zeros((3, lm.n_cells)), rau, bc.u_kind, bc.u_value, bc.p_kind,
                         self.phiH, self.g, 0, lm.n_internal, True)
        pressure_system(self.owner, lm.neighbour, self.phiH, self.g, bc.p_kind, bc.p_value,
                        lm.n_cells, self.diag, self.rhs)
        self.P.fill_symmetric(self.diag, self.g)
        self._build_amg()
        if FACTOR_BASIS in extra:
            self.amg.adopt_factor_basis(_basis_array(extra[FACTOR_BASIS]))
        else:  # a checkpoint without it: factored afresh at the next solve
            self.amg.refactor_next()
        self.amg_basis = rau.copy()

    def correct(self, U, HbyA, rAU, u_fields) -> None:
        """Conservative fluxes from the new pressure, its gradient, and the velocity that
        goes with them, ``U = H/A - (V/A) grad p`` (``u_fields`` exchanged).  The interior
        faces and the interior half of the gradient overlap the exchange of ``p``."""
        lm, bc, T = self.lm, self.bc, self.timers
        n = lm.n_owned
        ni, nint = lm.n_internal, lm.n_interior
        self.grad_current = True
        if self._gauss:
            args = (self.owner, lm.neighbour, self.fc.weight, self.sf, lm.geometry.cell_volumes,
                    self.phiH, self.g, self.p, bc.p_kind, bc.p_value, self.phi, self.grad,
                    U, HbyA, rAU, self.axes, n)
            f0 = nint if self.ex.overlaps else 0
            with T("halo"):
                if f0:
                    h = self.ex.start(self.p_field)
                else:
                    self.ex.exchange(self.p_field)
            fb = self.face_blocks()
            kern, fb = (correct_gauss, ()) if fb is None else (correct_gauss_blocks, fb)
            if f0:
                with T("fluxes"):
                    kern(*args, 0, nint, False, *fb)
                with T("halo"):
                    self.ex.finish(h)
            with T("fluxes"):
                kern(*args, f0, ni, True, *fb)
            with T("halo"):
                self.ex.exchange(u_fields)
            return
        cor = (self.owner, lm.neighbour, self.phiH, self.g, self.p, bc.p_kind, bc.p_value,
               self.phi)
        grd = (self.p, bc.p_kind, bc.p_value, self.grad)
        with T("halo"):
            h = self.ex.start(self.p_field)
        with T("fluxes"):
            if self.ex.overlaps:
                correct_fluxes(*cor, 0, nint, False)
                self.gradient.part(*grd, True)
        with T("halo"):
            self.ex.finish(h)
        with T("fluxes"):
            correct_fluxes(*cor, nint if self.ex.overlaps else 0, ni, True)
            if not self.ex.overlaps:
                self.gradient.part(*grd, True)
            self.gradient.part(*grd, False)
            correct_velocity(U, HbyA, rAU, self.grad, self.comps, n, self.work)
        with T("halo"):
            self.ex.exchange(u_fields)
