"""The AMG-preconditioned pressure solve on a device backend (``solver.backend = "cuda"``).

The hierarchy is the host's (:class:`.amg.AMG`: aggregates, Galerkin coefficients, smoother
diagonals and the coarsest level's factors, remade at each refresh); its levels are copied
to the device once and their coefficients at every refresh.  A solve copies the right-hand
side and the first guess in, runs FCG(1) with the K-cycle (or AMLI, or V) cycle on the
device, kernel for kernel the arithmetic of ``flexible.fcg`` with ``AMG.apply``
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
from . import cycles, host_cycle
from .amg_kernels import lu_solve
from .amg_levels import VECTORS
from .flexible import fcg_iterations
from .krylov import SolveInfo
from .targets import for_target, solve_info
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
        self.out = np.zeros(4)  # a solve's (iterations, initial and final residual, converged)
        self.cycle_state = np.zeros((3, len(self.levels)))  # as AMG.cycle_state

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

    def apply(self, r, z):
        """z = M r on the device (``AMG.apply``; the top level always has a coarse one)."""
        _APPLY(self, r, z)

    # -- FCG(1) -----------------------------------------------------------------------------------
    def solve(self, b, x, tol, max_iter, ws=None, rel_tol: float = 0.0) -> SolveInfo:
        """``flexible.fcg`` with ``AMG.apply``: ``x`` (host, the first guess) is improved in
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
        t = self.top
        _FCG(self, t.b, t.x, tol, max_iter, rel_tol, t.r, t.z, t.p, t.q, self.out)
        return solve_info(self.out)

    def profile(self) -> dict:
        """Copies and bytes each way, reductions' read-backs and device halos included."""
        return self.copies.profile(self.k, self.exchangers)


class DeviceOps:
    """The device's operations for :mod:`.flexible`'s methods, each a kernel launch (or an
    exchange, or a reduction of the scalars read back); the context is the
    :class:`DeviceSolve`, the vectors its level 0's."""

    @staticmethod
    def residual(ds, x, b, r):
        d0 = ds.levels[0]
        if d0.ex is not None:
            d0.ex.exchange([x])
        ds.k.residual(d0, x, b, r)

    @staticmethod
    def precondition(ds, r, z):
        ds.apply(r, z)

    @staticmethod
    def copy(ds, src, dst):
        ds.k.copy(src, dst, ds.levels[0].n)

    @staticmethod
    def dot(ds, a, b):
        return ds.k.dots(((a, b),), ds.levels[0].n)[0]

    @staticmethod
    def dot2(ds, a, b, d, e):
        return ds.k.dots(((a, b), (d, e)), ds.levels[0].n)

    @staticmethod
    def sum1(ds, a):
        return ds.amg.levels[0].red.sum(a)[0]

    @staticmethod
    def sum2(ds, a, b):
        return ds.amg.levels[0].red.sum(a, b)

    @staticmethod
    def sum4(ds, a, b, d, e):
        return ds.amg.levels[0].red.sum(a, b, d, e)

    @staticmethod
    def matvec_dots(ds, p, q, r):
        """q = A p (its halo first); (p.q, p.r, q.q, q.r)."""
        d0 = ds.levels[0]
        if d0.ex is not None:
            d0.ex.exchange([p])
        return ds.k.spmv_dots(d0, p, q, r)

    @staticmethod
    def fcg_step(ds, x, r, p, q, alpha):
        return ds.k.fcg_step(x, r, p, q, alpha, ds.levels[0].n)

    @staticmethod
    def fcg_direction(ds, z, beta, p):
        ds.k.direction(z, beta, p, ds.levels[0].n)


class DeviceCycleOps:
    """The device's operations for :mod:`.cycles`: the context is the :class:`DeviceSolve`
    (its levels on the device, the host's AMG for the counters, the coarsest level's
    factors and the cycle's kind), each a kernel launch, an exchange or a transfer."""

    @staticmethod
    def levels(ds):
        return len(ds.levels)

    @staticmethod
    def vec(ds, k, i):
        return getattr(ds.levels[i], VECTORS[k])

    @staticmethod
    def kind(ds, i):
        return host_cycle.kind(ds.amg, i)

    @staticmethod
    def phase(ds, i):
        return ds.cycle_state[0, i]

    @staticmethod
    def set_phase(ds, i, value):
        ds.cycle_state[0, i] = value

    @staticmethod
    def keep(ds, i, a1, rho1):
        ds.cycle_state[1, i], ds.cycle_state[2, i] = a1, rho1

    @staticmethod
    def kept(ds, i):
        return ds.cycle_state[1, i], ds.cycle_state[2, i]

    @staticmethod
    def amli_steps(ds):
        return ds.amg.amli

    @staticmethod
    def enter(ds, i):
        pass  # the replicated levels are not timed apart on the device

    @staticmethod
    def leave(ds, i):
        pass

    @staticmethod
    def coarsest(ds, i, b, x):
        """The coarsest level by the host's factors: its right-hand side out, the solution
        back."""
        lev = ds.amg.levels[i]
        f = lev.lu
        hb, hx = ds._host_coarse
        n = lev.n
        ds.copies.download(hb[:n], b)
        lu_solve(f.perm_r, f.perm_c, f.lp, f.li, f.lx, f.up, f.ui, f.ux, f.ud, lev.pinned,
                 hb[:n], hx[:n], f.y)
        ds.copies.upload(x, hx[:n])

    @staticmethod
    def down(ds, i, b, x):
        """Forward sweep from x = 0, the residual restricted into the next level's
        right-hand side (partial sums to the owners of spanning aggregates; into the
        redundant level, gathered from every rank on the host)."""
        d, k = ds.levels[i], ds.k
        nxt = ds.levels[i + 1]
        rc = d.rd.rc if d.rd is not None else nxt.b
        if d.split and d.ncols == d.n:  # ``gs_from_zero_restrict``: no l1 term (l1 = a_ii)
            k.gs_from_zero(d, b, x)
            k.upper_restrict(d, x, d.agg, rc, d.nc, False)
            ds._exchange(i, x)
            # no ghost columns (one rank): an empty exchange where ranks with a cut
            # resweep, so that a one-rank profile counts the exchanges many ranks make
            if d.cut is not None:
                ds._exchange(i, x)
        else:
            if d.split:
                k.fill(x[d.n:], 0.0, d.ncols - d.n)
                k.gs_from_zero(d, b, x)
            else:
                k.fill(x, 0.0, d.ncols)
                k.gs_sweep(d, b, x, True)
            ds._exchange(i, x)
            if d.cut is not None:
                k.gs_sweep(d, b, x, True, d.cut)
                ds._exchange(i, x)
            if d.split and d.cut is None:
                k.upper_restrict(d, x, d.agg, rc, d.nc, True)
            else:
                k.residual_restrict(d, x, b, d.agg, rc, d.nc)
        if d.xfer is not None:
            d.xfer.accumulate(rc)
        if i + 1 == ds.amg.first_redundant:
            ds.amg.allgathers += 1
            rd = d.rd
            if rd is not None:
                n = rd.plan.n
                ds.copies.download(rd.piece[:n], rd.rc)
                rd.plan.rhs.allgather(rd.piece[:n], rd.whole)
                ds.copies.upload(nxt.b, rd.whole[:rd.plan.rhs.total])

    @staticmethod
    def up(ds, i, b, x):
        """The next level's correction (this rank's entries of a redundant level; the
        owners' values of spanning aggregates) added, then the backward sweep."""
        d, k = ds.levels[i], ds.k
        e = ds.levels[i + 1].x
        rd = d.rd
        if i + 1 == ds.amg.first_redundant and rd is not None:
            k.gather(e, rd.cols, rd.rc, len(rd.plan.cols))
            e = rd.rc
        if d.xfer is not None and rd is None:
            d.xfer.distribute(e)
        k.prolong_add(d.agg, e, x, d.n)
        ds._exchange(i, x)
        k.gs_sweep(d, b, x, False)
        if d.cut is not None:
            ds._exchange(i, x)
            k.gs_sweep(d, b, x, False, d.cut)

    @staticmethod
    def matvec_kdots1(ds, i, c, v, b):
        d = ds.levels[i]
        ds._exchange(i, c)
        ds.k.spmv(d, c, v)
        return ds.k.dots(((c, v), (c, b), (b, b), (v, v), (b, v)), d.n)

    @staticmethod
    def matvec_kdots2(ds, i, dd, w, v, r2):
        d = ds.levels[i]
        ds._exchange(i, dd)
        ds.k.spmv(d, dd, w)
        return ds.k.dots(((dd, v), (dd, w), (dd, r2)), d.n)

    @staticmethod
    def sum3(ds, i, s1, s2, s3):
        return ds.amg.levels[i].red.sum(s1, s2, s3)

    @staticmethod
    def sum5(ds, i, s1, s2, s3, s4, s5):
        return ds.amg.levels[i].red.sum(s1, s2, s3, s4, s5)

    @staticmethod
    def copy(ds, i, src, dst):
        ds.k.copy(src, dst, ds.levels[i].n)

    @staticmethod
    def scale_into(ds, i, x, alpha, c):
        ds.k.scale_into(x, alpha, c, ds.levels[i].n)

    @staticmethod
    def axpy_into(ds, i, out, b, alpha, v):
        ds.k.axpy_into(out, b, alpha, v, ds.levels[i].n)

    @staticmethod
    def combine(ds, i, x, alpha, c, beta, d):
        ds.k.combine(x, alpha, c, beta, d, ds.levels[i].n)

    @staticmethod
    def amli_residual(ds, i, r2, b, a1, c, v):
        d = ds.levels[i]
        ds._exchange(i, c)
        ds.k.spmv(d, c, v)
        ds.k.axpy_into(r2, b, a1, v, d.n)


_APPLY = for_target(cycles.apply, DeviceCycleOps, "device", compiled=False)
_FCG = for_target(fcg_iterations, DeviceOps, "device", compiled=False)


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
