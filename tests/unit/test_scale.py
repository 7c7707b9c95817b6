"""``haloflow scale``: one-line argument errors, dry runs, a real tiny sweep, failures recorded,
and the report re-made from a scale.csv alone."""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import pytest

from haloflow.cli import main
from haloflow.study import report
from haloflow.study.scale import read_run
from tests.mpi.conftest import require_mpiexec

pytestmark = pytest.mark.serial  # mpiexec sweeps

MPIEXEC = Path(sys.executable).parent / "mpiexec"
TINY = ["--set", "mesh.cells=[16,16,1]", "--steps", "3"]


def cli(*args) -> int:
    """haloflow's exit code, whether argparse exits or the command returns."""
    try:
        return main(["scale", *args])
    except SystemExit as e:
        return e.code


def one_line_error(capsys, *args) -> str:
    assert cli(*args) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("haloflow: error: "), lines[0]
    return lines[0]


@pytest.mark.parametrize("args, words", [
    (["--ranks", "0"], ["--ranks", "positive"]),
    (["--ranks", "-2"], ["--ranks"]),
    (["--ranks", "1,two"], ["--ranks", "1,two"]),
    (["--threads", "0,1"], ["--threads"]),
    (["--threads", "1.5"], ["--threads"]),
    (["--halo", "packed,carrier-pigeon"], ["carrier-pigeon", "aggregated"]),
    (["--launcher", "srun -n {ranks} -c {cpus}"], ["{cpus}", "{ranks_per_node}"]),
    (["--launcher", "mpirun -n {}"], ["placeholder"]),
    (["--launcher", ""], ["--launcher"]),
    (["--steps", "0"], ["--steps"]),
    (["--set", "nonsense"], ["nonsense"]),
    (["--set", "solver.dt=-1"], ["solver.dt"]),
])
def test_bad_arguments(capsys, tmp_path, args, words):
    msg = one_line_error(capsys, "cavity", *args, "-o", str(tmp_path / "s"), "--dry-run")
    for w in words:
        assert w in msg, msg
    assert not (tmp_path / "s").exists()


def test_unknown_case(capsys, tmp_path):
    msg = one_line_error(capsys, "no_such_case", "-o", str(tmp_path / "s"))
    assert "no_such_case" in msg and "cavity" in msg


def test_outdir_must_be_new_or_empty(capsys, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    assert "not empty" in one_line_error(capsys, "cavity", "-o", str(mine))
    assert "not a directory" in one_line_error(capsys, "cavity", "-o", str(mine / "thesis.tex"))
    assert [p.name for p in mine.iterdir()] == ["thesis.tex"]
    assert (mine / "thesis.tex").read_text() == "years of work"


def test_dry_run_prints_commands_and_creates_nothing(capsys, tmp_path):
    out = tmp_path / "sweep"
    code = cli("cavity", "--nodes", "1,2", "--ranks", "2,4", "--threads", "1,2",
               "--halo", "packed", "--launcher", "srun -N {nodes} --ntasks-per-node "
               "{ranks_per_node} -c {threads}", "-o", str(out), "--dry-run", *TINY)
    assert code == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if " -m haloflow run " in ln]
    assert len(lines) == 8
    first, last = lines[0], lines[-1]
    assert first.startswith("NUMBA_NUM_THREADS=1 ")
    assert "srun -N 1 --ntasks-per-node 2 -c 1 " in first
    assert f"-o {out}/runs/1x2x1-packed " in first
    for words in ("--steps 3", "--threads 1", "--halo packed", "--quiet",
                  "--set output.fields=false", "--set output.plots=false",
                  "--set 'mesh.cells=[16,16,1]'"):
        assert words in first, first
    assert "srun -N 2 --ntasks-per-node 2 -c 2 " in last and "runs/2x2x2-packed" in last
    assert last.startswith("NUMBA_NUM_THREADS=2 ")
    assert not out.exists()


def test_dry_run_default_launcher_is_the_venvs_mpiexec(capsys, tmp_path):
    assert cli("cavity", "--ranks", "3", "-o", str(tmp_path / "s"), "--dry-run") == 0
    run = [ln for ln in capsys.readouterr().out.splitlines() if "haloflow run" in ln]
    assert run and f" {MPIEXEC} -n 3 {sys.executable} -m haloflow run cavity " in run[0]


@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory):
    require_mpiexec()  # a failure under CI
    out = tmp_path_factory.mktemp("scale") / "sweep"
    code = cli("cavity", "--ranks", "1,2", "--threads", "1", "--halo", "packed,aggregated",
               "-o", str(out), *TINY)
    return code, out


@pytest.mark.mpi
def test_tiny_sweep(tiny_sweep):
    code, out = tiny_sweep
    assert code == 0
    with open(out / "scale.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == report.COLUMNS
    assert sorted(r["config"] for r in rows) == [
        "1x1x1-aggregated", "1x1x1-packed", "1x2x1-aggregated", "1x2x1-packed"]
    for r in rows:
        assert r["status"] == "ok", r
        # profiles leave out the first of the 3 steps (one-time set-up)
        assert float(r["s_per_step"]) > 0 and int(r["steps"]) == 2 and int(r["cells"]) == 256
        assert int(r["cores"]) == int(r["ranks"]) * int(r["threads"])
        assert float(r["cells_per_core"]) == 256 / int(r["cores"])
        assert float(r["p_iters_per_step"]) > 0
        if r["ranks"] == "1":
            assert float(r["speedup"]) == 1.0 and float(r["efficiency"]) == 1.0
        else:
            assert float(r["comm_fraction"]) > 0
    md = (out / "report.md").read_text()
    pngs = re.findall(r"\]\((plots/[^)]+\.png)\)", md)
    assert len(pngs) == 5
    for p in pngs:
        assert (out / p).stat().st_size > 1000
    assert "| 1x2x1-packed |" in md
    assert (out / "runs" / "1x2x1-packed" / "profile.json").exists()


@pytest.mark.mpi
def test_read_run_on_its_own(tiny_sweep):
    _, out = tiny_sweep
    row = read_run(out / "runs" / "1x2x1-aggregated")
    assert row["ranks"] == 2 and row["halo"] == "aggregated" and row["status"] == "ok"
    parts = sum(row[f"{p}_s_per_step"] or 0.0 for p in report.PHASES)
    assert 0 < parts <= row["s_per_step"] * 1.01


@pytest.mark.mpi
def test_failed_configuration_is_recorded_and_sweep_goes_on(capsys, tmp_path):
    require_mpiexec()  # a failure under CI
    launcher = tmp_path / "launch.sh"
    launcher.write_text('if [ "$1" = 2 ]; then echo "launch: no slots for 2 ranks" >&2; '
                        'exit 7; fi\nshift; exec "$@"\n')
    out = tmp_path / "sweep"
    code = cli("cavity", "--ranks", "2,1", "--halo", "packed", "--no-warmup", "-o", str(out),
               "--launcher", f"sh {launcher} {{ranks}} {{mpiexec}} -n {{ranks}}", *TINY)
    assert code == 1
    printed = capsys.readouterr().out
    assert re.search(r"1x2x1 packed +FAILED: exit 7: launch: no slots for 2 ranks", printed)
    rows = {r["config"]: r for r in report.read_csv(out / "scale.csv")}
    assert rows["1x2x1-packed"]["status"] == "failed"
    assert "exit 7" in rows["1x2x1-packed"]["error"]
    assert rows["1x1x1-packed"]["status"] == "ok" and rows["1x1x1-packed"]["s_per_step"] > 0
    assert "FAILED: exit 7" in (out / "report.md").read_text()


def _synthetic(path: Path) -> None:
    """Two strategies on 1..8 cores, one failed configuration; no runs behind it."""
    rows = []
    for halo, base in (("packed", 1.0), ("aggregated", 0.9)):
        for cores in (1, 2, 4, 8):
            t = base / cores + 0.02 * (cores > 1)
            rows.append({"config": f"1x{cores}x1-{halo}", "case": "cavity", "nodes": 1,
                         "ranks_per_node": cores, "ranks": cores, "threads": 1, "cores": cores,
                         "halo": halo, "cells": 65536, "cells_per_core": 65536 / cores,
                         "steps": 20, "s_per_step": t, "comm_fraction": 0.02 * (cores > 1) / t,
                         "imbalance": 1.05, "assemble_s_per_step": 0.3 * t,
                         "solve_U_s_per_step": 0.2 * t, "solve_p_s_per_step": 0.4 * t,
                         "halo_s_per_step": 0.05 * t, "status": "ok", "error": ""})
    rows.append({"config": "1x16x1-packed", "halo": "packed", "cores": 16, "ranks": 16,
                 "threads": 1, "status": "failed", "error": "exit 1: out of memory"})
    report.write_csv(rows, path / "scale.csv")


def test_report_from_synthetic_csv(tmp_path, capsys):
    _synthetic(tmp_path)
    assert report.main([str(tmp_path)]) == 0
    md = (tmp_path / "report.md").read_text()
    for name in ("time_per_step", "speedup", "efficiency", "comm_fraction", "phases"):
        png = tmp_path / "plots" / f"{name}.png"
        assert png.stat().st_size > 1000 and f"(plots/{name}.png)" in md
    assert "| 1x4x1-aggregated | aggregated | 4 | 16384 |" in md
    assert "FAILED: exit 1: out of memory" in md
    rows = {r["config"]: r for r in report.read_csv(tmp_path / "scale.csv")}
    assert rows["1x16x1-packed"]["s_per_step"] is None


def test_report_entry_without_csv(tmp_path, capsys):
    assert report.main([str(tmp_path)]) == 2
    assert "scale.csv" in capsys.readouterr().err
