"""The pressure solver methods a case may name: ``[solver.pressure] method``.

One registry, read by the case schema (without importing numba) and by the pressure
equation: each name is a Krylov solver (``module.function`` under :mod:`haloflow.linalg`)
and its preconditioner, ``"amg"`` (the K-cycle of :mod:`.amg`) or ``"jacobi"``.
Allreduces per iteration: ``cg``/``pcg`` 2, ``cg1`` 1, ``pipecg`` 1 (non-blocking, hidden
behind the preconditioner and the SpMV).
"""

from __future__ import annotations

from importlib import import_module

PRESSURE_METHODS = {
    "amg-cg": ("flexible.fcg", "amg"),
    "amg-cg1": ("flexible.cg1", "amg"),
    "amg-pipecg": ("lowsync.pipecg", "amg"),
    "cg-jacobi": ("krylov.pcg", "jacobi"),
    "cg1-jacobi": ("flexible.cg1", "jacobi"),
    "pipecg-jacobi": ("lowsync.pipecg", "jacobi"),
}


def pressure_method(name: str):
    """(solver function, preconditioner kind) of a registered method name."""
    path, precond = PRESSURE_METHODS[name]
    module, function = path.split(".")
    return getattr(import_module(f"{__package__}.{module}"), function), precond
