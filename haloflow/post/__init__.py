"""Post-processors: what a run measures besides its fields, one module each.

A post-processor is switched on by its key in the case's ``[postprocess]`` table and found
here by that name, its module imported only when a case uses it (as PyFR finds its plugins),
so reading a case file stays cheap.  Every one is a :class:`~haloflow.post.base.PostProcessor`:
``sample(solver)`` after each step, ``report(outdir, fields)`` once at the end (files, plots
and its entry in ``summary.json``) and a log line.  Its settings and what it needs of a case
are rules of the case file, checked when the case is read (:mod:`haloflow.case.postprocess`,
under the same keys as here).
"""

from __future__ import annotations

import importlib

# [postprocess] key -> "module:class"; the order is the order of the case file's keys and of
# the run's reports
POSTPROCESSORS = {
    "cavity": ".cavity:Cavity",
    "channel": ".channel:Channel",
    "backward_step": ".step:BackwardStep",
    "taylor_green": ".taylor_green:TaylorGreen",
    "taylor_green_3d": ".taylor_green_3d:TaylorGreen3D",
    "cylinder": ".cylinder:Cylinder",
    "heated_cavity": ".heated_cavity:HeatedCavity",
    "flat_plate": ".flat_plate:FlatPlate",
    "averaging": ".averaging:Averaging",  # mean and rms fields, written with the fields
}

def load(name: str) -> type:
    """The post-processor class registered as ``name``."""
    module, cls = POSTPROCESSORS[name].split(":")
    return getattr(importlib.import_module(module, __name__), cls)


def enabled(case) -> list[type]:
    """The classes of the post-processors ``case`` switches on, in registry order."""
    return [load(name) for name in POSTPROCESSORS if getattr(case.postprocess, name)]
