"""Real ``mpiexec`` jobs (bodies run on the ranks): ghosts equal owners' values, exact
counters, parallel == serial solves.

For each decomposition method and mesh, rank 0 builds and decomposes the global box and
distributes it; every rank then checks that exchanged ghosts equal their owners' values
(``exchange`` and ``start``/``finish``, several field counts) with the halo strategy under
test, that the exchange counters are exact, and that distributed pcg/bicgstab solutions,
gathered by global id, equal the serial solution computed on rank 0 from a one-part
LocalMesh with COMM_SELF.  A failing rank reports and the job aborts at once.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.linalg.bicgstab import bicgstab
from haloflow.linalg.krylov import Workspace, pcg
from haloflow.linalg.matrix import DistMatrix, Pattern
from haloflow.mesh.blocks import box
from haloflow.parallel.decompose import decompose
from haloflow.parallel.halo import make as make_exchanger
from haloflow.parallel.local import build_local, distribute
from haloflow.parallel.reduce import Reducer

MESHES = {
    "2d": lambda: box((12, 9, 1), (1.2, 1.0, 0.1), grading=(2.0, 0.5, 1.0)),
    "3d": lambda: box((6, 5, 4), (1.0, 0.9, 0.7), origin=(0.3, -0.2, 1.0)),
}
METHODS = ("metis", "rcb")
TOL = 1e-12
AGREE = 1e-8


def field_values(gids: np.ndarray, m: int, salt: int = 0) -> list[np.ndarray]:
    """Field j: gid * m + j (+ salt), and a random value seeded by (gid, j, salt)."""
    out = []
    for j in range(m):
        out.append(gids * float(m) + j + salt)
        out.append(np.array([np.random.default_rng([int(g), j, salt]).standard_normal()
                             for g in gids]))
    return out


def check_exchange(lm, comm, strategy: str, tag: str) -> None:
    ex = make_exchanger(strategy, lm, comm)
    n, gids = lm.n_owned, lm.global_cells
    nnb = len(lm.neighbours)
    assert nnb > 0, f"{tag}: rank has no neighbours"
    send_total = int(lm.send_ptr[-1])
    salt = 0
    t_loop = time.perf_counter()
    for n_pairs, overlapped in ((1, False), (2, True), (3, False), (1, True), (2, False)):
        salt += 1
        expected = field_values(gids, n_pairs, salt)
        fields = [e.copy() for e in expected]
        for f in fields:
            f[n:] = np.nan
        before = ex.stats.as_dict()
        if overlapped:
            h = ex.start(fields)
            for f in fields:  # "interior work" on owned values must not disturb the exchange
                f[:n] *= 1.0
            ex.finish(h)
        else:
            ex.exchange(fields)
        after = ex.stats.as_dict()
        what = f"{tag} fields={len(fields)} overlapped={overlapped}"
        for j, (f, e) in enumerate(zip(fields, expected, strict=True)):
            bad = np.flatnonzero(f != e)
            if len(bad):
                i = bad[0]
                raise AssertionError(f"{what}: field {j} local cell {i} (global {gids[i]}, "
                     f"{'ghost' if i >= n else 'owned'}) = {f[i]!r}, expected {e[i]!r}; "
                     f"{len(bad)} wrong")
        assert after["calls"] - before["calls"] == 1, f"{what}: calls {before} -> {after}"
        grew = after["messages"] - before["messages"]
        assert grew == nnb, f"{what}: messages grew by {grew}, expected {nnb}"
        nbytes = 8 * len(fields) * send_total
        grew = after["bytes"] - before["bytes"]
        assert grew == nbytes, f"{what}: bytes grew by {grew}, expected {nbytes}"
    t_loop = time.perf_counter() - t_loop
    # the exchanger's timers measure parts of the exchanges made in this loop
    st = ex.stats
    timed = st.pack_s + st.wait_s + st.unpack_s
    assert min(st.pack_s, st.wait_s, st.unpack_s) >= 0 and 0 < timed <= t_loop, \
        f"{tag}: pack {st.pack_s} + wait {st.wait_s} + unpack {st.unpack_s} s, loop {t_loop} s"


def assemble(lm, convect: bool):
    """Face coefficients from geometry (decomposition independent) on a LocalMesh."""
    g = lm.geometry
    ni = lm.n_internal
    own, nbr = lm.owner[:ni], lm.neighbour
    s = g.face_areas[:ni]
    d = g.cell_centres[nbr] - g.cell_centres[own]
    a = np.einsum("ij,ij->i", s, s) / np.einsum("ij,ij->i", s, d)
    if convect:
        flux = s @ np.array([3.0, -2.0, 1.0])  # upwind convection by a uniform velocity
        upper = -a + np.minimum(flux, 0.0)
        lower = -a - np.maximum(flux, 0.0)
    else:
        upper = lower = -a
    diag = 0.5 * g.cell_volumes.copy()  # the shift
    np.add.at(diag, own, -upper)
    np.add.at(diag, nbr, -lower)
    for p in lm.patches:  # Dirichlet walls on left and bottom
        if p.name in ("left", "bottom"):
            f = slice(p.start, p.start + p.size)
            sb = g.face_areas[f]
            db = g.face_centres[f] - g.cell_centres[lm.owner[f]]
            np.add.at(diag, lm.owner[f], np.einsum("ij,ij->i", sb, sb)
                      / np.einsum("ij,ij->i", sb, db))
    c = g.cell_centres
    b = g.cell_volumes * (np.sin(3.0 * c[:, 0]) * np.cos(2.0 * c[:, 1]) + c[:, 2] + 0.1)
    return diag, lower, upper, b


def solve(lm, c, strategy: str, convect: bool):
    A = DistMatrix(Pattern(lm), make_exchanger(strategy, lm, c))
    diag, lower, upper, b = assemble(lm, convect)
    A.fill(diag, lower, upper)
    solver = bicgstab if convect else pcg
    x = np.zeros(lm.n_cells)
    ws = Workspace(lm.n_cells, lm.n_owned, 8)
    info = solver(A, b, x, TOL, 1000, Reducer(c), ws)
    # a matvec of a known vector, for a solver-independent comparison
    xv = np.cos(lm.global_cells * 0.37)
    y = np.zeros(lm.n_cells)
    A.matvec(xv, y)
    return x, y, info


def gather_global(lm, comm, v, n_global):
    parts = comm.gather((lm.global_cells[:lm.n_owned], v[:lm.n_owned].copy()), root=0)
    if comm.rank != 0:
        return None
    out = np.full(n_global, np.nan)
    for gid, val in parts:
        assert np.all(np.isnan(out[gid])), "a cell was gathered twice"
        out[gid] = val
    assert not np.any(np.isnan(out)), "a cell was never gathered"
    return out


def check_solves(mesh, lm, comm, strategy: str, tag: str) -> None:
    n_global = lm.n_cells_global
    for convect in (False, True):
        what = f"{tag} {'bicgstab' if convect else 'pcg'}"
        x, y, info = solve(lm, comm, strategy, convect)
        assert info.converged, f"{what}: parallel solve did not converge: {info}"
        xg, yg = gather_global(lm, comm, x, n_global), gather_global(lm, comm, y, n_global)
        if comm.rank == 0:
            l0 = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
            xs, ys, info_s = solve(l0, MPI.COMM_SELF, strategy, convect)
            assert info_s.converged, f"{what}: serial solve did not converge: {info_s}"
            err = np.linalg.norm(xg - xs) / np.linalg.norm(xs)
            assert err <= AGREE, (f"{what}: parallel vs serial solution differ by {err:.3e} "
                  f"(iters {info.iters} vs {info_s.iters})")
            errm = np.linalg.norm(yg - ys) / np.linalg.norm(ys)
            assert errm <= 1e-13, f"{what}: parallel vs serial matvec differ by {errm:.3e}"
            assert abs(info.iters - info_s.iters) <= 1, (info.iters, info_s.iters, what)
            print(f"{what}: iters {info.iters}/{info_s.iters} err {err:.1e}", flush=True)


@pytest.mark.parallel(ranks=[2, 3, 4], halo=["packed", "aggregated"], timeout=120)
def test_halo_exchange_and_solvers(nranks, halo):
    """metis and rcb, 2D and 3D boxes: exact ghosts and counters, solves equal serial."""
    comm = MPI.COMM_WORLD
    assert comm.size == nranks
    for name, make_mesh in MESHES.items():
        for method in METHODS:
            tag = f"n={comm.size} {halo} {name} {method}"
            mesh = parts = None
            if comm.rank == 0:
                mesh = make_mesh()
                parts = decompose(mesh, comm.size, method)
            lm = distribute(mesh, parts, comm)
            assert lm.rank == comm.rank, f"{tag}: got rank {lm.rank}'s LocalMesh"
            counts = comm.allgather(lm.n_owned)
            assert sum(counts) == lm.n_cells_global and min(counts) > 0, (tag, counts)
            check_exchange(lm, comm, halo, tag)
            check_solves(mesh, lm, comm, halo, tag)
