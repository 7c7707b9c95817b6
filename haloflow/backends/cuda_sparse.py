"""Sparse kernels of the ``cuda`` backend: the pressure solve's CSR products, Gauss-Seidel
sweeps, transfers between AMG levels and the fused dot products, on device arrays.

Each kernel computes what its host twin in :mod:`haloflow.linalg.amg` and
:mod:`haloflow.linalg.krylov` computes, row by row in the same order: a product or residual
sums a row's entries as the host does, a sweep updates its rows wavefront by wavefront
(:mod:`haloflow.linalg.wavefronts`: the sequential sweep's values, bit for bit).  Sums over
rows are where the two differ: a dot product's partial sums meet by atomic adds, and so do
a restriction's contributions to an aggregate, in whatever order the threads finish, so
results agree with the host's to round-off (and from one device run to the next, too).
A reduction's result is read back to the host, which needs it to decide the next step: 8
bytes a scalar, counted with every other copy by the caller.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

MAX_DOTS = 5  # scalars one fused reduction returns (the K-cycle's first step: five)


@cuda.jit
def _spmv(ip, ix, data, x, y, n):
    i = cuda.grid(1)
    if i < n:
        s = 0.0
        for k in range(ip[i], ip[i + 1]):
            s += data[k] * x[ix[k]]
        y[i] = s


@cuda.jit
def _residual(ip, ix, data, x, b, r, n):
    i = cuda.grid(1)
    if i < n:
        s = b[i]
        for k in range(ip[i], ip[i + 1]):
            s -= data[k] * x[ix[k]]
        r[i] = s


@cuda.jit
def _gs_wave(ip, ix, data, dinv, b, x, rows, lo, hi):
    """``amg._gs_row`` on the rows of one wavefront."""
    t = cuda.grid(1)
    if t < hi - lo:
        i = rows[lo + t]
        s = b[i]
        for k in range(ip[i], ip[i + 1]):
            s -= data[k] * x[ix[k]]
        x[i] += s * dinv[i]


@cuda.jit
def _gs_from_zero_wave(ip, ix, data, dp, dinv, b, x, rows, lo, hi):
    """``amg.gs_from_zero`` on the rows of one wavefront: the lower half of each row."""
    t = cuda.grid(1)
    if t < hi - lo:
        i = rows[lo + t]
        s = b[i]
        for k in range(ip[i], dp[i]):
            s -= data[k] * x[ix[k]]
        x[i] = s * dinv[i]


@cuda.jit
def _upper_restrict(ip, ix, data, dp, dinv, x, agg, rc, n, l1_term):
    """``amg.upper_residual_restrict`` (``l1_term``) or the residual of
    ``amg.gs_from_zero_restrict`` (without it: l1 = a_ii there): ``rc[agg[i]] += (b - A
    x)_i`` right after a sweep from zero, from the upper half of each row."""
    i = cuda.grid(1)
    if i < n:
        d = dp[i]
        s = (1.0 / dinv[i] - data[d]) * x[i] if l1_term else 0.0
        for k in range(d + 1, ip[i + 1]):
            s -= data[k] * x[ix[k]]
        cuda.atomic.add(rc, agg[i], s)


@cuda.jit
def _residual_restrict(ip, ix, data, x, b, agg, rc, n):
    i = cuda.grid(1)
    if i < n:
        s = b[i]
        for k in range(ip[i], ip[i + 1]):
            s -= data[k] * x[ix[k]]
        cuda.atomic.add(rc, agg[i], s)


@cuda.jit
def _prolong_add(agg, e, x, n):
    i = cuda.grid(1)
    if i < n:
        x[i] += e[agg[i]]


@cuda.jit
def _gather(v, idx, out, n):
    """out = v[idx] (a transfer's values, or the redundant level's entries of this rank)."""
    t = cuda.grid(1)
    if t < n:
        out[t] = v[idx[t]]


@cuda.jit
def _scatter(v, idx, vals, n, add):
    """v[idx] += vals (``add``: partial sums from other ranks) or v[idx] = vals."""
    t = cuda.grid(1)
    if t < n:
        if add:
            cuda.atomic.add(v, idx[t], vals[t])
        else:
            v[idx[t]] = vals[t]


@cuda.jit
def _fill(x, value, n):
    i = cuda.grid(1)
    if i < n:
        x[i] = value


@cuda.jit
def _copy(src, dst, n):
    i = cuda.grid(1)
    if i < n:
        dst[i] = src[i]


@cuda.jit
def _axpy_into(out, b, a, v, n):
    """out = b - a v (``amg._axpy_into``)."""
    i = cuda.grid(1)
    if i < n:
        out[i] = b[i] - a * v[i]


@cuda.jit
def _combine(x, a, c, b, d, n):
    i = cuda.grid(1)
    if i < n:
        x[i] = a * c[i] + b * d[i]


@cuda.jit
def _scale_into(x, a, c, n):
    i = cuda.grid(1)
    if i < n:
        x[i] = a * c[i]


@cuda.jit
def _direction(z, beta, p, n):
    """p = z - beta p (``krylov._fcg_direction``)."""
    i = cuda.grid(1)
    if i < n:
        p[i] = z[i] - beta * p[i]


@cuda.jit
def _dots(us, vs, n, out):
    """``out[j] += us[j] . vs[j]`` for each pair: a thread's share of the rows (grid-stride),
    then one atomic add per scalar and thread."""
    acc = cuda.local.array(MAX_DOTS, np.float64)
    m = len(us)
    for j in range(m):
        acc[j] = 0.0
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, n, stride):
        for j in range(m):
            acc[j] += us[j][i] * vs[j][i]
    for j in range(m):
        cuda.atomic.add(out, j, acc[j])


@cuda.jit
def _fcg_step(x, r, p, q, alpha, n, out):
    """x += alpha p; r -= alpha q; out[0] += r.r (``krylov._fcg_update``)."""
    rr = 0.0
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, n, stride):
        x[i] += alpha * p[i]
        ri = r[i] - alpha * q[i]
        r[i] = ri
        rr += ri * ri
    cuda.atomic.add(out, 0, rr)


@cuda.jit
def _axpy(alpha, x, y, n):
    i = cuda.grid(1)
    if i < n:
        y[i] += alpha * x[i]


@cuda.jit
def _bicg_p(p, r, v, beta, omega, invd, phat, n):
    """``krylov._bicg_p``: the new direction and its Jacobi-preconditioned image."""
    i = cuda.grid(1)
    if i < n:
        pi = r[i] + beta * (p[i] - omega * v[i])
        p[i] = pi
        phat[i] = invd[i] * pi


@cuda.jit
def _bicg_s(s, r, v, alpha, invd, shat, n):
    i = cuda.grid(1)
    if i < n:
        si = r[i] - alpha * v[i]
        s[i] = si
        shat[i] = invd[i] * si


@cuda.jit
def _bicg_xr(x, phat, shat, r, s, t, alpha, omega, r0, n, out):
    """``krylov._bicg_xr``: x += alpha phat + omega shat; r = s - omega t; out += (r0.r,
    r.r)."""
    a = 0.0
    b = 0.0
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, n, stride):
        x[i] += alpha * phat[i] + omega * shat[i]
        ri = s[i] - omega * t[i]
        r[i] = ri
        a += r0[i] * ri
        b += ri * ri
    cuda.atomic.add(out, 0, a)
    cuda.atomic.add(out, 1, b)


@cuda.jit
def _spmv_dots(ip, ix, data, p, q, r, n, out):
    """q = A p, out += (p.q, p.r, q.q, q.r) (``compiled_krylov._spmv_dots4``)."""
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    s4 = 0.0
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, n, stride):
        qi = 0.0
        for k in range(ip[i], ip[i + 1]):
            qi += data[k] * p[ix[k]]
        q[i] = qi
        s1 += p[i] * qi
        s2 += p[i] * r[i]
        s3 += qi * qi
        s4 += qi * r[i]
    cuda.atomic.add(out, 0, s1)
    cuda.atomic.add(out, 1, s2)
    cuda.atomic.add(out, 2, s3)
    cuda.atomic.add(out, 3, s4)


@cuda.jit
def _gather_sums(ptr, ent, src, out, m):
    """``out[e] = sum of src[ent[k]]`` for ``k`` in ``ptr[e]:ptr[e + 1]``, in that order
    from zero (``amg.galerkin_refresh``'s additions into entry ``e``, as the host makes
    them)."""
    e = cuda.grid(1)
    if e < m:
        s = 0.0
        for k in range(ptr[e], ptr[e + 1]):
            s += src[ent[k]]
        out[e] = s


@cuda.jit
def _l1_inverse(ip, ix, data, dp, n, out):
    """``amg.l1_inverse`` of row ``i``."""
    i = cuda.grid(1)
    if i < n:
        s = data[dp[i]]
        for k in range(ip[i], ip[i + 1]):
            if ix[k] >= n:
                s += abs(data[k])
        out[i] = 1.0 / s


class CudaSparse:
    """Launches of the kernels above with the backend's block size.  A fused reduction
    leaves its scalars in a small device array, zeroed before, read back after: ``reads``
    and ``read_bytes`` count those copies."""

    def __init__(self, threads: int, reduction_blocks: int):
        self.t = threads
        self.rb = reduction_blocks  # blocks of a reduction: a grid-stride share each
        self._out = cuda.device_array(MAX_DOTS, dtype=np.float64)
        self._host = cuda.pinned_array(MAX_DOTS, dtype=np.float64)
        self.reads = 0
        self.read_bytes = 0

    def grid(self, n):
        """A launch of one thread per item of ``n``."""
        return (max(n, 1) + self.t - 1) // self.t, self.t

    def reduction_grid(self, n):
        return min((max(n, 1) + self.t - 1) // self.t, self.rb), self.t

    def _result(self, m):
        self._out.copy_to_host(self._host)
        self.reads += 1
        self.read_bytes += 8 * MAX_DOTS
        return tuple(float(v) for v in self._host[:m])

    def reduce(self, kernel, n, m, *args) -> tuple:
        """``m`` scalars of a reduction ``kernel`` over ``n`` items (its last argument the
        output it adds into), zeroed before and read back after, counted as the others."""
        self._zero_out()
        kernel[self.reduction_grid(n)](*args, self._out)
        return self._result(m)

    def _zero_out(self):
        _fill[1, MAX_DOTS](self._out, 0.0, MAX_DOTS)

    # products and sweeps -----------------------------------------------------------------
    def spmv(self, m, x, y):
        _spmv[self.grid(m.n)](m.ip, m.ix, m.data, x, y, m.n)

    def residual(self, m, x, b, r):
        _residual[self.grid(m.n)](m.ip, m.ix, m.data, x, b, r, m.n)

    def gs_sweep(self, m, b, x, forward: bool, schedule=None):
        """One Gauss-Seidel sweep, wavefront after wavefront: over every owned row, or over
        the rows of ``schedule`` (``(rows, ptr)`` of :func:`haloflow.linalg.wavefronts.wavefronts`,
        rows as a device array; default ``m.sweep``)."""
        rows, ptr = m.sweep if schedule is None else schedule
        waves = range(len(ptr) - 1) if forward else range(len(ptr) - 2, -1, -1)
        for w in waves:
            lo, hi = int(ptr[w]), int(ptr[w + 1])
            _gs_wave[self.grid(hi - lo)](m.ip, m.ix, m.data, m.dinv, b, x, rows, lo, hi)

    def gs_from_zero(self, m, b, x):
        rows, ptr = m.sweep
        for w in range(len(ptr) - 1):
            lo, hi = int(ptr[w]), int(ptr[w + 1])
            _gs_from_zero_wave[self.grid(hi - lo)](m.ip, m.ix, m.data, m.dp, m.dinv, b, x,
                                                    rows, lo, hi)

    def upper_restrict(self, m, x, agg, rc, nc, l1_term: bool):
        self.fill(rc, 0.0, nc)
        _upper_restrict[self.grid(m.n)](m.ip, m.ix, m.data, m.dp, m.dinv, x, agg, rc, m.n,
                                         l1_term)

    def residual_restrict(self, m, x, b, agg, rc, nc):
        self.fill(rc, 0.0, nc)
        _residual_restrict[self.grid(m.n)](m.ip, m.ix, m.data, x, b, agg, rc, m.n)

    def prolong_add(self, agg, e, x, n):
        _prolong_add[self.grid(n)](agg, e, x, n)

    # vectors ----------------------------------------------------------------------------
    def gather_sums(self, ptr, ent, src, out, m):
        _gather_sums[self.grid(m)](ptr, ent, src, out, m)

    def l1_inverse(self, m):
        _l1_inverse[self.grid(m.n)](m.ip, m.ix, m.data, m.dp, m.n, m.dinv)

    def gather(self, v, idx, out, n):
        if n:
            _gather[self.grid(n)](v, idx, out, n)

    def scatter(self, v, idx, vals, n, add: bool):
        if n:
            _scatter[self.grid(n)](v, idx, vals, n, add)

    def fill(self, x, value, n):
        _fill[self.grid(n)](x, value, n)

    def copy(self, src, dst, n):
        _copy[self.grid(n)](src, dst, n)

    def axpy_into(self, out, b, a, v, n):
        _axpy_into[self.grid(n)](out, b, a, v, n)

    def combine(self, x, a, c, b, d, n):
        _combine[self.grid(n)](x, a, c, b, d, n)

    def scale_into(self, x, a, c, n):
        _scale_into[self.grid(n)](x, a, c, n)

    def direction(self, z, beta, p, n):
        _direction[self.grid(n)](z, beta, p, n)

    def axpy(self, alpha, x, y, n):
        _axpy[self.grid(n)](alpha, x, y, n)

    def bicg_p(self, p, r, v, beta, omega, invd, phat, n):
        _bicg_p[self.grid(n)](p, r, v, beta, omega, invd, phat, n)

    def bicg_s(self, s, r, v, alpha, invd, shat, n):
        _bicg_s[self.grid(n)](s, r, v, alpha, invd, shat, n)

    # fused reductions -------------------------------------------------------------------
    def bicg_xr(self, x, phat, shat, r, s, t, alpha, omega, r0, n):
        self._zero_out()
        _bicg_xr[self.reduction_grid(n)](x, phat, shat, r, s, t, alpha, omega, r0, n, self._out)
        return self._result(2)

    def dots(self, pairs, n):
        """``tuple(u . v for u, v in pairs)``, one launch and one read-back."""
        self._zero_out()
        us = tuple(u for u, _ in pairs)
        vs = tuple(v for _, v in pairs)
        _dots[self.reduction_grid(n)](us, vs, n, self._out)
        return self._result(len(pairs))

    def fcg_step(self, x, r, p, q, alpha, n):
        self._zero_out()
        _fcg_step[self.reduction_grid(n)](x, r, p, q, alpha, n, self._out)
        return self._result(1)[0]

    def spmv_dots(self, m, p, q, r):
        self._zero_out()
        _spmv_dots[self.reduction_grid(m.n)](m.ip, m.ix, m.data, p, q, r, m.n, self._out)
        return self._result(4)
