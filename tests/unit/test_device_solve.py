"""The linear solves on the cuda backend (linalg/device_solve.py, device_bicgstab.py)
against the host's.

Wavefronts first (no device needed): a sweep taken wavefront by wavefront, the rows of each
in any order, equals the sequential sweep bit for bit.  Then, in numba's CUDA simulator (a
process of its own: numba chooses the simulator when it loads):
- the device pressure solve against the compiled host solve on V-, K- and AMLI-cycle
  hierarchies (same iterations, same answer to round-off, every read-back counted);
- the momentum's BiCGStab-Jacobi against the host's;
- what the device cannot do yet, said in one line.
The cavity run with ``--backend cuda`` on 2 ranks against the same run on the host is in
tests/mpi/test_cavity_mpi.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp

from haloflow.linalg.amg_kernels import gs_rows, gs_sweep
from haloflow.linalg.device_solve import _cut_schedule
from haloflow.linalg.wavefronts import wavefronts


def _random_matrix(n, density, seed, symmetric):
    rng = np.random.default_rng(seed)
    a = sp.random(n, n, density=density, random_state=rng, format="csr")
    if symmetric:
        a = a + a.T
    a = (a + sp.identity(n) * 4.0).tocsr()
    a.sort_indices()
    return a


def _waves_sweep(a, dinv, b, x, rows, ptr, forward, rng):
    """A sweep the way a device takes it: wavefront after wavefront, each one's rows in a
    random order."""
    order = range(len(ptr) - 1) if forward else range(len(ptr) - 2, -1, -1)
    for w in order:
        for i in rng.permutation(rows[ptr[w]:ptr[w + 1]]):
            s = b[i]
            for k in range(a.indptr[i], a.indptr[i + 1]):
                s -= a.data[k] * x[a.indices[k]]
            x[i] += s * dinv[i]


@pytest.mark.parametrize("symmetric", [True, False], ids=["symmetric", "one-sided"])
@pytest.mark.parametrize("forward", [True, False], ids=["forward", "backward"])
def test_wavefronts_sweep_as_the_sequential_sweep(symmetric, forward):
    """One-sided couplings too: a row that reads another's old value must go first."""
    rng = np.random.default_rng(3)
    for seed in range(4):
        a = _random_matrix(60, 0.05, seed, symmetric)
        n = a.shape[0]
        dinv = 1.0 / a.diagonal()
        b = rng.standard_normal(n)
        x0 = rng.standard_normal(n)
        want = x0.copy()
        gs_sweep(a.indptr, a.indices, a.data, np.zeros(n, np.int64), dinv, b, want, n, forward)
        rows, ptr = wavefronts(a.indptr, a.indices, n)
        assert sorted(rows) == list(range(n))
        got = x0.copy()
        _waves_sweep(a, dinv, b, got, rows, ptr, forward, rng)
        assert np.array_equal(got, want)


@pytest.mark.parametrize("forward", [True, False], ids=["forward", "backward"])
def test_cut_rows_sweep_as_gs_rows(forward):
    """The rows next to a cut (those with ghost columns), swept again after an exchange:
    their wavefronts give ``gs_rows``'s values, the other rows held fixed."""
    rng = np.random.default_rng(5)
    n, ghosts = 50, 12
    owned = _random_matrix(n, 0.06, 7, True)
    a = sp.hstack([owned, sp.random(n, ghosts, density=0.05, random_state=rng)]).tocsr()
    a.sort_indices()
    rows = np.repeat(np.arange(n), np.diff(a.indptr))
    cut = np.unique(rows[a.indices >= n])
    lev = SimpleNamespace(indptr=a.indptr, indices=a.indices, ncols=n + ghosts, cut=cut)
    dinv = 1.0 / a.diagonal()[:n]
    b = rng.standard_normal(n)
    x0 = rng.standard_normal(n + ghosts)
    want = x0.copy()
    gs_rows(a.indptr, a.indices, a.data, np.zeros(n, np.int64), dinv, b, want, cut, forward)
    order, ptr = _cut_schedule(lev)
    assert sorted(order) == list(cut) and len(ptr) > 2  # coupled cut rows: several waves
    got = x0.copy()
    _waves_sweep(a, dinv, b, got, order, ptr, forward, rng)
    assert np.array_equal(got, want)


def test_wavefronts_of_a_grid_are_its_diagonals():
    """An n x n five-point grid has 2n - 1 wavefronts; ghost columns (>= n) order nothing."""
    m = 7
    t = sp.diags([-1, 2, -1], [-1, 0, 1], shape=(m, m))
    a = (sp.kron(sp.identity(m), t) + sp.kron(t, sp.identity(m))).tocsr()
    a.sort_indices()
    rows, ptr = wavefronts(a.indptr, a.indices, m * m)
    assert len(ptr) - 1 == 2 * m - 1
    assert all(sum(divmod(int(r), m)) == w for w in range(2 * m - 1)
               for r in rows[ptr[w]:ptr[w + 1]])
    ghost = sp.hstack([a, sp.identity(m * m)]).tocsr()  # a ghost column per row
    assert np.array_equal(wavefronts(ghost.indptr, ghost.indices, m * m)[1], ptr)


SIM_SOLVE = r"""
import json
import numpy as np
from mpi4py import MPI
from haloflow import backends
from haloflow.linalg import flexible
from haloflow.linalg.bicgstab import bicgstab
from haloflow.linalg import amg as amg_module, kcycle, krylov as K
from haloflow.linalg.amg import AMG
from haloflow.linalg.device_bicgstab import DeviceBiCGStab
from haloflow.linalg.device_solve import DeviceSolve
from haloflow.linalg.poisson import laplacian, smooth_rhs
from haloflow.mesh.blocks import box
from haloflow.parallel.local import build_local
from haloflow.parallel.reduce import Reducer

# three levels or more on these small meshes, Krylov steps on their first coarse level
amg_module.COARSEST = amg_module.COARSEST_2D = 12
amg_module.KRYLOV_ABOVE = 12
sums = [0]  # the reductions, on every level
plain_sum = Reducer.sum
def counted_sum(self, *vals):
    sums[0] += 1
    return plain_sum(self, *vals)
Reducer.sum = counted_sum
be = backends.make("cuda")
out = []
for cells, dirichlet, cycle in (((12, 10, 1), True, "V"), ((12, 10, 1), False, "K"),
                                ((6, 6, 5), False, "A")):
    mesh = box(cells)
    lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    A = laplacian(lm, MPI.COMM_SELF, fixed=("left", "bottom") if dirichlet else ())
    red = Reducer(MPI.COMM_SELF)
    b = smooth_rhs(lm, red, zero_mean=not dirichlet)
    amg = AMG(A, lm, red, cycle=cycle)
    ws = K.Workspace(lm.n_cells, lm.n_owned, 8)
    x1 = np.zeros(lm.n_cells)
    host = kcycle.compiled_solver(amg, flexible.fcg).solve(b, x1, 1e-9, 100, ws)
    dev = DeviceSolve(amg, be)
    x2 = np.zeros(lm.n_cells)
    calls = sums[0]
    got = dev.solve(b, x2, 1e-9, 100, ws)
    calls = sums[0] - calls
    A.data *= 1.5  # a new matrix: the refresh copies every level's coefficients again
    before = dev.profile()["to_device_bytes"]
    dev.refresh()
    refresh = dev.profile()["to_device_bytes"] - before
    levels = [(lev.n, len(lev.indices)) for lev in amg.levels[:-1]]
    # the refresh on the device (one rank): the top level's new coefficients put there, the
    # rest summed there; then the host's refresh of the same matrix, level by level
    A.data *= 0.75
    dev.copies.upload(dev.levels[0].data, A.data)
    dev.refresh_on_device()
    got_levels = [(dev.be.to_host(d.data), dev.be.to_host(d.dinv)[:d.n])
                  for d in dev.levels[:-1]]
    coarsest = amg.levels[-1].data.copy()
    amg.refresh()
    on_device = all(np.array_equal(g[0][:len(lev.data)], lev.data)
                    and np.array_equal(g[1], lev.dinv[:lev.n])
                    for g, lev in zip(got_levels, amg.levels[:-1], strict=True))
    on_device = on_device and np.array_equal(coarsest, amg.levels[-1].data)
    out.append(dict(on_device=bool(on_device and dev.sums is not None),
                    cycle=cycle, iters=(host.iters, got.iters),
                    converged=bool(got.converged),
                    diff=float(np.abs(x1 - x2).max() / np.abs(x1).max()),
                    krylov=[bool(lev.krylov) for lev in amg.levels],
                    reductions=calls, **dev.profile(), refresh_bytes=refresh,
                    refresh_want=sum(8 * (n + nnz) for n, nnz in levels), n=lm.n_owned))
# the momentum's solver, BiCGStab-Jacobi, on a nonsymmetric matrix of a momentum's kind:
# a Dirichlet Laplacian's couplings skewed as upwinding skews them, a time term on the diagonal
mesh = box((12, 10, 1))
lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
A = laplacian(lm, MPI.COMM_SELF, fixed=("left",))
g = A.data[A.pattern.upper_pos]
A.fill(A.diag + 0.3, 1.4 * g, 0.6 * g)
red = Reducer(MPI.COMM_SELF)
b = smooth_rhs(lm, red)
ws = K.Workspace(lm.n_cells, lm.n_owned, 8)
x1 = np.full(lm.n_cells, 0.1)
host = bicgstab(A, b, x1, 1e-10, 100, red, ws)
dev = DeviceBiCGStab(A.pattern, lm, A.ex, be)
dev.set_matrix(A)
x2 = np.full(lm.n_cells, 0.1)
got = dev.solve(b, x2, 1e-10, 100, red)
out.append(dict(cycle="bicgstab", iters=(host.iters, got.iters), converged=bool(got.converged),
                diff=float(np.abs(x1 - x2).max() / np.abs(x1).max())))
print(json.dumps(out))
"""


def _simulate(code, *args, timeout=600):
    res = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         timeout=timeout, env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


def test_device_solve_equals_the_host_solve_in_the_simulator():
    for r in json.loads(_simulate(SIM_SOLVE)):
        assert r["iters"][0] == r["iters"][1] and r["converged"], r
        assert r["diff"] < 1e-12, r
        if r["cycle"] == "bicgstab":
            continue
        if r["cycle"] != "V":  # the Krylov cycles run on the first coarse level (not the last)
            assert r["krylov"][1] and len(r["krylov"]) >= 3, r
        # every reduction read back once, and FCG's second one twice where its update's r.r
        # and z.q (two kernels) travel together: in every iteration but a last one whose
        # convergence the first sums foresaw (r.r alone, no cycle)
        fused = r["reduction_reads"] - r["reductions"]
        assert r["iters"][1] - 1 <= fused <= r["iters"][1], r
        # the solve: right-hand side and first guess in, the answer out
        assert r["to_host_bytes"] >= 8 * r["n"] + 40 * r["reduction_reads"], r
        assert r["refresh_bytes"] == r["refresh_want"], r
        assert r["on_device"], r  # the refresh on the device: the host's, bit for bit


@pytest.mark.parametrize(("case", "args", "said"), [
    ("cavity", ["--set", 'solver.pressure.method="amg-cg1"'], "amg-cg only so far"),
    ("cavity", ["--set", "solver.pressure.agglomerate=100"],
     "solver.pressure.agglomerate must be 0, not 100"),
])
def test_what_the_device_solve_cannot_do_yet_is_said_in_one_line(tmp_path, case, args, said):
    cmd = [sys.executable, "-m", "haloflow", "run", case, "--backend", "cuda", "--steps",
           "1", "-o", str(tmp_path / "r"), "--quiet", *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"})
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], res.stderr
