"""``haloflow decompose`` then ``haloflow run --decomposed``: each rank reads its own part, and
the run equals one that partitions the mesh itself, bit for bit (the same parts)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.fieldio import read_fields
from tests.limited import haloflow, one_line

CAVITY = ["--set", "mesh.cells=[20,18,1]", "--set", "parallel.decomposition=metis"]
RUN = ["--steps", "6", "--quiet", "--set", "output.plots=false",
       "--set", "postprocess.cavity=false"]
TGV = ["--set", "mesh.cells=[8,8,8]", "--set", "parallel.decomposition=rcb"]


def _decompose(tmp_path, name, case, n, sets):
    out = tmp_path / name
    res = haloflow("decompose", case, "-n", str(n), "-o", out, *sets)
    assert res.returncode == 0, res.stderr
    return out


@pytest.mark.mpi
@pytest.mark.parametrize("case,sets,n", [("cavity", CAVITY, 3), ("taylor_green", TGV, 2)])
def test_a_decomposed_run_equals_one_that_partitions(haloflow_mpi, tmp_path, case, sets, n):
    parts = _decompose(tmp_path, "parts", case, n, sets)
    index = json.loads((parts / "decomposition.json").read_text())
    assert index["ranks"] == n and sum(p["n_owned"] for p in index["parts"]) == index["n_cells"]
    fields = {}
    for how, extra in (("itself", []), ("decomposed", ["--decomposed", str(parts)])):
        res = haloflow_mpi(n, "run", case, "-o", str(tmp_path / how), *sets, *RUN, *extra)
        assert res.returncode == 0, res.stderr
        fields[how] = read_fields(tmp_path / how, case)
    for k in ("U", "p", "rank"):
        assert np.array_equal(fields["itself"][k], fields["decomposed"][k]), k


@pytest.mark.mpi
def test_a_decomposed_run_restarts_on_another_rank_count(haloflow_mpi, tmp_path):
    parts = _decompose(tmp_path, "parts", "cavity", 3, CAVITY)
    ck = ["--set", "output.checkpoint_every=3"]
    res = haloflow_mpi(3, "run", "cavity", "-o", str(tmp_path / "a"), *CAVITY, *RUN, *ck,
                       "--decomposed", str(parts))
    assert res.returncode == 0, res.stderr
    res = haloflow_mpi(2, "run", "--restart", str(tmp_path / "a"), "-o", str(tmp_path / "b"),
                       "--steps", "9", "--quiet")
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["steps"] == 9


@pytest.mark.mpi
def test_a_decomposition_that_does_not_fit_is_refused_in_one_line(haloflow_mpi, tmp_path):
    parts = _decompose(tmp_path, "parts", "cavity", 2, CAVITY)

    tries = iter(range(100))

    def refused(n, *sets):
        res = haloflow_mpi(n, "run", "cavity", "-o", str(tmp_path / f"r{next(tries)}"),
                           *CAVITY, *RUN, *sets, "--decomposed", str(parts))
        return one_line(res)

    assert "decomposed for 2 ranks, this run has 3" in refused(3)
    assert "another mesh or decomposition" in refused(2, "--set", "mesh.cells=[20,19,1]")
    assert "another mesh or decomposition" in refused(2, "--set", "parallel.decomposition=rcb")
    # a part of another decomposition of the same size: the parts no longer fit together
    other = _decompose(tmp_path, "other", "cavity", 2, [*CAVITY[:2], "--set",
                                                        "parallel.decomposition=rcb"])
    (parts / "processor1.npz").write_bytes((other / "processor1.npz").read_bytes())
    msg = refused(2)
    assert "processor1.npz" in msg or "do not fit together" in msg, msg
    (parts / "processor1.npz").write_bytes(b"PK\x03\x04 not a zip")
    assert "processor1.npz: cannot be read" in refused(2)
    (parts / "decomposition.json").unlink()
    assert "no decomposition.json" in refused(2)
    assert not list(tmp_path.glob("r*/fields/*"))


def test_decompose_writes_nothing_over_a_folder_in_use(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    res = haloflow("decompose", "cavity", "-n", "2", "-o", tmp_path / "mine")
    assert "is not an empty folder" in one_line(res)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"
    assert "expected at least 1 rank" in one_line(
        haloflow("decompose", "cavity", "-n", "0", "-o", tmp_path / "new"))


@pytest.mark.mpi
def test_local_aggregation_reads_parts_and_agrees_with_serial(haloflow_mpi, tmp_path):
    """``solver.pressure.aggregation = "local"``: each rank aggregates its own rows (no level
    gathered on rank 0), so a decomposed run has no rank that holds more than its part; the
    answer is serial's to the solvers' tolerance, in about as many iterations."""
    parts = _decompose(tmp_path, "parts", "cavity", 3, CAVITY)
    local = ["--set", 'solver.pressure.aggregation="local"']
    res = haloflow_mpi(3, "run", "cavity", "-o", str(tmp_path / "local"), *CAVITY, *RUN, *local,
                       "--decomposed", str(parts))
    assert res.returncode == 0, res.stderr
    res = haloflow_mpi(1, "run", "cavity", "-o", str(tmp_path / "serial"), *CAVITY, *RUN)
    assert res.returncode == 0, res.stderr
    a, b = read_fields(tmp_path / "local"), read_fields(tmp_path / "serial")
    for k in ("U", "p"):
        scale = np.abs(b[k]).max()
        assert np.abs(a[k] - b[k]).max() < 1e-6 * scale, k
    s = {k: json.loads((tmp_path / k / "summary.json").read_text()) for k in ("local", "serial")}
    assert abs(s["local"]["p_iters_mean"] - s["serial"]["p_iters_mean"]) <= 2
    amg = json.loads((tmp_path / "local" / "profile.json").read_text())["amg"]
    assert amg["aggregation"] == "local" and len(amg["levels"]) >= 2
