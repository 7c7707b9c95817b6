"""The AMG's cycles, written once for every target (:mod:`.targets`): the V-cycle, the
K-cycle and AMLI, as the preconditioner ``z = M r``.

:func:`apply` runs the cycle from level 0: on each coarser level the direct solve (the
coarsest) or the level's own cycle, as a loop over an explicit per-level phase rather than
recursion (recursive compiled functions do not load back from numba's cache).  A level's
cycle is ``down`` (pre-smoothing from zero, the residual restricted into the next level's
right-hand side, handed to the ranks that own it), the next level's solve, then ``up`` (the
correction prolonged and added, post-smoothing).  On a Krylov level (``kind``):

* the K-cycle (Notay & Vassilevski) makes two flexible-CG steps, each preconditioned by one
  cycle: c = M b, step ``a1 = (c, b) / (c, A c)``; it stops there where the residual this
  leaves, ``|b - a1 A c|``, is below ``KCYCLE_T |b|`` (foreseen from the sums already
  reduced), else d = M (b - a1 A c) and x is the A-orthogonal combination of c and d;
* AMLI makes the same two steps with the fixed lengths ``amli_steps`` of a degree-2
  polynomial: the K-cycle's exchanges less one and no reduction.

The targets: the host from Python (:mod:`.host_cycle`, the binding in this module), the
compiled solve (:mod:`.cycle`, over the hierarchy packed into flat tables) and the device
(:class:`.device_solve.DeviceCycleOps`).  Each provides a level's vectors by index (``B``
...``R2``, :data:`.amg_levels.VECTORS`), its kind and phase, ``down``, ``up``, the coarsest
solve, the products with their fused dot products and the vector updates.
"""

from __future__ import annotations

from . import host_cycle as ops
from .amg_levels import AMLI_LEVEL, PLAIN, R2, B, C, D, V, W, X

KCYCLE_T = 0.25  # K-cycle: skip the second step when |b - a1 A c| <= KCYCLE_T |b|


def apply(ctx, r, z):
    """z = M r: the cycle from level 0 (the coarsest level's solve where it is the only
    one)."""
    last = ops.levels(ctx) - 1
    if last == 0:
        ops.coarsest(ctx, 0, r, z)
        return
    ops.down(ctx, 0, r, z)
    i = 1
    enter = True  # entering the solve of level i, else returning from it
    while True:
        if enter:
            ops.enter(ctx, i)
            if i == last:
                ops.coarsest(ctx, i, ops.vec(ctx, B, i), ops.vec(ctx, X, i))
                enter = False
                continue
            ops.set_phase(ctx, i, 0)
            first = C if ops.kind(ctx, i) != PLAIN else X
            ops.down(ctx, i, ops.vec(ctx, B, i), ops.vec(ctx, first, i))
            i += 1
            continue
        ops.leave(ctx, i)  # the solve of level i is done: back to the cycle of level i - 1
        i -= 1
        if i == 0:
            ops.up(ctx, 0, r, z)
            return
        kind = ops.kind(ctx, i)
        if kind == PLAIN:
            ops.up(ctx, i, ops.vec(ctx, B, i), ops.vec(ctx, X, i))
        elif ops.phase(ctx, i) == 0:
            ops.up(ctx, i, ops.vec(ctx, B, i), ops.vec(ctx, C, i))
            if kind == AMLI_LEVEL:
                more = amli_first(ctx, i)
            else:
                more = k_first(ctx, i)
            if more:
                ops.set_phase(ctx, i, 1)
                ops.down(ctx, i, ops.vec(ctx, R2, i), ops.vec(ctx, D, i))
                i += 1
                enter = True
        else:
            ops.up(ctx, i, ops.vec(ctx, R2, i), ops.vec(ctx, D, i))
            if kind == AMLI_LEVEL:
                amli_second(ctx, i)
            else:
                k_second(ctx, i)


def k_first(ctx, i):
    """The K-cycle after its first cycle (c = M b): x = a1 c where that is enough (returns
    False), else the second right-hand side r2 = b - a1 A c (returns True)."""
    b, x, c, v = ops.vec(ctx, B, i), ops.vec(ctx, X, i), ops.vec(ctx, C, i), ops.vec(ctx, V, i)
    rho1, alpha1, bb, vv, bv = ops.matvec_kdots1(ctx, i, c, v, b)  # v = A c
    rho1, alpha1, bb, vv, bv = ops.sum5(ctx, i, rho1, alpha1, bb, vv, bv)
    if rho1 <= 0.0:
        ops.copy(ctx, i, c, x)
        return False
    a1 = alpha1 / rho1
    if bb - 2.0 * a1 * bv + a1 * a1 * vv <= KCYCLE_T * KCYCLE_T * bb:
        ops.scale_into(ctx, i, x, a1, c)
        return False
    ops.axpy_into(ctx, i, ops.vec(ctx, R2, i), b, a1, v)
    ops.keep(ctx, i, a1, rho1)
    return True


def k_second(ctx, i):
    """The K-cycle after its second cycle (d = M r2): x = the A-orthogonal combination of
    c and d."""
    x, c, d = ops.vec(ctx, X, i), ops.vec(ctx, C, i), ops.vec(ctx, D, i)
    a1, rho1 = ops.kept(ctx, i)
    gamma, beta, alpha2 = ops.matvec_kdots2(ctx, i, d, ops.vec(ctx, W, i), ops.vec(ctx, V, i),
                                            ops.vec(ctx, R2, i))  # w = A d
    gamma, beta, alpha2 = ops.sum3(ctx, i, gamma, beta, alpha2)
    rho2 = beta - gamma * gamma / rho1
    if rho2 <= 0.0:
        ops.scale_into(ctx, i, x, a1, c)
        return
    ops.combine(ctx, i, x, a1 - gamma * alpha2 / (rho1 * rho2), c, alpha2 / rho2, d)


def amli_first(ctx, i):
    """AMLI after its first cycle (c = M b): r2 = b - a1 A c; always a second cycle."""
    a1, a2 = ops.amli_steps(ctx)
    ops.amli_residual(ctx, i, ops.vec(ctx, R2, i), ops.vec(ctx, B, i), a1, ops.vec(ctx, C, i),
                      ops.vec(ctx, V, i))
    return True


def amli_second(ctx, i):
    """AMLI after its second cycle (d = M r2): x = a1 c + a2 d."""
    a1, a2 = ops.amli_steps(ctx)
    ops.combine(ctx, i, ops.vec(ctx, X, i), a1, ops.vec(ctx, C, i), a2, ops.vec(ctx, D, i))


HELPERS = (k_first, k_second, amli_first, amli_second)  # what a target's copy carries
