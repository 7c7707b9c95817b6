"""The AMG's cycles in compiled code: the K-cycle, AMLI and the plain V-cycle over the
hierarchy that :class:`.amg.AMG` built, packed into flat tables (:mod:`.kcycle`).

Each function reads a level's arrays through the tables' offsets (``_level``, ``_vec``) and
communicates from compiled code: halo exchanges on persistent requests, the transfers of
aggregates that span ranks, fused sums by MPI_Allreduce and the replicated level's
right-hand side by one MPI_Allgatherv per visit.  The arithmetic is that of
:meth:`.amg.AMG.apply`, operation for operation, so the iterates agree to round-off.
"""

from __future__ import annotations

import numba as nb

from ..parallel import mpicall
from ..parallel.halo.kernels import pack, unpack
from . import amg_kernels as kern
from . import blocks as tb
from .amg import KCYCLE_T

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


# slots of the int64 counters array ``cnt``: then one exchange count per level, then one
# visit count per level
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


@nb.njit(cache=True)
def _coarsest(lu, ctl, b, x):
    """``AMG._solve`` on the coarsest level: amg.lu_solve with the factors in ``lu``."""
    perm_r, perm_c, lp, li, lx, up, ui, ux, ud, y = lu
    kern.lu_solve(perm_r, perm_c, lp, li, lx, up, ui, ux, ud, ctl[PINNED], b, x, y)


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
            kern.gs_sweep(ip, ix, data, dp, dinv, b, x, n, True)
        _exchange(h, cnt, i, x)
        if lv[i, HASCUT]:
            kern.gs_rows(ip, ix, data, dp, dinv, b, x, cut, True)
            _exchange(h, cnt, i, x)
    else:
        if not nt:
            kern.gs_sweep(ip, ix, data, dp, dinv, b, x, n, False)
        if lv[i, HASCUT]:
            _exchange(h, cnt, i, x)
            kern.gs_rows(ip, ix, data, dp, dinv, b, x, cut, False)


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
        kern.gs_from_zero_restrict(ip, ix, data, dp, dinv, b, x, n, ag, rc, nc)
        _exchange(h, cnt, i, x)
        # no ghost columns (one rank): an empty exchange where ranks with a cut resweep,
        # so that a one-rank profile counts the exchanges a run on many ranks makes
        if lv[i, HASCUT]:
            _exchange(h, cnt, i, x)
        return
    if lv[i, SPLIT]:
        x[n:] = 0.0
        kern.gs_from_zero(ip, ix, data, dp, dinv, b, x, n)
    else:
        x[:] = 0.0
        kern.gs_sweep(ip, ix, data, dp, dinv, b, x, n, True)
    _exchange(h, cnt, i, x)
    if lv[i, HASCUT]:
        cut = h[6][lv[i, CUT]:lv[i, CUT] + lv[i, NCUT]]
        kern.gs_rows(ip, ix, data, dp, dinv, b, x, cut, True)
        _exchange(h, cnt, i, x)
    if lv[i, SPLIT] and not lv[i, HASCUT]:
        kern.upper_residual_restrict(ip, ix, data, dp, dinv, x, n, ag, rc, nc)
    else:
        kern.residual_restrict(ip, ix, data, x, b, n, ag, rc, nc)


@nb.njit(cache=True)
def _down(h, d0, cnt, i, b, x):
    """First half of ``AMG._cycle`` on level i: smooth from zero, restrict the residual
    into the next level's right-hand side (partial sums of aggregates spanning ranks to
    their owners; into a redundant level, one allgatherv)."""
    lv, pl = h[8], h[H_PL]
    cnt[CNT_HEAD + h[H_CTL][NLEV] + i + 1] += 1  # a visit to level i + 1
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
        kern.prolong_add(ag, e, n, x)
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
        kern.spmv(ip, ix, data, c, v)
        sm[:5] = kern._kdots1(c, v, b, n)
    _reduce(h, cnt, 5, lv[i, COUNTED] != 0)
    rho1, alpha1, bb, vv, bv = sm[0], sm[1], sm[2], sm[3], sm[4]
    if rho1 <= 0.0:
        x[:n] = c[:n]
        return False
    a1 = alpha1 / rho1
    if bb - 2.0 * a1 * bv + a1 * a1 * vv <= KCYCLE_T * KCYCLE_T * bb:
        kern._scale_into(x, a1, c, n)
        return False
    if nt:
        tb.axpy_into(_vec(h, R2, i), b, a1, v, n, nt)
    else:
        kern._axpy_into(_vec(h, R2, i), b, a1, v, n)
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
        kern.spmv(ip, ix, data, d, w)
        sm[:3] = kern._kdots2(d, v, w, r2, n)
    _reduce(h, cnt, 3, lv[i, COUNTED] != 0)
    gamma, beta, alpha2 = sm[0], sm[1], sm[2]
    rho2 = beta - gamma * gamma / rho1
    if rho2 <= 0.0:
        kern._scale_into(x, a1, c, n)
        return
    _combine_on(x, a1 - gamma * alpha2 / (rho1 * rho2), c, alpha2 / rho2, d, n, nt)


@nb.njit(cache=True)
def _combine_on(x, a, c, b, d, n, nt):
    """``_combine`` on ``nt`` thread blocks (0: serially)."""
    if nt:
        tb.combine(x, a, c, b, d, n, nt)
    else:
        kern._combine(x, a, c, b, d, n)


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
