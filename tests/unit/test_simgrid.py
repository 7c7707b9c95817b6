"""SimGrid's replay (``study/simgrid.py``) on small platforms against what its CM02 model
defines: a message of S bytes between two nodes takes latency + (S + 16) / bandwidth (SMPI's
16-byte envelope), compute F flops F / speed, messages into one node share its link; and
``haloflow predict --engine simgrid`` on a gzip trace folder gives the same, or a one-line
error (exit 2) without SimGrid."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from haloflow.study.simgrid import ENVELOPE, Platform, platform_xml, replay
from haloflow.study.trace import TraceError
from tests.simgrid_traces import gz_trace, hockney_out, predict, require_smpirun

LAT, BW = 50e-6, 100e6  # the 2-node network
LOOP_LAT, LOOP_BW = 1e-6, 2e9  # within a node
SPEED = 1e9


@pytest.fixture(scope="module", autouse=True)
def smpirun():
    require_smpirun()


def write_traces(folder: Path, ranks: dict[int, list[str]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for r, lines in ranks.items():
        p = folder / f"r{r}.txt"
        p.write_text("".join(f"{r} {x}\n" for x in ["init", *lines, "finalize"]))
        names.append(str(p))
    listing = folder / "list.txt"
    listing.write_text("\n".join(names) + "\n")
    return listing


def platform(nodes: int, cores: int = 1, **kw) -> Platform:
    return Platform(nodes, cores, SPEED, LAT, BW, LOOP_LAT, LOOP_BW, **kw)


@pytest.mark.parametrize("size", [1, 1000, 100_000, 3_000_000])
def test_one_message_is_latency_plus_size_over_bandwidth(tmp_path, size):
    flops = 2_000_000
    listing = write_traces(tmp_path, {0: [f"compute {flops}", f"send 1 3 {size}"],
                                      1: [f"recv 0 3 {size}"]})
    t = replay(listing, 2, platform(2), tmp_path / "run")
    assert t == pytest.approx(flops / SPEED + LAT + (size + ENVELOPE) / BW, rel=1e-5)


def test_within_a_node_the_loopback_link(tmp_path):
    listing = write_traces(tmp_path, {0: ["send 1 0 500000"], 1: ["recv 0 0 500000"]})
    t = replay(listing, 2, platform(1, cores=2), tmp_path / "run")
    assert t == pytest.approx(LOOP_LAT + (500000 + ENVELOPE) / LOOP_BW, rel=1e-5)


def test_two_senders_share_the_receivers_link(tmp_path):
    size = 1_000_000
    listing = write_traces(tmp_path, {
        0: [f"send 2 0 {size}"], 1: [f"send 2 0 {size}"],
        2: [f"irecv 0 0 {size}", f"irecv 1 0 {size}", "waitall"]})
    t = replay(listing, 3, platform(3), tmp_path / "run")
    assert t == pytest.approx(LAT + 2 * (size + ENVELOPE) / BW, rel=1e-5)
    # a shared backbone at half a link's bandwidth halves an exchange between two pairs
    pairs = write_traces(tmp_path / "pairs", {
        0: [f"send 1 0 {size}"], 1: [f"recv 0 0 {size}"],
        2: [f"send 3 0 {size}"], 3: [f"recv 2 0 {size}"]})
    free = replay(pairs, 4, platform(4), tmp_path / "free")
    shared = replay(pairs, 4, platform(4, backbone_Bps=BW), tmp_path / "shared")
    assert free == pytest.approx(LAT + (size + ENVELOPE) / BW, rel=1e-5)
    assert shared == pytest.approx(LAT + 2 * (size + ENVELOPE) / BW, rel=1e-5)


def test_platform_errors_are_one_line():
    with pytest.raises(TraceError, match="bandwidth"):
        platform_xml(Platform(2, 1, SPEED, LAT, 0.0, LOOP_LAT, LOOP_BW))
    with pytest.raises(TraceError, match="--fat-tree"):
        platform_xml(platform(2, fat_tree="2;4;1,2;1,2"))
    xml = platform_xml(platform(16, fat_tree="2;4,4;1,2;1,2"))
    assert 'topology="FAT_TREE"' in xml and 'radical="0-15"' in xml


def test_predict_replays_a_trace_folder(tmp_path):
    size, steps = 200_000, 4
    trace = gz_trace(tmp_path / "tr", {
        0: ["compute 1000000", f"isend 1 0 {size}", f"irecv 1 0 {size}", "waitall"] * steps,
        1: ["compute 1000000", f"isend 0 0 {size}", f"irecv 0 0 {size}", "waitall"] * steps})
    net = hockney_out(tmp_path / "net.out", LAT, BW)
    shm = hockney_out(tmp_path / "shm.out", LOOP_LAT, LOOP_BW)
    out = tmp_path / "pred"
    r = predict(["--trace", str(trace), "--steps", str(steps), "--network", str(net),
                 "--shm", str(shm), "--cores-per-node", "1", "--cpu-speed", "2", "-o",
                 str(out)])
    assert r.returncode == 0, r.stderr
    row = json.loads((out / "simgrid.json").read_text())["rows"][0]
    # full duplex: both directions at once, each at the link's bandwidth
    step = 1e-3 / 2 + LAT + (size + ENVELOPE) / BW
    assert row["step_s"] == pytest.approx(step, rel=1e-4)
    assert row["nodes"] == 2 and (out / "simgrid" / "net.out" / "platform.xml").exists()


def test_predict_with_a_relative_outdir(tmp_path):
    trace = gz_trace(tmp_path / "tr", {0: ["compute 1000000"], 1: ["compute 3000000"]})
    shm = hockney_out(tmp_path / "shm.out", LOOP_LAT, LOOP_BW)
    out = tmp_path / "pred"
    rel = os.path.relpath(out, Path(__file__).resolve().parents[2])  # predict runs there
    assert not Path(rel).is_absolute()
    r = predict(["--trace", str(trace), "--network", "shm", "--shm", str(shm),
                 "--cores-per-node", "2", "-o", rel])
    assert r.returncode == 0, r.stderr
    row = json.loads((out / "simgrid.json").read_text())["rows"][0]
    assert row["step_s"] == pytest.approx(3e-3, rel=1e-6)
    assert (out / "simgrid" / "shm" / "platform.xml").exists()


def test_predict_without_simgrid_is_one_line_exit_2(tmp_path):
    trace = gz_trace(tmp_path / "tr", {0: ["compute 10"]})
    shm = hockney_out(tmp_path / "shm.out", LOOP_LAT, LOOP_BW)
    bare = tmp_path / "bin"
    bare.mkdir()
    env = {**os.environ, "PATH": str(bare)}
    r = predict(["--trace", str(trace), "--network", "gige-tcp", "--shm", str(shm)], env)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "SimGrid is not installed" in r.stderr
    r = predict(["--trace", str(tmp_path / "none"), "--network", "gige-tcp", "--shm",
                 str(shm)])
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no such folder" in r.stderr


@pytest.fixture(scope="module")
def cavity_profile(tmp_path_factory):
    """A 12^3 cavity's run folder (3 steps, one rank): the profile the model calibrates on."""
    run = tmp_path_factory.mktemp("profile") / "run"
    res = subprocess.run([sys.executable, "-m", "haloflow", "run", "cavity", "-o", str(run),
                          "--steps", "3", "--quiet", "--set", "mesh.cells=[12,12,12]",
                          "--set", "boundary.front.type=wall", "--set", "boundary.back.type=wall",
                          "--set", "output.plots=false", "--set", "output.fields=false"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return run


def test_predict_replays_a_profiles_step_at_every_rank_count(tmp_path, cavity_profile):
    """``--engine simgrid --profile`` without a trace: the model's own step (synth_trace) on
    the run's real partition replayed at each rank count, beside the model.  One rank is
    computation alone, where the two must agree; with messages the replay prices the same
    counts on its own network model (within the 20 % the issue sets before naming an
    effect); a step sampled down to a small budget estimates the whole step's replay."""
    run = cavity_profile
    shm = hockney_out(tmp_path / "shm.out", LOOP_LAT, LOOP_BW)
    rows = {}
    for name, budget in (("whole", "1e9"), ("sample", "2e3")):
        out = tmp_path / name
        r = predict(["--profile", str(run), "--ranks", "1,2,4", "--network", "infiniband-fdr",
                     "--shm", str(shm), "--cores-per-node", "2", "--budget", budget, "-o",
                     str(out)])
        assert r.returncode == 0, r.stderr
        rows[name] = {row["ranks"]: row for row in
                      json.loads((out / "simgrid.json").read_text())["rows"]}
    whole, sample = rows["whole"], rows["sample"]
    assert sorted(whole) == [1, 2, 4] and [whole[p]["nodes"] for p in (1, 2, 4)] == [1, 1, 2]
    assert all(whole[p]["fraction"] == 1.0 for p in whole)
    assert whole[1]["step_s"] == pytest.approx(whole[1]["model_step_s"], rel=0.01)
    for p in (2, 4):
        assert 0.8 < whole[p]["step_s"] / whole[p]["model_step_s"] < 1.25, whole[p]
        assert whole[p]["actions"] > 2e3 and sample[p]["fraction"] < 1.0
        assert sample[p]["step_s"] == pytest.approx(whole[p]["step_s"], rel=0.05), p
    r = predict(["--profile", str(run), "--ranks", "2", "--network", "shm", "--shm", str(shm),
                 "--budget", "5"])
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--budget 5" in r.stderr


@pytest.mark.parametrize("network, ranks, extra, effect", [
    # four ranks a node on a 10 MB/s link: SimGrid 3.1x the model, 0.93x with a NIC each
    ("slow", 8, ["--cores-per-node", "4"], "NIC serialisation"),
    # a 10 MB/s backbone behind FDR NICs: 44x, 1.06x with a non-blocking switch
    ("infiniband-fdr", 8, ["--cores-per-node", "2", "--backbone", "0.01"],
     "contention and topology"),
])
def test_predict_names_the_effect_where_simgrid_and_the_model_differ(tmp_path, cavity_profile,
                                                                    network, ranks, extra,
                                                                    effect):
    """Beyond 20 % apart, the step is replayed again without each effect SimGrid has and the
    model has not; the one whose absence brings SimGrid back near the model is named, in
    simgrid.json and in one line of the output.  Within 20 % nothing is replayed again."""
    shm = hockney_out(tmp_path / "shm.out", LOOP_LAT, LOOP_BW)
    net = str(hockney_out(tmp_path / "slow.out", 1e-6, 1e7)) if network == "slow" else network
    out = tmp_path / "out"
    r = predict(["--profile", str(cavity_profile), "--ranks", str(ranks), "--network", net,
                 "--shm", str(shm), *extra, "-o", str(out)])
    assert r.returncode == 0, r.stderr
    rows = {row["ranks"]: row for row in json.loads((out / "simgrid.json").read_text())["rows"]}
    assert rows[1]["effects"] is None  # computation alone: the two agree
    e = rows[ranks]["effects"]
    assert e is not None and e["ratio"] > 1.5 and e["named"] == effect, e
    assert 0.8 < e["without"][effect] < 1.25, e
    assert f"the difference is {effect}" in r.stdout


def test_two_ranks_of_one_node_on_tcp_agree_with_the_model(tmp_path, cavity_profile):
    """TCP's per-message CPU cost is the network's: two ranks of one node send over shared
    memory in the replay as in the model (SMPI's own ``smpi/os`` charged them 2.4x)."""
    shm = hockney_out(tmp_path / "shm.out", LOOP_LAT, LOOP_BW)
    out = tmp_path / "out"
    r = predict(["--profile", str(cavity_profile), "--ranks", "2", "--network", "gige-tcp",
                 "--shm", str(shm), "--cores-per-node", "2", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    row = {row["ranks"]: row for row in json.loads((out / "simgrid.json").read_text())[
        "rows"]}[2]
    assert 0.8 < row["step_s"] / row["model_step_s"] < 1.25 and row["effects"] is None, row


def test_a_traced_run_far_from_its_model_says_no_one_effect_explains_it(tmp_path,
                                                                        cavity_profile):
    """--trace with --profile: a 2-rank trace whose compute is far more than the profile's
    step is priced beside the model; no effect of the platform applies (one node, a
    non-blocking switch), and predict says that no one effect explains the gap instead of
    naming one."""
    trace = gz_trace(tmp_path / "tr", {
        0: ["compute 100000000", "isend 1 0 1000", "irecv 1 0 1000", "waitall"],
        1: ["compute 100000000", "isend 0 0 1000", "irecv 0 0 1000", "waitall"]})
    shm = hockney_out(tmp_path / "shm.out", LOOP_LAT, LOOP_BW)
    out = tmp_path / "pred"
    r = predict(["--trace", str(trace), "--profile", str(cavity_profile), "--network",
                 "gige-tcp", "--shm", str(shm), "--cores-per-node", "2", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    row = json.loads((out / "simgrid.json").read_text())["rows"][0]
    e = row["effects"]
    assert row["step_s"] > 0.1 > row["model_step_s"] and e["ratio"] > 10, row
    assert e["without"] == {} and e["named"] is None
    assert "no one effect explains it" in r.stdout
