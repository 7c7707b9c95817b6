"""The keys of each case section and the rules between sections (a closure's keys only
with its model, an initial field the mesh can take, a wall for the wall distance).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ..limits import generated_cells
from .postprocess import _postprocess
from .schema import (
    _GRADING,
    _MESH_TYPE,
    _PERIODIC,
    _POSITIVE,
    _REAL,
    _RELAXATION,
    _XYZ,
    BIG,
    MAX_CELLS,
    TINY,
    KeyProblem,
    _boolean,
    _choice,
    _dotted,
    _fmt,
    _integer,
    _is_table,
    _Key,
    _known,
    _network,
    _number,
    _shown,
    _speeds,
    _table,
    _text,
    _value,
    _vector,
)

_SECTIONS = ("mesh", "initial", "physics", "boundary", "solver", "parallel", "output",
             "postprocess")


def _openfoam_keys() -> dict:
    """Solver keys that make haloflow discretise as OpenFOAM does where it chooses otherwise
    (docs/validation.md, the elbow): linear convection all in the matrix (``Gauss linear``,
    no deferred part), PISO's (Euler) ``ddtCorr`` in the predicted fluxes, and the explicit
    ``div(nu dev2(T(grad U)))`` of OpenFOAM's laminar model (simpleFoam, pimpleFoam)."""
    return {"implicit_convection": _Key(_boolean(), False),
            "ddt_corr": _Key(_boolean(), False),
            "transpose_stress": _Key(_boolean(), False)}


@functools.cache
def _schema() -> dict[str, Any]:
    """Keys, kinds and defaults of every section.  The names of halo strategies, solver
    algorithms and post-processors come from their registries, read on first use."""
    from ..backends import BACKENDS
    from ..linalg.methods import PRESSURE_METHODS
    from ..parallel.halo import STAGING, STRATEGIES
    from ..physics import SOLVERS

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
            "model": _Key(_choice("incompressible", "boussinesq", "les", "rans"), "incompressible"),
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
            **_openfoam_keys(),
            "relaxation": {  # SIMPLE
                "U": _Key(_RELAXATION, 0.7),
                "p": _Key(_RELAXATION, 0.3),
                "T": _Key(_RELAXATION, None),  # physics.model = "boussinesq" (default 1)
                "nu_tilde": _Key(_RELAXATION, 0.7),  # physics.model = "rans" (Spalart-Allmaras)
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
                # coarse levels with fewer rows per rank move onto fewer ranks (0: never)
                "agglomerate": _Key(_integer(0, 10**9), 0),
                "aggregation": _Key(_choice("global", "local"), "global"),  # serial's or own
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
            "decomposition": _Key(_choice("metis", "rcb", "rcb-planes", "grid", "simple"), "metis"),
            "halo": _Key(_choice(*STRATEGIES), "aggregated"),
            "staging": _Key(_choice(*STAGING), "host"),
            "threads": _Key(_integer(1, 4096), 1),
            # what a rank's idle threads do between parallel regions: sleep (safe when other
            # jobs share the cores), auto (spin briefly where the node's ranks x threads fit
            # its cores) or spin (for cores of its own): run/setup.py
            "thread_wait": _Key(_choice("sleep", "auto", "spin"), "auto"),
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
            "timeline": _Key(_boolean(), False),  # timeline.json: each rank's timed blocks
            "timeline_steps": _Key(_integer(1, 1000), 20),  # of the first N steps
        },
        "postprocess": _postprocess(),
    }


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
    "wake_refinement": _Key(_integer(1, 8), 1),  # the downstream quarter's rays, x others'
    "thickness": _Key(_POSITIVE, 0.1),  # the one cell in z
    "periodic": _PERIODIC,
}


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
        out = _table(raw, {**plain, **_LES}, path)
        if "k_init" in raw and out.closure != "kEqn":  # the one closure with a k to start
            raise KeyProblem(path + ("k_init",), "physics.k_init: a key of the kEqn closure, "
                             f"not used by physics.closure = {_fmt(out.closure)}",
                             also=[path + ("closure",)])
        return out
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
        if not nu >= TINY:
            raise KeyProblem(path + ("g",), f"physics.Ra: a Rayleigh number of {out.Ra:g} "
                             f"with |g| = {g:g}, beta = {out.beta:g} and delta_T = "
                             f"{out.delta_T:g} makes nu = {nu:g}: give a nonzero gravity "
                             "physics.g, or physics.nu instead of Ra", also=[path + ("Ra",)])
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
    if out.implicit_convection and out.convection != "linear":
        raise KeyProblem(path + ("implicit_convection",), "solver.implicit_convection: needs "
                         f'convection = "linear" (not {_fmt(out.convection)})',
                         also=[path + ("convection",)])
    if out.transpose_stress and model not in ("incompressible", "boussinesq"):
        raise KeyProblem(path + ("transpose_stress",), "solver.transpose_stress: needs laminar "
                         'flow (physics.model = "incompressible" or "boussinesq", not '
                         f"{_fmt(model)}: a closure has its own)", also=[("physics", "model")])
    if out.ddt_corr and (algorithm != "piso" or out.time_scheme != "euler"):
        raise KeyProblem(path + ("ddt_corr",), 'solver.ddt_corr: needs algorithm = "piso" and '
                         f'time_scheme = "euler" (not {_fmt(algorithm)}, '
                         f"{_fmt(out.time_scheme)})", also=[path + ("time_scheme",)])
    return out
