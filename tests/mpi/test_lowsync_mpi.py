"""Single-reduction and pipelined CG on 2-4 ranks against serial, and through the CLI.

Distributed solves (METIS parts of a 3D and a 2D Laplacian) of every variant, Jacobi and
AMG, equal the serial solve of the same variant to 1e-8 relative with the serial iteration
count +-1 (Jacobi iterates do not depend on the partition, the AMG hierarchy does not
either).  The 2-rank cavity with each new pressure method gives amg-cg's fields to the
solver tolerance with fewer allreduces per step (profile.json).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.io.probes import gather_cells
from haloflow.linalg import flexible
from haloflow.linalg import krylov as K
from haloflow.linalg import lowsync as L
from haloflow.linalg.amg import AMG
from haloflow.linalg.poisson import laplacian, smooth_rhs
from haloflow.mesh.blocks import box
from haloflow.parallel.decompose import decompose
from haloflow.parallel.local import build_local, distribute
from haloflow.parallel.reduce import Reducer
from tests.fieldio import read_fields

VARIANTS = [("cg1", "jacobi"), ("pipecg", "jacobi"), ("cg1", "amg"), ("pipecg", "amg")]


def _solve(lm, comm, dirichlet, solver, precond, tol=1e-11):
    A = laplacian(lm, comm, fixed=("left", "bottom") if dirichlet else ())
    red = Reducer(comm)
    b = smooth_rhs(lm, red, zero_mean=not dirichlet)
    pre = None
    if precond == "amg":
        amg = AMG(A, lm, red)
        amg.refresh()
        pre = amg.apply
    ws = K.Workspace(lm.n_cells, lm.n_owned, 8)
    ws.reserve(L.PIPECG_VECTORS)
    x = np.zeros(lm.n_cells)
    info = {"cg1": flexible.cg1, "pipecg": L.pipecg}[solver](A, b, x, tol, 3000, red, ws, pre)
    if not dirichlet:
        x[: lm.n_owned] -= red.sum(x[: lm.n_owned].sum())[0] / lm.n_cells_global
    return x, info


@pytest.mark.parallel(ranks=[2, 3, 4], timeout=240)
def test_variants_match_serial(nranks):
    comm = MPI.COMM_WORLD
    assert comm.size == nranks
    for cells in ((12, 10, 9), (48, 40, 1)):
        mesh = box(cells) if comm.rank == 0 else None
        parts = decompose(mesh, nranks, "metis") if comm.rank == 0 else None
        lm = distribute(mesh, parts, comm)
        for dirichlet in (True, False):
            for solver, precond in VARIANTS:
                x, info = _solve(lm, comm, dirichlet, solver, precond)
                (xg,) = gather_cells(lm, Reducer(comm), x)
                if comm.rank != 0:
                    continue
                ls = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
                xs, info_s = _solve(ls, MPI.COMM_SELF, dirichlet, solver, precond)
                what = (cells, dirichlet, solver, precond, info, info_s)
                err = np.abs(xg - xs[: ls.n_owned]).max() / np.abs(xs).max()
                assert info.converged and err <= 1e-8, (what, err)
                assert abs(info.iters - info_s.iters) <= 1, what


QUICK = ["--set", "mesh.cells=[16,16,1]", "--set", "output.plots=false", "--quiet",
         "--steps", "10", "--set", "postprocess.cavity=false"]


def _cavity(haloflow_mpi, out, method):
    res = haloflow_mpi(2, "run", "cavity", "-o", str(out), *QUICK, "--set",
                       f"solver.pressure.method={method}", timeout=180)
    assert res.returncode == 0, f"--- stdout ---\n{res.stdout}\n--- stderr ---\n{res.stderr}"
    prof = json.loads((out / "profile.json").read_text())
    return read_fields(out), prof["per_step"]["allreduces"]


@pytest.fixture(scope="module")
def references():
    """Reference runs (fields, allreduces per step) by method, made once per module."""
    return {}


@pytest.mark.mpi
@pytest.mark.parametrize("method, ref", [("amg-cg1", "amg-cg"), ("amg-pipecg", "amg-cg"),
                                          ("cg1-jacobi", "cg-jacobi"),
                                          ("pipecg-jacobi", "cg-jacobi")])
def test_cavity_same_fields_fewer_allreduces(haloflow_mpi, tmp_path_factory, references,
                                             method, ref):
    """10 steps on 2 ranks: U and p equal amg-cg's to the solver tolerance, with fewer
    allreduces per step than the classic CG of the same preconditioner."""
    for name in ("amg-cg", ref):
        if name not in references:
            references[name] = _cavity(haloflow_mpi, tmp_path_factory.mktemp(name), name)
    f0, _ = references["amg-cg"]
    _, n0 = references[ref]
    f1, n1 = _cavity(haloflow_mpi, tmp_path_factory.mktemp(method), method)
    du = np.abs(f1["U"] - f0["U"]).max()
    dp = np.abs(f1["p"] - f0["p"]).max() / np.abs(f0["p"]).max()
    assert du < 1e-6 and dp < 1e-6, (du, dp)
    assert n1 < n0, (n1, n0)
