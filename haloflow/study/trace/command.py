"""``haloflow trace``: run an MPI application with the tracing library preloaded into every
rank and print what each rank did (calls, bytes, compute)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from . import TraceError
from .build import find_mpicc, library
from .files import summary, trace_files

EPILOG = """\
examples:
  haloflow trace -o runs/tr -- .venv/bin/mpiexec -n 2 .venv/bin/haloflow run cavity --steps 20
  haloflow trace -o runs/of --mpicc mpicc.openmpi --after 5 --for 10 -- \\
      mpirun.openmpi -np 4 icoFoam -parallel
  haloflow predict --engine simgrid --trace runs/tr --network gige-tcp
  haloflow predict --engine simgrid --trace runs/tr --network gige-tcp --timeline -o runs/tl

Writes DIR/rank-R.txt.gz (SimGrid's time-independent trace of rank R: the replay input of
`smpirun -replay`), DIR/rank-R.json (its calls and bytes per kind) and DIR/trace.json.
The compute between two MPI calls is the thread's CPU time (--clock), written as flops at
--flops flop/s.  A window: --after S starts at the first collective of all ranks once every
rank has run S seconds, --for S stops S seconds later; MPI_Pcontrol(0) and (1) in the
application pause and resume.  The library is built on first use with the MPI compiler
wrapper of the application's MPI (--mpicc; default: the MPICH wheel's beside this Python).
exit codes: 0 success, 1 the application failed, 2 bad input or a missing tool.
"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "trace", help="trace an MPI application for SimGrid's replay",
        description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--outdir", type=Path, required=True, metavar="DIR",
                   help="folder for the traces (new or empty)")
    p.add_argument("--mpicc", metavar="WRAPPER",
                   help="MPI compiler wrapper of the application's MPI (default: the MPICH "
                        "wheel's mpicc beside this Python, else mpicc on PATH)")
    p.add_argument("--after", type=float, default=0.0, metavar="S",
                   help="start tracing after S seconds, at a collective of all ranks")
    p.add_argument("--for", dest="duration", type=float, default=0.0, metavar="S",
                   help="stop tracing S seconds after it started (0: until MPI_Finalize)")
    p.add_argument("--clock", choices=("thread", "process", "wall"), default="thread",
                   help="what a compute burst is: the calling thread's CPU time (default), "
                        "the process's (threaded ranks), or wall-clock time")
    p.add_argument("--flops", type=float, default=1e9, metavar="F",
                   help="nominal speed: a CPU second is written as F flops (default 1e9)")
    p.add_argument("--quiet", action="store_true", help="only the totals")
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- LAUNCHER ...",
                   help="the launcher and application, after --")


def main(args) -> int:
    from ...mpiutil import one_line

    try:
        return _main(args)
    except TraceError as e:
        print(one_line(f"haloflow: error: {e}"), file=sys.stderr)
        return 2


def _check(args) -> list[str]:
    cmd = list(args.argv)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise TraceError("no command to trace: give it after --, e.g. `haloflow trace -o DIR "
                         "-- mpiexec -n 2 python app.py`")
    for name, v in (("--after", args.after), ("--for", args.duration)):
        if not 0 <= v < 1e9:
            raise TraceError(f"{name} {v}: expected seconds >= 0")
    if not 0 < args.flops < 1e18:
        raise TraceError(f"--flops {args.flops}: expected a positive speed")
    out = args.outdir
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise TraceError(f"-o {out}: exists and is not an empty directory; choose a new one")
    return cmd


def _main(args) -> int:
    cmd = _check(args)
    cc = find_mpicc(args.mpicc)
    lib = library(cc)
    out = args.outdir.resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["LD_PRELOAD"] = ":".join(x for x in (str(lib), env.get("LD_PRELOAD", "")) if x)
    env.update(HALOFLOW_TRACE_DIR=str(out), HALOFLOW_TRACE_CLOCK=args.clock,
               HALOFLOW_TRACE_FLOPS=repr(args.flops), HALOFLOW_TRACE_AFTER=repr(args.after),
               HALOFLOW_TRACE_FOR=repr(args.duration))
    if not args.quiet:
        print(f"tracing with {lib} (built by {cc}): {' '.join(cmd)}", flush=True)
    try:
        rc = subprocess.run(cmd, env=env).returncode
    except OSError as e:
        raise TraceError(f"cannot run {cmd[0]} ({e.strerror})") from None
    meta = {"command": cmd, "library": str(lib), "mpicc": cc, "clock": args.clock,
            "flops_per_s": args.flops, "after_s": args.after, "for_s": args.duration,
            "exit_code": rc}
    (out / "trace.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    if rc != 0:
        print(f"haloflow: error: the traced command exited with code {rc}", file=sys.stderr)
        return 1
    try:
        files = trace_files(out)
    except TraceError:
        raise TraceError(f"no rank wrote a trace in {out}: is the application built with the "
                         f"MPI of {cc} (give its own wrapper with --mpicc)?") from None
    rows = [summary(out, r) for r in range(len(files))]
    print("\n".join(table(rows, quiet=args.quiet)))
    return 0


P2P = ("send", "isend")
COLLECTIVES = ("barrier", "bcast", "reduce", "allreduce", "allgather", "allgatherv", "gather",
               "gatherv", "scatter", "scatterv", "alltoall", "alltoallv", "reducescatter",
               "scan", "exscan")


def table(rows: list[dict], quiet: bool = False) -> list[str]:
    """Per rank: messages and bytes sent, waits, collectives, compute, skipped calls."""
    lines = [f"{'rank':>5} {'messages':>9} {'bytes sent':>12} {'waits':>7} {'collect.':>9} "
             f"{'coll. bytes':>12} {'compute s':>10} {'skipped':>8}"]
    tot = [0, 0, 0, 0, 0, 0.0, 0]
    for d in rows:
        c, b = d["calls"], d["bytes"]
        v = [sum(c.get(k, 0) for k in P2P), sum(b.get(k, 0) for k in P2P),
             c.get("wait", 0) + c.get("waitall", 0), sum(c.get(k, 0) for k in COLLECTIVES),
             sum(b.get(k, 0) for k in COLLECTIVES), float(d.get("compute_s", 0.0)),
             d.get("skipped", 0)]
        tot = [a + x for a, x in zip(tot, v, strict=True)]
        if not quiet:
            lines.append(f"{d['rank']:5d} {v[0]:9d} {v[1]:12d} {v[2]:7d} {v[3]:9d} {v[4]:12d} "
                         f"{v[5]:10.4g} {v[6]:8d}")
    lines.append(f"{'all':>5} {tot[0]:9d} {tot[1]:12d} {tot[2]:7d} {tot[3]:9d} {tot[4]:12d} "
                 f"{tot[5]:10.4g} {tot[6]:8d}")
    if tot[6]:
        lines.append("skipped: collectives on communicators smaller than MPI_COMM_WORLD and "
                     "neighbourhood collectives without a topology (the replay cannot play them)")
    return lines
