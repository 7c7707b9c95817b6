"""The AMG-preconditioned pressure solve on a device backend (``solver.backend = "cuda"``).

The hierarchy is the host's (:class:`.amg.AMG`: aggregates, Galerkin coefficients, smoother
diagonals and the coarsest level's factors, remade at each refresh); its levels are copied
to the device once and their coefficients at every refresh.  A solve copies the right-hand
side and the first guess in, runs FCG(1) with the K-cycle (or AMLI, or V) cycle on the
device, kernel for kernel the arithmetic of ``krylov.fcg`` with ``AMG.apply``
(:mod:`haloflow.backends.cuda_sparse`), and copies the answer out.  Two things cross
PCI-E during a solve: each fused reduction's scalars, which the host needs to steer the
iteration, and the coarsest level's right-hand side and solution (at most a few thousand
values), which the host's sparse Cholesky solves.  Every copy and its bytes is counted in
``stats`` (profile.json's ``device`` table).

Serial runs on meshes without ghost columns only, so far: a parallel run's levels exchange
halos and send aggregates across ranks, which the device path does not do yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from .amg import KCYCLE_T, VECTORS, lu_solve
from .krylov import SolveInfo, initial_info
from .wavefronts import wavefronts


class DeviceSolveUnsupported(ValueError):
    """The run asks for something the device solve cannot do yet; says what, in one line."""


@dataclass
class Transfers:
    """Copies between host and device memory and their bytes, each way."""

    to_device: int = 0
    to_device_bytes: int = 0
    to_host: int = 0
    to_host_bytes: int = 0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def check(amg) -> None:
    """Raise :class:`DeviceSolveUnsupported` unless ``amg``'s solve can run on a device."""
    if amg.red.parallel:
        raise DeviceSolveUnsupported("solver.backend = \"cuda\" runs on one rank only so far")
    if any(lev.ncols != lev.n for lev in amg.levels):
        raise DeviceSolveUnsupported("solver.backend = \"cuda\" needs a mesh without "
                                     "periodic or other ghost columns on one rank so far")
    last = amg.levels[-1]
    if last.lu is None or last.next is not None:
        raise DeviceSolveUnsupported("solver.backend = \"cuda\": the AMG hierarchy has no "
                                     "factored coarsest level")


class DeviceSolve:
    """``refresh()`` and ``solve(b, x, tol, max_iter, ws, rel_tol)`` as the compiled host
    solve (:class:`.kcycle.CompiledSolve`) has them, on ``backend``'s device."""

    def __init__(self, amg, backend):
        check(amg)
        self.amg, self.be = amg, backend
        self.k = backend.sparse()
        self.stats = Transfers()
        self.levels = [self._level(i, lev) for i, lev in enumerate(amg.levels)]
        n = amg.levels[0].n
        self.top = SimpleNamespace(**{name: backend.empty(max(n, 1))
                                      for name in ("b", "x", "r", "z", "p", "q")})
        m = max(amg.levels[-1].n, 1)  # the coarsest level's vectors, on both sides
        self._coarse = (backend.host_empty(m), backend.host_empty(m))
        self._coarse_dev = (backend.empty(m), backend.empty(m))
        self._upload_coefficients()

    # -- the hierarchy on the device --------------------------------------------------------------
    def _put(self, a, dtype=None):
        a = np.ascontiguousarray(a if dtype is None else a.astype(dtype, copy=False))
        self.stats.to_device += 1
        self.stats.to_device_bytes += a.nbytes
        return self.be.put(a)

    def _level(self, i, lev):
        """A level's pattern, wavefronts and aggregates on the device (once), its
        coefficients and work vectors allocated (the coarsest level: neither)."""
        coarsest = lev.next is None
        d = SimpleNamespace(n=lev.n, split=bool(lev.split), krylov=lev.krylov,
                            coarsest=coarsest)
        if coarsest:
            return d
        rows, ptr = wavefronts(lev.indptr, lev.indices, lev.n)
        d.ip, d.ix, d.dp = self._put(lev.indptr), self._put(lev.indices), self._put(lev.diag_pos)
        d.waves, d.wave_ptr = self._put(rows), ptr
        d.agg, d.nc = self._put(lev.next.agg, np.int64), lev.next.ncols
        d.data = self.be.empty(max(len(lev.indices), 1))
        d.dinv = self.be.empty(max(lev.n, 1))
        if i > 0:
            for name in VECTORS:
                setattr(d, name, self.be.empty(max(lev.n, 1)))
        return d

    def _upload(self, dst, src):
        src = np.ascontiguousarray(src)
        self.be.copy_to_device(dst[:len(src)] if len(src) < len(dst) else dst, src)
        self.stats.to_device += 1
        self.stats.to_device_bytes += src.nbytes

    def _upload_coefficients(self):
        for d, lev in zip(self.levels, self.amg.levels, strict=True):
            if not d.coarsest:
                self._upload(d.data, lev.data)
                self._upload(d.dinv, lev.dinv[:lev.n])

    def refresh(self):
        """New fine coefficients: the host's refresh (Galerkin products, smoother diagonals,
        the coarsest factors), then every level's coefficients copied to the device."""
        self.amg.refresh()
        self._upload_coefficients()

    # -- the cycle --------------------------------------------------------------------------------
    def _smooth_restrict(self, i, b, x):
        """``AMG._presmooth_restrict`` without ghost columns: forward sweep from x = 0, the
        residual restricted into the next level's right-hand side."""
        d, k = self.levels[i], self.k
        nxt = self.levels[i + 1]
        rc = self._coarse_dev[0] if nxt.coarsest else nxt.b
        if d.split:  # ``gs_from_zero_restrict``: half rows, no l1 term (l1 = a_ii)
            k.gs_from_zero(d, b, x)
            k.upper_restrict(d, x, d.agg, rc, d.nc, False)
        else:
            k.fill(x, 0.0, d.n)
            k.gs_sweep(d, b, x, True)
            k.residual_restrict(d, x, b, d.agg, rc, d.nc)
        self._exchanged(i)
        return rc

    def _exchanged(self, i):
        """Count the halo exchange the host path makes here (``Level.exchange``): level i
        has no ghosts to refresh on one rank, but the profile prices what a parallel run
        would send."""
        self.amg.levels[i].calls += 1

    def _cycle(self, i, b, x):
        d, k = self.levels[i], self.k
        self._smooth_restrict(i, b, x)
        e = self._solve(i + 1)
        k.prolong_add(d.agg, e, x, d.n)
        self._exchanged(i)
        k.gs_sweep(d, b, x, False)

    def _solve(self, i):
        """Level i's correction from its right-hand side: direct (on the host) on the
        coarsest level, else the cycle of ``amg.cycle_kind``; returns it (a device vector)."""
        d = self.levels[i]
        if d.coarsest:
            return self._direct()
        kind = self.amg.cycle_kind
        if kind == "K" and d.krylov:
            self._kcycle(i, d.b, d.x)
        elif kind == "A" and d.krylov:
            self._amli(i, d.b, d.x)
        else:
            self._cycle(i, d.b, d.x)
        return d.x

    def _direct(self):
        """The coarsest level by the host's factors: its right-hand side out, the solution
        back."""
        lev = self.amg.levels[-1]
        f = lev.lu
        db, dx = self._coarse_dev
        hb, hx = self._coarse
        n = lev.n
        self.be.copy_to_host(hb, db)
        lu_solve(f.perm_r, f.perm_c, f.lp, f.li, f.lx, f.up, f.ui, f.ux, f.ud, lev.pinned,
                 hb[:n], hx[:n], f.y)
        self.be.copy_to_device(dx, hx)
        st = self.stats
        st.to_host += 1
        st.to_host_bytes += hb.nbytes
        st.to_device += 1
        st.to_device_bytes += hx.nbytes
        return dx

    @staticmethod
    def _sum(lev, values):
        """The level's reducer's sum of scalars read back from the device (counted as the
        host path counts its reductions)."""
        return lev.red.sum(*values)

    def _kcycle(self, i, b, x):
        """``AMG._kcycle`` on the device."""
        lev, d, k = self.amg.levels[i], self.levels[i], self.k
        n = d.n
        c, dd, v, w, r2 = d.c, d.d, d.v, d.w, d.r2
        self._cycle(i, b, c)
        self._exchanged(i)
        k.spmv(d, c, v)
        rho1, alpha1, bb, vv, bv = self._sum(lev, k.dots(((c, v), (c, b), (b, b), (v, v),
                                                          (b, v)), n))
        if rho1 <= 0.0:
            k.copy(c, x, n)
            return
        a1 = alpha1 / rho1
        if bb - 2.0 * a1 * bv + a1 * a1 * vv <= KCYCLE_T * KCYCLE_T * bb:
            k.scale_into(x, a1, c, n)
            return
        k.axpy_into(r2, b, a1, v, n)
        self._cycle(i, r2, dd)
        self._exchanged(i)
        k.spmv(d, dd, w)
        gamma, beta, alpha2 = self._sum(lev, k.dots(((dd, v), (dd, w), (dd, r2)), n))
        rho2 = beta - gamma * gamma / rho1
        if rho2 <= 0.0:
            k.scale_into(x, a1, c, n)
            return
        k.combine(x, a1 - gamma * alpha2 / (rho1 * rho2), c, alpha2 / rho2, dd, n)

    def _amli(self, i, b, x):
        """``AMG._amli`` on the device."""
        d, k = self.levels[i], self.k
        a1, a2 = self.amg.amli
        self._cycle(i, b, d.c)
        self._exchanged(i)
        k.spmv(d, d.c, d.v)
        k.axpy_into(d.r2, b, a1, d.v, d.n)
        self._cycle(i, d.r2, d.d)
        k.combine(x, a1, d.c, a2, d.d, d.n)

    def apply(self, r, z):
        """z = M r on the device (``AMG.apply``)."""
        if self.levels[0].coarsest:  # the whole problem is the coarsest level
            raise DeviceSolveUnsupported("solver.backend = \"cuda\": the mesh is too small "
                                         "for an AMG hierarchy")
        self._cycle(0, r, z)

    # -- FCG(1) -----------------------------------------------------------------------------------
    def solve(self, b, x, tol, max_iter, ws=None, rel_tol: float = 0.0) -> SolveInfo:
        """``krylov.fcg`` with ``AMG.apply``: ``x`` (host, the first guess) is improved in
        place; ``ws`` is not used (the work vectors live on the device)."""
        amg, k, t = self.amg, self.k, self.top
        top, d0 = amg.levels[0], self.levels[0]
        n = d0.n
        self._upload(t.b, b[:n])
        self._upload(t.x, x[:n])
        k.residual(d0, t.x, t.b, t.r)
        rr, bb = self._sum(top, k.dots(((t.r, t.r), (t.b, t.b)), n))
        info, tol, bnorm = initial_info(rr, bb, tol, rel_tol)
        if info.res0 <= tol:
            return info
        self.apply(t.r, t.z)
        k.copy(t.z, t.p, n)
        for it in range(1, max_iter + 1):
            pq, pr = self._sum(top, k.spmv_dots(d0, t.p, t.q, t.r))
            info.iters = it
            if pq <= 0.0:
                break
            rr = k.fcg_step(t.x, t.r, t.p, t.q, pr / pq, n)
            self.apply(t.r, t.z)
            (zq,) = k.dots(((t.z, t.q),), n)
            rr, zq = self._sum(top, (rr, zq))
            info.res = float(np.sqrt(rr) / bnorm)
            if info.res <= tol:
                break
            k.direction(t.z, zq / pq, t.p, n)
        info.converged = bool(info.res <= tol)
        self.be.copy_to_host(x[:n], t.x)
        self.stats.to_host += 1
        self.stats.to_host_bytes += 8 * n
        return info

    def profile(self) -> dict:
        """Copies and bytes each way (the reductions' read-backs included) and the device."""
        st = self.stats.as_dict()
        st["to_host"] += self.k.reads
        st["to_host_bytes"] += self.k.read_bytes
        return {"device": self.be.describe(), **st, "reduction_reads": self.k.reads}
