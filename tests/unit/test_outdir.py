"""Output folders: what --force may replace, the lock that keeps two runs apart, and writes
that fail (full disk, read-only folder) as one line with nothing half-written left."""

from __future__ import annotations

import errno
import io
import json
import os
import subprocess
import sys
import time

import pytest

from haloflow.cli import main as cli_main
from haloflow.run import RunError
from haloflow.run.outdir import LOCK, MARKER, prepare_outdir, record, release
from tests.limited import REPO, haloflow, one_line

QUICK = ["--set", "mesh.cells=[4,4,1]", "--steps", "1", "--quiet", "--set",
         "output.plots=false"]


def test_force_needs_the_marker_not_a_case_toml(tmp_path):
    out = tmp_path / "looks_like_a_run"
    out.mkdir()
    for name in ("case.toml", "summary.json", "notes.txt"):
        (out / name).write_text("mine")
    with pytest.raises(RunError, match=f"no {MARKER} file"):
        prepare_outdir(out, force=True)
    assert sorted(p.name for p in out.iterdir()) == ["case.toml", "notes.txt", "summary.json"]


def test_force_removes_what_the_previous_run_wrote_and_follows_no_link(tmp_path):
    out, precious = tmp_path / "run", tmp_path / "precious"
    precious.mkdir()
    (precious / "data.txt").write_text("keep")
    prepare_outdir(out, force=False)
    release(out)
    assert (out / MARKER).is_file() and not (out / LOCK).exists()
    (out / "old.csv").write_text("from the last run")
    (out / "fields").mkdir()
    (out / "fields" / "link").symlink_to(precious)  # a link out of the folder
    (out / "outside").symlink_to(precious)
    record(out)  # what the run writes at its end: the manifest of its files
    prepare_outdir(out, force=True)
    release(out)
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "plots"]
    assert (precious / "data.txt").read_text() == "keep"


def test_a_marker_that_is_a_link_is_not_a_marker(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (tmp_path / "elsewhere").write_text("{}")
    (out / MARKER).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(RunError, match="not a folder haloflow made"):
        prepare_outdir(out, force=True)


def test_the_lock_refuses_a_second_run_and_a_dead_one_is_taken_over(tmp_path):
    out = tmp_path / "run"
    prepare_outdir(out, force=False)  # this process holds the lock
    with pytest.raises(RunError, match="in use by another haloflow run"):
        prepare_outdir(out, force=True)
    release(out)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    (out / LOCK).write_text(json.dumps({"pid": int(dead.stdout), "host": os.uname().nodename}))
    prepare_outdir(out, force=True)  # stale: its process is gone
    assert json.loads((out / LOCK).read_text())["pid"] == os.getpid()
    release(out)
    assert not (out / LOCK).exists()


def test_two_runs_into_one_folder(tmp_path):
    """The second run started while the first writes is refused; the first completes and
    releases the folder."""
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO), "NUMBA_NUM_THREADS": "1"}
    # long enough (a few seconds of steps, none ending it early) that the second run's
    # start-up surely falls inside it
    first = subprocess.Popen([sys.executable, "-m", "haloflow", "run", "-o", str(out),
                              "--set", "mesh.cells=[16,16,1]", "--steps", "8000", "--quiet",
                              "--set", "solver.steady_tol=0", "--set", "solver.end_time=1e9",
                              "--set", "output.plots=false"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):
            if (out / LOCK).exists() or first.poll() is not None:
                break
            time.sleep(0.05)
        assert (out / LOCK).exists(), first.communicate()
        msg = one_line(haloflow("run", "-o", out, "--force", *QUICK))
        assert "in use by another haloflow run" in msg
        assert first.wait(timeout=300) == 0, first.stderr.read()
    finally:
        if first.poll() is None:
            first.kill()
    assert (out / "summary.json").exists() and not (out / LOCK).exists()


def test_a_full_disk_is_one_line_naming_the_file(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    real_open = io.open

    def full(file, mode="r", *args, **kw):
        if "w" in mode and str(file).startswith(str(out)) and str(file).endswith(".csv"):
            f = real_open(file, mode, *args, **kw)
            f.close()  # created, then the disk is full: a partial file is left behind
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(file))
        return real_open(file, mode, *args, **kw)

    monkeypatch.setattr(io, "open", full)
    monkeypatch.setattr("builtins.open", full)
    with pytest.raises(SystemExit) as e:
        cli_main(["run", "-o", str(out), *QUICK])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err
    assert str(out) in err and ".csv: cannot write" in err
    left = sorted(p.name for p in out.rglob("*"))
    assert not [n for n in left if n.endswith((".csv", ".tmp"))], left
    assert LOCK not in left and "summary.json" not in left


def test_a_read_only_place_is_one_line(tmp_path):
    msg = one_line(haloflow("run", "-o", "/proc/no_such_dir/run", *QUICK))
    assert "/proc/no_such_dir" in msg and "cannot" in msg


def test_mesh_convert_refuses_to_overwrite(tmp_path):
    out = tmp_path / "m.vtu"
    out.write_text("a file of the user's")
    msg = one_line(haloflow("mesh", "convert", "cavity", out))
    assert str(out) in msg and "--force" in msg
    assert out.read_text() == "a file of the user's"
    res = haloflow("mesh", "convert", "cavity", out, "--force")
    assert res.returncode == 0, res.stderr
    assert out.read_text().startswith("<?xml") and not list(tmp_path.glob("*.tmp"))


def test_netpipe_output_refuses_to_overwrite(tmp_path):
    out = tmp_path / "np.out"
    (tmp_path / "np.json").write_text("{}")
    msg = one_line(haloflow("netpipe", "--connect", "127.0.0.1:9", "-o", out))
    assert "np.json exists" in msg and "--force" in msg
