"""The simulator's blocks run in order on one thread only where that cannot change a value.

Each kernel below runs under numba's own simulator and after ``cuda_simulator.install()``
in one process: the thread and block indices every simulated thread sees, an atomic sum and
a device function's result are the same; a block reduction through shared memory and
``syncthreads`` (in the kernel, or in a device function it calls) still runs on numba's
threads, and gives the right sums, which the sequential path could not (one thread that
waits in ``syncthreads`` for the others would never return).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROGRAM = r"""
import json
import threading
import numpy as np
from numba import cuda
from haloflow.backends import cuda_simulator

@cuda.jit(device=True)
def twice(x):
    return 2 * x

@cuda.jit
def where(out, total):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i, 0] = cuda.threadIdx.x
        out[i, 1] = cuda.blockIdx.x
        out[i, 2] = twice(cuda.blockDim.x)
        out[i, 3] = cuda.laneid
        cuda.atomic.add(total, 0, i)

@cuda.jit
def block_sums(x, out):
    tile = cuda.shared.array(8, dtype=np.float64)
    t = cuda.threadIdx.x
    tile[t] = x[cuda.grid(1)]
    cuda.syncthreads()
    if t == 0:
        s = 0.0
        for k in range(8):
            s += tile[k]
        out[cuda.blockIdx.x] = s

@cuda.jit(device=True)
def wait_for_block():
    cuda.syncthreads()

@cuda.jit
def through_device(x, out):
    t = cuda.threadIdx.x
    out[t] = x[t]
    wait_for_block()
    if t == 0:
        out[0] = out[0] + out[cuda.blockDim.x - 1]

def launch():
    out, total = np.zeros((40, 4), np.int64), np.zeros(1, np.int64)
    where[3, 16](out, total)
    x = np.arange(24, dtype=np.float64)
    sums = np.zeros(3)
    block_sums[3, 8](x, sums)
    dev = np.zeros(8)
    through_device[1, 8](x[:8], dev)
    return dict(where=out.tolist(), total=int(total[0]), sums=sums.tolist(), dev=dev.tolist())

numba_runs = launch()
installed = cuda_simulator.install()
ours = launch()
from numba.cuda.simulator import kernel as sim
sync = {k.__name__: cuda_simulator.synchronises(k.py_func, sim.FakeCUDAKernel)
        for k in (where, block_sums, through_device)}
print(json.dumps(dict(numba=numba_runs, ours=ours, installed=installed, sync=sync,
                      again=cuda_simulator.install())))
"""


def test_sequential_blocks_give_numbas_values_and_synchronising_kernels_keep_threads():
    res = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    r = json.loads(res.stdout)
    assert r["installed"] and r["again"]
    assert r["sync"] == {"where": False, "block_sums": True, "through_device": True}
    assert r["ours"] == r["numba"]
    where = r["ours"]["where"]
    assert [row[0] for row in where] == [i % 16 for i in range(40)]
    assert [row[1] for row in where] == [i // 16 for i in range(40)]
    assert {row[2] for row in where} == {32}
    assert r["ours"]["total"] == sum(range(40))
    assert r["ours"]["sums"] == [sum(range(8 * b, 8 * b + 8)) for b in range(3)]
    assert r["ours"]["dev"][0] == 0.0 + 7.0
