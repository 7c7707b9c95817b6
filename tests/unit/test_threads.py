"""Serial and threaded kernel builds: the right one is bound, and both compute the same."""

from __future__ import annotations

import numpy as np

from haloflow.linalg import krylov, matrix
from haloflow.parallel import threads


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
import atexit, json, runpy, sys
from haloflow.parallel import threads

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
# Jacobi fused and with the AMG): every kernel built both ways
CONFIGS = {
    "amg": [],
    "cg-sgs-overlap": ["--set", "solver.pressure.method=cg-jacobi", "--set",
                       "solver.momentum.method=bicgstab-sgs", "--halo", "overlap"],
    "amg-cg1": ["--set", "solver.pressure.method=amg-cg1"],
    "cg1-jacobi": ["--set", "solver.pressure.method=cg1-jacobi"],
    "pipecg-jacobi": ["--set", "solver.pressure.method=pipecg-jacobi"],
}


def _run(tmp_path, name, nthreads, extra):
    import json
    import os
    import subprocess
    import sys

    from tests.fieldio import read_fields

    out, rec = tmp_path / f"{name}-t{nthreads}", tmp_path / f"{name}-t{nthreads}.json"
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    env = {**os.environ, "NUMBA_NUM_THREADS": "2", "HALOFLOW_THREAD_MIN_ROWS": "1"}
    cmd = [sys.executable, str(driver), str(rec), "run", "cavity", "-o", str(out),
           "--threads", str(nthreads), "--steps", "12", "--quiet",
           "--set", "mesh.cells=[24,24,1]", "--set", "output.plots=false",
           "--set", "postprocess.cavity=false", *extra]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    s = json.loads((out / "summary.json").read_text())
    assert s["threads"] == nthreads and s["steps"] == 12
    return json.loads(rec.read_text()), read_fields(out)


def test_a_run_on_2_threads_equals_1_thread_and_calls_every_kernel(tmp_path):
    """The cavity with threaded kernels (threshold lowered to 1 row) against the serial
    builds: same fields to round-off (threaded sums add in another order), and between the
    configurations every kernel compiled both ways was called in its threaded build."""
    called, kernels = set(), set()
    for name, extra in CONFIGS.items():
        one, f1 = _run(tmp_path, name, 1, extra)
        two, f2 = _run(tmp_path, name, 2, extra)
        assert one["bound"] == [False] and two["bound"] == [True], (one, two)
        assert one["threaded"] == [] and two["threaded"] == two["kernels"], (one, two)
        scale = np.abs(f1["U"]).max()
        assert scale > 0.1
        assert np.abs(f2["U"] - f1["U"]).max() < 1e-10 * scale, name
        assert np.abs(f2["p"] - f1["p"]).max() < 1e-10 * max(np.abs(f1["p"]).max(), 1.0), name
        called |= set(two["called"])
        kernels |= set(two["kernels"])
    assert len(kernels) >= 19  # krylov and matrix kernels (threads.kernel)
    assert called == kernels, f"never called threaded: {sorted(kernels - called)}"
