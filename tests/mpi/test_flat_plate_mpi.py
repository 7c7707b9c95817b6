"""Spalart-Allmaras on a small flat plate: 1 and 3 ranks (overlapped exchanges) agree to
1e-8 after a few SIMPLE iterations (nu-tilde and the face viscosity included), and the
summary carries the flat_plate block.  (A restart equal to the uninterrupted run:
tests/unit/test_spalart_allmaras.py; restarts on another rank count are the checkpoint
tests' business, the closure's fields being saved in global order like every other.)"""

from __future__ import annotations

import json

import numpy as np
import pytest

from haloflow.io.checkpoint import read_arrays
from tests.unit.test_spalart_allmaras import small_plate

TIGHT = ["--set", "solver.pressure.tol=1e-12", "--set", "solver.momentum.tol=1e-12",
         "--set", "output.plots=false", "--set", "output.fields=false", "--quiet"]


def _ok(res):
    assert res.returncode == 0, f"--- stdout ---\n{res.stdout}\n--- stderr ---\n{res.stderr}"


def _at(d, step):
    return read_arrays(str(d / "checkpoint" / f"step-{step:09d}.ckpt"))[1]


def _close(a, b, tol):
    for name in b:
        scale = max(np.abs(b[name]).max(), 1e-30)
        assert np.abs(a[name] - b[name]).max() <= tol * scale, (name, tol)


@pytest.mark.mpi
def test_flat_plate_one_and_three_ranks(haloflow_mpi, tmp_path):
    mesh = ["--set", f"mesh.file={small_plate(tmp_path)}"]
    ref = {}
    for n, strategy in ((1, "aggregated"), (3, "overlap")):
        ref[n] = tmp_path / f"n{n}"
        _ok(haloflow_mpi(n, "run", "flat_plate", "-o", str(ref[n]), *mesh, *TIGHT, "--steps",
                         "8", "--set", "output.checkpoint_every=8", "--halo", strategy,
                         timeout=240))
    s = json.loads((ref[3] / "summary.json").read_text())
    assert s["ranks"] == 3 and s["steps"] == 8
    fp = s["flat_plate"]
    assert fp["cf_097"] > 0 and fp["n_compared"] > 0 and fp["max_rel_error"] is not None
    one, three = _at(ref[1], 8), _at(ref[3], 8)
    assert {"U", "p", "nu_tilde", "nu_face"} <= set(one) and set(one) == set(three)
    assert one["nu_tilde"].max() > 3 * 2e-7  # the model has produced eddy viscosity
    _close(three, one, 1e-8)
