"""Closures: the effective viscosity the momentum equation diffuses with, per face.

A closure is built from the mesh, the ``[physics]`` table and a :class:`..context.Context` (what a
closure with fields of its own assembles and solves them with) and gives ``nu_face``, an
array over all local faces (internal, then boundary) that the momentum kernels read, or one
entry where the viscosity is the same on every face (laminar flow: 8 bytes per face less).

The solver calls, per step:

- ``closure.solve(flow)`` after the pressure corrections: a model with fields of its own
  solves them from the new velocity and fluxes (velocity ghosts are current) and computes
  its eddy viscosity on the owned cells;
- the cell arrays in ``closure.ghosts`` travel in the next step's first pressure correction
  (one more field of the exchange of ``H/A``, never a message of their own), after which
  ``closure.refresh()`` rebuilds ``nu_face`` from cells whose ghosts are all current;
- on non-orthogonal meshes a transported field's gradient, taken in ``refresh``, travels
  with that correction's exchange of the velocity (``closure.take_pending()``).

So the viscosity of a step's momentum equation comes from the velocity two steps back
(OpenFOAM's pisoFoam: one), the price of adding no exchange; serial and parallel runs lag
alike.  ``closure.start(flow)`` runs once the initial fields are set.  Laminar flow has
none of this.  Modules load on first use, so the registry can be read without compiling
kernels.
"""

from __future__ import annotations

import importlib

from ..context import Context

CLOSURES = {
    "laminar": ".laminar:Laminar",
    "smagorinsky": ".smagorinsky:Smagorinsky",
    "wale": ".wale:WALE",
    "dynamicSmagorinsky": ".dynamic:DynamicSmagorinsky",
    "kEqn": ".keqn:KEqn",
    "spalart_allmaras": ".spalart_allmaras:SpalartAllmaras",
}
MODEL_CLOSURE = {"incompressible": "laminar", "boussinesq": "laminar"}  # physics.model -> closure
# physics.model = "les": physics.closure
LES_CLOSURES = ("smagorinsky", "wale", "kEqn", "dynamicSmagorinsky")


def closure_name(physics) -> str:
    """The closure of ``physics``: ``physics.closure`` where the model names one."""
    name = getattr(physics, "closure", None)
    return name if name is not None else MODEL_CLOSURE[physics.model]


def make_closure(lmesh, physics, ctx: Context | None = None):
    """The closure of ``physics`` on ``lmesh`` (``ctx``: see :class:`Context`)."""
    module, cls = CLOSURES[closure_name(physics)].split(":")
    return getattr(importlib.import_module(module, __name__), cls)(lmesh, physics, ctx)
