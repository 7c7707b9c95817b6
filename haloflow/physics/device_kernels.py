"""The PISO step's own kernels on the ``cuda`` backend: assembly, fluxes, corrections.

Each kernel is the device twin of a host kernel of :mod:`haloflow.physics`: the same
operations in the same order, hence the same values bit for bit in numba's simulator (on a
GPU, NVVM fuses a multiply and an add into one rounding where it can, so the values agree
to round-off there).  The host kernels loop over faces and add each face's share into
its two cells; on a GPU two faces of one cell would race.  Here one thread per owned cell
gathers its faces' shares instead, from a list of the cell's faces in ascending order
(internal faces, then boundary faces: the host's order), so every cell sees the host's
additions in the host's order.  Per-face values (coefficients, fluxes) take a thread per
face.  Only the step's norms sum over cells, by atomic adds: those agree to round-off.

A cell's internal faces are coded ``2 f + side``, side 0 where the cell owns face ``f`` and
1 where it is the neighbour.  Empty faces are left out of the boundary lists: on the host
they add nothing (a zero flux, no coefficient).
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from .patches import EMPTY, FIXED, SYMMETRY, ZERO_GRADIENT


def cell_faces(lmesh, owner, kinds) -> tuple[np.ndarray, ...]:
    """``(ptr, entries, bptr, bfaces)``: per owned cell, its internal faces coded ``2 f +
    side`` in ascending order, and its boundary faces (of ``owner``, the visited faces;
    ``kinds``: the velocity's, to leave empty faces out) in ascending order."""
    n, ni = lmesh.n_owned, lmesh.n_internal
    nbr = lmesh.neighbour
    f = np.arange(ni, dtype=np.int64)
    cells = np.concatenate([owner[:ni], nbr]).astype(np.int64)
    codes = np.concatenate([2 * f, 2 * f + 1])
    keep = cells < n
    cells, codes = cells[keep], codes[keep]
    order = np.lexsort((codes, cells))
    ptr = np.searchsorted(cells[order], np.arange(n + 1)).astype(np.int64)
    bf = np.arange(ni, len(owner), dtype=np.int64)
    bf = bf[kinds[:len(bf)] != EMPTY]
    bc = np.asarray(owner[bf], dtype=np.int64)
    border = np.lexsort((bf, bc))
    bptr = np.searchsorted(bc[border], np.arange(n + 1)).astype(np.int64)
    return ptr, codes[order], bptr, bf[border]


@cuda.jit
def momentum_cells(ptr, ent, bptr, bfc, owner, neighbour, weight, phi, gdiff, nu_f, vol, dt,
                   ukind, uvalue, sf, u0, u1, u2, t0, t1, t2, linear, solved, diag, b0, b1,
                   b2, data, diag_pos, ni, n):
    """``momentum.momentum_system``'s diagonal and right-hand side of owned cell ``c``
    (written into the CSR data too); ``t*``: the time term's velocity, ``u*``: the
    convected one; ``solved[d]``: component ``d`` is solved."""
    c = cuda.grid(1)
    if c >= n:
        return
    per_face = nu_f.size > 1
    dg = vol[c] / dt
    a0 = vol[c] / dt * t0[c]
    a1 = vol[c] / dt * t1[c]
    a2 = vol[c] / dt * t2[c]
    for k in range(ptr[c], ptr[c + 1]):
        e = ent[k]
        f = e >> 1
        F = phi[f]
        D = nu_f[f if per_face else 0] * gdiff[f]
        if e & 1 == 0:
            dg += D + max(F, 0.0)
        else:
            dg += D - min(F, 0.0)
        if linear:
            o = owner[f]
            m = neighbour[f]
            w = weight[f]
            up0 = u0[o] if F >= 0.0 else u0[m]
            up1 = u1[o] if F >= 0.0 else u1[m]
            up2 = u2[o] if F >= 0.0 else u2[m]
            c0 = F * (w * u0[o] + (1.0 - w) * u0[m] - up0)
            c1 = F * (w * u1[o] + (1.0 - w) * u1[m] - up1)
            c2 = F * (w * u2[o] + (1.0 - w) * u2[m] - up2)
            if e & 1 == 0:
                a0 -= c0
                a1 -= c1
                a2 -= c2
            else:
                a0 += c0
                a1 += c1
                a2 += c2
    for k in range(bptr[c], bptr[c + 1]):
        f = bfc[k]
        b = f - ni
        kind = ukind[b]
        if kind == FIXED:
            D = nu_f[f if per_face else 0] * gdiff[f]
            dg += D
            coef = D - phi[f]
            a0 += coef * uvalue[b, 0]
            a1 += coef * uvalue[b, 1]
            a2 += coef * uvalue[b, 2]
        elif kind == SYMMETRY:
            coef = 0.5 * nu_f[f if per_face else 0] * gdiff[f]
            dg += coef
            mag = math.sqrt(sf[f, 0] ** 2 + sf[f, 1] ** 2 + sf[f, 2] ** 2)
            un = 0.0
            un += u0[c] * sf[f, 0] / mag
            un += u1[c] * sf[f, 1] / mag
            un += u2[c] * sf[f, 2] / mag
            a0 += coef * (u0[c] - 2.0 * un * sf[f, 0] / mag)
            a1 += coef * (u1[c] - 2.0 * un * sf[f, 1] / mag)
            a2 += coef * (u2[c] - 2.0 * un * sf[f, 2] / mag)
        else:  # zero gradient: outflow carries the cell value, inflow explicit
            F = phi[f]
            dg += max(F, 0.0)
            if F < 0.0:
                a0 -= F * u0[c]
                a1 -= F * u1[c]
                a2 -= F * u2[c]
    diag[c] = dg
    data[diag_pos[c]] = dg
    if solved[0]:
        b0[c] = a0
    if solved[1]:
        b1[c] = a1
    if solved[2]:
        b2[c] = a2


@cuda.jit
def momentum_faces(owner, neighbour, phi, gdiff, nu_f, upper_pos, lower_pos, data, ni):
    """The off-diagonal coefficients of internal face ``f`` into the CSR data."""
    f = cuda.grid(1)
    if f >= ni:
        return
    F = phi[f]
    D = nu_f[f if nu_f.size > 1 else 0] * gdiff[f]
    if upper_pos[f] >= 0:
        data[upper_pos[f]] = -D + min(F, 0.0)
    if lower_pos[f] >= 0:
        data[lower_pos[f]] = -D - max(F, 0.0)


@cuda.jit
def inverse(x, out, n):
    """``out = 1 / x``: the Jacobi preconditioner from the diagonal."""
    i = cuda.grid(1)
    if i < n:
        out[i] = 1.0 / x[i]


@cuda.jit
def momentum_rhs(b0, vol, grad, rhs, n):
    """``rhs = b0 - V grad p`` of one component (``momentum.momentum_rhs``)."""
    i = cuda.grid(1)
    if i < n:
        rhs[i] = b0[i] - vol[i] * grad[i]


@cuda.jit
def h_by_a(ip, ix, data, dp, diag, u0, u1, u2, b0, b1, b2, vol, solved, h0, h1, h2, rau, n):
    """``momentum.h_by_a_kernel`` of row ``i``: the neighbour sums in row order."""
    i = cuda.grid(1)
    if i >= n:
        return
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    for k in range(ip[i], ip[i + 1]):
        if k != dp[i]:
            a = data[k]
            j = ix[k]
            s0 += a * u0[j]
            s1 += a * u1[j]
            s2 += a * u2[j]
    if solved[0]:
        h0[i] = (b0[i] - s0) / diag[i]
    if solved[1]:
        h1[i] = (b1[i] - s1) / diag[i]
    if solved[2]:
        h2[i] = (b2[i] - s2) / diag[i]
    rau[i] = vol[i] / diag[i]


@cuda.jit
def face_fluxes(owner, neighbour, weight, sf, gdiff, h0, h1, h2, rau, ukind, uvalue, pkind,
                phiH, g, upper_pos, lower_pos, data, write, ni, nvis):
    """``pressure.fluxes_and_system``'s face values: the predicted flux and the Laplacian
    coefficient of face ``f`` (with its off-diagonal entries if ``write``), boundary faces
    as ``pressure._boundary_fluxes``."""
    f = cuda.grid(1)
    if f >= nvis:
        return
    o = owner[f]
    if f < ni:
        m = neighbour[f]
        w = weight[f]
        w1 = 1.0 - w
        s = 0.0
        s += (w * h0[o] + w1 * h0[m]) * sf[f, 0]
        s += (w * h1[o] + w1 * h1[m]) * sf[f, 1]
        s += (w * h2[o] + w1 * h2[m]) * sf[f, 2]
        gf = (w * rau[o] + w1 * rau[m]) * gdiff[f]
        phiH[f] = s
        g[f] = gf
        if write:
            if upper_pos[f] >= 0:
                data[upper_pos[f]] = -gf
            if lower_pos[f] >= 0:
                data[lower_pos[f]] = -gf
        return
    b = f - ni
    kind = ukind[b]
    s = 0.0
    if kind == FIXED:
        for d in range(3):
            s += uvalue[b, d] * sf[f, d]
    elif kind == ZERO_GRADIENT:
        s += h0[o] * sf[f, 0]
        s += h1[o] * sf[f, 1]
        s += h2[o] * sf[f, 2]
    phiH[f] = s
    g[f] = rau[o] * gdiff[f] if pkind[b] == FIXED else 0.0


@cuda.jit
def pressure_cells(ptr, ent, bptr, bfc, phiH, g, pkind, pvalue, rhs, data, diag_pos, write,
                   ni, n):
    """``pressure.pressure_system`` of owned cell ``c``: the right-hand side and, if
    ``write``, the diagonal into the CSR data."""
    c = cuda.grid(1)
    if c >= n:
        return
    dg = 0.0
    r = 0.0
    for k in range(ptr[c], ptr[c + 1]):
        e = ent[k]
        f = e >> 1
        dg += g[f]
        if e & 1 == 0:
            r -= phiH[f]
        else:
            r += phiH[f]
    for k in range(bptr[c], bptr[c + 1]):
        f = bfc[k]
        b = f - ni
        r -= phiH[f]
        if pkind[b] == FIXED:
            dg += g[f]
            r += g[f] * pvalue[b]
    rhs[c] = r
    if write:
        data[diag_pos[c]] = dg


@cuda.jit
def correct_faces(owner, neighbour, phiH, g, p, pkind, pvalue, phi, ni, nvis):
    """``pressure.correct_fluxes`` of face ``f``: the conservative flux."""
    f = cuda.grid(1)
    if f >= nvis:
        return
    if f < ni:
        phi[f] = phiH[f] - g[f] * (p[neighbour[f]] - p[owner[f]])
        return
    b = f - ni
    if pkind[b] == FIXED:
        phi[f] = phiH[f] - g[f] * (pvalue[b] - p[owner[f]])
    else:
        phi[f] = phiH[f]


@cuda.jit
def correct_cells(ptr, ent, bptr, bfc, owner, neighbour, weight, sf, vol, p, pkind, pvalue,
                  h0, h1, h2, rau, solved, g0, g1, g2, u0, u1, u2, ni, n):
    """``pressure.correct_gauss`` of owned cell ``c``: the Gauss gradient of ``p`` and the
    velocity ``H/A - (V/A) grad p``."""
    c = cuda.grid(1)
    if c >= n:
        return
    a0 = 0.0
    a1 = 0.0
    a2 = 0.0
    for k in range(ptr[c], ptr[c + 1]):
        e = ent[k]
        f = e >> 1
        w = weight[f]
        pf = w * p[owner[f]] + (1.0 - w) * p[neighbour[f]]
        if e & 1 == 0:
            a0 += pf * sf[f, 0]
            a1 += pf * sf[f, 1]
            a2 += pf * sf[f, 2]
        else:
            a0 -= pf * sf[f, 0]
            a1 -= pf * sf[f, 1]
            a2 -= pf * sf[f, 2]
    for k in range(bptr[c], bptr[c + 1]):
        f = bfc[k]
        b = f - ni
        pf = pvalue[b] if pkind[b] == FIXED else p[c]
        a0 += pf * sf[f, 0]
        a1 += pf * sf[f, 1]
        a2 += pf * sf[f, 2]
    iv = 1.0 / vol[c]
    a0 *= iv
    a1 *= iv
    a2 *= iv
    g0[c] = a0
    g1[c] = a1
    g2[c] = a2
    r = rau[c]
    if solved[0]:
        u0[c] = h0[c] - r * a0
    if solved[1]:
        u1[c] = h1[c] - r * a1
    if solved[2]:
        u2[c] = h2[c] - r * a2


@cuda.jit
def step_norms(ptr, ent, bptr, bfc, phi, u0, u1, u2, t0, t1, t2, vol, solved, n, out):
    """``monitor.step_norms``: ``out += (sum |net outflow|, sum V |U - U_old|^2, sum V
    |U|^2)``, each cell's outflow summed in the host's order, the cells by atomic adds."""
    dv = 0.0
    a = 0.0
    b = 0.0
    for c in range(cuda.grid(1), n, cuda.gridsize(1)):
        w = 0.0
        for k in range(ptr[c], ptr[c + 1]):
            e = ent[k]
            if e & 1 == 0:
                w += phi[e >> 1]
            else:
                w -= phi[e >> 1]
        for k in range(bptr[c], bptr[c + 1]):
            w += phi[bfc[k]]
        dv += abs(w)
        v = vol[c]
        if solved[0]:
            du = u0[c] - t0[c]
            a += v * du * du
            b += v * u0[c] * u0[c]
        if solved[1]:
            du = u1[c] - t1[c]
            a += v * du * du
            b += v * u1[c] * u1[c]
        if solved[2]:
            du = u2[c] - t2[c]
            a += v * du * du
            b += v * u2[c] * u2[c]
    cuda.atomic.add(out, 0, dv)
    cuda.atomic.add(out, 1, a)
    cuda.atomic.add(out, 2, b)


@cuda.jit
def total(x, n, out):
    """``out[0] += sum(x[:n])``."""
    s = 0.0
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        s += x[i]
    cuda.atomic.add(out, 0, s)


@cuda.jit
def shift(x, a, n):
    """``x[:n] -= a``."""
    i = cuda.grid(1)
    if i < n:
        x[i] -= a


@cuda.jit
def extrapolate(u, prev, n):
    """``u = 2 u - prev`` on the first ``n`` rows (``time.extrapolate``)."""
    i = cuda.grid(1)
    if i < n:
        u[i] = 2.0 * u[i] - prev[i]


@cuda.jit
def projection_sums(ip, ix, data, p, d, b, n, out):
    """``final_guess.projection_sums``: ``out += (d . (b - A p), d . A d)``, each row's
    products in the host's order, the rows by atomic adds."""
    dr = 0.0
    dq = 0.0
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        ap = 0.0
        ad = 0.0
        for k in range(ip[i], ip[i + 1]):
            a = data[k]
            j = ix[k]
            ap += a * p[j]
            ad += a * d[j]
        dr += d[i] * (b[i] - ap)
        dq += d[i] * ad
    cuda.atomic.add(out, 0, dr)
    cuda.atomic.add(out, 1, dq)


@cuda.jit
def move_on(p, d, theta, n, nc):
    """``p += theta d`` on the ``n`` owned rows, ``d = p`` as it was on all ``nc``
    (``final_guess.move_on``)."""
    i = cuda.grid(1)
    if i < n:
        t = p[i]
        p[i] = t + theta * d[i]
        d[i] = t
    elif i < nc:
        d[i] = p[i]


@cuda.jit
def change_since(p, d, n):
    """``d = p - d`` on the first ``n`` rows (``final_guess.change_since``)."""
    i = cuda.grid(1)
    if i < n:
        d[i] = p[i] - d[i]
