"""``haloflow foam-case``: an OpenFOAM case directory read as a haloflow case.

The case directory here is OpenFOAM's icoFoam ``cavity`` tutorial (v1912) as its files set
it up, on the polyMesh its blockMesh makes (tests/data/icofoam_cavities/cavity).  The mapped
case is checked key by key, then run one step against icoFoam's field (to round-off with
the two options that make haloflow icoFoam's scheme), and every file or setting that cannot
map ends in one line.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from haloflow.case import CaseError, load_case
from haloflow.case.foam_case import read_foam_case
from tests.foam_reference import reference, run

DATA = Path(__file__).resolve().parents[1] / "data" / "icofoam_cavities" / "cavity"
HEAD = """FoamFile
{
    version     2.0;
    format      ascii;
    class       dictionary;
    object      %s;
}
"""
FILES = {
    "system/controlDict": """
application     icoFoam;
startFrom       startTime;
startTime       0;
stopAt          endTime;
endTime         0.5;
deltaT          0.005;
writeControl    timeStep;
writeInterval   20;
""",
    "system/fvSchemes": """
ddtSchemes      { default Euler; }
gradSchemes     { default Gauss linear; grad(p) Gauss linear; }
divSchemes      { default none; div(phi,U) Gauss linear; }
laplacianSchemes { default Gauss linear orthogonal; }
interpolationSchemes { default linear; }
snGradSchemes   { default orthogonal; }
""",
    "system/fvSolution": """
solvers
{
    p { solver PCG; preconditioner DIC; tolerance 1e-06; relTol 0.05; }
    pFinal { $p; relTol 0; }
    U { solver smoothSolver; smoother symGaussSeidel; tolerance 1e-05; relTol 0; }
}
PISO { nCorrectors 2; nNonOrthogonalCorrectors 0; pRefCell 0; pRefValue 0; }
""",
    "constant/transportProperties": "\nnu              0.01;\n",
    "0/U": """
dimensions      [0 1 -1 0 0 0 0];
internalField   uniform (0 0 0);
boundaryField
{
    movingWall { type fixedValue; value uniform (1 0 0); }
    fixedWalls { type noSlip; }
    frontAndBack { type empty; }
}
""",
    "0/p": """
dimensions      [0 2 -2 0 0 0 0];
internalField   uniform 0;
boundaryField
{
    movingWall { type zeroGradient; }
    fixedWalls { type zeroGradient; }
    frontAndBack { type empty; }
}
""",
}


def _case(tmp_path: Path, **changes) -> Path:
    """The tutorial's case directory, with ``changes`` ({file: text or None}) applied."""
    folder = tmp_path / "cavity"
    shutil.copytree(DATA / "constant", folder / "constant")
    files = {**FILES, **{k.replace("__", "/"): v for k, v in changes.items()}}
    for name, text in files.items():
        if text is not None:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(HEAD % Path(name).name + text)
    return folder


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "haloflow", "foam-case", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_cavity_maps_key_by_key(tmp_path):
    case, notes = read_foam_case(_case(tmp_path), tmp_path)
    assert case["mesh"] == {"type": "file", "file": "cavity"}
    assert case["physics"] == {"nu": 0.01}
    assert case["boundary"] == {"movingWall": {"type": "wall", "U": [1.0, 0.0, 0.0]},
                                "fixedWalls": {"type": "wall"},
                                "frontAndBack": {"type": "empty"}}
    s = case["solver"]
    assert (s["algorithm"], s["dt"], s["end_time"], s["n_correctors"]) == ("piso", 0.005, 0.5, 2)
    assert (s["time_scheme"], s["convection"], s["gradient"], s["laplacian"]) == (
        "euler", "linear", "gauss", "uncorrected")
    assert s["pressure"] == {"tol": 1e-6, "rel_tol": 0.05, "final_rel_tol": 0.0}
    assert s["momentum"] == {"tol": 1e-5, "rel_tol": 0.0}
    assert s["n_nonorth_correctors"] == 0 and "initial" not in case
    assert len(notes) == 1 and "normalised residuals" in notes[0]


def test_the_written_case_runs_as_icofoam(tmp_path):
    """One step of the mapped case, with icoFoam's solvers to round-off and the two options
    that give icoFoam's convection and ddtCorr, is icoFoam's field (as the hand-written
    case file of test_icofoam_cavities.py is)."""
    folder = _case(tmp_path)
    out = tmp_path / "cavity.toml"
    res = _cli(folder, "-o", out)
    assert res.returncode == 0, res.stderr
    assert f"wrote {out}" in res.stdout and "not mapped:" in res.stdout
    assert load_case(out).solver.dt == 0.005
    U, p = run(out, 1, "solver.pressure.tol=1e-13", "solver.pressure.rel_tol=0",
               "solver.momentum.tol=1e-13", "solver.implicit_convection=true",
               "solver.ddt_corr=true")
    Uf, _ = reference(DATA, "0.005")
    assert np.abs(U[:2] - Uf).max() <= 1e-9 * np.abs(Uf).max()


def test_references_directives_and_nonuniform_fields(tmp_path):
    """``$internalField`` is looked up, an ``#includeEtc`` is listed as not followed, a
    nonuniform initial field starts from rest and says so, an inlet-outlet pair maps."""
    u = FILES["0/U"].replace("internalField   uniform (0 0 0);",
                             "internalField   nonuniform List<vector> 2((0 0 0) (1 0 0));")
    u = u.replace("boundaryField\n{", "boundaryField\n{\n    #includeEtc \"caseDicts/x\"")
    u = u.replace("movingWall { type fixedValue; value uniform (1 0 0); }",
                  "movingWall { type fixedValue; value $lid; }")
    case, notes = read_foam_case(_case(tmp_path, **{"0__U": "lid uniform (2 0 0);\n" + u}),
                                 tmp_path)
    assert case["boundary"]["movingWall"] == {"type": "wall", "U": [2.0, 0.0, 0.0]}
    assert "initial" not in case
    assert any("#includeEtc" in n for n in notes)
    assert any("nonuniform" in n for n in notes)
    outlet = FILES["0/U"].replace("fixedWalls { type noSlip; }",
                                  "fixedWalls { type inletOutlet; inletValue uniform (0 0 0); "
                                  "value uniform (0 0 0); }")
    p = FILES["0/p"].replace("fixedWalls { type zeroGradient; }",
                             "fixedWalls { type fixedValue; value uniform 2.5; }")
    case, notes = read_foam_case(_case(tmp_path / "b", **{"0__U": outlet, "0__p": p}),
                                 tmp_path)
    assert case["boundary"]["fixedWalls"] == {"type": "outlet", "p": 2.5}
    assert any("inletOutlet as an outlet" in n for n in notes)


BLOCKMESH = """
convertToMeters 0.1;
vertices ((0 0 0) (1 0 0) (1 1 0) (0 1 0) (0 0 0.1) (1 0 0.1) (1 1 0.1) (0 1 0.1));
blocks (hex (0 1 2 3 4 5 6 7) (20 20 1) simpleGrading (1 1 1));
boundary
(
    movingWall { type wall; faces ((3 7 6 2)); }
    fixedWalls { type wall; faces ((0 4 7 3) (2 6 5 1) (1 5 4 0)); }
    frontAndBack { type empty; faces ((0 3 2 1) (4 5 6 7)); }
);
"""


def test_a_simplefoam_case_on_its_blockmeshdict(tmp_path):
    """No polyMesh yet: the patches come from system/blockMeshDict (haloflow meshes it as
    blockMesh would); SIMPLE's settings map, and a relaxation factor OpenFOAM is not given
    is 1 (haloflow's own defaults relax)."""
    folder = _case(tmp_path, **{
        "system__blockMeshDict": BLOCKMESH,
        "system__controlDict": FILES["system/controlDict"].replace("icoFoam", "simpleFoam")
        .replace("endTime         0.5", "endTime 300").replace("deltaT          0.005",
                                                                "deltaT 1"),
        "system__fvSolution": FILES["system/fvSolution"].split("PISO")[0] + """
SIMPLE { nNonOrthogonalCorrectors 1; consistent yes; residualControl { p 1e-2; U 1e-3; } }
relaxationFactors { equations { U 0.9; ".*" 0.9; } }
"""})
    shutil.rmtree(folder / "constant" / "polyMesh")
    case, _ = read_foam_case(folder, folder)
    s = case["solver"]
    assert case["mesh"]["file"] == "."
    assert list(case["boundary"]) == ["movingWall", "fixedWalls", "frontAndBack"]
    assert (s["algorithm"], s["max_iterations"], s["n_nonorth_correctors"]) == ("simple", 300, 1)
    assert (s["consistent"], s["residual_tol"], s["residual_norm"]) == (True, 1e-2, "normalised")
    assert s["relaxation"] == {"p": 1.0, "U": 0.9} and "dt" not in s
    res = _cli(folder)
    assert res.returncode == 0, res.stderr
    assert load_case(folder / "haloflow.toml").solver.relaxation.p == 1.0


@pytest.mark.parametrize("changes, message", [
    ({"system__controlDict": FILES["system/controlDict"].replace("icoFoam", "rhoPimpleFoam")},
     "application rhoPimpleFoam"),
    ({"0__p": FILES["0/p"].replace("movingWall { type zeroGradient; }",
                                   "movingWall { type fixedValue; value uniform 0; }")},
     "patch 'movingWall': U fixedValue with p fixedValue"),
    ({"0__p": None}, "no 0/p"),
    ({"0__U": FILES["0/U"].replace("    fixedWalls { type noSlip; }\n", "")},
     "boundaryField has no entry for patch 'fixedWalls'"),
    ({"constant__transportProperties": "\nnu [0 2 -1 0 0 0 0] -1;\n"}, "nu -1.0"),
    ({"system__controlDict": "\napplication icoFoam;\ndeltaT 0.005;\nendTime 0.5\n"},
     "controlDict: line"),
    ({"0__U": FILES["0/U"].replace("value uniform (1 0 0)", "value uniform (1 0)")},
     "expected 'uniform (x y z)'"),
])
def test_what_cannot_map_is_one_line_and_exit_2(tmp_path, changes, message):
    folder = _case(tmp_path, **changes)
    with pytest.raises(CaseError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_foam_case(folder, tmp_path)
    res = _cli(folder, "-o", tmp_path / "x.toml")
    assert res.returncode == 2 and message in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert not (tmp_path / "x.toml").exists() and not list(tmp_path.glob(".x.*"))


def test_an_existing_file_is_never_overwritten(tmp_path):
    folder = _case(tmp_path)
    out = tmp_path / "mine.toml"
    out.write_text("# the user's\n")
    res = _cli(folder, "-o", out)
    assert res.returncode == 2 and "exists" in res.stderr
    assert out.read_text() == "# the user's\n"
