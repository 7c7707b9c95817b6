"""The velocity components' BiCGStab solves in lockstep.

The components share one matrix, so their solves run side by side: each vector kernel,
product and exchange handles every component still iterating in one call, and their dot
products travel in one allreduce.  Each component's arithmetic is exactly that of its own
:func:`.bicgstab.bicgstab` solve (Jacobi), so the iterates are the same to the bit; a component
that has converged is left alone while the others go on.  These kernels are serial: numba's
threaded build of a parallel loop inside the loop over components computed wrong values.
Threaded runs take the compiled solve on thread blocks instead (:mod:`.lockstep_compiled`,
each phase one parallel region over row blocks: :mod:`.blocks`), or where it cannot run,
solve the components one by one (:func:`.bicgstab.bicgstab`).
"""

from __future__ import annotations

from ..parallel import threads
from ..parallel.reduce import Reducer
from . import lockstep_kernels as lk
from .bicgstab import lockstep_iterations
from .host_ops import HostMany
from .krylov import SolveInfo
from .lockstep_compiled import LockstepPlan, _compiled_many, lockstep_plan, solve_infos


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
    if not ghosts_current:
        with A.timers("halo_solve"):
            A.ex.exchange(tuple(X[d] for d in comps))
    lockstep_iterations(HostMany(A, red, mws), X, mws.w, comps, tol, rel_tol, max_iter,
                        mws.act, mws.sc, mws.out, mws.red_out)
    infos = solve_infos(mws, comps)
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
