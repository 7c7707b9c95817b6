"""The host's operations for the AMG cycles of :mod:`.cycles`, run from Python: the context
is the :class:`.amg.AMG` itself (its levels, their exchanges and reductions, the transfers
of aggregates that span ranks, the replicated coarse levels), the arithmetic that of the
serial kernels of :mod:`.amg_kernels`."""

from __future__ import annotations

import numpy as np

from . import amg_kernels as kern
from .amg_levels import VECTORS, level_kind


def levels(a):
    return len(a.levels)


def vec(a, k, i):
    return getattr(a.levels[i], VECTORS[k])


def kind(a, i):
    return level_kind(a.cycle_kind, a.levels[i].krylov)


def phase(a, i):
    return a.cycle_state[0, i]


def set_phase(a, i, value):
    a.cycle_state[0, i] = value


def keep(a, i, a1, rho1):
    a.cycle_state[1, i], a.cycle_state[2, i] = a1, rho1


def kept(a, i):
    return a.cycle_state[1, i], a.cycle_state[2, i]


def amli_steps(a):
    return a.amli


def enter(a, i):
    """The replicated levels' solves are timed as one phase."""
    if i == a.first_redundant:
        a.replicated_phase = a.timers("amg_replicated")
        a.replicated_phase.__enter__()


def leave(a, i):
    if i == a.first_redundant:
        a.replicated_phase.__exit__(None, None, None)


def coarsest(a, i, b, x):
    lev = a.levels[i]
    f = lev.lu
    kern.lu_solve(f.perm_r, f.perm_c, f.lp, f.li, f.lx, f.up, f.ui, f.ux, f.ud, lev.pinned,
                  b, x, f.y)


def _presmooth_restrict(lev, b, x, nx, rc):
    """Forward sweep from x = 0, then rc = R (b - A x): half rows where the pattern splits
    at the diagonal (without ghost columns in one pass), else whole rows."""
    n = lev.n
    args = (lev.indptr, lev.indices, lev.data)
    if lev.split and lev.ncols == n:
        kern.gs_from_zero_restrict(*args, lev.diag_pos, lev.dinv, b, x, n, nx.agg, rc,
                                   nx.ncols)
        lev.exchange(x)
        # no ghost columns (one rank): an empty exchange where ranks with a cut resweep, so
        # that a one-rank profile counts the exchanges a run on many ranks makes
        if lev.cut is not None:
            lev.exchange(x)
        return
    if lev.split:
        x[n:] = 0.0
        kern.gs_from_zero(*args, lev.diag_pos, lev.dinv, b, x, n)
    else:
        x[:] = 0.0
        kern.gs_sweep(*args, lev.diag_pos, lev.dinv, b, x, n, True)
    lev.exchange(x)
    if lev.cut is not None:
        kern.gs_rows(*args, lev.diag_pos, lev.dinv, b, x, lev.cut, True)
        lev.exchange(x)
    if lev.split and lev.cut is None:
        kern.upper_residual_restrict(*args, lev.diag_pos, lev.dinv, x, n, nx.agg, rc,
                                     nx.ncols)
    else:
        kern.residual_restrict(*args, x, b, n, nx.agg, rc, nx.ncols)


def down(a, i, b, x):
    """Pre-smoothing from zero; the residual restricted into level i + 1's right-hand side
    (partial sums of aggregates spanning ranks to their owners; into the first replicated
    level, one allgather of it)."""
    lev, nxt = a.levels[i], a.levels[i + 1]
    nx = lev.next
    rc = nxt.b if nx.redundant is None else nx.redundant.rc
    _presmooth_restrict(lev, b, x, nx, rc)
    if nx.xfer is not None:
        nx.xfer.accumulate(rc)
    nxt.visits += 1
    if i + 1 == a.first_redundant:
        a.allgathers += 1  # (serial runs: counted, as a parallel run would make it)
        rd = nx.redundant
        if rd is not None:
            rd.rhs.allgather(rd.rc[: rd.n], nxt.b)


def up(a, i, b, x):
    """Level i + 1's correction prolonged and added (the owners' values of spanning
    aggregates back; from a replicated level, this rank's entries), then post-smoothing."""
    lev, nxt = a.levels[i], a.levels[i + 1]
    nx = lev.next
    e = nxt.x
    rd = nx.redundant
    if i + 1 == a.first_redundant and rd is not None:
        np.take(nxt.x, rd.cols, out=rd.rc[: len(rd.cols)])
        e = rd.rc
    if nx.xfer is not None and rd is None:  # (replicated: all values at hand)
        nx.xfer.distribute(e)
    n = lev.n
    kern.prolong_add(nx.agg, e, n, x)
    lev.exchange(x)
    kern.gs_sweep(lev.indptr, lev.indices, lev.data, lev.diag_pos, lev.dinv, b, x, n, False)
    if lev.cut is not None:
        lev.exchange(x)
        kern.gs_rows(lev.indptr, lev.indices, lev.data, lev.diag_pos, lev.dinv, b, x, lev.cut,
                     False)


def matvec_kdots1(a, i, c, v, b):
    """v = A c; (c.v, c.b, b.b, v.v, b.v)."""
    lev = a.levels[i]
    lev.matvec(c, v)
    return kern._kdots1(c, v, b, lev.n)


def matvec_kdots2(a, i, d, w, v, r2):
    """w = A d; (d.v, d.w, d.r2)."""
    lev = a.levels[i]
    lev.matvec(d, w)
    return kern._kdots2(d, v, w, r2, lev.n)


def sum3(a, i, s1, s2, s3):
    return a.levels[i].red.sum(s1, s2, s3)


def sum5(a, i, s1, s2, s3, s4, s5):
    return a.levels[i].red.sum(s1, s2, s3, s4, s5)


def copy(a, i, src, dst):
    n = a.levels[i].n
    dst[:n] = src[:n]


def scale_into(a, i, x, alpha, c):
    kern._scale_into(x, alpha, c, a.levels[i].n)


def axpy_into(a, i, out, b, alpha, v):
    kern._axpy_into(out, b, alpha, v, a.levels[i].n)


def combine(a, i, x, alpha, c, beta, d):
    kern._combine(x, alpha, c, beta, d, a.levels[i].n)


def amli_residual(a, i, r2, b, a1, c, v):
    """r2 = b - a1 A c (v = A c)."""
    lev = a.levels[i]
    lev.matvec(c, v)
    kern._axpy_into(r2, b, a1, v, lev.n)
