"""What a run keeps once set-up is over: the centres nothing reads are freed (the answer is
the same bits), the AMG holds no copy of what the matrix or the compiled solve hold and keeps
its work vectors in the momentum solver's idle workspace (the answer is the same bits), the
arrays a 3D run holds stay within a per-cell budget, and a run that plots nothing and reads no
gmsh file never loads the heavy libraries."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import numpy as np
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.linalg import cycle
from haloflow.linalg.krylov import Workspace
from haloflow.run.setup import setup

CAVITY = ["mesh.cells=[4,4,4]", "boundary.front.type=wall", "boundary.back.type=wall",
          "solver.dt=0.05", "output.fields=false", "postprocess.cavity=false"]
# (nor scipy.sparse: the coarsest level's ordering is ours, linalg/cholesky.py; nor
# scipy.linalg, whose BLAS numba's target looks for: backends/numba_loading.py)
HEAVY = ("matplotlib", "meshio", "rich", "scipy.spatial", "scipy.sparse", "scipy.linalg")


def _run(*overrides):
    case = load_case("cavity", [*CAVITY, *overrides])
    return setup(case, MPI.COMM_SELF, 1, lambda s: None)


def test_centres_freed_when_nothing_reads_them_and_the_answer_is_unchanged():
    lean = _run("output.plots=false")
    kept = _run("output.plots=true")  # the velocity plot reads both at the end
    g, k = lean.lmesh.geometry, kept.lmesh.geometry
    assert g.face_centres is None and g.cell_centres is None
    assert k.face_centres is not None and k.cell_centres is not None
    assert g.face_areas is not None and g.cell_volumes is not None
    for _ in range(3):
        lean.solver.step()
        kept.solver.step()
    assert np.array_equal(lean.solver.U, kept.solver.U)
    assert np.array_equal(lean.solver.p, kept.solver.p)


def test_centres_kept_for_linear_upwind_and_post_processors():
    lu = _run("output.plots=false", "solver.convection=linear-upwind")
    assert lu.lmesh.geometry.face_centres is not None
    lu.solver.step()  # reads both every step
    post = _run("output.plots=false", "postprocess.cavity=true")  # gathers the velocity
    assert post.lmesh.geometry.face_centres is not None
    assert post.lmesh.geometry.cell_centres is not None


def _arrays(root) -> dict:
    """Every array buffer reachable from ``root`` through attributes, dicts, lists and
    tuples, once each (views count as their base): {id: (bytes, first path)}."""
    found, seen, todo = {}, set(), [(root, "run")]
    while todo:
        o, path = todo.pop()
        if isinstance(o, np.ndarray):
            while isinstance(o.base, np.ndarray):
                o = o.base
            found.setdefault(id(o), (o.nbytes, path))
            continue
        if id(o) in seen or isinstance(o, (type, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(o))
        if isinstance(o, dict):
            todo += [(v, f"{path}.{k}") for k, v in o.items()]
        elif isinstance(o, (list, tuple)):
            todo += [(v, f"{path}[{k}]") for k, v in enumerate(o)]
        elif hasattr(o, "__dict__"):
            todo.append((vars(o), path))
    return found


def test_amg_holds_no_copies_and_works_in_the_momentum_workspace():
    run = _run("output.plots=false", "mesh.cells=[16,16,16]", "solver.dt=0.01")
    run.solver.step()
    pr = run.solver.pressure
    amg, fast = pr.amg, pr.compiled
    top = amg.levels[0]
    assert fast is not None and len(amg.levels) > 2
    assert top.indices is pr.P.pattern.indices and top.data is pr.P.data
    assert top.b is None and top.c is None  # the caller's vectors; the residual alone
    h = fast.h
    assert h[cycle.H_IX0] is top.indices and h[cycle.H_AGG0] is top.next.agg
    for lev in amg.levels[1:]:  # the coarse levels' arrays are views of the packed ones
        for a, packed in ((lev.indptr, 0), (lev.indices, 1), (lev.data, 2), (lev.diag_pos, 3),
                          (lev.dinv, 4), (lev.b, 7), (lev.r2, 7)):
            assert np.shares_memory(a, h[packed])
    assert len(h[1]) == sum(len(lev.indices) for lev in amg.levels[1:])
    assert np.shares_memory(amg.block, run.solver.momentum.ws.rows)
    assert np.shares_memory(top.r, run.solver.momentum.ws.rows)


def test_shared_work_vectors_give_the_same_bits(monkeypatch):
    shared = _run("output.plots=false", "mesh.cells=[6,6,6]")
    monkeypatch.setattr(Workspace, "spare", lambda self, count: None)
    own = _run("output.plots=false", "mesh.cells=[6,6,6]")
    for _ in range(3):
        shared.solver.step()
        own.solver.step()
    assert not np.shares_memory(own.solver.pressure.amg.block, own.solver.momentum.ws.rows)
    assert np.array_equal(shared.solver.U, own.solver.U)
    assert np.array_equal(shared.solver.p, own.solver.p)


def test_arrays_per_cell_within_budget():
    """16^3, once set up and stepped: 1237 B/cell before the AMG stopped copying the
    matrix's arrays and its own, 1042 after (the race's 64^3 RSS: 1080 -> 956 B/cell)."""
    run = _run("output.plots=false", "mesh.cells=[16,16,16]", "solver.dt=0.01")
    run.solver.step()
    found = _arrays(run)
    per_cell = sum(b for b, _ in found.values()) / 16**3
    top = sorted(found.values(), reverse=True)[:5]
    assert per_cell <= 1100, (per_cell, top)


def _loaded(tmp_path, *overrides) -> list[str]:
    """The heavy modules a ``haloflow run`` process has loaded when it ends."""
    sets = [x for s in (*CAVITY, "solver.max_steps=2", *overrides) for x in ("--set", s)]
    argv = ["run", "cavity", "-o", str(tmp_path / "run"), "--quiet", "--force", *sets]
    code = (f"import json, sys; from haloflow.cli import main; rc = main({argv!r}); "
            f"print(json.dumps([rc, sorted(m for m in {HEAVY!r} if m in sys.modules)]))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    rc, mods = json.loads(res.stdout.strip().splitlines()[-1])
    assert rc == 0, res.stdout
    return mods


def test_a_run_loads_no_plotting_or_mesh_reading_libraries(tmp_path):
    assert _loaded(tmp_path, "output.plots=false") == []
    assert "matplotlib" in _loaded(tmp_path, "output.plots=true")  # the check sees them
