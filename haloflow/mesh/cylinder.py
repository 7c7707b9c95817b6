"""Body-fitted block-structured mesh of the DFG 1995 cylinder benchmark (Schäfer & Turek 1996).

A channel ``[0, length] x [0, height]`` with a cylinder of diameter ``diameter`` at
``centre``, one hexahedron thick in z.  A square of side ``box`` around the cylinder holds an
O-grid of four blocks whose grid lines are rays from the cylinder's centre: orthogonal at
the cylinder wall, graded towards it (``grading``: last/first radial cell size).  The square
is tiled on the outside by eight Cartesian blocks (left, the column above and below the
square, and the downstream channel).  The square's sides carry the O-grid's equal-angle
spacing (``box/2 tan(theta)``), so the Cartesian lines through the square match it, and the
cells of the outer blocks grow with their distance ``d`` from the square as
``s(d) = s0 (1 + d / GROWTH_LENGTH)``, capped at ``MAX_GROWTH s0``, where ``s0`` is the last
radial cell of the O-grid.  Every size is proportional to ``1 / cells_around``, so meshes of
different ``cells_around`` are one geometrically similar family: ``cells_around`` x 1.41
doubles the cells (64, 88, 128: about 4.7k, 8.9k, 18.6k cells).

``wake_refinement`` w refines the wake: the O-grid's downstream quarter has w times the rays
of the others, and the downstream channel takes its lines through the square's back side
over, so the recirculation behind the cylinder and the boundary layer up to where it
separates (about 45 degrees from the back point at Re 20) have cells w times narrower
across the flow.  The recirculation length converges with that spacing
(docs/cylinder.md), slowly where only ``cells_around`` refines it.

The quads of all blocks are merged (coincident points joined), renumbered by reverse
Cuthill-McKee, and turned into faces like the Gmsh reader does: an edge shared by two quads
is an internal face (owner < neighbour, out of the owner), an edge of one quad a boundary
face classified by where it lies.  Patches: ``inlet`` (x = 0), ``outlet`` (x = length),
``walls`` (y = 0 and y = height), ``cylinder``, ``front`` and ``back`` (z; kind empty).
"""

from __future__ import annotations

import math

import numpy as np

from .core import Mesh, Patch

CYLINDER_PATCHES = ("inlet", "outlet", "walls", "cylinder", "front", "back")
PATCH_KINDS = {"inlet": "patch", "outlet": "patch", "walls": "wall", "cylinder": "wall",
               "front": "empty", "back": "empty"}

# The DFG 1995 geometry (Schäfer & Turek 1996, tests 2D-1 to 2D-3)
LENGTH, HEIGHT, CENTRE, DIAMETER = 2.2, 0.41, (0.2, 0.2), 0.1
BOX = 0.2  # side of the O-grid's square: twice the diameter
GROWTH_LENGTH = 0.1  # outer blocks: cells twice the size one diameter away from the square
MAX_GROWTH = 5.0  # ... and at most five times the size of the last O-grid cell


def spaced(length: float, s0: float, ell: float = GROWTH_LENGTH,
           cap: float = MAX_GROWTH) -> np.ndarray:
    """Node offsets ``0 .. length`` whose cell sizes follow ``s(d) = s0 (1 + d / ell)``,
    capped at ``cap * s0``: the number of cells is the integral of ``1 / s`` (rounded), the
    nodes are equally spaced in that integral, so the sizes are smooth and scale with s0."""
    d_star = ell * (cap - 1.0)  # where the cap is reached
    f_star = ell / s0 * math.log(cap)

    def F(d):
        return ell / s0 * math.log1p(d / ell) if d <= d_star else f_star + (d - d_star) / (
            cap * s0)

    n = max(1, round(F(length)))
    f = np.linspace(0.0, F(length), n + 1)
    d = np.where(f <= f_star, ell * np.expm1(np.minimum(f, f_star) * s0 / ell),
                 d_star + (f - f_star) * cap * s0)
    d[0], d[-1] = 0.0, length
    return d


def _geometric(n: int, ratio: float) -> np.ndarray:
    """``n + 1`` points on [0, 1] whose last/first interval is ``ratio``."""
    q = ratio ** (1.0 / (n - 1)) if n > 1 else 1.0
    x = np.concatenate([[0.0], np.cumsum(q ** np.arange(n))])
    return x / x[-1]


def _rays(n: int, a: float) -> tuple[np.ndarray, np.ndarray]:
    """``n + 1`` equal angles over a quarter, -45 to 45 degrees, and where their rays meet
    the side of the square of half-side ``a`` (``a tan(theta)``)."""
    theta = np.linspace(-0.25 * math.pi, 0.25 * math.pi, n + 1)
    side = a * np.tan(theta)
    side[0], side[-1] = -a, a
    return theta, side


def _blocks(n, nr, grading, wake, length, height, centre, diameter, box):
    """The blocks' node coordinates, each an (ni + 1, nj + 1, 2) array; the downstream
    quarter of the O-grid and the wake block behind it have ``wake * n`` rays."""
    cx, cy = centre
    r, a = 0.5 * diameter, 0.5 * box
    theta, side = _rays(n, a)
    theta_wake, side_wake = _rays(wake * n, a)
    t = _geometric(nr, grading)
    s0 = (a - r) * (t[-1] - t[-2])  # the last radial cell at the middle of a side

    blocks = []
    for q in range(4):  # O-grid: right, top, left, bottom quarter
        th = (theta_wake if q == 0 else theta) + 0.5 * math.pi * q
        c, s = np.cos(th), np.sin(th)
        rho = a / np.maximum(np.abs(c), np.abs(s))  # the ray's length to the square
        rad = r + (rho - r)[:, None] * t[None, :]  # (rays, nr + 1)
        blocks.append(np.stack([cx + rad * c[:, None], cy + rad * s[:, None]], axis=-1))
    x_left = (cx - a) - spaced(cx - a, s0)[::-1]
    x_mid = cx + side
    x_right = (cx + a) + spaced(length - cx - a, s0)
    y_low = (cy - a) - spaced(cy - a, s0)[::-1]
    y_high = (cy + a) + spaced(height - cy - a, s0)
    for i, xs in enumerate((x_left, x_mid, x_right)):
        for j, ys in enumerate((y_low, cy + (side_wake if i == 2 else side), y_high)):
            if i == 1 and j == 1:
                continue  # the square: the O-grid
            X, Y = np.meshgrid(xs, ys, indexing="ij")
            blocks.append(np.stack([X, Y], axis=-1))
    return blocks


def _merge(points: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Join points closer than ``tol`` (block interfaces): (unique points, old -> new)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree

    pairs = cKDTree(points).query_pairs(tol, output_type="ndarray")
    n = len(points)
    g = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    _, label = connected_components(g, directed=False)
    # number the groups in order of first appearance, each at its first point's position
    first = np.full(label.max() + 1, n, dtype=np.int64)
    np.minimum.at(first, label, np.arange(n))
    order = np.argsort(first, kind="stable")
    new = np.empty_like(order)
    new[order] = np.arange(len(order))
    return points[first[order]], new[label]


def _quads(blocks, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """All blocks' quads on their merged points (closer than ``tol`` joined), each
    counter-clockwise seen from +z: (points (n, 2), quads (n_quads, 4))."""
    pts, quads, start = [], [], 0
    for b in blocks:
        ni, nj = b.shape[0] - 1, b.shape[1] - 1
        pts.append(b.reshape(-1, 2))
        idx = start + np.arange((ni + 1) * (nj + 1)).reshape(ni + 1, nj + 1)
        quads.append(np.stack([idx[:-1, :-1], idx[1:, :-1], idx[1:, 1:], idx[:-1, 1:]],
                              axis=-1).reshape(-1, 4))
        start += (ni + 1) * (nj + 1)
    xy, new = _merge(np.concatenate(pts), tol)
    quads = new[np.concatenate(quads)]
    p = xy[quads]  # (n_quads, 4, 2)
    area2 = np.sum(p[:, :, 0] * np.roll(p[:, :, 1], -1, axis=1)
                   - np.roll(p[:, :, 0], -1, axis=1) * p[:, :, 1], axis=1)
    quads[area2 < 0] = quads[area2 < 0][:, ::-1]
    return xy, quads


def cylinder(cells_around: int = 64, grading: float = 5.0, thickness: float = 0.1,
             wake_refinement: int = 1, length: float = LENGTH, height: float = HEIGHT,
             centre=CENTRE, diameter: float = DIAMETER, box: float = BOX) -> Mesh:
    """The DFG cylinder channel, one cell (``thickness``) deep; see the module docstring.

    ``cells_around``: cells around the cylinder (a multiple of 4; also the radial cells of
    the O-grid, ``cells_around / 4``, and the scale of every other cell count).
    ``grading``: last/first radial cell size in the O-grid (> 1: fine at the wall).
    ``wake_refinement``: the downstream quarter of the O-grid, and the wake behind it, have
    that many times the rays of the other quarters (1: the same).
    """
    if cells_around < 8 or cells_around % 4:
        raise ValueError(f"cells_around must be a multiple of 4 and at least 8, got "
                         f"{cells_around}")
    if not grading > 0.0 or not thickness > 0.0:
        raise ValueError("grading and thickness must be positive")
    if int(wake_refinement) != wake_refinement or wake_refinement < 1:
        raise ValueError(f"wake_refinement must be a positive integer, got {wake_refinement}")
    cx, cy = centre
    r, a = 0.5 * diameter, 0.5 * box
    if not (r < a and cx - a > 0.0 and cx + a < length and cy - a > 0.0
            and cy + a < height):
        raise ValueError("the cylinder's square (side box) must hold the cylinder and lie "
                         "inside the channel")
    n = cells_around // 4
    blocks = _blocks(n, n, float(grading), int(wake_refinement), length, height, centre,
                     diameter, box)

    xy, quads = _quads(blocks, 1e-6 * diameter / cells_around)

    # edges: a -> b counter-clockwise in their quad, so (b - a) x z points out of it
    nq = len(quads)
    ea = quads.reshape(-1)
    eb = np.roll(quads, -1, axis=1).reshape(-1)
    ecell = np.repeat(np.arange(nq), 4)
    key = np.sort(np.stack([ea, eb], axis=1), axis=1)
    order = np.lexsort((key[:, 1], key[:, 0]))
    k = key[order]
    head = np.ones(len(k), bool)
    head[1:] = np.any(k[1:] != k[:-1], axis=1)
    runs = np.flatnonzero(head)
    size = np.diff(np.concatenate([runs, [len(k)]]))
    if np.any(size > 2):
        raise ValueError("cylinder mesh: an edge is shared by more than two quads")
    pair = size == 2
    e1, e2 = order[runs[pair]], order[runs[pair] + 1]

    # reverse Cuthill-McKee numbering of the cells: a narrow band for the smoothers
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    c1, c2 = ecell[e1], ecell[e2]
    adj = coo_matrix((np.ones(2 * len(c1)), (np.r_[c1, c2], np.r_[c2, c1])),
                     shape=(nq, nq)).tocsr()
    perm = reverse_cuthill_mckee(adj, symmetric_mode=True)
    rank = np.empty(nq, np.int64)
    rank[perm] = np.arange(nq)
    ecell = rank[ecell]
    quads = quads[perm]
    c1, c2 = ecell[e1], ecell[e2]

    own_edge = np.where(c1 < c2, e1, e2)  # the owner's copy points to the neighbour
    owner, neighbour = np.minimum(c1, c2), np.maximum(c1, c2)
    o = np.lexsort((neighbour, owner))
    own_edge, owner, neighbour = own_edge[o], owner[o], neighbour[o]

    # boundary edges by position
    bnd = order[runs[~pair]]
    mid = 0.5 * (xy[ea[bnd]] + xy[eb[bnd]])
    tol = 1e-9 * max(length, height)
    ids = {name: i for i, name in enumerate(CYLINDER_PATCHES)}
    pid = np.full(len(bnd), -1, np.int64)
    pid[np.hypot(mid[:, 0] - cx, mid[:, 1] - cy) < 0.5 * (r + a)] = ids["cylinder"]
    pid[np.abs(mid[:, 1]) < tol] = ids["walls"]
    pid[np.abs(mid[:, 1] - height) < tol] = ids["walls"]
    pid[np.abs(mid[:, 0]) < tol] = ids["inlet"]
    pid[np.abs(mid[:, 0] - length) < tol] = ids["outlet"]
    if np.any(pid < 0):
        raise ValueError(f"cylinder mesh: {int(np.sum(pid < 0))} boundary edges on no patch")
    bown = ecell[bnd]
    bo = np.lexsort((bown, pid))
    bnd, bown, pid = bnd[bo], bown[bo], pid[bo]

    # extrude: points z = 0 then z = thickness; side faces a, b, b', a'; front reversed
    npt = len(xy)
    points = np.zeros((2 * npt, 3))
    points[:npt, :2] = xy
    points[npt:, :2] = xy
    points[npt:, 2] = float(thickness)

    def side(e):
        return np.stack([ea[e], eb[e], eb[e] + npt, ea[e] + npt], axis=1)

    front = quads[:, ::-1]
    back = quads + npt
    cells = np.arange(nq)
    faces = [side(own_edge), side(bnd), front, back]
    owners = [owner, bown, cells, cells]
    counts = np.bincount(pid, minlength=len(CYLINDER_PATCHES))
    counts[ids["front"]] = counts[ids["back"]] = nq
    patches, at = [], len(owner)
    for name, c in zip(CYLINDER_PATCHES, counts, strict=True):
        patches.append(Patch(name, at, int(c), PATCH_KINDS[name]))
        at += int(c)
    nodes = np.concatenate(faces).astype(np.int64)
    return Mesh(points=points, face_ptr=np.arange(0, 4 * len(nodes) + 1, 4, dtype=np.int64),
                face_nodes=nodes.ravel(), owner=np.concatenate(owners).astype(np.int64),
                neighbour=neighbour.astype(np.int64), patches=patches, n_cells=nq)
