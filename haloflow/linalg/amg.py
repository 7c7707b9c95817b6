"""Aggregation AMG for the pressure equation: the hierarchy (set-up and refresh) and its
cycles, a preconditioner for FCG or CG.

- Levels by plain aggregation (:mod:`.aggregation`), Galerkin coarse matrices refreshed each
  step (:mod:`.galerkin`), partition-independent aggregates: the same hierarchy and the same
  iterations on any rank count.
- Coarse levels are visited by the K-cycle (two flexible-CG steps preconditioned by the next
  level, Notay's K-cycle) or AMLI (two Richardson steps with the degree-2 AMLI polynomial's
  fixed lengths: no reduction on the coarse levels), on the first ``KRYLOV_LEVELS`` coarse
  levels of at least ``KRYLOV_ABOVE`` rows; smaller ones get one plain cycle.  ``cycle =
  "auto"`` takes AMLI on 3D stencils (more than ``AMLI_COUPLINGS`` off-diagonals a row) and
  the K-cycle on 2D ones, where AMLI cost iterations.
- Once a level has fewer than ``GATHER_BELOW`` global rows every rank holds all of it (one
  allgather of the right-hand side per visit) and solves the same serial hierarchy below it,
  ended by a sparse Cholesky (:mod:`.cholesky`): no rank waits for another.
- ``agglomerate``: a coarse level with fewer rows per rank is owned by fewer ranks
  (:mod:`.agglomerate`); the others hand their share over by the transfers.
- Smoother: l1 hybrid Gauss-Seidel, Jacobi across the cut; on the top level the rows next
  to the cut are swept again with fresh ghosts (``RESWEEP``).
The compiled solve (:mod:`.kcycle`) runs these cycles whole in compiled code; the measured
reasons for each threshold are in docs/design.md ("Pressure solve").
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..parallel import halo, transfer
from ..parallel.reduce import Reducer, self_reducer
from ..parallel.timers import NULL_TIMERS
from . import amg_kernels as kern
from . import cycles
from .agglomerate import active_ranks, leaders
from .aggregation import _aggregate
from .amg_levels import VECTORS, Level, _coarse_halo, _RowShare, _share_rows, _transfers
from .cholesky import Cholesky
from .galerkin import (
    _diagonal_positions,
    _entries_by_owner,
    _first_rows,
    _galerkin_structure,
    _members,
    galerkin_pattern,
    galerkin_refresh,
)
from .matrix import IDX

NULL_PHASE = NULL_TIMERS("")  # an untimed block


GATHER_BELOW = 300  # every rank holds the whole coarse problem once it has fewer rows


COARSEST = 300  # solve directly (LU) at or below this many unknowns


COARSEST_2D = 1000  # both, on 2D problems (AMG's ``dims``)


MIN_RATIO = 1.4  # stop coarsening if a level shrinks by less than this factor




CYCLE = "auto"  # the coarse solve on Krylov levels: "K" (K-cycle), "A" (AMLI), "V" (one


# cycle), "auto": AMLI where the top level couples a row to more than AMLI_COUPLINGS others
AMLI_COUPLINGS = 5.0  # on average (3D stencils 6, 2D 4: AMLI cost 2D 1-2 iterations)


AMLI_LMIN = 0.3  # AMLI: the smallest eigenvalue of a level's one-cycle preconditioned matrix


CHOLESKY = True  # the coarsest level by sparse Cholesky where it is positive definite


DENSE_LU = 200  # else: a coarsest level of at most this many rows gets a dense LU


REFACTOR_ABOVE = 0.01  # the Cholesky factors kept until an entry moves by more (cholesky.py)


KRYLOV_ABOVE = 500  # K-cycle: levels with fewer global rows get one plain cycle per visit


KRYLOV_LEVELS = 2  # ... and so do levels below the first KRYLOV_LEVELS coarse ones


RESWEEP = 1  # distributed levels: sweep the rows next to the cut again with fresh ghosts


RESWEEP_ABOVE = 2000  # ... on coarse levels of at least this many global rows (serial: counted)


RESWEEP_COARSE = False  # ... if at all: the top level only (see the module docstring)


AGGREGATION = "global"  # "global": partition-independent aggregates; "local": per rank


class AMG:
    """Aggregation AMG preconditioner for a DistMatrix; ``setup`` once, ``refresh`` per step.

    ``aggregation="global"`` makes the aggregates those of a serial run whatever the
    partition (decided on rank 0, see the module docstring); ``"local"`` aggregates each
    rank's rows on their own (no rank-0 step, aggregates never span ranks, more iterations
    on jagged partitions).

    ``red`` is the run's Reducer: the distributed levels reduce on its communicator and
    every level counts into its ``stats`` the reductions a parallel run makes (see
    ``_serial_next``).  ``dims``: the problem's dimensions, 2 for a one-cell-thick mesh
    (the coarse levels then end at ``COARSEST_2D`` rows); None: judged from the stencil."""

    def __init__(self, A, lmesh, red: Reducer, strategy: str = "packed", cycle: str | None = None,
                 timers=NULL_TIMERS, aggregation: str = AGGREGATION,
                 gather_below: int | None = None, work: np.ndarray | None = None,
                 dims: int | None = None, agglomerate: int = 0):
        if aggregation not in ("global", "local"):
            raise ValueError(f"unknown AMG aggregation {aggregation!r} (global or local)")
        self.A = A
        self.lmesh = lmesh
        self.red = red
        self.timers = timers  # "amg_replicated": the levels every rank of a parallel run repeats
        self.first_redundant = None  # index of the first such level
        self.allgathers = 0  # visits to it: one allgather of its right-hand side each
        self.replicated_phase = None  # its timer while a cycle from Python is inside it
        self.refreshes = 0
        self.comm = red.comm  # handed to the transfer plans of the distributed levels
        self.cycle_kind = CYCLE if cycle is None else cycle
        if self.cycle_kind not in ("K", "A", "V", "auto"):
            raise ValueError(f"unknown AMG cycle {cycle!r} (K, A, V or auto)")
        self.amli = amli_steps(AMLI_LMIN)
        self.aggregation = aggregation
        couplings = self._couplings()
        # a 2D problem (the mesh's solved directions; without them, a 2D stencil's couplings:
        # a tetrahedral mesh's 4 would pass for 2D there)
        planar = dims <= 2 if dims is not None else couplings <= AMLI_COUPLINGS
        self.coarsest = COARSEST_2D if planar else COARSEST
        # replicate below this many global rows: the network decides where that pays (a
        # slow one makes a distributed level's exchanges dearer than the whole level's work)
        if gather_below is None:
            gather_below = COARSEST_2D if planar else GATHER_BELOW
        self.gather_below = int(gather_below)
        # coarse levels below this many rows per rank move onto fewer ranks (0: never)
        self.agglomerate = int(agglomerate)
        self._active = red.size  # ranks the last planned level is spread over
        self._halo = lambda topo, c: halo.make(strategy, topo, c)
        self.levels: list[Level] = []
        self.root = red.rank == 0
        self._setup()
        self.block = self._vectors(work)
        if self.cycle_kind == "auto":
            self.cycle_kind = "A" if couplings > AMLI_COUPLINGS else "K"

    def _couplings(self) -> float:
        """Off-diagonal entries per row of the top level, over all ranks."""
        p = self.A.pattern
        nnz, rows = len(p.indices), p.n_rows
        if self.red.parallel:
            nnz, rows = transfer.total(self.comm, nnz), transfer.total(self.comm, rows)
        return nnz / max(rows, 1) - 1.0

    # -- set-up ---------------------------------------------------------------------------------
    def _setup(self):
        A = self.A
        p = A.pattern
        top = Level(p.indptr, p.indices, A.data, p.diag_pos, p.n_rows, p.n_cols, A.ex,
                    self.red)
        top.topo = self.lmesh
        if self.red.parallel:  # global ids of the columns; the serial order is the mesh's
            top.global_cols = np.asarray(self.lmesh.global_cells, dtype=np.int64)
            top.key = top.global_cols[: p.n_rows]
        self.levels = [top]
        lev = top
        while True:
            distributed = lev.red.parallel
            n_global = transfer.total(self.comm, lev.n) if distributed else lev.n
            lev.rows = n_global
            # the top level is always coarsened once, as a distributed one must be, so that
            # small problems get the same hierarchy on any number of ranks; levels a parallel
            # run distributes are coarsened however small (GATHER_BELOW below COARSEST)
            if not distributed and n_global <= self.coarsest and self.first_redundant is not None:
                break
            if distributed:  # a distributed level always hands over to a coarser one
                plan = self._plan(lev)
                last = (plan.nc_global < self.gather_below
                        or plan.nc_global * MIN_RATIO > n_global)
                nxt = self._distributed_next(lev, plan, halo=not last)
                if last:  # every rank gets the whole coarse level from here on
                    self.first_redundant = len(self.levels)
                    nxt = self._replicate(nxt)
            else:
                agg, nc = _aggregate(lev.indptr, lev.indices, lev.data, lev.diag_pos, lev.n,
                                     lev.key)
                if nc * MIN_RATIO > n_global:  # stalled
                    break
                nxt = self._serial_next(lev, agg, nc)
            self.levels.append(nxt)
            lev = nxt
        self._finish()

    def _serial_next(self, lev, agg, nc):
        cagg = agg.astype(np.int64)
        ip, ix, dp, slot = galerkin_pattern(lev.indptr, lev.indices, lev.n, agg, cagg, nc, nc)
        # a serial run counts the reductions a parallel run would make on this level
        serial_run = not self.red.parallel
        would_distribute = (serial_run and self.first_redundant is None
                            and nc >= self.gather_below)
        if serial_run and not would_distribute and self.first_redundant is None:
            self.first_redundant = len(self.levels)
        nxt = Level(ip, ix, np.zeros(len(ix)), dp, nc, nc, None,
                    self_reducer(self.red.stats if would_distribute else None))
        lev.next = SimpleNamespace(agg=agg, nc=nc, ncols=nc, slot=slot, share=None, xfer=None,
                                   redundant=None)
        galerkin_refresh(slot, lev.data, nxt.data)
        return nxt

    def _plan(self, lev):
        """Aggregates of a distributed level: for each owned row, the global id of its
        aggregate (aggregates numbered rank by rank, ``offsets``), and each owned
        aggregate's key (its first row's key: the serial order on the next level)."""
        comm, red = self.comm, self.red
        size, me = red.size, red.rank
        if self.aggregation == "local":
            agg, nc = _aggregate(lev.indptr, lev.indices, lev.data, lev.diag_pos, lev.n)
            offsets = np.concatenate([[0], np.cumsum(transfer.allgather(comm, nc))]
                                     ).astype(np.int64)
            return SimpleNamespace(cgid=offsets[me] + agg, offsets=offsets, ckeys=None,
                                   nc_global=int(offsets[-1]))
        # global: rank 0 matches the whole level's graph in the serial order
        n = lev.n
        nrows = np.asarray(transfer.allgather(comm, n), dtype=np.int64)
        nnz = red.gather(len(lev.indices), root=0)
        gid = lev.global_cols[:n]
        key = gid if lev.key is None else np.asarray(lev.key, dtype=np.int64)
        total = int(nrows.sum())
        # rank 0 holds the whole level, one of its memory peaks on several ranks: the
        # entries' global columns travel as 32-bit ids where they fit and become gathered
        # rows at once, before the values arrive; row lengths and each diagonal's place in
        # its row as 32-bit; every gathered array is dropped once it is used
        col_t = IDX if total <= np.iinfo(IDX).max else np.int64
        grc, goff, grow, gkey = (transfer.gatherv(comm, a, nrows) for a in (
            np.diff(lev.indptr).astype(np.int32),
            (lev.diag_pos - lev.indptr[:n]).astype(np.int32), gid, key))
        gcols = transfer.gatherv(comm, np.take(lev.global_cols.astype(col_t), lev.indices),
                                 nnz)
        cg_rows = ckey = ix = order = ip = gdp = None
        if self.root:
            row = np.empty(total, dtype=np.int64)  # global id -> gathered row
            row[grow] = np.arange(total)
            ix = row.astype(IDX)[gcols]
            order = row if np.array_equal(gkey, grow) else np.argsort(gkey, kind="stable")
            del row, grow
            ip = np.zeros(total + 1, dtype=np.int64)
            np.cumsum(grc, out=ip[1:])
            gdp = ip[:-1] + goff  # the diagonals' places among all entries
            ip = ip.astype(IDX)
            del grc, goff
        del gcols
        gdata = transfer.gatherv(comm, lev.data, nnz)
        if self.root:
            agg, nc = _aggregate(ip, ix, gdata, gdp, total, gkey, order)
            del ip, ix, gdata, gdp
            seed = _first_rows(agg, order, nc)  # an aggregate belongs to its first row's rank
            owner = self._leaders(nc)[np.repeat(np.arange(size), nrows)[seed]]  # or its leader
            offsets = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=size))])
            by_owner = np.argsort(owner, kind="stable")
            cgid = np.empty(nc, dtype=np.int64)
            cgid[by_owner] = np.arange(nc)  # rank by rank, in creation order within a rank
            cg_rows = cgid[agg]
            ckey = np.empty(nc, dtype=np.int64)
            ckey[cgid] = gkey[seed]
        offsets = np.asarray(red.bcast(offsets if self.root else None, root=0), np.int64)
        counts = np.diff(offsets)
        cgid = np.empty(n, dtype=np.int64)
        transfer.RootPieces(comm, nrows).scatter(cg_rows, cgid)
        my_keys = np.empty(int(counts[me]), dtype=np.int64)
        transfer.RootPieces(comm, counts).scatter(ckey, my_keys)
        return SimpleNamespace(cgid=cgid, offsets=offsets, ckeys=my_keys,
                               nc_global=int(offsets[-1]))

    def _leaders(self, nc: int) -> np.ndarray:
        """Rank 0, planning a coarse level of ``nc`` rows: who holds each rank's share of
        it (:mod:`.agglomerate`; itself while the level keeps every rank)."""
        self._active = min(self._active, active_ranks(nc, self.red.size, self.agglomerate))
        nodes = getattr(self.lmesh, "nodes", None)
        if nodes is None or len(nodes) != self.red.size:
            nodes = np.zeros(self.red.size, dtype=np.int64)  # one node
        return leaders(nodes, self._active)

    def _distributed_next(self, lev, plan, halo=True):
        """Coarse level of a distributed level from its plan: owned aggregates (rows), the
        ghost aggregates its rows couple to or that hold some of this rank's cells, the
        partial Galerkin rows sent to the owners of the latter, and the halo pattern (not if
        ``halo`` is false: a level about to be replicated never exchanges)."""
        comm, me = self.comm, self.red.rank
        n = lev.n
        offsets = plan.offsets
        off = int(offsets[me])
        nc = int(offsets[me + 1]) - off
        cg = np.zeros(max(lev.ncols, 1))  # global coarse id of every local fine column
        cg[:n] = plan.cgid
        lev.exchange(cg)
        cg = cg[: lev.ncols].astype(np.int64)
        foreign = (cg < off) | (cg >= off + nc)
        used, their_rows, their_entries = _entries_by_owner(lev.indptr, lev.indices,
                                                            foreign[:n], lev.ncols)
        sent, inbox = _share_rows(comm, offsets, cg[their_rows],
                                  cg[lev.indices[their_entries]], their_entries)
        received = np.concatenate(inbox)
        rrow, rcol = received // offsets[-1], received % offsets[-1]
        members_elsewhere = np.unique(cg[:n][foreign[:n]])
        # ghost columns: first those the rows couple to (exchanged, ascending, hence grouped
        # by owner), then aggregates holding only cells of this rank (set by the transfers)
        coupled = np.unique(np.concatenate([cg[used & foreign],
                                            rcol[(rcol < off) | (rcol >= off + nc)]]))
        ghost = np.concatenate([coupled, np.setdiff1d(members_elsewhere, coupled)])
        by_id = np.argsort(ghost, kind="stable")
        ids = ghost[by_id]

        def local_col(g):  # (columns that are neither owned nor ghost: never read)
            at = by_id[np.minimum(np.searchsorted(ids, g), len(ids) - 1)] if len(ids) else 0
            return np.where((g >= off) & (g < off + nc), g - off, nc + at)

        ncols = nc + len(ghost)
        col = local_col(cg)
        # owned rows' entries, then one pseudo-row per received entry (pseudo-column
        # lev.ncols + t standing for its coarse column)
        nnz, nr = len(lev.indices), len(received)
        mptr, mem = _members(np.concatenate([np.where(foreign[:n], -1, cg[:n] - off),
                                             rrow - off]), nc)
        ip, ix, slot = _galerkin_structure(
            np.concatenate([lev.indptr.astype(np.int64), nnz + np.arange(1, nr + 1)]),
            np.concatenate([lev.indices.astype(np.int64), lev.ncols + np.arange(nr)]),
            mptr, mem, np.concatenate([col, local_col(rcol)]), nc, ncols)
        per_rank = np.split(slot[nnz:], np.cumsum([len(b) for b in inbox])[:-1])
        sources = [q for q in range(self.red.size) if len(inbox[q])]
        share = None
        if sent is not None or sources:
            none = np.zeros(0, dtype=np.int64)
            share = _RowShare(comm, sent.entries if sent else none, sent.slot if sent else none,
                              sent.dests if sent else [], sent.bounds if sent else [0],
                              sources, [per_rank[q] for q in sources])
        nxt = Level(ip.astype(IDX), ix.astype(IDX), np.zeros(len(ix)),
                    _diagonal_positions(ip, ix, nc), nc, ncols,
                    None, self.red)
        if halo:
            nxt.topo = _coarse_halo(comm, offsets, coupled)
            nxt.ex = self._halo(nxt.topo, comm)
        nxt.offset = off
        nxt.active = int(np.count_nonzero(np.diff(offsets)))  # ranks holding rows of it
        nxt.global_cols = np.concatenate([off + np.arange(nc), ghost]).astype(np.int64)
        nxt.key = plan.ckeys
        lev.next = SimpleNamespace(agg=col[:n], nc=nc, ncols=ncols, slot=slot[:nnz],
                                   share=share,
                                   xfer=_transfers(comm, offsets, members_elsewhere, local_col),
                                   redundant=None)
        self._galerkin(lev.next, lev.data, nxt.data)
        return nxt

    @staticmethod
    def _galerkin(nx, fine, coarse):
        galerkin_refresh(nx.slot, fine, coarse)
        if nx.share is not None:
            nx.share.refresh(fine, coarse)

    def _replicate(self, dist):
        """The whole of a distributed level on every rank, as one serial level with rows in
        global order (rank by rank), and the plans that keep it up to date: its coefficients
        at each refresh and its right-hand side at each visit, one allgather each."""
        comm = self.comm
        cols = dist.global_cols[dist.indices.astype(np.int64)]
        rows = np.repeat(np.arange(dist.n), np.diff(dist.indptr).astype(np.int64))
        perm = np.lexsort((cols, rows))  # each row's entries by global column
        nnz = np.asarray(transfer.allgather(comm, len(cols)), dtype=np.int64)
        nrows = np.asarray(transfer.allgather(comm, dist.n), dtype=np.int64)
        gcols = transfer.allgatherv(comm, cols[perm], nnz)
        rc = transfer.allgatherv(comm, np.diff(dist.indptr).astype(np.int64), nrows)
        keyed = all(transfer.allgather(comm, dist.key is not None))
        n = int(nrows.sum())
        ip = np.concatenate([[0], np.cumsum(rc)]).astype(IDX)
        dp = np.flatnonzero(gcols == np.repeat(np.arange(n), rc)).astype(np.int64)
        lev = Level(ip, gcols.astype(IDX), np.zeros(len(gcols)), dp, n, n, None,
                    self_reducer())
        if keyed:  # go on coarsening in the serial order
            lev.key = transfer.allgatherv(comm, np.asarray(dist.key, np.int64), nrows)
        offset = int(np.sum(nrows[: self.red.rank]))
        self.levels[-1].next.redundant = SimpleNamespace(
            rhs=transfer.AllPieces(comm, nrows), offset=offset, n=dist.n,
            cols=dist.global_cols.astype(np.int64), rc=np.zeros(max(dist.ncols, 1)),
            coefs=transfer.AllPieces(comm, nnz), local=dist, perm=perm,
            buf=np.zeros(len(cols)))
        self._replicate_data(self.levels[-1].next.redundant, lev)
        return lev

    @staticmethod
    def _replicate_data(rd, target):
        """This rank's rows of the replicated level (refreshed in ``rd.local``) to all."""
        np.take(rd.local.data, rd.perm, out=rd.buf)
        rd.coefs.allgather(rd.buf, target.data)

    def _finish(self):
        """Smoother diagonals on every level; the coarsest level's factorisation.  The work on
        the redundant levels is timed as "amg_replicated": every rank repeats it."""
        fr = self._redundant_from()
        for i, lev in enumerate(self.levels):
            lev.krylov = lev.rows >= KRYLOV_ABOVE and i <= KRYLOV_LEVELS
        for i, lev in enumerate(self.levels[:fr]):
            lev.smoother_setup()
            if RESWEEP and lev.cut is None and (i == 0 or RESWEEP_COARSE
                                                and lev.rows >= RESWEEP_ABOVE):
                lev.cut = lev.ghost_rows
        with self.timers("amg_replicated") if fr < len(self.levels) else NULL_PHASE:
            for lev in self.levels[fr:]:
                lev.smoother_setup()
            self._factor_coarsest()

    def _vectors(self, work):
        """The levels' work vectors: the top level's residual alone (its right-hand side
        and iterate are the caller's; ``solve`` makes the K-cycle's others if it needs
        them), every coarser level's eight as slices of the rows of one (8, L) block,
        returned (the compiled solve uses it as it is).  They live in ``work`` where they
        fit: scratch that nothing else touches while a solve runs (the momentum solver's
        workspace), since every cycle writes a vector before it reads it."""
        top = max(self.levels[0].ncols, 1)
        sizes = [max(lev.ncols, 1) for lev in self.levels[1:]]
        need = top + len(VECTORS) * sum(sizes)
        buf = work[:need] if work is not None and len(work) >= need else np.zeros(need)
        self.levels[0].r = buf[:top]
        # the cycle in progress (cycles.apply from Python): each level's phase, and the
        # K-cycle's first step length and (c, A c) kept for its second step
        self.cycle_state = np.zeros((3, len(self.levels)))
        block = buf[top:].reshape(len(VECTORS), sum(sizes))
        off = 0
        for lev, m in zip(self.levels[1:], sizes, strict=True):
            for k, name in enumerate(VECTORS):
                setattr(lev, name, block[k, off:off + m])
            off += m
        return block

    def _redundant_from(self):
        """Index of the first level every rank holds whole (len(levels) if none)."""
        return len(self.levels) if self.first_redundant is None else self.first_redundant

    def _factor_coarsest(self):
        """Factors of the coarsest level, as arrays for ``lu_solve``, made at a refresh (a
        Cholesky's once an entry has moved by ``REFACTOR_ABOVE`` since they were made); a
        singular (all-Neumann) matrix gets its last unknown pinned.  A sparse Cholesky
        (:mod:`.cholesky`) where the level is positive definite, as it is for a pressure
        Laplacian; else an LU: up to ``DENSE_LU`` rows a dense LU (LAPACK): 46 rows in 3D,
        40 us against 370 us for the sparse path, whose set-up is mostly Python; above,
        sparse (1000 rows in 2D: 1.6 ms to factorise, 50 us to solve, where a K-cycle below
        that level cost 175 us per visit)."""
        lev = self.levels[-1]
        if CHOLESKY and lev.chol is not False:
            if lev.chol is None:
                lev.chol = Cholesky(lev)
            if lev.chol.factor(lev, REFACTOR_ABOVE):
                return
            lev.chol = False  # not positive definite after all: an LU from now on
        if lev.n <= DENSE_LU:
            self._factor_dense(lev)
            return
        n = lev.n
        rows = np.repeat(np.arange(n), np.diff(lev.indptr).astype(np.int64))
        cols = lev.indices.astype(np.int64)
        data = lev.data.copy()
        diag = np.zeros(n)
        np.add.at(diag, rows[rows == cols], data[rows == cols])
        rowsum = np.abs(np.bincount(rows, weights=data, minlength=n)).max()
        lev.pinned = -1
        if rowsum <= 1e-10 * np.abs(diag).max():  # singular: pin the last unknown
            lev.pinned = n - 1
            data[(rows == lev.pinned) | (cols == lev.pinned)] = 0.0
            rows = np.append(rows, lev.pinned)
            cols = np.append(cols, lev.pinned)
            data = np.append(data, 1.0)
        import scipy.sparse as sp  # here only: a run without AMG never loads scipy.sparse
        import scipy.sparse.linalg as spla

        A = sp.csc_matrix((data, (rows, cols)), shape=(n, n))
        f = spla.splu(A, permc_spec="COLAMD")
        L, U = f.L.tocsc(), f.U.tocsc()
        lev.lu = SimpleNamespace(
            perm_r=f.perm_r.astype(np.int64), perm_c=f.perm_c.astype(np.int64),
            lp=L.indptr.astype(np.int64), li=L.indices.astype(IDX), lx=L.data,
            up=U.indptr.astype(np.int64), ui=U.indices.astype(IDX), ux=U.data,
            ud=U.diagonal(), y=np.zeros(n))

    @staticmethod
    def _factor_dense(lev):
        n = lev.n
        if lev.dense is None:  # the fixed pattern, once
            rows = np.repeat(np.arange(n), np.diff(lev.indptr).astype(np.int64))
            lc, lr = np.triu_indices(n)  # L by columns: rows j..n-1 of column j
            uc, ur = np.tril_indices(n)  # U by columns: rows 0..j of column j
            lev.dense = SimpleNamespace(
                rows=rows, cols=lev.indices.astype(np.int64), m=np.zeros((n, n)),
                lr=lr, lc=lc, ur=ur, uc=uc,
                lu=SimpleNamespace(
                    perm_r=np.zeros(n, dtype=np.int64), perm_c=np.arange(n, dtype=np.int64),
                    lp=np.concatenate([[0], np.cumsum(n - np.arange(n))]).astype(np.int64),
                    li=lr.astype(IDX), lx=np.zeros(len(lr)),
                    up=np.concatenate([[0], np.cumsum(np.arange(1, n + 1))]).astype(np.int64),
                    ui=ur.astype(IDX), ux=np.zeros(len(ur)), ud=np.zeros(n), y=np.zeros(n)))
        d = lev.dense
        m = d.m
        m[:] = 0.0
        m[d.rows, d.cols] = lev.data
        lev.pinned = -1
        if np.abs(m.sum(axis=1)).max() <= 1e-10 * np.abs(np.diagonal(m)).max():
            lev.pinned = n - 1
            m[n - 1, :] = 0.0
            m[:, n - 1] = 0.0
            m[n - 1, n - 1] = 1.0
        from scipy.linalg import lu_factor  # here only: runs without AMG never load it

        lu, piv = lu_factor(m, overwrite_a=True, check_finite=False)
        f = d.lu
        kern._perm_of_swaps(piv, f.perm_r)
        np.take(lu.ravel(), d.lr * n + d.lc, out=f.lx)  # (diagonal entries unused: unit L)
        np.take(lu.ravel(), d.ur * n + d.uc, out=f.ux)
        f.ud[:] = np.diagonal(lu)
        lev.lu = f

    def profile(self) -> dict:
        """Levels, their global rows and exchanges, for profile.json (the performance model
        prices the exchanges of distributed levels; serial runs count those they would
        make), the rows and entries of the redundant level with its allgathers (one per
        visit) and refreshes (one allgather of its entries each).  The same on every rank."""
        fr = self._redundant_from()
        rd = self.levels[fr] if fr < len(self.levels) else None
        return {"levels": [{"index": i, "rows": int(lev.rows), "distributed": i < fr,
                            "exchanges": int(lev.calls),
                            "compiled_exchanges": int(lev.compiled_calls),
                            "visits": int(lev.visits), "ranks": self._ranks_of(i)}
                           for i, lev in enumerate(self.levels)],
                "gathered_rows": int(rd.rows) if rd is not None else 0,
                "gathered_nnz": int(len(rd.indices)) if rd is not None else 0,
                "aggregation": self.aggregation,
                "allgathers": int(self.allgathers), "refreshes": int(self.refreshes),
                "factors_reused": int(self._chol().reused) if self._chol() else 0}

    def _ranks_of(self, i: int) -> int:
        """How many ranks hold rows of level i (all of them from the replicated one on)."""
        lev = self.levels[i]
        if i >= self._redundant_from() or not self.red.parallel:
            return int(self.red.size)
        return int(lev.active) if i else int(self.red.size)

    def rank_profile(self) -> dict:
        """This rank's own figures per level (``profile`` holds those every rank shares):
        its matrix entries, and the messages it sends per visit (``_transfer_peers``)."""
        return {"nnz": [int(len(lev.indices)) for lev in self.levels],
                "transfer_peers": [self._transfer_peers(i) for i in range(len(self.levels))]}

    def _transfer_peers(self, i: int) -> int:
        """Messages this rank sends per visit to level i: partial restrictions to the
        owners of aggregates it has cells of, and the owners' values back to the ranks
        with cells in its own (none into the replicated level: an allgather)."""
        if i == 0 or self.levels[i - 1].next is None:
            return 0
        nx = self.levels[i - 1].next
        if nx.xfer is None:
            return 0
        return len(nx.xfer.out_peers) + (len(nx.xfer.in_peers) if nx.redundant is None else 0)

    def _chol(self):
        """The coarsest level's Cholesky, or None (not yet made, or an LU instead)."""
        return self.levels[-1].chol or None

    def refactor_next(self) -> None:
        """Factor the coarsest level afresh at the next refresh, whatever its entries did."""
        if self._chol():
            self._chol().refactor_next()

    def factor_basis(self) -> np.ndarray | None:
        """The coarsest level's entries its current Cholesky factors were made from (None:
        no Cholesky): with the hierarchy's first matrix, what a restart needs to go on
        factoring, or reusing the factors, exactly as this run will."""
        chol = self._chol()
        return None if chol is None or chol.basis is None else chol.basis.copy()

    def adopt_factor_basis(self, basis: np.ndarray) -> bool:
        """Factors made from ``basis`` (a :meth:`factor_basis` of a run with this hierarchy),
        as that run's were; the level's own entries are left as they are.  False (and the
        level factored afresh at the next refresh) where they cannot be: another coarsest
        level (a restart on another rank count may have one) or not positive definite."""
        lev, chol = self.levels[-1], self._chol()
        if chol is None or len(basis) != len(lev.data):
            self.refactor_next()
            return False
        own = lev.data.copy()
        lev.data[:] = basis
        chol.refactor_next()
        made = chol.factor(lev, REFACTOR_ABOVE)
        lev.data[:] = own
        if not made:
            self._factor_coarsest()  # as the level's own entries need (an LU if not SPD)
        return made

    def coarse_exchangers(self):
        """The halo exchangers of the distributed coarse levels (their counters count too)."""
        return [lev.ex for lev in self.levels[1:] if lev.ex is not None]

    # -- refresh ------------------------------------------------------------------------------
    def refresh(self):
        """New fine coefficients, same pattern: recompute coarse ones (the redundant level's
        by one allgather of its entries), refactor the coarsest."""
        levels = self.levels
        fr = self._redundant_from()
        self.refreshes += 1
        for i, lev in enumerate(levels[:fr]):
            nx = lev.next
            if nx is None:
                break
            if nx.redundant is None:
                self._galerkin(nx, lev.data, levels[i + 1].data)
            else:
                self._galerkin(nx, lev.data, nx.redundant.local.data)
                self._replicate_data(nx.redundant, levels[i + 1])
        with self.timers("amg_replicated") if fr < len(levels) else NULL_PHASE:
            for lev, nxt in zip(levels[fr:-1], levels[fr + 1:], strict=True):
                self._galerkin(lev.next, lev.data, nxt.data)
        self._finish()

    # -- cycles -------------------------------------------------------------------------------
    def apply(self, r, z):
        """z = M r (owned entries; z's ghost entries are scratch): the cycle of
        :mod:`.cycles` run from Python."""
        cycles.apply(self, r, z)
        return z

    def solve(self, b, x, tol, max_iter, ws=None):
        """Standalone AMG: x += M (b - A x), M the cycle (:meth:`apply`), until
        ||b - A x|| <= tol ||b||.  Slower than ``flexible.fcg`` with ``apply`` as
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
            if it < max_iter:
                self.apply(r, z)
                _axpy(1.0, z, x, n)
        info.converged = False
        return info


def amli_steps(lmin: float) -> tuple[float, float]:
    """Step lengths of the degree-2 AMLI polynomial: x = a1 c + a2 M(b - a1 A c), c = M b,
    leaves the error p(M A) e with p(t) = (1 + T2(z(t))) / (1 + T2(z(0))), z mapping
    [lmin, 1] onto [1, -1] (Vassilevski): p = (1 - 2t / (1 + lmin))^2, two equal steps.
    p stays in [0, 1] on the spectrum of a symmetric cycle, so the level above sees a
    coarse solve that never overshoots; the scaled T2 itself dips below zero there, and
    with it 3D Poisson problems (32^3, 48^3) diverged for lmin <= 0.1."""
    step = 2.0 / (1.0 + lmin)
    return step, step
