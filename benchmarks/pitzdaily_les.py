"""PitzDaily3D LES: haloflow PISO against OpenFOAM pisoFoam, time per step on the same mesh.

Both run the built-in ``pitzdaily_les`` case (haloflow/cases/pitzdaily_les.toml): the
pitzDaily blockMeshDict extruded to 20 cells across a periodic span (244 500 cells), nu 1e-5,
10 m/s at the inlet with random fluctuations of rms 2 %, 1 %, 1 % (pisoFoam: its
turbulentInlet, the same filter with alpha 0.1; the random numbers themselves differ), kEqn
LES (Ck 0.094, Ce 1.048, cube-root-volume width; ``--van-driest``: damped near walls in
both), dt 1e-5, BDF2 (``backward``), PISO with 2 correctors, from rest.  pisoFoam gets the
tutorial's (incompressible/pisoFoam/LES/pitzDaily) linear solvers: GAMG for p (Gauss-Seidel
smoother, 1e-6, relTol 0.1; pFinal relTol 0), Gauss-Seidel smoothSolver for U and k
(1e-5); its schemes with ``Gauss linear`` convection for U, haloflow's central scheme, where
the tutorial blends in linear-upwind (LUST); k ``limitedLinear 1`` as the tutorial.  On 2
ranks pisoFoam is decomposed ``simple (2 1 1)``, cut across x as haloflow's RCB cuts it.

    .venv/bin/python benchmarks/pitzdaily_les.py                    # 1 and 2 ranks, 20 steps
    .venv/bin/python benchmarks/pitzdaily_les.py --steps 10 --repeat 1 --no-openfoam

Seconds per step exclude start-up and the first step in both: haloflow's are its time-loop
seconds less the first step's, over the remaining steps (summary.json); pisoFoam's the wall
time of an N-step run less that of a 1-step run, over N - 1 (also kept: the same from the
CPU ``ExecutionTime`` it prints per step).  Runs are interleaved (haloflow 1, 2 ranks,
pisoFoam 1, 2 ranks, then again) and medians kept; each run first waits for idle cores
(``--quiet-below``) and stores the busy fraction it saw and the load average.  pisoFoam is
skipped when OpenFOAM is not installed.  Writes benchmarks/results/pitzdaily_les.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import BIN, REPO, wait_quiet
from openfoam import (
    HEAD,
    add_side_by_side_options,
    foam_env,
    mpirun_command,
    run_foam,
)

CASES = REPO / "haloflow" / "cases"
CELLS = 244500
DT = 1e-5


def _load(busy) -> dict:
    return {"busy_before": None if busy is None else round(busy, 3),
            "loadavg_1min": round(os.getloadavg()[0], 2)}


# -- haloflow ----------------------------------------------------------------------------------

def haloflow(ranks: int, steps: int, work: Path, extra: list[str], quiet: tuple) -> dict:
    out = Path(tempfile.mkdtemp(dir=work)) / "run"
    cmd = [str(BIN / "mpiexec"), "-n", str(ranks), str(BIN / "haloflow"), "run",
           "pitzdaily_les", "-o", str(out), "--quiet", "--force", "--steps", str(steps),
           "--set", "output.fields=false", "--set", "output.plots=false", *extra]
    load = _load(wait_quiet(*quiet))
    subprocess.run(cmd, check=True, env={**os.environ, "NUMBA_NUM_THREADS": "1"})
    s = json.loads((out / "summary.json").read_text())
    shutil.rmtree(out.parent)
    n = s["steps"]
    return {"steps": n, "s_per_step": (s["loop_s"] - s["first_step_s"]) / max(n - 1, 1),
            "first_step_s": s["first_step_s"], "wall_s": s["wall_s"],
            "p_iters_mean": s["p_iters_mean"], "u_iters_mean": s["u_iters_mean"],
            "comm_fraction": s["comm_fraction"], **load}


# -- OpenFOAM ----------------------------------------------------------------------------------

def _turbulence(van_driest: bool) -> str:
    delta = "vanDriest" if van_driest else "cubeRootVol"
    return f"""\
simulationType LES;
LES
{{
    LESModel kEqn;
    turbulence on;
    printCoeffs on;
    delta {delta};
    kEqnCoeffs {{ Ck 0.094; Ce 1.048; }}
    cubeRootVolCoeffs {{ deltaCoeff 1; }}
    vanDriestCoeffs
    {{
        delta cubeRootVol;
        cubeRootVolCoeffs {{ deltaCoeff 1; }}
        Aplus 26;
        Cdelta 0.158;
    }}
}}
"""


def _field(dims: str, internal: str, inlet: str, outlet: str, wall: str) -> str:
    return (f"dimensions {dims};\ninternalField uniform {internal};\nboundaryField\n{{\n"
            f"    inlet {{ {inlet} }}\n    outlet {{ {outlet} }}\n"
            f"    upperWall {{ {wall} }}\n    lowerWall {{ {wall} }}\n"
            "    front { type cyclic; }\n    back { type cyclic; }\n}\n")


FILES = {
    "constant/transportProperties": ("dictionary", "transportModel Newtonian;\nnu 1e-05;\n"),
    "system/fvSchemes": ("dictionary", """\
ddtSchemes { default backward; }
gradSchemes { default Gauss linear; }
divSchemes
{
    default none;
    div(phi,U) Gauss linear;
    div(phi,k) Gauss limitedLinear 1;
    div((nuEff*dev2(T(grad(U))))) Gauss linear;
}
laplacianSchemes { default Gauss linear corrected; }
interpolationSchemes { default linear; }
snGradSchemes { default corrected; }
"""),
    "system/fvSolution": ("dictionary", """\
solvers
{
    p { solver GAMG; tolerance 1e-06; relTol 0.1; smoother GaussSeidel; }
    pFinal { $p; smoother DICGaussSeidel; tolerance 1e-06; relTol 0; }
    "(U|k)" { solver smoothSolver; smoother GaussSeidel; tolerance 1e-05; relTol 0; }
}
PISO { nCorrectors 2; nNonOrthogonalCorrectors 0; }
"""),
    "system/decomposeParDict": ("dictionary",
                                "numberOfSubdomains 2;\nmethod simple;\n"
                                "simpleCoeffs { n (2 1 1); delta 0.001; }\n"),
    "0/U": ("volVectorField", _field(
        "[0 1 -1 0 0 0 0]", "(0 0 0)",
        "type turbulentInlet; referenceField uniform (10 0 0); "
        "fluctuationScale (0.02 0.01 0.01); alpha 0.1; value uniform (10 0 0);",
        "type inletOutlet; inletValue uniform (0 0 0); value uniform (0 0 0);",
        "type noSlip;")),
    "0/p": ("volScalarField", _field("[0 2 -2 0 0 0 0]", "0", "type zeroGradient;",
                                     "type fixedValue; value uniform 0;",
                                     "type zeroGradient;")),
    "0/k": ("volScalarField", _field(
        "[0 2 -2 0 0 0 0]", "0", "type fixedValue; value uniform 2e-05;",
        "type inletOutlet; inletValue uniform 0; value uniform 0;",
        "type fixedValue; value uniform 0;")),
    "0/nut": ("volScalarField", _field("[0 2 -1 0 0 0 0]", "0", "type zeroGradient;",
                                       "type zeroGradient;", "type zeroGradient;")),
}


def control(steps: int) -> str:
    return HEAD.format(cls="dictionary", obj="controlDict") + (
        f"application pisoFoam;\nstartFrom startTime;\nstartTime 0;\nstopAt endTime;\n"
        f"endTime {steps * DT!r};\ndeltaT {DT!r};\nwriteControl timeStep;\n"
        "writeInterval 100000000;\nwriteFormat binary;\nwritePrecision 8;\n"
        "writeCompression off;\ntimeFormat general;\ntimePrecision 8;\n"
        "runTimeModifiable false;\n")


def foam_case(root: Path, env: str, van_driest: bool, decompose: bool = True) -> Path:
    """The LES case, meshed by blockMesh from haloflow's blockMeshDict (front and back a
    cyclic pair there too) and, with ``decompose``, decomposed for 2 ranks."""
    case = root / "pitzDaily3D-LES"
    files = {**FILES, "constant/turbulenceProperties": ("dictionary", _turbulence(van_driest))}
    for name, (cls, body) in files.items():
        path = case / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(HEAD.format(cls=cls, obj=path.name) + body)
    shutil.copy(CASES / "pitzdaily_les" / "blockMeshDict", case / "system" / "blockMeshDict")
    (case / "system" / "controlDict").write_text(control(1))
    run_foam(env, case, "blockMesh", case / "log.blockMesh")
    if decompose:
        run_foam(env, case, "decomposePar -force", case / "log.decomposePar")
    return case


def _clear_times(case: Path) -> None:
    """Remove written time folders (not 0), so the next run starts from rest again."""
    for folder in (case, *case.glob("processor*")):
        for d in folder.iterdir():
            try:
                t = float(d.name)
            except ValueError:
                continue
            if d.is_dir() and t > 0.0:
                shutil.rmtree(d)


def pisofoam(ranks: int, steps: int, case: Path, env: str, mpirun: str, quiet: tuple) -> dict:
    """One run of ``steps`` steps and one of a single step (start-up and first step)."""
    cmd = "pisoFoam" if ranks == 1 else f"{mpirun} -np {ranks} pisoFoam -parallel"
    walls = {}
    load = _load(wait_quiet(*quiet))
    for n in (1, steps):
        (case / "system" / "controlDict").write_text(control(n))
        log = case / f"log.pisoFoam.{ranks}.{n}"
        walls[n] = run_foam(env, case, cmd, log)
        _clear_times(case)
    text = log.read_text()
    done = len(re.findall(r"^Time = ", text, re.M))
    if done != steps:
        raise SystemExit(f"pisoFoam ran {done} steps, not {steps}: see {log}")
    cpu = [float(x) for x in re.findall(r"^ExecutionTime = ([0-9.eE+-]+) s", text, re.M)]
    gamg = [int(x) for x in re.findall(r"GAMG:  Solving for p.*No Iterations (\d+)", text)]
    return {"steps": steps, "s_per_step": (walls[steps] - walls[1]) / max(steps - 1, 1),
            "cpu_s_per_step": (cpu[-1] - cpu[0]) / max(len(cpu) - 1, 1) if cpu else None,
            "startup_and_first_step_s": walls[1], "wall_s": walls[steps],
            "p_iters_mean": statistics.mean(gamg) if gamg else None, **load}


# -- main --------------------------------------------------------------------------------------

def summary(runs: list[dict]) -> dict:
    t = [r["s_per_step"] for r in runs]
    med = statistics.median(t)
    return {"s_per_step": med, "spread": (max(t) - min(t)) / med,
            "busy_before": [r["busy_before"] for r in runs],
            "loadavg_1min": [r["loadavg_1min"] for r in runs], "runs": runs}


def table(runs: dict, ranks: list[int]) -> list[dict]:
    """Rows per solver and rank count, printed: median s/step, spread, speed-up over the
    first rank count, and haloflow's time over pisoFoam's at the same ranks."""
    rows = []
    print(f"\n{'solver':<10} {'ranks':>5} {'s/step':>8} {'spread %':>8} {'speed-up':>8} "
          f"{'/ pisoFoam':>10} {'busy before':>18}")
    for (solver, r), rr in runs.items():
        s = summary(rr)
        base = summary(runs[(solver, ranks[0])])["s_per_step"]
        foam = runs.get(("pisoFoam", r))
        ratio = s["s_per_step"] / summary(foam)["s_per_step"] if foam else None
        row = {"solver": solver, "ranks": r, "cells": CELLS, **s,
               "speedup_vs_first": base / s["s_per_step"], "time_vs_pisofoam": ratio}
        rows.append(row)
        busy = ",".join("-" if b is None else f"{b:.2f}" for b in s["busy_before"])
        print(f"{solver:<10} {r:>5} {s['s_per_step']:>8.3f} {100 * s['spread']:>8.1f} "
              f"{row['speedup_vs_first']:>8.2f} "
              f"{'-' if ratio is None else f'{ratio:.2f}':>10} {busy:>18}")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20, help="time steps per run (at least 2)")
    ap.add_argument("--van-driest", action="store_true",
                    help="van Driest damping of the filter width near walls, in both codes")
    add_side_by_side_options(ap)
    ap.add_argument("-o", "--output", type=Path,
                    default=Path("benchmarks/results/pitzdaily_les.json"))
    a = ap.parse_args()
    if a.steps < 2:
        ap.error("--steps: at least 2 (the first step is left out of the time per step)")
    ranks = [int(r) for r in a.ranks.split(",")]
    extra = [x for kv in a.set for x in ("--set", kv)]
    if a.van_driest:
        extra += ["--set", "physics.van_driest=true"]
    quiet = (a.quiet_below, a.quiet_wait)

    subprocess.run([sys.executable, "-m", "haloflow.warmup"], check=True)
    env = None if a.no_openfoam else foam_env()
    if env is None and not a.no_openfoam:
        print("OpenFOAM not found (no pisoFoam, no etc/bashrc): haloflow only")
    mpirun = mpirun_command()
    runs: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        case = foam_case(work, env, a.van_driest) if env is not None else None
        for rep in range(a.repeat):
            for r in ranks:
                res = haloflow(r, a.steps, work, extra, quiet)
                runs.setdefault(("haloflow", r), []).append(res)
                print(f"[{rep + 1}/{a.repeat}] haloflow {r} rank(s): "
                      f"{res['s_per_step']:.3f} s/step (busy before {res['busy_before']})",
                      flush=True)
            for r in ranks if case is not None else ():
                res = pisofoam(r, a.steps, case, env, mpirun, quiet)
                runs.setdefault(("pisoFoam", r), []).append(res)
                print(f"[{rep + 1}/{a.repeat}] pisoFoam {r} rank(s): "
                      f"{res['s_per_step']:.3f} s/step (busy before {res['busy_before']})",
                      flush=True)
    rows = table(runs, ranks)
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps({
        "machine": platform.node(), "cpu": platform.processor(), "cores": os.cpu_count(),
        "python": sys.version.split()[0], "steps": a.steps, "repeat": a.repeat, "dt": DT,
        "van_driest": a.van_driest, "haloflow_overrides": a.set, "openfoam": env is not None,
        "rows": rows}, indent=2))
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
