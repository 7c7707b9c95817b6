"""Partitioners: assign every cell of the global mesh to a rank.

All take optional per-cell weights so that a later load balancer can partition by measured
cost instead of by cell count.  They run once, on rank 0.
"""

from __future__ import annotations

import numpy as np

from ..mesh.core import Mesh, cell_adjacency

METHODS = ("metis", "rcb", "rcb-planes", "simple")
# METIS k-way: a fixed seed (the same parts on every run), and METIS_OPTION_MINCONN, which
# also keeps down how many other parts each part touches.  Every exchange waits for the
# rank with the most neighbours, and at scale their messages, not their bytes, are its
# cost: a cube of 62^3 cells into 96 parts gives the busiest part 15 neighbours instead of
# 20 (24 parts: 10 instead of 13; 1024: 18 instead of 21) for an edge cut within 1 %; up
# to 8 parts the parts are the same (docs/performance.md, "Strong scaling").
METIS_OPTIONS = {"seed": 1, "minconn": 1}


def decompose(mesh: Mesh, nparts: int, method: str = "metis", weights=None) -> np.ndarray:
    """Return ``parts``: the rank of each cell (int64, every rank gets at least one cell)."""
    if nparts < 1:
        raise ValueError("nparts must be >= 1")
    if nparts > mesh.n_cells:
        raise ValueError(f"cannot split {mesh.n_cells} cells over {nparts} ranks")
    if nparts == 1:
        return np.zeros(mesh.n_cells, dtype=np.int64)
    w = np.ones(mesh.n_cells) if weights is None else np.asarray(weights, dtype=float)
    if method == "metis":
        parts = _metis(mesh, nparts, w)
    elif method in ("rcb", "rcb-planes"):
        parts = rcb(mesh.geom().cell_centres, w, nparts, planes=method == "rcb-planes")
    elif method == "simple":
        parts = _slabs(mesh.geom().cell_centres, w, nparts)
    else:
        raise ValueError(f"unknown decomposition method {method!r} (expected one of {METHODS})")
    counts = np.bincount(parts, minlength=nparts)
    if np.any(counts == 0):  # metis may leave a part empty on tiny graphs
        parts = rcb(mesh.geom().cell_centres, w, nparts)
    return parts


def _metis(mesh: Mesh, nparts: int, w: np.ndarray) -> np.ndarray:
    import pymetis

    xadj, adjncy = cell_adjacency(mesh)
    iw = np.maximum(1, np.round(w / w.mean() * 100)).astype(np.int64) if np.ptp(w) > 0 else None
    opts = pymetis.Options(**METIS_OPTIONS)
    graph = pymetis.CSRAdjacency(xadj, adjncy)
    _, parts = pymetis.part_graph(nparts, adjacency=graph, vweights=iw, options=opts)
    return np.asarray(parts, dtype=np.int64)


def _split_sorted(order: np.ndarray, w: np.ndarray, fractions: np.ndarray) -> list[np.ndarray]:
    """Cut ``order`` into consecutive chunks whose weights follow ``fractions``; every chunk
    gets at least one cell, however heavy a single cell is."""
    cw = np.cumsum(w[order])
    cuts = np.searchsorted(cw, np.cumsum(fractions)[:-1] * cw[-1], side="right")
    n, k = len(order), len(fractions)
    cuts = np.clip(cuts, np.arange(1, k), n - np.arange(k - 1, 0, -1))
    for i in range(1, k - 1):  # strictly increasing; the upper clip keeps room for the rest
        cuts[i] = max(cuts[i], cuts[i - 1] + 1)
    return np.split(order, cuts)


def rcb(centres: np.ndarray, w: np.ndarray, nparts: int, planes: bool = False) -> np.ndarray:
    """Recursive coordinate bisection: cut the longest extent, weights split in proportion.

    ``planes``: cut only between planes of cell centres where the mesh has them (a
    structured block), at the plane boundary nearest the weight split.  An exact split
    cuts through a plane wherever a part's share is not a whole number of planes, and
    sub-domains then cut it at different places: the cuts form staircases and a part
    touches up to 3x the neighbours (62³ into 512 parts: up to 18 instead of 6, so 3x the
    messages of every exchange) for parts at most a plane's worth larger (10 % there).
    Where no two centres share a coordinate, every index is a plane boundary: the same
    cuts as the exact split, to a cell."""
    parts = np.empty(len(centres), dtype=np.int64)

    def split(idx, first, k):
        if k == 1:
            parts[idx] = first
            return
        c = centres[idx]
        axis = int(np.argmax(c.max(axis=0) - c.min(axis=0)))
        order = idx[np.lexsort((idx, c[:, axis]))]
        k0 = k // 2
        cw = np.cumsum(w[order])
        cut = int(np.searchsorted(cw, cw[-1] * k0 / k, side="right"))
        lo, hi = k0, len(order) - (k - k0)  # room for one cell per part
        if planes:
            cut = _plane_boundary(centres[order, axis], cw, cw[-1] * k0 / k, lo, hi, cut)
        cut = min(max(cut, lo), hi)
        split(order[:cut], first, k0)
        split(order[cut:], first + k0, k - k0)

    split(np.arange(len(centres)), 0, nparts)
    return parts


def _plane_boundary(x, cw, target: float, lo: int, hi: int, cut: int) -> int:
    """Of the indices in ``[lo, hi]`` where the sorted coordinates ``x`` step to the next
    plane, the one whose weight before it is nearest ``target`` (``cw``: the cumulative
    weights); ``cut`` where there is none."""
    tol = 1e-9 * max(float(x[-1] - x[0]), 1e-300)
    steps = np.flatnonzero(np.diff(x) > tol) + 1
    steps = steps[(steps >= lo) & (steps <= hi)]
    if len(steps) == 0:
        return cut
    return int(steps[np.argmin(np.abs(cw[steps - 1] - target))])


def _slabs(centres: np.ndarray, w: np.ndarray, nparts: int) -> np.ndarray:
    """Equal-weight slabs along the longest extent (the simplest useful split)."""
    axis = int(np.argmax(centres.max(axis=0) - centres.min(axis=0)))
    order = np.lexsort((np.arange(len(centres)), centres[:, axis]))
    parts = np.empty(len(centres), dtype=np.int64)
    for r, chunk in enumerate(_split_sorted(order, w, np.full(nparts, 1.0 / nparts))):
        parts[chunk] = r
    return parts
