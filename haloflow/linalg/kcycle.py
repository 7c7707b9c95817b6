"""The whole AMG-preconditioned pressure solve in one compiled call.

Why: driven from Python (``krylov.fcg`` with ``AMG.apply``) every Krylov iteration and every
K-cycle level visit is an interpreter round trip into small numba kernels, a counted
``Reducer.sum`` and an exchanger call.  Here the hierarchy that :class:`.amg.AMG` built is
packed once into flat arrays with per-level offsets (the coarse levels' index, coefficient,
l1-diagonal and aggregate arrays become views into them, so a refresh updates them in place,
nothing is held twice and nothing is copied per solve; the top level's are the matrix's own,
and the work vectors are the AMG's block as it is), and FCG(1) (``krylov.fcg``) or
single-reduction CG (``lowsync.cg1``) runs with the K-cycle and the coarsest direct solve
inside numba.  The arithmetic is that of the Python path, operation for operation, so
iterates agree to round-off and iteration counts are the same (tests/unit/test_kcycle.py,
tests/mpi/test_kcycle_mpi.py).

Parallel runs communicate from compiled code (:mod:`..parallel.mpicall`): the distributed
levels' halo exchanges with each exchanger's plan and pack layout on persistent requests of
our own (:mod:`..parallel.cplan`), the transfers of aggregates spanning ranks likewise, the
fused sums by MPI_Allreduce and the redundant coarse level's right-hand side by one
MPI_Allgatherv per visit.  It counts what the Python path counts: reductions (and their MPI
seconds) in the run's ``ReduceStats``, exchanges per level (``Level.calls``, read by
profile.json and the performance model) and in each level's exchanger (calls, messages,
bytes), the redundant level's allgathers, and it times the redundant levels' solves
("amg_gathered") with the C clock.

On serial hierarchies ``refresh`` also replaces ``AMG.refresh``: the coarsest level is
factorised by a sparse Cholesky in numba (ordering and pattern once) instead of SuperLU,
whose Python and library overhead per refactorisation was most of an 8^3 step's AMG work.
"""

from __future__ import annotations

from types import SimpleNamespace

import numba as nb
import numpy as np

from ..parallel import mpicall, threads
from ..parallel.faceblocks import grouped
from ..parallel.halo.kernels import pack, unpack
from . import blocks as tb
from .amg import (
    KCYCLE_T,
    _axpy_into,
    _combine,
    _kdots1,
    _kdots2,
    _scale_into,
    galerkin_refresh,
    gs_from_zero,
    gs_from_zero_restrict,
    gs_rows,
    gs_sweep,
    lu_solve,
    prolong_add,
    residual,
    residual_restrict,
    spmv,
    upper_residual_restrict,
)
from .krylov import SolveInfo, foreseen_converged
from .matrix import IDX

# per-level columns of the int64 table ``lv``
N, NCOLS, IP, NZ, VEC, CUT, NCUT, HASCUT, COUNTED, PHASE, KRYLOV, SPLIT = range(12)
LV_COLS = 12
K_LEVEL, AMLI_LEVEL = 1, 2  # values of KRYLOV: the K-cycle's Krylov steps or AMLI's
# per-level columns of the int64 table ``pl``: what a parallel run sends.  Halo exchange of
# the level (EXS: made at all; plan and buffer offsets, persistent requests), the transfers of
# aggregates spanning ranks into the next level (XO/XI: out and in entries; ACC/DIST: their
# request groups), the handoff to the redundant level (RD: allgatherv of RD_N values; RC: the
# local coarse vector, RDC: the redundant rows read back)
(EXS, HC_OFF, HC_N, HP_OFF, NNB, HB_OFF, HSEND, HRECV, HREQ, HNREQ, XF, XO_OFF, XO_N, XI_OFF,
 XI_N, XB_OUT, XB_IN, XACC, XACC_N, XDIST, XDIST_N, RD, RD_N, RD_COUNTS, RD_DISPLS, RDC_OFF,
 RDC_N, RC_OFF, RC_N) = range(29)
PL_COLS = 29
# slots of the int64 control array ``ctl``
(NLEV, FIRST_GATHERED, PINNED, CLOCK, CLOCK_ID, TS_ADDR, PAR, STARTALL, WAITALL, ALLREDUCE,
 ALLGATHERV, STATUSES, RBUF, NBLK) = range(14)  # NBLK: thread blocks (blocks.py)
TS = 14  # struct timespec: two int64
N_CTL = 16
RB = 8  # room for the scalars of one fused sum (send and receive halves)
# slots of the int64 counters array ``cnt``: then one exchange count per level
REDUCTIONS, TOP_EXCHANGES, GATHERED_NS, GATHERED_VISITS, REDUCE_NS, ALLGATHER_NS = range(6)
CNT_HEAD = 6
# positions in the tuple ``h`` of packed arrays; then the top level's own arrays (the
# matrix's pattern, its smoother diagonal, aggregates and residual: nothing copied)
H_CTL, H_PL, H_HB, H_HCELLS, H_HPLAN, H_XIDX, H_HND = range(10, 17)
H_IP0, H_IX0, H_DP0, H_DINV0, H_AGG0, H_R0 = range(17, 23)
# per level the bandwidth its thread blocks snapshot (-1: the level runs serially), and the
# blocks' partial sums; the threaded levels' aggregates as lists of rows (offsets per level,
# pointers, rows: :func:`_members`)
H_THR, H_PART, H_MOFF, H_MPTR, H_MIDX = 23, 24, 25, 26, 27
# work vectors of a level, rows of ``W`` (amg.VECTORS, the names of amg.Level's attributes)
B, X, R, C, D, V, Wv, R2 = range(8)


# -- coarsest level: a sparse Cholesky in SuperLU's factor format -----------------------------

@nb.njit(cache=True)
def _coarsest(lu, ctl, b, x):
    """``AMG._solve`` on the coarsest level: amg.lu_solve with the factors in ``lu``."""
    perm_r, perm_c, lp, li, lx, up, ui, ux, ud, y = lu
    lu_solve(perm_r, perm_c, lp, li, lx, up, ui, ux, ud, ctl[PINNED], b, x, y)


# -- the K-cycle ------------------------------------------------------------------------------

@nb.njit(cache=True)
def _now(ctl):
    mpicall.call_ip(ctl[CLOCK], ctl[CLOCK_ID], ctl[TS_ADDR])
    return ctl[TS] * 1_000_000_000 + ctl[TS + 1]


@nb.njit(cache=True)
def _level(h, d0, i):
    """(indptr, indices, data, diag_pos, dinv) of level i (level 0's: the matrix's own)."""
    ip, ix, dat, dp, dinv, lv = h[0], h[1], h[2], h[3], h[4], h[8]
    n = lv[i, N]
    if i == 0:
        ix0 = h[H_IX0]
        return (h[H_IP0][0:n + 1], ix0[0:len(ix0)], d0, h[H_DP0][0:n], h[H_DINV0][0:n])
    a, z = lv[i, NZ], lv[i + 1, NZ]
    return (ip[lv[i, IP]:lv[i, IP] + n + 1], ix[a:z], dat[a:z], dp[lv[i, VEC]:lv[i, VEC] + n],
            dinv[lv[i, VEC]:lv[i, VEC] + n])


@nb.njit(cache=True)
def _vec(h, k, i):
    """Work vector k of level i (level 0 has only its residual, R)."""
    if i == 0:
        r0 = h[H_R0]
        return r0[0, 0:r0.shape[1]]
    W, lv = h[7], h[8]
    return W[k, lv[i, VEC]:lv[i + 1, VEC]]


@nb.njit(cache=True)
def _blocks(h, i):
    """Thread blocks level i's kernels run on (:mod:`.blocks`); 0: the serial kernels."""
    return h[H_CTL][NBLK] if h[H_THR][i] >= 0 else 0


@nb.njit(cache=True)
def _agg(h, i):
    """The aggregate of each row of level i."""
    lv = h[8]
    if i == 0:
        return h[H_AGG0][0:lv[0, N]]
    return h[5][lv[i, VEC]:lv[i, VEC] + lv[i, N]]


@nb.njit(cache=True)
def _exchange(h, cnt, i, x, top=False):
    """``Level.exchange`` (or, ``top``, the matrix's exchange before a Krylov product):
    counted always, made where a parallel run has neighbours, with the exchanger's pack
    layout and persistent requests started from here."""
    if top:
        cnt[TOP_EXCHANGES] += 1
    else:
        cnt[CNT_HEAD + i] += 1
    pl = h[H_PL]
    if pl[i, EXS] == 0:
        return
    ctl, hb, lv = h[H_CTL], h[H_HB], h[8]
    nn, o, ns, nr = pl[i, NNB], pl[i, HB_OFF], pl[i, HSEND], pl[i, HRECV]
    plan = h[H_HPLAN][pl[i, HP_OFF]:pl[i, HP_OFF] + 2 * nn + 2]
    pack((x,), h[H_HCELLS][pl[i, HC_OFF]:pl[i, HC_OFF] + pl[i, HC_N]], plan[:nn + 1],
         hb[o:o + ns])
    _startwait(ctl, pl[i, HREQ], pl[i, HNREQ])
    unpack(hb[o + ns:o + ns + nr], plan[nn + 1:], lv[i, N], (x,))


@nb.njit(cache=True)
def _startwait(ctl, reqs, nreq):
    if nreq == 0:
        return
    rc = mpicall.call_ip(ctl[STARTALL], nreq, reqs)
    if rc == 0:
        rc = mpicall.call_ipp(ctl[WAITALL], nreq, reqs, ctl[STATUSES])
    if rc != 0:
        raise RuntimeError("MPI error in the compiled AMG solve")


@nb.njit(cache=True)
def _reduce(h, cnt, k, counted):
    """The fused sum of the ``k`` scalars in ``hb[RBUF:RBUF + k]`` (in place): counted if
    a parallel run reduces it (``counted``), an MPI_Allreduce where it does."""
    if not counted:
        return
    cnt[REDUCTIONS] += 1
    ctl = h[H_CTL]
    if ctl[PAR] == 0:
        return
    hb, hnd = h[H_HB], h[H_HND]
    a = hb.ctypes.data + 8 * ctl[RBUF]
    t0 = _now(ctl)
    rc = mpicall.call_allreduce(ctl[ALLREDUCE], a, a + 8 * RB, k, hnd[1], hnd[2], hnd[0])
    cnt[REDUCE_NS] += _now(ctl) - t0
    if rc != 0:
        raise RuntimeError("MPI error in the compiled AMG solve")
    for t in range(k):
        hb[ctl[RBUF] + t] = hb[ctl[RBUF] + RB + t]


@nb.njit(cache=True)
def _sums(h):
    """The scalars of the next fused sum (``_reduce``)."""
    return h[H_HB][h[H_CTL][RBUF]:h[H_CTL][RBUF] + RB]


@nb.njit(cache=True)
def _accumulate(h, i, v):
    """``_Transfer.accumulate`` of transfer i: partial restrictions to their owners."""
    pl, hb, xi = h[H_PL], h[H_HB], h[H_XIDX]
    out = hb[pl[i, XB_OUT]:pl[i, XB_OUT] + pl[i, XO_N]]
    into = hb[pl[i, XB_IN]:pl[i, XB_IN] + pl[i, XI_N]]
    for t in range(len(out)):
        out[t] = v[xi[pl[i, XO_OFF] + t]]
    _startwait(h[H_CTL], pl[i, XACC], pl[i, XACC_N])
    for t in range(len(into)):
        v[xi[pl[i, XI_OFF] + t]] += into[t]


@nb.njit(cache=True)
def _distribute(h, i, v):
    """``_Transfer.distribute`` of transfer i: the owners' values back."""
    pl, hb, xi = h[H_PL], h[H_HB], h[H_XIDX]
    out = hb[pl[i, XB_OUT]:pl[i, XB_OUT] + pl[i, XO_N]]
    into = hb[pl[i, XB_IN]:pl[i, XB_IN] + pl[i, XI_N]]
    for t in range(len(into)):
        into[t] = v[xi[pl[i, XI_OFF] + t]]
    _startwait(h[H_CTL], pl[i, XDIST], pl[i, XDIST_N])
    for t in range(len(out)):
        v[xi[pl[i, XO_OFF] + t]] = out[t]


@nb.njit(cache=True)
def _smooth(h, d0, lv, cnt, i, b, x, forward, from_zero):
    """``AMG._cycle``'s Gauss-Seidel sweep with its exchanges, RESWEEP rows included.
    ``from_zero`` (threaded levels only): the sweep starts from x = 0 on the owned rows,
    whatever they hold (the caller zeroes the ghosts); a level split at the diagonal then
    reads half of each row (:func:`.blocks.gs_from_zero`)."""
    ip, ix, data, dp, dinv = _level(h, d0, i)
    n = lv[i, N]
    cut = h[6][lv[i, CUT]:lv[i, CUT] + lv[i, NCUT]]
    nt = _blocks(h, i)
    if nt and from_zero and lv[i, SPLIT]:
        tb.gs_from_zero(ip, ix, data, dp, b, x, n, nt, h[H_THR][i], dinv)
    elif nt:  # the level's work vector r is free while it is smoothed: the blocks' snapshot
        if from_zero:
            x[:n] = 0.0
        tb.gs_blocks(ip, ix, data, dp, dinv, b, x, n, forward, nt, h[H_THR][i], _vec(h, R, i))
    if forward:
        if not nt:
            gs_sweep(ip, ix, data, dp, dinv, b, x, n, True)
        _exchange(h, cnt, i, x)
        if lv[i, HASCUT]:
            gs_rows(ip, ix, data, dp, dinv, b, x, cut, True)
            _exchange(h, cnt, i, x)
    else:
        if not nt:
            gs_sweep(ip, ix, data, dp, dinv, b, x, n, False)
        if lv[i, HASCUT]:
            _exchange(h, cnt, i, x)
            gs_rows(ip, ix, data, dp, dinv, b, x, cut, False)


@nb.njit(cache=True)
def _smooth_from_zero_restrict(h, d0, lv, cnt, i, b, x, ag, rc, nc):
    """``AMG._presmooth_restrict``: the pre-smoothing from zero and the restriction of the
    residual into rc (on thread blocks, the whole sweep and residual)."""
    ip, ix, data, dp, dinv = _level(h, d0, i)
    n = lv[i, N]
    nt = _blocks(h, i)
    if nt:  # two regions: the sweep from zero, then each aggregate's residuals gathered
        x[n:] = 0.0
        _smooth(h, d0, lv, cnt, i, b, x, True, True)
        moff = h[H_MOFF]
        mptr = h[H_MPTR][moff[i, 0]:moff[i, 0] + nc + 1]
        tb.residual_restrict(ip, ix, data, x, b, mptr, h[H_MIDX][moff[i, 1]:], rc, nc, nt)
        return
    if lv[i, SPLIT] and lv[i, NCOLS] == n:  # no ghost columns: one pass
        gs_from_zero_restrict(ip, ix, data, dp, dinv, b, x, n, ag, rc, nc)
        _exchange(h, cnt, i, x)
        return
    if lv[i, SPLIT]:
        x[n:] = 0.0
        gs_from_zero(ip, ix, data, dp, dinv, b, x, n)
    else:
        x[:] = 0.0
        gs_sweep(ip, ix, data, dp, dinv, b, x, n, True)
    _exchange(h, cnt, i, x)
    if lv[i, HASCUT]:
        cut = h[6][lv[i, CUT]:lv[i, CUT] + lv[i, NCUT]]
        gs_rows(ip, ix, data, dp, dinv, b, x, cut, True)
        _exchange(h, cnt, i, x)
    if lv[i, SPLIT] and not lv[i, HASCUT]:
        upper_residual_restrict(ip, ix, data, dp, dinv, x, n, ag, rc, nc)
    else:
        residual_restrict(ip, ix, data, x, b, n, ag, rc, nc)


@nb.njit(cache=True)
def _down(h, d0, cnt, i, b, x):
    """First half of ``AMG._cycle`` on level i: smooth from zero, restrict the residual
    into the next level's right-hand side (partial sums of aggregates spanning ranks to
    their owners; into a redundant level, one allgatherv)."""
    lv, pl = h[8], h[H_PL]
    ag = _agg(h, i)
    if pl[i, RD] == 0:
        rc, nc = _vec(h, B, i + 1), lv[i + 1, NCOLS]
    else:
        rc, nc = h[H_HB][pl[i, RC_OFF]:pl[i, RC_OFF] + pl[i, RC_N]], pl[i, RC_N]
    _smooth_from_zero_restrict(h, d0, lv, cnt, i, b, x, ag, rc, nc)
    if pl[i, XF]:
        _accumulate(h, i, rc)
    if pl[i, RD] == 0:
        return
    ctl, hnd = h[H_CTL], h[H_HND]
    t0 = _now(ctl)
    e = mpicall.call_allgatherv(ctl[ALLGATHERV], rc.ctypes.data, pl[i, RD_N], hnd[1],
                                _vec(h, B, i + 1).ctypes.data, pl[i, RD_COUNTS],
                                pl[i, RD_DISPLS], hnd[1], hnd[0])
    cnt[ALLGATHER_NS] += _now(ctl) - t0
    if e != 0:
        raise RuntimeError("MPI error in the compiled AMG solve")


@nb.njit(cache=True)
def _up(h, d0, cnt, i, b, x):
    """Second half of ``AMG._cycle``: add the next level's correction (the owners' values
    of spanning aggregates back; from a redundant level, this rank's entries), smooth
    back."""
    lv, pl = h[8], h[H_PL]
    n = lv[i, N]
    ag = _agg(h, i)
    if pl[i, RD] == 0:
        e = _vec(h, X, i + 1)
        if pl[i, XF]:
            _distribute(h, i, e)
    else:
        e = h[H_HB][pl[i, RC_OFF]:pl[i, RC_OFF] + pl[i, RC_N]]
        xs = _vec(h, X, i + 1)
        cols = h[H_XIDX][pl[i, RDC_OFF]:pl[i, RDC_OFF] + pl[i, RDC_N]]
        for t in range(len(cols)):
            e[t] = xs[cols[t]]
    nt = _blocks(h, i)
    if nt:
        tb.prolong_add(ag, e, n, x, nt)
    else:
        prolong_add(ag, e, n, x)
    _exchange(h, cnt, i, x)
    _smooth(h, d0, lv, cnt, i, b, x, False, False)


@nb.njit(cache=True)
def _k_first(h, d0, cnt, i):
    """``AMG._kcycle`` after its first cycle (c = M b): the step length, and either the
    result in x (returns False) or the second right-hand side r2 (returns True)."""
    lv = h[8]
    n = lv[i, N]
    b, x, c, v = _vec(h, B, i), _vec(h, X, i), _vec(h, C, i), _vec(h, V, i)
    ip, ix, data, dp, dinv = _level(h, d0, i)
    _exchange(h, cnt, i, c)
    sm = _sums(h)
    nt = _blocks(h, i)
    if nt:
        tb.spmv_kdots1(ip, ix, data, c, v, b, nt, h[H_PART], sm)
    else:
        spmv(ip, ix, data, c, v)
        sm[:5] = _kdots1(c, v, b, n)
    _reduce(h, cnt, 5, lv[i, COUNTED] != 0)
    rho1, alpha1, bb, vv, bv = sm[0], sm[1], sm[2], sm[3], sm[4]
    if rho1 <= 0.0:
        x[:n] = c[:n]
        return False
    a1 = alpha1 / rho1
    if bb - 2.0 * a1 * bv + a1 * a1 * vv <= KCYCLE_T * KCYCLE_T * bb:
        _scale_into(x, a1, c, n)
        return False
    if nt:
        tb.axpy_into(_vec(h, R2, i), b, a1, v, n, nt)
    else:
        _axpy_into(_vec(h, R2, i), b, a1, v, n)
    h[9][i] = a1  # kept for the second step
    h[9][len(lv) + i] = rho1
    return True


@nb.njit(cache=True)
def _residual_scaled(ip, ix, data, c, b, a, out, n):
    """out = b - a A c, each row as ``spmv`` then ``_axpy_into`` compute it."""
    for i in range(n):
        s = 0.0
        for k in range(ip[i], ip[i + 1]):
            s += data[k] * c[ix[k]]
        out[i] = b[i] - a * s


@nb.njit(cache=True)
def _a_first(h, d0, cnt, i):
    """``AMG._amli`` after its first cycle (c = M b): the second right-hand side r2."""
    lv, ks = h[8], h[9]
    n = lv[i, N]
    b, c, v = _vec(h, B, i), _vec(h, C, i), _vec(h, V, i)
    ip, ix, data, dp, dinv = _level(h, d0, i)
    _exchange(h, cnt, i, c)
    nt = _blocks(h, i)
    if nt:
        tb.spmv(ip, ix, data, c, v, nt)
        tb.axpy_into(_vec(h, R2, i), b, ks[len(ks) - 2], v, n, nt)
    else:  # r2 = b - a1 A c in one pass (v is not read again)
        _residual_scaled(ip, ix, data, c, b, ks[len(ks) - 2], _vec(h, R2, i), n)


@nb.njit(cache=True)
def _k_second(h, d0, cnt, i):
    """``AMG._kcycle`` after its second cycle (d = M r2): the combination into x."""
    lv, ks = h[8], h[9]
    n = lv[i, N]
    x, c, d, v, w, r2 = (_vec(h, X, i), _vec(h, C, i), _vec(h, D, i), _vec(h, V, i),
                         _vec(h, Wv, i), _vec(h, R2, i))
    nt = _blocks(h, i)
    if lv[i, KRYLOV] == AMLI_LEVEL:  # ``AMG._amli``'s combination
        _combine_on(x, ks[len(ks) - 2], c, ks[len(ks) - 1], d, n, nt)
        return
    ip, ix, data, dp, dinv = _level(h, d0, i)
    a1, rho1 = ks[i], ks[len(lv) + i]
    _exchange(h, cnt, i, d)
    sm = _sums(h)
    if nt:
        tb.spmv_kdots2(ip, ix, data, d, w, v, r2, nt, h[H_PART], sm)
    else:
        spmv(ip, ix, data, d, w)
        sm[:3] = _kdots2(d, v, w, r2, n)
    _reduce(h, cnt, 3, lv[i, COUNTED] != 0)
    gamma, beta, alpha2 = sm[0], sm[1], sm[2]
    rho2 = beta - gamma * gamma / rho1
    if rho2 <= 0.0:
        _scale_into(x, a1, c, n)
        return
    _combine_on(x, a1 - gamma * alpha2 / (rho1 * rho2), c, alpha2 / rho2, d, n, nt)


@nb.njit(cache=True)
def _combine_on(x, a, c, b, d, n, nt):
    """``_combine`` on ``nt`` thread blocks (0: serially)."""
    if nt:
        tb.combine(x, a, c, b, d, n, nt)
    else:
        _combine(x, a, c, b, d, n)


@nb.njit(cache=True)
def _apply(h, d0, lu, ctl, cnt, r, z):
    """``AMG.apply`` (z = M r): the cycle from level 0 with, on each coarser level, the
    direct solve (coarsest) or the K-cycle (or V-cycle), as ``AMG._solve`` recurses.
    Written as a loop over an explicit per-level phase, not as recursion: recursive
    compiled functions do not load back from numba's cache."""
    lv = h[8]
    nlev = ctl[NLEV]
    last = nlev - 1
    fg = ctl[FIRST_GATHERED]
    if nlev == 1:
        _coarsest(lu, ctl, r, z)
        return
    _down(h, d0, cnt, 0, r, z)
    t0 = 0
    i = 1
    enter = True  # entering the solve of level i, else returning from it
    while True:
        if enter:
            if i == fg:
                t0 = _now(ctl)
            if i == last:
                _coarsest(lu, ctl, _vec(h, B, i), _vec(h, X, i))
                enter = False
                continue
            lv[i, PHASE] = 0
            kc = lv[i, KRYLOV] != 0
            _down(h, d0, cnt, i, _vec(h, B, i), _vec(h, C, i) if kc else _vec(h, X, i))
            i += 1
            continue
        # the solve of level i is done: back to the cycle of level i - 1
        if i == fg:
            cnt[GATHERED_NS] += _now(ctl) - t0
            cnt[GATHERED_VISITS] += 1
        i -= 1
        if i == 0:
            _up(h, d0, cnt, 0, r, z)
            return
        if lv[i, KRYLOV] == 0:
            _up(h, d0, cnt, i, _vec(h, B, i), _vec(h, X, i))
        elif lv[i, PHASE] == 0:
            _up(h, d0, cnt, i, _vec(h, B, i), _vec(h, C, i))
            if lv[i, KRYLOV] == AMLI_LEVEL:
                _a_first(h, d0, cnt, i)
                more = True
            else:
                more = _k_first(h, d0, cnt, i)
            if more:
                lv[i, PHASE] = 1
                _down(h, d0, cnt, i, _vec(h, R2, i), _vec(h, D, i))
                i += 1
                enter = True
        else:
            _up(h, d0, cnt, i, _vec(h, R2, i), _vec(h, D, i))
            _k_second(h, d0, cnt, i)


# -- Krylov methods ---------------------------------------------------------------------------

@nb.njit(cache=True)
def _dot2(h, a, b, c, d, n):
    """(a.b, c.d) over the owned rows of level 0."""
    nt = _blocks(h, 0)
    if nt:
        sm = h[H_PART][nt]  # the row after the blocks' partials
        tb.dot2(a, b, c, d, n, nt, h[H_PART], sm)
        return sm[0], sm[1]
    s1 = 0.0
    s2 = 0.0
    for i in range(n):
        s1 += a[i] * b[i]
        s2 += c[i] * d[i]
    return s1, s2


@nb.njit(cache=True)
def _dot1(h, a, b, n):
    nt = _blocks(h, 0)
    if nt:
        sm = h[H_PART][nt]
        tb.dot(a, b, n, nt, h[H_PART], sm)
        return sm[0]
    s = 0.0
    for k in range(n):
        s += a[k] * b[k]
    return s


@nb.njit(cache=True)
def _fcg_step(h, x, r, p, q, alpha, n):
    """x += alpha p; r -= alpha q; returns r.r."""
    nt = _blocks(h, 0)
    if nt:
        sm = h[H_PART][nt]
        tb.fcg_step(x, r, p, q, alpha, n, nt, h[H_PART], sm)
        return sm[0]
    rr = 0.0
    for k in range(n):
        x[k] += alpha * p[k]
        r[k] -= alpha * q[k]
        rr += r[k] * r[k]
    return rr


@nb.njit(cache=True)
def _fcg_direction(h, z, beta, p, n):
    nt = _blocks(h, 0)
    if nt:
        tb.direction(z, beta, p, n, nt)
        return
    for k in range(n):
        p[k] = z[k] - beta * p[k]


@nb.njit(cache=True)
def _top_matvec(h, d0, cnt, x, y):
    """``DistMatrix.matvec``: exchange, then y = A x."""
    ip, ix, data, dp, dinv = _level(h, d0, 0)
    _exchange(h, cnt, 0, x, True)
    nt = _blocks(h, 0)
    if nt:
        tb.spmv(ip, ix, data, x, y, nt)
    else:
        spmv(ip, ix, data, x, y)


@nb.njit(cache=True)
def _spmv_dots4(ip, ix, data, p, q, r, n):
    """q = A p and (p.q, p.r, q.q, q.r) in one pass, the sums in ``_dot2``'s order."""
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    s4 = 0.0
    for i in range(n):
        qi = 0.0
        for k in range(ip[i], ip[i + 1]):
            qi += data[k] * p[ix[k]]
        q[i] = qi
        s1 += p[i] * qi
        s2 += p[i] * r[i]
        s3 += qi * qi
        s4 += qi * r[i]
    return s1, s2, s3, s4


@nb.njit(cache=True)
def _top_matvec_dots(h, d0, cnt, p, q, r, n):
    """``_top_matvec`` (q = A p), then (p.q, p.r, q.q, q.r); one region on thread
    blocks."""
    nt = _blocks(h, 0)
    ip, ix, data, dp, dinv = _level(h, d0, 0)
    _exchange(h, cnt, 0, p, True)
    if not nt:
        return _spmv_dots4(ip, ix, data, p, q, r, n)
    sm = h[H_PART][nt]
    tb.spmv_dots4(ip, ix, data, p, q, r, nt, h[H_PART], sm)
    return sm[0], sm[1], sm[2], sm[3]


@nb.njit(cache=True)
def _top_residual(h, d0, cnt, x, b, r):
    ip, ix, data, dp, dinv = _level(h, d0, 0)
    _exchange(h, cnt, 0, x, True)
    nt = _blocks(h, 0)
    if nt:
        tb.residual(ip, ix, data, x, b, r, nt)
    else:
        residual(ip, ix, data, x, b, r)


@nb.njit(cache=True)
def _sum1(h, cnt, a):
    sm = _sums(h)
    sm[0] = a
    _reduce(h, cnt, 1, True)
    return sm[0]


@nb.njit(cache=True)
def _sum2(h, cnt, a, b):
    sm = _sums(h)
    sm[0] = a
    sm[1] = b
    _reduce(h, cnt, 2, True)
    return sm[0], sm[1]


@nb.njit(cache=True)
def _sum4(h, cnt, a, b, c, d):
    sm = _sums(h)
    sm[0], sm[1], sm[2], sm[3] = a, b, c, d
    _reduce(h, cnt, 4, True)
    return sm[0], sm[1], sm[2], sm[3]


@nb.njit(cache=True)
def _initial(rr, bb, tol, rel_tol, out):
    """``krylov.initial_info``: out = (iters, res0, res, converged); returns (tol, ||b||)."""
    bnorm = np.sqrt(bb) if bb > 0.0 else 1.0
    out[0] = 0.0
    out[1] = np.sqrt(rr) / bnorm
    out[2] = out[1]
    out[3] = 1.0
    return max(tol, rel_tol * out[1]), bnorm


@nb.njit(cache=True)
def fcg(h, d0, lu, ctl, cnt, b, x, tol, max_iter, rel_tol, r, z, p, q, out):
    """``krylov.fcg`` (FCG(1)) with the K-cycle preconditioner, operation for operation
    (the last iteration's cycle skipped where the residual it foresees is converged)."""
    n = h[8][0, N]
    _top_residual(h, d0, cnt, x, b, r)
    rr, bb = _dot2(h, r, r, b, b, n)
    rr, bb = _sum2(h, cnt, rr, bb)
    tol, bnorm = _initial(rr, bb, tol, rel_tol, out)
    if out[1] <= tol:
        return
    _apply(h, d0, lu, ctl, cnt, r, z)
    p[:n] = z[:n]
    for it in range(1, max_iter + 1):
        pq, pr, qq, qr = _top_matvec_dots(h, d0, cnt, p, q, r, n)
        pq, pr, qq, qr = _sum4(h, cnt, pq, pr, qq, qr)
        out[0] = it
        if pq <= 0.0:
            break
        alpha = pr / pq
        local = _fcg_step(h, x, r, p, q, alpha, n)
        if foreseen_converged(rr, alpha, qq, qr, tol * bnorm):
            rr = _sum1(h, cnt, local)
            out[2] = np.sqrt(rr) / bnorm
            if out[2] <= tol:
                return
            _apply(h, d0, lu, ctl, cnt, r, z)
            zq = _sum1(h, cnt, _dot1(h, z, q, n))
        else:
            _apply(h, d0, lu, ctl, cnt, r, z)
            rr, zq = _sum2(h, cnt, local, _dot1(h, z, q, n))
            out[2] = np.sqrt(rr) / bnorm
            if out[2] <= tol:
                return
        _fcg_direction(h, z, zq / pq, p, n)
    out[3] = 1.0 if out[2] <= tol else 0.0


@nb.njit(cache=True)
def _cg1_step(h, x, r, p, s, alpha, n):
    """x += alpha p; r -= alpha s; returns (p.r, r.r)."""
    nt = _blocks(h, 0)
    if nt:
        sm = h[H_PART][nt]
        tb.cg1_step(x, r, p, s, alpha, n, nt, h[H_PART], sm)
        return sm[0], sm[1]
    pr = 0.0
    rr = 0.0
    for k in range(n):
        x[k] += alpha * p[k]
        r[k] -= alpha * s[k]
        pr += p[k] * r[k]
        rr += r[k] * r[k]
    return pr, rr


@nb.njit(cache=True)
def _cg1_dots(h, r, u, w, s, n):
    """(r.u, w.u, u.s)."""
    nt = _blocks(h, 0)
    if nt:
        sm = h[H_PART][nt]
        tb.cg1_dots(r, u, w, s, n, nt, h[H_PART], sm)
        return sm[0], sm[1], sm[2]
    ru = 0.0
    wu = 0.0
    us = 0.0
    for k in range(n):
        ru += r[k] * u[k]
        wu += w[k] * u[k]
        us += u[k] * s[k]
    return ru, wu, us


@nb.njit(cache=True)
def _cg1_directions(h, u, w, beta, p, s, n):
    """p = u + beta p; s = w + beta s."""
    nt = _blocks(h, 0)
    if nt:
        tb.cg1_directions(u, w, beta, p, s, n, nt)
        return
    for k in range(n):
        p[k] = u[k] + beta * p[k]
        s[k] = w[k] + beta * s[k]


@nb.njit(cache=True)
def cg1(h, d0, lu, ctl, cnt, b, x, tol, max_iter, rel_tol, r, u, w, p, s, out):
    """``lowsync.cg1`` (single-reduction flexible CG) with the K-cycle, op for op."""
    n = h[8][0, N]
    _top_residual(h, d0, cnt, x, b, r)
    _apply(h, d0, lu, ctl, cnt, r, u)
    _top_matvec(h, d0, cnt, u, w)
    ru, wu = _dot2(h, r, u, w, u, n)
    rr, bb = _dot2(h, r, r, b, b, n)
    sm = _sums(h)
    sm[0], sm[1], sm[2], sm[3] = ru, wu, rr, bb
    _reduce(h, cnt, 4, True)
    ru, wu, rr, bb = sm[0], sm[1], sm[2], sm[3]
    tol, bnorm = _initial(rr, bb, tol, rel_tol, out)
    if out[1] <= tol:
        return
    p[:n] = u[:n]
    s[:n] = w[:n]
    ps, pr = wu, ru
    for it in range(1, max_iter + 1):
        out[0] = it
        if ps <= 0.0:
            break
        pr_old, rr = _cg1_step(h, x, r, p, s, pr / ps, n)
        _apply(h, d0, lu, ctl, cnt, r, u)
        _top_matvec(h, d0, cnt, u, w)
        ru, wu, us = _cg1_dots(h, r, u, w, s, n)
        sm[0], sm[1], sm[2], sm[3], sm[4] = ru, wu, us, pr_old, rr
        _reduce(h, cnt, 5, True)
        ru, wu, us, pr_old, rr = sm[0], sm[1], sm[2], sm[3], sm[4]
        out[2] = np.sqrt(rr) / bnorm
        if out[2] <= tol:
            return
        beta = -us / ps
        _cg1_directions(h, u, w, beta, p, s, n)
        ps = wu + beta * (2.0 * us + beta * ps)
        pr = ru + beta * pr_old
    out[3] = 1.0 if out[2] <= tol else 0.0


# -- set-up -----------------------------------------------------------------------------------

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
        lv[i, KRYLOV] = lev.krylov * {"K": K_LEVEL, "A": AMLI_LEVEL}.get(amg.cycle_kind, 0)
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


class CompiledSolve:
    """One pressure solve (``method`` "fcg" or "cg1" with the AMG's K-cycle) as one numba
    call, on the hierarchy of ``amg`` (serial).  ``refresh`` replaces ``amg.refresh``."""

    def __init__(self, amg, method: str, addresses: dict):
        if method not in ("fcg", "cg1"):
            raise ValueError(f"no compiled solve for {method!r}")
        self.amg, self.method = amg, method
        self.kernel = fcg if method == "fcg" else cg1
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
        self.cnt = np.zeros(CNT_HEAD + nl, dtype=np.int64)
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
        the levels a parallel run repeats on every rank timed as "amg_gathered" as the
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
        with amg.timers("amg_gathered") if fr < len(levels) else _NULL:
            for lev, nxt in zip(levels[fr:-1], levels[fr + 1:], strict=True):
                galerkin_refresh(lev.next.slot, lev.data, nxt.data)
            for lev in levels[fr:]:
                lev.smoother_setup()
            amg._factor_coarsest()
        self._read_factors()

    def solve(self, b, x, tol, max_iter, ws, rel_tol: float = 0.0) -> SolveInfo:
        """``krylov.fcg`` / ``lowsync.cg1`` with ``amg.apply``: same arguments and result,
        same counters."""
        amg = self.amg
        cnt = self.cnt
        cnt[:] = 0
        vecs = ws.v[:4] if self.method == "fcg" else ws.v[:5]
        self.kernel(self.h, amg.A.data, self.lu, self.ctl, cnt, b, x, float(tol),
                    int(max_iter), float(rel_tol), *vecs, self.out)
        self._account(cnt)
        it, res0, res, conv = self.out
        return SolveInfo(iters=int(it), res0=float(res0), res=float(res),
                         converged=bool(conv))

    def _account(self, cnt):
        """The Python path's counters: reductions (and their MPI time), exchanges per level
        and in each level's exchanger (the matrix's for level 0), the "amg_gathered" time,
        the redundant level's allgathers."""
        amg = self.amg
        st = amg.red.stats
        st.calls += int(cnt[REDUCTIONS])
        st.compiled += int(cnt[REDUCTIONS])
        st.seconds += float(cnt[REDUCE_NS]) * 1e-9
        pl = self.par.pl
        for i, lev in enumerate(amg.levels):
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
        ph = amg.timers("amg_gathered")
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
    """The compiled solve for ``amg`` and the Krylov function ``krylov`` (``krylov.fcg`` or
    ``lowsync.cg1``), or None where the Python path must run: no C MPI functions (threaded runs
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
