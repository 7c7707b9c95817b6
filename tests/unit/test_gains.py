"""What balancing, placement and threads would gain (haloflow.study.gains) and how `haloflow
predict` reports it."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from haloflow.mesh.blocks import box
from haloflow.parallel.decompose import decompose
from haloflow.study import gains as G
from haloflow.study import model as M
from tests.unit.test_model import _cli, shm_file, synthetic_profile, workload  # noqa: F401

NET = M.Curve.hockney("net", 20e-6, 1e8)
SHM = M.Curve.hockney("shm", 0.5e-6, 5e9)


def test_balanced_parts_save_the_largest_parts_excess_compute():
    w = workload(serial=0.0, exchanges=0.0, allreduces=0.0)
    h = M.halo_of_grid(w.cells, 4, w.dims)
    even = M.predict(w, h, NET, SHM, 4)
    skew = replace(h, cells=np.array([2, 1, 1, 0]) * w.cells // 4)  # one part twice the mean
    rows = G.gains(w, {1: M.halo_of_grid(w.cells, 1, 2), 4: skew}, {}, NET, SHM,
                   M.Layout(4), 1.0)
    (r,) = rows
    assert r["cell_imbalance"] == pytest.approx(2.0)
    assert r["step_s"] == pytest.approx(2 * even.compute_s + even.halo_s + even.reduce_s
                                        + even.gather_s, rel=1e-9)
    assert r["balanced_step_s"] == pytest.approx(even.step_s, rel=1e-9)
    # an even partition gains nothing
    (r,) = G.gains(w, {4: h}, {}, NET, SHM, M.Layout(4), 1.0)
    assert r["balanced_step_s"] == pytest.approx(r["step_s"], rel=1e-12)


def test_threads_trade_messages_for_their_efficiency():
    w = workload(compute=0.3, serial=0.0, exchanges=500.0, allreduces=700.0)
    hs = {p: M.halo_of_grid(w.cells, p, w.dims) for p in (4, 8, 16)}
    lay = M.Layout(16)
    (ideal,) = [r for r in G.gains(w, hs, {}, NET, SHM, lay, 1.0) if r["ranks"] == 16]
    (poor,) = [r for r in G.gains(w, hs, {}, NET, SHM, lay, 0.5) if r["ranks"] == 16]
    assert set(ideal["threads_step_s"]) == {1, 2, 4}  # 16 cores as 16x1, 8x2, 4x4
    assert ideal["threads_step_s"][1] == pytest.approx(ideal["step_s"], rel=1e-12)
    # ideal threads: the same compute per core, fewer and fewer messages and stages
    assert ideal["threads_step_s"][4] < ideal["threads_step_s"][2] < ideal["step_s"]
    # at half efficiency 4 threads compute as 2 ranks' worth: slower than 16 ranks here
    four = M.predict(w, hs[4], NET, SHM, replace(lay, threads=4))
    assert poor["threads_step_s"][4] == pytest.approx(four.step_s + four.compute_s, rel=1e-9)
    assert poor["threads_step_s"][4] > ideal["step_s"]


def test_one_thread_workload_undoes_a_threaded_profile():
    prof = synthetic_profile(compute=0.2, serial=0.01)
    prof["case"]["threads"] = 2
    w = M.Workload.from_profile(prof)
    w1 = G.one_thread(w, 0.75)
    fixed = w.serial_s + w.floor_s
    assert w1.threads == 1
    assert w1.compute_s - fixed == pytest.approx((w.compute_s - fixed) * 2 * 0.75)
    back = G.threaded(w1, 2, 0.75)
    h = M.halo_of_grid(w.cells, 1, w.dims)
    assert M.predict(back, h, NET, SHM, M.Layout(4, threads=2)).compute_s == pytest.approx(
        M.predict(w, h, NET, SHM, M.Layout(4)).compute_s, rel=1e-12)


def test_two_level_placement_sends_fewer_cells_across_nodes():
    mesh = box((16, 16, 16), (1.0, 1.0, 1.0))
    ni = mesh.n_internal
    hs = {p: M.halo_of_partition(mesh.owner[:ni], mesh.neighbour, decompose(mesh, p, "metis"), p)
          for p in (1, 4, 16)}
    placed = G.placed_halos(mesh, "metis", hs, per_node=4)
    assert set(placed) == {16}  # 4 ranks fit one node: nothing to place
    block, nodes = placed[16]
    assert block is hs[16]
    assert nodes.cells.sum() == mesh.n_cells
    assert G.cross_node_cells(nodes, 4) < G.cross_node_cells(block, 4)
    # every message of a one-node layout stays on the node
    assert G.cross_node_cells(block, 16) == 0
    (r,) = [r for r in G.gains(workload(cells=mesh.n_cells, dims=3), hs, placed, NET, SHM,
                               M.Layout(4), 1.0) if r["ranks"] == 16]
    assert r["placed_cross_node_cells"] < r["cross_node_cells"]
    assert r["placed_step_s"] > 0 and r["metis_block_step_s"] == pytest.approx(r["step_s"])


def test_grid_decomposition_is_priced_on_the_same_mesh():
    """15³ by RCB into 8 parts: staircase cuts, more neighbours than the 3 of a corner box;
    the ``grid`` halos have at most 3 (the grid with the lightest largest part: slabs), and
    a latency-bound network prices them cheaper."""
    mesh = box((15, 15, 15), (1.0, 1.0, 1.0))
    ni = mesh.n_internal
    hs = {p: M.halo_of_partition(mesh.owner[:ni], mesh.neighbour, decompose(mesh, p, "rcb"), p)
          for p in (1, 8)}
    grid = G.alternative_halos(mesh, "rcb", hs)
    assert set(grid) == {8} and grid[8].cells.sum() == mesh.n_cells
    assert G.alternative_halos(mesh, "grid", hs) == {}  # the run's own halos
    (r,) = G.gains(workload(cells=mesh.n_cells, dims=3), hs, {}, M.network("gige-tcp"), SHM,
                   M.Layout(1), 1.0, grid)
    assert r["grid_neighbours"] <= 3 < r["neighbours"]
    assert r["grid_step_s"] < r["step_s"]


def test_measured_imbalance_of_a_multi_rank_profile():
    prof = synthetic_profile()
    assert G.measured_imbalance(prof) is None  # one rank
    prof.update(ranks=2, compute_s={"mean": 3.0, "max": 4.5, "min": 1.5})
    imb = G.measured_imbalance(prof)
    assert imb["imbalance"] == pytest.approx(1.5)
    assert imb["saving_s_per_step"] == pytest.approx(0.15)  # (4.5 - 3.0) / 10 steps


def test_predict_prints_and_writes_what_would_pay(tmp_path, capsys, shm_file):  # noqa: F811
    prof = tmp_path / "run" / "profile.json"
    prof.parent.mkdir()
    doc = synthetic_profile()
    doc.update(ranks=2, compute_s={"mean": 3.0, "max": 4.5, "min": 1.5})
    prof.write_text(json.dumps(doc))
    out = tmp_path / "pred"
    rc, text, err = _cli(capsys, "--profile", str(prof), "--network", "gige-tcp",
                         "--ranks", "1..16", "--cores-per-node", "4", "--shm", str(shm_file),
                         "--thread-efficiency", "0.8", "-o", str(out))
    assert rc == 0, err
    assert "what would pay on gige-tcp" in text and "efficiency 0.8 (given)" in text
    assert "compute was imbalanced 1.50x" in text
    s = json.loads((out / "predict.json").read_text())
    rows = s["networks"][0]["gains"]
    assert [r["ranks"] for r in rows] == [2, 4, 8, 16]
    assert all(r["balanced_step_s"] <= r["step_s"] * (1 + 1e-12) for r in rows)
    assert s["measured_imbalance"]["ranks"] == 2
    for bad in ("0", "1.5"):
        rc, _, err = _cli(capsys, "--profile", str(prof), "--shm", str(shm_file),
                          "--thread-efficiency", bad)
        assert rc == 2 and "--thread-efficiency" in err and err.count("\n") == 1
