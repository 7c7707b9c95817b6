"""The warm-up's two processes: between them every warm case, and a lock file per kernel
held while it compiles."""

from __future__ import annotations

from haloflow import warmup


def test_the_processes_share_out_every_case_once():
    cases = [i for part in warmup.PARTS for i in part]
    assert sorted(cases) == list(range(len(warmup.CASES)))


def test_a_compile_holds_its_functions_lock(tmp_path, monkeypatch):
    from numba import njit
    from numba.core.dispatcher import Dispatcher

    monkeypatch.setattr(Dispatcher, "compile", Dispatcher.compile)  # put back afterwards
    warmup.lock_compiles(str(tmp_path))

    @njit
    def inner(x):
        return x + 1

    @njit
    def outer(x):
        return inner(x) * 2

    assert outer(1) == 4 and outer(1.5) == 5.0
    assert len(list(tmp_path.iterdir())) == 2  # one per function, whatever its signatures


def test_a_compile_waits_while_another_holds_the_lock(tmp_path, monkeypatch):
    import fcntl
    import threading
    import time

    from numba import njit
    from numba.core.dispatcher import Dispatcher

    monkeypatch.setattr(Dispatcher, "compile", Dispatcher.compile)
    warmup.lock_compiles(str(tmp_path))

    @njit
    def kernel(x):
        return x - 1

    done = []
    with open(warmup.lock_file(str(tmp_path), kernel.py_func), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # as the other process would
        t = threading.Thread(target=lambda: done.append(kernel(3)))
        t.start()
        time.sleep(0.5)
        assert not done and t.is_alive()
    t.join(timeout=60)
    assert done == [2]


def test_warming_one_case_in_two_processes_and_a_bad_case():
    """``--case`` (what ``make run`` runs): the case's kernels in two processes, then ready;
    a case that cannot be read is one line and exit 2, before any process starts."""
    import subprocess
    import sys

    from tests.limited import REPO

    def warm(*args):
        return subprocess.run([sys.executable, "-m", "haloflow.warmup", "--case", "cavity",
                               "--set", "mesh.cells=[8,8,1]", *args], cwd=REPO,
                              capture_output=True, text=True, timeout=600)

    ok = warm("--jobs", "2")
    assert ok.returncode == 0, ok.stderr
    assert "compiling the kernels cavity needs" in ok.stdout and "kernels ready" in ok.stdout
    bad = warm("--set", "solver.dt=-1")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert "solver.dt" in bad.stderr and "kernels ready" not in bad.stdout
