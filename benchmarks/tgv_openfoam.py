"""The Taylor-Green vortex of ``tgv.py`` in OpenFOAM's pisoFoam, set up as haloflow runs it.

The same periodic box (side 2 pi, ``cells``^3 uniform hexahedra from blockMesh, cyclic pairs
on its three axes), the same initial velocity and pressure (the case's formulas at the cell
centres), nu = 1/1600, the same dt, BDF2 (``backward``), ``Gauss linear`` convection (or
``Gauss cubic`` where haloflow runs ``cubic``) and gradients, ``Gauss linear corrected``
laplacians, PISO with 2 correctors and a momentum predictor; p by GAMG (Gauss-Seidel
smoother) to 1e-7 with relTol 0.01 on the first corrector and 0 on the last, U (and k) by
symmetric Gauss-Seidel to 1e-7, as haloflow's taylor_green_3d.toml asks of its own
solvers.  Closures: ``none`` (laminar), ``wale``,
``smagorinsky`` and ``kEqn`` (OpenFOAM's WALE, Smagorinsky and kEqn, Ck 0.094, Ce 1.048,
Cw 0.325, width ``cubeRootVol``; kEqn starts from k = 1e-5 everywhere, haloflow from the
local equilibrium).  Everything else is pisoFoam's default, ddtCorr included.

The kinetic energy is sampled after every step by function objects (``magSqr`` of U, its
volume average), and the rate ``-dE_k/dt`` is taken from it by central differences, as
haloflow's post-processor does.  Seconds per step are the log's wall clock from the end of
the first step to the end of the last (in whole seconds: none for a run shorter than
``MIN_SPAN``).
"""

from __future__ import annotations

import re
import shutil
import statistics
from pathlib import Path

import numpy as np
from openfoam import HEAD, run_foam

from haloflow.physics.initial import taylor_green_3d

NU = 1.0 / 1600.0
CLOSURES = {"none": None, "wale": "WALE", "smagorinsky": "Smagorinsky", "kEqn": "kEqn"}
MIN_SPAN = 20.0  # s: the log's clock counts whole seconds; a shorter run's time is not kept
K_INIT = 1e-5  # kEqn's k at t = 0: its eddy viscosity, and so its production, need some k

CONTROL = """application pisoFoam;
startFrom startTime;
startTime 0;
stopAt endTime;
endTime {end!r};
deltaT {dt!r};
writeControl runTime;
writeInterval {end!r};
writeFormat binary;
writePrecision 10;
writeCompression off;
timeFormat general;
timePrecision 8;
runTimeModifiable false;
functions
{{
    magSqrU {{ type magSqr; libs ("libfieldFunctionObjects.so"); field U;
              executeControl timeStep; writeControl none; }}
    energy {{ type volFieldValue; libs ("libfieldFunctionObjects.so"); fields (magSqr(U));
             operation volAverage; regionType all; writeFields false;
             writeControl timeStep; writeInterval 1; log false; }}
}}
"""

SCHEMES = """ddtSchemes { default backward; }
gradSchemes { default Gauss linear; }
divSchemes
{
    default none;
    div(phi,U) Gauss {convection};
    div(phi,k) Gauss linear;
    div((nuEff*dev2(T(grad(U))))) Gauss linear;
}
laplacianSchemes { default Gauss linear corrected; }
interpolationSchemes { default linear; }
snGradSchemes { default corrected; }
"""

SOLUTION = """solvers
{
    p { solver GAMG; smoother GaussSeidel; tolerance 1e-7; relTol 0.01; }
    pFinal { $p; relTol 0; }
    "(U|k)(|Final)" { solver smoothSolver; smoother symGaussSeidel; tolerance 1e-7; relTol 0; }
}
PISO { nCorrectors 2; nNonOrthogonalCorrectors 0; momentumPredictor yes;
       pRefCell 0; pRefValue 0; }
"""


def _block_mesh(cells: int) -> str:
    a = repr(float(np.pi))
    corners = [(-1, -1, -1), (1, -1, -1), (1, 1, -1), (-1, 1, -1),
               (-1, -1, 1), (1, -1, 1), (1, 1, 1), (-1, 1, 1)]
    verts = "\n".join("    (" + " ".join(("-" if s < 0 else "") + a for s in c) + ")"
                      for c in corners)
    pairs = [("left", "right", "(0 4 7 3)", "(1 2 6 5)"),
             ("bottom", "top", "(0 1 5 4)", "(3 7 6 2)"),
             ("front", "back", "(0 3 2 1)", "(4 5 6 7)")]
    patches = "".join(
        f"    {m} {{ type cyclic; neighbourPatch {n}; faces ({fm}); }}\n"
        f"    {n} {{ type cyclic; neighbourPatch {m}; faces ({fn}); }}\n"
        for m, n, fm, fn in pairs)
    return (f"convertToMeters 1;\nvertices\n(\n{verts}\n);\n"
            f"blocks ( hex (0 1 2 3 4 5 6 7) ({cells} {cells} {cells}) simpleGrading (1 1 1) );\n"
            f"edges ();\nboundary\n(\n{patches});\nmergePatchPairs ();\n")


def _turbulence(closure: str) -> str:
    model = CLOSURES[closure]
    if model is None:
        return "simulationType laminar;\n"
    return ("simulationType LES;\nLES\n{\n"
            f"    LESModel {model};\n    turbulence on;\n    printCoeffs on;\n"
            "    delta cubeRootVol;\n    cubeRootVolCoeffs { deltaCoeff 1; }\n"
            f"    {model}Coeffs {{ Ck 0.094; Ce 1.048; Cw 0.325; }}\n}}\n")


def _initial(cells: int) -> tuple[np.ndarray, np.ndarray]:
    """Velocity (n, 3) and pressure at blockMesh's cell centres (x fastest, then y, z): the
    case's own initial field (``physics.initial.taylor_green_3d``)."""
    side = 2.0 * np.pi
    c = -np.pi + side / cells * (np.arange(cells) + 0.5)
    z, y, x = (a.ravel() for a in np.meshgrid(c, c, c, indexing="ij"))
    u, v, w, p = taylor_green_3d(x, y, z, 1.0, side, (-np.pi,) * 3)
    return np.column_stack([u, v, w]), p


def _field(dims: str, internal: str) -> str:
    return (f"dimensions {dims};\ninternalField {internal};\n"
            'boundaryField { ".*" { type cyclic; } }\n')


def write_case(root: Path, env: str, cells: int, closure: str, dt: float, end: float,
               ranks: int, convection: str) -> Path:
    """The case, meshed (and decomposed ``simple (ranks 1 1)`` for several ranks);
    ``convection``: the velocity's, ``linear`` or ``cubic``."""
    case = root / f"tgv_{cells}_{closure}_{convection}_openfoam_n{ranks}"
    if case.exists():
        shutil.rmtree(case)
    U, p = _initial(cells)
    vectors = "\n".join(f"({a:.12g} {b:.12g} {c:.12g})" for a, b, c in U)
    scalars = "\n".join(f"{v:.12g}" for v in p)
    u_list = f"nonuniform List<vector> {len(U)}\n(\n{vectors}\n)"
    p_list = f"nonuniform List<scalar> {len(p)}\n(\n{scalars}\n)"
    files = {
        "system/controlDict": ("dictionary", CONTROL.format(end=end, dt=dt)),
        "system/fvSchemes": ("dictionary", SCHEMES.replace("{convection}", convection)),
        "system/fvSolution": ("dictionary", SOLUTION),
        "system/blockMeshDict": ("dictionary", _block_mesh(cells)),
        "system/decomposeParDict": ("dictionary", f"numberOfSubdomains {ranks};\n"
                                    f"method simple;\nsimpleCoeffs {{ n ({ranks} 1 1); }}\n"),
        "constant/transportProperties": ("dictionary",
                                         f"transportModel Newtonian;\nnu {NU!r};\n"),
        "constant/turbulenceProperties": ("dictionary", _turbulence(closure)),
        "0/U": ("volVectorField", _field("[0 1 -1 0 0 0 0]", u_list)),
        "0/p": ("volScalarField", _field("[0 2 -2 0 0 0 0]", p_list)),
        "0/nut": ("volScalarField", _field("[0 2 -1 0 0 0 0]", "uniform 0")),
        "0/k": ("volScalarField", _field("[0 2 -2 0 0 0 0]", f"uniform {K_INIT!r}")),
    }
    for name, (cls, body) in files.items():
        path = case / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(HEAD.format(cls=cls, obj=path.name) + body)
    run_foam(env, case, "blockMesh", case / "log.blockMesh")
    if ranks > 1:
        run_foam(env, case, "decomposePar -force", case / "log.decomposePar")
    return case


def run(case: Path, env: str, ranks: int, mpirun: str) -> dict:
    """pisoFoam on ``case``: the energy samples, their rate, the peak, seconds per step."""
    cmd = "pisoFoam" if ranks == 1 else f"{mpirun} -np {ranks} pisoFoam -parallel"
    log = case / "log.pisoFoam"
    wall = run_foam(env, case, cmd, log)
    text = log.read_text()
    clock = [float(x) for x in re.findall(r"ClockTime = ([0-9.eE+-]+) s", text)]
    cpu = [float(x) for x in re.findall(r"^ExecutionTime = ([0-9.eE+-]+) s", text, re.M)]
    gamg = [int(x) for x in re.findall(r"GAMG:  Solving for p.*No Iterations (\d+)", text)]
    dat = next((case / "postProcessing" / "energy").glob("*/volFieldValue.dat"))
    d = np.loadtxt(dat, comments="#")
    t, ek = d[:, 0], 0.5 * d[:, 1]
    eps = -np.gradient(ek, t)
    i = int(np.argmax(eps))
    steps = len(clock)
    span = clock[-1] - clock[0] if steps > 1 else 0.0
    return {"t": t, "kinetic_energy": ek, "dissipation": eps, "steps": steps,
            "epsilon_max": float(eps[i]), "t_epsilon_max": float(t[i]), "end_time": float(t[-1]),
            "s_per_step": (clock[-1] - clock[0]) / (steps - 1) if span >= MIN_SPAN else None,
            "cpu_s_per_step": (cpu[-1] - cpu[0]) / max(len(cpu) - 1, 1) if cpu else None,
            "wall_s": wall, "p_iters_mean": statistics.mean(gamg) if gamg else None}
