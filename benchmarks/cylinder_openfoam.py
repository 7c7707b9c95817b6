"""The DFG 2D-2 cylinder (Re 100) run by OpenFOAM's pimpleFoam on haloflow's own mesh.

    .venv/bin/python benchmarks/cylinder_openfoam.py --cells-around 64
    .venv/bin/python benchmarks/cylinder_openfoam.py --cells-around 128 --dt 0.001

Writes the ``cylinder`` mesh (``mesh.cells_around``) as an OpenFOAM polyMesh with the case of
``cylinder_re100`` (exact parabolic inflow at the face centres, Um = 1.5, nu = 1e-3; no slip;
p = 0 at the outlet), runs pimpleFoam (backward in time, Gauss linear convection, 2 PISO
correctors, one outer iteration: the scheme haloflow's PISO + BDF2 uses) from rest to
``--end-time`` and reports St, c_D,max and c_L,max over the last whole lift periods, as
haloflow's summary.json does.  The same mesh for both codes separates discretisation from
mesh resolution.  Needs OpenFOAM (Debian's ``openfoam`` package); appends to
benchmarks/results/cylinder_openfoam.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
from openfoam import HEAD, foam_env, run_foam

TYPES = {"inlet": "patch", "outlet": "patch", "walls": "wall", "cylinder": "wall",
         "front": "empty", "back": "empty"}


def write_polymesh(mesh, folder: Path, types: dict = TYPES) -> None:
    """ASCII polyMesh: internal faces in upper-triangular order, then the patches (of
    ``types``: patch name -> polyMesh type)."""
    ni = mesh.n_internal
    order = np.lexsort((mesh.neighbour, mesh.owner[:ni]))
    perm = np.concatenate([order, np.arange(ni, mesh.n_faces)])
    ptr, nodes = mesh.face_ptr, mesh.face_nodes
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "points", "w") as f:
        f.write(HEAD.format(cls="vectorField", obj="points") + f"{len(mesh.points)}\n(\n")
        f.writelines(f"({p[0]:.17g} {p[1]:.17g} {p[2]:.17g})\n" for p in mesh.points)
        f.write(")\n")
    with open(folder / "faces", "w") as f:
        f.write(HEAD.format(cls="faceList", obj="faces") + f"{mesh.n_faces}\n(\n")
        for k in perm:
            fn = nodes[ptr[k]:ptr[k + 1]]
            f.write(f"{len(fn)}({' '.join(map(str, fn))})\n")
        f.write(")\n")
    for name, arr in (("owner", mesh.owner[perm]), ("neighbour", mesh.neighbour[order])):
        with open(folder / name, "w") as f:
            f.write(HEAD.format(cls="labelList", obj=name) + f"{len(arr)}\n(\n")
            f.writelines(f"{x}\n" for x in arr)
            f.write(")\n")
    with open(folder / "boundary", "w") as f:
        f.write(HEAD.format(cls="polyBoundaryMesh", obj="boundary") + f"{len(mesh.patches)}\n(\n")
        for p in mesh.patches:
            f.write(f"{p.name}\n{{\n    type {types[p.name]};\n    nFaces {p.size};\n"
                    f"    startFace {p.start};\n}}\n")
        f.write(")\n")


def _field(cls, obj, dims, internal, bcs) -> str:
    body = "".join(f"    {k}\n    {{\n        {v}\n    }}\n" for k, v in bcs.items())
    return (HEAD.format(cls=cls, obj=obj) + f"dimensions {dims};\ninternalField {internal};\n"
            f"boundaryField\n{{\n{body}}}\n")


def write_case(root: Path, cells_around: int, dt: float, end_time: float) -> int:
    from haloflow.case import load_case
    from haloflow.mesh import from_case

    case = load_case("cylinder_re100", [f"mesh.cells_around={cells_around}"])
    mesh = from_case(case.mesh)
    write_polymesh(mesh, root / "constant" / "polyMesh")
    g, ip = mesh.geom(), mesh.patch("inlet")
    y = g.face_centres[ip.start:ip.start + ip.size, 1]
    u = 4 * 1.5 * y * (0.41 - y) / 0.41**2
    inlet = f"nonuniform List<vector> {len(u)}(" + " ".join(f"({v:.17g} 0 0)" for v in u) + ")"
    walls = {"walls": "type noSlip;", "cylinder": "type noSlip;", "front": "type empty;",
             "back": "type empty;"}
    (root / "0").mkdir(parents=True, exist_ok=True)
    (root / "0" / "U").write_text(_field(
        "volVectorField", "U", "[0 1 -1 0 0 0 0]", "uniform (0 0 0)",
        {"inlet": f"type fixedValue; value {inlet};", "outlet": "type zeroGradient;", **walls}))
    (root / "0" / "p").write_text(_field(
        "volScalarField", "p", "[0 2 -2 0 0 0 0]", "uniform 0",
        {"inlet": "type zeroGradient;", "outlet": "type fixedValue; value uniform 0;",
         **{k: ("type zeroGradient;" if k in ("walls", "cylinder") else v)
            for k, v in walls.items()}}))

    def dic(obj):
        return HEAD.format(cls="dictionary", obj=obj)

    (root / "constant" / "transportProperties").write_text(
        dic("transportProperties") + "transportModel Newtonian;\nnu 0.001;\n")
    (root / "constant" / "turbulenceProperties").write_text(
        dic("turbulenceProperties") + "simulationType laminar;\n")
    (root / "system").mkdir(exist_ok=True)
    (root / "system" / "controlDict").write_text(dic("controlDict") + f"""
application pimpleFoam; startFrom startTime; startTime 0; stopAt endTime; endTime {end_time!r};
deltaT {dt!r}; writeControl timeStep; writeInterval 100000000; writeFormat ascii;
writePrecision 8; timeFormat general; timePrecision 8; runTimeModifiable false;
functions {{ forces {{ type forceCoeffs; libs ("libforces.so"); writeControl timeStep;
  writeInterval 1; patches (cylinder); rho rhoInf; rhoInf 1; liftDir (0 1 0);
  dragDir (1 0 0); CofR (0.2 0.2 0); pitchAxis (0 0 1); magUInf 1; lRef 0.1;
  Aref {0.1 * case.mesh.thickness!r}; }} }}
""")
    (root / "system" / "fvSchemes").write_text(dic("fvSchemes") + """
ddtSchemes { default backward; }
gradSchemes { default Gauss linear; }
divSchemes { default none; div(phi,U) Gauss linear; div((nuEff*dev2(T(grad(U))))) Gauss linear; }
laplacianSchemes { default Gauss linear corrected; }
interpolationSchemes { default linear; }
snGradSchemes { default corrected; }
""")
    (root / "system" / "fvSolution").write_text(dic("fvSolution") + """
solvers {
  p { solver GAMG; smoother GaussSeidel; tolerance 1e-7; relTol 0.01; }
  pFinal { $p; relTol 0; }
  "(U|UFinal)" { solver smoothSolver; smoother symGaussSeidel; tolerance 1e-9; relTol 0; }
}
PIMPLE { nOuterCorrectors 1; nCorrectors 2; nNonOrthogonalCorrectors 0; }
""")
    return mesh.n_cells


def statistics(t, cd, cl, periods: int = 6) -> dict:
    """St and maxima over the last whole lift periods (upward zero crossings of c_L about
    its mean over the second half of the run), as haloflow's cylinder monitor does."""
    half = t >= t[-1] / 2
    c = cl - cl[half].mean()
    up = np.flatnonzero((c[:-1] < 0) & (c[1:] >= 0) & half[1:])
    tz = t[up] - c[up] * (t[up + 1] - t[up]) / (c[up + 1] - c[up])
    tz = tz[-(periods + 1):]
    if len(tz) < 4:
        return {"st": None, "cd_max": None, "cl_max": None, "periods": len(tz) - 1}
    sel = (t >= tz[0]) & (t <= tz[-1])
    period = (tz[-1] - tz[0]) / (len(tz) - 1)
    return {"st": 0.1 / period, "cd_max": float(cd[sel].max()),
            "cl_max": float(cl[sel].max()), "periods": len(tz) - 1}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells-around", type=int, default=64)
    ap.add_argument("--dt", type=float, default=None, help="default 0.002 * 64 / cells")
    ap.add_argument("--end-time", type=float, default=7.0)
    ap.add_argument("-o", "--output", type=Path,
                    default=Path("benchmarks/results/cylinder_openfoam.json"))
    a = ap.parse_args()
    env = foam_env()
    if env is None:
        print("OpenFOAM not found (no etc/bashrc): nothing to compare")
        return 1
    dt = a.dt or 0.002 * 64 / a.cells_around
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "cyl"
        cells = write_case(root, a.cells_around, dt, a.end_time)
        print(f"pimpleFoam on haloflow's cylinder mesh, {a.cells_around} cells around "
              f"({cells} cells), dt {dt:g}, t = 0 .. {a.end_time:g}", flush=True)
        run_foam(env, root, "pimpleFoam", root / "log.pimpleFoam")
        dat = next((root / "postProcessing" / "forces").rglob("coefficient*.dat"))
        d = np.loadtxt(dat, comments="#")
    row = {"cells_around": a.cells_around, "cells": cells, "dt": dt, "end_time": a.end_time,
           **statistics(d[:, 0], d[:, 1], d[:, 3])}
    print(json.dumps(row))
    old = json.loads(a.output.read_text()) if a.output.exists() else {"runs": []}
    old["runs"] = [r for r in old["runs"] if r["cells_around"] != a.cells_around] + [row]
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps(old, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
