"""The ``[postprocess]`` section: each post-processor's switch and settings, and what it
needs from the rest of the case, checked when the case is read, before anything runs.

The post-processors themselves (``haloflow.post``, a layer above) sample and report; what
they require of a case is a rule of the case file, so it lives here with the other rules,
one function per post-processor.  ``haloflow.post.POSTPROCESSORS`` names the same keys.
"""

from __future__ import annotations

from .schema import _FRACTION, _POSITIVE, KeyProblem, _boolean, _Key, _number

# the [postprocess] settings of each post-processor besides its switch:
# key -> (kind, default)
SETTINGS = {
    "cavity": {"lid_speed": ("positive", 1.0)},  # the lid's speed: the Reynolds number's U
    "channel": {"channel_x": ("fraction", 0.9)},  # where the profile is taken, of the length
    "averaging": {"average_from": ("time", 0.0)},  # the time the averages start
}

FLAT_PLATE_PATCH = "plate"  # the wall whose skin friction postprocess.flat_plate measures


def _needs_mesh(name: str, case, kind: str, why: str) -> None:
    """Refuse a case whose ``mesh.type`` is not ``kind``: post-processor ``name`` reads
    ``why``."""
    if case.mesh.type != kind:
        raise KeyProblem(("postprocess", name), f'postprocess.{name}: needs mesh.type = '
                         f'"{kind}" ({why})', also=[("mesh", "type")])


def _needs_inlet_patch(name: str, case, why: str) -> None:
    """Refuse a case whose patch ``inlet`` is not of type inlet (its U is the mean velocity
    ``name`` scales by)."""
    if case.boundary["inlet"].type != "inlet":
        raise KeyProblem(("postprocess", name), f"postprocess.{name}: needs "
                         f'boundary.inlet.type = "inlet" ({why})',
                         also=[("boundary", "inlet", "type")])


def _needs_initial(name: str, case, kind: str, why: str = "") -> None:
    if case.initial.type != kind:
        raise KeyProblem(("postprocess", name), f"postprocess.{name}: needs "
                         f'initial.type = "{kind}"{why}', also=[("initial", "type")])


def _cavity(case) -> None:
    _needs_mesh("cavity", case, "box", "the profiles are taken on the box's centrelines")


def _channel(case) -> None:
    """A box with one inlet (its U: the mean velocity)."""
    _needs_mesh("channel", case, "box", "the profile is a column of the box's cells")
    inlets = [k for k, b in case.boundary.items() if b.type == "inlet"]
    if len(inlets) != 1:
        raise KeyProblem(("postprocess", "channel"), "postprocess.channel: needs exactly one "
                         f"inlet patch (its U is the mean velocity), found {len(inlets)}",
                         also=[("boundary",)])


def _backward_step(case) -> None:
    """The step mesh and its inlet's U (the mean velocity)."""
    _needs_mesh("backward_step", case, "step",
                "the wall shear is read from the first cell row above the lower wall")
    _needs_inlet_patch("backward_step", case, "its U is the mean velocity of the Reynolds number")


def _taylor_green(case) -> None:
    """The errors are against the vortices the run started from."""
    _needs_initial("taylor_green", case, "taylor_green", " (the errors are against those "
                   "vortices)")


def _taylor_green_3d(case) -> None:
    _needs_initial("taylor_green_3d", case, "taylor_green_3d")


def _cylinder(case) -> None:
    """The cylinder mesh and its inlet's U (the mean velocity)."""
    _needs_mesh("cylinder", case, "cylinder",
                "forces on its cylinder patch, pressures at the benchmark's points")
    _needs_inlet_patch("cylinder", case, "its U is the mean velocity of the coefficients")


def _heated_cavity(case) -> None:
    where = ("postprocess", "heated_cavity")
    _needs_mesh("heated_cavity", case, "box", "the Nusselt numbers and mid-lines are taken "
                "on the box's walls and centre lines")
    if case.physics.model != "boussinesq":
        raise KeyProblem(where, "postprocess.heated_cavity: needs physics.model = "
                         '"boussinesq"', also=[("physics", "model")])
    b = case.boundary
    for side in ("left", "right"):
        if getattr(b[side], "T", None) is None:
            raise KeyProblem(where, "postprocess.heated_cavity: needs a fixed temperature "
                             f"boundary.{side}.T", also=[("boundary", side)])
    if b["left"].T == b["right"].T:
        raise KeyProblem(where, "postprocess.heated_cavity: boundary.left.T and "
                         "boundary.right.T must differ", also=[("boundary", "left", "T")])


def _flat_plate(case) -> None:
    """A wall patch ``plate`` and an ``inlet`` whose U is the freestream speed."""
    where = ("postprocess", "flat_plate")
    b = case.boundary.get(FLAT_PLATE_PATCH)
    if b is None or b.type != "wall":
        raise KeyProblem(where, "postprocess.flat_plate: needs a patch "
                         f'"{FLAT_PLATE_PATCH}" of type "wall" (the plate whose skin friction '
                         "it measures)", also=[("boundary",)])
    if "inlet" not in case.boundary:
        raise KeyProblem(where, 'postprocess.flat_plate: needs a patch "inlet" (its U is the '
                         "freestream speed)", also=[("boundary",)])
    _needs_inlet_patch("flat_plate", case, "its U is the freestream speed")


def _averaging(case) -> None:
    if case.parallel.balance != "off":
        raise KeyProblem(("postprocess", "averaging"), "postprocess.averaging: not with "
                         'parallel.balance = "time" (the sums stay on the cells\' first '
                         "ranks)", also=[("parallel", "balance")])


# [postprocess] key -> what it needs of the case; the order is the order of the case file's
# keys and of the run's reports
NEEDS = {
    "cavity": _cavity,
    "channel": _channel,
    "backward_step": _backward_step,
    "taylor_green": _taylor_green,
    "taylor_green_3d": _taylor_green_3d,
    "cylinder": _cylinder,
    "heated_cavity": _heated_cavity,
    "flat_plate": _flat_plate,
    "averaging": _averaging,  # mean and rms fields, written with the fields
}


def _postprocess() -> dict[str, _Key]:
    """Each post-processor's switch, then its settings."""
    kinds = {"positive": _POSITIVE, "fraction": _FRACTION, "time": _number(0)}
    out = {}
    for name in NEEDS:
        out[name] = _Key(_boolean(), False)
        out |= {k: _Key(kinds[kind], default) for k, (kind, default) in
                SETTINGS.get(name, {}).items()}
    return out


def check_postprocessors(case) -> None:
    """Raise :class:`KeyProblem` where a switched-on post-processor cannot work on ``case``."""
    for name, needs in NEEDS.items():
        if getattr(case.postprocess, name):
            needs(case)
