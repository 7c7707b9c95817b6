"""The ``[boundary.<patch>]`` tables: which patches a mesh has, what each patch type
takes (an inlet's velocity, profile, table and fluctuations; an outlet's pressure; a
temperature condition) and their defaults.
"""

from __future__ import annotations

import functools
from pathlib import Path
from types import SimpleNamespace

from . import schema as sc

# The patches of a generated box, as named by haloflow.mesh.blocks.SIDES.  Not imported from
# there: that pulls in numba, and checking a case file should stay instant.
BOX_PATCHES = ("left", "right", "bottom", "top", "front", "back")


STEP_PATCHES = ("inlet", "outlet", "lower", "upper", "front", "back")  # blocks.STEP_PATCHES


CYLINDER_PATCHES = ("inlet", "outlet", "walls", "cylinder", "front", "back")  # mesh.cylinder


@functools.cache
def _patch_schema() -> tuple[sc._Key, dict[str, sc._Kind]]:
    """A patch table's ``type`` key and the kinds of the values a patch may take; patch
    types and inlet profiles come from the boundary conditions' registry."""
    from ..physics.patches import INLET_PROFILES as PROFILES
    from ..physics.patches import PATCH_TYPES

    return sc._Key(sc._choice(*PATCH_TYPES)), {
        "U": sc._XYZ, "p": sc._REAL, "profile": sc._choice(*PROFILES),
        "T": sc._REAL, "T_gradient": sc._REAL, "heat_flux": sc._REAL,
        "table": sc._text("a path to a CSV profile table (header e.g. 'y,Ux,Uy,Uz')"),
        # random inflow fluctuations (haloflow.physics.inflow): rms per component / |U|
        "fluctuation": sc._vector(sc._number(0, big=10.0), "numbers from 0 to 10"),
        "fluctuation_alpha": sc._FRACTION, "seed": sc._integer(0)}


# an inlet's random fluctuations: off unless `fluctuation` is given (then alpha 0.1, seed 0)
_FLUCTUATION = {"fluctuation": None, "fluctuation_alpha": None, "seed": None}


# A patch table: `type` picks which of U, p and profile it takes, and their defaults.
_PATCH_TAKES = {
    "wall": {"U": (0.0, 0.0, 0.0)},  # wall velocity: a moving lid, say
    "inlet": {"U": sc._REQUIRED, "profile": "uniform", **_FLUCTUATION},  # U: the mean velocity
    "outlet": {"p": 0.0},
    "symmetry": {},
    "slip": {},
    "empty": {},
}


# an inlet with profile = "table": the velocity comes from the table, not from U
_INLET_TABLE_TAKES = {"profile": "uniform", "table": sc._REQUIRED, **_FLUCTUATION}


def _patches(mesh: SimpleNamespace) -> tuple[str, ...]:
    """The mesh's patch names, known without building the mesh (a file's: read from it),
    less the periodic ones, which become internal faces."""
    names = _mesh_patches(mesh)
    where = ("mesh", "periodic")
    seen: list[str] = []
    for pair in mesh.periodic:
        for name in pair:
            if name not in names:
                raise sc.KeyProblem(where, f"mesh.periodic: the mesh has no patch {sc._q(name)} "
                                           f"(its patches are: {', '.join(names)})")
            if name in seen:
                raise sc.KeyProblem(where, f"mesh.periodic: patch {sc._q(name)} is in more than "
                                           "one pair")
            seen.append(name)
    return tuple(n for n in names if n not in seen)


def _mesh_patches(mesh: SimpleNamespace) -> tuple[str, ...]:
    if mesh.type == "step":
        return STEP_PATCHES
    if mesh.type == "cylinder":
        return CYLINDER_PATCHES
    if mesh.type != "file":
        return BOX_PATCHES
    from ..mesh import MeshError, patch_names  # numpy only: no numba on this path

    try:
        return tuple(patch_names(mesh.file))
    except MeshError as e:
        raise sc.KeyProblem(("mesh", "file"), f"mesh.file: {e}") from None


def _boundary(raw, mesh: SimpleNamespace, base_of=lambda keys: Path("."),
              model: str = "incompressible") -> dict[str, SimpleNamespace]:
    path = ("boundary",)
    sc._is_table(raw, path)
    patches = _patches(mesh)
    periodic = {n for pair in mesh.periodic for n in pair}
    for name in raw:
        at = sc._dotted(path + (name,))
        if name in periodic:
            raise sc.KeyProblem(path + (name,), f"{at}: patch {sc._q(name)} is periodic "
                                                "(mesh.periodic) and takes no boundary conditions; "
                                                f"remove [{at}]",
                                also=[("mesh", "periodic")])
        if name not in patches:
            raise sc.KeyProblem(path + (name,), f"{at}: the mesh has no patch {sc._q(name)} "
                                                f"(its patches are: {', '.join(patches)})")
    out = {}
    for name in patches:
        at = sc._dotted(path + (name,))
        if name not in raw:
            raise sc.KeyProblem(path + (name,), f"{at}: patch {sc._q(name)} of the mesh has no "
                                                f"boundary conditions (add [{at}] with type = ...)")
        out[name] = _patch(raw[name], path + (name,), base_of(path + (name, "table")))
        _temperature(raw[name], out[name], path + (name,), model)
    return out


def _temperature(raw: dict, out: SimpleNamespace, path: tuple[str, ...], model: str) -> None:
    """A patch's temperature condition: one of T, T_gradient, heat_flux; walls and inlets
    of a Boussinesq case need one, an incompressible case takes none."""
    from ..physics.patches import NEEDS_TEMPERATURE, TEMPERATURE_KEYS

    given = [k for k in TEMPERATURE_KEYS if getattr(out, k) is not None]
    at = sc._dotted(path)
    if model != "boussinesq":
        if given:
            raise sc.KeyProblem(path + (given[0],), f"{at}.{given[0]}: a thermal key, not used by "
                                f'physics.model = {sc._fmt(model)} (use model = "boussinesq")',
                                also=[("physics", "model")])
        return
    if len(given) > 1:
        raise sc.KeyProblem(path + (given[1],), f"{at}: give one temperature condition, not "
                            f"{' and '.join(given)}", also=[path + (given[0],)])
    if not given and out.type in NEEDS_TEMPERATURE:
        raise sc.KeyProblem(path, f"{at}: a {out.type} patch needs a temperature condition "
                            "(T = value, T_gradient = dT/dn or heat_flux = alpha dT/dn; "
                            "T_gradient = 0 is adiabatic)")
    if given and out.type == "empty":
        raise sc.KeyProblem(path + (given[0],), f"{at}.{given[0]}: an empty patch takes no "
                            "temperature condition")


def _patch(raw, path: tuple[str, ...], base: Path = Path(".")) -> SimpleNamespace:
    sc._is_table(raw, path)
    type_key, values = _patch_schema()
    sc._known(raw, ["type", *values], path)
    kind = sc._value(raw, "type", type_key, path)
    takes = _PATCH_TAKES[kind]
    if kind == "inlet" and raw.get("profile") == "table":
        takes = _INLET_TABLE_TAKES
        if "U" in raw:
            raise sc.KeyProblem(path + ("U",), f"{sc._dotted(path + ('U',))}: not used with "
                                'profile = "table" (the table gives the velocity); remove it',
                                also=[path + ("profile",)])
    elif "table" in raw and kind == "inlet":
        raise sc.KeyProblem(path + ("table",), f"{sc._dotted(path + ('table',))}: needs profile = "
                            '"table"', also=[path + ("profile",)])
    takes = {**takes, "T": None, "T_gradient": None, "heat_flux": None}  # see _temperature
    out = {"type": kind}
    for k, value_kind in values.items():
        where = path + (k,)
        if k in takes:
            try:
                out[k] = sc._value(raw, k, sc._Key(value_kind, takes[k]), path)
            except sc.KeyProblem as p:  # a missing inlet U may be due to a changed type
                raise sc.KeyProblem(where, str(p), also=[path + ("type",)]) from None
        elif k in raw:
            who = " and ".join(t for t, ks in _PATCH_TAKES.items() if k in ks) or \
                'inlet (with profile = "table")'
            raise sc.KeyProblem(where, f"{sc._dotted(where)}: not allowed for a patch of type "
                                       f"{sc._fmt(kind)} (only {who} patches take {k})",
                                also=[path + ("type",)])
        else:
            out[k] = None
    if out.get("table") is not None:
        out["table"] = _profile_table(out["table"], path + ("table",), base)
    _fluctuation(out, path)
    return SimpleNamespace(**out)


def _fluctuation(out: dict, path: tuple[str, ...]) -> None:
    """An inlet's random fluctuations: ``fluctuation_alpha`` and ``seed`` only with
    ``fluctuation``, which fills in their defaults (haloflow.physics.inflow)."""
    if out.get("fluctuation") is None:
        for k in ("fluctuation_alpha", "seed"):
            if out.get(k) is not None:
                raise sc.KeyProblem(path + (k,), f"{sc._dotted(path + (k,))}: needs "
                                    f"{sc._dotted(path + ('fluctuation',))} (the rms fluctuation "
                                    "per component, a fraction of |U|)")
        return
    from ..physics.patches import INFLOW_ALPHA as ALPHA
    from ..physics.patches import INFLOW_SEED as SEED

    out["fluctuation"] = tuple(float(x) for x in out["fluctuation"])
    out["fluctuation_alpha"] = ALPHA if out["fluctuation_alpha"] is None else \
        out["fluctuation_alpha"]
    out["seed"] = SEED if out["seed"] is None else out["seed"]


def _profile_table(name: str, where: tuple[str, ...], base: Path) -> str:
    """The table's absolute path, once it has been read and checked."""
    from ..io.profile_table import TableError, read_table

    p = (base / Path(name).expanduser()).resolve()
    try:
        read_table(p)
    except TableError as e:
        raise sc.KeyProblem(where, f"{sc._dotted(where)}: {e}") from None
    return str(p)
