"""Case files: defaults, overrides, round trip, and one-line errors that name file and key."""

import tomllib

import pytest
from tomli_w import dumps as _dump

from haloflow.case import Case, builtin_cases, load_case
from tests.case_errors import error

MINIMAL = """\
[mesh]
cells = [4, 4, 1]

[physics]
nu = 0.1

[boundary.left]
type = "wall"
[boundary.right]
type = "wall"
[boundary.bottom]
type = "wall"
[boundary.top]
type = "wall"
U = [1, 0, 0]
[boundary.front]
type = "empty"
[boundary.back]
type = "empty"

[solver]
dt = 0.1
end_time = 1
"""


def write(tmp_path, text, name="my.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_builtin_cavity_with_defaults():
    assert "cavity" in builtin_cases()
    case = load_case("cavity")
    assert isinstance(case, Case)
    assert case.name == "cavity" and case.source.name == "cavity.toml"
    assert case.mesh.type == "box" and case.mesh.cells == (128, 128, 1)
    assert case.mesh.origin == (0.0, 0.0, 0.0)
    assert case.physics.nu == 0.01
    assert case.boundary["top"].U == (1.0, 0.0, 0.0)
    assert case.boundary["left"].type == "wall" and case.boundary["left"].U == (0.0, 0.0, 0.0)
    assert case.boundary["front"].type == "empty" and case.boundary["front"].U is None
    assert case.solver.dt == 0.1 and case.solver.n_correctors == 2
    assert case.solver.pressure.max_iter == 5000 and case.solver.momentum.tol == 1e-8
    assert case.parallel.halo == "aggregated" and case.output.log_every == 20
    assert case.postprocess.cavity is True


def test_minimal_file_gets_defaults(tmp_path):
    case = load_case(write(tmp_path, MINIMAL))
    assert case.name == "my"
    assert case.solver.end_time == 1.0 and isinstance(case.solver.end_time, float)
    assert case.mesh.lengths == (1.0, 1.0, 1.0) and case.mesh.grading == (1.0, 1.0, 1.0)
    assert case.solver.convection == "linear" and case.solver.steady_tol == 1e-5
    assert case.parallel.decomposition == "metis" and case.parallel.threads == 1
    assert case.output.fields is True and case.postprocess.cavity is False
    assert list(case.boundary) == ["left", "right", "bottom", "top", "front", "back"]


def test_outlet_and_inlet(tmp_path):
    text = MINIMAL.replace('left]\ntype = "wall"', 'left]\ntype = "inlet"\nU = [2, 0, 0]')
    text = text.replace('right]\ntype = "wall"', 'right]\ntype = "outlet"')
    case = load_case(write(tmp_path, text))
    assert case.boundary["left"].U == (2.0, 0.0, 0.0) and case.boundary["left"].p is None
    assert case.boundary["right"].p == 0.0 and case.boundary["right"].U is None


def test_overrides():
    case = load_case("cavity", [
        "solver.dt=0.005",
        "mesh.cells=[64, 64, 1]",
        "parallel.decomposition=simple",  # not TOML: taken as a plain string
        "boundary.top.U=[2,0,0]",
        "solver.pressure.tol=1e-9",
        "output.plots = false",
    ])
    assert case.solver.dt == 0.005
    assert case.mesh.cells == (64, 64, 1)
    assert case.parallel.decomposition == "simple"
    assert case.boundary["top"].U == (2.0, 0.0, 0.0)
    assert case.solver.pressure.tol == 1e-9
    assert case.output.plots is False


def test_round_trip(tmp_path):
    case = load_case("cavity", ["solver.dt=0.1", "solver.steady_tol=1.2345678901234567e-7"])
    path = write(tmp_path, case.to_toml(), "again.toml")
    again = load_case(path)
    assert again == case
    assert again.to_dict() == case.to_dict()
    assert again.name == "again"


def test_to_dict_is_plain():
    d = load_case("cavity").to_dict()
    assert d["mesh"]["cells"] == [128, 128, 1]
    assert d["solver"]["pressure"]["method"] == "amg-cg"
    assert d["boundary"]["front"] == {"type": "empty"}


def test_writer_escapes_strings():
    data = {"a": {"s": 'quote " back \\ tab \t nl \n bell \x07 é', "x": [1, 2.5, True]},
            "b c": {"d": {"e": -0.0}}}
    assert tomllib.loads(_dump(data)) == data


@pytest.mark.parametrize("old, new, key, expected", [
    ("dt = 0.1", "dtt = 0.1", "solver.dtt", "expected one of: dt, end_time"),
    ("[solver]", "[solvr]", "solvr", "unknown section"),
    ("dt = 0.1", 'dt = "fast"', "solver.dt",
     'expected a positive number from 1e-30 to 1e+30, got "fast"'),
    ("nu = 0.1", "nu = true", "physics.nu",
     "expected a positive number from 1e-30 to 1e+30, got true"),
    ("dt = 0.1", "dt = -1", "solver.dt", "expected a positive number from 1e-30 to 1e+30, got -1"),
    ("cells = [4, 4, 1]", "cells = [4, 4]", "mesh.cells",
     "expected a list of 3 integers from 1 to 2147483647"),
    ("cells = [4, 4, 1]", "cells = [4, 0, 1]", "mesh.cells", "got [4, 0, 1]"),
    ("end_time = 1", "", "solver.end_time", "required key missing"),
    ('[boundary.front]\ntype = "empty"\n', "", "boundary.front", "has no boundary conditions"),
    ("[solver]", '[boundary.inlet]\ntype = "wall"\n[solver]', "boundary.inlet",
     "its patches are: left, right, bottom, top, front, back"),
    ("end_time = 1", 'end_time = 1\nconvection = "quick"', "solver.convection",
     'expected "upwind", "linear", "linear-upwind" or "cubic", got "quick"'),
    ('[boundary.front]\ntype = "empty"', '[boundary.front]\ntype = "empty"\nU = [0, 0, 0]',
     "boundary.front.U", "not allowed"),
    ('[boundary.left]\ntype = "wall"', '[boundary.left]\ntype = "inlet"', "boundary.left.U",
     "required key missing"),
    ("[mesh]", "[mesh]\ntype = \"gmsh\"", "mesh.type",
     'expected "box", "step", "cylinder" or "file", got "gmsh"'),
    ("end_time = 1", "end_time = 1\nmax_steps = 2.0", "solver.max_steps",
     "expected an integer from 0 to 1000000000000, got 2.0"),
])
def test_bad_file(tmp_path, old, new, key, expected):
    assert old in MINIMAL
    msg = error(write(tmp_path, MINIMAL.replace(old, new, 1)))
    assert msg.startswith(str(tmp_path / "my.toml") + ": ")
    assert key in msg and expected in msg


def test_typo_gets_a_suggestion(tmp_path):
    msg = error(write(tmp_path, MINIMAL.replace("dt = 0.1", "dtt = 0.1")))
    assert "unknown key 'solver.dtt'" in msg and "did you mean 'dt'" in msg


def test_syntax_error_names_the_line(tmp_path):
    msg = error(write(tmp_path, "[mesh]\ncells = [4, 4, 1]\nnu = \n"))
    assert "my.toml: line 3: " in msg


def test_missing_file_and_unknown_builtin(tmp_path):
    msg = error(tmp_path / "nope.toml")
    assert "nope.toml" in msg and "cavity" in msg
    msg = error("no_such_case")
    assert msg.startswith("no_such_case: ")
    assert "built-in cases: backward_step, cavity, channel" in msg


def test_bad_override_value_blames_the_override():
    msg = error("cavity", ["solver.dt=-1"])
    assert msg == ("--set solver.dt=-1: solver.dt: expected a positive number from 1e-30 to "
                   "1e+30, got -1")
    msg = error("cavity", ["solver.pressure.tolerance=1"])
    assert msg.startswith("--set solver.pressure.tolerance=1: unknown key")
    msg = error("cavity", ["boundary.inlet.type=inlet"])
    assert msg.startswith("--set boundary.inlet.type=inlet: boundary.inlet: the mesh has no")
    msg = error("cavity", ["boundary.left.type=inlet"])  # now lacks U
    assert msg.startswith("--set boundary.left.type=inlet: boundary.left.U: required key missing")
    msg = error("cavity", ['solver.dt="x\ny"'])
    assert msg.startswith('--set "solver.dt=\\"x\\ny\\"": solver.dt: expected')


@pytest.mark.parametrize("override", ["solver.dt", "=1", "dt=1", "solver..dt=1", "solver.=1"])
def test_malformed_override(override):
    msg = error("cavity", [override])
    assert msg.startswith(f"--set {override}: expected section.key=VALUE")


def test_override_through_a_value():
    msg = error("cavity", ["solver.dt.x=1"])
    assert msg == "--set solver.dt.x=1: solver.dt is not a table"


def test_file_errors_are_blamed_on_the_file(tmp_path):
    path = write(tmp_path, MINIMAL.replace("dt = 0.1", "dt = 0"))
    msg = error(path, ["solver.end_time=2"])
    assert msg.startswith(str(path)) and "solver.dt" in msg


def test_reading_a_case_loads_no_kernels_mpi_or_plotting():
    """The schema's names come from the registries (halo strategies, solvers, pressure
    methods, patch types, post-processors), read without importing what they name: checking
    a case file stays instant and needs no MPI."""
    import subprocess
    import sys

    code = ("import sys; from haloflow.case import load_case; "
            "[load_case(n) for n in ('cavity', 'cylinder', 'pitzdaily', 'taylor_green')]; "
            "print(sorted(m for m in ('numba', 'mpi4py', 'matplotlib', 'scipy.sparse') "
            "if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"
