"""OpenFOAM traced with ``haloflow trace`` and replayed with ``haloflow predict --engine simgrid``.

Two checks of the trace-and-replay path on an application that is not haloflow:

1. icoFoam's cavity (the tutorial, its blockMesh at ``--cells`` squared, dt for a Courant
   number of 0.5) decomposed ``simple (2 1 1)`` and run with ``mpirun.openmpi -np 2 icoFoam
   -parallel``: the measured time per step against the replay of its trace on one node whose
   ranks talk through this machine's shared-memory curve (``haloflow netpipe`` on 2 ranks,
   ``--shm``; default the cached one ``predict`` uses).  Both are per step without start-up:
   the difference of a ``--steps-hi`` and a ``--steps-lo`` step run over the steps between,
   measured (median of ``--repeat`` pairs) and replayed (a trace of each run) alike.
2. pisoFoam LES (kEqn) on PitzDaily3D: the case benchmarks/pitzdaily_les.py writes (the
   tutorial's settings on haloflow's ``pitzdaily_les`` mesh, 244 500 cells) decomposed
   ``simple`` (``SPLITS``) at each of ``--ranks`` (oversubscribed here), traced for
   ``--les-lo`` and ``--les-hi`` steps and replayed on dual-CPU nodes (``--cores-per-node 2``) on
   ``gige-tcp`` (50 us MPI stack) and ``gige-lowlatency`` (11 us) with ``--cpu-speed``:
   the predicted step times and their ratio.

    .venv/bin/python benchmarks/openfoam_replay.py                  # both, about 9 min here
    .venv/bin/python benchmarks/openfoam_replay.py --no-les --repeat 5

Writes benchmarks/results/openfoam_replay.json.  Without OpenFOAM, Open MPI (mpirun.openmpi,
mpicc.openmpi) or SimGrid (smpirun) it says which is missing and exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import BIN, RESULTS
from openfoam import HEAD, foam_env, run_foam
from pitzdaily_les import _clear_times, foam_case
from pitzdaily_les import control as les_control

TUTORIAL = Path("/usr/share/doc/openfoam-examples/examples/incompressible/icoFoam/cavity/cavity")
MPIRUN = "mpirun.openmpi --allow-run-as-root --oversubscribe"
MPICC = "mpicc.openmpi"
NETWORKS = ("gige-tcp", "gige-lowlatency")


def missing() -> str | None:
    """What is absent of OpenFOAM, Open MPI and SimGrid, or None."""
    gone = [name for name in ("mpirun.openmpi", MPICC, "smpirun") if shutil.which(name) is None]
    if foam_env() is None:
        gone.insert(0, "OpenFOAM (no etc/bashrc)")
    elif not TUTORIAL.is_dir():
        gone.insert(0, f"OpenFOAM's tutorials ({TUTORIAL})")
    return ", ".join(gone) or None


# -- the cases ---------------------------------------------------------------------------------

def cavity_control(steps: int, dt: float) -> str:
    return HEAD.format(cls="dictionary", obj="controlDict") + (
        "application icoFoam;\nstartFrom startTime;\nstartTime 0;\nstopAt endTime;\n"
        f"endTime {steps * dt!r};\ndeltaT {dt!r};\nwriteControl timeStep;\n"
        "writeInterval 100000000;\nwriteFormat binary;\nwritePrecision 8;\n"
        "writeCompression off;\ntimeFormat general;\ntimePrecision 8;\n"
        "runTimeModifiable false;\n")


SPLITS = {2: (2, 1, 1), 8: (4, 2, 1), 18: (6, 3, 1), 36: (6, 3, 2)}


def decompose_dict(ranks: int) -> str:
    """OpenFOAM's ``simple`` decomposition (x, y, z; scotch is a stub in Debian's build):
    ``SPLITS`` where listed, else ``ranks`` slabs across x."""
    n = " ".join(str(x) for x in SPLITS.get(ranks, (ranks, 1, 1)))
    return HEAD.format(cls="dictionary", obj="decomposeParDict") + (
        f"numberOfSubdomains {ranks};\nmethod simple;\nsimpleCoeffs {{ n ({n}); "
        "delta 0.001; }\n")


def cavity_case(root: Path, env: str, cells: int) -> tuple[Path, float]:
    """The tutorial cavity at cells x cells, meshed and decomposed for 2 ranks; its dt."""
    case = root / "cavity"
    shutil.copytree(TUTORIAL, case)
    mesh = case / "system" / "blockMeshDict"
    text, n = re.subn(r"\(20 20 1\)", f"({cells} {cells} 1)", mesh.read_text())
    if n != 1:
        raise SystemExit(f"{mesh}: expected one block of (20 20 1) cells")
    mesh.write_text(text)
    dt = 0.5 * 0.1 / cells  # Courant number 0.5 at the lid's 1 m/s on the 0.1 m cavity
    (case / "system" / "controlDict").write_text(cavity_control(1, dt))
    (case / "system" / "decomposeParDict").write_text(decompose_dict(2))
    for tool in ("blockMesh", "decomposePar -force"):
        run_foam(env, case, tool, case / f"log.{tool.split()[0]}")
    return case, dt


def decompose(env: str, case: Path, ranks: int) -> None:
    for d in case.glob("processor*"):
        shutil.rmtree(d)
    (case / "system" / "decomposeParDict").write_text(decompose_dict(ranks))
    run_foam(env, case, "decomposePar -force", case / f"log.decomposePar.{ranks}")


# -- measuring, tracing, replaying -------------------------------------------------------------

def steps_done(log: Path, steps: int) -> list[float]:
    """The ExecutionTime (CPU s) of each step; stops when the run did not make ``steps``."""
    text = log.read_text()
    done = len(re.findall(r"^Time = ", text, re.M))
    if done != steps:
        raise SystemExit(f"{log}: {done} steps, expected {steps}")
    return [float(x) for x in re.findall(r"^ExecutionTime = ([0-9.eE+-]+) s", text, re.M)]


def measure(env: str, case: Path, dt: float, lo: int, hi: int, repeat: int) -> dict:
    """Wall time per step of the untraced 2-rank icoFoam (hi - lo steps over their time)."""
    per_step, cpu = [], []
    for i in range(repeat):
        walls = {}
        for n in (lo, hi):
            (case / "system" / "controlDict").write_text(cavity_control(n, dt))
            log = case / f"log.icoFoam.{n}.{i}"
            walls[n] = run_foam(env, case, f"{MPIRUN} -np 2 icoFoam -parallel", log)
            ex = steps_done(log, n)
            _clear_times(case)
        per_step.append((walls[hi] - walls[lo]) / (hi - lo))
        cpu.append((ex[-1] - ex[lo - 1]) / (hi - lo))
    return {"s_per_step": statistics.median(per_step), "runs_s_per_step": per_step,
            "cpu_s_per_step": statistics.median(cpu), "loadavg_1min": os.getloadavg()[0]}


def trace(env: str, case: Path, out: Path, cmd: str, steps: int, write_control) -> dict:
    """``haloflow trace`` of one run of ``steps`` steps; its totals per rank."""
    (case / "system" / "controlDict").write_text(write_control(steps))
    log = out.parent / f"{out.name}.log"
    run_foam(env, case, f"{BIN / 'haloflow'} trace -o {out} --mpicc {MPICC} -- {cmd}", log)
    steps_done(log, steps)
    _clear_times(case)
    ranks = sorted(out.glob("rank-*.json"), key=lambda p: int(p.stem.split("-")[1]))
    docs = [json.loads(p.read_text()) for p in ranks]
    return {"dir": str(out), "steps": steps, "ranks": len(docs),
            "compute_s": sum(float(d.get("compute_s", 0.0)) for d in docs),
            "messages": sum(d["calls"].get(k, 0) for d in docs for k in ("send", "isend")),
            "collectives": sum(v for d in docs for k, v in d["calls"].items()
                               if k not in ("send", "isend", "recv", "irecv", "wait",
                                            "waitall", "init", "finalize")),
            "log": str(log)}


def replay(tr: Path, networks: str, extra: list[str], out: Path) -> dict[str, float]:
    """Simulated seconds of the whole trace on each network (``haloflow predict``)."""
    cmd = [str(BIN / "haloflow"), "predict", "--engine", "simgrid", "--trace", str(tr),
           "--steps", "1", "--network", networks, *extra, "-o", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{res.stdout[-2000:]}{res.stderr[-2000:]}")
    rows = json.loads((out / "simgrid.json").read_text())["rows"]
    return {r["network"]: r["simulated_s"] for r in rows}


def cavity(env: str, root: Path, a, shm: list[str]) -> dict:
    case, dt = cavity_case(root, env, a.cells)
    measured = measure(env, case, dt, a.steps_lo, a.steps_hi, a.repeat)
    cmd = f"{MPIRUN} -np 2 icoFoam -parallel"
    sim, traces = {}, {}
    for n in (a.steps_lo, a.steps_hi):
        traces[n] = trace(env, case, root / f"cavity-tr{n}", cmd, n,
                          lambda s: cavity_control(s, dt))
        sim[n] = replay(root / f"cavity-tr{n}", "shm", ["--cores-per-node", "2", *shm],
                        root / f"cavity-replay{n}")["shm"]
    step = (sim[a.steps_hi] - sim[a.steps_lo]) / (a.steps_hi - a.steps_lo)
    traced_cpu = (traces[a.steps_hi]["compute_s"] - traces[a.steps_lo]["compute_s"]) / 2 / (
        a.steps_hi - a.steps_lo)
    return {"cells": a.cells * a.cells, "dt": dt, "steps": [a.steps_lo, a.steps_hi],
            "measured": measured, "replayed_s_per_step": step,
            "traced_compute_s_per_step_per_rank": traced_cpu,
            "ratio": step / measured["s_per_step"], "traces": traces}


def les(env: str, root: Path, a) -> list[dict]:
    case = foam_case(root, env, van_driest=False, decompose=False)
    rows = []
    for ranks in a.ranks:
        decompose(env, case, ranks)
        cmd = f"{MPIRUN} -np {ranks} pisoFoam -parallel"
        sim, traces = {}, {}
        for n in (a.les_lo, a.les_hi):
            tr = root / f"les{ranks}-tr{n}"
            traces[n] = trace(env, case, tr, cmd, n, les_control)
            sim[n] = replay(tr, ",".join(NETWORKS), ["--cores-per-node", "2", "--cpu-speed",
                                                     str(a.cpu_speed)],
                            root / f"les{ranks}-replay{n}")
        k = a.les_hi - a.les_lo
        step = {net: (sim[a.les_hi][net] - sim[a.les_lo][net]) / k for net in NETWORKS}
        cpu = (traces[a.les_hi]["compute_s"] - traces[a.les_lo]["compute_s"]) / k
        msgs = (traces[a.les_hi]["messages"] - traces[a.les_lo]["messages"]) / k
        colls = (traces[a.les_hi]["collectives"] - traces[a.les_lo]["collectives"]) / k
        rows.append({"ranks": ranks, "nodes": -(-ranks // 2), "step_s": step,
                     "ratio_tcp_lowlatency": step[NETWORKS[0]] / step[NETWORKS[1]],
                     "traced_compute_s_per_step_all_ranks": cpu,
                     "messages_per_step": msgs, "collectives_per_step": colls,
                     "loadavg_1min": os.getloadavg()[0], "traces": traces})
        print(f"  {ranks} ranks: {step}", flush=True)
    return rows


def print_tables(doc: dict) -> None:
    c = doc.get("cavity")
    if c:
        m = c["measured"]
        print(f"\nicoFoam cavity {c['cells']} cells, 2 ranks, steps {c['steps'][0]}->"
              f"{c['steps'][1]} (load {m['loadavg_1min']:.2f})")
        print(f"{'measured s/step':>16} {'replayed s/step':>16} {'replayed/measured':>18} "
              f"{'traced CPU s/step/rank':>23}")
        print(f"{m['s_per_step']:16.5f} {c['replayed_s_per_step']:16.5f} {c['ratio']:18.3f} "
              f"{c['traced_compute_s_per_step_per_rank']:23.5f}")
    rows = doc.get("les")
    if rows:
        print(f"\npisoFoam kEqn LES PitzDaily3D, 2 CPUs per node, --cpu-speed "
              f"{doc['cpu_speed']}")
        print(f"{'CPUs':>5} {'nodes':>5} {'gige-tcp s/step':>16} {'lowlatency s/step':>18} "
              f"{'tcp/lowlat':>11} {'msgs/step':>10} {'colls/step':>11} {'CPU s/step':>11}")
        for r in rows:
            s = r["step_s"]
            print(f"{r['ranks']:5d} {r['nodes']:5d} {s[NETWORKS[0]]:16.4f} "
                  f"{s[NETWORKS[1]]:18.4f} {r['ratio_tcp_lowlatency']:11.3f} "
                  f"{r['messages_per_step']:10.0f} {r['collectives_per_step']:11.0f} "
                  f"{r['traced_compute_s_per_step_all_ranks']:11.3f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", type=int, default=200, help="cavity cells per side")
    ap.add_argument("--steps-lo", type=int, default=5)
    ap.add_argument("--steps-hi", type=int, default=25)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--shm", type=Path, metavar="FILE.out",
                    help="shared-memory curve (haloflow netpipe on 2 ranks; default: the "
                         "cached one predict uses)")
    ap.add_argument("--ranks", default="8,18,36")
    ap.add_argument("--les-lo", type=int, default=1)
    ap.add_argument("--les-hi", type=int, default=4)
    ap.add_argument("--cpu-speed", type=float, default=0.33,
                    help="a 2007-era core against this machine's (docs/model.md)")
    ap.add_argument("--no-cavity", action="store_true")
    ap.add_argument("--no-les", action="store_true")
    ap.add_argument("--keep", type=Path, metavar="DIR", help="work here and keep it")
    ap.add_argument("-o", "--output", type=Path, default=RESULTS / "openfoam_replay.json")
    a = ap.parse_args()
    a.ranks = [int(x) for x in a.ranks.split(",")]
    if not (1 <= a.steps_lo < a.steps_hi and 1 <= a.les_lo < a.les_hi and a.cells >= 20):
        ap.error("expected 1 <= --steps-lo < --steps-hi, 1 <= --les-lo < --les-hi, "
                 "--cells >= 20")
    gone = missing()
    if gone:
        print(f"openfoam_replay: missing {gone}", file=sys.stderr)
        return 2
    env = foam_env()
    shm = ["--shm", str(a.shm)] if a.shm else []
    doc = {"date": __import__("datetime").date.today().isoformat(),
           "loadavg_start": os.getloadavg(), "cpu_speed": a.cpu_speed,
           "networks": list(NETWORKS)}
    with tempfile.TemporaryDirectory(prefix="openfoam-replay-") as tmp:
        root = (a.keep or Path(tmp)).resolve()  # commands run inside the case folders
        root.mkdir(parents=True, exist_ok=True)
        if not a.no_cavity:
            doc["cavity"] = cavity(env, root, a, shm)
        if not a.no_les:
            doc["les"] = les(env, root, a)
    doc["loadavg_end"] = os.getloadavg()
    print_tables(doc)
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps(doc, indent=1))
    print(f"\nwrote {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
