"""``haloflow predict``: time per step, speedup and efficiency on networks and rank counts the
user does not have, from one run's profile.json (the model is in ``study/model.py``)."""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from . import gains as G
from . import model as M
from . import predict_simgrid as S
from .trace import TraceError

EPILOG = """\
examples:
  haloflow run cavity --set mesh.cells=[256,256,1] --steps 30 -o runs/c256
  haloflow predict --profile runs/c256/profile.json --network infiniband-fdr --ranks 1..1024
  haloflow predict --profile runs/c256/profile.json --network gige-tcp,infiniband-sdr,my.out \\
      --ranks 1..512 --cores-per-node 16 --compare -o runs/c256-predict

networks: gige-tcp (about 50 us, 100 MB/s), gige-lowlatency (11 us, 110 MB/s), infiniband-sdr
(7.6 us, 822 MB/s), infiniband-fdr (1 us, 6 GB/s), shm (this machine's shared memory, measured
with `haloflow netpipe` on first use and cached), or a NetPIPE .out file (from `haloflow
netpipe` or NetPIPE itself; the whole curve is used).  Messages between ranks of one node
always use the shared-memory curve (--shm FILE.out to give your own).  Each network has a
host CPU overhead per message and per byte (LogGP's o; a .out file's from the FILE.json
`haloflow netpipe --cpu` writes beside it): the "stack" column is the share of a step the
host's network stack burns, and back-to-back messages overlap the latency no CPU spends.

Other machines: --cpu-speed X scales the computation (per-core speed against the calibration
machine), --node-bandwidth GBPS shares a node's memory bandwidth between its ranks (a
memory-bound case runs slower per cell with more ranks per node), --threads-per-rank T.

The rank's halos come from partitioning the run's own mesh (case.toml beside profile.json)
with its decomposition method at every rank count; without it, a structured process grid.
How the model works and where it is known to be wrong: docs/model.md.
"""

EXACT_LIMIT = 4_000_000  # partition the real mesh up to this many cells


def add_parser(sub) -> None:
    p = sub.add_parser(
        "predict", help="predict time per step on other networks and rank counts",
        description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", type=Path, metavar="RUN/profile.json",
                   help="profile.json of a run (a 1-rank run is the usual calibration); "
                        "required but with --engine simgrid")
    p.add_argument("--network", default="shm", metavar="NAME|FILE.out[,...]",
                   help="network preset(s) or NetPIPE .out file(s), comma-separated "
                        "(default: shm)")
    p.add_argument("--ranks", default="1..64", metavar="LIST",
                   help="rank counts: A..B (powers of two from A to B) or a comma list "
                        "(default 1..64)")
    p.add_argument("--cores-per-node", type=int, metavar="C",
                   help="cores per node; ranks fill nodes in order (default: this machine's "
                        f"{os.cpu_count()})")
    p.add_argument("--threads-per-rank", type=int, metavar="T",
                   help="threads of each rank on the target (default: the profiled run's); "
                        "a node holds cores-per-node / T ranks")
    p.add_argument("--cpu-speed", type=float, default=1.0, metavar="X",
                   help="per-core compute speed of the target relative to the calibration "
                        "machine (0.5: half as fast; default 1)")
    p.add_argument("--node-bandwidth", type=float, metavar="GBPS",
                   help="memory bandwidth of one target node in GB/s (STREAM triad with all "
                        "cores), shared by the ranks on it (default: not limiting)")
    p.add_argument("--calib-bandwidth", type=float, metavar="GBPS",
                   help="with --node-bandwidth: GB/s one core of the calibration machine "
                        "streams (default: a triad measured here now)")
    p.add_argument("--bytes-per-cell", type=float, metavar="B",
                   help="with --node-bandwidth: memory traffic per cell per step (default: "
                        "all measured compute at the calibration bandwidth, the memory-bound "
                        "bound)")
    p.add_argument("--thread-efficiency", type=float, metavar="E",
                   help="parallel efficiency of a rank's threads for the 'what would pay' "
                        "table (speedup T x E on T threads; default: the profiled run's "
                        "utilisation when it ran threads, else 1)")
    p.add_argument("--agglomerate", type=int, metavar="ROWS",
                   help="price the run with [solver.pressure] agglomerate = ROWS (coarse "
                   "AMG levels below ROWS rows per rank on fewer ranks); default: the "
                   "profiled run's")
    p.add_argument("--alternative", type=Path, action="append", default=[],
                   metavar="RUN/profile.json",
                   help="a profile of the same case run another way (another "
                        "solver.pressure.cycle, method or tolerance): each is priced at every "
                        "rank count beside --profile and the fastest named (repeatable)")
    p.add_argument("--shm", type=Path, metavar="FILE.out",
                   help="shared-memory curve for messages within a node (default: measured "
                        "here once and cached)")
    p.add_argument("--compare", action="store_true",
                   help="all networks in one plot per metric (default: one plot per network)")
    p.add_argument("-o", "--outdir", type=Path,
                   help="write predict.csv, predict.json and plots here (new or empty)")
    p.add_argument("--quiet", action="store_true", help="only the summary lines")
    S.add_arguments(p)


def parse_ranks(text: str) -> list[int]:
    try:
        if ".." in text:
            a, b = (int(x) for x in text.split(".."))
            if a < 1 or b < a:
                raise ValueError
            out, r = [], 1
            while r <= b:
                if r >= a:
                    out.append(r)
                r *= 2
            out += [a, b]
        else:
            out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise M.ModelError(f"--ranks {text!r}: expected A..B (1 <= A <= B) or a comma "
                           "list of positive integers") from None
    if not out or min(out) < 1:
        raise M.ModelError(f"--ranks {text!r}: rank counts must be positive")
    return sorted(set(out) | {1})


def shm_curve(path: Path | None) -> M.Curve:
    """This machine's shared-memory curve: given, cached, or measured now (two ranks of the
    MPI launcher next to this Python, a few seconds)."""
    if path is not None:
        c = M.Curve.from_netpipe(path)
        c.name = "shm"
        return c
    out = M.shm_cache()
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        mpiexec = Path(sys.executable).parent / "mpiexec"
        cmd = [str(mpiexec), "-n", "2", sys.executable, "-m", "haloflow", "netpipe", "--quiet",
               "--max", "4M", "--perturb", "0", "--trial-time", "0.02", "-o", str(out)]
        print(f"measuring this machine's shared-memory curve: {' '.join(cmd)}", flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if r.returncode != 0 or not out.exists():
            last = (r.stderr.strip().splitlines() or ["no output"])[-1]
            raise M.ModelError(f"could not measure the shared-memory curve ({last}); "
                               "give one with --shm FILE.out")
    c = M.Curve.from_netpipe(out)
    c.name = "shm"
    c.description = f"shared memory on {platform.node()} ({out})"
    return c


def load_profile(path: Path) -> tuple[dict, M.Workload]:
    if path.is_dir():
        path = path / "profile.json"
    from ..io.netpipe_file import read_small_text

    if not path.exists():
        raise M.ModelError(f"{path}: no such profile (run `haloflow run` first; it writes "
                           "RUN/profile.json)")
    try:
        prof = json.loads(read_small_text(path, M.ModelError))
    except (json.JSONDecodeError, RecursionError) as e:
        raise M.ModelError(f"{path}: not a readable profile.json ({e})") from None
    if not isinstance(prof, dict):
        raise M.ModelError(f"{path}: not a haloflow profile")
    try:
        w = M.Workload.from_profile(prof, str(path))
    except (ValueError, OverflowError, AttributeError) as e:
        raise M.ModelError(f"{path}: not a haloflow profile ({e})") from None
    _check_workload(w, path)
    return prof, w


def _check_workload(w: M.Workload, path: Path) -> None:
    """The profile's figures as a model can use them: at least one cell, finite times and
    counts (JSON allows NaN and Infinity, and a hand-edited file may hold anything)."""
    if not 1 <= w.cells <= 2**40 or w.dims not in (1, 2, 3):
        raise M.ModelError(f"{path}: mesh cells {w.cells} and dims {w.dims}: expected at "
                           "least one cell and 1 to 3 dimensions")
    numbers = {k: getattr(w, k) for k in ("compute_s", "serial_s", "exchanges",
                                          "fields_per_exchange", "allreduces", "gathers",
                                          "mpi_call_s", "floor_s")}
    numbers["s_per_step"] = w.measured.get("s_per_step")
    numbers["ranks"] = w.measured.get("ranks")
    for k, v in numbers.items():
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < 1e30:
            raise M.ModelError(f"{path}: {k} {v!r}: expected a finite number >= 0")
    if not numbers["ranks"] >= 1 or not numbers["s_per_step"] > 0:
        raise M.ModelError(f"{path}: expected a run of at least one rank and a positive time "
                           "per step")


def run_mesh(profile_path: Path, w: M.Workload, log):
    """The profiled run's own mesh and decomposition method (from case.toml beside
    profile.json), or None when it is not at hand or too large to partition here."""
    case_file = profile_path.parent / "case.toml"
    if not case_file.exists() or w.cells > EXACT_LIMIT:
        return None
    from ..case import CaseError, load_case
    from ..limits import generated_cells
    from ..mesh import from_case

    try:
        case = load_case(str(case_file))
        n = generated_cells(case.mesh) if case.mesh.type in ("box", "step") else 0
        if n and n != w.cells:  # a case.toml that is not the profile's run
            raise ValueError(f"its mesh has {n} cells, the profile {w.cells}")
        mesh = from_case(case.mesh)
    except (CaseError, OSError, ValueError) as e:
        log(f"  cannot rebuild the mesh from {case_file} ({e}); using a process grid")
        return None
    return mesh, case.parallel.decomposition


def partition_halos(built, w: M.Workload, ranks: list[int], log) -> dict:
    """Halos at every rank count: of the run's own mesh and method (``run_mesh``) when at
    hand, else of a structured process grid."""
    ranks = [r for r in ranks if r <= w.cells]
    if built is None:
        return {p: M.halo_of_grid(w.cells, p, w.dims) for p in ranks}
    from ..parallel.decompose import decompose

    mesh, method = built
    log(f"  partitioning the run's mesh ({mesh.n_cells} cells, {method}) for "
        f"{len(ranks)} rank counts")
    ni = mesh.n_internal
    owner, nbr = mesh.owner[:ni], mesh.neighbour
    return {p: M.halo_of_partition(owner, nbr, decompose(mesh, p, method), p) for p in ranks}


def halos(profile_path: Path, w: M.Workload, ranks: list[int], log) -> dict:
    """Halos at every rank count: the run's own mesh and decomposition when at hand."""
    return partition_halos(run_mesh(profile_path, w, log), w, ranks, log)


def table(s: dict) -> list[str]:
    lines = [f"network {s['network']}",
             f"{'ranks':>6} {'nodes':>5} {'cells/rank':>10} {'s/step':>10} {'speedup':>8} "
             f"{'effic.':>7} {'compute':>9} {'halo':>9} {'reduce':>9} {'gather':>9} {'comm':>6} "
             f"{'stack':>6}"]
    for r in s["rows"]:
        lines.append(f"{r['ranks']:6d} {r['nodes']:5d} {r['cells_per_rank']:10.0f} "
                     f"{r['step_s']:10.4g} {r['speedup']:8.2f} {100 * r['efficiency']:6.1f}% "
                     f"{r['compute_s']:9.3g} {r['halo_s']:9.3g} {r['reduce_s']:9.3g} "
                     f"{r['gather_s']:9.3g} {100 * r['comm_fraction']:5.1f}% "
                     f"{100 * r['stack_fraction']:5.1f}%")
    pk, half = s["peak"], s["half_efficiency"]
    lines.append(f"speedup peaks at {pk['ranks']} ranks ({pk['speedup']:.1f}x, "
                 f"{pk['cells_per_rank']:.0f} cells per rank); " + (
                     f"efficiency falls below 50% at {half['ranks']} ranks "
                     f"({half['cells_per_rank']:.0f} cells per rank)" if half else
                     "efficiency stays above 50% over these rank counts"))
    return lines


def plots(outdir: Path, summaries: list[dict], compare: bool, title: str) -> list[Path]:
    import matplotlib.ticker

    from ..io.figure import figure, save

    metrics = [("step_s", "time per step [s]", True), ("speedup", "speedup", True),
               ("efficiency", "parallel efficiency", False)]
    groups = [summaries] if compare else [[s] for s in summaries]
    written = []
    for group in groups:
        fig = figure(15, 4.5)
        axes = fig.subplots(1, 3)
        for ax, (key, label, logy) in zip(axes, metrics, strict=True):
            for s in group:
                r = np.array([row["ranks"] for row in s["rows"]])
                v = np.array([row[key] for row in s["rows"]])
                ax.plot(r, v, "o-", label=s["network"], ms=4)
                pk = s["peak"]["ranks"]
                if key == "speedup":
                    ax.plot([pk], [s["peak"]["speedup"]], "k*", ms=10)
            if key == "speedup":
                r = [row["ranks"] for row in group[0]["rows"]]
                ax.plot(r, r, "k:", lw=1, label="ideal")
            if key == "efficiency":
                ax.axhline(0.5, color="grey", lw=0.8, ls="--")
                ax.set_ylim(0, 1.1)
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            if logy:
                ax.set_yscale("log")
            ax.set_xlabel("ranks")
            ax.set_ylabel(label)
            ax.grid(True, which="both", alpha=0.3)
            top = ax.secondary_xaxis(
                "top", functions=(lambda x, n=group[0]["rows"][0]["cells_per_rank"]:
                                  n / np.maximum(x, 1e-9),
                                  lambda c, n=group[0]["rows"][0]["cells_per_rank"]:
                                  n / np.maximum(c, 1e-9)))
            top.set_xlabel("cells per rank")
        axes[0].legend(fontsize=8)
        name = "compare" if compare else _safe(group[0]["network"])
        fig.suptitle(f"{title}: predicted" + ("" if compare else f" on {group[0]['network']}"))
        path = outdir / "plots" / f"predict-{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        save(fig, path, dpi=110)
        written.append(path)
    return written


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(name).name)


def main(args) -> int:
    from ..mpiutil import one_line

    try:
        return _main(args)
    except (M.ModelError, TraceError) as e:
        print(one_line(f"haloflow: error: {e}"), file=sys.stderr)
        return 2


def _outdir(path: Path) -> None:
    """New or empty: predictions never overwrite anything."""
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise M.ModelError(f"-o {path}: exists and is not an empty directory; choose a new one")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise M.ModelError(f"-o {path}: cannot create it ({e.strerror})") from None


def _positive(name: str, v, upper: float = 1e9) -> None:
    if v is not None and not 0 < v <= upper:
        raise M.ModelError(f"{name} {v}: expected a number above 0 (at most {upper:g})")


def layout(args, log) -> M.Layout:
    """Nodes, threads and cores of the target from the command line."""
    from .node import Node, triad_bandwidth

    if args.cores_per_node is not None and args.cores_per_node < 1:
        raise M.ModelError(f"--cores-per-node {args.cores_per_node}: expected at least 1")
    if args.threads_per_rank is not None and args.threads_per_rank < 1:
        raise M.ModelError(f"--threads-per-rank {args.threads_per_rank}: expected at least 1")
    for name in ("cpu_speed", "node_bandwidth", "calib_bandwidth", "bytes_per_cell"):
        _positive("--" + name.replace("_", "-"), getattr(args, name), 1e6)
    calib = args.calib_bandwidth
    if args.node_bandwidth is not None and calib is None:
        calib = triad_bandwidth() / 1e9
        log(f"  calibration core streams {calib:.1f} GB/s here (numba triad; give "
            "--calib-bandwidth for the machine that made the profile)")
    node = Node(args.cpu_speed, None if args.node_bandwidth is None else args.node_bandwidth * 1e9,
                None if calib is None else calib * 1e9, args.bytes_per_cell)
    return M.Layout(args.cores_per_node or os.cpu_count() or 1, args.threads_per_rank, node)


def thread_efficiency(args, prof: dict, w: M.Workload) -> tuple[float, str]:
    """Efficiency of a rank's threads: given, the profiled run's utilisation, or ideal."""
    if args.thread_efficiency is not None:
        _positive("--thread-efficiency", args.thread_efficiency, 1.0)
        return args.thread_efficiency, f"efficiency {args.thread_efficiency:g} (given)"
    u = prof.get("threads", {}).get("utilisation") if w.threads > 1 else None
    if isinstance(u, int | float) and 0 < u <= 1.05:
        u = min(float(u), 1.0)
        return u, f"efficiency {u:.2f} (the profiled run's utilisation)"
    return 1.0, "ideal (a 1-thread profile; give --thread-efficiency)"


def _main(args) -> int:
    log = (lambda *a: None) if args.quiet else print
    ranks = parse_ranks(args.ranks)
    lay = layout(args, log)
    cores = lay.cores_per_node
    names = [n.strip() for n in args.network.split(",") if n.strip()]
    if not names:
        raise M.ModelError("--network: expected at least one network")
    if args.engine == "simgrid":
        return _simgrid(args, names, lay, log)
    if args.timeline:
        raise M.ModelError("--timeline: only with --engine simgrid (the replay's timeline)")
    if args.profile is None:
        raise M.ModelError("--profile RUN/profile.json is required (but with --engine "
                           "simgrid --trace DIR)")
    prof, w = load_profile(args.profile)
    w = _agglomerated(args, w)
    alternatives = [(_label(args.profile), w)] + [
        (_label(a), _alternative(a, w, args.agglomerate)) for a in args.alternative]
    eff, eff_note = thread_efficiency(args, prof, w)
    nets = [None if n == "shm" else M.network(n) for n in names]
    shm = shm_curve(args.shm)
    nets = [shm if n is None else n for n in nets]
    if args.outdir is not None:
        _outdir(args.outdir)
    path = args.profile / "profile.json" if args.profile.is_dir() else args.profile
    log(f"haloflow predict: {w.cells} cells, calibrated from {w.measured['ranks']} rank(s) at "
        f"{w.measured['s_per_step']:.4g} s/step; {cores} cores per node, "
        f"{lay.threads_of(w)} thread(s) per rank, cores {lay.node.cpu_speed:g}x as fast")
    built = run_mesh(path, w, log)
    hs = partition_halos(built, w, ranks, log)
    placed = {} if built is None else G.placed_halos(*built, hs, lay.per_node(w))
    grid = {} if built is None else G.alternative_halos(*built, hs)
    summaries = []
    for net in nets:
        s = M.summary(M.sweep(w, hs, net, shm, lay))
        s["description"] = net.description
        s["latency_s"], s["bandwidth_Bps"] = net.latency, net.bandwidth
        s["overhead_s"], s["overhead_s_per_byte"] = net.o, net.o_byte
        s["gains"] = G.gains(w, hs, placed, net, shm, lay, eff, grid)
        summaries.append(s)
        lines = table(s)
        for line in (lines if not args.quiet else lines[-1:]):
            print(line)
        if not args.quiet and s["gains"]:
            print("\n".join(G.table(s["gains"], s["network"], eff_note)))
        if len(alternatives) > 1:
            s["choices"] = G.choices(_unique(alternatives), hs, net, shm, lay)
            lines = G.choices_table(s["choices"], s["network"])
            print("\n".join(lines if not args.quiet else lines[-1:]))
    imb = G.measured_imbalance(prof)
    if imb is not None and imb["imbalance"] > 1.02:
        print(f"the profiled {imb['ranks']}-rank run's compute was imbalanced "
              f"{imb['imbalance']:.2f}x (max / mean over ranks): balance = \"time\" would "
              f"take about {imb['saving_s_per_step']:.3g} s off its "
              f"{imb['s_per_step']:.3g} s step")
    if args.outdir is not None:
        _write(args.outdir, summaries, w, prof, lay, args.compare, hs)
        print(f"results in {os.path.abspath(args.outdir)} (predict.csv, predict.json, plots/)")
    return 0


def _agglomerated(args, w: M.Workload) -> M.Workload:
    """``w`` priced with ``--agglomerate`` where it is given."""
    if args.agglomerate is None:
        return w
    if not 0 <= args.agglomerate <= 10**9:
        raise M.ModelError(f"--agglomerate {args.agglomerate}: expected rows per rank from 0 "
                           "(off) to 1e9")
    return replace(w, agglomerate=int(args.agglomerate))


def _label(path: Path) -> str:
    """A profile's name in the choices table: its run folder's."""
    path = path.parent if path.name == "profile.json" else path
    return path.name or str(path)


def _unique(alternatives: list) -> list:
    """Labels made distinct (two run folders of one name: the later ones numbered)."""
    seen, out = {}, []
    for label, w in alternatives:
        seen[label] = seen.get(label, 0) + 1
        out.append((label if seen[label] == 1 else f"{label}#{seen[label]}", w))
    return out


def _alternative(path: Path, w: M.Workload, agglomerate) -> M.Workload:
    """The workload of ``--alternative`` ``path``: a profile of the same mesh as ``w``."""
    _, wa = load_profile(path)
    if wa.cells != w.cells or wa.dims != w.dims:
        raise M.ModelError(f"--alternative {path}: {wa.cells} cells in {wa.dims}D, the "
                           f"profile {w.cells} in {w.dims}D: expected the same case")
    return wa if agglomerate is None else replace(wa, agglomerate=int(agglomerate))


def _simgrid(args, names: list[str], lay: M.Layout, log) -> int:
    """SimGrid's replay of --trace on each network, the model beside it with --profile; or,
    with --profile alone, the profile's synthetic step at every --ranks."""
    if args.trace is None and args.profile is not None:
        return _simgrid_profile(args, names, lay, log)
    ranks = S.trace_ranks(args)
    nets = [None if n == "shm" else M.network(n) for n in names]
    shm = shm_curve(args.shm)
    nets = [shm if n is None else n for n in nets]
    model_of = None
    if args.profile is not None:
        _, w = load_profile(args.profile)
        path = args.profile / "profile.json" if args.profile.is_dir() else args.profile
        hs = partition_halos(run_mesh(path, w, log), w, [ranks], log)
        if ranks not in hs:
            raise M.ModelError(f"--profile {args.profile}: {w.cells} cells cannot be split "
                               f"over the trace's {ranks} ranks")
        halo = hs[ranks]

        def model_of(net):
            return M.predict(w, halo, net, shm, lay).step_s
    if args.outdir is not None:
        _outdir(args.outdir)
    return S.run(args, nets, shm, lay, model_of, log)


def _simgrid_profile(args, names: list[str], lay: M.Layout, log) -> int:
    """``--engine simgrid --profile`` without a trace: the model's step replayed."""
    S.check_profile_options(args)
    _, w = load_profile(args.profile)
    w = _agglomerated(args, w)
    shm = shm_curve(args.shm)
    nets = [shm if n == "shm" else M.network(n) for n in names]
    path = args.profile / "profile.json" if args.profile.is_dir() else args.profile
    hs = partition_halos(run_mesh(path, w, log), w, parse_ranks(args.ranks), log)
    if args.outdir is not None:
        _outdir(args.outdir)
    return S.run_profile(args, w, hs, nets, shm, lay, log)


def _write(outdir: Path, summaries, w, prof, lay, compare, hs) -> None:
    keys = ["network", "ranks", "nodes", "cells_per_rank", "step_s", "speedup", "efficiency",
            "compute_s", "halo_s", "reduce_s", "gather_s", "comm_fraction", "stack_s"]
    with open(outdir / "predict.csv", "w", newline="", encoding="utf-8") as f:
        wr = csv.writer(f)
        wr.writerow(keys)
        for s in summaries:
            for r in s["rows"]:
                wr.writerow([s["network"]] + [r[k] for k in keys[1:]])
    doc = {"cores_per_node": lay.cores_per_node, "threads_per_rank": lay.threads_of(w),
           "node": vars(lay.node), "workload": {
        k: getattr(w, k) for k in ("cells", "dims", "compute_s", "serial_s", "exchanges",
                                   "fields_per_exchange", "levels", "allreduces", "gathers",
                                   "gathered_rows", "refreshes", "gathered_nnz", "mpi_call_s",
                                   "threads", "measured", "amg_levels", "split", "iters")},
        "exact_partitions": all(h.exact for h in hs.values()), "networks": summaries,
        "measured_imbalance": G.measured_imbalance(prof)}
    (outdir / "predict.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
    title = prof.get("case", {}).get("name", "case") + f", {w.cells} cells"
    plots(outdir, summaries, compare, title)
