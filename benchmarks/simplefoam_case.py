"""A built-in steady case as an OpenFOAM case for simpleFoam: haloflow's own mesh (its cell
order kept, internal faces in OpenFOAM's upper-triangular order), haloflow's own inlet
values, laminar, the case's nu, SIMPLE or SIMPLEC (``solver.consistent``) and relaxation, its
convection (Gauss upwind, linear or linearUpwind), solved to residuals of 1e-9 (the cylinder also
with OpenFOAM's ``forces`` on its wall).

    .venv/bin/python benchmarks/simplefoam_case.py CASE /tmp/out PITZDAILY [KEY=VALUE ...]
    cd /tmp/out && source /usr/share/openfoam/etc/bashrc && simpleFoam

CASE: backward_step, cylinder or pitzdaily.  PITZDAILY: a copy of OpenFOAM's simpleFoam/pitzDaily
tutorial, whose system/ files are taken and edited (OpenFOAM v1912).  KEY=VALUE: the case's
keys as ``--set`` takes them; the case's gradient (Gauss or least squares) is OpenFOAM's
``linear`` or ``leastSquares``.  The tests that use the
answers (tests/validation/test_backward_step.py, test_cylinder.py) say how they are read off.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import numpy as np
from cylinder_openfoam import write_polymesh
from mpi4py import MPI
from openfoam import HEAD

from haloflow.case import load_case
from haloflow.mesh import from_case
from haloflow.parallel import halo
from haloflow.parallel.local import build_local
from haloflow.physics import solver_from_case

FOAM_KIND = {"wall": "wall", "empty": "empty"}  # haloflow's boundary type: polyMesh's
DIV_U = {"upwind": "upwind", "linear": "linear",  # solver.convection
         "linear-upwind": "linearUpwind grad(U)"}


def head(cls: str, obj: str) -> str:
    return HEAD.format(cls=cls, obj=obj)


def vec(v) -> str:
    return f"({float(v[0])!r} {float(v[1])!r} {float(v[2])!r})"


def field_files(case, mesh, s, out: Path) -> None:
    """0/U and 0/p from the case's boundary types; the inlets take haloflow's own values."""
    u, p = [], []
    for patch in mesh.patches:
        kind = case.boundary[patch.name].type
        if kind == "inlet":
            b0 = patch.start - mesh.n_internal
            values = s.bc.u_value[b0:b0 + patch.size]
            u.append(f"    {patch.name} {{ type fixedValue; value nonuniform List<vector> "
                     f"{patch.size}\n(\n" + "".join(vec(v) + "\n" for v in values) + "); }")
            p.append(f"    {patch.name} {{ type zeroGradient; }}")
        elif kind == "outlet":
            u.append(f"    {patch.name} {{ type zeroGradient; }}")
            p.append(f"    {patch.name} {{ type fixedValue; value uniform 0; }}")
        elif kind in ("wall", "empty"):
            wall = kind == "wall"
            u.append(f"    {patch.name} {{ type {'noSlip' if wall else 'empty'}; }}")
            p.append(f"    {patch.name} {{ type {'zeroGradient' if wall else 'empty'}; }}")
        else:
            raise SystemExit(f"{patch.name}: boundary type {kind} is not mapped")
    (out / "0").mkdir(exist_ok=True)
    (out / "0" / "U").write_text(head("volVectorField", "U") + (
        "dimensions [0 1 -1 0 0 0 0];\ninternalField uniform (0 0 0);\nboundaryField\n{\n"
        + "\n".join(u) + "\n}\n"))
    (out / "0" / "p").write_text(head("volScalarField", "p") + (
        "dimensions [0 2 -2 0 0 0 0];\ninternalField uniform 0;\nboundaryField\n{\n"
        + "\n".join(p) + "\n}\n"))


def main(name: str, out: Path, tutorial: Path, sets: list[str]) -> None:
    case = load_case(name, sets)
    mesh = from_case(case.mesh)
    kinds = {p.name: FOAM_KIND.get(case.boundary[p.name].type, "patch") for p in mesh.patches}
    write_polymesh(mesh, out / "constant" / "polyMesh", kinds)
    lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    s = solver_from_case(lm, case, halo.make("packed", lm, MPI.COMM_SELF), MPI.COMM_SELF)
    field_files(case, mesh, s, out)
    const = out / "constant"
    (const / "transportProperties").write_text(
        head("dictionary", "transportProperties")
        + f"transportModel Newtonian;\nnu {case.physics.nu!r};\n")
    for name in ("momentumTransport", "turbulenceProperties"):
        (const / name).write_text(head("dictionary", name) + "simulationType laminar;\n")
    shutil.copytree(tutorial / "system", out / "system", dirs_exist_ok=True)
    sch = out / "system" / "fvSchemes"
    div = DIV_U.get(case.solver.convection)
    if div is None:
        raise SystemExit(f"solver.convection = {case.solver.convection}: not mapped")
    text = re.sub(r"div\(phi,U\)\s+[^;]*;", f"div(phi,U) bounded Gauss {div};", sch.read_text())
    if case.solver.gradient == "least-squares":
        text = re.sub(r"(gradSchemes\s*\{[^}]*default\s+)[^;]*;", r"\1leastSquares;", text)
    sch.write_text(text)
    sol = out / "system" / "fvSolution"
    text = re.sub(r"consistent\s+\w+;", f"consistent {'yes' if case.solver.consistent else 'no'};",
                  sol.read_text())
    text = re.sub(r"residualControl\s*\{[^}]*\}", "residualControl { p 1e-9; U 1e-9; }", text)
    rx = case.solver.relaxation
    text = re.sub(r"relaxationFactors\s*\{.*\}\s*",
                  f"relaxationFactors\n{{\n    fields {{ p {rx.p!r}; }}\n"
                  f"    equations {{ U {rx.U!r}; }}\n}}\n", text, flags=re.S)
    text = re.sub(r"tolerance\s+[^;]*;", "tolerance 1e-12;", text)
    sol.write_text(re.sub(r"relTol\s+[^;]*;", "relTol 0;", text))
    ctl = out / "system" / "controlDict"
    text = re.sub(r"^endTime .*", "endTime 20000;", ctl.read_text(), flags=re.M)
    text = re.sub(r"^writeInterval .*", "writeInterval 20000;", text, flags=re.M)
    text = re.sub(r"#includeFunc.*\n", "", text)
    if "cylinder" in kinds:  # the wall's pressure and viscous forces, per unit density
        text = re.sub(r"functions\s*\{[^}]*\}", "functions\n{\n    forces\n    {\n"
                      "        type forces;\n        libs (\"libforces.so\");\n"
                      "        writeControl timeStep;\n        writeInterval 1;\n"
                      "        patches (cylinder);\n        rho rhoInf;\n        rhoInf 1;\n"
                      "        CofR (0 0 0);\n    }\n}", text)
    ctl.write_text(text)


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:])
