"""Patch types: the condition each boundary type sets on velocity and pressure.

| type            | U                                     | p                       |
|-----------------|---------------------------------------|-------------------------|
| wall            | fixed (wall velocity)                 | zero gradient           |
| inlet           | fixed (uniform, parabolic, table)     | zero gradient           |
| outlet          | zero gradient                         | fixed (outlet pressure) |
| symmetry, slip  | zero normal, zero-gradient tangential | zero gradient           |
| empty           | none (2D front/back)                  | none                    |

Kernels see four kinds per face: ``FIXED`` (a value), ``ZERO_GRADIENT`` (the cell's value),
``SYMMETRY`` (the cell's velocity less its normal part; velocity only) and ``EMPTY``.  Plain
Python, so the case reader can name the types without loading any kernel.
"""

from __future__ import annotations

from typing import NamedTuple

FIXED, ZERO_GRADIENT, EMPTY, SYMMETRY = 0, 1, 2, 3
FIXED_GRADIENT = 4  # temperature only: a given normal gradient (heat flux)


class PatchType(NamedTuple):
    u: int  # kind of the velocity condition
    p: int  # kind of the pressure condition


PATCH_TYPES = {
    "wall": PatchType(FIXED, ZERO_GRADIENT),
    "inlet": PatchType(FIXED, ZERO_GRADIENT),
    "outlet": PatchType(ZERO_GRADIENT, FIXED),
    "symmetry": PatchType(SYMMETRY, ZERO_GRADIENT),
    "slip": PatchType(SYMMETRY, ZERO_GRADIENT),
    "empty": PatchType(EMPTY, EMPTY),
}
INLET_PROFILES = ("uniform", "parabolic", "table")

# Temperature (physics.model = "boussinesq"): a patch key for a fixed value, a fixed normal
# gradient or a heat flux; walls and inlets need one, outlets and symmetry planes are zero
# gradient unless given one, empty patches take none.
TEMPERATURE_KEYS = ("T", "T_gradient", "heat_flux")
NEEDS_TEMPERATURE = ("wall", "inlet")

# Random inflow fluctuations on an inlet (haloflow.physics.inflow): the time filter's weight
# when none is given (OpenFOAM's turbulentInlet default) and the default seed.
INFLOW_ALPHA = 0.1
INFLOW_SEED = 0
