"""Case files: TOML data in, one validated :class:`Case` out.

A case file is data, never code: it is read with :mod:`tomllib`, merged with
``--set section.key=VALUE`` overrides and checked against a schema that also supplies the
defaults.  Every problem becomes a one-line :class:`CaseError` naming the file (or the
override), the dotted key and what was expected, so a user can fix it without a traceback.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from .limits import generated_cells

__all__ = ["Case", "CaseError", "KeyProblem", "builtin_cases", "load_case"]

CASES_DIR = Path(__file__).parent / "cases"

# The patches of a generated box, as named by haloflow.mesh.blocks.SIDES.  Not imported from
# there: that pulls in numba, and checking a case file should stay instant.
BOX_PATCHES = ("left", "right", "bottom", "top", "front", "back")
STEP_PATCHES = ("inlet", "outlet", "lower", "upper", "front", "back")  # blocks.STEP_PATCHES
CYLINDER_PATCHES = ("inlet", "outlet", "walls", "cylinder", "front", "back")  # mesh.cylinder


class CaseError(Exception):
    """A case file or override is wrong; the message is one line meant for the user."""


class _Invalid(Exception):
    """A checker's verdict: the value is not of the kind the key expects."""


class KeyProblem(Exception):
    """A problem at a dotted key, raised before we know if the file or an override caused it
    (also by the post-processors' ``validate``)."""

    def __init__(self, path: Sequence[str], message: str, also: Sequence[Sequence[str]] = ()):
        super().__init__(message)
        self.paths = [tuple(path), *map(tuple, also)]  # keys whose values may be to blame


# -- values in messages ------------------------------------------------------------------------

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
            "\r": "\\r"}


def _string(s: str) -> str:
    def esc(c):
        if c in _ESCAPES:
            return _ESCAPES[c]
        return f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c

    return '"' + "".join(esc(c) for c in s) + '"'


def _q(name: str) -> str:
    """A name from the user in quotes; escaped when it holds control characters."""
    return f"'{name}'" if name.isprintable() else _string(name)


def _key(k: str) -> str:
    return k if _BARE.fullmatch(k) else _string(k)


def _fmt(v) -> str:
    """``v`` in TOML syntax on one line, as a message quotes it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_fmt(x)}" for k, x in v.items()) + "}"
    if hasattr(v, "isoformat"):  # tomllib's dates and times
        return v.isoformat()
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _shown(v, limit: int = 60) -> str:
    """A value as quoted in an error message: TOML syntax, one line, not too long."""
    s = _fmt(v)
    return s if len(s) <= limit else s[: limit - 3] + "..."


# -- value kinds -------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Kind:
    """What a key holds: ``what`` completes "expected ...", ``check`` converts or raises."""

    what: str
    check: Callable[[Any], Any]


def _is_number(v) -> bool:
    # bool is an int in Python, but `nu = true` is a mistake, not 1.0
    return isinstance(v, int | float) and not isinstance(v, bool)


# Magnitudes past these make a mesh's areas and volumes (a length cubed, over up to 10^9
# cells) or a solver's coefficients under- or overflow a double: refused as input.
BIG = 1e30
TINY = 1e-30


def _number(lo: float | None = None, *, strict: bool = False, tiny: float = 0.0,
            big: float = BIG) -> _Kind:
    """A finite number above ``lo``, at most ``big`` in magnitude and, when ``tiny`` is set,
    at least ``tiny`` unless zero is allowed and given."""
    if lo is None:
        what = f"a number between -{big:g} and {big:g}"
    elif strict and lo == 0:
        what = f"a positive number from {tiny:g} to {big:g}" if tiny else \
            f"a positive number up to {big:g}"
    else:
        what = f"a number {'>' if strict else '>='} {lo:g}, at most {big:g}"

    def check(v):
        if not _is_number(v) or not math.isfinite(v) or abs(v) > big:
            raise _Invalid
        if lo is not None and (v <= lo if strict else v < lo):
            raise _Invalid
        if tiny and v and abs(v) < tiny:
            raise _Invalid
        return float(v)

    return _Kind(what, check)


def _integer(lo: int, hi: int = 2**31 - 1) -> _Kind:
    """An integer in [lo, hi]: every count has a ceiling, so that no input asks for a loop
    or an array without end (a million PISO correctors, 2**63 cells)."""
    def check(v):
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            raise _Invalid
        return v

    return _Kind(f"an integer from {lo} to {hi}", check)


def _boolean() -> _Kind:
    def check(v):
        if not isinstance(v, bool):
            raise _Invalid
        return v

    return _Kind("true or false", check)


def _choice(*options: str) -> _Kind:
    quoted = [_fmt(o) for o in options]
    what = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"

    def check(v):
        if not isinstance(v, str) or v not in options:
            raise _Invalid
        return v

    return _Kind(what, check)


def _vector(item: _Kind, plural: str, n: int = 3) -> _Kind:
    def check(v):
        if not isinstance(v, list | tuple) or len(v) != n:
            raise _Invalid
        return tuple(item.check(x) for x in v)

    return _Kind(f"a list of {n} {plural}", check)


_REQUIRED = object()


@dataclass(frozen=True)
class _Key:
    kind: _Kind
    default: Any = _REQUIRED


def _text(what: str) -> _Kind:
    def check(v):
        if not isinstance(v, str) or not v.strip():
            raise _Invalid
        return v

    return _Kind(what, check)


def _network() -> _Kind:
    def check(v):
        if not isinstance(v, str):
            raise _Invalid
        if v:
            from .study.model import ModelError, network

            try:
                network(v)
            except ModelError as e:
                raise _Invalid from e
        return v

    return _Kind("a network preset (gige-tcp, gige-lowlatency, infiniband-sdr, "
                 "infiniband-fdr) or a NetPIPE .out file", check)


def _pairs() -> _Kind:
    def check(v):
        if not isinstance(v, list | tuple):
            raise _Invalid
        out = []
        for pair in v:
            if (not isinstance(pair, list | tuple) or len(pair) != 2
                    or not all(isinstance(x, str) and x for x in pair)):
                raise _Invalid
            out.append(tuple(pair))
        return tuple(out)

    return _Kind('a list of patch-name pairs, e.g. [["left", "right"]]', check)


def _speeds() -> _Kind:
    """A table of rank number -> relative compute speed in (0, 1] (emulated slow cores)."""
    def check(v):
        if not isinstance(v, dict) or len(v) > 1 << 20:
            raise _Invalid
        out = {}
        for k, x in v.items():
            if not (isinstance(k, str) and k.isdigit() and len(k) < 8 and _is_number(x)
                    and 0.001 <= x <= 1.0):
                raise _Invalid
            out[str(int(k))] = float(x)
        return out

    return _Kind("a table of rank numbers to speeds from 0.001 to 1, e.g. {1 = 0.5}", check)


def _fraction() -> _Kind:
    def check(v):
        if not _is_number(v) or not 0.0 < v <= 1.0:
            raise _Invalid
        return float(v)

    return _Kind("a number in (0, 1]", check)


_POSITIVE = _number(0, strict=True, tiny=TINY)
_GRADING = _number(0, strict=True, tiny=1e-8, big=1e8)  # last/first cell size
_FRACTION = _fraction()
_REAL = _number()
_XYZ = _vector(_REAL, f"numbers between -{BIG:g} and {BIG:g}")

_MESH_TYPE = _Key(_choice("box", "step", "cylinder", "file"), "box")
# patch pairs joined by a translation (haloflow.mesh.periodic); any mesh type takes it
_PERIODIC = _Key(_pairs(), ())

# The most cells a mesh may have: rank 0 builds the whole mesh, with 32-bit-safe counts.
MAX_CELLS = 2**31 - 1

_SECTIONS = ("mesh", "initial", "physics", "boundary", "solver", "parallel", "output",
             "postprocess")


@functools.cache
def _schema() -> dict[str, Any]:
    """Keys, kinds and defaults of every section.  The names of halo strategies, solver
    algorithms and post-processors come from their registries, read on first use."""
    from .backends import BACKENDS
    from .linalg.methods import PRESSURE_METHODS
    from .parallel.halo import STAGING, STRATEGIES
    from .physics import SOLVERS

    return {
        "mesh": {  # a box; mesh.type = "file" has the keys of _MESH_FILE instead
            "type": _MESH_TYPE,
            "cells": _Key(_vector(_integer(1, MAX_CELLS), "integers from 1 to "
                                  f"{MAX_CELLS}")),
            "lengths": _Key(_vector(_POSITIVE, f"positive numbers from {TINY:g} to {BIG:g}"),
                            (1.0, 1.0, 1.0)),
            "origin": _Key(_XYZ, (0.0, 0.0, 0.0)),
            "grading": _Key(_vector(_GRADING, "positive numbers from 1e-08 to 1e+08"),
                            (1.0, 1.0, 1.0)),
            "periodic": _PERIODIC,
        },
        "initial": {  # the velocity and pressure at t = 0
            "type": _Key(_choice("rest", "uniform", "taylor_green", "taylor_green_3d"), "rest"),
            "U": _Key(_XYZ, (0.0, 0.0, 0.0)),  # uniform only
            "amplitude": _Key(_POSITIVE, 1.0),  # taylor_green(_3d) only: peak speed at t = 0
        },
        "physics": {
            "model": _Key(_choice("incompressible", "boussinesq", "les", "rans"),
                          "incompressible"),
            "nu": _Key(_POSITIVE),
        },
        "boundary": None,  # one table per mesh patch: see _boundary
        "solver": {
            "dt": _Key(_POSITIVE),
            "end_time": _Key(_POSITIVE),
            "steady_tol": _Key(_number(0), 1e-5),
            "n_correctors": _Key(_integer(1, 100), 2),
            "time_scheme": _Key(_choice("euler", "backward"), "euler"),  # PISO: backward = BDF2
            "convection": _Key(_choice("upwind", "linear", "linear-upwind", "cubic"),
                               "linear"),
            # physics.model = "boussinesq": the temperature's (default: as convection)
            "convection_T": _Key(_choice("upwind", "linear", "limited-linear", "van-leer"),
                                 None),
            "max_steps": _Key(_integer(0, 10**12), 0),
            "algorithm": _Key(_choice(*SOLVERS), "piso"),
            # where the linear solves run: "cuda" (a GPU, or numba's CUDA simulator) so far
            # solves the pressure and velocity there; the assembly stays on the host
            "backend": _Key(_choice(*BACKENDS), "cpu"),
            "gradient": _Key(_choice("gauss", "least-squares"), "gauss"),
            "laplacian": _Key(_choice("corrected", "uncorrected"), "corrected"),
            "n_nonorth_correctors": _Key(_integer(0, 100), 0),
            "residual_tol": _Key(_number(0), 1e-5),  # SIMPLE
            # initial residuals as ||b - A x|| / ||b|| or OpenFOAM's normalised 1-norm
            "residual_norm": _Key(_choice("relative", "normalised"), "relative"),
            "max_iterations": _Key(_integer(1, 10**9), 5000),  # SIMPLE
            "consistent": _Key(_boolean(), False),  # SIMPLEC
            "relaxation": {  # SIMPLE
                "U": _Key(_FRACTION, 0.7),
                "p": _Key(_FRACTION, 0.3),
                "T": _Key(_FRACTION, None),  # physics.model = "boussinesq" (default 1)
                "nu_tilde": _Key(_FRACTION, 0.7),  # physics.model = "rans" (Spalart-Allmaras)
                "max_dt": _Key(_number(0), 0.0),  # cap on the local pseudo time step (0: none)
            },
            "pressure": {
                "method": _Key(_choice(*PRESSURE_METHODS), "amg-cg"),
                "tol": _Key(_POSITIVE, 1e-8),
                "rel_tol": _Key(_number(0), 0.0),  # stop at rel_tol x the initial residual
                "final_rel_tol": _Key(_number(0), 0.0),  # on a PISO step's last solve
                "max_iter": _Key(_integer(1, 10**7), 5000),
                # the AMG's coarse correction: AMLI (3D) or K-cycle (2D), or one of them
                "cycle": _Key(_choice("auto", "K", "A", "V"), "auto"),
                # PISO's last solve starts where the correction before it stopped, moved along
                # the previous step's last change ("extrapolated"), or there ("previous")
                "guess": _Key(_choice("extrapolated", "previous"), "extrapolated"),
            },
            "momentum": {
                "method": _Key(_choice("bicgstab-jacobi", "bicgstab-sgs", "sgs"),
                               "bicgstab-jacobi"),
                "tol": _Key(_POSITIVE, 1e-8),
                "rel_tol": _Key(_number(0), 0.0),
                "max_iter": _Key(_integer(1, 10**7), 1000),
                "n_sweeps": _Key(_integer(1, 1000), 1),  # sgs: sweeps between residual checks
                # PISO's first guess: 2 U^n - U^(n-1) ("extrapolated") or U^n ("previous")
                "guess": _Key(_choice("extrapolated", "previous"), "extrapolated"),
            },
        },
        "parallel": {
            "decomposition": _Key(_choice("metis", "rcb", "rcb-planes", "simple"), "metis"),
            "halo": _Key(_choice(*STRATEGIES), "aggregated"),
            "staging": _Key(_choice(*STAGING), "host"),
            "threads": _Key(_integer(1, 4096), 1),
            # what a rank's idle threads do between parallel regions: sleep (safe when other
            # jobs share the cores), auto (spin briefly where the node's ranks x threads fit
            # its cores) or spin (for cores of its own): run/setup.py
            "thread_wait": _Key(_choice("sleep", "auto", "spin"), "sleep"),
            # parts onto ranks: block, nodes (two-level: nodes, then cores), permute
            "placement": _Key(_choice("block", "nodes", "permute"), "block"),
            "ranks_per_node": _Key(_integer(0, 1 << 20), 0),  # 0: MPI_COMM_TYPE_SHARED
            "balance": _Key(_choice("off", "time"), "off"),  # dynamic load balancing
            "balance_every": _Key(_integer(1, 10**9), 5),  # steps between measurements
            "max_imbalance": _Key(_number(1, strict=True, big=1e6), 1.10),  # max/mean load
            "emulate_speed": _Key(_speeds(), {}),  # {rank = relative speed}: a slower core
            # messages between nodes made as slow as this network (a preset or a .out file)
            "emulate_network": _Key(_network(), ""),
        },
        "output": {
            "fields": _Key(_boolean(), True),
            "plots": _Key(_boolean(), True),
            "log_every": _Key(_integer(1, 10**12), 20),
            "write_every": _Key(_integer(0, 10**12), 0),  # steps between field series files
            "checkpoint_every": _Key(_integer(0, 10**12), 0),  # steps between checkpoints
            "checkpoint_every_s": _Key(_number(0), 0.0),  # wall-clock seconds between them
            "checkpoint_keep": _Key(_integer(1, 10**6), 2),  # the newest K are kept
        },
        "postprocess": _postprocess(),
    }


def _postprocess() -> dict[str, _Key]:
    """Each registered post-processor's switch, then its settings (haloflow.post)."""
    from .post import POSTPROCESSORS, SETTINGS

    kinds = {"positive": _POSITIVE, "fraction": _FRACTION, "time": _number(0)}
    out = {}
    for name in POSTPROCESSORS:
        out[name] = _Key(_boolean(), False)
        out |= {k: _Key(kinds[kind], default) for k, (kind, default) in
                SETTINGS.get(name, {}).items()}
    return out


# A mesh read from a file (OpenFOAM polyMesh, Gmsh .msh): its patches come from the file.
_MESH_FILE = {
    "type": _MESH_TYPE,
    "file": _Key(_text("a path to a Gmsh .msh file, an OpenFOAM case or polyMesh directory "
                       "or a blockMeshDict")),
    "periodic": _PERIODIC,
}

# A 2D backward-facing step (haloflow.mesh.blocks.step): inlet channel of height h over a step
# of height S, then a channel of height S + h.  Defaults: Armaly et al.'s expansion 1.9423.
_MESH_STEP = {
    "type": _MESH_TYPE,
    "inlet_height": _Key(_POSITIVE, 1.0),
    "step_height": _Key(_POSITIVE, 0.9423),
    "upstream_length": _Key(_POSITIVE, 2.0),
    "downstream_length": _Key(_POSITIVE, 30.0),
    "cells_x": _Key(_vector(_integer(1, MAX_CELLS), "positive integers (upstream, "
                            "downstream)", 2)),
    "cells_y": _Key(_vector(_integer(1, MAX_CELLS), "positive integers (below the step, "
                            "inlet channel)", 2)),
    "grading": _Key(_GRADING, 1.0),  # last/first cell size along the downstream channel
    "periodic": _PERIODIC,
}

# The DFG 1995 cylinder channel (haloflow.mesh.cylinder): an O-grid around the cylinder.
_MESH_CYLINDER = {
    "type": _MESH_TYPE,
    "cells_around": _Key(_integer(8, 2**20), 64),  # a multiple of 4: checked in _mesh
    "grading": _Key(_GRADING, 5.0),  # last/first radial cell size of the O-grid
    "thickness": _Key(_POSITIVE, 0.1),  # the one cell in z
    "periodic": _PERIODIC,
}


@functools.cache
def _patch_schema() -> tuple[_Key, dict[str, _Kind]]:
    """A patch table's ``type`` key and the kinds of the values a patch may take; patch
    types and inlet profiles come from the boundary conditions' registry."""
    from .physics.patches import INLET_PROFILES as PROFILES
    from .physics.patches import PATCH_TYPES

    return _Key(_choice(*PATCH_TYPES)), {
        "U": _XYZ, "p": _REAL, "profile": _choice(*PROFILES),
        "T": _REAL, "T_gradient": _REAL, "heat_flux": _REAL,
        "table": _text("a path to a CSV profile table (header e.g. 'y,Ux,Uy,Uz')"),
        # random inflow fluctuations (haloflow.physics.inflow): rms per component / |U|
        "fluctuation": _vector(_number(0, big=10.0), "numbers from 0 to 10"),
        "fluctuation_alpha": _FRACTION, "seed": _integer(0)}


# an inlet's random fluctuations: off unless `fluctuation` is given (then alpha 0.1, seed 0)
_FLUCTUATION = {"fluctuation": None, "fluctuation_alpha": None, "seed": None}

# A patch table: `type` picks which of U, p and profile it takes, and their defaults.
_PATCH_TAKES = {
    "wall": {"U": (0.0, 0.0, 0.0)},  # wall velocity: a moving lid, say
    "inlet": {"U": _REQUIRED, "profile": "uniform", **_FLUCTUATION},  # U: the mean velocity
    "outlet": {"p": 0.0},
    "symmetry": {},
    "slip": {},
    "empty": {},
}


# an inlet with profile = "table": the velocity comes from the table, not from U
_INLET_TABLE_TAKES = {"profile": "uniform", "table": _REQUIRED, **_FLUCTUATION}


# -- the Case ----------------------------------------------------------------------------------

@dataclass
class Case:
    """A validated case with every default filled in.

    ``name`` and ``source`` say where it came from and take no part in ``==``: a case written
    out with :meth:`to_toml` and read back is the same case.
    """

    mesh: SimpleNamespace
    physics: SimpleNamespace
    boundary: dict[str, SimpleNamespace]
    solver: SimpleNamespace
    parallel: SimpleNamespace
    output: SimpleNamespace
    postprocess: SimpleNamespace
    initial: SimpleNamespace
    name: str = field(default="case", compare=False)
    source: Path | None = field(default=None, compare=False)

    def to_dict(self) -> dict:
        """The resolved case as plain TOML-ready data (lists, no ``None``)."""
        return {s: _plain(getattr(self, s)) for s in _SECTIONS}

    def to_toml(self) -> str:
        """The resolved case as a TOML file that :func:`load_case` reads back unchanged
        (floats written with repr: bit for bit)."""
        import tomli_w

        header = f"# haloflow case {_string(self.name)}, all defaults resolved\n\n"
        return header + tomli_w.dumps(self.to_dict())


def _plain(v):
    if isinstance(v, SimpleNamespace):
        v = vars(v)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items() if x is not None}
    if isinstance(v, tuple | list):
        return [_plain(x) for x in v]
    return v


# -- loading -----------------------------------------------------------------------------------

def builtin_cases() -> list[str]:
    """Names of the cases shipped in ``haloflow/cases``."""
    return sorted(p.stem for p in CASES_DIR.glob("*.toml"))


def load_case(source: str | Path, overrides: Iterable[str] = ()) -> Case:
    """Read a built-in case by name, or a TOML file by path, apply overrides and validate."""
    path, label = _locate(source)
    raw = _read(path, label)
    physics = raw.get("physics")
    file_model = physics.get("model") if isinstance(physics, dict) else None
    applied = []
    for text in overrides:
        keys, value = _parse_override(text)
        _apply(raw, keys, value, text)
        applied.append((keys, text))
    # a mesh file or profile table is relative to the case file, or to the working directory
    # if --set gave it
    by_override = frozenset(tuple(keys) for keys, _ in applied)
    _drop_switched_model_keys(raw, file_model, by_override)
    try:
        parts = _resolve(raw, path.parent, by_override)
    except KeyProblem as p:
        raise CaseError(f"{_blame(p.paths, applied, label)}: {p}") from None
    return Case(**parts, name=path.stem, source=path)


def _drop_switched_model_keys(raw: dict, file_model, by_override) -> None:
    """``--set physics.model`` away from the file's model drops the file's keys of that
    model (an LES case's closure and constants, say), which would otherwise be refused as
    keys of another model: switching the model from the command line takes the new model's
    defaults.  Keys that ``--set`` gave are kept, and checked."""
    physics = raw.get("physics")
    if not isinstance(physics, dict) or ("physics", "model") not in by_override \
            or physics.get("model") == file_model:
        return
    own = {"les": _LES, "rans": _RANS, "boussinesq": _THERMAL}.get(file_model, {})
    plain = _schema()["physics"]
    for k in [k for k in physics if k in own and k not in plain]:
        if ("physics", k) not in by_override:
            del physics[k]


def _locate(source: str | Path) -> tuple[Path, str]:
    """The file to read and how to name it in messages."""
    path = Path(source)
    if path.is_file():
        return path, str(source)
    known = f"built-in cases: {', '.join(builtin_cases()) or 'none'}"
    if isinstance(source, str) and _BARE.fullmatch(source):
        builtin = CASES_DIR / f"{source}.toml"
        if builtin.is_file():
            return builtin, builtin.name
        raise CaseError(f"{source}: no such built-in case or file ({known})")
    if path.exists():
        raise CaseError(f"{source}: not a case file ({known})")
    raise CaseError(f"{source}: no such case file ({known})")


MAX_CASE_BYTES = 1 << 24  # a case file is a page of settings, never megabytes


def _read(path: Path, label: str) -> dict:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_CASE_BYTES + 1)
        if len(data) > MAX_CASE_BYTES:
            raise CaseError(f"{label}: larger than {MAX_CASE_BYTES >> 20} MiB; expected a "
                            "case file (TOML settings)")
        raw = tomllib.loads(data.decode("utf-8"))
        if _too_deep(raw):
            raise RecursionError
        return raw
    except RecursionError:
        raise CaseError(f"{label}: arrays or tables nested too deeply") from None
    except tomllib.TOMLDecodeError as e:
        # tomllib ends its message with "(at line L, column C)"; lead with the line instead
        msg = str(e)
        m = re.search(r"\s*\(at line (\d+), column (\d+)\)$", msg)
        if m:
            msg = f"line {m[1]}: {msg[: m.start()]} (column {m[2]})"
        raise CaseError(f"{label}: {msg}") from None
    except UnicodeDecodeError:
        raise CaseError(f"{label}: not a UTF-8 text file") from None
    except OSError as e:
        raise CaseError(f"{label}: cannot read ({e.strerror})") from None


_BARE = re.compile(r"[A-Za-z0-9_-]+")
MAX_DEPTH = 32  # tables and arrays within each other: a case needs 4


def _too_deep(value) -> bool:
    """Nested deeper than MAX_DEPTH (checked without recursion: messages and checks that
    walk a value recursively must never meet one deep enough to exhaust the stack)."""
    level = [value]
    for _ in range(MAX_DEPTH + 1):
        level = [x for v in level for x in (v.values() if isinstance(v, dict) else
                                            v if isinstance(v, list) else ())]
        if not level:
            return False
    return True


def _parse_override(text: str) -> tuple[tuple[str, ...], Any]:
    """``"solver.pressure.tol=1e-9"`` -> (("solver", "pressure", "tol"), 1e-9)."""
    key, eq, value = text.partition("=")
    keys = tuple(k.strip() for k in key.split("."))
    if not eq or len(keys) < 2 or not all(_BARE.fullmatch(k) for k in keys):
        raise CaseError(f"{_set(text)}: expected section.key=VALUE, e.g. --set solver.dt=0.01")
    value = value.strip()
    try:
        parsed = tomllib.loads("v = " + value)["v"]
        if _too_deep(parsed):
            raise RecursionError
        return keys, parsed
    except RecursionError:
        raise CaseError(f"{_set(text)}: the value is nested too deeply") from None
    except tomllib.TOMLDecodeError:
        return keys, value  # not a TOML value: a bare word, as in parallel.halo=packed


def _apply(raw: dict, keys: tuple[str, ...], value, text: str):
    table = raw
    for i, k in enumerate(keys[:-1]):
        table = table.setdefault(k, {})
        if not isinstance(table, dict):
            raise CaseError(f"{_set(text)}: {'.'.join(keys[: i + 1])} is not a table")
    table[keys[-1]] = value


def _blame(paths: list[tuple[str, ...]], applied, label: str) -> str:
    """The last override touching one of ``paths`` caused the problem; otherwise the file."""
    for keys, text in reversed(applied):
        for path in paths:
            n = min(len(keys), len(path))
            if keys[:n] == path[:n]:
                return _set(text)
    return label


def _set(text: str) -> str:
    """An override as named in messages, kept on one line and not too long."""
    shown = text if text.isprintable() else _string(text)
    return f"--set {shown if len(shown) <= 120 else shown[:117] + '...'}"


# -- validation --------------------------------------------------------------------------------

def _resolve(raw: dict, base: Path = Path("."), by_override=frozenset()) -> dict:
    """Validate every section; file paths are relative to ``base`` (the case file's folder),
    or to the working directory for keys set by ``--set`` (``by_override``)."""

    def base_of(keys):
        return Path.cwd() if tuple(keys) in by_override else base

    _known(raw, _SECTIONS, ())
    out = {}
    for section in _SECTIONS:
        if section == "mesh":
            out[section] = _mesh(raw.get(section, {}), base_of(("mesh", "file")))
        elif section == "physics":
            out[section] = _physics(raw.get(section, {}))
        elif section == "boundary":
            out[section] = _boundary(raw.get(section, {}), out["mesh"], base_of,
                                     out["physics"].model)
        elif section == "solver":
            out[section] = _solver(raw.get(section, {}), out["physics"].model)
        else:
            out[section] = _table(raw.get(section, {}), _schema()[section], (section,))
    from .post import enabled

    case = SimpleNamespace(**out)
    for post in enabled(case):
        post.validate(case)
    _initial(case)
    _needs_wall(case)
    _transient_inflow(case)
    return out


def _transient_inflow(case):
    """Inflow fluctuations change the inlet every time step: a steady solve has none."""
    for name, b in case.boundary.items():
        if getattr(b, "fluctuation", None) is not None and case.solver.algorithm != "piso":
            raise KeyProblem(("boundary", name, "fluctuation"), f"boundary.{name}.fluctuation: "
                             'needs solver.algorithm = "piso" (a steady solve has no time '
                             "steps to fluctuate over)", also=[("solver", "algorithm")])


def _needs_wall(case):
    """Spalart-Allmaras measures the distance to the nearest wall: a RANS case needs one."""
    if case.physics.model == "rans" and not any(
            b.type == "wall" for b in case.boundary.values()):
        raise KeyProblem(("physics", "model"), 'physics.model = "rans": the Spalart-Allmaras '
                         "closure needs a patch of type \"wall\" (its distance to the wall)",
                         also=[("boundary",)])


def _initial(case):
    """Taylor-Green vortices fill a square box (the 3D vortex a cube): one period each way."""
    init, mesh = case.initial, case.mesh
    if init.type == "taylor_green_3d" and (mesh.type != "box" or len(set(mesh.lengths)) != 1):
        raise KeyProblem(("initial", "type"), 'initial.type: "taylor_green_3d" needs mesh.type '
                         '= "box" with three equal lengths (a cube of side 2 pi L)',
                         also=[("mesh", "lengths")])
    if init.type == "taylor_green" and (mesh.type != "box"
                                        or mesh.lengths[0] != mesh.lengths[1]):
        raise KeyProblem(("initial", "type"), 'initial.type: "taylor_green" needs mesh.type = '
                         '"box" with lengths[0] = lengths[1] (one period of the vortices each '
                         "way)", also=[("mesh", "lengths")])


def _dotted(path: Sequence[str]) -> str:
    """A key path as a message names it: parts that are not bare words quoted and escaped,
    so a key holding a newline or a terminal escape cannot break or colour the line."""
    return ".".join(_key(k) for k in path)


def _known(raw: dict, allowed: Sequence[str], path: tuple[str, ...]):
    """Reject unknown keys first: a typo explains a "missing" key better than the miss."""
    for k in raw:
        if k not in allowed:
            what = "section" if not path else "key"
            msg = f"unknown {what} '{_dotted(path + (k,))}' (expected one of: {', '.join(allowed)})"
            close = difflib.get_close_matches(k, allowed, n=1)
            if close:
                msg += f"; did you mean '{close[0]}'?"
            raise KeyProblem(path + (k,), msg)


def _is_table(raw, path: tuple[str, ...]):
    if not isinstance(raw, dict):
        raise KeyProblem(path, f"{_dotted(path)}: expected a table, got {_shown(raw)}")


def _table(raw, schema: dict, path: tuple[str, ...]) -> SimpleNamespace:
    _is_table(raw, path)
    _known(raw, list(schema), path)
    out = {}
    for k, spec in schema.items():
        if isinstance(spec, dict):
            out[k] = _table(raw.get(k, {}), spec, path + (k,))
        else:
            out[k] = _value(raw, k, spec, path)
    return SimpleNamespace(**out)


def _value(raw: dict, k: str, key: _Key, path: tuple[str, ...]):
    where = path + (k,)
    if k not in raw:
        if key.default is _REQUIRED:
            raise KeyProblem(where, f"{_dotted(where)}: required key missing "
                                    f"(expected {key.kind.what})")
        if key.default is None:  # optional, no default
            return None
        return key.kind.check(key.default)
    try:
        return key.kind.check(raw[k])
    except _Invalid:
        raise KeyProblem(where, f"{_dotted(where)}: expected {key.kind.what}, "
                                f"got {_shown(raw[k])}") from None


def _mesh(raw, base: Path) -> SimpleNamespace:
    """The [mesh] table: its keys depend on its type; a file's path is made absolute."""
    path = ("mesh",)
    _is_table(raw, path)
    kind = _value(raw, "type", _MESH_TYPE, path)
    schema = {"file": _MESH_FILE, "step": _MESH_STEP, "cylinder": _MESH_CYLINDER}.get(
        kind, _schema()["mesh"])
    for k in raw:
        if k not in schema and k in {**_schema()["mesh"], **_MESH_FILE, **_MESH_STEP,
                                         **_MESH_CYLINDER}:
            raise KeyProblem(path + (k,), f"mesh.{k}: not a key of a mesh of type {_fmt(kind)} "
                                          f"(its keys are: {', '.join(schema)})",
                             also=[path + ("type",)])
    out = _table(raw, schema, path)
    if kind == "cylinder" and out.cells_around % 4:
        raise KeyProblem(path + ("cells_around",), "mesh.cells_around: expected a multiple of 4 "
                         f"(one O-grid block per quarter of the cylinder), got {out.cells_around}")
    n = generated_cells(out)
    if n > MAX_CELLS:
        key = {"box": "cells", "step": "cells_x"}.get(kind, "cells_around")
        raise KeyProblem(path + (key,), f"mesh.{key}: {_shown(getattr(out, key))} makes "
                         f"{'up to ' * (kind == 'cylinder')}{n} cells; at most {MAX_CELLS} are "
                         "allowed",
                         also=[path + ("cells_y",)] if kind == "step" else [])
    if kind == "file":
        if "\0" in out.file:
            raise KeyProblem(path + ("file",), f"mesh.file: {_shown(out.file)} holds a null "
                             "character; expected a path")
        try:
            where = (base / Path(out.file).expanduser()).resolve()
            exists = where.exists()
        except (OSError, RuntimeError, ValueError) as e:
            raise KeyProblem(path + ("file",), f"mesh.file: {_shown(out.file)} is not a usable "
                             f"path ({e})") from None
        if not exists:
            raise KeyProblem(path + ("file",), f"mesh.file: no such file or directory "
                                               f"{_shown(out.file)} (looked for {where})")
        out.file = str(where)
    return out


# physics.model = "boussinesq": temperature and buoyancy (haloflow.physics.energy)
_THERMAL = {
    "nu": _Key(_POSITIVE, None),  # or Ra: one of the two
    "Ra": _Key(_POSITIVE, None),  # g beta delta_T length^3 / (nu alpha), alpha = nu / Pr
    "Pr": _Key(_POSITIVE, 0.71),
    "beta": _Key(_POSITIVE, 1.0),  # thermal expansion coefficient
    "T_ref": _Key(_REAL, 0.0),  # where rhok = 1 - beta (T - T_ref) is 1
    "T_init": _Key(_REAL, None),  # temperature at t = 0 (default T_ref)
    "g": _Key(_XYZ, (0.0, -1.0, 0.0)),
    "length": _Key(_POSITIVE, 1.0),  # Ra's length and temperature difference
    "delta_T": _Key(_POSITIVE, 1.0),
}


# physics.model = "les": an eddy-viscosity closure (haloflow.physics.closures), its constants
# with the published defaults (OpenFOAM's: Ck, Ce of Yoshizawa's model, Cw of WALE)
_LES = {
    "closure": _Key(_choice("smagorinsky", "wale", "kEqn", "dynamicSmagorinsky"), "wale"),
    "Ck": _Key(_POSITIVE, 0.094),
    "Ce": _Key(_POSITIVE, 1.048),
    "Cw": _Key(_POSITIVE, 0.325),  # wale
    "k_init": _Key(_number(0), None),  # kEqn: k at t = 0 (default: local equilibrium)
    "k_inlet": _Key(_number(0), 0.0),  # kEqn: k at inlets and on inflow through outlets
    # van Driest's damping of the filter width near walls (OpenFOAM's vanDriest delta)
    "van_driest": _Key(_boolean(), False),
    "Aplus": _Key(_POSITIVE, 26.0),
    "kappa": _Key(_POSITIVE, 0.41),
    "Cdelta": _Key(_POSITIVE, 0.158),
}


# physics.model = "rans": Spalart-Allmaras (haloflow.physics.closures.spalart_allmaras), its
# constants with the published defaults (Spalart & Allmaras 1994, as the NASA Turbulence
# Modeling Resource lists them; cw1 follows from them)
_RANS = {
    "closure": _Key(_choice("spalart_allmaras"), "spalart_allmaras"),
    "cb1": _Key(_POSITIVE, 0.1355),
    "cb2": _Key(_POSITIVE, 0.622),
    "sigma": _Key(_POSITIVE, 2.0 / 3.0),
    "kappa": _Key(_POSITIVE, 0.41),
    "cw2": _Key(_POSITIVE, 0.3),
    "cw3": _Key(_POSITIVE, 2.0),
    "cv1": _Key(_POSITIVE, 7.1),
    "nu_tilde_ratio": _Key(_POSITIVE, 3.0),  # nu-tilde / nu on inflow (TMR: 3)
}


def _rans(raw, path, plain) -> SimpleNamespace:
    """The [physics] table of a RANS case: the plain keys and the closure's."""
    for k in raw:
        if k not in plain and k not in _RANS and (k in _THERMAL or k in _LES):
            raise KeyProblem(path + (k,), f"physics.{k}: not a key of physics.model = "
                             f'"rans" (its keys: {", ".join([*plain, *_RANS])})',
                             also=[path + ("model",)])
    return _table(raw, {**plain, **_RANS}, path)


def _physics(raw) -> SimpleNamespace:
    """The [physics] table; a Boussinesq case takes the thermal keys and either ``nu`` or
    ``Ra`` (then ``nu = sqrt(|g| beta delta_T length^3 Pr / Ra)``), an LES the keys of its
    closure."""
    path = ("physics",)
    _is_table(raw, path)
    plain = _schema()["physics"]
    model = _value(raw, "model", plain["model"], path)
    if model == "rans":
        return _rans(raw, path, plain)
    for k in raw:
        if k in _RANS and k not in _LES:
            raise KeyProblem(path + (k,), f"physics.{k}: a RANS key, not used by "
                             f'physics.model = {_fmt(model)} (use model = "rans")',
                             also=[path + ("model",)])
    if model != "les":
        for k in raw:
            if k in _LES:
                raise KeyProblem(path + (k,), f"physics.{k}: an LES key, not used by "
                                 f'physics.model = {_fmt(model)} (use model = "les")',
                                 also=[path + ("model",)])
    if model == "les":
        for k in raw:
            if k in _THERMAL and k not in plain:
                raise KeyProblem(path + (k,), f"physics.{k}: a thermal key, not used by "
                                 f'physics.model = "les" (use model = "boussinesq")',
                                 also=[path + ("model",)])
        return _table(raw, {**plain, **_LES}, path)
    if model != "boussinesq":
        for k in raw:
            if k in _THERMAL and k not in plain:
                raise KeyProblem(path + (k,), f"physics.{k}: a thermal key, not used by "
                                 f'physics.model = {_fmt(model)} (use model = "boussinesq")',
                                 also=[path + ("model",)])
        return _table(raw, plain, path)
    out = _table(raw, {"model": plain["model"], **_THERMAL}, path)
    g = math.sqrt(sum(x * x for x in out.g))
    if out.Ra is not None:
        nu = math.sqrt(g * out.beta * out.delta_T * out.length**3 * out.Pr / out.Ra)
        if out.nu is not None and not math.isclose(out.nu, nu, rel_tol=1e-12):
            raise KeyProblem(path + ("nu",), f"physics.nu: give nu or Ra, not both (Ra = "
                             f"{out.Ra:g} makes nu = {nu!r})", also=[path + ("Ra",)])
        out.nu = nu
    elif out.nu is None:
        raise KeyProblem(path + ("nu",), "physics.nu: required key missing (expected "
                         f"{_POSITIVE.what}, or physics.Ra)")
    if out.T_init is None:
        out.T_init = out.T_ref
    return out


def _solver(raw, model: str = "incompressible") -> SimpleNamespace:
    """The [solver] table: SIMPLE is steady, so ``dt`` and ``end_time`` are optional there
    (and unused); the temperature's keys only with ``physics.model = "boussinesq"``."""
    path = ("solver",)
    _is_table(raw, path)
    schema = _schema()["solver"]
    _known(raw, list(schema), path)  # a typo explains more than a bad algorithm
    algorithm = _value(raw, "algorithm", schema["algorithm"], path)
    if algorithm == "simple":
        schema = {k: _Key(v.kind, None) if k in ("dt", "end_time") else v
                  for k, v in schema.items()}
    out = _table(raw, schema, path)
    thermal = [("convection_T",)] if out.convection_T is not None else []
    thermal += [("relaxation", "T")] if out.relaxation.T is not None else []
    if model != "boussinesq" and thermal:
        raise KeyProblem(path + thermal[0], f"{_dotted(path + thermal[0])}: a thermal key, "
                         f'not used by physics.model = {_fmt(model)} (use model = '
                         '"boussinesq")', also=[("physics", "model")])
    if out.consistent and out.relaxation.U == 1.0:
        raise KeyProblem(path + ("relaxation", "U"), "solver.relaxation.U: must be below 1 with "
                         "consistent = true (SIMPLEC divides by A - sum|a_nb|, which vanishes "
                         "without relaxation)", also=[path + ("consistent",)])
    return out


def _patches(mesh: SimpleNamespace) -> tuple[str, ...]:
    """The mesh's patch names, known without building the mesh (a file's: read from it),
    less the periodic ones, which become internal faces."""
    names = _mesh_patches(mesh)
    where = ("mesh", "periodic")
    seen: list[str] = []
    for pair in mesh.periodic:
        for name in pair:
            if name not in names:
                raise KeyProblem(where, f"mesh.periodic: the mesh has no patch {_q(name)} "
                                        f"(its patches are: {', '.join(names)})")
            if name in seen:
                raise KeyProblem(where, f"mesh.periodic: patch {_q(name)} is in more than "
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
    from .mesh import MeshError, patch_names  # numpy only: no numba on this path

    try:
        return tuple(patch_names(mesh.file))
    except MeshError as e:
        raise KeyProblem(("mesh", "file"), f"mesh.file: {e}") from None


def _boundary(raw, mesh: SimpleNamespace, base_of=lambda keys: Path("."),
              model: str = "incompressible") -> dict[str, SimpleNamespace]:
    path = ("boundary",)
    _is_table(raw, path)
    patches = _patches(mesh)
    periodic = {n for pair in mesh.periodic for n in pair}
    for name in raw:
        at = _dotted(path + (name,))
        if name in periodic:
            raise KeyProblem(path + (name,), f"{at}: patch {_q(name)} is periodic "
                                             "(mesh.periodic) and takes no boundary conditions; "
                                             f"remove [{at}]",
                             also=[("mesh", "periodic")])
        if name not in patches:
            raise KeyProblem(path + (name,), f"{at}: the mesh has no patch {_q(name)} "
                                             f"(its patches are: {', '.join(patches)})")
    out = {}
    for name in patches:
        at = _dotted(path + (name,))
        if name not in raw:
            raise KeyProblem(path + (name,), f"{at}: patch {_q(name)} of the mesh has no "
                                             f"boundary conditions (add [{at}] with type = ...)")
        out[name] = _patch(raw[name], path + (name,), base_of(path + (name, "table")))
        _temperature(raw[name], out[name], path + (name,), model)
    return out


def _temperature(raw: dict, out: SimpleNamespace, path: tuple[str, ...], model: str) -> None:
    """A patch's temperature condition: one of T, T_gradient, heat_flux; walls and inlets
    of a Boussinesq case need one, an incompressible case takes none."""
    from .physics.patches import NEEDS_TEMPERATURE, TEMPERATURE_KEYS

    given = [k for k in TEMPERATURE_KEYS if getattr(out, k) is not None]
    at = _dotted(path)
    if model != "boussinesq":
        if given:
            raise KeyProblem(path + (given[0],), f"{at}.{given[0]}: a thermal key, not used by "
                             f'physics.model = {_fmt(model)} (use model = "boussinesq")',
                             also=[("physics", "model")])
        return
    if len(given) > 1:
        raise KeyProblem(path + (given[1],), f"{at}: give one temperature condition, not "
                         f"{' and '.join(given)}", also=[path + (given[0],)])
    if not given and out.type in NEEDS_TEMPERATURE:
        raise KeyProblem(path, f"{at}: a {out.type} patch needs a temperature condition "
                         "(T = value, T_gradient = dT/dn or heat_flux = alpha dT/dn; "
                         "T_gradient = 0 is adiabatic)")
    if given and out.type == "empty":
        raise KeyProblem(path + (given[0],), f"{at}.{given[0]}: an empty patch takes no "
                         "temperature condition")


def _patch(raw, path: tuple[str, ...], base: Path = Path(".")) -> SimpleNamespace:
    _is_table(raw, path)
    type_key, values = _patch_schema()
    _known(raw, ["type", *values], path)
    kind = _value(raw, "type", type_key, path)
    takes = _PATCH_TAKES[kind]
    if kind == "inlet" and raw.get("profile") == "table":
        takes = _INLET_TABLE_TAKES
        if "U" in raw:
            raise KeyProblem(path + ("U",), f"{_dotted(path + ('U',))}: not used with profile = "
                             '"table" (the table gives the velocity); remove it',
                             also=[path + ("profile",)])
    elif "table" in raw and kind == "inlet":
        raise KeyProblem(path + ("table",), f"{_dotted(path + ('table',))}: needs profile = "
                         '"table"', also=[path + ("profile",)])
    takes = {**takes, "T": None, "T_gradient": None, "heat_flux": None}  # see _temperature
    out = {"type": kind}
    for k, value_kind in values.items():
        where = path + (k,)
        if k in takes:
            try:
                out[k] = _value(raw, k, _Key(value_kind, takes[k]), path)
            except KeyProblem as p:  # a missing inlet U may be due to a changed type
                raise KeyProblem(where, str(p), also=[path + ("type",)]) from None
        elif k in raw:
            who = " and ".join(t for t, ks in _PATCH_TAKES.items() if k in ks) or \
                'inlet (with profile = "table")'
            raise KeyProblem(where, f"{_dotted(where)}: not allowed for a patch of type "
                                    f"{_fmt(kind)} (only {who} patches take {k})",
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
                raise KeyProblem(path + (k,), f"{_dotted(path + (k,))}: needs "
                                 f"{_dotted(path + ('fluctuation',))} (the rms fluctuation "
                                 "per component, a fraction of |U|)")
        return
    from .physics.patches import INFLOW_ALPHA as ALPHA
    from .physics.patches import INFLOW_SEED as SEED

    out["fluctuation"] = tuple(float(x) for x in out["fluctuation"])
    out["fluctuation_alpha"] = ALPHA if out["fluctuation_alpha"] is None else \
        out["fluctuation_alpha"]
    out["seed"] = SEED if out["seed"] is None else out["seed"]


def _profile_table(name: str, where: tuple[str, ...], base: Path) -> str:
    """The table's absolute path, once it has been read and checked."""
    from .io.profile_table import TableError, read_table

    p = (base / Path(name).expanduser()).resolve()
    try:
        read_table(p)
    except TableError as e:
        raise KeyProblem(where, f"{_dotted(where)}: {e}") from None
    return str(p)
