"""``haloflow trace``: the PMPI library traces a 2- and a 3-rank mpi4py program making every
call type it writes (``trace_program.py``); each rank's trace is compared line by line with
what the program does, and the rank summaries' counts and bytes with the trace."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from haloflow.study.trace import TraceError
from haloflow.study.trace.build import find_mpicc
from haloflow.study.trace.files import actions, summary, trace_files
from tests.mpi.conftest import REPO, mpi_env, require_mpiexec

PROGRAM = Path(__file__).with_name("trace_program.py")
NEIGHBOR_TAG = 1073741000


def require_mpicc() -> str:
    """The MPI compiler wrapper the library is built with; a skip without one (a failure
    under CI)."""
    try:
        return find_mpicc()
    except TraceError as e:
        if os.environ.get("CI"):
            pytest.fail(f"{e} (CI must run the tracing tests)", pytrace=False)
        pytest.skip(f"no MPI compiler wrapper: {e}")


def trace(tmp_path: Path, n: int, program: Path = PROGRAM, *extra: str):
    exe = require_mpiexec()
    require_mpicc()
    out = tmp_path / f"trace{n}"
    cmd = [sys.executable, "-m", "haloflow", "trace", "-o", str(out), *extra, "--",
           str(exe), "-n", str(n), sys.executable, str(program)]
    r = subprocess.run(cmd, cwd=REPO, env=mpi_env(), capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stderr
    return out, r.stdout


def expected(r: int, n: int) -> list:
    """The lines rank r of n writes (compute bursts left out); a set: in any order."""
    nxt, prv = (r + 1) % n, (r - 1) % n
    a, b = 64 * (r + 1), 64 * (prv + 1)  # bytes r sends to nxt, receives from prv
    T = NEIGHBOR_TAG
    lines = ["init"]
    lines += {0: ["send 1 5 80", "recv 1 6 12"], 1: ["recv 0 5 80", "send 0 6 12"]}.get(r, [])
    lines += [f"irecv {prv} 7 {b}", f"isend {nxt} 7 {a}", "waitall"]
    lines += [f"irecv {prv} 12 {b}", f"isend {nxt} 12 {a}", f"irecv {prv} 13 {b}",
              f"isend {nxt} 13 {a}", f"wait {prv} {r} 12", f"wait {r} {nxt} 12", "waitall"]
    lines += [f"isend {nxt} 8 {a}", f"wait {r} {nxt} 8", f"irecv {prv} 8 {b}",
              f"wait {prv} {r} 8"]
    lines += [f"irecv {prv} 9 {b}", f"isend {nxt} 9 {a}", "waitall"] * 3
    lines += [f"irecv {prv} 9 {b}", f"isend {nxt} 9 {a}",
              frozenset({f"wait {prv} {r} 9", f"wait {r} {nxt} 9"})]
    lines += [f"irecv {prv} 11 {b}", f"isend {nxt} 11 {a}", f"wait {r} {nxt} 11",
              f"wait {prv} {r} 11"]
    counts = [8 * (k + 1) for k in range(n)]
    cs = " ".join(map(str, counts))
    zeros = " ".join(["0"] * n)
    lines += ["barrier", f"bcast 128 {n - 1}", "reduce 32 0 0", "allreduce 24 0",
              "allgather 16 16", f"allgatherv {8 * (r + 1)} {cs}",
              ("gather", 16, 16 if r == 1 else None, 1),  # the receive count at the root only
              f"gatherv {8 * (r + 1)} {cs if r == 0 else zeros} 0",
              ("scatter", 16 if r == 1 else None, 16, 1),  # the send count at the root only
              f"scatterv {cs if r == 0 else zeros} {8 * (r + 1)} 0",
              "alltoall 8 8",
              f"alltoallv {8 * n * (r + 1)} {' '.join([str(8 * (r + 1))] * n)} "
              f"{sum(counts)} {cs}",
              f"reducescatter {cs} 0", "scan 40 0", "exscan 40 0",
              "allreduce 16 0", "barrier", "bcast 56 0"]
    for size in (40, 48):
        lines += [f"irecv {prv} {T} {size}", f"isend {nxt} {T} {size}",
                  f"wait {prv} {r} {T}", f"wait {r} {nxt} {T}"]
    return lines + ["barrier", "finalize"]


def check_rank(got: list[str], want: list) -> None:
    i = 0
    for w in want:
        if isinstance(w, frozenset):
            assert frozenset(got[i:i + len(w)]) == w, (i, got[i:i + len(w)], w)
            i += len(w)
            continue
        if isinstance(w, tuple):  # name and the significant numbers (None: not significant)
            tokens = got[i].split()
            assert tokens[0] == w[0] and len(tokens) == len(w), (i, got[i], w)
            for t, x in zip(tokens[1:], w[1:], strict=True):
                assert x is None or int(t) == x, (i, got[i], w)
        else:
            assert got[i] == w, (i, got[i], w)
        i += 1
    assert i == len(got), got[i:]


@pytest.mark.parametrize("n", [2, 3])
def test_every_call_type_traced(tmp_path, n):
    out, stdout = trace(tmp_path, n)
    files = trace_files(out)
    assert len(files) == n
    for r, f in enumerate(files):
        tokens = list(actions(f))
        assert all(t[0] == str(r) for t in tokens)
        bursts = [float(t[2]) for t in tokens if t[1] == "compute"]
        assert bursts and all(x > 0 and x == int(x) for x in bursts)
        assert not any(a[1] == "compute" and b[1] == "compute"
                       for a, b in zip(tokens[:-1], tokens[1:], strict=True))  # one line a burst
        got = [" ".join(t[1:]) for t in tokens if t[1] != "compute"]
        check_rank(got, expected(r, n))
        s = summary(out, r)
        assert s["size"] == n and s["skipped"] == 1  # the sub-communicator's allreduce
        assert s["compute_s"] == pytest.approx(sum(bursts) / s["flops_per_s"], rel=1e-6,
                                               abs=1e-8)
        names = Counter(t[1] for t in tokens)
        for kind in ("send", "recv", "isend", "irecv", "wait", "waitall", "barrier", "bcast",
                     "allreduce", "allgatherv", "alltoallv", "gatherv", "scatterv", "scan"):
            assert s["calls"][kind] == names[kind], kind
        for kind in ("send", "isend", "recv", "irecv"):
            assert s["bytes"][kind] == sum(int(t[4]) for t in tokens if t[1] == kind), kind
        assert s["calls"]["neighbor"] == 4 and s["bytes"]["neighbor"] == 88
    assert f"{'all':>5}" in stdout.splitlines()[-2]  # the totals row of the summary


def test_missing_compiler_is_one_line_exit_2(tmp_path):
    cmd = [sys.executable, "-m", "haloflow", "trace", "-o", str(tmp_path / "t"), "--mpicc",
           "no-such-mpicc", "--", "true"]
    r = subprocess.run(cmd, cwd=REPO, env=mpi_env(), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "no-such-mpicc" in r.stderr
    assert not (tmp_path / "t").exists()


def test_failing_compiler_is_one_line_exit_2(tmp_path):
    env = {**mpi_env(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "haloflow", "trace", "-o", str(tmp_path / "t"), "--mpicc",
           "false", "--", "true"]
    r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "could not build the tracing library" in r.stderr


def test_no_command_and_used_folder_are_bad_input(tmp_path):
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("keep")
    for args in (["-o", str(tmp_path / "a")], ["-o", str(tmp_path / "used"), "--", "true"]):
        r = subprocess.run([sys.executable, "-m", "haloflow", "trace", *args], cwd=REPO,
                           env=mpi_env(), capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert (tmp_path / "used" / "x").read_text() == "keep"
