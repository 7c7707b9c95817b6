"""What a run keeps once set-up is over: the centres nothing reads are freed (the answer is
the same bits), and a run that plots nothing and reads no gmsh file never loads the heavy
libraries."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.run.setup import setup

CAVITY = ["mesh.cells=[4,4,4]", "boundary.front.type=wall", "boundary.back.type=wall",
          "solver.dt=0.05", "output.fields=false", "postprocess.cavity=false"]
# (scipy.sparse.linalg is not among them yet: the K-cycle's coarsest-level ordering loads it)
HEAVY = ("matplotlib", "meshio", "rich", "scipy.spatial")


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
