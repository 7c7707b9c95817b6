"""The kept-up jobs of ``haloflow_mpi`` (``jobs.py``): a command's output, exit status and
files are those of a fresh job; a job serves one command after another, and one that
failed a command is not used again."""

from __future__ import annotations

import json

import pytest

from tests.mpi import conftest

QUICK = ["--set", "mesh.cells=[8,8,1]", "--steps", "2", "--set", "output.plots=false"]


def _job_pid(n: int) -> int:
    return conftest._KEPT[0].jobs[n].proc.pid


@pytest.mark.mpi
def test_kept_up_jobs_run_commands_one_after_another(haloflow_mpi, tmp_path):
    runs = {}
    for name in ("a", "b"):
        res = haloflow_mpi(2, "run", "cavity", "-o", str(tmp_path / name), *QUICK)
        assert res.returncode == 0, res.stderr
        assert "Ghia et al. (1982)" in res.stdout  # rank 0's report
        runs[name] = (_job_pid(2), json.loads((tmp_path / name / "summary.json").read_text()))
    assert runs["a"][0] == runs["b"][0]  # the same job
    assert runs["a"][1]["ranks"] == runs["b"][1]["ranks"] == 2
    assert runs["a"][1]["steps"] == runs["b"][1]["steps"] == 2
    # a bad key: the one-line error and exit status 2, as from a fresh job
    res = haloflow_mpi(2, "run", "cavity", "-o", str(tmp_path / "bad"), *QUICK,
                       "--set", "physics.no_such_key=1")
    assert res.returncode == 2
    assert res.stderr.count("haloflow: error:") == 1 and "no_such_key" in res.stderr
    assert "Traceback" not in res.stderr
    assert 2 not in conftest._KEPT[0].jobs  # that job ended: the next command gets another
    res = haloflow_mpi(2, "run", "cavity", "-o", str(tmp_path / "c"), *QUICK)
    assert res.returncode == 0, res.stderr
    assert _job_pid(2) != runs["a"][0]
