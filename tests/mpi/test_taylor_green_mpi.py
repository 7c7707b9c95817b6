"""Taylor-Green vortices on 2 and 4 ranks equal the serial run: the periodic pairs split
across ranks (recursive bisection cuts the box at x = pi, so the x = 0 / 2 pi pair joins
cells of different ranks) and every halo strategy carries them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.fieldio import read_fields

QUICK = ["--set", "mesh.cells=[24,24,1]", "--set", "solver.dt=0.05", "--set",
         "solver.end_time=0.5", "--set", "output.plots=false", "--set",
         "parallel.decomposition=rcb", "--quiet"]


def _run(haloflow_mpi, d, ranks, halo):
    res = haloflow_mpi(ranks, "run", "taylor_green", "-o", str(d), *QUICK, "--set",
                       f"parallel.halo={halo}", timeout=180)
    assert res.returncode == 0, f"--- stdout ---\n{res.stdout}\n--- stderr ---\n{res.stderr}"
    s = json.loads((d / "summary.json").read_text())
    assert s["ranks"] == ranks
    return s["taylor_green"], read_fields(d, "taylor_green")


@pytest.fixture(scope="module")
def serial(haloflow_mpi, tmp_path_factory):
    """The serial run both rank counts below are compared with (one run for both)."""
    return _run(haloflow_mpi, tmp_path_factory.mktemp("n1"), 1, "aggregated")


@pytest.mark.mpi
@pytest.mark.parametrize("n, strategy", [(2, "aggregated"), (4, "overlap")])
def test_periodic_runs_match_serial(haloflow_mpi, tmp_path, serial, n, strategy):
    (tg1, f1), (tgn, fn) = serial, _run(haloflow_mpi, tmp_path / f"n{n}", n, strategy)
    assert tg1["u_l2_error"] < 3e-3  # a real solution, not a field at rest
    assert abs(tgn["u_l2_error"] - tg1["u_l2_error"]) < 1e-8
    assert np.abs(fn["U"] - f1["U"]).max() < 1e-8
    assert np.abs(fn["p"] - f1["p"]).max() < 1e-8
    assert len(np.unique(fn["rank"])) == n
