"""The equations and the algorithms that solve them.

Importing this package is cheap (no numba): the names below load their modules on first use,
so the case reader can ask for the registries without compiling anything.
"""

from __future__ import annotations

import importlib

SOLVERS = {"piso": ".incompressible", "simple": ".simple"}

_EXPORTS = {
    "make_solver": ".incompressible",
    "solver_from_case": ".incompressible",
    "DivergenceError": ".incompressible",
    "StepInfo": ".incompressible",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = list(_EXPORTS)
