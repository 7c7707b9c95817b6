"""Halo exchange on a GPU: seed 004's three staging variants, timed, copies and bytes counted.

    .venv/bin/python benchmarks/gpu.py                       # 1M-cell cavity, 2 and 4 ranks
    .venv/bin/python benchmarks/gpu.py --cells 64 --ranks 2 --repeat 200

For each rank count, one ``haloflow bench halo`` job per configuration on the cavity's
partition (metis), all ranks sharing the machine's GPU:

  cpu/host            the exchange as the solver runs it today: fields in host memory
  cuda/device         fields on the GPU, MPI on host buffers: perfield = "original" (whole
                      fields cross, 2 M copies of S1 values), packed = "bandwidth-optimized"
                      (per neighbour and field, 2 M N copies), aggregated = "latency-optimized"
                      (one buffer each way, 2 copies); host buffers page-locked
  cuda/device-aware   MPI reads the device buffers (0 copies), where the MPI library says it
                      is CUDA-aware (MPIX_Query_cuda_support); else the reason is recorded

Every exchange's ghosts are checked against their owners before timing; a timed exchange
ends when its last kernel has.  Times are the slowest rank's median per exchange.  Then,
on the host (the counts do not depend on the device), copies and bytes per time step of
each variant from short ``haloflow run --staging device`` runs of the same case.

Without a CUDA GPU (or with numba's simulator switched on) nothing is timed on a device: the
script says so, records why in the JSON and exits 0.

Last, the cavity's step on the device (``--backend cuda``, one rank: assembly, solves and
corrections there, the AMG's refresh on the host) against the same run on the CPU: the 2D
cavity at ``--solve-cells``^2 (1M cells by default), ``--solve-steps`` steps, the two runs
taking turns ``--solve-repeat`` times; seconds per step (the first step left out) and in
the pressure and velocity solves, pressure iterations, and the device's copies and bytes
per step (the solves' and the step's own).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import REPO

VARIANTS = ("perfield", "packed", "aggregated")
SEED = {"perfield": "original", "packed": "bandwidth-optimized",
        "aggregated": "latency-optimized"}


SIMULATE = False  # --simulator: numba's CUDA simulator stands in for the GPU


def _env() -> dict:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "NUMBA_NUM_THREADS": "1",
           "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR", str(REPO / ".numba_cache"))}
    env["NUMBA_ENABLE_CUDASIM"] = "1" if SIMULATE else "0"  # a real device, or none
    return env


def gpu() -> tuple[str | None, str]:
    """The GPU's name, or None and why there is none."""
    probe = ("from numba import cuda\n"
             "if not cuda.is_available(): print('none'); raise SystemExit\n"
             "from numba.core import config\n"
             "if config.ENABLE_CUDASIM: print(\"numba's CUDA simulator\"); raise SystemExit\n"
             "n = cuda.get_current_device().name\n"
             "print(n.decode() if isinstance(n, bytes) else n)\n")
    try:
        res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                             env=_env(), timeout=120)
    except subprocess.TimeoutExpired:
        return None, "probing numba.cuda took over 120 s"
    out = res.stdout.strip().splitlines()
    if res.returncode != 0 or not out:
        last = (res.stderr.strip().splitlines() or ["?"])[-1]
        return None, f"numba.cuda could not be loaded ({last})"
    if out[-1] == "none":
        return None, "numba.cuda.is_available() is false: no CUDA GPU or driver"
    return out[-1], ""


def mpiexec(given: str | None) -> str:
    for cand in (given, str(Path(sys.executable).parent / "mpiexec"), shutil.which("mpiexec")):
        if cand and Path(cand).exists():
            return cand
    raise SystemExit("gpu.py: no mpiexec found (pass --mpiexec)")


def bench(a, ranks: int, backend: str, staging: str, out: Path) -> dict:
    """One ``bench halo`` job; its JSON, or {"error": the job's last line}."""
    cmd = [mpiexec(a.mpiexec), "-n", str(ranks), sys.executable, "-m", "haloflow", "bench",
           "halo", a.case, "--set", f"mesh.cells=[{a.cells},{a.cells},{a.cells}]",
           "--strategies", ",".join(VARIANTS), "--fields", a.fields, "--repeat",
           str(a.repeat), "--warmup", str(a.warmup), "--backend", backend, "--staging",
           staging, "-o", str(out)]
    print(f"  {' '.join(cmd[2:])}", flush=True)
    res = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=REPO)
    if res.returncode != 0:
        lines = (res.stderr.strip() or res.stdout.strip() or "?").splitlines()
        ours = [ln for ln in lines if ln.startswith("haloflow:")]
        return {"error": (ours or lines)[-1], "returncode": res.returncode,
                "stderr_tail": lines[-20:]}
    return json.loads(out.read_text())


def per_step(a, work: Path) -> list[dict]:
    """Copies and bytes per time step of each variant (device staging, emulated device)."""
    rows = []
    for name in VARIANTS:
        out = work / f"run-{name}"
        cmd = [mpiexec(a.mpiexec), "-n", str(a.step_ranks), sys.executable, "-m", "haloflow",
               "run", a.case, "-o", str(out), "--steps", str(a.steps), "--halo", name,
               "--staging", "device", "--quiet", "--set",
               f"mesh.cells=[{a.step_cells},{a.step_cells},{a.step_cells}]",
               "--set", "output.fields=false", "--set", "output.plots=false"]
        res = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=REPO)
        if res.returncode != 0:
            rows.append({"strategy": name, "error": (res.stderr.strip() or "?").splitlines()[-1]})
            continue
        s = json.loads((out / "summary.json").read_text())
        n = s["steps"]
        tot = {k: sum(h[k] for h in s["halo_stats"]) for k in
               ("copies", "copy_bytes", "fields", "calls")}
        rows.append({"strategy": name, "seed004": SEED[name], "ranks": a.step_ranks,
                     "cells": a.step_cells ** 3, "steps": n,
                     **{f"{k}_per_step": v / n for k, v in tot.items()}})
    return rows


def cavity_step(a, work: Path) -> list[dict]:
    """The cavity's step on the device against the CPU, 1 rank, runs taking turns."""
    rows = []
    n = a.solve_cells
    for rep in range(a.solve_repeat):
        for backend in ("cpu", "cuda"):
            out = work / f"solve-{backend}-{rep}"
            cmd = [sys.executable, "-m", "haloflow", "run", "cavity", "-o", str(out),
                   "--backend", backend, "--steps", str(a.solve_steps), "--quiet",
                   "--set", f"mesh.cells=[{n},{n},1]", "--set", "output.fields=false",
                   "--set", "output.plots=false", "--set", "postprocess.cavity=false"]
            print(f"  {' '.join(cmd[2:])}", flush=True)
            res = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=REPO)
            if res.returncode != 0:
                rows.append({"backend": backend, "repeat": rep,
                             "error": (res.stderr.strip() or "?").splitlines()[-1]})
                continue
            s = json.loads((out / "summary.json").read_text())
            prof = json.loads((out / "profile.json").read_text())
            steps = max(prof["steps"], 1)
            dev = {}  # both solves' copies and bytes and the step's own, summed
            for part in ("pressure", "momentum", "step"):
                for key, value in prof.get("device", {}).get(part, {}).items():
                    dev[key] = dev.get(key, 0) + value
            rows.append({"backend": backend, "repeat": rep, "cells": n * n,
                         "s_per_step": prof["s_per_step"],
                         **{f"{k}_s_per_step": prof["phases"][k]["mean"] / steps
                            for k in ("solve_p", "solve_U")},
                         "p_iters_mean": s["p_iters_mean"],
                         **{f"{k}_per_step": v / s["steps"] for k, v in dev.items()
                            if isinstance(v, int)}})
    return rows


def floor(repeat: int = 300) -> dict:
    """What the device path costs before any message: one pack launch (plus a
    synchronisation), and copies between page-locked host memory and the device, small and
    large (medians in microseconds, one process)."""
    from time import perf_counter

    import numpy as np

    from haloflow.backends import make

    be = make("cuda")

    def med(fn):
        fn()
        t = []
        for _ in range(repeat):
            t0 = perf_counter()
            fn()
            t.append(perf_counter() - t0)
        return float(np.median(t)) * 1e6

    out = {"device": be.describe()}
    for n in (1, 64 if SIMULATE else 10_000):  # the simulator runs a thread per value
        f = be.to_device(np.arange(2 * n, dtype=np.float64))
        cells, ptr = np.arange(n, dtype=np.int64), np.array([0, n], dtype=np.int64)
        buf = be.empty(n)

        def launch(f=f, cells=cells, ptr=ptr, buf=buf):
            be.pack([f], cells, ptr, buf)
            be.synchronize()

        out[f"pack_launch_sync_us_n{n}"] = med(launch)
    for nbytes in (16_384, 8_000_000):
        h, d = be.host_empty(nbytes // 8), be.empty(nbytes // 8)
        h[:] = 1.0
        down = med(lambda h=h, d=d: be.copy_to_host(h, d))
        up = med(lambda h=h, d=d: be.copy_to_device(d, h))
        out[f"d2h_us_{nbytes}B"], out[f"h2d_us_{nbytes}B"] = down, up
        out[f"d2h_GBs_{nbytes}B"] = nbytes / down * 1e-3
        out[f"h2d_GBs_{nbytes}B"] = nbytes / up * 1e-3
    return out


def _table(results) -> str:
    head = (f"{'ranks':>5} {'staging':<18} {'variant':<11} {'M':>2} {'copies':>6} "
            f"{'copy KB':>9} {'us/exch':>9} {'pack':>8} {'wait':>8} {'unpack':>8} "
            f"{'x host':>7}")
    out = [head, "-" * len(head)]
    for r in results:
        if "error" in r["data"]:
            out.append(f"{r['ranks']:>5} {r['label']:<18} not run: {r['data']['error']}")
            continue
        host = {(h["strategy"], h["fields"]): h["us"] for h in r.get("host_rows", [])}
        for row in r["data"]["rows"]:
            if row["strategy"] == "sendrecv":
                continue
            ref = host.get((row["strategy"], row["fields"]))
            ratio = f"{row['us'] / ref:>7.2f}" if ref else f"{'':>7}"
            out.append(f"{r['ranks']:>5} {r['label']:<18} {row['strategy']:<11} "
                       f"{row['fields']:>2} {row['copies']:>6} "
                       f"{row['copy_bytes'] / 1024:>9.1f} {row['us']:>9.1f} "
                       f"{row['pack_us']:>8.1f} {row['wait_us']:>8.1f} "
                       f"{row['unpack_us']:>8.1f} {ratio}")
    return "\n".join(out)


def _chart(path: Path, results, title: str) -> None:
    import numpy as np

    from haloflow.io.figure import figure, save

    ok = [r for r in results if "error" not in r["data"]]
    if not ok:
        return
    fig = figure(4.0 * len(ok), 4.2)
    axes = fig.subplots(1, len(ok), squeeze=False)[0]
    for ax, r in zip(axes, ok, strict=True):
        rows = [x for x in r["data"]["rows"] if x["strategy"] in VARIANTS]
        counts = sorted({x["fields"] for x in rows})
        w = 0.8 / len(counts)
        for i, m in enumerate(counts):
            sel = {x["strategy"]: x for x in rows if x["fields"] == m}
            xs = np.arange(len(VARIANTS)) + (i - (len(counts) - 1) / 2) * w
            ax.bar(xs, [sel[v]["us"] for v in VARIANTS], w, label=f"M = {m}")
        ax.set_xticks(range(len(VARIANTS)), [f"{v}\n{SEED[v]}" for v in VARIANTS], fontsize=7)
        ax.set(title=f"{r['ranks']} ranks, {r['label']}", ylabel="µs per exchange (median)")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    save(fig, path)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case", default="cavity")
    p.add_argument("--cells", type=int, default=100, help="cells per direction (default 100)")
    p.add_argument("--ranks", default="2,4", help="rank counts sharing the GPU (default 2,4)")
    p.add_argument("--fields", default="1,3", help="fields per exchange (default 1,3)")
    p.add_argument("--repeat", type=int, default=300)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--steps", type=int, default=2, help="time steps of the per-step runs")
    p.add_argument("--step-cells", type=int, default=32, help="mesh of the per-step runs")
    p.add_argument("--step-ranks", type=int, default=2)
    p.add_argument("--no-per-step", action="store_true")
    p.add_argument("--solve-cells", type=int, default=1024,
                   help="the device step's 2D cavity: cells per direction (default 1024)")
    p.add_argument("--solve-steps", type=int, default=6)
    p.add_argument("--solve-repeat", type=int, default=2)
    p.add_argument("--label", default="", help="a note for the title and JSON (e.g. MPS on)")
    p.add_argument("--mpiexec")
    p.add_argument("--simulator", action="store_true",
                   help="numba's CUDA simulator as the device: checks this script, times "
                        "mean nothing")
    p.add_argument("-o", "--output", type=Path, default=REPO / "benchmarks/results/gpu.json")
    a = p.parse_args()
    global SIMULATE
    SIMULATE = a.simulator
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1" if SIMULATE else "0"  # before numba loads
    name, why = gpu()
    res = {"host": platform.node(), "gpu": name, "label": a.label, "case": a.case,
           "cells": a.cells ** 3,
           "repeat": a.repeat, "results": [], "per_step": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if name is None:
            print(f"gpu.py: no GPU here, nothing timed on a device: {why}")
            res["no_gpu"] = why
        else:
            print(f"gpu.py: {name}; cavity {a.cells}^3 = {a.cells ** 3} cells", flush=True)
            res["floor"] = floor(3 if SIMULATE else 300)
            print("  floor (1 process): " + ", ".join(
                f"{k} {v:.1f}" for k, v in res["floor"].items() if k != "device"), flush=True)
            for ranks in (int(r) for r in a.ranks.split(",")):
                host = bench(a, ranks, "cpu", "host", work / f"h{ranks}.json")
                res["results"].append({"ranks": ranks, "label": "cpu/host", "data": host})
                for staging in ("device", "device-aware"):
                    d = bench(a, ranks, "cuda", staging, work / f"{staging}{ranks}.json")
                    res["results"].append({"ranks": ranks, "label": f"cuda/{staging}",
                                           "data": d, "host_rows": host.get("rows", [])})
            print(_table(res["results"]))
            res["cavity_step"] = cavity_step(a, work)
            for r in res["cavity_step"]:
                print(f"  {r['backend']:<5} " + (f"not run: {r['error']}" if "error" in r else
                      f"{r['s_per_step']:.4f} s/step, solve_p {r['solve_p_s_per_step']:.4f}, "
                      f"solve_U {r['solve_U_s_per_step']:.4f}, "
                      f"{r['p_iters_mean']:.1f} p iterations"))
        if not a.no_per_step:
            res["per_step"] = per_step(a, work)
            print(f"\nper time step (cavity {a.step_cells}^3, {a.step_ranks} ranks, device "
                  f"staging, counts summed over ranks):")
            for r in res["per_step"]:
                if "error" in r:
                    print(f"  {r['strategy']:<11} not run: {r['error']}")
                else:
                    mb = r["copy_bytes_per_step"] / 1e6
                    print(f"  {r['strategy']:<11} {r['seed004']:<20} "
                          f"{r['copies_per_step']:>8.0f} copies {mb:>8.2f} MB  "
                          f"({r['fields_per_step']:.0f} field exchanges)")
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps(res, indent=2), encoding="utf-8")
    if name is not None:
        _chart(a.output.with_suffix(".png"), res["results"], f"halo exchange on {name}, "
               f"cavity {a.cells}^3 {a.label}".rstrip())
    print(f"results in {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
