"""Nodes and rank placement: which ranks share a node, and which parts of the mesh go where.

A halo message between two ranks of one node is a memory copy; between nodes it crosses the
network, 10-100x slower (seed 001's NodeMap).  MPI's own ``reorder`` flag is ignored by MPICH
and Open MPI, so haloflow places the parts itself, from the node of every rank:

- ``block``: part ``r`` on rank ``r`` (what a plain partitioner and ``mpiexec`` give);
- ``nodes``: a two-level decomposition, the mesh split first into one piece per node (in
  proportion to the node's ranks), then each piece into its node's ranks, so only the cuts
  between node pieces cross the network;
- ``permute``: the case's decomposition as it is, its parts assigned to ranks so that parts
  sharing many faces sit on one node (a partition of the parts' graph into nodes of exactly
  their rank counts, refined by swaps).

Nodes come from ``MPI_COMM_TYPE_SHARED``, or are emulated on one machine with ``[parallel]
ranks_per_node`` (ranks ``0..k-1`` on node 0, and so on).
"""

from __future__ import annotations

import numpy as np

PLACEMENTS = ("block", "nodes", "permute")


def rank_nodes(comm, ranks_per_node: int = 0) -> np.ndarray:
    """Collective: the node index of every rank (nodes numbered in order of first rank)."""
    if ranks_per_node > 0:
        return np.arange(comm.size) // ranks_per_node
    from mpi4py import MPI

    shared = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.rank)
    leader = shared.allreduce(comm.rank, op=MPI.MIN)
    shared.Free()
    leaders = np.array(comm.allgather(leader))
    _, first = np.unique(leaders, return_index=True)
    order = np.argsort(first)  # node ids in order of their first rank
    ids = np.empty(len(order), dtype=np.int64)
    ids[order] = np.arange(len(order))
    return ids[np.searchsorted(np.unique(leaders), leaders)]


def part_graph(xadj: np.ndarray, adjncy: np.ndarray, parts: np.ndarray, nparts: int):
    """``(nparts, nparts)`` matrix of faces shared between parts (symmetric, zero diagonal)."""
    rows = np.repeat(parts, np.diff(xadj))
    cols = parts[adjncy]
    cut = rows != cols
    m = np.zeros((nparts, nparts))
    np.add.at(m, (rows[cut], cols[cut]), 1.0)
    return m


def cross_node_faces(xadj, adjncy, parts, nodes_of_rank) -> int:
    """Faces between cells whose ranks are on different nodes (``parts``: the rank of each
    cell)."""
    node = np.asarray(nodes_of_rank)[parts]
    rows = np.repeat(node, np.diff(xadj))
    return int(np.count_nonzero(rows != node[adjncy]) // 2)


def cross_node_halo_cells(xadj, adjncy, parts, nodes_of_rank) -> int:
    """Halo cells that cross nodes per field exchanged: every (rank, ghost cell) pair whose
    ghost lives on another node, the ghosts a run's halos send over the network (a bytes
    count over 8 per field).  Across a plane it is twice the faces; across a ragged or
    slanted cut fewer, as a cell with several faces on the cut is sent once per rank."""
    parts = np.asarray(parts)
    node = np.asarray(nodes_of_rank)[parts]
    rows = np.repeat(np.arange(len(parts)), np.diff(xadj))
    cut = node[rows] != node[adjncy]
    return len(np.unique(parts[rows[cut]] * len(parts) + np.asarray(adjncy)[cut]))


def _subgraph(xadj, adjncy, cells):
    """CSR graph of ``cells`` alone (edges leaving them dropped), in their local numbering."""
    local = np.full(len(xadj) - 1, -1, dtype=np.int64)
    local[cells] = np.arange(len(cells))
    deg = np.diff(xadj)[cells]
    idx = np.repeat(xadj[cells], deg) + np.arange(deg.sum()) - np.repeat(
        np.cumsum(deg) - deg, deg)
    nb = local[adjncy[idx]]
    keep = nb >= 0
    row = np.repeat(np.arange(len(cells)), deg)[keep]
    ptr = np.zeros(len(cells) + 1, dtype=np.int64)
    np.add.at(ptr, row + 1, 1)
    return np.cumsum(ptr), nb[keep]


def two_level(mesh, nodes_of_rank, split) -> np.ndarray:
    """The rank of each cell: the mesh cut into one piece per node (weights in proportion to
    each node's rank count), each piece cut into its node's ranks.  ``split(xadj, adjncy,
    k, fractions)`` partitions a graph into ``k`` parts of the given weight fractions."""
    from ..mesh.core import cell_adjacency

    nodes_of_rank = np.asarray(nodes_of_rank)
    xadj, adjncy = cell_adjacency(mesh)
    n_nodes = int(nodes_of_rank.max()) + 1
    per_node = np.bincount(nodes_of_rank, minlength=n_nodes)
    node = split(xadj, adjncy, n_nodes, per_node / per_node.sum())
    parts = np.empty(mesh.n_cells, dtype=np.int64)
    for k in range(n_nodes):
        cells = np.flatnonzero(node == k)
        ranks = np.flatnonzero(nodes_of_rank == k)
        if len(ranks) == 1:
            parts[cells] = ranks[0]
            continue
        sx, sa = _subgraph(xadj, adjncy, cells)
        sub = split(sx, sa, len(ranks), np.full(len(ranks), 1.0 / len(ranks)))
        parts[cells] = ranks[sub]
    return parts


def permute(xadj, adjncy, parts: np.ndarray, nodes_of_rank) -> np.ndarray:
    """``parts`` relabelled so that parts sharing many faces land on ranks of one node.  Two
    groupings of the parts into nodes of exactly their rank counts are refined by swaps and
    the better one kept: the parts as placed (block placement: never worse than it) and a
    greedy one (each node grown from the part least tied to the nodes filled so far by the
    part with the most faces into it)."""
    nodes_of_rank = np.asarray(nodes_of_rank, dtype=np.int64)
    p = len(nodes_of_rank)
    w = part_graph(xadj, adjncy, parts, p)
    best, best_cut = None, np.inf
    for group in (nodes_of_rank.copy(), _greedy_groups(w, nodes_of_rank)):
        _swap_refine(w, group)
        cut = w[group[:, None] != group[None, :]].sum()
        if cut < best_cut:
            best, best_cut = group, cut
    # the parts of node k go to node k's ranks, in part order
    rank_of_part = np.empty(p, dtype=np.int64)
    for k in range(int(nodes_of_rank.max()) + 1):
        rank_of_part[np.flatnonzero(best == k)] = np.flatnonzero(nodes_of_rank == k)
    return rank_of_part[parts]


def _greedy_groups(w: np.ndarray, nodes_of_rank: np.ndarray) -> np.ndarray:
    p = len(nodes_of_rank)
    sizes = np.bincount(nodes_of_rank)
    group = np.full(p, -1, dtype=np.int64)
    for k in range(len(sizes)):
        free = np.flatnonzero(group < 0)
        taken = np.flatnonzero(group >= 0)
        seed = free[np.argmin(w[np.ix_(free, taken)].sum(axis=1))] if k else free[0]
        members = [seed]
        group[seed] = k
        while len(members) < sizes[k]:
            free = np.flatnonzero(group < 0)
            pick = free[np.argmax(w[np.ix_(free, members)].sum(axis=1))]
            group[pick] = k
            members.append(pick)
    return group


def _swap_refine(w: np.ndarray, group: np.ndarray, max_passes: int = 20) -> None:
    """Kernighan-Lin style: swap the pair of parts on different nodes whose swap most reduces
    the faces between nodes, while any swap does (node sizes stay as they are)."""
    p = len(group)
    for _ in range(max_passes * p):
        onehot = np.zeros((p, int(group.max()) + 1))
        onehot[np.arange(p), group] = 1.0
        to_group = w @ onehot  # faces from each part to each node
        own = to_group[np.arange(p), group]
        # gain of moving a to b's node and b to a's node
        gain = (to_group[:, group] - own[:, None]) + (to_group[:, group].T - own[None, :]) \
            - 2.0 * w
        gain[group[:, None] == group[None, :]] = -np.inf
        a, b = np.unravel_index(np.argmax(gain), gain.shape)
        if gain[a, b] <= 0.0:
            return
        group[a], group[b] = group[b], group[a]


def metis_split(xadj, adjncy, k: int, fractions) -> np.ndarray:
    """METIS k-way of a graph into parts of the given weight fractions; a part METIS leaves
    empty (tiny or disconnected graphs) falls back to consecutive runs of the numbering."""
    import pymetis

    from .decompose import METIS_OPTIONS

    n = len(xadj) - 1
    if k == 1:
        return np.zeros(n, dtype=np.int64)
    fr = np.asarray(fractions, dtype=float)
    graph = pymetis.CSRAdjacency(np.asarray(xadj), np.asarray(adjncy))
    _, parts = pymetis.part_graph(k, adjacency=graph, tpwgts=list(fr / fr.sum()),
                                  options=pymetis.Options(**METIS_OPTIONS))
    parts = np.asarray(parts, dtype=np.int64)
    if np.bincount(parts, minlength=k).min() == 0:
        cuts = np.clip(np.round(np.cumsum(fr / fr.sum())[:-1] * n).astype(np.int64), 1, n - 1)
        parts = np.repeat(np.arange(k), np.diff(np.concatenate([[0], cuts, [n]])))
    return parts


def place(mesh, nparts: int, method: str, placement: str, nodes_of_rank) -> np.ndarray:
    """Rank 0: the rank of every cell for ``placement`` (see the module docstring)."""
    from ..mesh.core import cell_adjacency
    from .decompose import decompose

    single = np.asarray(nodes_of_rank).max() == 0 or len(np.unique(nodes_of_rank)) == nparts
    if placement == "block" or single:
        return decompose(mesh, nparts, method)
    if placement == "nodes":
        return two_level(mesh, nodes_of_rank, metis_split)
    xadj, adjncy = cell_adjacency(mesh)
    return permute(xadj, adjncy, decompose(mesh, nparts, method), nodes_of_rank)


def halo_split(lmesh, nodes_of_rank) -> dict:
    """This rank's halo cells per exchange sent within its node and to other nodes, and the
    neighbours on other nodes (what a network would carry, per field exchanged)."""
    nodes = np.asarray(nodes_of_rank)
    mine = nodes[lmesh.rank]
    counts = np.diff(np.asarray(lmesh.send_ptr))
    other = nodes[np.asarray(lmesh.neighbours, dtype=np.int64)] != mine
    return {"node": int(mine), "halo_cells_same_node": int(counts[~other].sum()),
            "halo_cells_other_nodes": int(counts[other].sum()),
            "neighbours_other_nodes": int(other.sum())}
