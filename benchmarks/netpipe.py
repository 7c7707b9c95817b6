"""haloflow netpipe side by side with Debian's NetPIPE (NPmpich2) on this machine.

    .venv/bin/python benchmarks/netpipe.py                    # 3 rounds, 1 B .. 8 MiB
    .venv/bin/python benchmarks/netpipe.py --max 64 --repeat 5 --only haloflow-native,NPmpich2

Configurations, each run once per round (interleaved, so a busy spell of a shared machine
hits all of them alike):

  haloflow-native   haloflow netpipe, compiled loop, MPICH wheel, the venv's mpiexec
  haloflow-python   the same with --engine python (Python loop over mpi4py)
  haloflow-multiple haloflow-native with MPI initialised at MPI_THREAD_MULTIPLE (mpi4py's
                    default; haloflow netpipe asks for FUNNELED, as NetPIPE's MPI_Init does)
  haloflow-debian   haloflow netpipe, compiled loop, over Debian's MPICH 4.0.2 (the library
                    NPmpich2 uses; mpi4py loads it through a libmpi.so.12 link in a temp dir)
  NPmpich2          Debian's NetPIPE 3.7.2 (`apt-get install netpipe-mpich2`), mpiexec.mpich

Every figure (latency at 1-8 B, peak throughput, n1/2) is computed the same way, by
haloflow.bench.netpipe.summary from each run's .out file, NetPIPE's included; the table shows the
median over rounds.  Results: JSON (default benchmarks/results/netpipe.json) and a PNG of
the per-size median curves.  Debian configurations are skipped when NPmpich2 or
mpiexec.mpich is not installed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import BIN, REPO

from haloflow.bench.netpipe.plot import sweep_png
from haloflow.bench.netpipe.sizes import parse_size
from haloflow.bench.netpipe.summary import summarize
from haloflow.io.netpipe_file import read_out

DEBIAN_MPICH = Path("/usr/lib/x86_64-linux-gnu/libmpich.so.12")


def _env(extra=None) -> dict:
    env = {**os.environ, "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(REPO), "NUMBA_CACHE_DIR": str(REPO / ".numba_cache")}
    env.update(extra or {})
    return env


def configurations(a, work: Path) -> dict:
    """name -> function(outfile) that runs one sweep and writes a NetPIPE .out file."""
    ours = [sys.executable, "-m", "haloflow", "netpipe", "--max", a.max, "--trial-time",
            str(a.trial_time), "--quiet"]
    confs = {}

    def haloflow(launcher, extra, env):
        def run(out):
            cmd = [*launcher, "-n", "2", *ours, *extra, "-o", str(out)]
            return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
        return run

    confs["haloflow-native"] = haloflow([str(BIN / "mpiexec")], [], _env())
    confs["haloflow-python"] = haloflow([str(BIN / "mpiexec")], ["--engine", "python"], _env())
    confs["haloflow-multiple"] = haloflow([str(BIN / "mpiexec")], [],
                                          _env({"MPI4PY_RC_THREAD_LEVEL": "multiple"}))
    deb_mpiexec, netpipe = shutil.which("mpiexec.mpich"), shutil.which("NPmpich2")
    if deb_mpiexec and DEBIAN_MPICH.exists():
        libdir = work / "debian-mpich"
        libdir.mkdir()
        (libdir / "libmpi.so.12").symlink_to(DEBIAN_MPICH)
        env = _env({"LD_LIBRARY_PATH": str(libdir), "MPI4PY_LIBMPI": "libmpi.so.12"})
        confs["haloflow-debian"] = haloflow([deb_mpiexec], [], env)
    if deb_mpiexec and netpipe:
        def npmpich2(out):
            cmd = [deb_mpiexec, "-n", "2", netpipe, "-u", str(parse_size(a.max)), "-o",
                   str(out)]
            return subprocess.run(cmd, env=_env(), capture_output=True, text=True,
                                  timeout=1800)
        confs["NPmpich2"] = npmpich2
    return {k: v for k, v in confs.items() if not a.only or k in a.only.split(",")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max", default="8M")
    ap.add_argument("--trial-time", type=float, default=0.1)
    ap.add_argument("--only", default="", help="comma-separated configuration names")
    ap.add_argument("-o", "--output", type=Path, default=REPO / "benchmarks/results/netpipe.json")
    a = ap.parse_args()

    subprocess.run([sys.executable, "-m", "haloflow", "netpipe", "--help"], env=_env(),
                   check=True, capture_output=True)
    runs: dict[str, list] = {}
    curves: dict[str, list] = {}
    with tempfile.TemporaryDirectory(prefix="netpipe-bench-") as tmp:
        work = Path(tmp)
        confs = configurations(a, work)
        print(f"configurations: {', '.join(confs)}; {a.repeat} rounds, 1 B .. {a.max}",
              flush=True)
        for r in range(a.repeat):
            for name, run in confs.items():
                out = work / f"{name}-{r}.out"
                load = os.getloadavg()[0]
                t0 = time.perf_counter()
                res = run(out)
                wall = time.perf_counter() - t0
                if res.returncode != 0 or not out.exists():
                    print(f"{name}: failed ({res.returncode}): {res.stderr.strip()[-400:]}",
                          flush=True)
                    continue
                d = read_out(out)
                s = summarize(d.bytes, d.seconds)
                runs.setdefault(name, []).append({
                    "round": r, "wall_s": wall, "load_before": load,
                    "latency_us": s.latency_s * 1e6, "peak_mbps": s.peak_mbps,
                    "peak_GBps": s.peak_bytes_per_s / 1e9, "peak_at_bytes": s.peak_at_bytes,
                    "n_half_bytes": s.n_half_bytes, "points": s.points})
                curves.setdefault(name, []).append((d.bytes, d.seconds))
                print(f"round {r} {name:16s} {s.line()}  [{wall:.0f} s, load {load:.1f}]",
                      flush=True)

    table = {}
    for name, rs in runs.items():
        table[name] = {k: statistics.median(x[k] for x in rs if x[k] is not None)
                       for k in ("latency_us", "peak_mbps", "peak_GBps", "n_half_bytes")
                       if any(x[k] is not None for x in rs)}
        table[name]["rounds"] = len(rs)
    print(f"\n{'median of rounds':18s} {'latency us':>11} {'peak Mbps':>11} {'peak GB/s':>10} "
          f"{'n1/2 bytes':>11}")
    for name, t in table.items():
        print(f"{name:18s} {t['latency_us']:11.3f} {t['peak_mbps']:11.0f} "
              f"{t['peak_GBps']:10.2f} {t.get('n_half_bytes', float('nan')):11.0f}")
    if "NPmpich2" in table:
        ref = table["NPmpich2"]
        for name, t in table.items():
            if name != "NPmpich2":
                t["latency_minus_netpipe_us"] = t["latency_us"] - ref["latency_us"]
                t["peak_vs_netpipe"] = t["peak_mbps"] / ref["peak_mbps"]
                print(f"{name}: latency {t['latency_minus_netpipe_us']:+.3f} us vs NPmpich2, "
                      f"peak {100 * t['peak_vs_netpipe']:.0f}% of NPmpich2")

    a.output.parent.mkdir(parents=True, exist_ok=True)
    doc = {"machine": {"node": platform.node(), "cpus": os.cpu_count(),
                       "processor": platform.processor()},
           "settings": {"max": a.max, "trial_time_s": a.trial_time, "repeat": a.repeat},
           "median": table, "runs": runs}
    a.output.write_text(json.dumps(doc, indent=1) + "\n")
    med = {}
    for name, cs in curves.items():
        n0 = cs[0][0]
        same = [t for n, t in cs if len(n) == len(n0) and (n == n0).all()]
        med[name] = (n0, np.median(np.array(same), axis=0))
    if med:
        sweep_png(a.output.with_suffix(".png"), med,
                  "ping-pong, 2 ranks, shared memory: median over rounds")
    print(f"wrote {a.output}", flush=True)


if __name__ == "__main__":
    main()
