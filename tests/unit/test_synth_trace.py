"""Synthetic SimGrid traces from the model's workload (``study/synth_trace.py``): the actions
a 4-rank step writes are the model's own counts (``model.counts``: exchanges, messages,
bytes, allreduces, allgathers; ``model.compute_s``: the computation), and the replay of a
2-rank one-message trace takes latency + (bytes + 16) / bandwidth as SimGrid's CM02 model
defines it."""

from __future__ import annotations

import subprocess
from collections import Counter

import numpy as np
import pytest

from haloflow.study import model as M
from haloflow.study import synth_trace as T
from haloflow.study.simgrid import ENVELOPE, Platform, replay
from haloflow.study.trace import TraceError
from tests.simgrid_traces import require_smpirun

SPEED = 1e9


def workload(**kw) -> M.Workload:
    base = dict(cells=64, dims=3, compute_s=1.0, serial_s=0.1, exchanges=6.0,
                fields_per_exchange=2.0, levels=[(16, 4.0, 2.0)], allreduces=5.0,
                gathers=3.0, gathered_rows=8, mpi_call_s=1e-4, refreshes=1.0,
                compiled_allreduces=2.0, gathered_nnz=40, level_work=[0.2], amg_levels=2)
    return M.Workload(**{**base, **kw})


def actions(folder, ranks: int) -> list[list[list[str]]]:
    return [[ln.split() for ln in (folder / f"rank-{r}.txt").read_text().splitlines()]
            for r in range(ranks)]


def test_four_ranks_write_the_models_counts(tmp_path):
    w = workload()
    halo = M.halo_of_grid(64, 4, 3)  # a 2 x 2 x 1 process grid: two neighbours each
    lay = M.Layout(2)
    listing, c = T.write(tmp_path, w, halo, lay, SPEED)
    assert c == T.StepCounts(6, [4], 5, 3, 3, 1)
    assert listing.read_text().split() == [str(tmp_path / f"rank-{r}.txt") for r in range(4)]
    want = M.counts(w, halo, per_node=2)
    ranks = actions(tmp_path, 4)
    sent = []
    for r, acts in enumerate(ranks):
        n = Counter(a[1] for a in acts)
        assert all(a[0] == str(r) for a in acts)
        assert acts[0][1] == "init" and acts[-1][1] == "finalize"
        assert n["waitall"] == want["exchanges_per_step"] == 10
        assert n["isend"] == n["irecv"] == 10 * 2  # every exchange: both neighbours
        assert n["allreduce"] == want["allreduces_per_step"] == 5
        assert n["allgather"] == want["gathers_per_step"] == 4
        sent.append(sum(int(a[4]) for a in acts if a[1] == "isend"))
        # the model's computation of this rank, plus the Python layer's calls
        flops = sum(int(a[2]) for a in acts if a[1] == "compute")
        calls = (3 + 4) * w.mpi_call_s  # 3 allreduces through Python, 4 allgathers
        own = M.compute_s(w, float(halo.cells[r]), 4, lay, (halo.cells[r] / 64,))
        assert flops == pytest.approx((own + calls) * SPEED, abs=len(acts))
    assert want["messages_per_step"] == 20
    # mesh messages exact (8 bytes x 2 fields x the values); coarse ones rounded to bytes
    assert max(sent) == pytest.approx(want["bytes_per_step"], abs=0.5 * 4 * 2)
    mesh = [a for a in ranks[0] if a[1] == "isend"][:2]
    assert [int(a[4]) for a in mesh] == [8 * 2 * 8] * 2 and set(halo.count) == {8}
    busiest = M.predict(w, halo, M.network("infiniband-fdr"), M.network("infiniband-fdr"),
                        lay).compute_s
    assert busiest == pytest.approx(M.compute_s(w, 16.0, 4, lay, (0.25,)))


def test_a_sample_of_the_step_keeps_its_share_of_the_computation(tmp_path):
    w = workload(exchanges=16.0, levels=[(16, 8.0, 4.0)], allreduces=8.0, gathers=4.0,
                 refreshes=0.0, compiled_allreduces=0.0)
    halo = M.halo_of_grid(64, 4, 3)
    _, c = T.write(tmp_path, w, halo, M.Layout(2), SPEED, fraction=0.25)
    acts = actions(tmp_path, 4)[0]
    n = Counter(a[1] for a in acts)
    assert (n["waitall"], n["allreduce"], n["allgather"]) == (4 + 2, 2, 1)
    whole = M.compute_s(w, 16.0, 4, M.Layout(2), (0.25,)) + 12 * w.mpi_call_s
    flops = sum(int(a[2]) for a in acts if a[1] == "compute")
    assert flops == pytest.approx(0.25 * whole * SPEED, abs=len(acts))
    net = M.network("infiniband-fdr")
    # every kind's share exact: the sample's time scales by 1 / fraction; a count rounded
    # up (7 exchanges: 1.75 -> 2 in a quarter) weighs less than a quarter of the step
    assert T.sample_scale(w, halo, M.Layout(2), net, net, 0.25) == pytest.approx(4.0)
    odd = workload(exchanges=7.0, levels=[(16, 8.0, 4.0)], allreduces=8.0, gathers=4.0,
                   refreshes=0.0, compiled_allreduces=0.0)
    assert T.scaled(T.step_counts(odd, 4), 0.25).mesh == 2
    assert T.sample_scale(odd, halo, M.Layout(2), net, net, 0.25) < 4.0
    with pytest.raises(M.ModelError, match="fraction"):
        T.write(tmp_path, w, halo, M.Layout(2), SPEED, fraction=0.0)


def test_agglomerated_levels_are_refused(tmp_path):
    w = workload(agglomerate=100)
    with pytest.raises(M.ModelError, match="agglomerated"):
        T.write(tmp_path, w, M.halo_of_grid(64, 4, 3), M.Layout(2), SPEED)


@pytest.mark.parametrize("values", [1, 125, 40_000])
def test_one_message_replays_as_latency_plus_size_over_bandwidth(tmp_path, values):
    require_smpirun()
    lat, bw = 50e-6, 100e6
    w = workload(cells=2, compute_s=0.0, serial_s=0.0, exchanges=1.0, fields_per_exchange=1.0,
                 levels=[], allreduces=0.0, compiled_allreduces=0.0, gathers=0.0,
                 refreshes=0.0, level_work=[], amg_levels=0)
    halo = M.Halo(2, np.array([1, 1]), np.array([0]), np.array([1]), np.array([values]))
    listing, _ = T.write(tmp_path / "tr", w, halo, M.Layout(1), SPEED)
    assert [a[1:] for a in actions(tmp_path / "tr", 2)[0]] == [
        ["init"], ["isend", "1", "0", str(8 * values)], ["waitall"],
        ["finalize"]]
    t = replay(listing, 2, Platform(2, 1, SPEED, lat, bw, 1e-6, 2e9), tmp_path / "run")
    assert t == pytest.approx(lat + (8 * values + ENVELOPE) / bw, rel=1e-5)


def test_a_replay_past_its_timeout_leaves_no_simulator_behind(tmp_path):
    require_smpirun()
    ranks = {r: [f"isend {1 - r} 0 8", f"irecv {1 - r} 0 8", "waitall"] * 200_000
             for r in (0, 1)}
    folder = tmp_path / "tr"
    folder.mkdir()
    for r, lines in ranks.items():
        (folder / f"rank-{r}.txt").write_text(
            "".join(f"{r} {x}\n" for x in ["init", *lines, "finalize"]))
    listing = folder / "traces.txt"
    listing.write_text(f"{folder / 'rank-0.txt'}\n{folder / 'rank-1.txt'}\n")
    with pytest.raises(TraceError, match="ran past"):
        replay(listing, 2, Platform(2, 1, SPEED, 1e-6, 1e9, 1e-6, 2e9), tmp_path / "run",
               timeout=0.5)
    left = subprocess.run(["pgrep", "-f", f"smpi/replay:{listing}"], capture_output=True,
                          text=True)
    assert left.stdout == ""
