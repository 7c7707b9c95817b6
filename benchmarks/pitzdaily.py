"""pitzDaily, laminar: haloflow SIMPLE against OpenFOAM simpleFoam on the same mesh.

Both solve the built-in ``pitzdaily`` case (haloflow/cases/pitzdaily.toml): the tutorial's
12 225-cell blockMesh mesh, uniform inlet 10 m/s, nu = 1e-3 (Re 254 on the step height),
SIMPLEC with linear-upwind convection, each run until every initial residual is below
1e-5, both on OpenFOAM's normalised residual (simpleFoam: residualControl p 1e-5, U 1e-5;
haloflow: the case's ``solver.residual_norm = "normalised"``; ``--set
'solver.residual_norm="relative"'`` stops it on ||b - A x0|| / ||b|| instead).
simpleFoam gets the tutorial's linear solvers (GAMG for p, symmetric Gauss-Seidel for U,
relTol 0.1) and relaxation (U 0.9), ``simulationType laminar``, and the ``simple`` (2 1 1)
decomposition on 2 ranks, which cuts the channel across x as haloflow's RCB does.

    .venv/bin/python benchmarks/pitzdaily.py                  # 1 and 2 ranks, 3 repeats
    .venv/bin/python benchmarks/pitzdaily.py --repeat 5 --no-openfoam
    .venv/bin/python benchmarks/pitzdaily.py --tight   # also simpleFoam solving to 1e-7

ms per iteration, start-up and the first iteration left out of both: haloflow's time-loop
seconds less its first iteration's (summary.json), over the remaining iterations; for
simpleFoam the wall time of the run less that of a one-iteration run (start-up, mesh
reading, the first iteration), over the remaining iterations.  Runs are interleaved
(haloflow 1, 2 ranks, simpleFoam 1, 2 ranks, then again) and the medians kept.  Other users'
jobs on a small machine show up as spread, so each run waits until the cores are idle
(``--quiet-below``, from /proc/stat) and stores the busy fraction it saw.
simpleFoam is skipped when OpenFOAM is not installed.  Writes benchmarks/results/pitzdaily.json.
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

NU = 1e-3
U_IN = 10.0


# -- haloflow ----------------------------------------------------------------------------------

def haloflow(ranks: int, work: Path, extra: list[str], quiet: tuple) -> dict:
    out = Path(tempfile.mkdtemp(dir=work)) / "run"
    cmd = [str(BIN / "mpiexec"), "-n", str(ranks), str(BIN / "haloflow"), "run", "pitzdaily",
           "-o", str(out), "--quiet", "--force", "--set", "output.fields=false",
           "--set", "output.plots=false", *extra]
    load = wait_quiet(*quiet)
    subprocess.run(cmd, check=True, env={**os.environ, "NUMBA_NUM_THREADS": "1"})
    s = json.loads((out / "summary.json").read_text())
    prof = json.loads((out / "profile.json").read_text())
    phases = _phases(prof)
    shutil.rmtree(out.parent)
    return {"iterations": s["iterations"], "converged": s["converged"],
            # as simpleFoam's below: start-up and the first iteration left out (haloflow's
            # first loads the compiled kernels, simpleFoam's is in its one-iteration run)
            "ms_per_iteration": 1e3 * (s["loop_s"] - s["first_step_s"])
            / max(s["iterations"] - 1, 1),
            "first_iteration_s": s["first_step_s"], "loop_s": s["loop_s"],
            "wall_s": s["wall_s"], "p_iters_mean": s["p_iters_mean"],
            "u_iters_mean": s["u_iters_mean"], "comm_fraction": s["comm_fraction"],
            "phase_shares": phases, "busy_before": load if load is None else round(load, 3)}


def _phases(prof: dict) -> dict:
    """Share of the time loop per phase, mean over ranks (``profile.json``, docs/profile.md;
    nested phases such as the AMG's gathered levels are part of their parent's share)."""
    return {k: round(v["share_of_loop"], 4) for k, v in prof.get("phases", {}).items()
            if isinstance(v, dict) and v.get("share_of_loop") is not None}


# -- OpenFOAM ----------------------------------------------------------------------------------

FILES = {
    "constant/transportProperties": ("dictionary", f"transportModel Newtonian;\nnu {NU!r};\n"),
    "constant/turbulenceProperties": ("dictionary", "simulationType laminar;\n"),
    "system/fvSchemes": ("dictionary", """\
ddtSchemes { default steadyState; }
gradSchemes { default Gauss linear; }
divSchemes
{
    default none;
    div(phi,U) bounded Gauss linearUpwind grad(U);
    div((nuEff*dev2(T(grad(U))))) Gauss linear;
}
laplacianSchemes { default Gauss linear corrected; }
interpolationSchemes { default linear; }
snGradSchemes { default corrected; }
"""),
    "system/fvSolution": ("dictionary", """\
solvers
{
    p { solver GAMG; smoother GaussSeidel; tolerance 1e-6; relTol 0.1; }
    U { solver smoothSolver; smoother symGaussSeidel; tolerance 1e-5; relTol 0.1; }
    // TIGHT
}
SIMPLE
{
    nNonOrthogonalCorrectors 0;
    consistent yes;
    residualControl { p 1e-5; U 1e-5; }
}
relaxationFactors { equations { U 0.9; } }
"""),
    "system/decomposeParDict": ("dictionary",
                                "numberOfSubdomains 2;\nmethod simple;\n"
                                "simpleCoeffs { n (2 1 1); delta 0.001; }\n"),
    "0/U": ("volVectorField", f"""\
dimensions [0 1 -1 0 0 0 0];
internalField uniform (0 0 0);
boundaryField
{{
    inlet {{ type fixedValue; value uniform ({U_IN!r} 0 0); }}
    outlet {{ type zeroGradient; }}
    upperWall {{ type noSlip; }}
    lowerWall {{ type noSlip; }}
    frontAndBack {{ type empty; }}
}}
"""),
    "0/p": ("volScalarField", """\
dimensions [0 2 -2 0 0 0 0];
internalField uniform 0;
boundaryField
{
    inlet { type zeroGradient; }
    outlet { type fixedValue; value uniform 0; }
    upperWall { type zeroGradient; }
    lowerWall { type zeroGradient; }
    frontAndBack { type empty; }
}
"""),
}


def control(end: int) -> str:
    return HEAD.format(cls="dictionary", obj="controlDict") + (
        f"application simpleFoam;\nstartFrom startTime;\nstartTime 0;\nstopAt endTime;\n"
        f"endTime {end};\ndeltaT 1;\nwriteControl timeStep;\nwriteInterval 1000000;\n"
        "writeFormat ascii;\nwritePrecision 8;\nwriteCompression off;\ntimeFormat general;\n"
        "timePrecision 6;\nrunTimeModifiable false;\n")


# haloflow's inner accuracy: every linear solve to 1e-7, no relative tolerance
TIGHT = """    p { solver GAMG; smoother GaussSeidel; tolerance 1e-7; relTol 0; }
    U { solver smoothSolver; smoother symGaussSeidel; tolerance 1e-7; relTol 0; }"""


def foam_case(root: Path, env: str, tight: bool = False) -> Path:
    """The laminar pitzDaily case, meshed by blockMesh from haloflow's blockMeshDict and
    decomposed for 2 ranks; ``tight``: linear solves to 1e-7 instead of relTol 0.1."""
    case = root / ("pitzDaily-laminar-tight" if tight else "pitzDaily-laminar")
    for name, (cls, body) in FILES.items():
        path = case / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if tight and name == "system/fvSolution":
            body = re.sub(r"    p \{.*// TIGHT", TIGHT, body, flags=re.S)
        path.write_text(HEAD.format(cls=cls, obj=path.name) + body.replace("    // TIGHT\n", ""))
    shutil.copy(CASES / "pitzdaily" / "blockMeshDict", case / "system" / "blockMeshDict")
    (case / "system" / "controlDict").write_text(control(5000))
    for tool in ("blockMesh", "decomposePar -force"):
        run_foam(env, case, tool, case / f"log.{tool.split()[0]}")
    return case


def simplefoam(ranks: int, case: Path, env: str, mpirun: str, quiet: tuple) -> dict:
    """One run to convergence and one of a single iteration (start-up cost)."""
    cmd = "simpleFoam" if ranks == 1 else f"{mpirun} -np {ranks} simpleFoam -parallel"
    walls = {}
    load = wait_quiet(*quiet)
    for end in (1, 5000):
        (case / "system" / "controlDict").write_text(control(end))
        log = case / f"log.simpleFoam.{ranks}.{end}"
        walls[end] = run_foam(env, case, cmd, log)
    text = log.read_text()
    m = re.search(r"SIMPLE solution converged in (\d+) iterations", text)
    n = int(m.group(1)) if m else len(re.findall(r"^Time = ", text, re.M))
    for d in case.glob("processor*/[1-9]*"):  # written results: the next run starts at 0
        shutil.rmtree(d)
    for d in case.glob("[1-9]*"):
        shutil.rmtree(d)
    return {"iterations": n, "converged": m is not None,
            "ms_per_iteration": 1e3 * (walls[5000] - walls[1]) / max(n - 1, 1),
            "wall_s": walls[5000], "startup_s": walls[1],
            "busy_before": load if load is None else round(load, 3)}


# -- main --------------------------------------------------------------------------------------

def summary(runs: list[dict]) -> dict:
    ms = [r["ms_per_iteration"] for r in runs]
    med = statistics.median(ms)
    return {"ms_per_iteration": med, "spread": (max(ms) - min(ms)) / med,
            "iterations": statistics.median(r["iterations"] for r in runs),
            "converged": all(r["converged"] for r in runs),
            "busy_before": [r["busy_before"] for r in runs], "runs": runs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tight", action="store_true",
                    help="also simpleFoam with every linear solve to 1e-7 (relTol 0), "
                         "the inner accuracy haloflow uses")
    add_side_by_side_options(ap)
    ap.add_argument("-o", "--output", type=Path,
                    default=Path("benchmarks/results/pitzdaily.json"))
    a = ap.parse_args()
    ranks = [int(r) for r in a.ranks.split(",")]
    extra = [x for kv in a.set for x in ("--set", kv)]
    quiet = (a.quiet_below, a.quiet_wait)

    subprocess.run([sys.executable, "-m", "haloflow.warmup"], check=True)
    env = None if a.no_openfoam else foam_env()
    if env is None and not a.no_openfoam:
        print("OpenFOAM not found (no simpleFoam, no etc/bashrc): haloflow only")
    mpirun = mpirun_command()
    runs: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cases = {}
        if env is not None:
            cases["simpleFoam"] = foam_case(work, env)
            if a.tight:
                cases["simpleFoam-tight"] = foam_case(work, env, tight=True)
        for rep in range(a.repeat):
            for r in ranks:
                res = haloflow(r, work, extra, quiet)
                runs.setdefault(("haloflow", r), []).append(res)
                print(f"[{rep + 1}/{a.repeat}] haloflow   {r} rank(s): {res['iterations']} it, "
                      f"{res['ms_per_iteration']:.2f} ms/it (busy before {res['busy_before']})",
                      flush=True)
            for (label, case), r in ((c, r) for c in cases.items() for r in ranks):
                res = simplefoam(r, case, env, mpirun, quiet)
                runs.setdefault((label, r), []).append(res)
                print(f"[{rep + 1}/{a.repeat}] {label} {r} rank(s): {res['iterations']} it, "
                      f"{res['ms_per_iteration']:.2f} ms/it (busy before {res['busy_before']})",
                      flush=True)
    rows = []
    print(f"\n{'solver':<16} {'ranks':>5} {'iterations':>10} {'ms/it':>8} {'spread %':>8} "
          f"{'time to converge s':>18} {'speed-up':>8}")
    for (solver, r), rr in runs.items():
        s = summary(rr)
        base = summary(runs[(solver, ranks[0])])["ms_per_iteration"]
        row = {"solver": solver, "ranks": r, "cells": 12225, **s,
               "seconds_to_converge": s["ms_per_iteration"] * s["iterations"] / 1e3,
               "speedup_vs_first": base / s["ms_per_iteration"]}
        rows.append(row)
        print(f"{solver:<16} {r:>5} {s['iterations']:>10.0f} {s['ms_per_iteration']:>8.2f} "
              f"{100 * s['spread']:>8.1f} {row['seconds_to_converge']:>18.2f} "
              f"{row['speedup_vs_first']:>8.2f}")
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps({"machine": platform.node(), "cpu": platform.processor(),
                                    "cores": os.cpu_count(), "python": sys.version.split()[0],
                                    "nu": NU, "inlet_U": U_IN, "haloflow_overrides": a.set,
                                    "rows": rows}, indent=2))
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
