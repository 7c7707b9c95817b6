"""The velocity components' BiCGStab solves in lockstep.

The components share one matrix, so their solves run side by side: each vector kernel,
product and exchange handles every component still iterating in one call, and their dot
products travel in one allreduce.  Each component's arithmetic is exactly that of its own
:func:`.krylov.bicgstab` solve (Jacobi), so the iterates are the same to the bit; a component
that has converged is left alone while the others go on.  These kernels are serial: numba's
threaded build of a parallel loop inside the loop over components computed wrong values.
Threaded runs take the compiled solve on thread blocks instead (:mod:`.lockstep_compiled`,
each phase one parallel region over row blocks: :mod:`.blocks`), or where it cannot run,
solve the components one by one (:func:`.krylov.bicgstab`).
"""

from __future__ import annotations

import numpy as np

from ..parallel import threads
from ..parallel.reduce import Reducer
from . import lockstep_kernels as lk
from .krylov import SolveInfo, initial_info
from .lockstep_compiled import LockstepPlan, _compiled_many, lockstep_plan


def _matvec_many(A, X, Y, comps, act, fields) -> None:
    """``Y = A X`` for the active components; their ghosts travel in one exchange
    (overlapped with the inner rows where the exchanger can).  ``fields``: the rows of ``X``
    of every component, sent as they are while all are active."""
    p = A.pattern
    if not act[comps].all():
        fields = tuple(X[d] for d in comps if act[d])
    if A.overlap:
        with A.timers("halo_solve"):
            h = A.ex.start(fields)
        lk._spmv_many(p.indptr, p.indices, A.data, X, Y, comps, act, p.inner_runs)
        with A.timers("halo_solve"):
            A.ex.finish(h)
        lk._spmv_many(p.indptr, p.indices, A.data, X, Y, comps, act, p.outer_runs)
        return
    with A.timers("halo_solve"):
        A.ex.exchange(fields)
    lk._spmv_many(p.indptr, p.indices, A.data, X, Y, comps, act, p.all_runs)


def bicgstab_many(A, X, comps, tol, max_iter, red: Reducer, mws: lk.ManyWorkspace,
                  rel_tol: float = 0.0, ghosts_current: bool = False,
                  exchange_after: bool = False) -> list[SolveInfo]:
    """Solve ``A X[d] = mws.rhs[d]`` in place for each ``d`` in ``comps`` (an int64 array) by
    Jacobi-preconditioned BiCGStab, all components in lockstep: per iteration two exchanges
    and three allreduces in all, not per component.  Returns one :class:`SolveInfo` per
    component, each what :func:`bicgstab` would return for that component alone.
    ``ghosts_current``: the ghost values of ``X`` are up to date (no exchange first);
    ``exchange_after``: exchange the solution's ghosts at the end (inside the compiled call
    where it runs, which saves a Python exchange per solve)."""
    if mws.w.shape[0] < lk.LOCKSTEP_SETS:
        raise ValueError(f"the lockstep BiCGStab needs a workspace of {lk.LOCKSTEP_SETS} sets")
    plan = compiled_lockstep(A, len(comps), red, mws)
    if plan is not None:
        return _compiled_many(A, X, comps, tol, max_iter, red, mws, rel_tol, ghosts_current,
                              plan, exchange_after)
    infos = _python_many(A, X, comps, tol, max_iter, red, mws, rel_tol, ghosts_current)
    if exchange_after:
        with A.timers("halo_solve"):
            A.ex.exchange(tuple(X[d] for d in comps))
    return infos


def compiled_lockstep(A, m: int, red: Reducer, mws: lk.ManyWorkspace) -> LockstepPlan | None:
    """The plan of the compiled lockstep solve of ``m`` components (made once per exchanger
    and count), or None where :func:`bicgstab_many` runs from Python."""
    key = (id(A.ex), m, threads.blocks())
    if mws.plan_key != key:
        mws.plan, mws.plan_key = lockstep_plan(A, m, red), key
    return mws.plan


def _python_many(A, X, comps, tol, max_iter, red, mws, rel_tol, ghosts_current):
    """:func:`bicgstab_many` phase by phase from Python (threads, or no compiled MPI)."""
    n = A.pattern.n_rows
    p_ = A.pattern
    B, R, R0, P, V, PH, SH = mws.w  # (a lockstep workspace: LOCKSTEP_SETS rows)
    T = B  # the right-hand side is not read after the residual
    S = R  # s = r - alpha v overwrites r, which the update then rebuilds from s
    m = len(comps)
    out, act = mws.red_out, mws.act
    alpha, beta, omega, rho = mws.scal
    xf = tuple(X[d] for d in comps)
    phf = tuple(PH[d] for d in comps)
    shf = tuple(SH[d] for d in comps)
    np.divide(1.0, A.diag, out=mws.invd)
    if not ghosts_current:
        with A.timers("halo_solve"):
            A.ex.exchange(xf)
    lk._residual_many(p_.indptr, p_.indices, A.data, X, B, R, comps, p_.all_runs)
    lk._bicg3_start(R, B, R0, P, V, comps, n, out)
    sums = red.sum(*out[: 2 * m])
    infos, tols, bnorms, rho_new = [], [], [], [0.0] * 3
    act[:] = 0
    for j in range(m):
        info, t, bn = initial_info(sums[2 * j], sums[2 * j + 1], tol, rel_tol)
        infos.append(info)
        tols.append(t)
        bnorms.append(bn)
        d = comps[j]
        act[d] = info.res0 > t
        rho[d] = alpha[d] = omega[d] = 1.0
        rho_new[d] = sums[2 * j]
    for it in range(1, max_iter + 1):
        if not act.any():
            return infos
        for d in comps:
            beta[d] = (rho_new[d] / rho[d]) * (alpha[d] / omega[d]) if act[d] else 0.0
            rho[d] = rho_new[d]
        lk._bicg3_p(P, R, V, beta, omega, mws.invd, PH, comps, act, n)
        _matvec_many(A, PH, V, comps, act, phf)
        lk._bicg3_r0v(R0, V, comps, act, n, out)
        r0v = red.sum(*out[:m])
        for j in range(m):
            d = comps[j]
            if act[d]:
                if r0v[j] == 0.0:
                    act[d] = 0
                    infos[j].converged = infos[j].res <= tols[j]
                else:
                    alpha[d] = rho[d] / r0v[j]
        lk._bicg3_s(S, R, V, alpha, mws.invd, SH, comps, act, n)
        _matvec_many(A, SH, T, comps, act, shf)
        lk._bicg3_dot3(T, S, comps, act, n, out)
        dots = red.sum(*out[: 3 * m])
        for j in range(m):
            d = comps[j]
            if not act[d]:
                continue
            ts, tt, ss = dots[3 * j: 3 * j + 3]
            infos[j].iters = it
            if np.sqrt(ss) / bnorms[j] <= tols[j] or tt == 0.0:
                act[d] = 2  # converged at s: x += alpha phat, then stop
                infos[j].res = np.sqrt(ss) / bnorms[j]
            else:
                omega[d] = ts / tt
        lk._bicg3_xr(X, PH, SH, R, S, T, alpha, omega, R0, comps, act, n, out)
        more = any(act[d] == 1 for d in comps)
        sums = red.sum(*out[: 2 * m]) if more else ()
        for j in range(m):
            d = comps[j]
            if act[d] == 2:
                act[d] = 0
            elif act[d]:
                info = infos[j]
                rho_new[d] = sums[2 * j]
                info.res = np.sqrt(sums[2 * j + 1]) / bnorms[j]
                if info.res <= tols[j]:
                    act[d] = 0
                elif omega[d] == 0.0 or rho_new[d] == 0.0:
                    act[d] = 0
                    info.converged = False
    for j in range(m):
        if act[comps[j]]:
            infos[j].converged = infos[j].res <= tols[j]
    return infos
