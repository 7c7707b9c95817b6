"""``haloflow predict`` beside a real run: the halos come from partitioning the run's own mesh
with its own method (the exact-partition path), not from a process grid."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from haloflow.case import load_case
from haloflow.cli import main
from haloflow.io.netpipe_file import write_out
from haloflow.mesh import from_case
from haloflow.parallel.decompose import decompose
from haloflow.study import model as M
from haloflow.study.predict import shm_curve


def _predict(capsys, run, out, shm):
    rc = main(["predict", "--profile", str(run), "--network", "gige-tcp", "--ranks", "2,3,4",
               "--shm", str(shm), "--cores-per-node", "1", "-o", str(out)])
    text = capsys.readouterr()
    assert rc == 0, text.err
    return json.loads((out / "predict.json").read_text()), text.out


def test_predict_partitions_the_runs_own_mesh(tmp_path, capsys):
    run = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "haloflow", "run", "backward_step", "-o", str(run),
                          "--steps", "3", "--quiet", "--set", "output.plots=false",
                          "--set", "output.fields=false", "--set", "parallel.decomposition=metis"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    shm = tmp_path / "shm.out"
    n = 2 ** np.arange(0, 23)
    write_out(shm, n, 0.5e-6 + n / 1e10)

    exact, log = _predict(capsys, run, tmp_path / "exact", shm)
    assert exact["exact_partitions"] is True
    assert "partitioning the run's mesh (2976 cells, metis)" in log

    # what the model used is the run's mesh cut by METIS (halo_of_partition itself is
    # checked against LocalMesh in test_model.py): the same 2-rank halo time from it
    case = load_case(str(run / "case.toml"))
    mesh = from_case(case.mesh)
    w = M.Workload.from_profile(json.loads((run / "profile.json").read_text()), "run")
    h = M.halo_of_partition(mesh.owner[: mesh.n_internal], mesh.neighbour,
                            decompose(mesh, 2, "metis"), 2)
    net = M.network("gige-tcp")
    (row,) = [r for r in exact["networks"][0]["rows"] if r["ranks"] == 2]
    assert row["halo_s"] == pytest.approx(M.predict(w, h, net, shm_curve(shm), 1).halo_s,
                                          rel=1e-12)

    # without the case file beside the profile: a process grid, and other halo times
    (run / "case.toml").unlink()
    grid, _ = _predict(capsys, run, tmp_path / "grid", shm)
    assert grid["exact_partitions"] is False
    halo = [[r["halo_s"] for r in d["networks"][0]["rows"]] for d in (exact, grid)]
    assert halo[0] != halo[1]
