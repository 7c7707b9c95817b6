"""haloflow netpipe on real MPI ranks: every mode, integrity with a corrupted byte, --pairs,
and the rank-count errors.  Tiny sizes and trials: these check behaviour, not speed.

Run as a script (``mpiexec -n 2 python test_netpipe_mpi.py JOB OUTDIR``) this file is also
the MPI job of the tests that call ``run_pair`` directly, which is how the fault-injection
hook (a function argument, not reachable from the command line) is exercised.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.mpi

TINY = ["--max", "64", "--trial-time", "0.001", "--trials", "2", "--quiet"]

# (name, extra arguments) of the timed sweeps run in one job
SWEEPS = [
    ("pingpong", ["--mode", "pingpong"]),
    ("bidir", ["--mode", "bidir"]),
    ("stream", ["--mode", "stream"]),
    ("put-fence", ["--mode", "put", "--sync", "fence"]),
    ("get-fence", ["--mode", "get"]),
    ("put-lock", ["--mode", "put", "--sync", "lock"]),
    ("get-lock", ["--mode", "get", "--sync", "lock"]),
    ("pingpong-python", ["--engine", "python"]),
    ("bidir-python", ["--mode", "bidir", "--engine", "python"]),
    ("get-lock-python", ["--mode", "get", "--sync", "lock", "--engine", "python"]),
    ("pingpong-nocache", ["--nocache", "--pool", "4M"]),
    ("put-nocache", ["--mode", "put", "--nocache", "--pool", "4M"]),
]
CHECKS = [["--mode", m] for m in ("pingpong", "bidir", "stream", "put", "get")] + [
    ["--mode", "put", "--sync", "lock"], ["--mode", "get", "--sync", "lock"],
    ["--mode", "bidir", "--nocache", "--pool", "1M"]]


def _opts(*argv):
    from haloflow.bench import netpipe
    from haloflow.cli import build_parser

    return netpipe.options(build_parser().parse_args(["netpipe", *argv]))


def job(name: str, outdir: Path) -> None:
    from mpi4py import MPI

    from haloflow.bench.netpipe.config import IntegrityError
    from haloflow.bench.netpipe.pair import run_pair

    comm = MPI.COMM_WORLD
    report = {}
    if name == "sweeps":
        for label, extra in SWEEPS:
            run_pair(_opts(*TINY, *extra, "-o", str(outdir / f"{label}.out")), comm)
    elif name == "integrity":
        for k, extra in enumerate(CHECKS):
            def o(tag, k=k, extra=extra):
                return _opts("--integrity", "--max", "4K", "--trials", "2", "--quiet", *extra,
                             "-o", str(outdir / f"{tag}{k}.out"))

            run_pair(o("ok"), comm)
            try:
                run_pair(o("bad"), comm, corrupt=(1536, 1000 + k))
                report[k] = None
            except IntegrityError as e:
                report[k] = [str(e), e.exit_code]
    if comm.rank == 0:
        (outdir / f"{name}.json").write_text(json.dumps(report))


def test_every_mode_times_every_size(mpirun, tmp_path):
    from haloflow.bench.netpipe import sizes as npsizes
    from haloflow.io import netpipe_file as npfile

    res = mpirun(2, __file__, "sweeps", str(tmp_path), timeout=120)
    assert res.returncode == 0, res.stderr
    sizes = npsizes.schedule(1, 64, 3)
    for label, _ in SWEEPS:
        d = npfile.read_out(tmp_path / f"{label}.out")
        factor = 2 if label.startswith("bidir") else 1   # NetPIPE -2: both directions
        assert d.bytes.tolist() == [factor * n for n in sizes], label
        assert (d.seconds > 0).all() and (d.seconds < 0.5).all(), label
        doc = json.loads((tmp_path / f"{label}.json").read_text())
        assert doc["summary"]["latency_us"] > 0 and doc["summary"]["peak_mbps"] > 0
        assert doc["engine"] == ("python" if "python" in label else "native"), label
        assert doc["nocache"] == ("nocache" in label)
        assert (tmp_path / f"{label}.png").stat().st_size > 0


def test_integrity_passes_and_catches_a_corrupted_byte(mpirun, tmp_path):
    res = mpirun(2, __file__, "integrity", str(tmp_path), timeout=120)
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "integrity.json").read_text())
    for k, extra in enumerate(CHECKS):
        assert report[str(k)] is not None, f"{extra}: corruption not detected"
        msg, code = report[str(k)]
        assert code == 3
        assert "1536-byte message #0" in msg and f"offset {1000 + k}" in msg, msg
        ok = json.loads((tmp_path / f"ok{k}.json").read_text())["integrity"]
        assert ok["ok"] is True and len(ok["sizes"]) > 10
        assert not (tmp_path / f"ok{k}.out").exists()   # no timings in integrity mode
        bad = json.loads((tmp_path / f"bad{k}.json").read_text())["integrity"]
        assert bad["ok"] is False
        assert [m["offset"] for m in bad["mismatches"]] == [1000 + k]


def test_command_line_run(haloflow_mpi, tmp_path):
    from haloflow.io import netpipe_file as npfile

    out = tmp_path / "sub" / "np.out"
    res = haloflow_mpi(2, "netpipe", "--max", "1K", "--trial-time", "0.002", "-o", str(out),
                       timeout=120)
    assert res.returncode == 0, res.stderr
    assert "bytes" in res.stdout and "Mbps in" in res.stdout      # NetPIPE-style progress
    assert "latency" in res.stdout and "n1/2" in res.stdout
    assert len(npfile.read_out(out)) == 45
    assert out.with_suffix(".png").exists()


@pytest.mark.parametrize("args, words", [
    ([], ["exactly 2 MPI ranks, got 3", "--pairs"]),
    (["--pairs"], ["even number of ranks", "got 3"]),
])
def test_wrong_rank_counts(haloflow_mpi, args, words):
    res = haloflow_mpi(3, "netpipe", *args, timeout=60)
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    for w in words:
        assert w in lines[0]


def test_pairs(haloflow_mpi, tmp_path):
    out = tmp_path / "pairs.json"
    res = haloflow_mpi(4, "netpipe", "--pairs", "--max", "4K", "--trial-time", "0.001",
                       "--trials", "2", "-o", str(out), timeout=120)
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    assert doc["ranks"] == 4 and doc["concurrent_rounds"] == 3
    assert sorted(r for node in doc["nodes"] for r in node["ranks"]) == [0, 1, 2, 3]
    for what in ("latency_us", "bandwidth_mbps"):
        for kind in ("alone", "concurrent"):
            m = doc[what][kind]
            assert all((m[i][j] is None) == (i == j) for i in range(4) for j in range(4))
            assert all(m[i][j] == m[j][i] for i in range(4) for j in range(4) if i != j)
            assert all(m[i][j] > 0 for i in range(4) for j in range(4) if i != j)
    assert "intra-node" in res.stdout
    assert out.with_suffix(".png").stat().st_size > 0


if __name__ == "__main__":
    job(sys.argv[1], Path(sys.argv[2]))


def _tcp_cpu(tmp_path) -> dict:
    """A TCP loopback sweep of small messages with --cpu: the JSON's CPU summary."""
    import subprocess
    import sys

    listener = subprocess.Popen([sys.executable, "-m", "haloflow", "netpipe", "--listen",
                                 "127.0.0.1:0", "--quiet"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    try:
        port = listener.stdout.readline().strip().rsplit(":", 1)[1]
        out = tmp_path / "tcp.out"
        res = subprocess.run([sys.executable, "-m", "haloflow", "netpipe", "--connect",
                              f"127.0.0.1:{port}", "--max", "64", "--perturb", "0",
                              "--trial-time", "0.02", "--cpu", "--quiet", "-o", str(out)],
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        assert "CPU per message" in res.stdout
        assert listener.wait(timeout=30) == 0
    finally:
        if listener.poll() is None:
            listener.kill()
    return json.loads(out.with_suffix(".json").read_text())


def test_cpu_per_message_tcp_costs_more_than_shared_memory(haloflow_mpi, tmp_path):
    out = tmp_path / "shm.out"
    res = haloflow_mpi(2, "netpipe", "--max", "64", "--perturb", "0", "--trial-time", "0.02",
                       "--cpu", "--quiet", "-o", str(out), timeout=120)
    assert res.returncode == 0, res.stderr
    shm = json.loads(out.with_suffix(".json").read_text())
    tcp = _tcp_cpu(tmp_path)
    for doc in (shm, tcp):
        for p in doc["points"]:
            for side in ("first", "other"):
                c = p["cpu"][side]
                assert c["cpu_us"] > 0 and 0 <= c["busy"] <= 1.5
                assert c["cpu_us"] == pytest.approx(c["user_us"] + c["sys_us"])
    # the kernel's TCP stack runs on the CPU of both sides, in system time
    for side in ("first", "other"):
        assert tcp["cpu"][side]["small_us"] > shm["cpu"][side]["small_us"], (tcp["cpu"],
                                                                            shm["cpu"])
        assert tcp["cpu"][side]["sys_fraction"] > 0.3
    assert (tmp_path / "shm-cpu.png").stat().st_size and (tmp_path / "tcp-cpu.png").exists()


def test_overlap_fraction_per_size(haloflow_mpi, tmp_path):
    out = tmp_path / "ov.out"
    res = haloflow_mpi(2, "netpipe", "--max", "64K", "--perturb", "0", "--trial-time",
                       "0.005", "--trials", "2", "--overlap", "--quiet", "-o", str(out),
                       timeout=180)
    assert res.returncode == 0, res.stderr
    assert "overlap:" in res.stdout
    rows = json.loads(out.with_suffix(".json").read_text())["overlap"]
    assert [r["message_bytes"] for r in rows] == [1 << k for k in range(17)]
    for r in rows:
        exch, comp, both = r["exchange_s"], r["compute_s"], r["both_s"]
        assert exch > 0 and both > 0
        # the fraction from the row's own three times, then clipped to [0, 1]
        frac = (exch + comp - both) / min(exch, comp)
        assert r["overlap_unclipped"] == pytest.approx(frac, rel=1e-12, abs=1e-12), r
        assert r["overlap"] == pytest.approx(min(1.0, max(0.0, frac)), abs=1e-12), r
        # the computation was calibrated to last as long as the exchange
        assert r["compute_s"] == pytest.approx(r["exchange_s"], rel=0.05, abs=2e-8)
    assert (tmp_path / "ov-overlap.png").stat().st_size > 0
