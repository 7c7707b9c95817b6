"""Wall distance: exact on a channel, to the face polygon (not its centre), and the
hierarchy's answer equals a brute-force search."""

from __future__ import annotations

import numpy as np

from haloflow.mesh.blocks import box
from haloflow.parallel.local import build_local
from haloflow.parallel.wall_distance import (
    distance_to_triangles,
    triangle_dist2,
    wall_distance,
    wall_triangles,
)


def _serial(mesh):
    return build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)


def test_channel_distance_is_min_of_y_and_h_minus_y():
    lm = _serial(box((12, 9, 1), (3.0, 1.5, 0.1), grading=(1.0, 4.0, 1.0)))
    d = wall_distance(lm, None, ["bottom", "top"])
    y = lm.geometry.cell_centres[:, 1]
    assert np.allclose(d, np.minimum(y, 1.5 - y), rtol=0, atol=1e-13)
    only_bottom = wall_distance(lm, None, ["bottom"])
    assert np.allclose(only_bottom, y, rtol=0, atol=1e-13)


def test_distance_to_the_polygon_not_its_centre():
    """One 2 x 2 wall face at z = 0: a point above its corner region is at its height, a
    point beside it at the distance to the nearest edge or corner."""
    lm = _serial(box((1, 1, 1), (2.0, 2.0, 1.0)))
    tris = wall_triangles(lm, ["front"])  # z = 0
    pts = np.array([[1.9, 0.1, 0.3], [3.0, 1.0, 0.0], [3.0, 4.0, 0.0], [1.0, 1.0, -0.5]])
    d = distance_to_triangles(pts, tris)
    assert np.allclose(d, [0.3, 1.0, np.hypot(1.0, 2.0), 0.5], rtol=0, atol=1e-14)
    assert np.isinf(distance_to_triangles(pts, np.zeros((0, 3, 3)))).all()


def test_hierarchy_equals_brute_force():
    rng = np.random.default_rng(5)
    c = rng.random((300, 1, 3)) * 4.0
    tris = c + 0.3 * rng.standard_normal((300, 3, 3))
    tris[7, 2] = tris[7, 1]  # a degenerate one
    pts = rng.random((400, 3)) * 5.0 - 0.5
    brute = np.array([min(triangle_dist2(p, t) for t in tris) for p in pts]) ** 0.5
    assert np.array_equal(distance_to_triangles(pts, tris), brute)
