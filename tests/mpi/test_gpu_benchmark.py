"""``benchmarks/gpu.py`` end to end, with numba's CUDA simulator standing in for the GPU.

Times mean nothing there; what is checked is that the script runs every configuration,
checks ghosts (inside ``bench halo``), counts copies by seed 004's formulas and writes its
JSON, and that without a GPU it says so and still records the per-step counts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mpi.conftest import require_mpiexec

REPO = Path(__file__).resolve().parents[2]


def _gpu_py(tmp_path, *args):
    out = tmp_path / "gpu.json"
    res = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu.py"), "--mpiexec",
                          str(require_mpiexec()), "-o", str(out), *args],
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    return res.stdout, json.loads(out.read_text())


@pytest.mark.mpi
def test_gpu_benchmark_in_the_simulator(tmp_path):
    out, data = _gpu_py(tmp_path, "--simulator", "--cells", "6", "--ranks", "2", "--fields",
                        "1,2", "--repeat", "2", "--warmup", "1", "--no-per-step",
                        "--solve-cells", "12", "--solve-steps", "2", "--solve-repeat", "1")
    assert data["gpu"] == "numba's CUDA simulator" and "floor" in data
    solve = {r["backend"]: r for r in data["cavity_step"]}
    assert set(solve) == {"cpu", "cuda"} and not any("error" in r for r in solve.values())
    assert solve["cuda"]["p_iters_mean"] == solve["cpu"]["p_iters_mean"]
    assert solve["cuda"]["to_device_bytes_per_step"] > 0 and "to_host_per_step" not in solve["cpu"]
    got = {r["label"]: r["data"] for r in data["results"]}
    assert set(got) == {"cpu/host", "cuda/device", "cuda/device-aware"}
    assert not any("error" in d for d in got.values()), got
    rows = {(r["strategy"], r["fields"]): r for r in got["cuda/device"]["rows"]}
    n = sum(got["cuda/device"]["neighbours_per_rank"])  # neighbour pairs, both directions
    for m in (1, 2):
        assert rows["perfield", m]["copies"] == 2 * m * 2  # 2 ranks, 2M each
        assert rows["packed", m]["copies"] == 2 * m * n
        assert rows["aggregated", m]["copies"] == 2 * 2
    assert all(r["copies"] == 0 for r in got["cuda/device-aware"]["rows"])
    assert "cuda/device-aware" in out and (tmp_path / "gpu.png").stat().st_size > 0


@pytest.mark.mpi
def test_gpu_benchmark_without_a_gpu(tmp_path):
    from numba import cuda

    if cuda.is_available():
        pytest.skip("a CUDA GPU is present")
    out, data = _gpu_py(tmp_path, "--step-cells", "6", "--steps", "1")
    assert "no GPU here" in out and data["gpu"] is None and data["results"] == []
    per = {r["strategy"]: r for r in data["per_step"]}
    assert set(per) == {"perfield", "packed", "aggregated"}
    assert all(r["copies_per_step"] > 0 for r in per.values())
    # one buffer each way against per field: aggregated never copies more often
    assert per["aggregated"]["copies_per_step"] <= per["packed"]["copies_per_step"]
    assert per["perfield"]["copy_bytes_per_step"] > per["packed"]["copy_bytes_per_step"]
