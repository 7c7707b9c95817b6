"""Aggregation AMG: a K-cycle preconditioner for the pressure equation.

Why this design (numbers from `benchmarks/poisson.py`, docs/performance.md):

- *Plain aggregation* by double pairwise matching (aggregates of about four cells, chosen by
  strongest negative coupling, as in Notay's AGMG).  The prolongation is piecewise constant,
  so the Galerkin coarse matrix is a sum of fine coefficients: the structure is computed once
  and every time step refreshes the coefficients with one scatter-add per level.  Smoothed
  aggregation converges faster per cycle but needs the prolongator's rows from neighbouring
  ranks and a distributed sparse triple product at every refresh.
- Plain aggregation alone is not scalable in a V-cycle (iterations grow with the mesh), so
  coarse levels are solved by the *K-cycle*: two steps of a Krylov method, preconditioned by
  the next level, on every coarse level.  That restores mesh-independent convergence at the
  price of a few fused reductions per level visit.
- Aggregation is rank-local (no aggregate crosses a rank boundary); coarse levels keep their
  owned rows and ghost columns and exchange through the same halo interface as the solver.
  Once the global coarse problem is small, it is gathered onto rank 0, which coarsens it
  further serially and solves the coarsest level with a dense factorisation.  All-Neumann
  (singular) problems are handled there by pinning one unknown.
- Smoother: symmetric Gauss-Seidel, rank-local (forward before, backward after the coarse
  correction), one sweep each.
"""

from __future__ import annotations

from types import SimpleNamespace

import numba as nb
import numpy as np
import scipy.linalg as sla
from mpi4py import MPI

from .krylov import Reducer
from .matrix import IDX

GATHER_BELOW = 4000  # gather the coarse problem on rank 0 once it has fewer unknowns
COARSEST = 200  # solve directly below this many unknowns
MIN_RATIO = 1.4  # stop coarsening if a level shrinks by less than this factor
STRENGTH = 0.25  # pair only with couplings at least this fraction of the row's strongest
KCYCLE_T = 0.25  # K-cycle: skip the second Krylov step if the residual fell by this factor


# -- kernels ------------------------------------------------------------------------------------

@nb.njit(cache=True)
def pairwise(indptr, indices, data, diag_pos, n, beta):
    """Greedy matching of each row with its strongest unmatched negative coupling."""
    agg = np.full(n, -1, dtype=np.int64)
    nagg = 0
    for i in range(n):
        if agg[i] >= 0:
            continue
        amax = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            if j < n and k != diag_pos[i] and -data[k] > amax:
                amax = -data[k]
        best = -1
        bestv = beta * amax
        if amax > 0.0:
            for k in range(indptr[i], indptr[i + 1]):
                j = indices[k]
                if j < n and k != diag_pos[i] and agg[j] < 0 and -data[k] >= bestv:
                    if best < 0 or -data[k] > bestv:
                        best = j
                        bestv = -data[k]
        agg[i] = nagg
        if best >= 0:
            agg[best] = nagg
        nagg += 1
    return agg, nagg


@nb.njit(cache=True)
def galerkin_refresh(slot, fine, coarse):
    """Coarse coefficients of a piecewise-constant prolongation: sums of fine ones."""
    coarse[:] = 0.0
    for k in range(len(slot)):
        if slot[k] >= 0:
            coarse[slot[k]] += fine[k]


@nb.njit(cache=True)
def l1_diagonal(indptr, indices, data, diag_pos, n, out):
    """a_ii + sum of |a_ij| over ghost columns: the l1 hybrid Gauss-Seidel diagonal
    (Baker, Falgout, Kolev & Yang 2011), which keeps the rank-local smoother convergent
    however the mesh is cut; equal to a_ii on one rank."""
    for i in range(n):
        s = data[diag_pos[i]]
        for k in range(indptr[i], indptr[i + 1]):
            if indices[k] >= n:
                s += abs(data[k])
        out[i] = s


@nb.njit(cache=True)
def gs_sweep(indptr, indices, data, diag_pos, dl1, b, x, n, forward):
    """One Gauss-Seidel sweep over the owned rows (ghost values of x are held fixed)."""
    for t in range(n):
        i = t if forward else n - 1 - t
        s = b[i] + (dl1[i] - data[diag_pos[i]]) * x[i]
        for k in range(indptr[i], indptr[i + 1]):
            if k != diag_pos[i]:
                s -= data[k] * x[indices[k]]
        x[i] = s / dl1[i]


@nb.njit(cache=True)
def spmv(indptr, indices, data, x, y):
    """Serial y = A x: coarse levels are too small to amortise a threaded launch."""
    for i in range(len(indptr) - 1):
        s = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            s += data[k] * x[indices[k]]
        y[i] = s


@nb.njit(cache=True)
def residual(indptr, indices, data, x, b, r):
    for i in range(len(indptr) - 1):
        s = b[i]
        for k in range(indptr[i], indptr[i + 1]):
            s -= data[k] * x[indices[k]]
        r[i] = s


@nb.njit(cache=True)
def restrict(agg, r, n, rc, nc):
    for i in range(nc):
        rc[i] = 0.0
    for i in range(n):
        rc[agg[i]] += r[i]


@nb.njit(cache=True)
def prolong_add(agg, e, n, x):
    for i in range(n):
        x[i] += e[agg[i]]


@nb.njit(cache=True)
def _kdots1(c, v, b, n):
    """c.v, c.b, b.b, v.v, b.v for the first K-cycle step."""
    s = np.zeros(5)
    for i in range(n):
        s[0] += c[i] * v[i]
        s[1] += c[i] * b[i]
        s[2] += b[i] * b[i]
        s[3] += v[i] * v[i]
        s[4] += b[i] * v[i]
    return s


@nb.njit(cache=True)
def _kdots2(d, v, w, r2, n):
    s = np.zeros(3)
    for i in range(n):
        s[0] += d[i] * v[i]
        s[1] += d[i] * w[i]
        s[2] += d[i] * r2[i]
    return s


@nb.njit(cache=True)
def _axpy_into(out, b, a, v, n):
    for i in range(n):
        out[i] = b[i] - a * v[i]


@nb.njit(cache=True)
def _combine(x, a, c, b, d, n):
    for i in range(n):
        x[i] = a * c[i] + b * d[i]


@nb.njit(cache=True)
def _scale_into(x, a, c, n):
    for i in range(n):
        x[i] = a * c[i]


# -- structure ----------------------------------------------------------------------------------

def galerkin_pattern(indptr, indices, n_rows, ragg, cagg, nc_rows, nc_cols):
    """CSR structure of P^T A P for piecewise-constant P, and each fine entry's coarse slot.

    ``cagg[j] < 0`` drops column j (used to build a rank's owned block only).
    """
    rows = np.repeat(np.arange(n_rows), np.diff(indptr).astype(np.int64))
    C = cagg[indices.astype(np.int64)]
    keep = C >= 0
    key = ragg[rows[keep]] * np.int64(nc_cols) + C[keep]
    uniq, inv = np.unique(key, return_inverse=True)
    slot = np.full(len(rows), -1, dtype=np.int64)
    slot[keep] = inv
    crow, ccol = uniq // nc_cols, uniq % nc_cols
    cindptr = np.searchsorted(crow, np.arange(nc_rows + 1)).astype(IDX)
    diag_pos = np.flatnonzero(crow == ccol).astype(np.int64)
    if len(diag_pos) != nc_rows:
        raise RuntimeError("AMG: a coarse row lost its diagonal")
    return cindptr, ccol.astype(IDX), diag_pos, slot


def _aggregate(indptr, indices, data, diag_pos, n):
    """Double pairwise aggregation of the owned block: aggregates of up to four rows."""
    agg1, n1 = pairwise(indptr, indices, data, diag_pos, n, STRENGTH)
    cagg = np.full(int(indices.max(initial=0)) + 1 if len(indices) else 1, -1, dtype=np.int64)
    cagg[:n] = agg1
    ip1, ix1, dp1, slot1 = galerkin_pattern(indptr, indices, n, agg1, cagg, n1, n1)
    d1 = np.zeros(len(ix1))
    galerkin_refresh(slot1, data, d1)
    agg2, n2 = pairwise(ip1, ix1, d1, dp1, n1, STRENGTH)
    return agg2[agg1], n2


class Level:
    """One level: a matrix on owned rows (+ ghost columns), its smoother and work vectors."""

    def __init__(self, indptr, indices, data, diag_pos, n, ncols, ex, red):
        self.indptr, self.indices, self.data, self.diag_pos = indptr, indices, data, diag_pos
        self.n, self.ncols, self.ex, self.red = n, ncols, ex, red
        self.next = None  # SimpleNamespace(agg, nc, slot, gather) towards the next level
        self.lu = None  # dense factorisation on the coarsest level
        self.pinned = -1
        z = [np.zeros(max(ncols, 1)) for _ in range(8)]
        self.b, self.x, self.r, self.c, self.d, self.v, self.w, self.r2 = z
        self.dl1 = np.zeros(max(n, 1))

    def smoother_setup(self):
        l1_diagonal(self.indptr, self.indices, self.data, self.diag_pos, self.n, self.dl1)

    def exchange(self, x):
        if self.ex is not None:
            self.ex.exchange([x])

    def matvec(self, x, y):
        """y = A x on owned rows, refreshing the ghost values of x first."""
        self.exchange(x)
        spmv(self.indptr, self.indices, self.data, x, y)


class AMG:
    """Aggregation AMG preconditioner for a DistMatrix; ``setup`` once, ``refresh`` per step."""

    def __init__(self, A, lmesh, comm, strategy: str = "packed", cycle: str = "K",
                 reduce_stats=None):
        from ..parallel import halo

        self.A = A
        self.lmesh = lmesh
        self.reduce_stats = reduce_stats  # shared with the solver's Reducer, for profiles
        self.comm = comm
        self.cycle_kind = cycle
        self._halo = lambda topo, c: halo.make(strategy, topo, c)
        self.levels: list[Level] = []
        self.root = comm.rank == 0
        self._setup()

    # -- set-up ---------------------------------------------------------------------------------
    def _setup(self):
        A, comm = self.A, self.comm
        p = A.pattern
        top = Level(p.indptr, p.indices, A.data, p.diag_pos, p.n_rows, p.n_cols, A.ex,
                    Reducer(comm, self.reduce_stats))
        top.topo = self.lmesh
        self.levels = [top]
        lev = top
        while True:
            distributed = lev.red.comm.size > 1
            n_global = comm.allreduce(lev.n) if distributed else lev.n
            if not distributed and n_global <= COARSEST:
                break
            agg, nc = _aggregate(lev.indptr, lev.indices, lev.data, lev.diag_pos, lev.n)
            nc_global = comm.allreduce(nc) if distributed else nc
            stalled = nc_global * MIN_RATIO > n_global
            if distributed:  # a distributed level always hands over to a coarser one
                nxt = self._distributed_next(lev, agg, nc)
                if nc_global < GATHER_BELOW or stalled:
                    nxt = self._gather(nxt)
                    if nxt is None:  # not rank 0: the hierarchy goes on there
                        self._finish(coarsest_here=False)
                        return
            elif stalled:
                break
            else:
                nxt = self._serial_next(lev, agg, nc)
            self.levels.append(nxt)
            lev = nxt
        self._finish()

    def _serial_next(self, lev, agg, nc):
        cagg = agg.astype(np.int64)
        ip, ix, dp, slot = galerkin_pattern(lev.indptr, lev.indices, lev.n, agg, cagg, nc, nc)
        nxt = Level(ip, ix, np.zeros(len(ix)), dp, nc, nc, None, Reducer(MPI.COMM_SELF))
        lev.next = SimpleNamespace(agg=agg, nc=nc, slot=slot, gather=None)
        galerkin_refresh(slot, lev.data, nxt.data)
        return nxt

    def _distributed_next(self, lev, agg, nc):
        """Coarse level with owned aggregates, ghost aggregates and its own halo pattern."""
        comm, topo = self.comm, lev.topo
        n = lev.n
        offset = comm.exscan(nc) or 0
        gid = np.zeros(lev.ncols)
        gid[:n] = offset + agg
        lev.exchange(gid)
        ghost_gid = gid[n:lev.ncols].astype(np.int64)
        ghost_rank = np.repeat(topo.neighbours, np.diff(topo.recv_ptr))
        pairs = np.unique(np.column_stack([ghost_rank, ghost_gid]), axis=0) if len(ghost_gid) \
            else np.zeros((0, 2), dtype=np.int64)
        cg_rank, cg_gid = pairs[:, 0], pairs[:, 1]
        # fine ghost j -> coarse ghost column nc + position of (rank, gid)
        pos = np.searchsorted(cg_rank * (1 << 40) + cg_gid, ghost_rank * (1 << 40) + ghost_gid)
        cagg = np.concatenate([agg, nc + pos]).astype(np.int64)
        ncols = nc + len(cg_gid)
        ip, ix, dp, slot = galerkin_pattern(lev.indptr, lev.indices, n, agg, cagg, nc, ncols)
        neighbours = topo.neighbours
        send, send_ptr = [], [0]
        for k in range(len(neighbours)):
            s = np.unique(agg[topo.send_cells[topo.send_ptr[k]:topo.send_ptr[k + 1]]])
            send.append(s)
            send_ptr.append(send_ptr[-1] + len(s))
        recv_ptr = np.searchsorted(cg_rank, np.concatenate([neighbours, [np.iinfo(np.int64).max]]))
        ctopo = SimpleNamespace(
            n_owned=nc, n_ghost=ncols - nc, neighbours=np.asarray(neighbours, dtype=np.int64),
            send_ptr=np.asarray(send_ptr, dtype=np.int64),
            send_cells=(np.concatenate(send) if send else np.zeros(0)).astype(np.int64),
            recv_ptr=recv_ptr.astype(np.int64))
        nxt = Level(ip, ix, np.zeros(len(ix)), dp, nc, ncols, self._halo(ctopo, comm),
                    Reducer(comm, self.reduce_stats))
        nxt.topo = ctopo
        nxt.offset = offset
        nxt.global_cols = np.concatenate([offset + np.arange(nc), cg_gid]).astype(np.int64)
        lev.next = SimpleNamespace(agg=agg, nc=nc, slot=slot, gather=None)
        galerkin_refresh(slot, lev.data, nxt.data)
        return nxt

    def _gather(self, dist):
        """Move a distributed level onto rank 0 as a serial level (rows in global order)."""
        comm = self.comm
        prev = self.levels[-1]
        cols = dist.global_cols[dist.indices.astype(np.int64)]
        rows = np.repeat(np.arange(dist.n), np.diff(dist.indptr).astype(np.int64))
        perm = np.lexsort((cols, rows))  # each row's entries by global column
        counts = comm.gather(len(cols), root=0)
        nrows = comm.gather(dist.n, root=0)
        row_counts = np.diff(dist.indptr).astype(np.int64)
        all_cols = comm.gather(cols[perm], root=0)
        all_rc = comm.gather(row_counts, root=0)
        gather = SimpleNamespace(perm=perm, buf=np.zeros(len(cols)), counts=counts,
                                 nrows=nrows, local=dist, rc=np.zeros(max(dist.n, 1)))
        prev.next.gather = gather
        if not self.root:
            self._gather_data(gather, None)
            return None
        gcols = np.concatenate(all_cols)
        rc = np.concatenate(all_rc)
        n = int(sum(nrows))
        ip = np.concatenate([[0], np.cumsum(rc)]).astype(IDX)
        grows = np.repeat(np.arange(n), rc)
        dp = np.flatnonzero(gcols == grows).astype(np.int64)
        lev = Level(ip, gcols.astype(IDX), np.zeros(len(gcols)), dp, n, n, None,
                    Reducer(MPI.COMM_SELF))
        self._gather_data(gather, lev)
        return lev

    def _gather_data(self, g, target):
        np.take(g.local.data, g.perm, out=g.buf)
        self.comm.Gatherv(g.buf, [target.data, g.counts] if target is not None else None, root=0)

    def _finish(self, coarsest_here=True):
        """Smoother diagonals on every level held here; factorise the coarsest if held here."""
        for lev in self.levels:
            lev.smoother_setup()
        if coarsest_here:
            self._factor_coarsest()

    def _factor_coarsest(self):
        lev = self.levels[-1]
        dense = np.zeros((lev.n, lev.n))
        rows = np.repeat(np.arange(lev.n), np.diff(lev.indptr).astype(np.int64))
        np.add.at(dense, (rows, lev.indices.astype(np.int64)), lev.data)
        rowsum = np.abs(dense.sum(axis=1)).max()
        if rowsum <= 1e-10 * np.abs(np.diag(dense)).max():  # singular: pin the last unknown
            lev.pinned = lev.n - 1
            dense[lev.pinned, :] = 0.0
            dense[:, lev.pinned] = 0.0
            dense[lev.pinned, lev.pinned] = 1.0
        lev.lu = sla.lu_factor(dense, check_finite=False)

    def coarse_exchangers(self):
        """The halo exchangers of the distributed coarse levels (their counters count too)."""
        return [lev.ex for lev in self.levels[1:] if lev.ex is not None]

    # -- refresh ------------------------------------------------------------------------------
    def refresh(self):
        """New fine coefficients, same pattern: recompute coarse ones, refactor the coarsest."""
        levels = self.levels
        for i, lev in enumerate(levels):
            nx = lev.next
            if nx is None:
                break
            if nx.gather is None:
                galerkin_refresh(nx.slot, lev.data, levels[i + 1].data)
                continue
            galerkin_refresh(nx.slot, lev.data, nx.gather.local.data)
            self._gather_data(nx.gather, levels[i + 1] if self.root else None)
            if not self.root:
                break
        self._finish(coarsest_here=self.root)

    # -- cycles -------------------------------------------------------------------------------
    def apply(self, r, z):
        """z = M r (owned entries; z's ghost entries are scratch)."""
        if self.levels[0].next is None:  # the whole problem is the coarsest level
            self._solve(0, r, z)
        else:
            self._cycle(0, r, z)
        return z

    def solve(self, b, x, tol, max_iter, ws=None):
        """Standalone AMG: x += K(b - A x), K a K-cycle from the top level, until
        ||b - A x|| <= tol ||b||.  Usually slower than ``krylov.fcg`` with ``apply`` as
        preconditioner; there for comparison and for callers without a Krylov method."""
        from .krylov import SolveInfo, _axpy, _dot2

        A, n = self.A, self.A.pattern.n_rows
        red = self.levels[0].red
        r = np.zeros(A.pattern.n_cols) if ws is None else ws[0]
        z = np.zeros(A.pattern.n_cols) if ws is None else ws[1]
        info = SolveInfo()
        for it in range(max_iter + 1):
            A.residual(x, b, r)
            rr, bb = red.sum(*_dot2(r, r, b, b, n))
            res = np.sqrt(rr / bb) if bb > 0.0 else np.sqrt(rr)
            if it == 0:
                info.res0 = res
            info.res, info.iters = res, it
            if res <= tol:
                return info
            if it < max_iter:  # a K-cycle on the top level too: its own Krylov steps
                self._solve(0, r, z)
                _axpy(1.0, z, x, n)
        info.converged = False
        return info

    def _coarse(self, i, lev):
        """Solve for the next level's correction; returns it as a local owned-coarse array."""
        nx = lev.next
        g = nx.gather
        if g is None:
            nxt = self.levels[i + 1]
            self._solve(i + 1, nxt.b, nxt.x)
            return nxt.x
        comm = self.comm
        nxt = self.levels[i + 1] if self.root else None
        comm.Gatherv(g.rc[: nx.nc], [nxt.b, g.nrows] if self.root else None, root=0)
        if self.root:
            self._solve(i + 1, nxt.b, nxt.x)
        comm.Scatterv([nxt.x, g.nrows] if self.root else None, g.rc[: nx.nc], root=0)
        return g.rc

    def _solve(self, i, b, x):
        """Approximate A_i x = b: direct on the coarsest level, else a K- or V-cycle."""
        lev = self.levels[i]
        if lev.lu is not None and lev.next is None:
            x[: lev.n] = sla.lu_solve(lev.lu, b[: lev.n], check_finite=False)
            if lev.pinned >= 0:
                x[lev.pinned] = 0.0
        elif self.cycle_kind == "K":
            self._kcycle(i, b, x)
        else:
            self._cycle(i, b, x)

    def _cycle(self, i, b, x):
        lev = self.levels[i]
        n = lev.n
        x[:] = 0.0
        gs_sweep(lev.indptr, lev.indices, lev.data, lev.diag_pos, lev.dl1, b, x, n, True)
        lev.exchange(x)
        residual(lev.indptr, lev.indices, lev.data, x, b, lev.r)
        nx = lev.next
        if nx.gather is None:
            restrict(nx.agg, lev.r, n, self.levels[i + 1].b, nx.nc)
        else:
            restrict(nx.agg, lev.r, n, nx.gather.rc, nx.nc)
        e = self._coarse(i, lev)
        prolong_add(nx.agg, e, n, x)
        lev.exchange(x)
        gs_sweep(lev.indptr, lev.indices, lev.data, lev.diag_pos, lev.dl1, b, x, n, False)

    def _kcycle(self, i, b, x):
        """Two Krylov (flexible CG) steps on level i, each preconditioned by one cycle."""
        lev = self.levels[i]
        n = lev.n
        c, d, v, w, r2 = lev.c, lev.d, lev.v, lev.w, lev.r2
        self._cycle(i, b, c)
        lev.matvec(c, v)
        rho1, alpha1, bb, vv, bv = lev.red.sum(*_kdots1(c, v, b, n))
        if rho1 <= 0.0:
            x[:n] = c[:n]
            return
        a1 = alpha1 / rho1
        if bb - 2.0 * a1 * bv + a1 * a1 * vv <= KCYCLE_T * KCYCLE_T * bb:
            _scale_into(x, a1, c, n)
            return
        _axpy_into(r2, b, a1, v, n)
        self._cycle(i, r2, d)
        lev.matvec(d, w)
        gamma, beta, alpha2 = lev.red.sum(*_kdots2(d, v, w, r2, n))
        rho2 = beta - gamma * gamma / rho1
        if rho2 <= 0.0:
            _scale_into(x, a1, c, n)
            return
        _combine(x, a1 - gamma * alpha2 / (rho1 * rho2), c, alpha2 / rho2, d, n)
