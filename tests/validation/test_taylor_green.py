"""Taylor-Green vortices: second-order convergence in space against the exact solution, and
the built-in case's run-level output.

Measured (1 rank, t = 1, nu = 0.01, BDF2, linear convection): with dt = 1/80 on every mesh
the velocity error falls 4.19x from 16^2 to 32^2 and 4.27x to 64^2 (order 2.07, 2.09).
With dt halved with the cell size it falls 8.6x and 8.9x: the error is dominated by a term
proportional to dt h^2 (the pressure-velocity coupling), so refining both makes it third
order; the test below holds dt fixed to measure the spatial order alone.
"""

from __future__ import annotations

import json
import math

import numpy as np
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.mesh import from_case
from haloflow.parallel import halo
from haloflow.parallel.local import build_local
from haloflow.parallel.reduce import Reducer
from haloflow.physics import solver_from_case
from haloflow.post.taylor_green import errors
from haloflow.run import run_case


def velocity_error(cells: int, steps: int = 80, end_time: float = 1.0, *extra) -> dict:
    """The errors of the built-in case on ``cells``^2 after ``steps`` steps (serial)."""
    case = load_case("taylor_green", [f"mesh.cells=[{cells},{cells},1]",
                                      f"solver.dt={end_time / steps}",
                                      f"solver.end_time={end_time}", *extra])
    m = from_case(case.mesh)
    lm = build_local(m, np.zeros(m.n_cells, dtype=np.int64), 0)
    comm = MPI.COMM_SELF
    s = solver_from_case(lm, case, halo.make("aggregated", lm, comm), comm)
    for _ in range(steps):
        s.step()
    return errors(lm, s.U, s.p, s.time, case, Reducer(comm))


def test_second_order_in_space():
    e = [velocity_error(n) for n in (16, 32, 64)]
    u = [x["u_l2_error"] for x in e]
    orders = [math.log2(u[i] / u[i + 1]) for i in range(2)]
    assert min(orders) >= 1.9, (u, orders)
    assert u[2] < 1e-4, u
    umax = [x["u_max_error"] for x in e]
    assert math.log2(umax[1] / umax[2]) >= 1.9, umax
    # pressure converges too (more slowly: measured order 1.8 between these meshes)
    p = [x["p_l2_error"] for x in e]
    assert p[0] > p[1] > p[2] and math.log2(p[1] / p[2]) > 1.5, p
    # little numerical dissipation: kinetic energy within 0.01 % of exact on 64^2
    assert abs(e[2]["kinetic_energy_ratio"] - 1.0) < 1e-4


def test_builtin_case_reports_errors(tmp_path):
    case = load_case("taylor_green", ["mesh.cells=[16,16,1]", "solver.dt=0.1",
                                      "solver.end_time=0.5", "output.plots=false"])
    run_case(case, tmp_path / "tg", MPI.COMM_WORLD, quiet=True)
    s = json.loads((tmp_path / "tg" / "summary.json").read_text())
    tg = s["taylor_green"]
    assert abs(tg["time"] - 0.5) < 1e-12
    assert abs(tg["exact_peak_speed"] - math.exp(-2 * 0.01 * 0.5)) < 1e-12
    # 4.907e-3 measured (2026-12-02): the order tests above say how it falls with the mesh,
    # this says the shipped case's run reports the same error (10 %: tolerances, not physics)
    assert abs(tg["u_l2_error"] / 4.907e-3 - 1.0) < 0.1, tg["u_l2_error"]
    assert "Taylor-Green vortices at t = 0.5" in (tmp_path / "tg" / "log.txt").read_text()
