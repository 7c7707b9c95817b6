"""OpenFOAM tutorials side by side: haloflow run on a tutorial's own polyMesh, cell for cell
against the OpenFOAM solver's fields stored beside it (``reference/t<time>.txt``: Ux Uy p
per cell, in the polyMesh's cell order)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.mesh import from_case
from haloflow.parallel import halo
from haloflow.parallel.local import build_local
from haloflow.physics import solver_from_case


def run(case_file: Path, steps: int, *overrides) -> tuple[np.ndarray, np.ndarray]:
    """haloflow's ``U[3, n]`` and ``p[n]`` after ``steps`` steps, in the polyMesh's cell
    order."""
    case = load_case(case_file, overrides)
    mesh = from_case(case.mesh, [])
    lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    s = solver_from_case(lm, case, halo.make("packed", lm, MPI.COMM_SELF), MPI.COMM_SELF)
    for _ in range(steps):
        s.step()
    n = lm.n_owned
    U, p = np.zeros((3, mesh.n_cells)), np.zeros(mesh.n_cells)
    U[:, lm.global_cells[:n]] = s.U[:, :n]
    p[lm.global_cells[:n]] = s.p[:n]
    return U, p


def reference(data: Path, time: str) -> tuple[np.ndarray, np.ndarray]:
    """The OpenFOAM solver's ``U[d, n]`` (x, y and, from a 3D case, z) and ``p[n]`` at
    ``time``."""
    a = np.loadtxt(data / "reference" / f"t{time}.txt")
    return a[:, :-1].T, a[:, -1]


def internal_field(path: Path, vector: bool) -> np.ndarray:
    """The nonuniform internalField of an ASCII OpenFOAM field file."""
    text = path.read_text()
    m = re.search(r"internalField\s+nonuniform\s+List<\w+>\s*(\d+)\s*\(", text)
    n, body = int(m.group(1)), text[m.end():]
    if vector:
        rows = re.findall(r"\(([^()]*)\)", body)[:n]
        return np.array([[float(x) for x in r.split()] for r in rows])
    return np.array(body.split(")")[0].split(), dtype=float)[:n]


def write_reference(foam_case: Path, data: Path, times, what: str, dims: int = 2) -> None:
    """``data/reference/t<time>.txt`` (Ux Uy p per cell, Ux Uy Uz p where the case is 3D)
    from the solver's time folders."""
    out = data / "reference"
    out.mkdir(exist_ok=True)
    for t in times:
        U = internal_field(Path(foam_case) / t / "U", True)
        p = internal_field(Path(foam_case) / t / "p", False)
        cols = "Ux Uy Uz p" if dims == 3 else "Ux Uy p"
        np.savetxt(out / f"t{t}.txt", np.column_stack([U[:, :dims], p]), fmt="%.12g",
                   header=f"{what} at t = {t}: {cols} per cell")
