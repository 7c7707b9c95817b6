"""The performance model (haloflow.study.model) and `haloflow predict` on synthetic profiles."""

from __future__ import annotations

import json

import numpy as np
import pytest

from haloflow.cli import main
from haloflow.io.netpipe_file import write_out
from haloflow.mesh.blocks import box
from haloflow.parallel.decompose import decompose
from haloflow.parallel.local import build_local
from haloflow.study import model as M
from haloflow.study.node import Node
from haloflow.study.predict import parse_ranks, shm_curve


def synthetic_profile(cells=65536, dims=2, compute=0.3, serial=0.02, exchanges=500.0,
                      allreduces=700.0, mpi_call_s=0.0, kernel_call_s=0.0, levels=(),
                      redundant=None):
    """``redundant``: (allgathers, refreshes, rows, entries) per step of the redundant coarse
    level, as profile.json's ``amg`` section has them; None: an older profile without them."""
    steps = 10
    extra = {} if redundant is None else {
        "allgathers": redundant[0] * steps, "refreshes": redundant[1] * steps,
        "gathered_rows": redundant[2], "gathered_nnz": redundant[3]}
    return {
        "schema": 2, "ranks": 1, "steps": steps, "s_per_step": compute,
        "compute_s": {"mean": compute * steps},
        "phases": {"amg_replicated": {"max": serial * steps, "calls": [8 * steps]}},
        "halo": {"calls": {"mean": exchanges * steps}, "fields": {"mean": 1.2 * exchanges * steps}},
        "per_step": {"allreduces": allreduces, "halo_exchanges": exchanges},
        "amg": {"gathered_rows": 1000, "levels": [
            {"index": i + 1, "rows": r, "distributed": True, "exchanges": c * steps}
            for i, (r, c) in enumerate(levels)], **extra},
        "mesh": {"cells": cells, "dims": dims},
        "machine": {"mpi_call_s": mpi_call_s, "kernel_call_s": kernel_call_s},
        "case": {"name": "synthetic", "threads": 1},
    }


def workload(**kw):
    return M.Workload.from_profile(synthetic_profile(**kw))


def grid_halos(w, ranks):
    return {p: M.halo_of_grid(w.cells, p, w.dims) for p in ranks}


RANKS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]


def test_doubling_latency_doubles_the_latency_term():
    w = workload(levels=[(16384, 100.0)])
    fast = M.Curve.hockney("a", 5e-6, 1e30)
    slow = M.Curve.hockney("b", 10e-6, 1e30)
    for p in (2, 16, 256):
        h = M.halo_of_grid(w.cells, p, w.dims)
        a = M.predict(w, h, fast, fast, cores_per_node=1)
        b = M.predict(w, h, slow, slow, cores_per_node=1)
        assert a.halo_s > 0 and a.reduce_s > 0
        assert b.halo_s == pytest.approx(2 * a.halo_s, rel=1e-9)
        assert b.reduce_s == pytest.approx(2 * a.reduce_s, rel=1e-9)
        assert b.compute_s == a.compute_s


def test_halo_parts_split_the_halo_by_level():
    """The mesh's exchanges and each coarse level's add up to the halo term; a level is
    priced by its calls and its smaller interfaces; the busiest rank's messages counted."""
    w = workload(levels=[(16384, 100.0), (4096, 40.0)])
    net = M.Curve.hockney("lat", 2e-6, 1e30)  # latency only: every message 2 us
    h = M.halo_of_grid(w.cells, 16, w.dims)  # a 4 x 4 grid of ranks: at most 4 neighbours
    p = M.predict(w, h, net, net, cores_per_node=1)
    names = [k for k, _ in p.halo_parts]
    assert names == ["mesh", 16384, 4096]
    assert sum(t for _, t in p.halo_parts) == pytest.approx(p.halo_s, rel=1e-12)
    assert p.messages == 4
    mesh, lv1, lv2 = (t for _, t in p.halo_parts)
    assert mesh == pytest.approx(w.exchanges * 4 * 2e-6, rel=1e-9)
    assert lv1 == pytest.approx(100.0 * 4 * 2e-6, rel=1e-9)
    assert lv2 == pytest.approx(40.0 * 4 * 2e-6, rel=1e-9)
    row = M.summary([M.predict(w, M.halo_of_grid(w.cells, 1, 2), net, net, 1), p])["rows"][1]
    assert row["halo_parts"] == [list(x) for x in p.halo_parts]
    assert row["messages_per_exchange"] == 4


def test_bandwidth_term_scales_with_bytes():
    w = workload()
    net = M.Curve.hockney("bw", 0.0, 1e8)
    h2, h8 = (M.halo_of_grid(w.cells, p, 2) for p in (2, 8))
    a = M.predict(w, h2, net, net, 1)
    # two ranks of a 256 x 256 square: one neighbour, 256 values of 1.2 fields each
    assert a.halo_s == pytest.approx(w.exchanges * 256 * 8 * 1.2 / 1e8, rel=1e-6)
    assert M.predict(w, h8, net, net, 1).halo_s < 2 * a.halo_s  # smaller faces per rank


def test_more_ranks_never_increase_compute_per_rank():
    w = workload(kernel_call_s=1e-6)
    net = M.network("infiniband-sdr")
    compute = [M.predict(w, h, net, net, 16).compute_s for h in grid_halos(w, RANKS).values()]
    assert all(b <= a for a, b in zip(compute, compute[1:], strict=False))
    assert compute[-1] >= w.serial_s + w.floor_s  # the fixed part stays


def test_exact_partitions_compute_monotone():
    mesh = box((24, 24, 1))
    w = workload(cells=mesh.n_cells)
    ni = mesh.n_internal
    net = M.network("gige-tcp")
    compute = []
    for p in (1, 2, 4, 8, 16):
        parts = decompose(mesh, p, "metis")
        h = M.halo_of_partition(mesh.owner[:ni], mesh.neighbour, parts, p)
        compute.append(M.predict(w, h, net, net, 4).compute_s)
    assert all(b <= a * 1.0001 for a, b in zip(compute, compute[1:], strict=False))


def test_peak_moves_to_fewer_ranks_on_a_slower_network():
    w = workload(kernel_call_s=1e-6, mpi_call_s=1e-6)
    hs = grid_halos(w, RANKS)
    shm = M.Curve.hockney("shm", 0.5e-6, 10e9)
    peaks = {}
    for name in ("infiniband-fdr", "infiniband-sdr", "gige-tcp"):
        s = M.summary(M.sweep(w, hs, M.network(name), shm, cores_per_node=8))
        peaks[name] = s["peak"]["ranks"]
        assert s["rows"][0]["speedup"] == pytest.approx(1.0)
    assert peaks["gige-tcp"] < peaks["infiniband-sdr"] <= peaks["infiniband-fdr"]


def test_intra_node_messages_use_the_shared_memory_curve():
    w = workload()
    h = M.halo_of_grid(w.cells, 4, 2)
    slow = M.Curve.hockney("slow", 1e-3, 1e6)
    shm = M.Curve.hockney("shm", 1e-6, 1e10)
    inside = M.predict(w, h, slow, shm, cores_per_node=4)  # one node: never the network
    assert inside.halo_s == pytest.approx(M.predict(w, h, shm, shm, 4).halo_s)
    assert M.predict(w, h, slow, shm, cores_per_node=1).halo_s > 100 * inside.halo_s


def test_serial_work_bounds_the_speedup():
    w = workload(compute=1.0, serial=0.1)
    net = M.Curve.hockney("free", 0.0, 1e30)
    s = M.summary(M.sweep(w, grid_halos(w, RANKS), net, net, 1024))
    assert max(r["speedup"] for r in s["rows"]) < 10.0  # Amdahl: 1 / 0.1


def test_redundant_coarse_solve_costs_one_allgather_per_visit():
    """Every rank solves the coarse level whole: its time stays at every rank count, and each
    visit costs one allgather of its right-hand side (ceil(log2 P) latencies plus the
    (P - 1) / P of its bytes every rank receives), each refresh one of its entries."""
    G, F, n, nnz = 90.0, 2.0, 300, 4000
    w = M.Workload.from_profile(synthetic_profile(serial=0.01, redundant=(G, F, n, nnz)))
    assert (w.gathers, w.refreshes, w.gathered_rows, w.gathered_nnz) == (G, F, n, nnz)
    lat, bw = 10e-6, 1e9
    net = M.Curve.hockney("n", lat, bw)
    for p in (1, 2, 3, 8, 64):
        pr = M.predict(w, M.halo_of_grid(w.cells, p, w.dims), net, net, cores_per_node=1)
        stages = 0 if p == 1 else int(np.ceil(np.log2(p)))
        want = 0.0 if p == 1 else sum(
            k * (stages * lat + 8 * m * (p - 1) / p / bw) for k, m in ((G, n), (F, nnz)))
        assert pr.gather_s == pytest.approx(want, rel=1e-3, abs=1e-12), p
        assert pr.compute_s >= w.serial_s  # the redundant solve never shrinks
    # latency only: doubling it doubles the term; one node: shared-memory latency
    free = M.Curve.hockney("f", lat, 1e30)
    slow = M.Curve.hockney("s", 2 * lat, 1e30)
    h = M.halo_of_grid(w.cells, 16, w.dims)
    a, b = (M.predict(w, h, c, c, 1).gather_s for c in (free, slow))
    assert b == pytest.approx(2 * a, rel=1e-6) and a == pytest.approx((G + F) * 4 * lat)
    one_node = M.predict(w, h, slow, free, cores_per_node=16).gather_s
    assert one_node == pytest.approx(a, rel=1e-6)


def test_profiles_without_allgather_counts_use_the_phase_calls():
    w = workload()
    assert w.gathers == 8 and w.refreshes == 0  # the amg_replicated calls per step


def test_curve_interpolates_and_extrapolates(tmp_path):
    c = M.Curve.hockney("h", 2e-6, 1e9)
    assert float(c.time(1)) == pytest.approx(2e-6 + 1e-9)
    assert float(c.time(4096)) == pytest.approx(2e-6 + 4096e-9, rel=1e-3)
    assert float(c.time(2**30)) == pytest.approx(2e-6 + 2**30 / 1e9, rel=1e-3)
    assert c.bandwidth == pytest.approx(1e9, rel=1e-3)
    n = np.array([1, 8, 64, 512, 4096, 32768, 262144])
    path = tmp_path / "net.out"
    write_out(path, n, 3e-6 + n / 5e8)
    f = M.network(str(path))
    assert float(f.time(64)) == pytest.approx(3e-6 + 64 / 5e8, rel=1e-3)
    assert f.latency == pytest.approx(3e-6, rel=1e-2)
    assert f.bandwidth == pytest.approx(5e8, rel=1e-2)
    # a slow outlier at the smallest size does not raise the sizes after it
    t = 3e-6 + n / 5e8
    t[0] = 90e-6
    write_out(path, n, t)
    g = M.network(str(path))
    assert g.latency == pytest.approx(float(f.time(8)), rel=1e-2)
    assert float(g.time(64)) == pytest.approx(float(f.time(64)), rel=1e-3)


def test_halo_of_partition_matches_local_meshes():
    mesh = box((12, 10, 3))
    parts = decompose(mesh, 5, "metis")
    h = M.halo_of_partition(mesh.owner[: mesh.n_internal], mesh.neighbour, parts, 5)
    for r in range(5):
        lm = build_local(mesh, parts, r)
        assert h.ghosts[r] == lm.n_ghost
        assert h.neighbours[r] == len(lm.neighbours)
        assert h.cells[r] == lm.n_owned


def test_process_grid_and_grid_halos():
    assert M.process_grid(12, 2) == (4, 3)
    assert M.process_grid(8, 3) == (2, 2, 2)
    h = M.halo_of_grid(65536, 2, 2)
    assert list(h.ghosts) == [256, 256]
    h = M.halo_of_grid(64**3, 8, 3)
    assert set(h.ghosts) == {3 * 32 * 32}


def test_parse_ranks():
    assert parse_ranks("1..16") == [1, 2, 4, 8, 16]
    assert parse_ranks("3..20") == [1, 3, 4, 8, 16, 20]
    assert parse_ranks("6,2") == [1, 2, 6]
    for bad in ("0..4", "a", "4..2", "0", "-1,2"):
        with pytest.raises(M.ModelError):
            parse_ranks(bad)


def test_old_or_foreign_profiles_are_refused():
    with pytest.raises(M.ModelError, match="schema 1"):
        M.Workload.from_profile({"schema": 1}, "p.json")
    with pytest.raises(M.ModelError, match="not a haloflow profile"):
        M.Workload.from_profile({"schema": 2}, "p.json")


@pytest.fixture
def shm_file(tmp_path):
    n = 2 ** np.arange(0, 23)
    path = tmp_path / "shm.out"
    write_out(path, n, 0.5e-6 + n / 1e10)
    return path


def _cli(capsys, *argv):
    rc = main(["predict", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_predict_errors_are_one_line(tmp_path, capsys, shm_file):
    prof = tmp_path / "run" / "profile.json"
    prof.parent.mkdir()
    prof.write_text(json.dumps(synthetic_profile()))
    cases = [
        (["--profile", str(tmp_path / "nope.json")], "no such profile"),
        (["--profile", str(prof), "--network", "token-ring"], "unknown network"),
        (["--profile", str(prof), "--ranks", "0..8"], "--ranks"),
        (["--profile", str(prof), "--cores-per-node", "0"], "--cores-per-node"),
        (["--profile", str(prof), "--network", str(tmp_path / "missing.out")], "missing.out"),
        (["--profile", str(prof), "-o", str(prof.parent)], "not an empty directory"),
    ]
    (tmp_path / "bad.json").write_text("{")
    cases.append((["--profile", str(tmp_path / "bad.json")], "not a readable profile"))
    for argv, msg in cases:
        rc, out, err = _cli(capsys, *argv, "--shm", str(shm_file))
        assert rc == 2, argv
        assert msg in err and err.count("\n") == 1, err


def test_predict_writes_table_csv_json_and_plots(tmp_path, capsys, shm_file):
    prof = tmp_path / "run" / "profile.json"
    prof.parent.mkdir()
    prof.write_text(json.dumps(synthetic_profile()))
    out = tmp_path / "pred"
    rc, text, err = _cli(capsys, "--profile", str(prof), "--network", "gige-tcp,infiniband-fdr",
                         "--ranks", "1..64", "--cores-per-node", "4", "--shm", str(shm_file),
                         "--compare", "-o", str(out))
    assert rc == 0, err
    assert "speedup peaks at" in text and "network gige-tcp" in text
    doc = json.loads((out / "predict.json").read_text())
    assert [s["network"] for s in doc["networks"]] == ["gige-tcp", "infiniband-fdr"]
    assert not doc["exact_partitions"]  # no case.toml beside the profile: a process grid
    rows = (out / "predict.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 7
    assert (out / "plots" / "predict-compare.png").stat().st_size > 10_000


def test_predict_prices_alternatives_and_names_the_fastest(tmp_path, capsys, shm_file):
    """``--alternative``: the same case run another way, priced on the same partitions; a
    solve that computes more but exchanges less wins only from some rank count on, and the
    table says so.  Each column is the model's own prediction of that profile."""
    runs = {"lean": synthetic_profile(compute=0.4, exchanges=100.0, allreduces=100.0),
            "busy": synthetic_profile(compute=0.3, exchanges=900.0, allreduces=900.0)}
    for name, doc in runs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "profile.json").write_text(json.dumps(doc))
    out = tmp_path / "pred"
    rc, text, err = _cli(capsys, "--profile", str(tmp_path / "busy" / "profile.json"),
                         "--alternative", str(tmp_path / "lean"), "--network", "gige-tcp",
                         "--ranks", "1..64", "--shm", str(shm_file), "--cores-per-node", "4",
                         "-o", str(out))
    assert rc == 0, err
    doc = json.loads((out / "predict.json").read_text())
    choice = doc["networks"][0]["choices"]
    assert choice["labels"] == ["busy", "lean"]
    best = [r["best"] for r in choice["rows"]]
    assert best[0] == "busy" and best[-1] == "lean"  # one rank computes; 64 ranks talk
    first_lean = next(r["ranks"] for r in choice["rows"] if r["best"] == "lean")
    assert f"take busy from 1 ranks, then lean from {first_lean} ranks" in text
    lean = M.Workload.from_profile(runs["lean"])
    for r in choice["rows"]:
        h = M.halo_of_grid(lean.cells, r["ranks"], lean.dims)
        want = M.predict(lean, h, M.network("gige-tcp"), shm_curve(shm_file), 4).step_s
        assert r["step_s"]["lean"] == pytest.approx(want, rel=1e-12)
    other = tmp_path / "other"
    other.mkdir()
    (other / "profile.json").write_text(json.dumps(synthetic_profile(cells=4096)))
    rc, _, err = _cli(capsys, "--profile", str(tmp_path / "busy"), "--alternative", str(other),
                      "--shm", str(shm_file))
    assert rc == 2 and "expected the same case" in err and err.count("\n") == 1


def test_calls_from_compiled_code_pay_no_python_call_cost():
    """The per-call floor and the Python layer's MPI call cost are charged only to calls made
    from Python: the compiled pressure solve's exchanges and allreduces pay the wire alone."""
    kw = dict(exchanges=500.0, allreduces=700.0, mpi_call_s=4e-6, kernel_call_s=1e-6,
              levels=[(16384, 100.0)])
    python = M.Workload.from_profile(synthetic_profile(**kw))
    prof = synthetic_profile(**kw)
    prof["per_step"].update(compiled_exchanges=300.0, compiled_allreduces=600.0)
    prof["amg"]["levels"][0]["compiled_exchanges"] = prof["amg"]["levels"][0]["exchanges"]
    compiled = M.Workload.from_profile(prof)
    # floor: CALLS_PER_OP x kernel_call_s x Python calls (the 1-rank coarse calls included)
    assert python.floor_s == pytest.approx(M.CALLS_PER_OP * 1e-6 * (500 + 700 + 100))
    assert compiled.floor_s == pytest.approx(M.CALLS_PER_OP * 1e-6 * (200 + 100))
    net = M.Curve.hockney("n", 2e-6, 1e9)
    for p in (2, 64):
        h = M.halo_of_grid(python.cells, p, python.dims)
        a = M.predict(python, h, net, net, cores_per_node=1)
        b = M.predict(compiled, h, net, net, cores_per_node=1)
        assert a.reduce_s - b.reduce_s == pytest.approx(600 * 4e-6, rel=1e-9)
        assert a.halo_s == b.halo_s  # the messages themselves cost the same


# -- other CPUs, shared memory bandwidth, host overhead (issue 18) ------------------------------

def test_halving_cpu_speed_doubles_compute():
    w = workload(kernel_call_s=1e-6)
    net = M.network("gige-tcp")
    for p in (1, 4):
        h = M.halo_of_grid(w.cells, p, w.dims)
        base = M.predict(w, h, net, net, M.Layout(4))
        slow = M.predict(w, h, net, net, M.Layout(4, node=Node(cpu_speed=0.5)))
        assert slow.compute_s == pytest.approx(2 * base.compute_s, rel=1e-12)
        assert slow.halo_s == base.halo_s  # the network does not change


def test_ranks_sharing_a_nodes_bandwidth_are_slower_per_cell_when_memory_bound():
    w = workload(serial=0.0)
    net = M.network("infiniband-fdr")
    node = Node(node_bandwidth=20e9, calib_bandwidth=15.7e9)  # memory-bound: the default bound
    per_cell = {}
    for p in (1, 2):
        h = M.halo_of_grid(w.cells, p, w.dims)
        per_cell[p] = M.predict(w, h, net, net, M.Layout(2, node=node)).compute_s * p / w.cells
    assert per_cell[1] == pytest.approx(w.compute_s / w.cells, rel=1e-12)  # one core: as here
    assert per_cell[2] == pytest.approx(per_cell[1] * 15.7 / 10.0, rel=1e-9)  # 10 GB/s each
    # one rank per node keeps each its own node's bandwidth
    h2 = M.halo_of_grid(w.cells, 2, w.dims)
    apart = M.predict(w, h2, net, net, M.Layout(1, node=node)).compute_s * 2 / w.cells
    assert apart == pytest.approx(per_cell[1], rel=1e-12)
    # a compute-bound case (few bytes per cell) does not care
    light = Node(node_bandwidth=20e9, calib_bandwidth=15.7e9, bytes_per_cell=1.0)
    one, two = (M.predict(w, M.halo_of_grid(w.cells, p, 2), net, net,
                          M.Layout(2, node=light)).compute_s * p for p in (1, 2))
    assert two == pytest.approx(one, rel=1e-3)


def test_tcp_overhead_grows_with_messages():
    tcp = M.network("gige-tcp")
    assert tcp.overhead == pytest.approx(10.7e-6)
    assert tcp.sequence([8.0]) == pytest.approx(float(tcp.time(8.0)))
    # back to back, each further message costs its CPU and bytes, not the whole latency
    step = tcp.sequence([8.0] * 5) - tcp.sequence([8.0] * 4)
    assert 2 * tcp.overhead < step < float(tcp.time(8.0))
    w = workload(exchanges=100.0, allreduces=0.0)
    stack = [M.predict(w, M.halo_of_grid(w.cells, p, 2), tcp, tcp, 1).stack_s for p in (2, 4, 16)]
    assert 0 < stack[0] < stack[1] < stack[2]  # 1, 2, then 4 neighbours per rank
    per_msg = 2 * (tcp.overhead + tcp.o_byte * 8 * 1.2 * 256)  # two ranks: one 256-cell face
    assert stack[0] == pytest.approx(w.exchanges * per_msg, rel=1e-6)
    # an unknown overhead (a bare .out curve) never credits overlap: messages add up whole
    bare = M.Curve.hockney("bare", 50e-6, 1e8)
    assert bare.sequence([8.0] * 3) == pytest.approx(3 * float(bare.time(8.0)))


def test_netpipe_cpu_fit_beside_an_out_file_gives_the_overhead(tmp_path):
    out = tmp_path / "tcp.out"
    write_out(out, [1, 1024, 65536], [26e-6, 40e-6, 700e-6])
    assert M.network(str(out)).o is None
    side = {"small_us": 11.0, "per_byte_ns": 0.1, "o_us": 10.0}
    out.with_suffix(".json").write_text(json.dumps({"cpu": {"first": side, "other": side}}))
    c = M.network(str(out))
    assert c.o == pytest.approx(11e-6) and c.o_byte == pytest.approx(0.1e-9)


def test_predict_target_machine_options(tmp_path, capsys, shm_file):
    prof = tmp_path / "run" / "profile.json"
    prof.parent.mkdir()
    prof.write_text(json.dumps(synthetic_profile()))
    base = ["--profile", str(prof), "--ranks", "1,2", "--shm", str(shm_file), "--quiet"]
    for bad, msg in ((["--cpu-speed", "0"], "--cpu-speed"),
                     (["--node-bandwidth", "nan"], "--node-bandwidth"),
                     (["--threads-per-rank", "0"], "--threads-per-rank")):
        rc, _, err = _cli(capsys, *base, *bad)
        assert rc == 2 and msg in err and err.count("\n") == 1, err
    out = tmp_path / "pred"
    rc, _, err = _cli(capsys, *base, "--cpu-speed", "0.5", "--node-bandwidth", "10",
                      "--calib-bandwidth", "8", "--cores-per-node", "2", "-o", str(out))
    assert rc == 0, err
    doc = json.loads((out / "predict.json").read_text())
    rows = doc["networks"][0]["rows"]
    # memory-bound (the default bound) on half-speed cores: a core streams 8 x 0.5 GB/s
    assert rows[0]["compute_s"] == pytest.approx(2 * 0.3, rel=1e-9)
    assert doc["node"]["cpu_speed"] == 0.5 and "stack_s" in rows[1]


def test_threads_per_rank_fill_nodes_and_divide_compute():
    w = workload()
    net = M.network("gige-tcp")
    h = M.halo_of_grid(w.cells, 4, w.dims)
    one = M.predict(w, h, net, net, M.Layout(4))
    two = M.predict(w, h, net, net, M.Layout(4, threads=2))
    assert (one.nodes, two.nodes) == (1, 2)  # 4 cores: 4 ranks of 1 thread, or 2 of 2
    fixed = w.serial_s + w.floor_s
    assert two.compute_s - fixed == pytest.approx((one.compute_s - fixed) / 2, rel=1e-12)


def test_triad_measures_a_plausible_bandwidth():
    from haloflow.study.node import triad_bandwidth

    assert 1e8 < triad_bandwidth(repeat=1) < 1e12


def test_counts_are_the_busiest_ranks_and_scale_with_the_iterations():
    """Per step on a hand-made halo: each count is the most over the ranks; the pressure and
    momentum solves' share scales with their iterations, the coarse levels and the
    right-hand-side allgathers with the pressure's; level_ranks is every level on all."""
    prof = synthetic_profile(cells=4096, dims=2, exchanges=100.0, allreduces=50.0,
                             levels=[(1024, 20.0)], redundant=(10.0, 1.0, 64, 300))
    prof["amg"]["levels"].append({"index": 2, "rows": 64, "distributed": False,
                                  "exchanges": 0})
    prof["per_step"].update(p_iters=10.0, u_iters=8.0)
    prof["counts"] = {"phases": {
        "solve_p": {"exchanges": 40.0, "fields": 40.0, "allreduces": 30.0},
        "solve_U": {"exchanges": 16.0, "fields": 48.0, "allreduces": 16.0}}}
    w = M.Workload.from_profile(prof)
    # rank 0 sends 10 and 30 values to ranks 1 and 2; rank 1 sends 20 to rank 0
    h = M.Halo(3, np.array([10, 10, 10]), np.array([0, 0, 1]), np.array([1, 2, 0]),
               np.array([10, 30, 20]))
    c = M.counts(w, h)
    fields = 1.2 * 100.0  # field exchanges per step on the mesh
    coarse = 20.0 * 8 * (max(10 * 0.5, 1) + max(30 * 0.5, 1))  # (1024 / 4096)^(1/2)
    assert c == {"exchanges_per_step": 120.0, "messages_per_step": 2 * 120.0,
                 "bytes_per_step": pytest.approx(8 * 40 * fields + coarse, rel=1e-12),
                 "allreduces_per_step": 50.0, "gathers_per_step": 11.0,
                 "handovers_per_step": 0.0, "level_ranks": [3, 3]}
    s = M.counts(w, h, {"p_iters": 12.0, "u_iters": 4.0})  # 1.2 and 0.5 times the profile's
    mesh = 100.0 + 0.2 * 40.0 - 0.5 * 16.0
    assert s["exchanges_per_step"] == pytest.approx(mesh + 1.2 * 20.0, rel=1e-12)
    assert s["messages_per_step"] == pytest.approx(2 * (mesh + 1.2 * 20.0), rel=1e-12)
    assert s["bytes_per_step"] == pytest.approx(
        8 * 40 * (fields + 0.2 * 40.0 - 0.5 * 48.0) + 1.2 * coarse, rel=1e-12)
    assert s["allreduces_per_step"] == pytest.approx(50.0 + 0.2 * 30.0 - 0.5 * 16.0, rel=1e-12)
    assert s["gathers_per_step"] == pytest.approx(1.2 * 10.0 + 1.0, rel=1e-12)
    one = M.counts(w, M.Halo(1, np.array([4096])))
    assert one["exchanges_per_step"] == 100.0 and one["messages_per_step"] == 0.0
    net = M.network("infiniband-fdr")
    row = M.summary([M.predict(w, h, net, net, 4)])["rows"][0]
    assert {k: row[k] for k in c} == c  # predict.json's rows carry them
