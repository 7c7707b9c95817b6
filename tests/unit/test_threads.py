"""Serial and threaded kernel builds: the right one is bound, and both compute the same."""

from __future__ import annotations

import os

import numpy as np
import pytest

from haloflow.linalg import krylov, matrix
from haloflow.parallel import threads

pytestmark = pytest.mark.serial  # 2 threads each, and CPU utilisation is asserted


def test_use_threads_binds_threaded_builds_only_when_they_pay():
    try:
        assert not threads.use_threads(1, 10 * threads.MIN_ROWS)
        serial = krylov._dot2
        assert not threads.use_threads(2, threads.MIN_ROWS - 1)
        assert krylov._dot2 is serial
        assert threads.use_threads(2, threads.MIN_ROWS)
        assert krylov._dot2 is not serial and matrix.spmv is not None
        assert krylov._dot2.targetoptions.get("parallel") is True
        assert not serial.targetoptions.get("parallel")
    finally:
        threads.use_threads(1, 0)
    assert krylov._dot2 is serial


def test_both_builds_agree():
    rng = np.random.default_rng(1)
    n = 5000
    a, b = rng.random(n), rng.random(n)
    indptr = np.arange(0, 3 * n + 1, 3, dtype=np.uint32)
    indices = rng.integers(0, n, 3 * n).astype(np.uint32)
    data = rng.random(3 * n)
    results = []
    try:
        for on in (False, True):
            threads.use_threads(2 if on else 1, threads.MIN_ROWS if on else 0)
            y = np.zeros(n)
            matrix.spmv(indptr, indices, data, a, y)
            results.append((krylov._dot2(a, b, a, a, n), y))
    finally:
        threads.use_threads(1, 0)
    (d0, y0), (d1, y1) = results
    np.testing.assert_allclose(d0, d1, rtol=1e-12)
    np.testing.assert_array_equal(y0, y1)  # rows are independent: bitwise equal


# -- a whole run on 2 threads ------------------------------------------------------------------

# Runs the command line after wrapping every kernel that ``use_threads`` binds, so that the
# run records which kernels it called and whether the threaded builds were bound.  Callers
# look kernels up as module globals at call time (threads.py), so the wrappers see every call.
DRIVER = '''
import atexit, json, os, runpy, sys
from haloflow.linalg import lockstep
from haloflow.parallel import mpicall, threads

if os.environ.get("PYTHON_PATH_ONLY"):  # no compiled solvers: the Python-driven iterations
    mpicall.addresses = lambda: None
    lockstep.lockstep_plan = lambda *args: None

record = {"bound": [], "called": [], "kernels": [], "threaded": []}
bind = threads.use_threads


def counting(name, fn):
    def wrapper(*args):
        record["called"].append(name)
        return fn(*args)
    return wrapper


def use_threads(n, rows):
    on = bind(n, rows)
    record["bound"].append(on)
    for module, name, serial, threaded in threads._KERNELS:
        full = module["__name__"] + "." + name
        record["kernels"].append(full)
        if module[name] is threaded:
            record["threaded"].append(full)
        module[name] = counting(full, module[name])
    return on


threads.use_threads = use_threads
path, sys.argv = sys.argv[1], ["haloflow", *sys.argv[2:]]
atexit.register(lambda: open(path, "w").write(json.dumps(
    {k: sorted(set(v)) for k, v in record.items()})))
runpy.run_module("haloflow", run_name="__main__", alter_sys=True)
'''

# pressure by AMG-FCG and by Jacobi-CG, momentum by BiCGStab with Jacobi and with symmetric
# Gauss-Seidel (the kernels without a built-in preconditioner), SpMV in one sweep and in the
# inner/outer runs of the overlapped exchange, and the fewer-reduction CG variants (with
# Jacobi fused and with the AMG): every kernel built both ways.  The AMG and the momentum's
# BiCGStab-Jacobi run compiled, on thread blocks (linalg/blocks.py), whose hybrid
# Gauss-Seidel changes the answer within the solver tolerance; "python" drives the AMG solves
# (FCG, single-reduction CG) and BiCGStab from Python, where they call the threaded builds of
# the vector kernels (the compiled single-reduction CG on blocks: tests/unit/test_kcycle.py).
TOL = {"amg": 1e-7}  # relative; the others differ by summation order only
STEPS = 4
CONFIGS = {
    "amg": [],
    "python": [],
    "cg-sgs-overlap": ["--set", "solver.pressure.method=cg-jacobi", "--set",
                       "solver.momentum.method=bicgstab-sgs", "--halo", "overlap"],
    "python-cg1": ["--set", "solver.pressure.method=amg-cg1"],
    "cg1-jacobi": ["--set", "solver.pressure.method=cg1-jacobi"],
    "pipecg-jacobi": ["--set", "solver.pressure.method=pipecg-jacobi"],
}


def _start(tmp_path, name, nthreads, extra, env=None):
    """Launch one recorded run; ``_finish`` waits for it and reads what it wrote."""
    import os
    import subprocess
    import sys

    out, rec = tmp_path / f"{name}-t{nthreads}", tmp_path / f"{name}-t{nthreads}.json"
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    env = {**os.environ, "NUMBA_NUM_THREADS": "2", "HALOFLOW_THREAD_MIN_ROWS": "1",
           "PYTHON_PATH_ONLY": "1" if name.startswith("python") else "", **(env or {})}
    cmd = [sys.executable, str(driver), str(rec), "run", "cavity", "-o", str(out),
           "--threads", str(nthreads), "--steps", str(STEPS), "--quiet",
           "--set", "mesh.cells=[24,24,1]", "--set", "output.plots=false",
           "--set", "postprocess.cavity=false", *extra]
    if name.startswith("3d"):
        cmd[cmd.index("mesh.cells=[24,24,1]")] = "mesh.cells=[12,12,12]"
        cmd += ["--set", "boundary.front.type=wall", "--set", "boundary.back.type=wall",
                "--set", "solver.dt=0.05"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    return proc, out, rec, nthreads


def _finish(started):
    import json

    from tests.fieldio import read_fields

    proc, out, rec, nthreads = started
    try:
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 0, f"{stdout}\n{stderr}"
    s = json.loads((out / "summary.json").read_text())
    assert s["threads"] == nthreads and s["steps"] == STEPS
    prof = json.loads((out / "profile.json").read_text())
    assert prof["threads"]["threaded"] == (nthreads > 1)
    return json.loads(rec.read_text()), read_fields(out), s, prof


def _run(tmp_path, name, nthreads, extra, env=None):
    return _finish(_start(tmp_path, name, nthreads, extra, env))


def test_a_run_on_2_threads_equals_1_thread_and_calls_every_kernel(tmp_path):
    """The cavity with threaded kernels (threshold lowered to 1 row) against the serial
    builds: same fields to round-off (threaded sums add in another order), and between the
    configurations every kernel compiled both ways was called in its threaded build."""
    called, kernels = set(), set()
    for name, extra in CONFIGS.items():  # both builds side by side: only answers compared
        started = [_start(tmp_path, name, n, extra) for n in (1, 2)]
        (one, f1, _, _), (two, f2, _, _) = (_finish(s) for s in started)
        assert one["bound"] == [False] and two["bound"] == [True], (one, two)
        assert one["threaded"] == [] and two["threaded"] == two["kernels"], (one, two)
        scale = np.abs(f1["U"]).max()
        assert scale > 0.1
        tol = TOL.get(name, 1e-10)
        assert np.abs(f2["U"] - f1["U"]).max() < tol * scale, name
        assert np.abs(f2["p"] - f1["p"]).max() < tol * max(np.abs(f1["p"]).max(), 1.0), name
        called |= set(two["called"])
        kernels |= set(two["kernels"])
    assert len(kernels) >= 19  # krylov and matrix kernels (threads.kernel)
    assert called == kernels, f"never called threaded: {sorted(kernels - called)}"


def test_3d_cavity_on_thread_blocks_equals_1_thread_and_repeats(tmp_path):
    """The 3D cavity with the compiled pressure and momentum solves on 2 thread blocks
    (every AMG level but the coarsest threaded: threshold 1 row): U and p equal one thread's
    to the solver tolerance, with the same iteration counts to within one per solve; and a
    second threaded run gives the same bits (partial sums in block order, Gauss-Seidel's
    blocks reading a snapshot: nothing depends on how the threads are scheduled)."""
    _, f1, s1, p1 = _run(tmp_path, "3d", 1, [])
    _, f2, s2, p2 = _run(tmp_path, "3d", 2, [])
    _, f3, _, _ = _run(tmp_path, "3d-again", 2, [])
    for k in ("U", "p"):
        scale = np.abs(f1[k]).max()
        assert scale > 0.1
        assert np.abs(f2[k] - f1[k]).max() < 1e-7 * scale, k
        np.testing.assert_array_equal(f3[k], f2[k])
    assert abs(s2["p_iters_mean"] - s1["p_iters_mean"]) <= 1.0
    assert abs(s2["u_iters_mean"] - s1["u_iters_mean"]) <= 1.0
    # the threaded run's solves stayed compiled: as many compiled reductions per step
    assert p2["per_step"]["compiled_allreduces"] > 0.9 * p1["per_step"]["compiled_allreduces"]
    th = p2["threads"]
    assert th["threads"] == 2 and 0.0 < th["threaded_fraction"] <= 1.0
    assert 1.0 < th["bound_speedup"] <= 2.0
    # CPU time: the second thread did part of the work; on one thread there is no other
    assert 0.5 < th["utilisation"] <= 1.05 and th["main_thread_cpu_s_per_step"] > 0
    assert th["cpu_s_per_step"] > 1.05 * th["main_thread_cpu_s_per_step"]  # a second worker
    assert 0.9 < p1["threads"]["utilisation"] < 1.1


SPINS = {"passive": "0", "active": "30000000000", "default": "300000"}  # GNU OpenMP's


def _wait_policy(tmp_path, name, sets, env_policy=None, cores=None):
    """profile.json's wait policy and the log's line of a tiny 2-thread run (``cores``: the
    only cores it may run on); the policy must be the one OpenMP took when it started (its
    spin count, which GNU OpenMP prints under ``OMP_DISPLAY_ENV=verbose``)."""
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["NUMBA_NUM_THREADS"] = "2"
    env["OMP_DISPLAY_ENV"] = "verbose"
    if env_policy:
        env["OMP_WAIT_POLICY"] = env_policy
    out = tmp_path / name
    res = subprocess.run(
        [sys.executable, "-m", "haloflow", "run", "cavity", "-o", str(out), "--threads", "2",
         "--steps", "2", "--quiet", "--set", "mesh.cells=[8,8,1]", "--set",
         "output.plots=false", "--set", "output.fields=false", *sets],
        env=env, check=True, capture_output=True, text=True,
        preexec_fn=(lambda: os.sched_setaffinity(0, cores)) if cores else None)
    prof = json.loads((out / "profile.json").read_text())
    log = (out / "log.txt").read_text()
    policy = prof["threads"]["wait_policy"]
    if "GOMP_SPINCOUNT" in res.stderr:  # GNU OpenMP: the policy in effect is the one named
        assert f"GOMP_SPINCOUNT = '{SPINS[policy]}'" in res.stderr, (policy, res.stderr)
    return policy, log


def test_thread_wait_sets_openmps_policy_unless_the_environment_does(tmp_path):
    spin = ["--set", 'parallel.thread_wait="spin"']
    sleep = ["--set", 'parallel.thread_wait="sleep"']
    policy, log = _wait_policy(tmp_path, "sleep", sleep)
    assert policy == "passive" and 'parallel.thread_wait = "sleep"' in log
    assert _wait_policy(tmp_path, "spin", spin)[0] == "active"
    assert _wait_policy(tmp_path, "env", spin, env_policy="passive")[0] == "passive"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two cores and affinity masks")
def test_thread_wait_auto_spins_only_where_the_threads_have_cores(tmp_path):
    """``auto`` (the default): OpenMP's own brief spin where a rank's threads fit its
    cores, sleeping where two threads would share one core."""
    auto = ["--set", 'parallel.thread_wait="auto"']
    policy, log = _wait_policy(tmp_path, "auto", [])
    assert policy == "default" and 'parallel.thread_wait = "auto"' in log
    assert "OpenMP wait policy default" in log
    assert _wait_policy(tmp_path, "one-core", auto, cores={min(os.sched_getaffinity(0))})[0] \
        == "passive"
    assert _wait_policy(tmp_path, "env", auto, env_policy="active")[0] == "active"


def test_thread_wait_rejects_other_words():
    from tests.case_errors import error

    msg = error("cavity", ['parallel.thread_wait="busy"'])
    assert "parallel.thread_wait" in msg and '"sleep"' in msg and '"spin"' in msg
