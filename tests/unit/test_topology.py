"""Node-aware placement: the two-level split cuts the faces between nodes, a permutation
never adds any, and every rank keeps its share of cells."""

from __future__ import annotations

import numpy as np
import pytest

from haloflow.case import load_case
from haloflow.mesh import from_case
from haloflow.mesh.core import cell_adjacency
from haloflow.parallel import topology as topo


@pytest.fixture(scope="module")
def cube():
    case = load_case("cavity", ["mesh.cells=[24,24,24]", "boundary.front.type=wall",
                                "boundary.back.type=wall"])
    mesh = from_case(case.mesh)
    return mesh, *cell_adjacency(mesh)


@pytest.mark.parametrize("n_nodes, per_node", [(2, 8), (4, 4)])
def test_two_level_cuts_the_faces_between_nodes(cube, n_nodes, per_node):
    mesh, xadj, adj = cube
    nodes = np.arange(n_nodes * per_node) // per_node
    block = topo.place(mesh, len(nodes), "metis", "block", nodes)
    two = topo.place(mesh, len(nodes), "metis", "nodes", nodes)
    counts = np.bincount(two, minlength=len(nodes))
    assert counts.min() > 0.95 * mesh.n_cells / len(nodes)
    cut_block = topo.cross_node_faces(xadj, adj, block, nodes)
    cut_two = topo.cross_node_faces(xadj, adj, two, nodes)
    # a box split into n_nodes node pieces: at most the planes between them, and far fewer
    # than a node-blind numbering of the parts
    assert cut_two <= (n_nodes - 1) * 24 * 24 * 1.15
    assert cut_two <= 0.85 * cut_block, (cut_two, cut_block)


def test_permutation_keeps_parts_whole_and_never_adds_cross_node_faces(cube):
    mesh, xadj, adj = cube
    nodes = np.arange(8) // 4
    rng = np.random.default_rng(3)
    parts = topo.place(mesh, 8, "rcb", "block", nodes)
    shuffled = rng.permutation(8)[parts]  # parts scattered over the nodes
    perm = topo.permute(xadj, adj, shuffled, nodes)
    # a relabelling: the same cells together
    pairs = set(zip(shuffled.tolist(), perm.tolist(), strict=True))
    assert len(pairs) == 8
    assert topo.cross_node_faces(xadj, adj, perm, nodes) <= topo.cross_node_faces(
        xadj, adj, shuffled, nodes)
    # rcb of a cube into 8 octants: the best grouping is two half-boxes (one plane of 24^2)
    assert topo.cross_node_faces(xadj, adj, perm, nodes) == 24 * 24


def test_part_graph_and_halo_split():
    xadj = np.array([0, 1, 3, 5, 6])
    adj = np.array([1, 0, 2, 1, 3, 2])  # a chain 0-1-2-3
    parts = np.array([0, 0, 1, 2])
    w = topo.part_graph(xadj, adj, parts, 3)
    assert w.tolist() == [[0, 1, 0], [1, 0, 1], [0, 1, 0]]
    assert topo.cross_node_faces(xadj, adj, parts, [0, 0, 1]) == 1
    # cell 1 goes to rank 1 and cell 2 comes to rank 0 (same node); cell 3 to rank 1
    assert topo.cross_node_halo_cells(xadj, adj, parts, [0, 0, 1]) == 2
    assert topo.cross_node_halo_cells(xadj, adj, parts, [0, 1, 1]) == 2

    class L:  # a rank with two neighbours, one on another node
        rank, neighbours, send_ptr = 0, np.array([1, 2]), np.array([0, 3, 8])

    assert topo.halo_split(L, [0, 0, 1]) == {"node": 0, "halo_cells_same_node": 3,
                                             "halo_cells_other_nodes": 5,
                                             "neighbours_other_nodes": 1}


def test_rebalanced_parts_follow_the_speeds_and_keep_cells_in_place():
    from types import SimpleNamespace

    from haloflow.run.balance import new_parts

    case = load_case("cavity", ["mesh.cells=[40,40,1]"])
    comm = SimpleNamespace(size=4)
    n = 1600
    old = np.arange(n) % 4  # a scattered old partition: ranks 2 and 3 equally fast
    ids = [np.flatnonzero(old == r) for r in range(4)]
    fr = np.array([0.4, 0.2, 0.2, 0.2])
    _, parts, moved = new_parts(case, comm, fr, ids)
    counts = np.bincount(parts, minlength=4) / n
    assert np.allclose(counts, fr, atol=0.03)
    # slabs as the old partition, equal speeds: the parts go to the ranks so that as many
    # cells as any labelling could keep stay where they are
    from itertools import permutations

    old = np.minimum(np.arange(n) // 400, 3)
    ids = [np.flatnonzero(old == r) for r in range(4)]
    _, parts, moved = new_parts(case, comm, np.full(4, 0.25), ids)
    kept = np.count_nonzero(parts == old)
    best = max(np.count_nonzero(np.array(p)[parts] == old) for p in permutations(range(4)))
    assert kept == best and kept > n / 4 and moved == n - kept
    # two halves, then 2:1 weights: the larger part grows from the faster rank's half, so
    # about a sixth of the cells move (a part of the wrong weight there would move half)
    comm = SimpleNamespace(size=2)
    old = (np.arange(n) >= n // 2).astype(np.int64)
    ids = [np.flatnonzero(old == r) for r in range(2)]
    for fr in ([2 / 3, 1 / 3], [1 / 3, 2 / 3]):
        _, parts, moved = new_parts(case, comm, np.array(fr), ids)
        assert np.allclose(np.bincount(parts, minlength=2) / n, fr, atol=0.03)
        assert moved == np.count_nonzero(parts != old) and moved < 0.25 * n, moved


def test_halo_cells_crossing_nodes_are_what_the_ranks_send():
    """The count from the partition equals the ghosts the LocalMeshes' send lists put on
    other nodes (``halo_split``), on a slanted cut where cells have several cut faces."""
    from haloflow.mesh.blocks import box
    from haloflow.parallel.local import build_local

    mesh = box((6, 5, 4))
    xadj, adj = cell_adjacency(mesh)
    c = mesh.geom().cell_centres if callable(getattr(mesh, "geom", None)) else \
        mesh.geometry.cell_centres
    slant = c.sum(axis=1)
    parts = np.where(slant < np.median(slant), 0, 1) * 2 + (c[:, 0] > 0.5)
    nodes = [0, 0, 1, 1]
    sent = sum(topo.halo_split(build_local(mesh, parts, r), nodes)["halo_cells_other_nodes"]
               for r in range(4))
    got = topo.cross_node_halo_cells(xadj, adj, parts, nodes)
    assert got == sent
    assert got < 2 * topo.cross_node_faces(xadj, adj, parts, nodes)
