"""The AMG-preconditioned pressure solve on a device backend (``solver.backend = "cuda"``).

The hierarchy is the host's (:class:`.amg.AMG`: aggregates, Galerkin coefficients, smoother
diagonals and the coarsest level's factors, remade at each refresh); its levels are copied
to the device once and their coefficients at every refresh.  A solve copies the right-hand
side and the first guess in, runs FCG(1) with the K-cycle (or AMLI, or V) cycle on the
device, kernel for kernel the arithmetic of ``krylov.fcg`` with ``AMG.apply``
(:mod:`haloflow.backends.cuda_sparse`), and copies the answer out.

What crosses PCI-E during a solve, each copy and its bytes counted in ``copies``
(profile.json's ``device`` table):
- each fused reduction's scalars, which the host needs to steer the iteration;
- the coarsest level's right-hand side and solution, which the host's Cholesky solves (at
  most a few thousand values);
- on several ranks, what MPI moves: the distributed levels' halos (device exchangers of the
  run's strategy, packing on the device; none with a GPU-aware MPI, ``staging =
  "device-aware"``), the partial sums of aggregates spanning ranks and the redundant coarse
  level's right-hand side, each gathered on the device into one buffer per plan.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..parallel import halo
from .amg import KCYCLE_T
from .amg_kernels import lu_solve
from .amg_levels import VECTORS
from .krylov import SolveInfo, initial_info
from .wavefronts import wavefronts


class DeviceSolveUnsupported(ValueError):
    """The hierarchy has a shape the device solve does not know; says what, in one line."""


class Copies:
    """Every copy between host and device memory a device solve makes, each counted with
    its bytes, each way (profile.json's ``device`` table)."""

    def __init__(self, backend):
        self.be = backend
        self.to_device = self.to_device_bytes = self.to_host = self.to_host_bytes = 0

    def put(self, a):
        """A new device array holding host array ``a`` as it is."""
        a = np.ascontiguousarray(a)
        self.to_device += 1
        self.to_device_bytes += a.nbytes
        return self.be.put(a)

    def upload(self, dst, src) -> None:
        """Host ``src`` into the first ``len(src)`` entries of device array ``dst``."""
        src = np.ascontiguousarray(src)
        self.be.copy_to_device(dst[:len(src)] if len(src) < len(dst) else dst, src)
        self.to_device += 1
        self.to_device_bytes += src.nbytes

    def download(self, dst, src) -> None:
        """The first ``len(dst)`` entries of device array ``src`` into host ``dst``."""
        self.be.copy_to_host(dst, src[:len(dst)] if len(dst) < len(src) else src)
        self.to_host += 1
        self.to_host_bytes += dst.nbytes

    def profile(self, kernels, exchangers) -> dict:
        """These copies with the reductions' read-backs of ``kernels`` (a
        :class:`~haloflow.backends.cuda_sparse.CudaSparse`), and the halo exchanges and
        staging copies of the device ``exchangers``."""
        return {"to_device": self.to_device, "to_device_bytes": self.to_device_bytes,
                "to_host": self.to_host + kernels.reads,
                "to_host_bytes": self.to_host_bytes + kernels.read_bytes,
                "reduction_reads": kernels.reads,
                "halo_copies": sum(e.stats.copies for e in exchangers),
                "halo_copy_bytes": sum(e.stats.copy_bytes for e in exchangers),
                "halo_exchanges": sum(e.stats.calls for e in exchangers)}


def _concat(parts) -> np.ndarray:
    return np.concatenate([np.asarray(p, np.int64) for p in parts] or [np.zeros(0, np.int64)])


def _cut_schedule(lev) -> tuple[np.ndarray, np.ndarray]:
    """Wavefronts of the Gauss-Seidel sweep over ``lev.cut`` only (``amg.gs_rows``): the
    couplings among those rows, in the list's order."""
    cut = np.asarray(lev.cut, dtype=np.int64)
    pos = np.full(lev.ncols, -1, dtype=np.int64)
    pos[cut] = np.arange(len(cut))
    ip, ix = lev.indptr.astype(np.int64), lev.indices.astype(np.int64)
    lengths = np.diff(ip)[cut]
    first = np.cumsum(lengths) - lengths  # where each cut row's entries start among them
    entries = np.repeat(ip[cut] - first, lengths) + np.arange(int(lengths.sum()))
    cols = pos[ix[entries]]
    rows = np.repeat(np.arange(len(cut)), lengths)
    keep = cols >= 0
    sub_ip = np.concatenate([[0], np.cumsum(np.bincount(rows[keep], minlength=len(cut)))])
    order, ptr = wavefronts(sub_ip, cols[keep], len(cut))
    return cut[order], ptr


class DeviceSolve:
    """``refresh()`` and ``solve(b, x, tol, max_iter, ws, rel_tol)`` as the compiled host
    solve (:class:`.kcycle.CompiledSolve`) has them, on ``backend``'s device.  ``strategy``
    and ``staging``: the halo exchanges of the distributed levels (``staging`` "device" or
    "device-aware")."""

    def __init__(self, amg, backend, strategy: str = "aggregated", staging: str = "device"):
        last = amg.levels[-1]
        if last.lu is None or last.next is not None or amg.levels[0].next is None:
            raise DeviceSolveUnsupported("the AMG hierarchy has no coarse level or no "
                                         "factored coarsest one")
        self.amg, self.be = amg, backend
        self.k = backend.sparse()
        self.copies = Copies(backend)
        self.exchangers = []  # the device exchangers, for their counters
        self.levels = [self._level(i, lev, strategy, staging)
                       for i, lev in enumerate(amg.levels)]
        ncols = max(amg.levels[0].ncols, 1)
        self.top = SimpleNamespace(b=backend.empty(max(amg.levels[0].n, 1)),
                                   **{v: backend.empty(ncols) for v in ("x", "r", "z", "p", "q")})
        m = max(last.n, 1)  # the coarsest level's vectors on the host
        self._host_coarse = (backend.host_empty(m), backend.host_empty(m))
        self._copy_coefficients()
        self.sums = self._galerkin_sums()  # None: the refresh runs on the host

    def _galerkin_sums(self):
        """Per coarse level, which fine entries each of its entries sums (ascending, as
        ``amg.galerkin_refresh`` adds them; a replicated level's entries in its own order),
        where the refresh can run on the device: on one rank, where no level's sums cross
        ranks.  Made once; the coarsest level's entries get a device array to land in."""
        amg = self.amg
        if amg.comm.size > 1:
            return None
        sums = []
        for lev, target in zip(amg.levels[:-1], amg.levels[1:], strict=True):
            nx = lev.next
            slot = np.asarray(nx.slot, dtype=np.int64)
            if nx.redundant is not None:  # target = local[perm] (one rank's allgather)
                perm = np.asarray(nx.redundant.perm, dtype=np.int64)
                where = np.empty_like(perm)
                where[perm] = np.arange(len(perm))
                slot = np.where(slot >= 0, where[np.maximum(slot, 0)], -1)
            keep = np.flatnonzero(slot >= 0)
            order = keep[np.argsort(slot[keep], kind="stable")]
            m = len(target.data)
            counts = np.bincount(slot[keep], minlength=m)
            ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            sums.append(SimpleNamespace(ptr=self.copies.put(ptr), ent=self.copies.put(order),
                                        m=m))
        last = amg.levels[-1]
        self._coarsest = (self.be.empty(max(len(last.data), 1)),
                          self.be.host_empty(max(len(last.data), 1)))
        return sums

    # -- the hierarchy on the device --------------------------------------------------------------
    def _level(self, i, lev, strategy, staging):
        """A level's pattern, wavefronts and transfers on the device (once), its
        coefficients and work vectors allocated (the coarsest level: b and x only)."""
        be = self.be
        m = max(lev.ncols, 1)
        d = SimpleNamespace(n=lev.n, ncols=lev.ncols, split=bool(lev.split),
                            krylov=lev.krylov, coarsest=lev.next is None, ex=None, cut=None)
        if d.coarsest:
            d.b, d.x = be.empty(m), be.empty(m)
            return d
        rows, ptr = wavefronts(lev.indptr, lev.indices, lev.n)
        put = self.copies.put
        d.ip, d.ix, d.dp = put(lev.indptr), put(lev.indices), put(lev.diag_pos)
        d.sweep = (put(rows), ptr)
        if lev.cut is not None:
            rows, ptr = _cut_schedule(lev)
            d.cut = (put(rows), ptr)
        nx = lev.next
        d.agg, d.nc = put(np.asarray(nx.agg, np.int64)), nx.ncols
        d.data = be.empty(max(len(lev.indices), 1))
        d.dinv = be.empty(max(lev.n, 1))
        if i > 0:
            for name in VECTORS:
                setattr(d, name, be.empty(m))
        if lev.ex is not None:  # a distributed level's halo, exchanged on the device
            d.ex = halo.make(strategy, lev.topo, self.amg.comm, staging=staging, backend=be)
            self.exchangers.append(d.ex)
        d.xfer = _Moves(self, nx.xfer) if nx.xfer is not None else None
        d.rd = self._redundant(nx.redundant) if nx.redundant is not None else None
        return d

    def _redundant(self, rd):
        """The handoff to the redundant level: the local restriction (device), this rank's
        piece on the host for the allgather, the whole level's right-hand side back."""
        return SimpleNamespace(rc=self.be.empty(max(len(rd.rc), 1)),
                               piece=self.be.host_empty(max(rd.n, 1)),
                               whole=self.be.host_empty(max(rd.rhs.total, 1)),
                               cols=self.copies.put(np.asarray(rd.cols, np.int64)), plan=rd)

    def _copy_coefficients(self, top: bool = True):
        for i, (d, lev) in enumerate(zip(self.levels, self.amg.levels, strict=True)):
            if not d.coarsest:
                if top or i:
                    self.copies.upload(d.data, lev.data)
                self.copies.upload(d.dinv, lev.dinv[:lev.n])

    def share_top(self, data) -> None:
        """Read the top level's coefficients from device array ``data``, which the caller
        fills (the device step assembles the pressure matrix there)."""
        self.levels[0].data = data

    def refresh_on_device(self) -> None:
        """:meth:`refresh` with the top level's new coefficients on the device already:
        the Galerkin sums and smoother diagonals there, level by level, then only the
        coarsest level's entries copied out, for the host's factors (``sums`` is not
        None)."""
        amg, k = self.amg, self.k
        amg.refreshes += 1
        for i, (d, s) in enumerate(zip(self.levels[:-1], self.sums, strict=True)):
            k.l1_inverse(d)
            nxt = self.levels[i + 1]
            k.gather_sums(s.ptr, s.ent, d.data, self._coarsest[0] if nxt.coarsest else
                          nxt.data, s.m)
        last = amg.levels[-1]
        m = len(last.data)
        self.copies.download(self._coarsest[1][:m], self._coarsest[0])
        last.data[:] = self._coarsest[1][:m]
        last.smoother_setup()
        amg._factor_coarsest()

    def refresh(self, top: bool = True):
        """New fine coefficients: the host's refresh (Galerkin products, smoother diagonals,
        the coarsest factors), then every level's coefficients copied to the device, the
        top level's unless ``top`` is false (they are on the device already)."""
        self.amg.refresh()
        self._copy_coefficients(top)

    # -- the cycle --------------------------------------------------------------------------------
    def _exchange(self, i, x):
        """``Level.exchange``: counted, and made where the level has a halo."""
        self.amg.levels[i].calls += 1
        d = self.levels[i]
        if d.ex is not None:
            d.ex.exchange([x])

    def _smooth_restrict(self, i, b, x, rc):
        """``AMG._presmooth_restrict``: forward sweep from x = 0, the residual restricted
        into ``rc``."""
        d, k = self.levels[i], self.k
        if d.split and d.ncols == d.n:  # ``gs_from_zero_restrict``: no l1 term (l1 = a_ii)
            k.gs_from_zero(d, b, x)
            k.upper_restrict(d, x, d.agg, rc, d.nc, False)
            self._exchange(i, x)
            # no ghost columns (one rank): an empty exchange where ranks with a cut resweep,
            # so that a one-rank profile counts the exchanges a run on many ranks makes
            if d.cut is not None:
                self._exchange(i, x)
            return
        if d.split:
            k.fill(x[d.n:], 0.0, d.ncols - d.n)
            k.gs_from_zero(d, b, x)
        else:
            k.fill(x, 0.0, d.ncols)
            k.gs_sweep(d, b, x, True)
        self._exchange(i, x)
        if d.cut is not None:
            k.gs_sweep(d, b, x, True, d.cut)
            self._exchange(i, x)
        if d.split and d.cut is None:
            k.upper_restrict(d, x, d.agg, rc, d.nc, True)
        else:
            k.residual_restrict(d, x, b, d.agg, rc, d.nc)

    def _cycle(self, i, b, x):
        """``AMG._cycle`` on the device."""
        d, k = self.levels[i], self.k
        rc = d.rd.rc if d.rd is not None else self.levels[i + 1].b
        self._smooth_restrict(i, b, x, rc)
        if d.xfer is not None:
            d.xfer.accumulate(rc)
        e = self._coarse(i, rc)
        if d.xfer is not None and d.rd is None:
            d.xfer.distribute(e)
        k.prolong_add(d.agg, e, x, d.n)
        self._exchange(i, x)
        k.gs_sweep(d, b, x, False)
        if d.cut is not None:
            self._exchange(i, x)
            k.gs_sweep(d, b, x, False, d.cut)

    def _coarse(self, i, rc):
        """``AMG._coarse``: the next level's correction (into the redundant level: its
        right-hand side gathered from every rank, this rank's entries taken back)."""
        amg, d = self.amg, self.levels[i]
        if i + 1 != amg.first_redundant:
            return self._solve(i + 1)
        amg.allgathers += 1
        nxt = self.levels[i + 1]
        rd = d.rd
        if rd is not None:
            n = rd.plan.n
            self.copies.download(rd.piece[:n], rd.rc)
            rd.plan.rhs.allgather(rd.piece[:n], rd.whole)
            self.copies.upload(nxt.b, rd.whole[:rd.plan.rhs.total])
        e = self._solve(i + 1)
        if rd is None:
            return e
        self.k.gather(e, rd.cols, rd.rc, len(rd.plan.cols))
        return rd.rc

    def _solve(self, i):
        """Level i's correction from its right-hand side ``b``, into its ``x``: direct (on
        the host) on the coarsest level, else the cycle of ``amg.cycle_kind``."""
        d = self.levels[i]
        if d.coarsest:
            self._direct(i)
        elif self.amg.cycle_kind == "K" and d.krylov:
            self._kcycle(i, d.b, d.x)
        elif self.amg.cycle_kind == "A" and d.krylov:
            self._amli(i, d.b, d.x)
        else:
            self._cycle(i, d.b, d.x)
        return d.x

    def _direct(self, i):
        """The coarsest level by the host's factors: its right-hand side out, the solution
        back."""
        lev, d = self.amg.levels[i], self.levels[i]
        f = lev.lu
        hb, hx = self._host_coarse
        n = lev.n
        self.copies.download(hb[:n], d.b)
        lu_solve(f.perm_r, f.perm_c, f.lp, f.li, f.lx, f.up, f.ui, f.ux, f.ud, lev.pinned,
                 hb[:n], hx[:n], f.y)
        self.copies.upload(d.x, hx[:n])

    def _kcycle(self, i, b, x):
        """``AMG._kcycle`` on the device."""
        red, d, k = self.amg.levels[i].red, self.levels[i], self.k
        n = d.n
        c, dd, v, w, r2 = d.c, d.d, d.v, d.w, d.r2
        self._cycle(i, b, c)
        self._exchange(i, c)
        k.spmv(d, c, v)
        rho1, alpha1, bb, vv, bv = red.sum(*k.dots(((c, v), (c, b), (b, b), (v, v), (b, v)),
                                                   n))
        if rho1 <= 0.0:
            k.copy(c, x, n)
            return
        a1 = alpha1 / rho1
        if bb - 2.0 * a1 * bv + a1 * a1 * vv <= KCYCLE_T * KCYCLE_T * bb:
            k.scale_into(x, a1, c, n)
            return
        k.axpy_into(r2, b, a1, v, n)
        self._cycle(i, r2, dd)
        self._exchange(i, dd)
        k.spmv(d, dd, w)
        gamma, beta, alpha2 = red.sum(*k.dots(((dd, v), (dd, w), (dd, r2)), n))
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
        self._exchange(i, d.c)
        k.spmv(d, d.c, d.v)
        k.axpy_into(d.r2, b, a1, d.v, d.n)
        self._cycle(i, d.r2, d.d)
        k.combine(x, a1, d.c, a2, d.d, d.n)

    def apply(self, r, z):
        """z = M r on the device (``AMG.apply``; the top level always has a coarse one)."""
        self._cycle(0, r, z)

    # -- FCG(1) -----------------------------------------------------------------------------------
    def solve(self, b, x, tol, max_iter, ws=None, rel_tol: float = 0.0) -> SolveInfo:
        """``krylov.fcg`` with ``AMG.apply``: ``x`` (host, the first guess) is improved in
        place on the owned rows; ``ws`` is not used (the work vectors live on the device)."""
        t, n = self.top, self.levels[0].n
        self.copies.upload(t.b, b[:n])
        self.copies.upload(t.x, x[:n])
        info = self._fcg(tol, max_iter, rel_tol)
        self.copies.download(x[:n], t.x)
        return info

    def solve_on_device(self, b, x, tol, max_iter, rel_tol: float = 0.0) -> SolveInfo:
        """:meth:`solve` of device arrays: nothing crosses PCI-E but the reductions'
        scalars and the coarsest level's vectors."""
        t, n = self.top, self.levels[0].n
        self.k.copy(b, t.b, n)
        self.k.copy(x, t.x, n)
        info = self._fcg(tol, max_iter, rel_tol)
        self.k.copy(t.x, x, n)
        return info

    def _fcg(self, tol, max_iter, rel_tol) -> SolveInfo:
        """FCG(1) from ``top.x`` for ``top.b``, on the device."""
        k, t, d0 = self.k, self.top, self.levels[0]
        red = self.amg.levels[0].red
        ex = d0.ex
        n = d0.n
        if ex is not None:
            ex.exchange([t.x])
        k.residual(d0, t.x, t.b, t.r)
        rr, bb = red.sum(*k.dots(((t.r, t.r), (t.b, t.b)), n))
        info, tol, bnorm = initial_info(rr, bb, tol, rel_tol)
        if info.res0 <= tol:
            return info
        self.apply(t.r, t.z)
        k.copy(t.z, t.p, n)
        for it in range(1, max_iter + 1):
            if ex is not None:
                ex.exchange([t.p])
            pq, pr = red.sum(*k.spmv_dots(d0, t.p, t.q, t.r))
            info.iters = it
            if pq <= 0.0:
                break
            rr = k.fcg_step(t.x, t.r, t.p, t.q, pr / pq, n)
            self.apply(t.r, t.z)
            (zq,) = k.dots(((t.z, t.q),), n)
            rr, zq = red.sum(rr, zq)
            info.res = float(np.sqrt(rr) / bnorm)
            if info.res <= tol:
                break
            k.direction(t.z, zq / pq, t.p, n)
        info.converged = bool(info.res <= tol)
        return info

    def profile(self) -> dict:
        """Copies and bytes each way, reductions' read-backs and device halos included."""
        return self.copies.profile(self.k, self.exchangers)


class _Moves:
    """``amg._Transfer`` for device vectors: what a transfer sends is gathered on the device
    into one buffer, copied to the host buffers its MPI plans use, and what arrives copied
    back and added (partial sums to the aggregates' owners) or set (their values back)."""

    def __init__(self, solve, xfer):
        self.s, self.x = solve, xfer
        be = solve.be
        self.out_idx, self.in_idx = _concat(xfer.out_idx), _concat(xfer.in_idx)
        self.out_bounds = np.cumsum([0] + [len(i) for i in xfer.out_idx])
        self.in_bounds = np.cumsum([0] + [len(i) for i in xfer.in_idx])
        self.d_out_idx = solve.copies.put(self.out_idx)
        self.d_in_idx = solve.copies.put(self.in_idx)
        no, ni = max(len(self.out_idx), 1), max(len(self.in_idx), 1)
        self.d_out, self.d_in = be.empty(no), be.empty(ni)
        self.h_out, self.h_in = be.host_empty(no), be.host_empty(ni)

    def _off(self, v, idx, d_idx, dev, host, bufs, bounds):
        """v[idx] gathered on the device, copied out, cut into the plan's buffers."""
        m = len(idx)
        if not m:
            return
        self.s.k.gather(v, d_idx, dev, m)
        self.s.copies.download(host[:m], dev)
        for k, buf in enumerate(bufs):
            buf[:] = host[bounds[k]:bounds[k + 1]]

    def _on(self, v, idx, d_idx, dev, host, bufs, bounds, add):
        """The plan's received buffers copied in and added to (or set at) v[idx]."""
        m = len(idx)
        if not m:
            return
        for k, buf in enumerate(bufs):
            host[bounds[k]:bounds[k + 1]] = buf
        self.s.copies.upload(dev, host[:m])
        self.s.k.scatter(v, d_idx, dev, m, add)

    def accumulate(self, v):
        x = self.x
        self._off(v, self.out_idx, self.d_out_idx, self.d_out, self.h_out, x.out_buf,
                  self.out_bounds)
        x.to_owners.run()
        self._on(v, self.in_idx, self.d_in_idx, self.d_in, self.h_in, x.in_buf,
                 self.in_bounds, True)

    def distribute(self, v):
        x = self.x
        self._off(v, self.in_idx, self.d_in_idx, self.d_in, self.h_in, x.in_buf,
                  self.in_bounds)
        x.from_owners.run()
        self._on(v, self.out_idx, self.d_out_idx, self.d_out, self.h_out, x.out_buf,
                 self.out_bounds, False)
