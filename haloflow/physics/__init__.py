"""The equations and the algorithms that solve them.

Importing this package is cheap (no numba, no MPI): the solvers load their modules on first
use, so the case reader can ask for the registries without compiling anything.
"""

from __future__ import annotations

import importlib

from ..parallel.timers import NULL_TIMERS

SOLVERS = {"piso": ".piso:PisoSolver", "simple": ".simple:SimpleSolver"}  # solver.algorithm

_EXPORTS = {"DivergenceError": ".monitor", "StepInfo": ".monitor"}


def solver_class(name: str):
    """The solver class registered as ``name``."""
    module, cls = SOLVERS[name].split(":")
    return getattr(importlib.import_module(module, __name__), cls)


def make_solver(lmesh, exchanger, reducer, timers=NULL_TIMERS, *, solver, physics, boundary,
                initial, mesh, halo):
    """The solver of ``solver.algorithm`` (transient PISO or steady SIMPLE(C)), given the case
    sections it needs (``mesh``: the [mesh] table, for initial conditions tied to the box;
    ``halo``: the strategy name the AMG's coarse levels use) and the run's reducer."""
    return solver_class(solver.algorithm)(lmesh, exchanger, reducer, timers, solver=solver,
                                          physics=physics, boundary=boundary,
                                          initial=initial, mesh=mesh, halo=halo)


def solver_from_case(lmesh, case, exchanger, comm, timers=NULL_TIMERS):
    """:func:`make_solver` with the sections of a whole ``Case`` on ``comm`` (tests,
    benchmarks)."""
    from ..parallel.reduce import Reducer

    return make_solver(lmesh, exchanger, Reducer(comm), timers, solver=case.solver,
                       physics=case.physics, boundary=case.boundary, initial=case.initial,
                       mesh=case.mesh, halo=case.parallel.halo)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["SOLVERS", "make_solver", "solver_class", "solver_from_case", *_EXPORTS]
