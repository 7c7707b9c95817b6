"""Real ``mpiexec`` jobs for the five halo strategies: ghosts, counters, bitwise-equal runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from haloflow.parallel.halo import STRATEGIES
from tests.fieldio import read_fields

SCRIPT = Path(__file__).with_name("halo_property.py")


def _ok(res):
    assert res.returncode == 0, f"--- stdout ---\n{res.stdout}\n--- stderr ---\n{res.stderr}"
    return res


@pytest.mark.mpi
@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
def test_every_strategy_fills_every_ghost(mpirun, nranks):
    """hypothesis patterns (see halo_property.py): exact ghosts and counter formulas."""
    res = _ok(mpirun(nranks, SCRIPT, "40", timeout=120))
    assert res.stdout.strip().splitlines()[-1] == "OK 40"


@pytest.mark.mpi
def test_cavity_bitwise_identical_across_strategies(haloflow_mpi, tmp_path):
    """20 steps of the 16² cavity on 3 ranks: U and p equal bit for bit for every strategy,
    and with device staging, whose copies are counted."""
    ref = None
    runs = [(name, "host") for name in STRATEGIES] + [("packed", "device")]
    for name, staging in runs:
        out = tmp_path / f"{name}-{staging}"
        _ok(haloflow_mpi(3, "run", "cavity", "-o", str(out), "--set", "mesh.cells=[16,16,1]",
                         "--steps", "20", "--halo", name, "--staging", staging, "--quiet",
                         "--set", "output.plots=false", "--set", "postprocess.cavity=false",
                         timeout=120))
        s = json.loads((out / "summary.json").read_text())
        assert (s["halo"], s["staging"], s["steps"]) == (name, staging, 20)
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
