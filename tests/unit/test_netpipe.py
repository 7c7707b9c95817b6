"""haloflow netpipe without MPI: sizes, the .out format, summary math, integrity patterns,
options, and the TCP mode over loopback."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from haloflow.bench import netpipe
from haloflow.bench.netpipe import check as npcheck
from haloflow.bench.netpipe import sizes as npsizes
from haloflow.bench.netpipe import summary as npsummary
from haloflow.bench.netpipe.pairs import round_robin
from haloflow.bench.netpipe.pool import PAGE, Pool, pool_bytes
from haloflow.io import netpipe_file as npfile
from haloflow.mpiutil import UserError

pytestmark = pytest.mark.serial  # listener and client processes, timed transfers

# Debian's NPmpich2 3.7.2, `-u 64`, on this machine: its sizes, and its .out lines verbatim
NETPIPE_SIZES_1_64 = [1, 2, 3, 4, 6, 8, 12, 13, 16, 19, 21, 24, 27, 29, 32, 35, 45, 48, 51,
                      61, 64]
NETPIPE_OUT = """\
       1 24.682324   0.00000031
       2 24.635450   0.00000062
       3 29.421747   0.00000078
       4 24.442301   0.00000125
       6 39.929124   0.00000115
       8 51.528336   0.00000118
      12 134.158520   0.00000068
      64 799.449752   0.00000061
"""


# ---- sizes ---------------------------------------------------------------------------------

def test_schedule_is_netpipes():
    # NetPIPE also tests 67 (beyond -u 64); we stop at the maximum asked for
    assert npsizes.schedule(1, 64, 3) == NETPIPE_SIZES_1_64
    assert npsizes.schedule(1, 64, 0) == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64]


def test_schedule_properties():
    s = npsizes.schedule(1, 8 << 20, 3)
    assert s[0] == 1 and s[-1] == 8 << 20
    assert all(b > a for a, b in zip(s, s[1:], strict=False))
    base = [n for n in s if n & (n - 1) == 0]
    assert base == [1 << k for k in range(24)]        # every power of two
    assert {(1 << 20) - 3, (1 << 20) + 3} <= set(s)   # and its perturbations
    assert npsizes.schedule(100, 1000, 3)[0] == 100
    assert npsizes.schedule(1000, 1001, 3) == [1000, 1001]  # the max is always included
    assert npsizes.schedule(7, 7) == [7]
    for lo, hi in ((0, 8), (16, 8)):
        with pytest.raises(ValueError):
            npsizes.schedule(lo, hi)


@pytest.mark.parametrize("text, n", [("1", 1), ("4096", 4096), ("64K", 65536), ("8M", 8 << 20),
                                     ("8m", 8 << 20), ("1G", 1 << 30), ("2KiB", 2048),
                                     (" 3 kb ", 3072)])
def test_parse_size(text, n):
    assert npsizes.parse_size(text) == n


@pytest.mark.parametrize("text", ["", "8Q", "-1", "1.5M", "M"])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError, match="size"):
        npsizes.parse_size(text)


def test_repetitions_fill_the_trial():
    assert npsizes.repetitions(0.1, 1e-6) == 100000
    assert npsizes.repetitions(0.1, 1.0) == 3             # NetPIPE's floor
    assert npsizes.repetitions(0.1, None) == 10
    assert npsizes.repetitions(1.0, 1e-12) == 10**8       # ceiling


# ---- the .out format -------------------------------------------------------------------------

def test_out_round_trip(tmp_path):
    n = np.array([1, 2, 3, 1024, 65533, 8 << 20])
    t = np.array([3.1e-7, 3.2e-7, 3.3e-7, 5.5e-7, 4.1e-6, 1.05e-3])
    f = tmp_path / "np.out"
    npfile.write_out(f, n, t)
    lines = f.read_text().splitlines()
    assert lines[0] == "       1 24.610950   0.00000031"   # NetPIPE's "%8d %lf %12.8lf"
    d = npfile.read_out(f)
    assert d.bytes.tolist() == n.tolist()
    # the seconds column alone has 10 ns resolution; the Mbps column restores the digits
    np.testing.assert_allclose(d.seconds, t, rtol=1e-6)
    np.testing.assert_allclose(d.mbps, n * 8 / (t * 2**20), rtol=1e-6)


def test_reads_netpipe_output(tmp_path):
    f = tmp_path / "np.out"
    f.write_text(NETPIPE_OUT)
    d = npfile.read_out(f)
    assert len(d) == 8 and d.bytes[-1] == 64
    assert d.seconds[0] == pytest.approx(8 / (24.682324 * 2**20), rel=1e-6)
    s = npsummary.summarize(d.bytes, d.seconds)
    assert s.latency_sizes == (1, 8)
    assert s.latency_s == pytest.approx(np.median(d.seconds[:6]))
    assert s.peak_at_bytes == 64


def test_reads_older_and_wider_netpipe_formats(tmp_path):
    f = tmp_path / "old.out"
    f.write_text("# NetPIPE 2.4\n1\t24.682324\t0.000000309\n\n8\t51.5\t0.000001185\t0.1 0.2\n")
    d = npfile.read_out(f)
    assert d.bytes.tolist() == [1, 8]


@pytest.mark.parametrize("text, words", [
    ("1 2 3\nabc def ghi\n", ["line 2", "bytes Mbps seconds"]),
    ("16 12\n", ["integrity"]),
    ("", ["no 'bytes Mbps seconds' lines"]),
    ("8 10.0 0\n", ["seconds > 0"]),
])
def test_bad_out_files_name_file_and_line(tmp_path, text, words):
    f = tmp_path / "bad.out"
    f.write_text(text)
    with pytest.raises(npfile.NetpipeFormatError) as e:
        npfile.read_out(f)
    assert "bad.out" in str(e.value)
    for w in words:
        assert w in str(e.value)


# ---- summary math ----------------------------------------------------------------------------

def test_summary_of_a_hockney_curve():
    t0, r = 2e-6, 1e9                    # 2 us, 1 GB/s: n1/2 = t0 r = 2000 bytes
    n = np.array(npsizes.schedule(1, 1 << 24, 3))
    t = t0 + n / r
    s = npsummary.summarize(n, t)
    assert s.latency_s == pytest.approx(t0 + 3.5 / r)        # median of 1,2,3,4,6,8 bytes
    assert s.latency_sizes == (1, 8)
    assert s.peak_at_bytes == 1 << 24
    assert s.peak_bytes_per_s == pytest.approx(r / (1 + t0 * r / 2**24))
    assert s.peak_mbps == pytest.approx(s.peak_bytes_per_s * 8 / 2**20)
    assert s.n_half_bytes == pytest.approx(2000, rel=0.02)   # interpolation between sizes
    assert s.hockney_t0_s == pytest.approx(t0, rel=1e-9)
    assert s.hockney_r_inf_bytes_per_s == pytest.approx(r, rel=1e-9)
    d = s.to_dict()
    assert d["latency_us"] == pytest.approx(s.latency_s * 1e6)
    assert "latency 2.003 us (1-8 B)" in s.line() and "n1/2 2 KiB" in s.line()


def test_summary_edges():
    # the sweep starts above 8 bytes: latency is the smallest message's time
    s = npsummary.summarize([64, 128, 256], [1e-6, 1.1e-6, 1.3e-6])
    assert s.latency_sizes == (64, 64) and s.latency_s == 1e-6
    # already at more than half the peak at the first size: no n1/2 to interpolate
    assert npsummary.half_bandwidth_size([1000, 2000], [9.0, 10.0]) is None
    # exactly half at a measured size
    assert npsummary.half_bandwidth_size([10, 100, 1000], [1.0, 5.0, 10.0]) == pytest.approx(100)
    # log-linear interpolation: half of 10 is reached halfway from 1 to 9, at sqrt(10 * 1000)
    assert npsummary.half_bandwidth_size([10, 1000, 10000], [1.0, 9.0, 10.0]) == \
        pytest.approx(100.0)
    # unsorted input is sorted; a fit that makes no sense is left out
    s = npsummary.summarize([8, 1], [1e-6, 1e-6])
    assert s.latency_sizes == (1, 8)
    assert npsummary.hockney_fit([1], [1e-6]) == (None, None)
    with pytest.raises(ValueError):
        npsummary.summarize([], [])


# ---- integrity patterns, buffer pools, pairs schedule -----------------------------------------

def test_pattern_catches_corruption_and_shifts():
    a = np.empty(100_000, np.uint8)
    s = npcheck.seed(100_000, 0, 0)
    npcheck.fill(a, s)
    assert npcheck.verify(a, s, a.size, 0, 0, 1) is None
    assert npcheck.verify(a, s + 1, a.size, 0, 0, 1) is not None   # other message's data
    b = a.copy()
    npcheck.send_pattern(b, s, b.size, 0, corrupt=(b.size, 4321))
    m = npcheck.verify(b, s, b.size, 0, 0, 1)
    assert (m.offset, m.wrong_bytes, m.expected, m.got) == (4321, 1, a[4321], a[4321] ^ 0x5A)
    assert "offset 4321" in m.line() and "100000-byte message #0 from rank 0 to rank 1" in m.line()
    shifted = np.concatenate([a[:10], a[11:], a[:1]])   # one byte lost at offset 10
    m = npcheck.verify(shifted, s, a.size, 0, 0, 1)
    assert m.offset == 10 and m.wrong_bytes > 90_000
    c = a.copy()
    npcheck.send_pattern(c, s, c.size, rep=1, corrupt=(c.size, 5))   # only repetition 0
    assert npcheck.verify(c, s, c.size, 1, 0, 1) is None


def test_nocache_pool_rotates_through_fresh_pages():
    p = Pool(np.zeros(64 * PAGE, np.uint8), nocache=True)
    stride, nslots, pos = p.layout(100)
    assert (stride, nslots, pos) == (PAGE, 64, 0)
    p.advance(100, 10)
    assert p.layout(100)[2] == 10 and p.offset(100, 0) == 10 * PAGE
    p.advance(100, 60)                                # wraps around
    assert p.layout(100)[2] == 6
    assert p.layout(3 * PAGE)[2] == 2                 # a larger size carries on from there
    hot = Pool(np.zeros(4096, np.uint8), nocache=False)
    assert hot.layout(100) == (128, 1, 0)
    assert pool_bytes(1000, nocache=False, slots=2) == 2048
    assert pool_bytes(8 << 20, nocache=True, slots=1, requested=1 << 20) == 32 << 20
    assert pool_bytes(64, nocache=True, slots=1) >= 64 << 20


@pytest.mark.parametrize("p", [2, 4, 6, 8])
def test_round_robin_meets_every_pair_once(p):
    rounds = round_robin(range(p))
    assert len(rounds) == p - 1
    seen = [pair for r in rounds for pair in r]
    assert sorted(seen) == [(i, j) for i in range(p) for j in range(i + 1, p)]
    for r in rounds:
        assert sorted(x for pair in r for x in pair) == list(range(p))


# ---- options ------------------------------------------------------------------------------------

def _options(*argv):
    from haloflow.cli import build_parser

    return netpipe.options(build_parser().parse_args(["netpipe", *argv]))


def test_default_options():
    o = _options()
    assert (o.lo, o.hi, o.perturb, o.mode, o.sync, o.trials) == (1, 8 << 20, 3, "pingpong",
                                                                 "fence", 3)
    assert o.paths("np.out")["json"].name == "np.json"
    assert _options("--listen", "0").tcp and _options("--integrity").sizes()[:5] == [1, 2, 3, 4, 6]


@pytest.mark.parametrize("argv, words", [
    (["--min", "16", "--max", "4"], ["--max 4", "smaller than --min 16"]),
    (["--max", "8Q"], ["--max", "8Q"]),
    (["--min", "0"], ["--min"]),
    (["--max", "4G"], ["--max", "MPI count"]),
    (["--perturb", "-1"], ["--perturb"]),
    (["--trial-time", "0"], ["--trial-time"]),
    (["--trials", "0"], ["--trials"]),
    (["--sync", "lock"], ["--sync", "pingpong"]),
    (["--pool", "1G"], ["--pool", "--nocache"]),
    (["--tcp"], ["--listen", "--connect"]),
    (["--tcp", "--listen", "1", "--connect", "h:1"], ["exactly one"]),
    (["--connect", "h:1", "--mode", "put"], ["--tcp", "put"]),
    (["--pairs", "--mode", "bidir"], ["--pairs", "bidir"]),
    (["--pairs", "--integrity"], ["--integrity"]),
    (["--pairs", "--listen", "1"], ["--pairs", "--tcp"]),
    (["-o", "x.json"], ["-o x.json"]),
])
def test_bad_options(argv, words):
    with pytest.raises(UserError) as e:
        _options(*argv)
    for w in words:
        assert w in str(e.value), str(e.value)


def haloflow(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "haloflow", *args], capture_output=True,
                          text=True, timeout=timeout)


def one_line_error(res, code=2):
    assert res.returncode == code, (res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


def test_command_line_errors_are_one_line():
    assert "integrity" in haloflow("netpipe", "--help").stdout
    assert "--mode" in one_line_error(haloflow("netpipe", "--mode", "ping"))
    assert "smaller than" in one_line_error(haloflow("netpipe", "--min", "9", "--max", "8"))
    # one process: not a pair (the MPI check, after the options)
    msg = one_line_error(haloflow("netpipe", "--max", "8"))
    assert "exactly 2 MPI ranks, got 1" in msg


# ---- TCP over loopback --------------------------------------------------------------------------

def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tcp_loopback(tmp_path):
    listener = subprocess.Popen([sys.executable, "-m", "haloflow", "netpipe", "--listen",
                                 "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    try:
        first = listener.stdout.readline()
        assert "listening on 127.0.0.1:" in first, first
        port = first.strip().rsplit(":", 1)[1]
        out = tmp_path / "tcp.out"
        res = haloflow("netpipe", "--connect", f"127.0.0.1:{port}", "--max", "4K",
                       "--trial-time", "0.002", "--trials", "2", "-o", str(out))
        assert res.returncode == 0, res.stderr
        assert "latency" in res.stdout and "peak" in res.stdout
        d = npfile.read_out(out)
        assert d.bytes.tolist() == npsizes.schedule(1, 4096, 3)
        assert (d.seconds > 0).all()
        assert out.with_suffix(".json").exists() and out.with_suffix(".png").stat().st_size
        assert listener.wait(timeout=30) == 0
    finally:
        if listener.poll() is None:
            listener.kill()


def test_tcp_errors():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        msg = one_line_error(haloflow("netpipe", "--listen", f"127.0.0.1:{port}"))
        assert f"port {port} is already in use" in msg
    free = _free_port()
    msg = one_line_error(haloflow("netpipe", "--connect", f"127.0.0.1:{free}"), code=1)
    assert "connection refused" in msg
    assert "port number" in one_line_error(haloflow("netpipe", "--connect", "host:99999"))


def test_tcp_integrity_catches_a_corrupted_byte(tmp_path):
    """Both sides in this process (threads); the fault hook is a function argument only."""
    from haloflow.bench.netpipe.tcp import TcpError, run_tcp

    with socket.socket() as s:   # a free port, released just before the listener binds it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    listen = _options("--listen", f"127.0.0.1:{port}", "--quiet")
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("rc", run_tcp(listen)))
    t.start()
    connect = _options("--connect", f"127.0.0.1:{port}", "--integrity", "--max", "2K",
                       "--quiet", "-o", str(tmp_path / "i.out"))
    err = None
    for _ in range(200):   # until the listener thread is up
        try:
            run_tcp(connect, corrupt=(1536, 1000))
        except netpipe.IntegrityError as e:
            err = e
            break
        except TcpError as e:
            if "refused" not in str(e):
                raise
            time.sleep(0.05)
    t.join(timeout=30)
    assert result.get("rc") == 0
    assert err is not None and err.exit_code == 3
    assert "1536-byte message #0" in str(err) and "offset 1000" in str(err)
    doc = (tmp_path / "i.json").read_text()
    assert '"ok": false' in doc
