"""Decomposition and LocalMesh: ownership, ghosts, send/receive lists, geometry, faces.

Everything runs in one process: every rank's LocalMesh is built with ``build_local`` and the
ranks are checked against each other and against the global mesh.
"""

from functools import cache

import numpy as np
import pytest

from haloflow.mesh.blocks import box
from haloflow.mesh.core import compute_geometry
from haloflow.parallel.decompose import METHODS, decompose
from haloflow.parallel.local import build_local

MESHES = {
    "2d": lambda: box((9, 7, 1), (1.8, 1.0, 0.1), grading=(2.0, 0.5, 1.0)),
    "3d": lambda: box((5, 4, 3), (1.0, 0.8, 0.6), origin=(0.5, -1.0, 2.0)),
}
NPARTS = (1, 2, 3, 4, 5)


@cache
def _mesh(name):
    m = MESHES[name]()
    m.geom()
    return m


@cache
def _case(name, method, nparts):
    m = _mesh(name)
    parts = decompose(m, nparts, method)
    return m, parts, [build_local(m, parts, r) for r in range(nparts)]


@pytest.fixture(params=[(m, meth, n) for m in MESHES for meth in METHODS for n in NPARTS],
                ids=lambda p: f"{p[0]}-{p[1]}-{p[2]}")
def case(request):
    return _case(*request.param)


def _ghost_slice(lm, q):
    """Global ids of the ghosts that rank ``q`` owns, as stored on ``lm``."""
    k = int(np.searchsorted(lm.neighbours, q))
    assert lm.neighbours[k] == q
    return lm.global_cells[lm.n_owned + lm.recv_ptr[k]:lm.n_owned + lm.recv_ptr[k + 1]]


def _send_list(lm, r):
    """Global ids that ``lm``'s rank sends to rank ``r``."""
    k = int(np.searchsorted(lm.neighbours, r))
    assert lm.neighbours[k] == r
    return lm.global_cells[lm.send_cells[lm.send_ptr[k]:lm.send_ptr[k + 1]]]


def test_parts_are_valid(case):
    """decompose returns one rank in 0..nparts-1 per cell and every rank gets cells."""
    m, parts, locs = case
    assert parts.shape == (m.n_cells,)
    assert parts.min() == 0 and parts.max() == len(locs) - 1
    assert np.all(np.bincount(parts, minlength=len(locs)) > 0)


def test_every_cell_owned_once(case):
    """Owned cells over all ranks are a permutation of all cells, ascending on each rank."""
    m, parts, locs = case
    owned = np.concatenate([lm.global_cells[:lm.n_owned] for lm in locs])
    np.testing.assert_array_equal(np.sort(owned), np.arange(m.n_cells))
    for r, lm in enumerate(locs):
        assert lm.rank == r
        assert lm.n_owned > 0
        assert lm.n_cells_global == m.n_cells
        assert len(lm.global_cells) == lm.n_cells == lm.n_owned + lm.n_ghost
        mine = lm.global_cells[:lm.n_owned]
        assert np.all(np.diff(mine) > 0)
        assert np.all(parts[mine] == r)


def test_ghosts_are_off_rank_face_neighbours(case):
    """Ghosts are exactly the off-rank cells sharing a face, grouped by rank, then ascending."""
    m, parts, locs = case
    own, nbr = m.owner[:m.n_internal], m.neighbour
    for r, lm in enumerate(locs):
        a = nbr[(parts[own] == r) & (parts[nbr] != r)]
        b = own[(parts[nbr] == r) & (parts[own] != r)]
        expected = np.unique(np.concatenate([a, b]))
        ghosts = lm.global_cells[lm.n_owned:]
        np.testing.assert_array_equal(np.sort(ghosts), expected)
        assert len(np.unique(ghosts)) == len(ghosts)
        gr = parts[ghosts]
        np.testing.assert_array_equal(lm.neighbours, np.unique(gr))
        assert lm.recv_ptr[0] == 0 and lm.recv_ptr[-1] == lm.n_ghost
        assert len(lm.recv_ptr) == len(lm.neighbours) + 1
        for k, q in enumerate(lm.neighbours):
            sl = ghosts[lm.recv_ptr[k]:lm.recv_ptr[k + 1]]
            assert len(sl) > 0
            assert np.all(parts[sl] == q)
            assert np.all(np.diff(sl) > 0)


def test_send_lists_match_ghost_slices(case):
    """Rank q's send list towards r equals r's ghost slice from q: same global ids, same order."""
    m, parts, locs = case
    for r, lm in enumerate(locs):
        assert len(lm.send_ptr) == len(lm.neighbours) + 1
        assert lm.send_ptr[0] == 0 and lm.send_ptr[-1] == len(lm.send_cells)
        assert np.all((lm.send_cells >= 0) & (lm.send_cells < lm.n_owned))
        for q in lm.neighbours:
            other = locs[int(q)]
            assert r in other.neighbours  # the pattern is symmetric
            np.testing.assert_array_equal(_send_list(other, r), _ghost_slice(lm, int(q)))
            np.testing.assert_array_equal(_send_list(lm, int(q)), _ghost_slice(other, r))


def test_local_geometry_is_global_geometry(case):
    """Local cell/face geometry and face nodes are the global ones at the same ids, bit for bit."""
    m, parts, locs = case
    g = m.geom()
    for lm in locs:
        lg, gc, gf = lm.geometry, lm.global_cells, lm.global_faces
        np.testing.assert_array_equal(lg.cell_centres, g.cell_centres[gc])
        np.testing.assert_array_equal(lg.cell_volumes, g.cell_volumes[gc])
        np.testing.assert_array_equal(lg.face_centres, g.face_centres[gf])
        np.testing.assert_array_equal(lg.face_areas, g.face_areas[gf])
        for f_loc, f_glob in enumerate(gf):
            loc = lm.points[lm.face_nodes[lm.face_ptr[f_loc]:lm.face_ptr[f_loc + 1]]]
            glob = m.points[m.face_nodes[m.face_ptr[f_glob]:m.face_ptr[f_glob + 1]]]
            np.testing.assert_array_equal(loc, glob)


def test_local_geometry_recomputed_from_local_points(case):
    """Geometry recomputed from the local points/faces alone agrees with the global one."""
    m, parts, locs = case
    for lm in locs:
        g = compute_geometry(lm.points, lm.face_ptr, lm.face_nodes, lm.owner, lm.neighbour,
                             lm.n_cells)
        np.testing.assert_array_equal(g.face_areas, lm.geometry.face_areas)
        np.testing.assert_array_equal(g.face_centres, lm.geometry.face_centres)
        n = lm.n_owned  # ghosts lack most of their faces locally
        np.testing.assert_allclose(g.cell_volumes[:n], lm.geometry.cell_volumes[:n], rtol=1e-13)
        np.testing.assert_allclose(g.cell_centres[:n], lm.geometry.cell_centres[:n],
                                   rtol=0, atol=1e-13)


def test_internal_faces_on_both_ranks_same_orientation(case):
    """Each global internal face is on the ranks of both its cells, oriented by global ids."""
    m, parts, locs = case
    ni = m.n_internal
    seen = np.zeros(ni, dtype=np.int64)
    for r, lm in enumerate(locs):
        gf = lm.global_faces[:lm.n_internal]
        assert np.all(gf < ni)
        assert len(np.unique(gf)) == len(gf)
        np.testing.assert_array_equal(lm.global_cells[lm.owner[:lm.n_internal]], m.owner[gf])
        np.testing.assert_array_equal(lm.global_cells[lm.neighbour], m.neighbour[gf])
        on_rank = (parts[m.owner[:ni]] == r) | (parts[m.neighbour] == r)
        np.testing.assert_array_equal(np.sort(gf), np.flatnonzero(on_rank))
        seen[gf] += 1
    cut = parts[m.owner[:ni]] != parts[m.neighbour]
    np.testing.assert_array_equal(seen, np.where(cut, 2, 1))


def test_boundary_faces_appear_once(case):
    """Each global boundary face is on exactly one rank, its owner's, in the same patch."""
    m, parts, locs = case
    seen = np.zeros(m.n_faces, dtype=np.int64)
    for r, lm in enumerate(locs):
        assert [p.name for p in lm.patches] == [p.name for p in m.patches]
        start = lm.n_internal
        for lp, gp in zip(lm.patches, m.patches, strict=True):
            assert lp.start == start and lp.kind == gp.kind
            start += lp.size
            gf = lm.global_faces[lp.start:lp.start + lp.size]
            assert np.all((gf >= gp.start) & (gf < gp.start + gp.size))
            assert np.all(parts[m.owner[gf]] == r)
            np.testing.assert_array_equal(lm.global_cells[lm.owner[lp.start:lp.start + lp.size]],
                                          m.owner[gf])
            seen[gf] += 1
        assert start == lm.n_faces
    np.testing.assert_array_equal(seen[m.n_internal:], 1)


def test_interior_faces_touch_only_owned_cells(case):
    """Faces [:n_interior] join two owned cells, [n_interior:n_internal] one owned and one ghost."""
    m, parts, locs = case
    for lm in locs:
        n, ni, nin = lm.n_owned, lm.n_internal, lm.n_interior
        own, nbr = lm.owner[:ni], lm.neighbour
        assert np.all((own[:nin] < n) & (nbr[:nin] < n))
        owned_side = (own[nin:] < n).astype(int) + (nbr[nin:] < n).astype(int)
        assert np.all(owned_side == 1)
        assert np.all(lm.owner[ni:] < n)  # boundary faces belong to owned cells
        # each ghost touches at least one interface face
        touched = np.zeros(lm.n_cells, dtype=bool)
        touched[own[nin:]] = True
        touched[nbr[nin:]] = True
        assert np.all(touched[n:])


def test_single_part_is_the_whole_mesh():
    """With one part the LocalMesh is the global mesh: same ids, faces, no ghosts, no neighbours."""
    m = _mesh("3d")
    lm = build_local(m, np.zeros(m.n_cells, dtype=np.int64), 0)
    assert lm.n_owned == m.n_cells and lm.n_ghost == 0
    np.testing.assert_array_equal(lm.global_cells, np.arange(m.n_cells))
    np.testing.assert_array_equal(lm.global_faces, np.arange(m.n_faces))
    np.testing.assert_array_equal(lm.owner, m.owner)
    np.testing.assert_array_equal(lm.neighbour, m.neighbour)
    assert len(lm.neighbours) == 0 and len(lm.send_cells) == 0
    np.testing.assert_array_equal(lm.send_ptr, [0])
    np.testing.assert_array_equal(lm.recv_ptr, [0])


@pytest.mark.parametrize("mesh_name", sorted(MESHES))
@pytest.mark.parametrize("nparts", NPARTS[1:])
def test_simulated_exchange(mesh_name, nparts):
    """Copying send lists into ghost slices by hand fills every ghost with its owner's value."""
    m, parts, locs = _case(mesh_name, "metis", nparts)

    def f(gid):
        return 3.0 * gid + np.sin(gid)

    fields = []
    for lm in locs:
        x = np.full(lm.n_cells, np.nan)
        x[:lm.n_owned] = f(lm.global_cells[:lm.n_owned])
        fields.append(x)
    for r, lm in enumerate(locs):
        for k, q in enumerate(lm.neighbours):
            other = locs[int(q)]
            kk = int(np.searchsorted(other.neighbours, r))
            sent = fields[int(q)][other.send_cells[other.send_ptr[kk]:other.send_ptr[kk + 1]]]
            fields[r][lm.n_owned + lm.recv_ptr[k]:lm.n_owned + lm.recv_ptr[k + 1]] = sent
    for lm, x in zip(locs, fields, strict=True):
        np.testing.assert_array_equal(x, f(lm.global_cells))


@pytest.mark.parametrize("method", ["rcb", "simple", "metis", "grid"])
@pytest.mark.parametrize("nparts", [2, 3, 4, 5])
def test_weights_balance_parts(method, nparts):
    """Non-uniform weights: every part's weight sum is within 10% of the mean (``grid`` cuts
    between planes: on a mesh whose planes are thin against the parts)."""
    m = box((96, 80, 1) if method == "grid" else (24, 20, 1))
    rng = np.random.default_rng(nparts)
    c = m.geom().cell_centres
    heavy = c[:, 0] > 0.5  # the right half ~4x heavier
    if method == "grid":  # which may cut across x: the heavy part a corner, no cut evens it
        heavy &= c[:, 1] > 0.5
    w = 1.0 + 4.0 * heavy + rng.uniform(0.0, 1.0, m.n_cells)
    parts = decompose(m, nparts, method, weights=w)
    sums = np.bincount(parts, weights=w, minlength=nparts)
    assert np.all(np.abs(sums / sums.mean() - 1.0) < 0.10), sums / sums.mean()
    # and the weights mattered: cell counts are far from equal
    counts = np.bincount(parts, minlength=nparts)
    assert counts.max() / counts.min() > 1.5


def test_decompose_rejects_bad_arguments():
    """Bad nparts or method names raise ValueError."""
    m = box((3, 2, 1))
    for bad in (0, 7):
        with pytest.raises(ValueError):
            decompose(m, bad, "rcb")
    with pytest.raises(ValueError):
        decompose(m, 2, "scotch")


@pytest.mark.parametrize("method", ["rcb", "rcb-planes", "metis", "simple", "grid"])
def test_heavy_cell_leaves_no_rank_empty(method):
    """Even with one dominant weight every rank must get at least one cell."""
    m = box((10, 1, 1))
    w = np.ones(m.n_cells)
    w[0] = 100.0
    parts = decompose(m, 4, method, weights=w)
    assert np.all(np.bincount(parts, minlength=4) > 0)


@pytest.mark.parametrize("mesh_name", sorted(MESHES))
def test_whole_mesh_shortcut_is_the_general_cut(mesh_name, monkeypatch):
    """One rank's LocalMesh shares the global arrays instead of cutting copies; every array
    must equal what the general cut makes, in value and index type (32-bit)."""
    from haloflow.parallel import local

    m = _mesh(mesh_name)
    parts = np.zeros(m.n_cells, dtype=np.int64)
    fast = build_local(m, parts, 0)
    monkeypatch.setattr(local, "_plain", lambda mesh: False)
    cut = build_local(m, parts, 0)
    assert fast.points is m.points  # shared, not copied
    for name in ("global_cells", "points", "face_ptr", "face_nodes", "owner", "neighbour",
                 "global_faces", "neighbours", "send_ptr", "send_cells", "recv_ptr"):
        a, b = getattr(fast, name), getattr(cut, name)
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)
    for name in ("face_centres", "face_areas", "cell_centres", "cell_volumes"):
        np.testing.assert_array_equal(getattr(fast.geometry, name), getattr(cut.geometry, name))
    assert [vars(p) for p in fast.patches] == [vars(p) for p in cut.patches]
    assert fast.owner.dtype == np.int32 and fast.face_nodes.dtype == np.int32


def test_release_topology_keeps_what_the_solver_reads():
    m = _mesh("3d")
    lm = build_local(m, np.zeros(m.n_cells, dtype=np.int64), 0)
    lm.release_topology()
    assert lm.points is None and lm.face_nodes is None and lm.face_ptr is None
    assert lm.owner is not None and lm.geometry.face_areas is not None
    assert lm.n_faces == m.n_faces and lm.n_internal == m.n_internal


def test_kernel_loading_is_timed_apart_from_the_set_up():
    """The set-up prices the first migration by its own seconds less those numba spent
    loading kernels (a migration finds them loaded): what a fresh kernel's compilation
    took is counted, and nothing outside the context."""
    from time import perf_counter

    import numba as nb

    from haloflow.run.setup import KernelLoading

    with KernelLoading() as loading:
        assert loading.seconds == 0.0
        t0 = perf_counter()

        @nb.njit
        def fresh(x):
            return x - 1.0

        assert fresh(2.0) == 1.0
        took = perf_counter() - t0
    assert 0.0 < loading.seconds <= took
    assert fresh(3.0) == 2.0
    before = loading.seconds

    @nb.njit
    def other(x):
        return x + 1.0

    assert other(1.0) == 2.0 and loading.seconds == before


def test_rcb_planes_cuts_a_block_into_boxes():
    """11³ into 8: an exact split cuts through planes (11 is odd) and the sub-domains cut
    them at different places, so some part touches more than the 3 neighbours of a corner
    of 2 x 2 x 2 boxes; ``rcb-planes`` cuts between planes only: every part a box of whole
    planes with 3 neighbours, each at most a plane larger per cut (6 x 6 x 6 cells)."""
    from haloflow.mesh.core import cell_adjacency
    from haloflow.parallel.topology import part_graph

    m = box((11, 11, 11))
    xadj, adj = cell_adjacency(m)
    c = m.geom().cell_centres
    ijk = np.floor(c * 11).astype(np.int64)  # the cell's plane in each direction
    most = {}
    for method in ("rcb", "rcb-planes"):
        parts = decompose(m, 8, method)
        most[method] = int((part_graph(xadj, adj, parts, 8) > 0).sum(axis=1).max())
        counts = np.bincount(parts, minlength=8)
        if method == "rcb":
            assert counts.max() - counts.min() <= 1
            continue
        assert counts.max() <= 6 * 6 * 6
        for p in range(8):
            span = np.ptp(ijk[parts == p], axis=0) + 1
            assert counts[p] == np.prod(span), (p, span)  # a whole box
    assert most["rcb-planes"] == 3 < most["rcb"], most


def test_grid_cuts_a_block_into_aligned_boxes():
    """23³ into 48: ``rcb-planes`` keeps whole planes, but sibling sub-domains cut them at
    different places, so a part can touch more than 6 others; ``grid`` makes the same cuts
    across the block: every part a box, the parts' corners on one a x b x c grid, at most 6
    neighbours, each part at most a plane larger per axis than an equal share."""
    from haloflow.mesh.core import cell_adjacency
    from haloflow.parallel.topology import part_graph

    n, P = 23, 48
    m = box((n, n, n))
    xadj, adj = cell_adjacency(m)
    ijk = np.floor(m.geom().cell_centres * n).astype(np.int64)
    most = {}
    for method in ("rcb-planes", "grid"):
        parts = decompose(m, P, method)
        most[method] = int((part_graph(xadj, adj, parts, P) > 0).sum(axis=1).max())
    counts = np.bincount(parts, minlength=P)
    lows = np.array([ijk[parts == p].min(axis=0) for p in range(P)])
    for p in range(P):
        span = np.ptp(ijk[parts == p], axis=0) + 1
        assert counts[p] == np.prod(span), (p, span)  # a whole box
    shape = [len(np.unique(lows[:, d])) for d in range(3)]
    assert np.prod(shape) == P, shape  # one set of cuts per axis
    assert counts.max() <= np.prod([-(-n // k) for k in shape])
    assert most["grid"] <= 6 < most["rcb-planes"], most


def test_grid_on_a_mesh_that_is_not_a_box():
    """The backward step (an L of blocks): a grid part may fall outside the domain; the
    grids that leave none empty are the candidates, and every rank gets cells."""
    from haloflow.case import load_case
    from haloflow.mesh import from_case

    m = from_case(load_case("backward_step").mesh)
    for P in (3, 4, 7, 16):
        counts = np.bincount(decompose(m, P, "grid"), minlength=P)
        assert counts.min() > 0 and counts.max() / counts.mean() < 1.2, (P, counts)


def test_rcb_planes_is_rcb_where_no_centres_share_a_plane():
    """Scattered centres (no two share a coordinate): every index is a plane boundary, so
    the cuts are the exact split's, to a cell."""
    from haloflow.parallel.decompose import rcb

    rng = np.random.default_rng(5)
    c = rng.uniform(0.0, 1.0, (4000, 3))
    w = np.ones(len(c))
    for k in (2, 5, 8):
        a, b = rcb(c, w, k), rcb(c, w, k, planes=True)
        assert np.count_nonzero(a != b) <= 2 * k
        counts = np.bincount(b, minlength=k)
        assert counts.max() - counts.min() <= 2 * k


def test_metis_keeps_the_busiest_parts_neighbours_down():
    """METIS with MINCONN: a 24³ cube into 48 parts gives its busiest part fewer
    neighbours than plain k-way METIS (13 against 18 with pymetis 2025.2), for the same cut
    within 3 %; the parts stay balanced."""
    import pymetis

    from haloflow.mesh.core import cell_adjacency
    from haloflow.parallel.topology import part_graph

    m = box((24, 24, 24))
    xadj, adj = cell_adjacency(m)
    _, plain = pymetis.part_graph(48, adjacency=pymetis.CSRAdjacency(xadj, adj),
                                  options=pymetis.Options(seed=1))
    ours = decompose(m, 48, "metis")
    w = {k: part_graph(xadj, adj, np.asarray(p, dtype=np.int64), 48)
         for k, p in (("plain", plain), ("ours", ours))}
    most = {k: int((g > 0).sum(axis=1).max()) for k, g in w.items()}
    cut = {k: g.sum() / 2 for k, g in w.items()}
    assert most["ours"] <= most["plain"] - 3, most
    assert abs(cut["ours"] / cut["plain"] - 1) < 0.03, cut
    assert np.bincount(ours, minlength=48).max() <= 1.05 * m.n_cells / 48
