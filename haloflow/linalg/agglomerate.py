"""Coarse AMG levels on fewer ranks (processor agglomeration).

On many ranks a coarse level holds a handful of rows per rank, and every visit to it costs
its exchanges' latency on all of them.  A level whose rows per rank fall below
``min_rows`` moves onto about ``rows / min_rows`` ranks, fewer again at each deeper level,
as OpenFOAM's GAMG processor agglomeration, PETSc GAMG's process reduction and hypre's
agglomerated coarse grids do.  The ranks left out hold no rows of it: they hand their
partial restrictions to the rank that holds their share (their *leader*) and take its
correction back, and skip the level's exchanges.

Leaders are node-aware: a level first keeps fewer ranks on every node (the ranks of a node
hand over by shared memory), down to one per node, and then fewer nodes.  Groups nest
(group sizes are powers of two), so a rank left out of one level stays out of the deeper
ones.  The aggregates and so the hierarchy do not change: only which rank owns a coarse
row, and with it where the smoother's Jacobi cut runs.  The run (``linalg.amg``) and the
performance model (``study.model``) both take their leaders from here.
"""

from __future__ import annotations

import numpy as np


def active_ranks(rows: int, ranks: int, min_rows: int) -> int:
    """How many ranks a level of ``rows`` global rows asks for: all of them while each
    holds at least ``min_rows`` (0: no agglomeration), else ``rows / min_rows``."""
    if min_rows <= 0 or rows >= ranks * min_rows:
        return ranks
    return max(1, rows // min_rows)


def _pow2_at_least(x: float) -> int:
    return 1 << max(int(np.ceil(np.log2(max(x, 1.0)))), 0)


def leaders(nodes: np.ndarray, active: int) -> np.ndarray:
    """For every rank, the rank that holds its rows of a level kept on about ``active``
    ranks (at least half of that, at most all), ``nodes`` the node of every rank (numbered
    from 0 in order of first rank).  Within a node, ranks in groups of a power of two;
    once a node keeps one rank, nodes in groups of a power of two, led by the first rank
    of the group's first node."""
    nodes = np.asarray(nodes, dtype=np.int64)
    P = len(nodes)
    if active >= P:
        return np.arange(P, dtype=np.int64)
    n_nodes = int(nodes.max()) + 1
    order = np.argsort(nodes, kind="stable")  # ranks node by node, in rank order
    first = np.searchsorted(nodes[order], np.arange(n_nodes))  # each node's first in order
    local = np.empty(P, dtype=np.int64)
    local[order] = np.arange(P) - first[nodes[order]]  # a rank's place on its node
    size = np.bincount(nodes, minlength=n_nodes)
    if active > n_nodes:  # every node keeps some of its ranks, in proportion to its size
        keep = np.maximum(np.ceil(size * (active / P)), 1)
        group = np.array([_pow2_at_least(s / k) for s, k in zip(size, keep, strict=True)])
        lead_local = local - local % group[nodes]
        return order[first[nodes] + lead_local]
    g = _pow2_at_least(n_nodes / max(active, 1))  # one rank per node group
    return order[first[nodes - nodes % g]]


def plan(rows: list[int], nodes: np.ndarray, min_rows: int) -> list[np.ndarray]:
    """Leaders of every coarse level of ``rows`` global rows in turn (the levels below the
    mesh), each level keeping no more ranks than the one above it."""
    out, active = [], len(nodes)
    for r in rows:
        active = min(active, active_ranks(int(r), len(nodes), min_rows))
        out.append(leaders(nodes, active))
    return out
