"""The command line: help, bad input as one-line errors with exit 2, outputs never clobbered."""

from __future__ import annotations

import subprocess
import sys

import pytest

QUICK = ["--set", "mesh.cells=[6,6,1]", "--steps", "2", "--set", "output.plots=false", "--quiet"]


def haloflow(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "haloflow", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def one_line_error(res, code=2):
    assert res.returncode == code, (res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


def test_bad_thermal_input_exits_2(tmp_path):
    """One of the thermal checks (all raise the case errors tests/unit/test_energy.py
    covers) end to end: one line, exit 2, nothing written."""
    msg = one_line_error(haloflow("run", "heated_cavity", "--set", "physics.Ra=0", "-o",
                                  str(tmp_path / "o")))
    assert "physics.Ra: expected a positive number" in msg
    assert not (tmp_path / "o").exists()


def test_help():
    for args in ([], ["--help"], ["run", "--help"]):
        res = haloflow(*args)
        assert res.returncode == 0
        assert "haloflow" in res.stdout
    assert "--set" in haloflow("run", "--help").stdout


def test_bad_case_key_names_file_and_key(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text((
        __import__("haloflow.case", fromlist=["CASES_DIR"]).CASES_DIR / "cavity.toml"
    ).read_text().replace("dt = 0.1 ", "dtt = 0.1 "))
    msg = one_line_error(haloflow("run", str(bad), "-o", str(tmp_path / "o")))
    assert "bad.toml" in msg and "solver.dtt" in msg
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("args, words", [
    (["no_such_case"], ["no_such_case", "cavity"]),
    (["cavity", "--set", "solver.dt=-1"], ["solver.dt", "positive"]),
    (["cavity", "--set", "nonsense"], ["nonsense"]),
    (["cavity", "--threads", "0"], ["--threads"]),
    (["cavity", "--threads", "4096"], ["--threads"]),
    (["cavity", "--steps", "-1"], ["--steps -1", "0 for no limit"]),
])
def test_bad_arguments(tmp_path, args, words):
    msg = one_line_error(haloflow("run", *args, "-o", str(tmp_path / "o")))
    for w in words:
        assert w in msg, msg


def test_outdir_is_never_clobbered(tmp_path):
    precious = tmp_path / "mine"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    for extra in ([], ["--force"]):
        msg = one_line_error(haloflow("run", "-o", str(precious), *QUICK, *extra))
        assert str(precious) in msg
    assert (precious / "thesis.tex").read_text() == "years of work"
    assert sorted(p.name for p in precious.iterdir()) == ["thesis.tex"]


def test_rerun_with_force_and_default_outdir(tmp_path):
    out = tmp_path / "run"
    assert haloflow("run", "-o", str(out), *QUICK).returncode == 0
    one_line_error(haloflow("run", "-o", str(out), *QUICK))
    assert haloflow("run", "-o", str(out), "--force", *QUICK).returncode == 0
    # without -o: runs/cavity, then runs/cavity-2
    for _ in range(2):
        assert haloflow("run", *QUICK, cwd=tmp_path).returncode == 0
    assert (tmp_path / "runs" / "cavity" / "summary.json").exists()
    assert (tmp_path / "runs" / "cavity-2" / "summary.json").exists()


@pytest.mark.parametrize("args", [["run", "--bogus"], ["frobnicate"], ["run", "--steps", "x"]])
def test_usage_errors_are_one_line(args):
    msg = one_line_error(haloflow(*args))
    assert msg.startswith("haloflow: error:")
