"""A solver method written once and run on every target.

A method (:mod:`.flexible`, :mod:`.bicgstab`, :mod:`.cycles`) is one Python function over
operations named ``ops.*``, each taking the target's context first.  :func:`for_target`
makes the method's copy for one target with ``ops`` bound to that target's operations (a
module or a class): compiled by numba for the whole-solve CPU path, or interpreted where
each operation is a call into compiled kernels (the host from Python, the device's kernel
launches).  The copy runs the same source, so the method's arithmetic, reductions and
stopping rule are the same everywhere.

Every method reports ``out = (iterations, initial residual, final residual, converged)``,
residuals relative to ``||b||``, and stops at ``max(tol, rel_tol * initial)`` (``rel_tol`` is
OpenFOAM's ``relTol``).
"""

from __future__ import annotations

import types

import numba as nb
import numpy as np

from .krylov import SolveInfo


def for_target(method, target, name: str, compiled: bool):
    """``method``'s copy with ``ops`` bound to ``target``: numba-compiled (``compiled``, its
    own entries in numba's cache, named after ``name``) or interpreted.  The functions its
    module lists in ``HELPERS`` (those the methods call that use ``ops``) are copied with
    it; each helper's copy sees its own module's names, so helpers call ``ops``, not one
    another."""
    def copy(fn, scope, label):
        twin = types.FunctionType(fn.__code__, scope, fn.__name__)
        twin.__qualname__ = label  # its own entry in numba's cache
        twin.__module__, twin.__doc__ = fn.__module__, fn.__doc__
        return nb.njit(cache=True)(twin) if compiled else twin

    scope = {**method.__globals__, "ops": target}
    for fn in method.__globals__.get("HELPERS", ()):
        scope[fn.__name__] = copy(fn, {**fn.__globals__, "ops": target},
                                  f"{fn.__qualname__}_{method.__qualname__}_{name}")
    return copy(method, scope, f"{method.__qualname__}_{name}")


@nb.njit(cache=True)
def initial(rr, bb, tol, rel_tol, out):
    """out = (0, res0, res0, converged) of a start at ``||r||^2 = rr``, ``||b||^2 = bb``;
    returns (the tolerance the solve stops at, ||b||)."""
    bnorm = np.sqrt(bb) if bb > 0.0 else 1.0
    out[0] = 0.0
    out[1] = np.sqrt(rr) / bnorm
    out[2] = out[1]
    out[3] = 1.0
    return max(tol, rel_tol * out[1]), bnorm


def solve_info(out) -> SolveInfo:
    """The :class:`.krylov.SolveInfo` of a method's ``out``."""
    return SolveInfo(iters=int(out[0]), res0=float(out[1]), res=float(out[2]),
                     converged=bool(out[3]))
