"""Fuzzing the inputs a user hands haloflow: ``--set`` values, case files and small mesh files.

Each example runs ``haloflow run`` in a subprocess under a memory limit and a timeout
(tests/limited.py), and must end one of two ways: a valid run (exit 0, one step on a tiny
mesh) or one line on stderr and exit 2.  A traceback, another exit code, a second line, a
hang or an allocation past the limit fails.  Hypothesis draws the inputs from a fixed seed
(``derandomize``) and a bounded number of examples, so the test is repeatable and takes about
a minute on a loaded two-core machine.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from haloflow.case import CASES_DIR
from tests.limited import haloflow
from tests.unit.test_mesh_io import CASE, FOAM, GMSH

FAST = ["--steps", "1", "--quiet", "--set", "output.fields=false", "--set",
        "output.plots=false", "--set", "postprocess.cavity=false"]
TINY = ["--set", "mesh.cells=[3,3,1]"]

# HALOFLOW_FUZZ_EXAMPLES=N: a longer campaign with fresh random inputs (default: 10, seeded)
_LONG = int(os.environ.get("HALOFLOW_FUZZ_EXAMPLES", "0"))
FUZZ = settings(max_examples=_LONG or 10, deadline=None, derandomize=not _LONG, database=None,
                suppress_health_check=list(HealthCheck))

# anything a shell can pass: no NUL (argv cannot hold one), control characters included
CHARS = st.characters(exclude_characters="\x00", exclude_categories=("Cs",))

KEYS = ["mesh.cells", "mesh.lengths", "mesh.grading", "mesh.origin", "mesh.type", "mesh.file",
        "physics.nu", "solver.dt", "solver.end_time", "solver.n_correctors",
        "solver.max_steps", "solver.time_scheme", "solver.convection", "solver.algorithm",
        "solver.pressure.tol", "solver.pressure.max_iter", "solver.pressure.method",
        "solver.momentum.method", "solver.n_nonorth_correctors", "boundary.top.U",
        "boundary.top.type", "boundary.left.type", "parallel.halo", "parallel.threads",
        "parallel.decomposition", "output.log_every", "initial.type", "initial.U",
        "postprocess.cavity", "mesh.periodic"]

# values near and past every edge: zero, negative, 2**31, 2**63, subnormal, huge, NaN
EDGE_NUMBERS = ["0", "-1", "1", "2", "3", "100", "101", "2147483648", "9223372036854775808",
                "-9223372036854775809", "1e30", "1e31", "1e-30", "1e-31", "5e-324", "1e-320",
                "1e308", "-1e308", "nan", "inf", "-inf", "0.5", "1.0", "-0.0"]


def _toml_string(s: str) -> str:
    out = []
    for c in s:
        out.append(c if c.isprintable() and c not in '"\\' else f"\\u{ord(c):04x}")
    return '"' + "".join(out) + '"'


scalars = st.one_of(
    st.sampled_from(EDGE_NUMBERS),
    st.integers(-3, 12).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(
        lambda x: repr(x) if x == x and abs(x) != float("inf") else str(x).lower()),
    st.text(CHARS, max_size=8).map(_toml_string),
    st.sampled_from(["true", "false", "packed", "wall", '"file"', '"box"', "{a = 1}"]),
)
values = st.one_of(
    scalars,
    st.lists(scalars, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
    st.lists(st.integers(1, 6).map(str), min_size=3, max_size=3).map(
        lambda xs: "[" + ",".join(xs) + "]"),
    st.integers(1, 3000).map(lambda k: "[" * k + "]" * k),
    st.text(CHARS, max_size=12),  # a bare word, control characters included
)
keys = st.one_of(st.sampled_from(KEYS),
                 st.text(CHARS, min_size=1, max_size=12).map(lambda s: "boundary." + s))


def judge(res_or_none, out: Path, what: str) -> None:
    """Exit 0 with a summary, or exit 2 with one printable line; nothing else."""
    res = res_or_none
    assert res is not None, f"{what}: hung (timeout)"
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    if res.returncode == 0:
        assert (out / "summary.json").exists() and "Traceback" not in res.stderr, what
        return
    assert res.returncode == 2, f"{what}: exit {res.returncode}\n{res.stderr[-3000:]}"
    assert len(lines) == 1, f"{what}: {len(lines)} lines\n{res.stderr[-3000:]}"
    assert lines[0].startswith("haloflow: error") and lines[0].isprintable(), (what, lines)


def run(*args, cwd=None):
    """``haloflow run ARGS`` in a temporary folder; None if it hung."""
    try:
        return haloflow("run", *args, timeout=90, cwd=cwd)
    except subprocess.TimeoutExpired:
        return None


@FUZZ
@given(st.lists(st.tuples(keys, values), min_size=1, max_size=3))
def test_fuzz_set_values(overrides):
    sets = [x for k, v in overrides for x in ("--set", f"{k}={v}")]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        judge(run("cavity", "-o", out, *TINY, *sets, *FAST, cwd=tmp), out, f"--set {sets}")


def _mutate(text: str, data) -> str:
    """One of: a token replaced by a drawn value, a line dropped or repeated, a cut."""
    tokens = [m.span() for m in re.finditer(r"[^\s()\[\]{};,=]+", text)]
    op = data.draw(st.sampled_from(["token", "token", "drop", "repeat", "cut"]))
    if op == "token" and tokens:
        a, b = tokens[data.draw(st.integers(0, len(tokens) - 1))]
        return text[:a] + data.draw(values) + text[b:]
    lines = text.splitlines(keepends=True)
    k = data.draw(st.integers(0, max(len(lines) - 1, 0)))
    if op == "drop":
        return "".join(lines[:k] + lines[k + 1:])
    if op == "repeat":
        return "".join(lines[: k + 1] + lines[k:])
    return text[: data.draw(st.integers(0, len(text)))]


@FUZZ
@given(st.data())
def test_fuzz_case_files(data):
    text = (CASES_DIR / "cavity.toml").read_text()
    for _ in range(data.draw(st.integers(1, 3))):
        text = _mutate(text, data)
    with tempfile.TemporaryDirectory() as tmp:
        case, out = Path(tmp) / "case.toml", Path(tmp) / "out"
        case.write_text(text)
        judge(run(case, "-o", out, *TINY, *FAST, cwd=tmp), out, f"case file\n{text}")


MESH_FILES = [("foam", "constant/polyMesh/owner"), ("foam", "constant/polyMesh/neighbour"),
              ("foam", "constant/polyMesh/points"), ("foam", "constant/polyMesh/faces"),
              ("foam", "constant/polyMesh/boundary"), ("foam", "system/blockMeshDict"),
              ("gmsh", "tri2d.msh"), ("gmsh", "mixed2d_v2.msh")]


@FUZZ
@given(st.data())
def test_fuzz_mesh_files(data):
    import shutil

    kind, name = data.draw(st.sampled_from(MESH_FILES))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if kind == "foam":
            mesh = tmp / "mesh"
            shutil.copytree(FOAM["ascii"], mesh)
            if name.startswith("system"):  # read the dictionary, not the polyMesh
                shutil.rmtree(mesh / "constant")
        else:
            mesh = tmp / "mesh.msh"
            shutil.copy(GMSH / name, mesh)
        target = mesh / name if kind == "foam" else mesh
        text = target.read_text()
        for _ in range(data.draw(st.integers(1, 2))):
            text = _mutate(text, data)
        target.write_text(text)
        case = tmp / "case.toml"
        case.write_text(CASE.format(file=mesh) if kind == "foam" else _gmsh_case(mesh))
        out = tmp / "out"
        judge(run(case, "-o", out, *FAST, cwd=tmp), out, f"{name} mutated to\n{text[:2000]}")


def _gmsh_case(mesh: Path) -> str:
    """The patches of tri2d.msh (inlet, outlet, walls) or mixed2d_v2.msh (left, right,
    walls); front and back come from the extrusion."""
    inlet, outlet = ("left", "right") if "mixed" in Path(mesh).name else ("inlet", "outlet")
    return CASE.format(file=mesh).split("[boundary.top]")[0] + (
        f'[boundary.{inlet}]\ntype = "inlet"\nU = [1.0, 0.0, 0.0]\n[boundary.{outlet}]\n'
        'type = "outlet"\n[boundary.walls]\ntype = "wall"\n[boundary.front]\ntype = "empty"\n'
        '[boundary.back]\ntype = "empty"\n[solver]\ndt = 0.01\nend_time = 1.0\n')


@pytest.mark.parametrize("name", ["tri2d.msh", "mixed2d_v2.msh"])
def test_fuzz_baseline_runs(tmp_path, name):
    """Unmutated, the Gmsh cases run (the polyMesh one: test_fuzz_reproducers): the fuzz
    cases start from good input."""
    case = tmp_path / "case.toml"
    case.write_text(_gmsh_case(GMSH / name))
    res = run(case, "-o", tmp_path / "out", *FAST)
    assert res is not None and res.returncode == 0, res and res.stderr
