"""Vector fields are views whose rows start far apart within a page, so that a store to one
component and a load of another never share their low address bits; each row stays a
contiguous 1-D array (what exchanges and kernels read), and the solver's fields use them."""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from haloflow.backends import layout
from haloflow.case import load_case
from haloflow.run.setup import setup


def _apart(a: np.ndarray) -> int:
    """Bytes between consecutive rows' starts, within a page."""
    return a.strides[-2] % layout.PAGE


def test_rows_start_far_apart_in_a_page_for_every_row_length():
    for n in [1, 7, 8, 64, 511, 512, 4096, 17408, 57600, 91477, 131072, 135168, 262144]:
        stride = layout.row_stride(n)
        assert stride >= n + layout.STEP and (stride - n) % layout.STEP == 0
        assert layout.APART <= stride * 8 % layout.PAGE <= layout.PAGE - layout.APART
        assert stride - n <= layout.PAGE // 8  # never more than a page of padding


def test_components_are_zero_views_with_contiguous_independent_rows():
    u = layout.components(3, 135168)  # the 64³ cavity's half on 2 ranks: 33 pages a row
    assert u.shape == (3, 135168) and not u.any()
    assert layout.APART <= _apart(u) <= layout.PAGE - layout.APART
    assert all(u[d].flags.c_contiguous for d in range(3))
    u[1] = 1.0
    assert not u[0].any() and not u[2].any() and u[1].all()
    g = layout.components(3, 3, 1000)
    assert g.shape == (3, 3, 1000) and g[2, 1].flags.c_contiguous
    assert layout.APART <= _apart(g) <= layout.PAGE - layout.APART


def test_the_solvers_vector_fields_are_laid_out_so():
    case = load_case("cavity", ["mesh.cells=[64,64,1]", "solver.time_scheme=\"backward\"",
                                "output.fields=false", "postprocess.cavity=false"])
    run = setup(case, MPI.COMM_SELF, 1, lambda s: None)  # 4096 cells: rows a page apart
    s = run.solver
    fields = [s.U, s.grad, s.HbyA, s.momentum.b0, s.ts.U_old, s.ts.U_time, s.ts.U_conv]
    for a in fields:
        assert layout.APART <= _apart(a) <= layout.PAGE - layout.APART
    s.step()
    s.step()  # the second backward step extrapolates the convecting velocity row by row
    assert np.array_equal(s.ts.U_conv, 2.0 * s.ts.U_old - s.ts.U_old2)
