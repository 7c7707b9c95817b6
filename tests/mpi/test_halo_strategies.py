"""Real ``mpiexec`` jobs for the five halo strategies: ghosts, counters, bitwise-equal runs.

Ghost patterns come from hypothesis, of two kinds:

- ``synthetic``: random owned counts, a random symmetric neighbour graph (possibly with
  isolated ranks), and per direction a random number of send cells in random order, built
  straight into the five attributes an exchanger reads (the contract AMG levels rely on);
- ``mesh``: a small box with a random cell-to-rank map, cut by ``build_local`` (ranks may
  own nothing, or be cut off from everyone).

For each pattern, every strategy with each staging (host, device, device-aware; the device
emulated by the cpu backend) and a random field count must
fill every ghost exactly, and count messages, bytes and staging copies by the formulas of
``parallel/halo/staging.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mpi4py import MPI

from haloflow.mesh.blocks import box
from haloflow.parallel import halo
from haloflow.parallel.halo import STRATEGIES
from haloflow.parallel.local import build_local
from tests.fieldio import read_fields

EXAMPLES = 40


@st.composite
def synthetic(draw, P):
    owned = draw(st.lists(st.integers(1, 12), min_size=P, max_size=P))
    pairs = [(p, q) for p in range(P) for q in range(p + 1, P)]
    edges = draw(st.lists(st.sampled_from(pairs), unique=True)) if pairs else []
    if P > 1 and draw(st.booleans()):  # cut one rank off from everyone
        lone = draw(st.integers(0, P - 1))
        edges = [e for e in edges if lone not in e]
    send = {}  # (p, q): p's local cells that q receives, in q's ghost order
    for p, q in edges:
        for a, b in ((p, q), (q, p)):
            n = draw(st.integers(1, owned[a]))
            send[a, b] = draw(st.permutations(range(owned[a])))[:n]
    return ("synthetic", owned, sorted(send.items()))


@st.composite
def mesh_parts(draw, P):
    nx, ny, nz = draw(st.integers(2, 5)), draw(st.integers(1, 4)), draw(st.integers(1, 2))
    parts = draw(st.lists(st.integers(0, P - 1), min_size=nx * ny * nz, max_size=nx * ny * nz))
    return ("mesh", (nx, ny, nz), parts)


def build(spec, comm):
    """This rank's pattern object and the global id of each of its cells."""
    if spec[0] == "mesh":
        _, cells, parts = spec
        lm = build_local(box(cells, (1.0, 1.0, 1.0)), np.asarray(parts, dtype=np.int64),
                         comm.rank)
        return lm, lm.global_cells
    _, owned, send = spec
    send = dict(send)
    me = comm.rank
    first = np.concatenate([[0], np.cumsum(owned)])
    nbrs = sorted({q for p, q in send if p == me})
    send_cells, send_ptr, recv_ptr, ghosts = [], [0], [0], []
    for q in nbrs:
        send_cells += send[me, q]
        send_ptr.append(len(send_cells))
        ghosts += [first[q] + c for c in send[q, me]]
        recv_ptr.append(len(ghosts))
    lm = SimpleNamespace(n_owned=owned[me], neighbours=np.array(nbrs, dtype=np.int64),
                         send_ptr=np.array(send_ptr), send_cells=np.array(send_cells, int),
                         recv_ptr=np.array(recv_ptr))
    gids = np.concatenate([first[me] + np.arange(owned[me]), np.array(ghosts, dtype=np.int64)])
    return lm, gids


def expected_counts(name, staging, m, lm, n_cells):
    n = len(lm.neighbours)
    s2, r2 = int(lm.send_ptr[-1]), int(lm.recv_ptr[-1])
    out = {"calls": 1, "messages": (m * n if name == "perfield" else n), "bytes": 8 * m * s2,
           "copies": 0, "copy_bytes": 0}
    if staging == "device" and n:
        if name == "perfield":  # whole fields: 2M copies, 2 M S1 values
            out["copies"], out["copy_bytes"] = 2 * m, 2 * m * n_cells * 8
        elif name == "packed":  # per neighbour and field: 2 M N copies
            out["copies"], out["copy_bytes"] = 2 * m * n, 8 * m * (s2 + r2)
        else:  # one aggregated buffer each way
            out["copies"], out["copy_bytes"] = 2, 8 * m * (s2 + r2)
    return out


def check(spec, m, salt, comm) -> list[str]:
    """Every strategy and staging on this draw; returns this rank's complaints."""
    lm, gids = build(spec, comm)
    n_own, n_cells = lm.n_owned, len(gids)
    errs = []
    for staging in halo.STAGING:
        for name in halo.STRATEGIES:
            ex = halo.make(name, lm, comm, staging=staging)
            want = [np.sin(gids * (1.37 + j) + salt) * 1e3 for j in range(m)]
            fields = [w.copy() for w in want]
            for f in fields:
                f[n_own:] = np.nan
            if name == "overlap" or salt % 2:
                ex.finish(ex.start(fields))
            else:
                ex.exchange(fields)
            what = f"rank {comm.rank} {name}/{staging} m={m}"
            for j, (f, w) in enumerate(zip(fields, want, strict=True)):
                bad = np.flatnonzero(f != w)
                if len(bad):
                    errs.append(f"{what}: field {j}: {len(bad)} wrong cells, first local "
                                f"{bad[0]} = {f[bad[0]]!r}, expected {w[bad[0]]!r}")
            got = ex.stats.as_dict()
            for k, v in expected_counts(name, staging, m, lm, n_cells).items():
                if got[k] != v:
                    errs.append(f"{what}: {k} = {got[k]}, expected {v}")
            ex.close()
    return errs


def serve(spec, m, salt, comm) -> list[str]:
    try:
        errs = check(spec, m, salt, comm)
    except Exception:  # noqa: BLE001 - report, the other ranks may be stuck anyway
        errs = [f"rank {comm.rank}: {traceback.format_exc()}"]
    return [e for errs_r in comm.allgather(errs) for e in errs_r]


def _ok(res):
    assert res.returncode == 0, f"--- stdout ---\n{res.stdout}\n--- stderr ---\n{res.stderr}"
    return res


@pytest.mark.parallel(ranks=[1, 2, 3, 4], timeout=120)
def test_every_strategy_fills_every_ghost(nranks):
    """40 hypothesis patterns, drawn on rank 0 and broadcast so that every rank works on the
    same draw (and shrinking works: the other ranks serve whatever comes)."""
    comm = MPI.COMM_WORLD
    assert comm.size == nranks
    examples = []

    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(spec=st.one_of(synthetic(nranks), mesh_parts(nranks)), m=st.integers(1, 4),
           salt=st.integers(0, 9))
    def every_draw(spec, m, salt):
        examples.append(spec)
        comm.bcast((spec, m, salt), root=0)
        errs = serve(spec, m, salt, comm)
        assert not errs, "\n".join(errs)

    if comm.rank == 0:
        try:
            every_draw()
        finally:
            comm.bcast(None, root=0)
        assert len(examples) >= EXAMPLES
    else:
        while (job := comm.bcast(None, root=0)) is not None:
            serve(*job, comm)


@pytest.mark.mpi
def test_cavity_bitwise_identical_across_strategies(haloflow_mpi, tmp_path):
    """20 steps of the 16² cavity on 3 ranks: U and p equal bit for bit for every strategy,
    and with device staging (copies counted) and device-aware staging (none)."""
    ref = None
    runs = [(name, "host") for name in STRATEGIES] + [("packed", "device"),
                                                      ("aggregated", "device-aware")]
    for name, staging in runs:
        out = tmp_path / f"{name}-{staging}"
        _ok(haloflow_mpi(3, "run", "cavity", "-o", str(out), "--set", "mesh.cells=[16,16,1]",
                         "--steps", "20", "--halo", name, "--staging", staging, "--quiet",
                         "--set", "output.plots=false", "--set", "postprocess.cavity=false",
                         timeout=120))
        s = json.loads((out / "summary.json").read_text())
        assert (s["halo"], s["staging"], s["steps"], s["ranks"]) == (name, staging, 20, 3)
        copies = [h["copies"] for h in s["halo_stats"]]
        assert all(c > 0 for c in copies) if staging == "device" else not any(copies)
        f = read_fields(out)
        if ref is None:
            ref = f
            continue
        for k in ("U", "p"):
            assert np.array_equal(f[k], ref[k]), f"{name}/{staging}: {k} differs from {runs[0][0]}"


@pytest.mark.mpi
def test_bench_halo_writes_table_json_and_chart(haloflow_mpi, tmp_path):
    """``bench halo`` on 2 ranks with device staging: rows for every strategy and the
    Sendrecv floor, copy counts by the formulas, bitwise-equal SpMV products, a PNG."""
    out = tmp_path / "bench.json"
    res = _ok(haloflow_mpi(2, "bench", "halo", "--set", "mesh.cells=[12,12,1]", "--fields",
                           "1,3", "--repeat", "20", "--warmup", "2", "--staging", "device",
                           "--spmv", "-o", str(out), timeout=120))
    assert "x sendrecv" in res.stdout
    data = json.loads(out.read_text())
    assert out.with_suffix(".png").stat().st_size > 0
    rows = {(r["strategy"], r["fields"]): r for r in data["rows"]}
    assert set(rows) == {(s, m) for s in ["sendrecv", *STRATEGIES] for m in (1, 3)}
    assert data["neighbours_per_rank"] == [1, 1]
    for m in (1, 3):  # summed over 2 ranks with one neighbour each
        assert rows["perfield", m]["messages"] == 2 * m
        assert rows["packed", m]["messages"] == rows["aggregated", m]["messages"] == 2
        assert rows["perfield", m]["copies"] == 2 * 2 * m
        assert rows["packed", m]["copies"] == 2 * 2 * m
        assert rows["aggregated", m]["copies"] == rows["neighbor", m]["copies"] == 2 * 2
        assert rows["packed", m]["bytes"] == m * rows["packed", 1]["bytes"]
    assert [r["strategy"] for r in data["spmv"]] == [*STRATEGIES, "overlap[packed]"]
    assert all(r["bitwise_equal"] for r in data["spmv"])


def _sim(*args, n=2):
    """``haloflow`` on ``n`` ranks with the cuda backend in numba's CUDA simulator."""
    from tests.mpi.conftest import require_mpiexec, run_mpi

    return run_mpi(require_mpiexec(), n, "-m", "haloflow", *args, timeout=180,
                   env={"NUMBA_ENABLE_CUDASIM": "1"})


@pytest.mark.mpi
@pytest.mark.parametrize("staging", ["device", "device-aware"])
def test_bench_halo_on_the_cuda_simulator(staging, tmp_path):
    """The cuda backend's pack and unpack kernels in numba's simulator, 2 ranks: ghosts
    checked against their owners inside the benchmark, copies and bytes per exchange by the
    formulas (seed 004: whole fields, per neighbour and field, one buffer; none when MPI
    reads device memory)."""
    out = tmp_path / "bench.json"
    _ok(_sim("bench", "halo", "--backend", "cuda", "--staging", staging, "--set",
             "mesh.cells=[8,6,1]", "--set", "parallel.decomposition=simple", "--strategies",
             "perfield,packed,aggregated", "--fields", "1,2", "--repeat", "3", "--warmup", "1",
             "-o", str(out)))
    data = json.loads(out.read_text())
    assert "simulator" in data["space"] and data["backend"] == "cuda"
    assert data["neighbours_per_rank"] == [1, 1]
    rows = {(r["strategy"], r["fields"]): r for r in data["rows"]}
    s1, s2 = 48 // 2 + 6, 6  # cells of a rank's field (owned + ghosts), boundary values sent
    for m in (1, 2):  # per exchange, summed over both ranks
        want = {"perfield": (2 * 2 * m, 2 * 2 * m * s1 * 8),
                "packed": (2 * 2 * m, 2 * 2 * m * s2 * 8),
                "aggregated": (2 * 2, 2 * 2 * m * s2 * 8)}
        for name, (copies, nbytes) in want.items():
            got = rows[name, m]["copies"], rows[name, m]["copy_bytes"]
            assert got == ((copies, nbytes) if staging == "device" else (0, 0)), (name, m)


@pytest.mark.mpi
def test_backend_cuda_without_a_gpu_is_one_line(tmp_path):
    """No GPU and no simulator: exit 2 and one line saying why (skipped where a GPU is, as
    numba sees it in a process of its own without the simulator)."""
    from tests.mpi.conftest import require_mpiexec, run_mpi

    exe = require_mpiexec()
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
    probe = subprocess.run([sys.executable, "-c", "from numba import cuda; "
                            "print(cuda.is_available())"], env=env, capture_output=True,
                           text=True, timeout=120)
    assert probe.returncode == 0 and probe.stdout.strip() in ("True", "False"), probe.stderr
    if probe.stdout.strip() == "True":
        pytest.skip("a CUDA GPU is present")
    res = run_mpi(exe, 1, "-m", "haloflow", "bench", "halo", "--backend", "cuda",
                  "--staging", "device", "--set", "mesh.cells=[4,4,1]", "--repeat", "1",
                  "-o", str(tmp_path / "b.json"), env={"NUMBA_ENABLE_CUDASIM": "0"})
    assert res.returncode == 2, (res.returncode, res.stderr)  # a success here is a failure
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "backend cuda" in lines[0], res.stderr
