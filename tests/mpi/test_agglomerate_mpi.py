"""Issue 48, item 1: coarse AMG levels on fewer ranks (``solver.pressure.agglomerate``).

A 16^3 cavity (AMG levels of 4096 and 1024 rows distributed, 256 replicated) runs 3 steps
on 4 ranks with every level on every rank, with the 1024-row level agglomerated onto 2 ranks
(``agglomerate = 400``) and onto 1, and on 1 rank.  The hierarchy is the same in all; only
the smoother's cut moves:

- the fields agree with the un-agglomerated run to the pressure solve's tolerance, and the
  pressure iterations per solve within one;
- the levels sit on the ranks ``linalg.agglomerate`` plans (the model's leaders);
- ranks left out of a level send none of its messages: the busiest rank's halo messages
  fall;
- the compiled solve and the Python path (``HALOFLOW_NO_CMPI``) agree to round-off, and two
  halo strategies bitwise, with the levels agglomerated.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from haloflow.linalg.agglomerate import plan
from tests.fieldio import read_fields

CASE = ["--set", "mesh.cells=[16,16,16]", "--set", "boundary.front.type=wall",
        "--set", "boundary.back.type=wall", "--set", "output.plots=false",
        "--set", "postprocess.cavity=false", "--set", "solver.dt=0.01",
        "--steps", "3", "--quiet"]


def _run(haloflow_mpi, tmp_path, name, n, agglomerate, *extra, env=None):
    out = tmp_path / name
    res = haloflow_mpi(n, "run", "cavity", "-o", str(out), *CASE, "--set",
                       f"solver.pressure.agglomerate={agglomerate}", *extra, timeout=240,
                       env=env)
    assert res.returncode == 0, f"--- stdout ---\n{res.stdout}\n--- stderr ---\n{res.stderr}"
    prof = json.loads((out / "profile.json").read_text())
    summ = json.loads((out / "summary.json").read_text())
    return read_fields(out), prof, summ


@pytest.fixture(scope="module")
def runs(haloflow_mpi, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("agglomerate")
    return {name: _run(haloflow_mpi, tmp, name, n, a)
            for name, n, a in (("serial", 1, 0), ("all", 4, 0), ("two", 4, 400),
                               ("one", 4, 10**6))}


@pytest.mark.mpi
def test_agglomerated_levels_give_the_same_answer(runs):
    f0, _, s0 = runs["all"]
    scale = np.abs(f0["p"]).max()
    for name in ("two", "one", "serial"):
        f, _, s = runs[name]
        assert np.abs(f["p"] - f0["p"]).max() < 1e-6 * scale, name
        assert np.abs(f["U"] - f0["U"]).max() < 1e-7, name
        assert abs(s["p_iters_mean"] - s0["p_iters_mean"]) <= 1.0, name


@pytest.mark.mpi
def test_levels_sit_where_the_plan_puts_them(runs):
    for name, a in (("all", 0), ("two", 400), ("one", 10**6)):
        levels = runs[name][1]["amg"]["levels"]
        coarse = [lv for lv in levels[1:] if lv["distributed"]]
        assert coarse, "a distributed coarse level to agglomerate"
        want = [len(np.unique(lead)) for lead in plan([lv["rows"] for lv in coarse],
                                                      np.zeros(4, dtype=np.int64), a)]
        assert [lv["ranks"] for lv in coarse] == want, name
    assert [lv["ranks"] for lv in runs["one"][1]["amg"]["levels"][1:]
            if lv["distributed"]] == [1] * len(coarse)
    busiest = {k: runs[k][1]["counts"]["busiest"]["messages"] for k in ("all", "two", "one")}
    assert busiest["one"] < busiest["two"] < busiest["all"], busiest


@pytest.mark.mpi
def test_python_path_and_halo_strategies_agree(runs, haloflow_mpi, tmp_path):
    f_compiled = runs["one"][0]
    f_python, _, _ = _run(haloflow_mpi, tmp_path, "python", 4, 10**6,
                          env={"HALOFLOW_NO_CMPI": "1"})
    scale = np.abs(f_compiled["p"]).max()
    assert np.abs(f_python["p"] - f_compiled["p"]).max() < 1e-10 * scale
    f_packed, _, _ = _run(haloflow_mpi, tmp_path, "packed", 4, 400,
                          "--set", 'parallel.halo="packed"')
    f_aggr = runs["two"][0]
    assert np.array_equal(f_packed["p"], f_aggr["p"])
    assert np.array_equal(f_packed["U"], f_aggr["U"])
