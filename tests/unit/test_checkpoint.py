"""Checkpoints in one process: what is kept, what a damaged or foreign checkpoint gives
(one line, exit 2), a diverged run's folder, the field series, and Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from haloflow.io.checkpoint import CheckpointError, read_arrays, read_metadata
from tests.limited import REPO, haloflow, one_line

QUICK = ["--set", "mesh.cells=[6,6,1]", "--quiet", "--set", "output.plots=false"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("ckpt") / "run"
    res = haloflow("run", "cavity", "-o", d, *QUICK, "--steps", "10", "--set",
                   "output.checkpoint_every=2", "--set", "output.checkpoint_keep=3")
    assert res.returncode == 0, res.stderr
    return d


def test_the_newest_k_are_kept_and_no_temporary_file_is_left(run_dir):
    names = sorted(p.name for p in (run_dir / "checkpoint").iterdir())
    assert names == [f"step-{k:09d}.ckpt" for k in (6, 8, 10)]
    ck, fields = read_arrays(str(run_dir / "checkpoint" / names[-1]))
    assert (ck.step, ck.n_cells, ck.case_name) == (10, 36, "cavity")
    s = json.loads((run_dir / "summary.json").read_text())
    assert ck.time == s["sim_time"] > 0
    assert fields["U"].shape == (3, 36) and fields["phi"].shape[0] == 1
    assert np.abs(fields["U"]).max() > 0.01
    assert s["status"] == "completed" and s["checkpoints_written"] == 5
    assert s["last_checkpoint"].endswith(names[-1])


def _copy_run(run_dir, tmp_path, damage):
    """A copy of the run whose newest checkpoint ``damage(bytes) -> bytes`` changed."""
    d = tmp_path / "copy"
    (d / "checkpoint").mkdir(parents=True)
    (d / "case.toml").write_bytes((run_dir / "case.toml").read_bytes())
    src = run_dir / "checkpoint" / "step-000000010.ckpt"
    (d / "checkpoint" / src.name).write_bytes(damage(src.read_bytes()))
    return d


@pytest.mark.parametrize("damage, says", [
    (lambda b: b[: len(b) // 2], "truncated"),
    (lambda b: b[:100] + bytes([b[100] ^ 1]) + b[101:], "checksum"),
    (lambda b: b"x" * 64, "no checkpoint header"),
    (lambda b: b[:-40] + b"{" * 24 + b[-16:], "metadata"),
])
def test_a_damaged_checkpoint_is_one_line(run_dir, tmp_path, damage, says):
    d = _copy_run(run_dir, tmp_path, damage)
    line = one_line(haloflow("run", "--restart", d, "-o", tmp_path / "out", "--quiet"))
    assert says in line and "step-000000010.ckpt" in line
    assert not (tmp_path / "out" / "summary.json").exists()


def test_a_checkpoint_of_another_case_is_refused(run_dir, tmp_path):
    line = one_line(haloflow("run", "--restart", run_dir, "-o", tmp_path / "o", "--quiet",
                             "--set", "physics.nu=0.02"))
    assert "another case" in line
    # how far to run may change
    res = haloflow("run", "--restart", run_dir, "-o", tmp_path / "o2", "--quiet",
                   "--steps", "12")
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "o2" / "summary.json").read_text())["steps"] == 12


def test_restart_usage_errors(run_dir, tmp_path):
    assert "give no case" in one_line(haloflow("run", "cavity", "--restart", run_dir))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no checkpoint to restart from" in one_line(haloflow("run", "--restart", empty))


def test_reading_checks_the_file(tmp_path):
    p = tmp_path / "x.ckpt"
    p.write_bytes(b"")
    with pytest.raises(CheckpointError, match="no checkpoint header"):
        read_metadata(str(p))


# Taylor-Green vortices with almost no viscosity at a Courant number over 100 and one
# pressure corrector: the rms speed, below 1 for six steps, passes 1000 times the reference
# speed (1) at step 11 (t = 550); steps 3-5 change the velocity by less than half of itself,
# so the check for 20 unresolved steps in a row cannot end it first
BLOWS_UP = ["--set", "mesh.cells=[16,16,1]", "--set", "physics.nu=1e-8", "--set",
            "solver.dt=50", "--set", "solver.end_time=2000", "--set", "solver.n_correctors=1",
            "--set", "postprocess.taylor_green=false", "--quiet", "--set", "output.plots=false"]


def test_a_diverged_run_says_so_and_keeps_its_last_checkpoint(tmp_path):
    """A run that really blows up: exit 3 with one line saying so, status "diverged", and
    its last checkpoint (every 2 steps) before the blow-up kept, readable and finite."""
    d = tmp_path / "d"
    res = haloflow("run", "taylor_green", "-o", d, *BLOWS_UP,
                   "--set", "output.checkpoint_every=2")
    line = one_line(res, 3)
    assert line.startswith("haloflow: error: solution diverged at t = "), line
    s = json.loads((d / "summary.json").read_text())
    assert s["status"] == "diverged" and s["message"].startswith("solution diverged at t = ")
    assert "rms |U|" in s["message"] and "solver.dt" in s["message"]
    t = float(s["message"].split("t = ")[1].split(" ")[0])
    blown = round(t / 50)  # the step that blew up
    assert 6 <= blown < 20, s["message"]
    last = 2 * ((blown - 1) // 2)  # the last even step it completed
    assert s["last_checkpoint"].endswith(f"step-{last:09d}.ckpt"), (s, blown)
    assert sorted(p.name for p in (d / "checkpoint").iterdir()) == [
        f"step-{k:09d}.ckpt" for k in (last - 2, last)]
    ck, fields = read_arrays(s["last_checkpoint"])
    assert ck.step == last and ck.time == pytest.approx(50 * last, rel=1e-12)
    assert np.isfinite(fields["U"]).all() and np.isfinite(fields["p"]).all()


def test_field_series_and_pvd(tmp_path):
    d = tmp_path / "s"
    res = haloflow("run", "cavity", "-o", d, *QUICK, "--steps", "7", "--set",
                   "output.write_every=3")
    assert res.returncode == 0, res.stderr
    pvd = ET.parse(d / "fields" / "cavity.pvd").getroot()
    sets = pvd.find("Collection").findall("DataSet")
    files = [s.get("file") for s in sets]
    assert files == [f"series/cavity_{k:09d}.pvtu" for k in (3, 6, 7)]
    times = [float(s.get("timestep")) for s in sets]
    assert times == sorted(times) and times[0] > 0
    for f in files:
        assert (d / "fields" / f).is_file()
    assert (d / "fields" / "series" / "cavity_000000003_0.vtu").is_file()


def test_ctrl_c_finishes_the_step_and_writes_a_checkpoint(tmp_path):
    d = tmp_path / "c"
    env = {"PYTHONPATH": str(REPO), "NUMBA_NUM_THREADS": "1"}
    import os

    job = subprocess.Popen([sys.executable, "-m", "haloflow", "run", "cavity", "-o", str(d),
                            "--set", "mesh.cells=[40,40,1]", "--set", "solver.steady_tol=0",
                            "--set", "solver.end_time=1e6", "--set", "output.log_every=1",
                            "--quiet", "--set", "output.plots=false"],
                           env={**os.environ, **env}, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60 and not ((d / "log.txt").exists() and
                                                  "step     10" in (d / "log.txt").read_text()):
            time.sleep(0.1)
        job.send_signal(signal.SIGINT)
        _, err = job.communicate(timeout=30)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 130, err
    assert "interrupted by SIGINT" in err and "--restart" in err
    s = json.loads((d / "summary.json").read_text())
    assert s["status"] == "interrupted"
    read_arrays(s["last_checkpoint"])
