"""The compiled target of the AMG's cycles (:mod:`.cycles`: the K-cycle, AMLI and the plain
V-cycle, compiled by numba over this module's operations, :func:`apply`), on the hierarchy
that :class:`.amg.AMG` built, packed into flat tables (:mod:`.kcycle`).

Each operation reads a level's arrays through the tables' offsets (``_level``, ``_vec``) and
communicates from compiled code: halo exchanges on persistent requests, the transfers of
aggregates that span ranks, fused sums by MPI_Allreduce and the replicated level's
right-hand side by one MPI_Allgatherv per visit.  Its kernels are those the host's cycle
runs from Python (:mod:`.host_cycle`), or their thread-block forms, so the iterates agree to
round-off.
"""

from __future__ import annotations

import sys

import numba as nb

from ..parallel import mpicall
from ..parallel.halo.kernels import pack, unpack
from . import amg_kernels as kern
from . import blocks as tb
from . import cycles
from .amg_levels import B, R, X
from .targets import for_target

# per-level columns of the int64 table ``lv``
N, NCOLS, IP, NZ, VEC, CUT, NCUT, HASCUT, COUNTED, PHASE, KRYLOV, SPLIT = range(12)


LV_COLS = 12


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
T_GATHERED = 16  # when the cycle in progress entered the redundant levels (ns)


N_CTL = 17


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
    """A level's Gauss-Seidel sweep with its exchanges, RESWEEP rows included.
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
    """``host_cycle._presmooth_restrict``: the pre-smoothing from zero and the restriction
    of the residual into rc (on thread blocks, the whole sweep and residual)."""
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


# -- the operations :func:`.cycles.apply` runs on here; the context is (h, d0, lu, ctl, cnt)


@nb.njit(cache=True)
def levels(ctx):
    return ctx[3][NLEV]


@nb.njit(cache=True)
def vec(ctx, k, i):
    return _vec(ctx[0], k, i)


@nb.njit(cache=True)
def kind(ctx, i):
    return ctx[0][8][i, KRYLOV]


@nb.njit(cache=True)
def phase(ctx, i):
    return ctx[0][8][i, PHASE]


@nb.njit(cache=True)
def set_phase(ctx, i, value):
    ctx[0][8][i, PHASE] = value


@nb.njit(cache=True)
def keep(ctx, i, a1, rho1):
    h = ctx[0]
    h[9][i] = a1  # (per level, a1 then rho1 of a K-cycle in progress)
    h[9][len(h[8]) + i] = rho1


@nb.njit(cache=True)
def kept(ctx, i):
    h = ctx[0]
    return h[9][i], h[9][len(h[8]) + i]


@nb.njit(cache=True)
def amli_steps(ctx):
    ks = ctx[0][9]
    return ks[len(ks) - 2], ks[len(ks) - 1]


@nb.njit(cache=True)
def enter(ctx, i):
    """The replicated levels' solves are timed (and their visits counted) as one phase."""
    ctl = ctx[3]
    if i == ctl[FIRST_GATHERED]:
        ctl[T_GATHERED] = _now(ctl)


@nb.njit(cache=True)
def leave(ctx, i):
    ctl, cnt = ctx[3], ctx[4]
    if i == ctl[FIRST_GATHERED]:
        cnt[GATHERED_NS] += _now(ctl) - ctl[T_GATHERED]
        cnt[GATHERED_VISITS] += 1


@nb.njit(cache=True)
def coarsest(ctx, i, b, x):
    """The coarsest level's direct solve, by the factors in ``lu``."""
    perm_r, perm_c, lp, li, lx, up, ui, ux, ud, y = ctx[2]
    kern.lu_solve(perm_r, perm_c, lp, li, lx, up, ui, ux, ud, ctx[3][PINNED], b, x, y)


@nb.njit(cache=True)
def down(ctx, i, b, x):
    """Smooth from zero, restrict the residual into the next level's right-hand side
    (partial sums of aggregates spanning ranks to their owners; into a redundant level, one
    allgatherv)."""
    h, d0, cnt = ctx[0], ctx[1], ctx[4]
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
def up(ctx, i, b, x):
    """Add the next level's correction (the owners' values of spanning aggregates back;
    from a redundant level, this rank's entries), smooth back."""
    h, d0, cnt = ctx[0], ctx[1], ctx[4]
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
def matvec_kdots1(ctx, i, c, v, b):
    """v = A c (c's halo first); (c.v, c.b, b.b, v.v, b.v)."""
    h, d0, cnt = ctx[0], ctx[1], ctx[4]
    n = h[8][i, N]
    ip, ix, data, dp, dinv = _level(h, d0, i)
    _exchange(h, cnt, i, c)
    nt = _blocks(h, i)
    if nt:
        sm = _sums(h)
        tb.spmv_kdots1(ip, ix, data, c, v, b, nt, h[H_PART], sm)
        return sm[0], sm[1], sm[2], sm[3], sm[4]
    kern.spmv(ip, ix, data, c, v)
    return kern._kdots1(c, v, b, n)


@nb.njit(cache=True)
def matvec_kdots2(ctx, i, d, w, v, r2):
    """w = A d (d's halo first); (d.v, d.w, d.r2)."""
    h, d0, cnt = ctx[0], ctx[1], ctx[4]
    n = h[8][i, N]
    ip, ix, data, dp, dinv = _level(h, d0, i)
    _exchange(h, cnt, i, d)
    nt = _blocks(h, i)
    if nt:
        sm = _sums(h)
        tb.spmv_kdots2(ip, ix, data, d, w, v, r2, nt, h[H_PART], sm)
        return sm[0], sm[1], sm[2]
    kern.spmv(ip, ix, data, d, w)
    return kern._kdots2(d, v, w, r2, n)


@nb.njit(cache=True)
def sum3(ctx, i, s1, s2, s3):
    h, cnt = ctx[0], ctx[4]
    sm = _sums(h)
    sm[0], sm[1], sm[2] = s1, s2, s3
    _reduce(h, cnt, 3, h[8][i, COUNTED] != 0)
    return sm[0], sm[1], sm[2]


@nb.njit(cache=True)
def sum5(ctx, i, s1, s2, s3, s4, s5):
    h, cnt = ctx[0], ctx[4]
    sm = _sums(h)
    sm[0], sm[1], sm[2], sm[3], sm[4] = s1, s2, s3, s4, s5
    _reduce(h, cnt, 5, h[8][i, COUNTED] != 0)
    return sm[0], sm[1], sm[2], sm[3], sm[4]


@nb.njit(cache=True)
def copy(ctx, i, src, dst):
    n = ctx[0][8][i, N]
    dst[:n] = src[:n]


@nb.njit(cache=True)
def scale_into(ctx, i, x, alpha, c):
    kern._scale_into(x, alpha, c, ctx[0][8][i, N])


@nb.njit(cache=True)
def axpy_into(ctx, i, out, b, alpha, v):
    h = ctx[0]
    n = h[8][i, N]
    nt = _blocks(h, i)
    if nt:
        tb.axpy_into(out, b, alpha, v, n, nt)
    else:
        kern._axpy_into(out, b, alpha, v, n)


@nb.njit(cache=True)
def combine(ctx, i, x, alpha, c, beta, d):
    h = ctx[0]
    n = h[8][i, N]
    nt = _blocks(h, i)
    if nt:
        tb.combine(x, alpha, c, beta, d, n, nt)
    else:
        kern._combine(x, alpha, c, beta, d, n)


@nb.njit(cache=True)
def _residual_scaled(ip, ix, data, c, b, a, out, n):
    """out = b - a A c, each row as ``spmv`` then ``_axpy_into`` compute it."""
    for i in range(n):
        s = 0.0
        for k in range(ip[i], ip[i + 1]):
            s += data[k] * c[ix[k]]
        out[i] = b[i] - a * s


@nb.njit(cache=True)
def amli_residual(ctx, i, r2, b, a1, c, v):
    """r2 = b - a1 A c (c's halo first; on thread blocks v = A c on the way)."""
    h, d0, cnt = ctx[0], ctx[1], ctx[4]
    n = h[8][i, N]
    ip, ix, data, dp, dinv = _level(h, d0, i)
    _exchange(h, cnt, i, c)
    nt = _blocks(h, i)
    if nt:
        tb.spmv(ip, ix, data, c, v, nt)
        tb.axpy_into(r2, b, a1, v, n, nt)
    else:  # in one pass (v is not read again)
        _residual_scaled(ip, ix, data, c, b, a1, r2, n)


apply = for_target(cycles.apply, sys.modules[__name__], "compiled", compiled=True)
