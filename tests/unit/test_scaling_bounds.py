"""benchmarks/scaling.py's bounds: the predicted peak with the pressure solve's communication
terms taken away in turn.  Each row may only raise the peak, the speed-ups share one 1-rank
step, and what a row says is gone is gone from its prediction."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from haloflow.study import model as M

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import scaling  # noqa: E402

RANKS = [1, 12, 48, 96, 384, 768, 1536, 3072]
NET = M.network("infiniband-fdr")
SHM = M.network("infiniband-sdr")  # stands in for shared memory: any curve will do


def workload():
    return M.Workload(cells=238328, dims=3, compute_s=0.42, serial_s=1.3e-3, exchanges=115.0,
                      fields_per_exchange=1.4, levels=[(59582, 106.0), (14909, 212.0),
                                                       (3763, 170.0), (997, 170.0)],
                      allreduces=81.0, gathers=85.0, gathered_rows=258, mpi_call_s=2e-6,
                      floor_s=4e-5, refreshes=1.0, compiled_allreduces=44.0,
                      gathered_nnz=1730)


@pytest.fixture(scope="module")
def rows():
    w = workload()
    grid = {p: M.halo_of_grid(w.cells, p, w.dims) for p in RANKS}
    return scaling.bounds(w, {"grid": grid}, NET, SHM)


def test_first_row_is_the_plain_prediction(rows):
    w = workload()
    grid = {p: M.halo_of_grid(w.cells, p, w.dims) for p in RANKS}
    plain = M.summary(M.sweep(w, grid, NET, SHM,
                              scaling.CORES_PER_NODE))
    assert rows[0]["removed"] == "nothing"
    assert rows[0]["peak_speedup"] == pytest.approx(plain["peak"]["speedup"], rel=1e-12)
    assert rows[0]["ranks"] == plain["peak"]["ranks"]


def test_each_row_only_raises_the_peak(rows):
    labels = [label for label, _ in scaling.BOUNDS]
    assert [r["removed"] for r in rows] == labels[:1] + [scaling.AGGLOMERATED] + labels[1:]
    peaks = [r["peak_speedup"] for r in rows]
    assert peaks == sorted(peaks)
    assert peaks[2] > 1.2 * peaks[0]  # the coarse levels' exchanges are most of the halo here
    assert rows[1]["agglomerate"] in scaling.G.AGGLOMERATE


def test_what_a_row_takes_away_is_gone(rows):
    last = rows[-1]
    assert last["reduce_s"] == 0.0 and last["gather_s"] == 0.0
    assert rows[3]["gather_s"] == 0.0 and rows[3]["reduce_s"] > 0.0
    # with no coarse level the halo is the mesh's exchanges alone, at the peak's rank count
    w = workload()
    P = rows[2]["ranks"]
    alone = M.predict(replace(w, levels=[]), M.halo_of_grid(w.cells, P, w.dims),
                      NET, SHM, scaling.CORES_PER_NODE)
    assert rows[2]["halo_s"] == pytest.approx(alone.halo_parts[0][1], rel=1e-12)


def test_speedups_share_one_single_rank_step():
    w = workload()
    one = {1: M.halo_of_grid(w.cells, 1, w.dims)}
    changes = {}
    for _, change in scaling.BOUNDS:
        changes.update(change)
        p = M.predict(replace(w, **changes), one[1], NET, SHM, scaling.CORES_PER_NODE)
        assert p.step_s == pytest.approx(w.compute_s, rel=1e-12)
