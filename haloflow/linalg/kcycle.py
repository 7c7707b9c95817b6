"""The whole AMG-preconditioned pressure solve in one compiled call.

Why: driven from Python (``flexible.fcg`` with ``AMG.apply``) every Krylov iteration and every
K-cycle level visit is an interpreter round trip into small numba kernels, a counted
``Reducer.sum`` and an exchanger call.  Here the hierarchy that :class:`.amg.AMG` built is
packed once into flat arrays with per-level offsets (the coarse levels' index, coefficient,
l1-diagonal and aggregate arrays become views into them, so a refresh updates them in place,
nothing is held twice and nothing is copied per solve; the top level's are the matrix's own,
and the work vectors are the AMG's block as it is), and FCG(1) or single-reduction CG (the
one source of each in :mod:`.flexible`, compiled over :mod:`.compiled_krylov`'s operations)
runs with the K-cycle and the coarsest direct solve inside numba.  The cycle's arithmetic is
that of the Python path (``AMG.apply``), operation for operation, so iterates agree to
round-off and iteration counts are the same (tests/unit/test_kcycle.py,
tests/mpi/test_kcycle_mpi.py).

Parallel runs communicate from compiled code (:mod:`..parallel.mpicall`): the distributed
levels' halo exchanges with each exchanger's plan and pack layout on persistent requests of
our own (:mod:`..parallel.cplan`), the transfers of aggregates spanning ranks likewise, the
fused sums by MPI_Allreduce and the redundant coarse level's right-hand side by one
MPI_Allgatherv per visit.  It counts what the Python path counts: reductions (and their MPI
seconds) in the run's ``ReduceStats``, exchanges per level (``Level.calls``, read by
profile.json and the performance model) and in each level's exchanger (calls, messages,
bytes), the redundant level's allgathers, and it times the redundant levels' solves
("amg_replicated") with the C clock.

On serial hierarchies ``refresh`` also replaces ``AMG.refresh``: the coarsest level is
factorised by a sparse Cholesky in numba (ordering and pattern once) instead of SuperLU,
whose Python and library overhead per refactorisation was most of an 8^3 step's AMG work.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..parallel import mpicall, threads
from ..parallel.faceblocks import grouped
from . import blocks as tb
from . import compiled_krylov
from .amg_levels import level_kind
from .cycle import (
    ALLGATHER_NS,
    ALLGATHERV,
    ALLREDUCE,
    CLOCK,
    CLOCK_ID,
    CNT_HEAD,
    COUNTED,
    CUT,
    EXS,
    FIRST_GATHERED,
    GATHERED_NS,
    GATHERED_VISITS,
    HASCUT,
    HB_OFF,
    HC_N,
    HC_OFF,
    HNREQ,
    HP_OFF,
    HRECV,
    HREQ,
    HSEND,
    IP,
    KRYLOV,
    LV_COLS,
    N_CTL,
    NBLK,
    NCOLS,
    NCUT,
    NLEV,
    NNB,
    NZ,
    PAR,
    PINNED,
    PL_COLS,
    RB,
    RBUF,
    RC_N,
    RC_OFF,
    RD,
    RD_COUNTS,
    RD_DISPLS,
    RD_N,
    RDC_N,
    RDC_OFF,
    REDUCE_NS,
    REDUCTIONS,
    SPLIT,
    STARTALL,
    STATUSES,
    TOP_EXCHANGES,
    TS,
    TS_ADDR,
    VEC,
    WAITALL,
    XACC,
    XACC_N,
    XB_IN,
    XB_OUT,
    XDIST,
    XDIST_N,
    XF,
    XI_N,
    XI_OFF,
    XO_N,
    XO_OFF,
    N,
)
from .flexible import cg1_iterations, fcg_iterations
from .galerkin import galerkin_refresh
from .krylov import SolveInfo
from .matrix import IDX
from .targets import for_target


def _views(levels, attr, dtype=np.float64, pad=None):
    """One array holding every level's ``attr`` (each padded with zeros to ``pad[i]``
    entries if given); the levels' attributes become views into it (of their own length),
    so in-place updates (refresh, smoother set-up) land there and nothing is held twice."""
    parts = [np.asarray(getattr(lev, attr)) for lev in levels]
    size = [len(a) for a in parts] if pad is None else pad
    packed = np.zeros(sum(size), dtype)
    off = 0
    for lev, a, m in zip(levels, parts, size, strict=True):
        packed[off:off + len(a)] = a
        setattr(lev, attr, packed[off:off + len(a)])
        off += m
    return packed


def _thread_levels(levels, nt: int) -> np.ndarray:
    """Per level, the bandwidth its thread blocks snapshot (:func:`.blocks.gs_blocks`), or
    -1 where it runs the serial kernels: one thread, or fewer rows than
    ``threads.LEVEL_MIN_ROWS``."""
    thr = np.full(len(levels) + 1, -1, dtype=np.int64)
    for i, lev in enumerate(levels):
        if nt > 1 and lev.n >= threads.LEVEL_MIN_ROWS and lev.next is not None:
            thr[i] = tb.bandwidth(lev.indptr, lev.indices, lev.n)
    return thr


def _members(levels, thr, pl) -> tuple:
    """The rows of each aggregate of every threaded level (``thr[i] >= 0``), in increasing
    order, as pointers and rows packed level after level, and each level's two offsets:
    the threaded restriction gathers an aggregate's residuals on one thread
    (:func:`.blocks.residual_restrict`) where the serial one scatters them.  A level has
    as many aggregates as the vector :func:`_down` restricts into (``pl``: the plan)."""
    off = np.zeros((len(levels) + 1, 2), dtype=np.int64)
    ptrs, rows = [], []
    for i, lev in enumerate(levels):
        off[i + 1] = off[i]
        if thr[i] < 0:
            continue
        nc = pl[i, RC_N] if pl[i, RD] else levels[i + 1].ncols
        ptr, members = grouped(np.asarray(lev.next.agg[:lev.n], dtype=np.int64),
                               np.arange(lev.n, dtype=IDX), nc)
        ptrs.append(ptr)
        rows.append(members)
        off[i + 1] = off[i] + (len(ptr), lev.n)
    ptr = np.concatenate(ptrs) if ptrs else np.zeros(1, dtype=np.int64)
    return off, ptr, np.concatenate(rows) if rows else np.zeros(1, dtype=IDX)


def _level_table(amg) -> np.ndarray:
    """The int64 table ``lv``: each level's sizes, its offsets in the packed arrays (level
    0 takes no room there: the kernels read the matrix's own arrays) and its cycle."""
    levels = amg.levels
    lv = np.zeros((len(levels) + 1, LV_COLS), dtype=np.int64)
    for i, lev in enumerate(levels):
        cut = lev.cut if lev.cut is not None else np.zeros(0, IDX)
        coarse = i > 0
        lv[i, N], lv[i, NCOLS] = lev.n, lev.ncols
        lv[i + 1, IP] = lv[i, IP] + coarse * (lev.n + 1)
        lv[i + 1, NZ] = lv[i, NZ] + coarse * len(lev.indices)
        lv[i + 1, VEC] = lv[i, VEC] + (len(lev.b) if coarse else 0)
        lv[i + 1, CUT] = lv[i, CUT] + len(cut)
        lv[i, NCUT], lv[i, HASCUT] = len(cut), lev.cut is not None
        lv[i, SPLIT] = bool(lev.split)
        lv[i, COUNTED] = lev.red.stats is amg.red.stats
        lv[i, KRYLOV] = level_kind(amg.cycle_kind, lev.krylov)
    return lv


def _pack(amg, lv):
    """The coarse levels' matrices, smoother diagonals and aggregates, each kind in one array
    (the levels keep views into them), and the top level's own arrays for ``h``."""
    levels = amg.levels
    coarse = levels[1:]
    vec_len = [len(lev.b) for lev in coarse]
    ip = _views(coarse, "indptr", IDX)
    ix = _views(coarse, "indices", IDX)
    dat = _views(coarse, "data")  # level 0's coefficients are the matrix's (per solve)
    dp = _views(coarse, "diag_pos", np.int64, vec_len)
    dinv = _views(coarse, "dinv", np.float64, vec_len)
    nexts = [lev.next for lev in coarse if lev.next is not None]
    agg = _views(nexts, "agg", np.int64, vec_len[:len(nexts)])
    agg = np.concatenate([agg, np.zeros(vec_len[-1] if len(nexts) < len(coarse) else 0,
                                        np.int64)])
    cut = np.concatenate([lev.cut.astype(IDX) if lev.cut is not None else np.zeros(0, IDX)
                          for lev in levels])
    top = levels[0]
    if top.next is not None:
        top.next.agg = np.asarray(top.next.agg, dtype=np.int64)
    agg0 = top.next.agg if top.next is not None else np.zeros(1, np.int64)
    own = (np.asarray(top.indptr, IDX), np.asarray(top.indices, IDX),
           np.asarray(top.diag_pos, np.int64), top.dinv, agg0, top.r[None, :])
    return (ip, ix, dat, dp, dinv, agg, cut, amg.block, lv), own


# the methods of :mod:`.flexible`, compiled over this target's operations
FCG = for_target(fcg_iterations, compiled_krylov, "compiled", compiled=True)
CG1 = for_target(cg1_iterations, compiled_krylov, "compiled", compiled=True)


class CompiledSolve:
    """One pressure solve (``method`` "fcg" or "cg1" with the AMG's K-cycle) as one numba
    call, on the hierarchy of ``amg`` (serial).  ``refresh`` replaces ``amg.refresh``."""

    def __init__(self, amg, method: str, addresses: dict):
        if method not in ("fcg", "cg1"):
            raise ValueError(f"no compiled solve for {method!r}")
        self.amg, self.method = amg, method
        self.kernel = FCG if method == "fcg" else CG1
        levels = amg.levels
        nl = len(levels)
        lv = _level_table(amg)
        packed, own = _pack(amg, lv)
        # per level, a1 and rho1 of a K-cycle in progress; then the AMLI step lengths
        ks = np.zeros(2 * (nl + 1) + 2)
        ks[-2:] = amg.amli
        ctl = self.ctl = np.zeros(N_CTL, dtype=np.int64)
        ctl[NLEV] = nl
        fr = amg._redundant_from()
        ctl[FIRST_GATHERED] = fr if fr < nl else -1
        ctl[CLOCK], ctl[CLOCK_ID] = addresses["clock"], mpicall.CLOCK_MONOTONIC
        ctl[TS_ADDR] = ctl.ctypes.data + 8 * TS
        for key, slot in (("startall", STARTALL), ("waitall", WAITALL),
                          ("allreduce", ALLREDUCE), ("allgatherv", ALLGATHERV)):
            ctl[slot] = addresses[key]
        par = _parallel_plan(amg, fr) if amg.red.parallel else _serial_plan(nl)
        self.par = par
        ctl[PAR] = amg.red.parallel
        ctl[STATUSES] = par.statuses
        ctl[RBUF] = par.rbuf
        ctl[NBLK] = threads.blocks()
        thr = _thread_levels(levels, int(ctl[NBLK]))
        self.h = (*packed, ks, ctl, par.pl, par.hb, par.hcells, par.hplan, par.xidx, par.hnd,
                  *own, thr, np.zeros((ctl[NBLK] + 1, RB)), *_members(levels, thr, par.pl))
        self.cnt = np.zeros(CNT_HEAD + 2 * nl, dtype=np.int64)
        self.out = np.zeros(4)
        # a hierarchy refresh() knows: serial, no aggregate spanning ranks, nothing replicated
        self.serial_hierarchy = not any(lev.next.share is not None
                                        or lev.next.redundant is not None
                                        for lev in amg.levels[:-1])
        self._read_factors()

    def _read_factors(self):
        """The factors ``AMG._factor_coarsest`` made (its Cholesky's, or an LU's), as the
        compiled solve's tuple (the Cholesky's indices are IDX already: no copy)."""
        f = self.amg.levels[-1].lu
        self.lu = (f.perm_r, f.perm_c, f.lp, f.li.astype(IDX, copy=False), f.lx, f.up,
                   f.ui.astype(IDX, copy=False), f.ux, f.ud, f.y)
        self.ctl[PINNED] = self.amg.levels[-1].pinned

    def refresh(self):
        """``AMG.refresh`` (new fine coefficients): for a serial hierarchy the Galerkin
        products and smoother diagonals level by level in compiled code, else
        ``AMG.refresh``; the coarsest level's factors are AMG's either way (its Cholesky),
        the levels a parallel run repeats on every rank timed as "amg_replicated" as the
        Python path does."""
        amg = self.amg
        if not self.serial_hierarchy:
            amg.refresh()
            self._read_factors()
            return
        levels = amg.levels
        fr = amg._redundant_from()
        amg.refreshes += 1
        for i, lev in enumerate(levels[:fr]):
            if lev.next is not None:
                galerkin_refresh(lev.next.slot, lev.data, levels[i + 1].data)
        for lev in levels[:fr]:
            lev.smoother_setup()
        with amg.timers("amg_replicated") if fr < len(levels) else _NULL:
            for lev, nxt in zip(levels[fr:-1], levels[fr + 1:], strict=True):
                galerkin_refresh(lev.next.slot, lev.data, nxt.data)
            for lev in levels[fr:]:
                lev.smoother_setup()
            amg._factor_coarsest()
        self._read_factors()

    def solve(self, b, x, tol, max_iter, ws, rel_tol: float = 0.0) -> SolveInfo:
        """``flexible.fcg`` / ``flexible.cg1`` with ``amg.apply``: same arguments and result,
        same counters."""
        amg = self.amg
        cnt = self.cnt
        cnt[:] = 0
        vecs = ws.v[:4] if self.method == "fcg" else ws.v[:5]
        self.kernel((self.h, amg.A.data, self.lu, self.ctl, cnt), b, x, float(tol),
                    int(max_iter), float(rel_tol), *vecs, self.out)
        self._account(cnt)
        it, res0, res, conv = self.out
        return SolveInfo(iters=int(it), res0=float(res0), res=float(res),
                         converged=bool(conv))

    def _account(self, cnt):
        """The Python path's counters: reductions (and their MPI time), exchanges per level
        and in each level's exchanger (the matrix's for level 0), the "amg_replicated" time,
        the redundant level's allgathers."""
        amg = self.amg
        st = amg.red.stats
        st.calls += int(cnt[REDUCTIONS])
        st.compiled += int(cnt[REDUCTIONS])
        st.seconds += float(cnt[REDUCE_NS]) * 1e-9
        pl = self.par.pl
        nl = len(amg.levels)
        for i, lev in enumerate(amg.levels):
            lev.visits += int(cnt[CNT_HEAD + nl + i])
            k = int(cnt[CNT_HEAD + i])
            lev.calls += k
            lev.compiled_calls += k
            ex = amg.A.ex if i == 0 else lev.ex
            if i == 0:  # the Krylov products' exchanges go through the matrix's exchanger
                k += int(cnt[TOP_EXCHANGES])
            if ex is None or not k:
                continue
            hs = ex.stats
            hs.calls += k
            hs.compiled += k
            hs.fields += k
            hs.messages += k * int(pl[i, NNB])
            hs.bytes += k * 8 * int(pl[i, HSEND])
        ph = amg.A.timers("halo_solve")
        if hasattr(ph, "calls"):  # (untimed: a null phase)
            ph.calls += int(cnt[TOP_EXCHANGES])
        visits = int(cnt[GATHERED_VISITS])
        ph = amg.timers("amg_replicated")
        if hasattr(ph, "calls") and visits:
            ph.seconds += cnt[GATHERED_NS] * 1e-9
            ph.calls += visits
        amg.allgathers += visits
        fr = amg._redundant_from()
        rd = amg.levels[fr - 1].next.redundant if 0 < fr < len(amg.levels) else None
        if rd is not None and visits:
            rd.rhs.calls += visits
            rd.rhs.bytes += visits * 8 * (rd.rhs.total - rd.n)
            rd.rhs.seconds += float(cnt[ALLGATHER_NS]) * 1e-9


TAG_HALO, TAG_ACC, TAG_DIST = 7431, 7432, 7433


def _serial_plan(nl):
    """Nothing to send: every level counts only."""
    from ..parallel import cplan

    return SimpleNamespace(pl=np.zeros((nl + 1, PL_COLS), dtype=np.int64), hb=np.zeros(2 * RB),
                           rbuf=0, hcells=np.zeros(0, dtype=IDX),
                           hplan=np.zeros(0, dtype=np.int64), xidx=np.zeros(0, dtype=np.int64),
                           hnd=cplan.self_handles(), statuses=0, keep=())


def _parallel_layout(amg, fr, pl):
    """Offsets of every level's halo buffers and plans, spanning-aggregate transfers and
    redundant handoff in the packed arrays; returns (buffer length, cells, plans, indices,
    kept arrays)."""
    hcells, hplan, xidx, keep = [], [], [], []
    hb = hc = hp = xi = 0
    for i, lev in enumerate(amg.levels[:fr]):
        ex = amg.A.ex if i == 0 else lev.ex
        nn = len(ex.neighbours)
        pl[i, EXS], pl[i, NNB] = 1, nn
        pl[i, HC_OFF], pl[i, HC_N] = hc, len(ex.send_cells)
        pl[i, HP_OFF], pl[i, HB_OFF] = hp, hb
        pl[i, HSEND], pl[i, HRECV] = ex.n_send, ex.n_recv
        hcells.append(np.asarray(ex.send_cells, dtype=IDX))
        hplan.append(np.concatenate([ex.send_ptr, ex.recv_ptr]).astype(np.int64))
        hc, hp, hb = hc + len(ex.send_cells), hp + 2 * nn + 2, hb + ex.n_send + ex.n_recv
        nx = lev.next
        if nx.xfer is not None:
            out = np.concatenate([np.zeros(0, np.int64)] + [np.asarray(a, np.int64)
                                                            for a in nx.xfer.out_idx])
            into = np.concatenate([np.zeros(0, np.int64)] + [np.asarray(a, np.int64)
                                                             for a in nx.xfer.in_idx])
            pl[i, XF] = 1
            pl[i, XO_OFF], pl[i, XO_N], pl[i, XI_OFF], pl[i, XI_N] = (
                xi, len(out), xi + len(out), len(into))
            xidx += [out, into]
            xi += len(out) + len(into)
            pl[i, XB_OUT], pl[i, XB_IN] = hb, hb + len(out)
            hb += len(out) + len(into)
        if nx.redundant is not None:
            rd = nx.redundant
            counts = rd.rhs.counts.astype(np.int32)
            displs = rd.rhs.displs.astype(np.int32)
            keep += [counts, displs]
            pl[i, RD], pl[i, RD_N] = 1, rd.n
            pl[i, RD_COUNTS], pl[i, RD_DISPLS] = counts.ctypes.data, displs.ctypes.data
            pl[i, RC_OFF], pl[i, RC_N] = hb, nx.ncols
            hb += max(nx.ncols, 1)
            pl[i, RDC_OFF], pl[i, RDC_N] = xi, len(rd.cols)
            xidx.append(np.asarray(rd.cols, np.int64))
            xi += len(rd.cols)
    return hb, hcells, hplan, xidx, keep


def _parallel_plan(amg, fr):
    """The packed arrays and persistent requests of a parallel hierarchy: the distributed
    levels' halo exchanges (each exchanger's plan and pack layout, requests of our own on
    one buffer), the transfers of aggregates spanning ranks, the redundant handoff."""
    from ..parallel import cplan

    levels = amg.levels
    pl = np.zeros((len(levels) + 1, PL_COLS), dtype=np.int64)
    n_hb, hcells, hplan, xidx, keep = _parallel_layout(amg, fr, pl)
    rbuf = n_hb
    hb = np.zeros(n_hb + 2 * RB)
    reqs = cplan.Requests(amg.comm)
    for i, lev in enumerate(levels[:fr]):
        ex = amg.A.ex if i == 0 else lev.ex
        o, ns = pl[i, HB_OFF], pl[i, HSEND]
        sp, rp = ex.send_ptr, ex.recv_ptr
        nbrs = list(ex.neighbours)
        pl[i, HREQ], pl[i, HNREQ] = reqs.add(
            [(q, hb[o + sp[k]:o + sp[k + 1]]) for k, q in enumerate(nbrs)],
            [(q, hb[o + ns + rp[k]:o + ns + rp[k + 1]]) for k, q in enumerate(nbrs)], TAG_HALO)
        xf = lev.next.xfer
        if xf is None:
            continue
        out, into = [], []
        a = pl[i, XB_OUT]
        for q, ix in zip(xf.out_peers, xf.out_idx, strict=True):
            out.append((q, hb[a:a + len(ix)]))
            a += len(ix)
        a = pl[i, XB_IN]
        for q, ix in zip(xf.in_peers, xf.in_idx, strict=True):
            into.append((q, hb[a:a + len(ix)]))
            a += len(ix)
        pl[i, XACC], pl[i, XACC_N] = reqs.add(out, into, TAG_ACC)
        pl[i, XDIST], pl[i, XDIST_N] = reqs.add(into, out, TAG_DIST)
    reqs.close()
    for i in range(len(levels)):
        for col in (HREQ, XACC, XDIST):
            pl[i, col] = reqs.address(int(pl[i, col]))

    def cat(parts, dtype):
        return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)

    return SimpleNamespace(pl=pl, hb=hb, rbuf=rbuf, hcells=cat(hcells, IDX),
                           hplan=cat(hplan, np.int64), xidx=cat(xidx, np.int64),
                           hnd=cplan.collective_handles(amg.comm),
                           statuses=reqs.status_address, keep=(keep, reqs))


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NULL = _Null()


def compiled_solver(amg, krylov) -> CompiledSolve | None:
    """The compiled solve for ``amg`` and the Krylov function ``krylov`` (``flexible.fcg`` or
    ``flexible.cg1``), or None where the Python path must run: no C MPI functions (threaded runs
    use the thread blocks' kernels, :mod:`.blocks`), device-staged fields, ghost columns on one
    rank (periodic meshes), or a hierarchy this module does not know.  Every rank of a
    parallel run decides the same (one set-up collective)."""
    name = getattr(krylov, "__name__", "")
    ok = _supported(amg) and name in ("fcg", "cg1")
    addr = mpicall.addresses() if ok else None
    ok = addr is not None
    if amg.red.parallel:
        from ..parallel import transfer

        ok = transfer.total(amg.comm, 0 if ok else 1) == 0
    return CompiledSolve(amg, name, addr) if ok else None


def _supported(amg) -> bool:
    levels = amg.levels
    fr = amg._redundant_from()
    if levels[-1].lu is None or levels[-1].next is not None:
        return False
    if any(lev.ex is not None for lev in levels[fr:]):
        return False
    if not amg.red.parallel:
        A = amg.A
        return (A.pattern.n_cols == A.pattern.n_rows and not getattr(A.ex, "neighbours", [])
                and all(lev.ex is None for lev in levels[1:]))
    exs = [amg.A.ex] + [lev.ex for lev in levels[1:fr]]
    return all(ex is not None and not ex.space.on_device and hasattr(ex, "send_cells")
               for ex in exs)
