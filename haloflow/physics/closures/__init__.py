"""Closures: the effective viscosity the momentum equation diffuses with, per face.

A closure is built from the mesh and the ``[physics]`` table and gives ``nu_face``, an array
over all local faces (internal, then boundary) that the momentum kernels read.  Each step,
after the pressure corrections, the solver calls ``closure.solve(flow)``: a model with fields
of its own (temperature, a turbulence quantity) solves them there from the new velocity and
fluxes and refreshes ``nu_face``.  Laminar flow has neither.

Modules load on first use, so the registry can be read without compiling kernels.
"""

from __future__ import annotations

import importlib

CLOSURES = {"laminar": ".laminar:Laminar"}
MODEL_CLOSURE = {"incompressible": "laminar", "boussinesq": "laminar"}  # physics.model -> closure


def make_closure(lmesh, physics):
    """The closure of ``physics.model`` on ``lmesh``."""
    module, cls = CLOSURES[MODEL_CLOSURE[physics.model]].split(":")
    return getattr(importlib.import_module(module, __name__), cls)(lmesh, physics)
