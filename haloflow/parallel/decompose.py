"""Partitioners: assign every cell of the global mesh to a rank.

All take optional per-cell weights so that a later load balancer can partition by measured
cost instead of by cell count.  They run once, on rank 0.
"""

from __future__ import annotations

import numpy as np

from ..mesh.core import Mesh, cell_adjacency

METHODS = ("metis", "rcb", "rcb-planes", "grid", "simple")
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
    elif method == "grid":
        parts = grid(mesh.geom().cell_centres, w, nparts, mesh.owner[: mesh.n_internal],
                     mesh.neighbour)
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


def grid(centres: np.ndarray, w: np.ndarray, nparts: int, owner: np.ndarray,
         neighbour: np.ndarray) -> np.ndarray:
    """A process grid: ``a x b x c = nparts`` parts, each axis cut between planes of cells
    into groups of near-equal weight, the same cuts across the whole mesh.

    On a box every part is then a box with at most 6 neighbours (RCB's staircases give up
    to 22 at 62³ into 1 024 parts, ``rcb-planes``' unaligned sibling cuts 10), for parts up
    to a plane's worth larger per axis.  Of the grids that leave no part empty, the one
    with the lightest largest part is taken, then the fewest faces between parts.  Where
    no grid fits (a part would fall outside a non-box domain), ``rcb-planes``."""
    planes = [_planes(centres[:, d]) for d in range(centres.shape[1])]
    plane_w = [np.bincount(p, weights=w) for p in planes]
    candidates = []
    for shape in _grids(nparts, len(planes)):
        if any(k > len(pw) for k, pw in zip(shape, plane_w, strict=True)):
            continue
        edges = [_plane_groups(pw, k) for pw, k in zip(plane_w, shape, strict=True)]
        # on a box of uniform weights the largest part is the product of the axes' largest
        # shares: rank the grids by it, then compute the few best exactly
        bound = np.prod([np.add.reduceat(pw, e[:-1]).max() / pw.sum()
                         for pw, e in zip(plane_w, edges, strict=True)])
        candidates.append((bound, shape, edges))
    best = None
    for _, shape, edges in sorted(candidates, key=lambda c: c[0])[:GRID_CANDIDATES]:
        parts = np.zeros(len(w), dtype=np.int64)
        for p, k, e in zip(planes, shape, edges, strict=True):
            parts = parts * k + np.repeat(np.arange(k), np.diff(e))[p]
        load = np.bincount(parts, weights=w, minlength=nparts)
        if np.any(np.bincount(parts, minlength=nparts) == 0):
            continue
        cut = int(np.count_nonzero(parts[owner] != parts[neighbour]))
        # ties: more cuts along the first axes (x before y before z, as OpenFOAM's simple)
        key = (round(float(load.max()) / float(load.mean()), 6), cut, [-k for k in shape])
        if best is None or key < best[0]:
            best = (key, parts)
    if best is None:
        return rcb(centres, w, nparts, planes=True)
    return best[1]


GRID_CANDIDATES = 8  # grids computed exactly, the lightest by the box estimate


def _planes(x: np.ndarray) -> np.ndarray:
    """Each cell's plane along one axis: centres within a tolerance share a plane."""
    order = np.argsort(x, kind="stable")
    tol = 1e-9 * max(float(x[order[-1]] - x[order[0]]), 1e-300)
    index = np.empty(len(x), dtype=np.int64)
    index[order] = np.concatenate(([0], np.cumsum(np.diff(x[order]) > tol)))
    return index


def _grids(n: int, dims: int):
    """Every ordered ``dims``-tuple of positive integers whose product is ``n``."""
    if dims == 1:
        yield (n,)
        return
    for a in range(1, n + 1):
        if n % a == 0:
            for rest in _grids(n // a, dims - 1):
                yield (a, *rest)


def _plane_groups(plane_w: np.ndarray, k: int) -> np.ndarray:
    """The first plane of each of ``k`` consecutive groups of planes, and the end
    (``k + 1`` edges): each cut at the plane boundary nearest its share of the weight,
    every group at least one plane."""
    cw = np.cumsum(plane_w)
    n = len(cw)
    edges = np.zeros(k + 1, dtype=np.int64)
    edges[k] = n
    for i in range(1, k):
        target = cw[-1] * i / k
        c = int(np.searchsorted(cw, target))  # cw[c - 1] < target <= cw[c]
        if c < n and (c == 0 or abs(cw[c] - target) < abs(cw[c - 1] - target)):
            c += 1  # the group ends after plane c
        edges[i] = min(max(c, edges[i - 1] + 1), n - (k - i))
    return edges


def _slabs(centres: np.ndarray, w: np.ndarray, nparts: int) -> np.ndarray:
    """Equal-weight slabs along the longest extent (the simplest useful split)."""
    axis = int(np.argmax(centres.max(axis=0) - centres.min(axis=0)))
    order = np.lexsort((np.arange(len(centres)), centres[:, axis]))
    parts = np.empty(len(centres), dtype=np.int64)
    for r, chunk in enumerate(_split_sorted(order, w, np.full(nparts, 1.0 / nparts))):
        parts[chunk] = r
    return parts
