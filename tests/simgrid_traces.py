"""Inputs of the SimGrid replay tests: a trace folder as `haloflow trace` writes it, a
NetPIPE .out file of a Hockney network (latency + bytes / bandwidth), and `haloflow predict
--engine simgrid` run on them."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def require_smpirun() -> None:
    """SimGrid's ``smpirun`` on PATH: a failure under CI (which installs it), else a skip
    that says what is missing."""
    if shutil.which("smpirun") is None:
        if os.environ.get("CI"):
            pytest.fail("SimGrid is missing: no smpirun (CI installs libsimgrid-dev)",
                        pytrace=False)
        pytest.skip("SimGrid is missing: no smpirun on PATH (apt-get install libsimgrid-dev)")


def hockney_out(path: Path, lat: float, bw: float) -> Path:
    """A NetPIPE .out file of latency + bytes / bandwidth (no CPU overheads beside it)."""
    lines = []
    for k in range(23):
        n = 2 ** k
        t = lat + n / bw
        lines.append(f"{n:8d} {n * 8 / t / 2**20:14.6f} {t:.12e}")
    path.write_text("\n".join(lines) + "\n")
    return path


def gz_trace(folder: Path, ranks: dict[int, list[str]]) -> Path:
    """rank-R.txt.gz (init, the lines, finalize) and rank-R.json at 1e9 flop/s per rank."""
    folder.mkdir(parents=True)
    for r, lines in ranks.items():
        with gzip.open(folder / f"rank-{r}.txt.gz", "wt") as f:
            f.write("".join(f"{r} {x}\n" for x in ["init", *lines, "finalize"]))
        (folder / f"rank-{r}.json").write_text(json.dumps(
            {"rank": r, "size": len(ranks), "flops_per_s": 1e9, "calls": {}, "bytes": {}}))
    return folder


def predict(args: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    """`haloflow predict --engine simgrid ARGS` from the repository root."""
    return subprocess.run([sys.executable, "-m", "haloflow", "predict", "--engine", "simgrid",
                           *args], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=env)
