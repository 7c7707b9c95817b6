"""A threaded rank's face loops (parallel/faceblocks.py): each face with its owner's thread,
the faces from earlier blocks again with their neighbour's, and the pressure kernels on them
equal to the serial kernels to the bit."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.parallel.faceblocks import FaceBlocks
from haloflow.physics import pressure as P
from haloflow.run.setup import setup

SETS = ["mesh.cells=[10,9,8]", "boundary.front.type=wall", "boundary.back.type=wall",
        "output.fields=false", "output.plots=false", "postprocess.cavity=false"]


@pytest.fixture(scope="module")
def cavity():
    run = setup(load_case("cavity", SETS), MPI.COMM_SELF, 1, lambda *a, **k: None)
    run.solver.step()
    return run


@pytest.mark.parametrize("nt", [1, 2, 3])
def test_every_face_has_one_owner_thread_and_crossing_faces_go_to_the_neighbours(cavity, nt):
    lm = cavity.lmesh
    owner, neighbour = lm.owner[:lm.n_internal], lm.neighbour
    fb = FaceBlocks(owner, neighbour, lm.n_cells, nt)
    cells, own_ptr, own, in_ptr, incoming = fb.arrays()
    assert cells[0] == 0 and cells[-1] == lm.n_cells
    np.testing.assert_array_equal(np.sort(own), np.arange(len(neighbour)))  # each face once
    for t in range(nt):
        lo, hi = cells[t], cells[t + 1]
        mine = own[own_ptr[t]:own_ptr[t + 1]]
        assert np.all(np.diff(mine) > 0) and np.all((lo <= owner[mine]) & (owner[mine] < hi))
        inc = incoming[in_ptr[t]:in_ptr[t + 1]]
        assert np.all(np.diff(inc) > 0)
        want = np.flatnonzero((lo <= neighbour) & (neighbour < hi) & ((owner < lo) | (owner >= hi)))
        np.testing.assert_array_equal(inc, want)
    assert (len(incoming) > 0) == (nt > 1)


def _inputs(run):
    pr, lm = run.solver.pressure, run.lmesh
    rng = np.random.default_rng(11)
    pr.p[:] = rng.random(len(pr.p))
    return pr, lm, rng.random((3, lm.n_cells)), rng.random(lm.n_cells) + 0.5


@pytest.mark.parametrize("nt", [1, 3])
@pytest.mark.parametrize("split", [False, True])
def test_correct_gauss_on_face_blocks_is_the_serial_kernel(cavity, nt, split):
    """Fluxes, gradient and velocity to the bit, in one pass or split at a face as a run
    that overlaps the exchange of p splits it."""
    pr, lm, HbyA, rAU = _inputs(cavity)
    ni = lm.n_internal
    fb = FaceBlocks(pr.owner, lm.neighbour, lm.n_cells, nt).arrays()
    got = {}
    for name, kern, extra in (("serial", P.correct_gauss, ()),
                              ("blocks", P.correct_gauss_blocks, fb)):
        phi, grad = np.full_like(pr.phi, np.nan), np.full_like(pr.grad, np.nan)
        U = np.zeros((3, lm.n_cells))
        args = (pr.owner, lm.neighbour, pr.fc.weight, pr.sf, lm.geometry.cell_volumes, pr.phiH,
                pr.g, pr.p, pr.bc.p_kind, pr.bc.p_value, phi, grad, U, HbyA, rAU, pr.axes,
                lm.n_owned)
        if split:
            kern(*args, 0, ni // 3, False, *extra)
        kern(*args, ni // 3 if split else 0, ni, True, *extra)
        got[name] = (phi, grad, U)
    for a, b in zip(got["serial"], got["blocks"], strict=True):
        assert np.isfinite(a).all()
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("nt", [1, 3])
@pytest.mark.parametrize("f0", [0, 100])
def test_fluxes_and_system_on_face_blocks_is_the_serial_kernel(cavity, nt, f0):
    """Predicted fluxes and the pressure system to the bit; the faces before ``f0`` read as
    predicted before (a thread recomputing a face from an earlier block reads them too)."""
    pr, lm, HbyA, rAU = _inputs(cavity)
    fb = FaceBlocks(pr.owner, lm.neighbour, lm.n_cells, nt).arrays()
    before = np.random.default_rng(5).random((2, f0))
    got = {}
    for name, kern, extra in (("serial", P.fluxes_and_system, ()),
                              ("blocks", P.fluxes_and_system_blocks, fb)):
        phiH, g = np.full_like(pr.phiH, np.nan), np.full_like(pr.g, np.nan)
        phiH[:f0], g[:f0] = before
        diag, rhs = np.full(lm.n_cells, np.nan), np.full(lm.n_cells, np.nan)
        kern(pr.owner, lm.neighbour, pr.fc.weight, pr.sf, pr.fc.gdiff, HbyA, rAU,
             pr.bc.u_kind, pr.bc.u_value, pr.bc.p_kind, pr.bc.p_value, phiH, g, f0, lm.n_cells,
             diag, rhs, *extra)
        got[name] = (phiH, g, diag, rhs)
    for a, b in zip(got["serial"], got["blocks"], strict=True):
        assert np.isfinite(a).all()
        np.testing.assert_array_equal(a, b)



@pytest.fixture(scope="module")
def channel():
    """A fixed-pressure outlet: boundary couplings in the right-hand side."""
    sets = ["mesh.cells=[12,5,1]", "solver.algorithm=piso", "output.fields=false",
            "output.plots=false"]
    run = setup(load_case("channel", sets), MPI.COMM_SELF, 1, lambda *a, **k: None)
    run.solver.step()
    return run


@pytest.mark.parametrize("case", ["cavity", "channel"])
@pytest.mark.parametrize("f0", [0, 40])
def test_fluxes_and_rhs_is_the_whole_kernel_with_its_coupling(case, f0, request):
    """PISO's later correctors: with ``g`` from the first (the same V/A), the fluxes and the
    right-hand side alone equal the whole kernel's to the bit, the faces before ``f0``
    predicted while the exchange flew; ``g`` is read, not written."""
    run = request.getfixturevalue(case)
    pr, lm, HbyA, rAU = _inputs(run)
    assert (pr.bc.p_kind == P.FIXED).any() == (case == "channel")
    fc, n = pr.fc, lm.n_cells
    phiH, g = np.full_like(pr.phiH, np.nan), np.full_like(pr.g, np.nan)
    P.predicted_fluxes(pr.owner, lm.neighbour, fc.weight, pr.sf, fc.gdiff, HbyA, rAU,
                       pr.bc.u_kind, pr.bc.u_value, pr.bc.p_kind, phiH, g, 0, f0, False)
    diag, rhs = np.full(n, np.nan), np.full(n, np.nan)
    P.fluxes_and_system(pr.owner, lm.neighbour, fc.weight, pr.sf, fc.gdiff, HbyA, rAU,
                        pr.bc.u_kind, pr.bc.u_value, pr.bc.p_kind, pr.bc.p_value, phiH, g, f0,
                        n, diag, rhs)
    phiH2, rhs2 = np.full_like(phiH, np.nan), np.full(n, np.nan)
    phiH2[:f0] = phiH[:f0]  # predicted while the exchange flew
    g2 = g.copy()
    P.fluxes_and_rhs(pr.owner, lm.neighbour, fc.weight, pr.sf, fc.gdiff, HbyA, rAU,
                     pr.bc.u_kind, pr.bc.u_value, pr.bc.p_kind, pr.bc.p_value, phiH2, g2, f0,
                     n, rhs2)
    assert np.isfinite(rhs).all()
    np.testing.assert_array_equal(phiH2, phiH)
    np.testing.assert_array_equal(rhs2, rhs)
    np.testing.assert_array_equal(g2, g)
