"""The velocity picture of a 3D mesh is its mid-plane, and points outside the mesh (a solid
body, the corner below a step) are left blank (io.plots)."""

from __future__ import annotations

import numpy as np

from haloflow.io import plots
from haloflow.io.probes import Sampler2D


def _grid(nx, ny, nz, lz=1.0):
    x, y, z = np.meshgrid((np.arange(nx) + 0.5) / nx, (np.arange(ny) + 0.5) / ny,
                          (np.arange(nz) + 0.5) * lz / nz, indexing="ij")
    return np.column_stack([x.ravel(), y.ravel(), z.ravel()])


def test_a_3d_mesh_is_drawn_in_its_mid_plane():
    c = _grid(4, 4, 5)
    u = np.column_stack([c[:, 2], np.zeros(len(c)), np.zeros(len(c))])  # u_x = z
    b = np.array([[0.5, 0.0, 0.5], [0.5, 0.0, 0.1], [0.0, 0.5, 0.9]])
    cc, uu, bb, bu, z = plots.mid_plane(c, u, b, np.zeros((3, 3)))
    assert z == 0.5 and len(cc) == 16
    assert np.all(uu[:, 0] == 0.5)  # the layer through the middle, no other
    assert bb.tolist() == [[0.5, 0.0, 0.5]]  # boundary faces near the plane only
    # an even number of layers: the layer nearest the middle, one of the two
    cc, uu, _, _, z = plots.mid_plane(_grid(3, 3, 4), _grid(3, 3, 4))
    assert len(cc) == 9 and len(np.unique(uu[:, 2])) == 1 and z == 0.5


def test_a_one_cell_thick_mesh_is_drawn_whole():
    c = _grid(8, 8, 1, lz=0.01)
    out = plots.mid_plane(c, c)
    assert out[0] is c and out[4] is None
    flat = c[:, :2]
    assert plots.mid_plane(flat, flat)[0] is flat


def test_points_inside_a_solid_body_are_blank():
    # an annulus of cells between a cylinder (r = 0.3) and a circular outer wall (r = 1)
    r, t = np.meshgrid(np.linspace(0.35, 0.95, 7), np.linspace(0, 2 * np.pi, 48, endpoint=False))
    cells = np.column_stack([(r * np.cos(t)).ravel(), (r * np.sin(t)).ravel()])
    t = np.linspace(0, 2 * np.pi, 48, endpoint=False)
    walls = np.concatenate([0.3 * np.column_stack([np.cos(t), np.sin(t)]),
                            np.column_stack([np.cos(t), np.sin(t)])])
    sampler = Sampler2D(cells, walls)
    pts = np.array([[0.0, 0.0], [0.1, -0.1], [0.6, 0.0], [0.0, -0.8], [1.5, 1.5]])
    assert plots.outside(sampler, len(cells), pts).tolist() == [True, True, False, False,
                                                               True]
