"""What every equation of a solver is built from: one object instead of a dozen arguments.

The momentum, pressure and energy equations and the turbulence closures share the rank's
mesh data (local mesh, face coefficients, boundary arrays, the solved components, the
gradient scheme), the matrix pattern, the halo exchanger, the reducer, the work vectors, the
scratch arrays and the timers, and read the case's ``[solver]`` and ``[boundary]`` tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Context:
    """The solver's shared pieces (``steady``: SIMPLE iterations; ``nonorth``: the flow defers
    the non-orthogonal part of diffusion, and so does every equation)."""

    lmesh: Any
    fc: Any
    bc: Any
    comps: Any
    gradient: Any
    pattern: Any
    exchanger: Any
    red: Any
    workspace: Any
    scratch: Any
    timers: Any
    solver: Any
    boundary: Any
    steady: bool = False
    nonorth: bool = False
