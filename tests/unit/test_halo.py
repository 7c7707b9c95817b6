"""Halo strategies in one process: names, staging formulas and the overlapped SpMV.

A rank may list itself as a neighbour on COMM_SELF, which gives real messages without
mpiexec; the multi-rank checks are in tests/mpi/test_halo_strategies.py.
"""

from types import SimpleNamespace

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.case import CaseError, load_case
from haloflow.linalg.matrix import DistMatrix, Pattern
from haloflow.mesh.blocks import box
from haloflow.parallel import halo
from haloflow.parallel.decompose import decompose
from haloflow.parallel.halo.aggregated import AggregatedExchanger
from haloflow.parallel.local import build_local

COMM = MPI.COMM_SELF


def _self_pattern():
    """Ten owned cells; the rank sends cells 7, 1, 3 to itself, twice over (N = 2)."""
    return SimpleNamespace(n_owned=10, neighbours=np.array([0, 0]), send_ptr=np.array([0, 3, 5]),
                           send_cells=np.array([7, 1, 3, 2, 9]), recv_ptr=np.array([0, 3, 5]))


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(ValueError, match="perfield, packed, aggregated, neighbor, overlap"):
        halo.make("fastest", _self_pattern(), COMM)
    with pytest.raises(ValueError, match="host, device, device-aware"):
        halo.make("packed", _self_pattern(), COMM, staging="gpu")
    with pytest.raises(CaseError, match='"perfield", "packed", "aggregated", "neighbor" or'):
        load_case("cavity", ["parallel.halo=fastest"])
    assert load_case("cavity", ["parallel.halo=overlap"]).parallel.halo == "overlap"


@pytest.mark.parametrize("name", list(halo.STRATEGIES))
@pytest.mark.parametrize("m", [1, 3])
@pytest.mark.parametrize("staging", ["device", "device-aware"])
def test_staging_copy_counts(name, m, staging):
    """Device staging copies per exchange: 2M (perfield), 2MN (packed), 2 (one buffer);
    device-aware staging none (MPI reads the device buffers)."""
    lm = _self_pattern()
    ex = halo.make(name, lm, COMM, staging=staging)
    aware = staging == "device-aware"
    assert ex.space.on_device and ex.space.staged != aware and ex.overlaps == (name == "overlap")
    fields = [np.arange(15.0) * (j + 1) for j in range(m)]
    for f in fields:
        f[10:] = np.nan
    ex.exchange(fields)
    for f in fields:
        np.testing.assert_array_equal(f[10:], f[[7, 1, 3, 2, 9]])
    st, n, s1, s2 = ex.stats, 2, 15, 5
    copies = 0 if aware else {"perfield": 2 * m, "packed": 2 * m * n}.get(name, 2)
    values = 0 if aware else 2 * m * s1 if name == "perfield" else 2 * m * s2
    assert (st.calls, st.copies, st.copy_bytes) == (1, copies, 8 * values)
    assert (st.messages, st.bytes) == ((m * n if name == "perfield" else n), 8 * m * s2)
    assert st.copy_s <= st.pack_s + st.unpack_s
    ex.close()


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "mpi4py"])
def test_aggregated_both_paths(compiled):
    """MPI called from numba, or through mpi4py (where the library cannot be found)."""
    ex = AggregatedExchanger(_self_pattern(), COMM, compiled=compiled)
    assert ex.compiled == compiled
    f, g = np.arange(15.0), -np.arange(15.0)
    for _ in range(3):
        f[10:] = g[10:] = np.nan
        ex.exchange([f])
        ex.finish(ex.start((f, g)))
        np.testing.assert_array_equal(f[10:], f[[7, 1, 3, 2, 9]])
        np.testing.assert_array_equal(g[10:], g[[7, 1, 3, 2, 9]])
    st = ex.stats
    assert (st.calls, st.messages, st.bytes, st.copies) == (6, 12, 3 * 8 * (5 + 10), 0)
    assert min(st.pack_s, st.wait_s, st.unpack_s) > 0.0
    ex.close()


class _LateGhosts:
    """Overlapping stand-in exchanger: ghosts are NaN until ``finish`` fills them."""

    overlaps = True

    def __init__(self, lm, x_global):
        self.lm, self.x_global = lm, x_global

    def start(self, fields):
        for f in fields:
            f[self.lm.n_owned:] = np.nan
        return fields

    def finish(self, fields):
        for f in fields:
            f[self.lm.n_owned:] = self.x_global[self.lm.global_cells[self.lm.n_owned:]]

    def exchange(self, fields):
        self.finish(self.start(fields))


class _Blocking(_LateGhosts):
    overlaps = False


@pytest.mark.parametrize("nparts", [2, 3])
def test_overlapped_spmv_is_bitwise_identical(nparts):
    """Interior rows first, ghost rows after: same bits as one pass, and no ghost is read
    before it arrives (a NaN ghost would poison an interior row)."""
    m = box((9, 7, 2), (1.0, 1.3, 0.4), grading=(1.5, 1.0, 1.0))
    rng = np.random.default_rng(3)
    x = rng.standard_normal(m.n_cells)
    b = rng.standard_normal(m.n_cells)
    parts = decompose(m, nparts, "metis")
    for r in range(nparts):
        lm = build_local(m, parts, r)
        p = Pattern(lm)
        rows = np.concatenate([np.arange(lo, hi) for lo, hi in
                               p.inner_runs.reshape(-1, 2).tolist() + p.outer_runs.reshape(
                                   -1, 2).tolist()])
        assert np.array_equal(np.sort(rows), np.arange(lm.n_owned))
        assert 0 < len(p.outer_runs) and 0 < len(p.inner_runs)
        coeffs = (rng.standard_normal(lm.n_cells) + 8.0, -rng.uniform(0.5, 1, lm.n_internal),
                  -rng.uniform(0.5, 1, lm.n_internal))
        out = {}
        for ex in (_Blocking(lm, x), _LateGhosts(lm, x)):
            A = DistMatrix(p, ex)
            A.fill(*coeffs)
            xl = np.full(lm.n_cells, np.nan)
            xl[:lm.n_owned] = x[lm.global_cells[:lm.n_owned]]
            y, res = np.zeros(lm.n_owned), np.zeros(lm.n_owned)
            A.matvec(xl, y)
            A.residual(xl, b[lm.global_cells], res)
            out[ex.overlaps] = (y, res)
        assert np.array_equal(out[True][0], out[False][0])
        assert np.array_equal(out[True][1], out[False][1])
        assert not np.isnan(out[True][0]).any()


SIM_CHECK = """
import sys
import numpy as np
from mpi4py import MPI
from types import SimpleNamespace
from haloflow.parallel import halo
lm = SimpleNamespace(n_owned=10, neighbours=np.array([0, 0]), send_ptr=np.array([0, 3, 5]),
                     send_cells=np.array([7, 1, 3, 2, 9]), recv_ptr=np.array([0, 3, 5]))
for staging in ("device", "device-aware"):
    for name in halo.STRATEGIES:
        ex = halo.make(name, lm, MPI.COMM_SELF, staging=staging, backend="cuda")
        assert "simulator" in ex.space.name, ex.space.name
        for m in (1, 3):
            want = [np.sin(np.arange(15.0) * (j + 1)) for j in range(m)]
            for w in want:
                w[10:] = w[[7, 1, 3, 2, 9]]
            fields = [ex.space.asarray(np.where(np.arange(15) < 10, w, np.nan)) for w in want]
            c0 = ex.stats.copies
            (ex.exchange if m == 1 else lambda f: ex.finish(ex.start(f)))(fields)
            got = [ex.space.to_numpy(f) for f in fields]
            assert all(np.array_equal(g, w) for g, w in zip(got, want)), (staging, name, m)
            print(staging, name, m, ex.stats.copies - c0)
        ex.close()
"""


def test_cuda_backend_in_the_simulator():
    """The cuda backend's pack/unpack kernels (numba's CUDA simulator, in a process of its
    own: the simulator is chosen when numba loads) fill every ghost, for every strategy;
    copies per exchange as with the emulated device, none device-aware."""
    import os
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", SIM_CHECK], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"})
    assert res.returncode == 0, res.stderr
    n = 2
    for line in res.stdout.splitlines():
        staging, name, m, copies = line.split()
        m = int(m)
        want = 0 if staging == "device-aware" else {"perfield": 2 * m,
                                                    "packed": 2 * m * n}.get(name, 2)
        assert int(copies) == want, line
    assert len(res.stdout.splitlines()) == 2 * 5 * 2


def test_cuda_backend_without_a_gpu_says_why():
    from numba import cuda

    from haloflow import backends

    if cuda.is_available():
        pytest.skip("a CUDA device (or the simulator) is present")
    with pytest.raises(backends.BackendUnavailable, match="backend cuda: no CUDA GPU"):
        backends.make("cuda")
    with pytest.raises(ValueError, match="expected one of cpu, cuda"):
        backends.make("tpu")
