"""The built-in backward_step case as an OpenFOAM case for simpleFoam: haloflow's own mesh (its
cell order kept, internal faces in OpenFOAM's upper-triangular order), haloflow's own inlet
values, laminar, nu 0.02, SIMPLE with U 0.7 and p 0.3, Gauss linear, to residuals of 1e-9.

    .venv/bin/python tests/data/backward_step/simplefoam_case.py /tmp/step PITZDAILY
    cd /tmp/step && source /usr/share/openfoam/etc/bashrc && simpleFoam

PITZDAILY: a copy of OpenFOAM's simpleFoam/pitzDaily tutorial, whose system/ files are
taken and edited (OpenFOAM v1912).  tests/validation/test_backward_step.py holds the x_r / S
simpleFoam gives; `SIMPLEFOAM` there says how it is read off.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.mesh import from_case
from haloflow.parallel import halo
from haloflow.parallel.local import build_local
from haloflow.physics import solver_from_case

KINDS = {"front": "empty", "back": "empty", "lower": "wall", "upper": "wall"}


def header(cls: str, obj: str, note: str = "") -> str:
    note = f'    note        "{note}";\n' if note else ""
    return (f"FoamFile\n{{\n    version     2.0;\n    format      ascii;\n    class       {cls};\n"
            f"{note}    object      {obj};\n}}\n\n")


def vec(v) -> str:
    return f"({float(v[0])!r} {float(v[1])!r} {float(v[2])!r})"


def write_mesh(mesh, pm: Path) -> None:
    ni = mesh.n_internal
    own, nbr = np.asarray(mesh.owner), np.asarray(mesh.neighbour)
    assert np.all(own[:ni] < nbr), "faces oriented from the lower cell id"
    order = np.lexsort((nbr, own[:ni]))
    perm = [*order, *range(ni, mesh.n_faces)]
    ptr, nodes = np.asarray(mesh.face_ptr), np.asarray(mesh.face_nodes)
    note = (f"nPoints:{len(mesh.points)}  nCells:{mesh.n_cells}  nFaces:{mesh.n_faces}  "
            f"nInternalFaces:{ni}")
    pm.mkdir(parents=True, exist_ok=True)
    (pm / "points").write_text(header("vectorField", "points") + f"{len(mesh.points)}\n(\n"
                               + "".join(vec(p) + "\n" for p in mesh.points) + ")\n")
    (pm / "faces").write_text(header("faceList", "faces") + f"{mesh.n_faces}\n(\n" + "".join(
        f"{ptr[f + 1] - ptr[f]}({' '.join(map(str, nodes[ptr[f]:ptr[f + 1]]))})\n"
        for f in perm) + ")\n")
    (pm / "owner").write_text(header("labelList", "owner", note) + f"{mesh.n_faces}\n(\n"
                              + "".join(f"{own[f]}\n" for f in perm) + ")\n")
    (pm / "neighbour").write_text(header("labelList", "neighbour", note) + f"{ni}\n(\n"
                                  + "".join(f"{nbr[f]}\n" for f in order) + ")\n")
    patches = "".join(f"    {p.name}\n    {{\n        type {KINDS.get(p.name, 'patch')};\n"
                      f"        nFaces {p.size};\n        startFace {p.start};\n    }}\n"
                      for p in mesh.patches)
    (pm / "boundary").write_text(header("polyBoundaryMesh", "boundary")
                                 + f"{len(mesh.patches)}\n(\n{patches})\n")


def main(out: Path, tutorial: Path) -> None:
    case = load_case("backward_step")
    mesh = from_case(case.mesh)
    write_mesh(mesh, out / "constant" / "polyMesh")
    lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    s = solver_from_case(lm, case, halo.make("packed", lm, MPI.COMM_SELF), MPI.COMM_SELF)
    inlet = mesh.patch("inlet")
    b0 = inlet.start - mesh.n_internal
    uin = s.bc.u_value[b0:b0 + inlet.size]
    walls = "".join(f"    {n} {{ type {t}; }}\n" for n, t in
                    (("outlet", "zeroGradient"), ("lower", "noSlip"), ("upper", "noSlip"),
                     ("front", "empty"), ("back", "empty")))
    (out / "0").mkdir(exist_ok=True)
    (out / "0" / "U").write_text(header("volVectorField", "U") + (
        "dimensions [0 1 -1 0 0 0 0];\ninternalField uniform (0 0 0);\nboundaryField\n{\n"
        f"    inlet {{ type fixedValue; value nonuniform List<vector> {len(uin)}\n(\n"
        + "".join(vec(u) + "\n" for u in uin) + "); }\n" + walls + "}\n"))
    (out / "0" / "p").write_text(header("volScalarField", "p") + (
        "dimensions [0 2 -2 0 0 0 0];\ninternalField uniform 0;\nboundaryField\n{\n"
        "    inlet { type zeroGradient; }\n    outlet { type fixedValue; value uniform 0; }\n"
        "    lower { type zeroGradient; }\n    upper { type zeroGradient; }\n"
        "    front { type empty; }\n    back { type empty; }\n}\n"))
    const = out / "constant"
    (const / "transportProperties").write_text(header("dictionary", "transportProperties")
                                               + "transportModel Newtonian;\nnu 0.02;\n")
    for name in ("momentumTransport", "turbulenceProperties"):
        (const / name).write_text(header("dictionary", name) + "simulationType laminar;\n")
    shutil.copytree(tutorial / "system", out / "system", dirs_exist_ok=True)
    sch = out / "system" / "fvSchemes"
    sch.write_text(re.sub(r"div\(phi,U\)\s+[^;]*;", "div(phi,U) bounded Gauss linear;",
                          sch.read_text()))
    sol = out / "system" / "fvSolution"
    text = sol.read_text().replace("consistent      yes;", "consistent      no;")
    text = re.sub(r"residualControl\s*\{[^}]*\}", "residualControl { p 1e-9; U 1e-9; }", text)
    text = re.sub(r"relaxationFactors\s*\{.*\}\s*", "relaxationFactors\n{\n    fields { p 0.3; }"
                  "\n    equations { U 0.7; }\n}\n", text, flags=re.S)
    text = re.sub(r"tolerance\s+[^;]*;", "tolerance 1e-12;", text)
    sol.write_text(re.sub(r"relTol\s+[^;]*;", "relTol 0;", text))
    ctl = out / "system" / "controlDict"
    text = re.sub(r"^endTime .*", "endTime 20000;", ctl.read_text(), flags=re.M)
    text = re.sub(r"^writeInterval .*", "writeInterval 20000;", text, flags=re.M)
    ctl.write_text(re.sub(r"#includeFunc.*\n", "", text))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
