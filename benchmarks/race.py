"""3D lid-driven cavity: haloflow's PISO against OpenFOAM v1912's icoFoam, step for step.

The same problem for both: the unit cube with N^3 equal cells, six walls, the lid (top face,
y = 1) sliding in +x at U = 1; Re 400 (nu = 0.0025), lid Courant number 0.5 (dt = 0.5 / N),
``--steps`` (30) implicit-Euler steps from rest, linear convection, PISO with 2 correctors and
no non-orthogonal corrector (the mesh is orthogonal).  Runs are interleaved (per repeat, per
size, per rank count: haloflow, then icoFoam), each after the machine has gone quiet
(``--quiet-below``, /proc/stat; the busy fraction seen is stored), and the medians kept.
"x icoFoam" is the ratio of the two codes' medians (the issue's measure); "pairs" the median
of each round's ratio, whose two runs followed each other and so saw one state of a shared
host, which moves either code's time by a third within an hour (docs/performance.md).

    .venv/bin/python benchmarks/race.py                       # 8, 32, 64 cubed; 1, 2 ranks
    .venv/bin/python benchmarks/race.py --sizes 8 --repeat 1 --steps 5

Linear solvers.  icoFoam: p GAMG (GaussSeidel smoother) tolerance 1e-6, relTol 0.01 on the
first corrector and 0 on the last (pFinal); U smoothSolver (symGaussSeidel) tolerance 1e-5,
relTol 0.  haloflow: p AMG-CG to 1e-6 with OpenFOAM's split, ``rel_tol`` 0.01 on the first
corrector and ``final_rel_tol`` 0 on the last; U by symmetric Gauss-Seidel sweeps (``sgs``, as
icoFoam's smoothSolver) to 1e-5, rel_tol 0.  The numbers
are not measured in the same norm.  haloflow stops at ||b - Ax||_2 / ||b||_2 < tol; OpenFOAM at
sum|b - Ax| / n_f < tol with n_f = sum(|Ax - A<x>| + |b - A<x>|), <x> the field's mean.  For
the pressure A<x> = 0 (no row sum; only the reference cell adds one), so near convergence
(Ax ~ b) n_f ~ 2 sum|b|: at the same number icoFoam stops at about twice the relative
residual that haloflow's test would allow (1-norm against 2-norm aside).  For U, <U> is small
against U's variation in a cavity started from rest, and the same holds roughly.  Because the
norms differ, the comparison that counts is measured: both codes are run once more with every
tolerance 1e-10 (relTol 0), and ``max |U - U_tight| / U_lid`` at the end of the window says
how far each code's benchmark run stands from its own fully solved answer (1 rank).  The
two tight answers are compared too: what is left is the difference in discretisation (e.g.
haloflow's deferred correction for linear convection), not in the solvers.  ``--set``
overrides haloflow keys (another pressure method, say).

Time per step excludes start-up and the first step: haloflow ``(loop_s - first_step_s) /
(steps - 1)`` from summary.json; icoFoam from its log, the time between the first and last
step's ``ExecutionTime`` line over ``steps - 1``.  OpenFOAM's ExecutionTime itself is the CPU
time of rank 0 in 10 ms ticks (too coarse for small meshes; kept as ``cpu_s_per_step``), so each
line is stamped with the wall time it was written at, on the rank itself (mpirun forwards the
lines in bursts).  icoFoam runs the ``simple`` (2 1 1) decomposition on 2 ranks (decomposePar,
``mpirun -np 2 icoFoam -parallel``); haloflow the cavity case's RCB, which on a cube cuts
across x as well.  Memory: the peak RSS of every rank (GNU time around each rank), the
largest and the sum over the job, per cell with and without the base RSS of one process on a
2^3 mesh (per code).  The busy fraction of the cores before each run is stored: timings taken
on a busy machine say little.  icoFoam is skipped (haloflow rows only) where OpenFOAM is not
installed.
Writes benchmarks/results/race.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from _common import BIN, wait_quiet
from openfoam import (
    HEAD,
    add_side_by_side_options,
    foam_env,
    mpirun_command,
    run_foam,
)

GNU_TIME = "/usr/bin/time"
NU = 0.0025
U_LID = 1.0
COURANT = 0.5
TOL = {"p": 1e-6, "p_rel": 0.01, "U": 1e-5}
TIGHT = 1e-10
BASE_N = 2


def dt_of(n: int) -> float:
    return COURANT / (U_LID * n)


# -- every rank's peak memory and output lines --------------------------------------------

# copies stdin to a file, each line prefixed by the (system-wide, monotonic) time it arrived
STAMP = ("import sys, time; f = open(sys.argv[1], 'w'); [f.write('%.6f %s' % (time.monotonic(), "
         "line)) for line in iter(sys.stdin.readline, '')]")


def rank_wrapper(prefix: Path, stamp: bool = False) -> list[str]:
    """Argv that runs the rest of the command under GNU time, which writes its peak RSS (KB)
    to ``<prefix>.rss.<pid>``: one file per rank when placed after the MPI launcher.  With
    ``stamp`` the output goes, line by line with its arrival time, to ``<prefix>.log.<pid>``
    (an MPI launcher forwards rank 0's lines in bursts, which would hide the step times; the
    stamper runs at a higher priority, so that busy cores delay it as little as may be)."""
    timed = f'{GNU_TIME} -f %M -o "$0.rss.$$" ' if Path(GNU_TIME).is_file() else ""
    script = (f'{timed}"$@" 2>&1 | nice -n -10 {shlex.quote(sys.executable)} -c '
              f'{shlex.quote(STAMP)} "$0.log.$$"' if stamp else f'exec {timed}"$@"')
    return ["sh", "-c", script, str(prefix)]


def read_rss(prefix: Path) -> dict:
    """Peak RSS per rank in MB: the largest and the sum (None without GNU time)."""
    kb = [int(f.read_text().split()[-1]) for f in prefix.parent.glob(prefix.name + ".rss.*")]
    if not kb:
        return {"rss_rank_max_mb": None, "rss_total_mb": None}
    return {"rss_rank_max_mb": max(kb) / 1024, "rss_total_mb": sum(kb) / 1024}


# -- haloflow ----------------------------------------------------------------------------------

def haloflow_sets(n: int, steps: int, tight: bool, fields: bool) -> list[str]:
    dt = dt_of(n)
    p_tol, u_tol = (TIGHT, TIGHT) if tight else (TOL["p"], TOL["U"])
    p_rel = 0 if tight else TOL["p_rel"]
    keys = [f"mesh.cells=[{n},{n},{n}]", "boundary.front.type=wall", "boundary.back.type=wall",
            f"physics.nu={NU!r}", f"boundary.top.U=[{U_LID!r},0.0,0.0]", f"solver.dt={dt!r}",
            f"solver.end_time={2 * steps * dt!r}", "solver.steady_tol=0",
            "solver.time_scheme=euler", "solver.convection=linear", "solver.n_correctors=2",
            "solver.n_nonorth_correctors=0", f"solver.pressure.tol={p_tol!r}",
            f"solver.pressure.rel_tol={p_rel!r}", "solver.pressure.final_rel_tol=0",
            'solver.momentum.method="sgs"', f"solver.momentum.tol={u_tol!r}",
            "solver.momentum.rel_tol=0", "postprocess.cavity=false", "output.plots=false",
            f"output.fields={'true' if fields else 'false'}"]
    return [x for k in keys for x in ("--set", k)]


def haloflow(n: int, ranks: int, steps: int, work: Path, extra: list[str], quiet: tuple,
             tight: bool = False, fields: bool = False) -> dict:
    """One run; with ``fields`` also U at the end, in blockMesh's cell order."""
    out = Path(tempfile.mkdtemp(dir=work))
    cmd = [str(BIN / "mpiexec"), "-n", str(ranks), *rank_wrapper(out / "rank"),
           str(BIN / "haloflow"), "run", "cavity", "-o", str(out / "run"), "--quiet", "--force",
           "--steps", str(steps), *haloflow_sets(n, steps, tight, fields), *extra]
    load = wait_quiet(*quiet)
    subprocess.run(cmd, check=True, env={**os.environ, "NUMBA_NUM_THREADS": "1"})
    s = json.loads((out / "run" / "summary.json").read_text())
    res = {"steps": s["steps"], "cells": s["cells"], "wall_s": s["wall_s"],
           "s_per_step": (s["loop_s"] - s["first_step_s"]) / max(s["steps"] - 1, 1),
           "first_step_s": s["first_step_s"], "p_iters_mean": s["p_iters_mean"],
           "u_iters_mean": s["u_iters_mean"], "decomposition": s["decomposition"],
           **read_rss(out / "rank"), "busy_before": load if load is None else round(load, 3)}
    if fields:
        res["U"] = read_haloflow_U(out / "run", n)
    shutil.rmtree(out)
    return res


def read_haloflow_U(run: Path, n: int) -> np.ndarray:
    """U (cells x 3) from the run's VTU pieces, each cell placed by its centroid at blockMesh's
    index ``i + n j + n^2 k``."""
    import meshio

    u = np.full((n**3, 3), np.nan)
    for piece in sorted((run / "fields").glob("cavity_*.vtu")):
        m = meshio.read(piece)
        conn = np.concatenate([c.data for c in m.cells])
        ijk = np.floor(m.points[conn].mean(axis=1) * n).astype(int)
        u[ijk[:, 0] + n * ijk[:, 1] + n * n * ijk[:, 2]] = np.concatenate(m.cell_data["U"])[:, :3]
    assert not np.isnan(u).any(), f"cells missing in {run}/fields"
    return u


# -- icoFoam -----------------------------------------------------------------------------------

BLOCKMESH = """\
convertToMeters 1;
vertices ((0 0 0) (1 0 0) (1 1 0) (0 1 0) (0 0 1) (1 0 1) (1 1 1) (0 1 1));
blocks (hex (0 1 2 3 4 5 6 7) ({n} {n} {n}) simpleGrading (1 1 1));
edges ();
boundary
(
    lid {{ type wall; faces ((3 7 6 2)); }}
    walls {{ type wall; faces ((0 4 7 3) (2 6 5 1) (1 5 4 0) (0 3 2 1) (4 5 6 7)); }}
);
mergePatchPairs ();
"""
SCHEMES = """\
ddtSchemes { default Euler; }
gradSchemes { default Gauss linear; }
divSchemes { default none; div(phi,U) Gauss linear; }
laplacianSchemes { default Gauss linear corrected; }
interpolationSchemes { default linear; }
snGradSchemes { default corrected; }
"""
SOLUTION = """\
solvers
{{
    p {{ solver GAMG; smoother GaussSeidel; tolerance {p!r}; relTol {p_rel!r}; maxIter 5000; }}
    pFinal {{ $p; relTol 0; }}
    U {{ solver smoothSolver; smoother symGaussSeidel; tolerance {U!r}; relTol 0; maxIter 5000; }}
}}
PISO {{ nCorrectors 2; nNonOrthogonalCorrectors 0; pRefCell 0; pRefValue 0; }}
"""
FIELDS = {
    "U": ("volVectorField", "[0 1 -1 0 0 0 0]", "uniform (0 0 0)",
          f"lid {{ type fixedValue; value uniform ({U_LID!r} 0 0); }}\n"
          "    walls { type noSlip; }"),
    "p": ("volScalarField", "[0 2 -2 0 0 0 0]", "uniform 0",
          "lid { type zeroGradient; }\n    walls { type zeroGradient; }"),
}


def control(n: int, steps: int, write: bool) -> str:
    """controlDict: ``steps`` steps of dt = Co / (U n); ASCII fields at the end if ``write``."""
    dt = dt_of(n)
    return HEAD.format(cls="dictionary", obj="controlDict") + (
        f"application icoFoam;\nstartFrom startTime;\nstartTime 0;\nstopAt endTime;\n"
        f"endTime {steps * dt!r};\ndeltaT {dt!r};\nwriteControl timeStep;\n"
        f"writeInterval {steps if write else 100 * steps};\nwriteFormat ascii;\n"
        "writePrecision 17;\nwriteCompression off;\ntimeFormat general;\ntimePrecision 12;\n"
        "runTimeModifiable false;\n")


def foam_case(root: Path, env: str, n: int, steps: int, tight: bool = False,
              write: bool = False, decompose: bool = True) -> Path:
    """The cavity case with n^3 cells, meshed and (``decompose``) split for 2 ranks."""
    case = root / f"cavity{n}{'-tight' if tight else ''}{'-write' if write else ''}"
    tol = {"p": TIGHT, "p_rel": 0, "U": TIGHT} if tight else TOL
    files = {"system/blockMeshDict": ("dictionary", BLOCKMESH.format(n=n)),
             "system/fvSchemes": ("dictionary", SCHEMES),
             "system/fvSolution": ("dictionary", SOLUTION.format(**tol)),
             "system/decomposeParDict": ("dictionary", "numberOfSubdomains 2;\nmethod simple;\n"
                                         "simpleCoeffs { n (2 1 1); delta 0.001; }\n"),
             "constant/transportProperties": ("dictionary", f"nu {NU!r};\n")}
    for name, (cls, dims, internal, bcs) in FIELDS.items():
        files[f"0/{name}"] = (cls, f"dimensions {dims};\ninternalField {internal};\n"
                                   f"boundaryField\n{{\n    {bcs}\n}}\n")
    for name, (cls, body) in files.items():
        path = case / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(HEAD.format(cls=cls, obj=path.name) + body)
    (case / "system" / "controlDict").write_text(control(n, steps, write))
    run_foam(env, case, "blockMesh", case / "log.blockMesh")
    if decompose:
        run_foam(env, case, "decomposePar -force", case / "log.decomposePar")
    return case


def icofoam(case: Path, ranks: int, steps: int, env: str, mpirun: str, quiet: tuple,
            fields: bool = False) -> dict:
    """One run of ``case``; with ``fields`` also U of the last time written."""
    prefix = case / "rank"
    for f in case.glob("rank.*"):
        f.unlink()
    wrap = shlex.join(rank_wrapper(prefix, stamp=True))
    cmd = f"{wrap} icoFoam" if ranks == 1 else f"{mpirun} -np {ranks} {wrap} icoFoam -parallel"
    load = wait_quiet(*quiet)
    wall = run_foam(env, case, cmd, case / f"log.mpirun.{ranks}")
    lines = stamped_lines(prefix, case / f"log.icoFoam.{ranks}")
    res = {**parse_log(lines, steps, case.name), "wall_s": wall, **read_rss(prefix),
           "busy_before": load if load is None else round(load, 3)}
    if fields:
        res["U"] = read_foam_U(case)
    for d in [*case.glob("[1-9]*"), *case.glob("0.*"), *case.glob("processor*/[1-9]*"),
              *case.glob("processor*/0.*")]:
        shutil.rmtree(d)  # written results: the next run starts at 0
    return res


def stamped_lines(prefix: Path, log: Path) -> list[tuple[float, str]]:
    """Rank 0's output (the one that logs the steps) as (seconds since its first line, line);
    also written, with the times, to ``log``."""
    logs = [f.read_text().splitlines(keepends=True)
            for f in prefix.parent.glob(prefix.name + ".log.*")]
    text = max(logs, key=lambda ls: sum("ExecutionTime" in line for line in ls))
    log.write_text("".join(text))
    stamped = [line.split(" ", 1) for line in text]
    return [(float(t) - float(stamped[0][0]), line) for t, line in stamped]


def parse_log(lines: list[tuple[float, str]], steps: int, name: str) -> dict:
    """Wall time per step from the arrival of each step's ``ExecutionTime`` line, the first
    step left out (OpenFOAM's own ExecutionTime is CPU time in 10 ms ticks: too coarse for a
    small mesh, kept as a check), linear solves, dt (the lid Courant number is U dt N) and the
    largest Courant number of the cells."""
    text = "".join(line for _, line in lines)
    wall = [t for t, line in lines if line.startswith("ExecutionTime = ")]
    if len(wall) != steps:
        raise SystemExit(f"icoFoam log of {name} has {len(wall)} steps, expected {steps}")
    cpu = [float(x) for x in re.findall(r"^ExecutionTime = (\S+) s", text, re.M)]
    times = [float(x) for x in re.findall(r"^Time = (\S+)", text, re.M)]
    p = [int(x) for x in re.findall(r"Solving for p, .*No Iterations (\d+)", text)]
    u = [int(x) for x in re.findall(r"Solving for U\w, .*No Iterations (\d+)", text)]
    co = [float(x) for x in re.findall(r"^Courant Number mean: \S+ max: (\S+)", text, re.M)]
    return {"steps": len(wall), "s_per_step": (wall[-1] - wall[0]) / (steps - 1),
            "first_step_s": wall[0] - next(t for t, line in lines if line.startswith("Time = ")),
            "cpu_s_per_step": (cpu[-1] - cpu[0]) / (steps - 1),
            "dt": times[0], "p_solves_per_step": len(p) / steps,
            "p_iters_mean": float(np.mean(p)), "u_iters_mean": float(np.mean(u)),
            "cell_courant_max": max(co),
            "solvers": sorted({f"{a} {b}" for a, b in
                               re.findall(r"^(\w+):\s+Solving for (\w+)", text, re.M)})}


def read_foam_U(case: Path) -> np.ndarray:
    """The internal U of the latest time directory (ASCII, written by a 1-rank run)."""
    last = max((d for d in case.iterdir() if re.fullmatch(r"[0-9.e+-]+", d.name)),
               key=lambda d: float(d.name))
    text = (last / "U").read_text()
    m = re.search(r"internalField\s+nonuniform\s+List<vector>\s+(\d+)\s*\(", text)
    body = text[m.end():].split(")\n)", 1)[0]
    u = np.array(body.replace("(", " ").replace(")", " ").split(), dtype=float)
    return u.reshape(int(m.group(1)), 3)


# -- main --------------------------------------------------------------------------------------

def summary(runs: list[dict]) -> dict:
    t = [r["s_per_step"] for r in runs]
    med = statistics.median(t)
    out = {"s_per_step": med, "spread": (max(t) - min(t)) / med if med else 0.0}
    for k in ("rss_rank_max_mb", "rss_total_mb"):
        v = [r[k] for r in runs if r[k] is not None]
        out[k] = statistics.median(v) if v else None
    return {**out, "busy_before": [r["busy_before"] for r in runs], "runs": runs}


def accuracy(n: int, steps: int, work: Path, env: str | None, extra: list[str],
             quiet: tuple) -> dict:
    """max |U - U_tight| / U_lid per code after ``steps`` steps on 1 rank, and the two tight
    answers against each other (the codes' discretisations, not their solvers)."""
    hf = {t: haloflow(n, 1, steps, work, [] if t else extra, quiet, tight=t, fields=True)["U"]
          for t in (False, True)}
    row = {"size": n, "haloflow": float(np.abs(hf[False] - hf[True]).max() / U_LID)}
    if env is not None:
        of = {t: icofoam(foam_case(work, env, n, steps, tight=t, write=True, decompose=False),
                         1, steps, env, "", quiet, fields=True)["U"] for t in (False, True)}
        row["icoFoam"] = float(np.abs(of[False] - of[True]).max() / U_LID)
        row["haloflow_vs_icoFoam_tight"] = float(np.abs(hf[True] - of[True]).max() / U_LID)
    return row


def _opt(row: dict, key: str, fmt: str, width: int = 8) -> str:
    """A table cell that may be missing (no icoFoam, no GNU time)."""
    return format(row[key], fmt) if row.get(key) is not None else format("-", f">{width}")


def print_table(rows: list[dict], acc: list[dict], base: dict) -> None:
    print(f"\n{'size':>5} {'code':<9} {'ranks':>5} {'s/step':>10} {'spread %':>8} "
          f"{'x icoFoam':>9} {'pairs':>6} {'rank MB':>8} {'job MB':>8} {'KB/cell':>8} {'>base':>8} "
          f"{'p it':>5} {'U it':>5} {'busy':>5}")
    for r in rows:
        busy = max((b for b in r["busy_before"] if b is not None), default=float("nan"))
        print(f"{r['size']:>5} {r['code']:<9} {r['ranks']:>5} {r['s_per_step']:>10.5f} "
              f"{100 * r['spread']:>8.1f} {_opt(r, 'vs_icofoam', '>9.2f', 9)} "
              f"{_opt(r, 'vs_icofoam_pairs', '>6.2f', 6)} "
              f"{_opt(r, 'rss_rank_max_mb', '>8.1f')} {_opt(r, 'rss_total_mb', '>8.1f')} "
              f"{_opt(r, 'kb_per_cell', '>8.2f')} {_opt(r, 'kb_per_cell_above_base', '>8.2f')} "
              f"{r['p_iters_mean']:>5.1f} {r['u_iters_mean']:>5.1f} {busy:>5.2f}")
    print("base RSS of one process on a 2^3 mesh: "
          + ", ".join(f"{k} {v:.1f} MB" for k, v in base.items() if v is not None))
    if acc:
        print(f"\n{'size':>5} {'max |U - U_tight| / U_lid:':<28} {'haloflow':>9} {'icoFoam':>9}"
              f"   {'tight haloflow vs tight icoFoam'}")
        for a in acc:
            print(f"{a['size']:>5} {'':<28} {_opt(a, 'haloflow', '>9.2e', 9)} "
                  f"{_opt(a, 'icoFoam', '>9.2e', 9)}   "
                  f"{_opt(a, 'haloflow_vs_icoFoam_tight', '.2e', 0)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,32,64", help="cells per edge of the cube")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--no-accuracy", action="store_true",
                    help="skip the runs solved to 1e-10")
    add_side_by_side_options(ap)
    ap.add_argument("-o", "--output", type=Path, default=Path("benchmarks/results/race.json"))
    a = ap.parse_args()
    sizes = [int(n) for n in a.sizes.split(",")]
    ranks = [int(r) for r in a.ranks.split(",")]
    extra = [x for kv in a.set for x in ("--set", kv)]
    quiet = (a.quiet_below, a.quiet_wait)
    if a.steps < 2:
        raise SystemExit("--steps must be at least 2 (the first step is left out)")

    subprocess.run([sys.executable, "-m", "haloflow.warmup"], check=True)
    env = None if a.no_openfoam else foam_env()
    if env is None and not a.no_openfoam:
        print("OpenFOAM not found (no icoFoam, no etc/bashrc): haloflow only")
    if not Path(GNU_TIME).is_file():
        print(f"no {GNU_TIME} (apt-get install time): peak RSS not measured")
    mpirun = mpirun_command()
    runs: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base = {"haloflow": haloflow(BASE_N, 1, 2, work, extra, quiet)["rss_rank_max_mb"]}
        cases = {}
        if env is not None:
            cases = {n: foam_case(work, env, n, a.steps) for n in sizes}
            base["icoFoam"] = icofoam(foam_case(work, env, BASE_N, 2, decompose=False), 1, 2,
                                      env, mpirun, quiet)["rss_rank_max_mb"]
        for rep in range(a.repeat):
            for n in sizes:
                for r, code in ((r, c) for r in ranks for c in ("haloflow", "icoFoam")):
                    if code == "haloflow":
                        res = haloflow(n, r, a.steps, work, extra, quiet)
                    elif env is not None:
                        res = icofoam(cases[n], r, a.steps, env, mpirun, quiet)
                    else:
                        continue
                    runs.setdefault((n, code, r), []).append(res)
                    print(f"[{rep + 1}/{a.repeat}] {n}^3 {code:<8} {r} rank(s): "
                          f"{res['s_per_step'] * 1e3:.2f} ms/step, peak RSS "
                          f"{res['rss_total_mb'] or 0:.0f} MB (busy before "
                          f"{res['busy_before']})", flush=True)
        acc = [] if a.no_accuracy else [accuracy(n, a.steps, work, env, extra, quiet)
                                       for n in sizes]
    rows = []
    for (n, code, r), rr in runs.items():
        row = {"size": n, "cells": n**3, "code": code, "ranks": r, **summary(rr),
               "p_iters_mean": statistics.median(x["p_iters_mean"] for x in rr),
               "u_iters_mean": statistics.median(x["u_iters_mean"] for x in rr)}
        of = runs.get((n, "icoFoam", r))
        row["vs_icofoam"] = row["s_per_step"] / summary(of)["s_per_step"] if of else None
        # each round's two runs followed each other: their ratio sees one state of the host
        row["vs_icofoam_pairs"] = statistics.median(
            x["s_per_step"] / y["s_per_step"] for x, y in zip(rr, of, strict=True)) if of else None
        if code == "icoFoam":  # from the times in its log: the dt it really took
            row["lid_courant"] = U_LID * rr[0]["dt"] * n
        if row["rss_total_mb"] is not None:
            row["kb_per_cell"] = 1024 * row["rss_total_mb"] / n**3
            row["kb_per_cell_above_base"] = 1024 * (row["rss_total_mb"] - r * base[code]) / n**3
        rows.append(row)
    print_table(rows, acc, base)
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps({
        "machine": platform.node(), "cpu": platform.processor(), "cores": os.cpu_count(),
        "python": sys.version.split()[0], "nu": NU, "lid_U": U_LID, "courant": COURANT,
        "steps": a.steps, "haloflow_overrides": a.set,
        "tolerances": {
            "icoFoam": {"p": f"GAMG GaussSeidel tolerance {TOL['p']} relTol {TOL['p_rel']}, "
                             "pFinal relTol 0",
                        "U": f"smoothSolver symGaussSeidel tolerance {TOL['U']} relTol 0",
                        "norm": "sum|b - Ax| / sum(|Ax - A<x>| + |b - A<x>|), for p about "
                                "||b - Ax||_1 / (2 ||b||_1) near convergence"},
            "haloflow": {"p": f"amg-cg tol {TOL['p']} rel_tol {TOL['p_rel']} on the first "
                              "corrector, final_rel_tol 0 on the last",
                         "U": f"sgs (symmetric Gauss-Seidel) tol {TOL['U']} rel_tol 0",
                         "norm": "||b - Ax||_2 / ||b||_2"},
            "verdict": "haloflow the same or stricter: the same tolerances in a norm about "
                       "half as lenient; the accuracy rows measure both",
            "tight": TIGHT},
        "base_rss_mb": base, "base_cells": BASE_N**3, "rows": rows,
        "accuracy": acc}, indent=2))
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
