"""``haloflow bench halo``: every halo strategy timed on a case's real partition.

Run under mpiexec.  The mesh is built, decomposed and distributed exactly as ``haloflow run``
does, so the messages are the solver's.  For each field count every strategy is warmed up,
then R exchanges of each are timed one by one, strategies taking turns call by call so that
a change of machine load hits them all alike; a rank reports the median and the 10-90 %
spread of its samples and the table shows the slowest rank.  The same bytes sent with bare mpi4py
``Sendrecv`` calls give the floor to compare with.  ``--spmv`` also times the distributed
SpMV with each strategy, which is where ``overlap`` can hide the exchange.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path
from time import perf_counter

import numpy as np

EPILOG = """\
examples:
  mpiexec -n 2 haloflow bench halo cavity --set mesh.cells=[128,128,1]
  mpiexec -n 2 haloflow bench halo --strategies packed,aggregated --fields 3 --repeat 5000
  mpiexec -n 2 haloflow bench halo --staging device     # count host<->device copies
  mpiexec -n 2 haloflow bench halo --backend cuda --staging device   # ... on a GPU
  mpiexec -n 2 haloflow bench halo --set mesh.cells=[1024,1024,1] --fields 1 --spmv

Times are per exchange, in microseconds: the median over R calls on the slowest rank, with
the 10-90 % spread and the ratio to Sendrecv's median; then the mean, and the mean pack,
wait and unpack from the exchangers' own counters (on the slowest rank for each).
Messages and bytes are per exchange, summed over ranks.  SpMV times are per matvec: the
median over max(10, R/50) batches of 10 back-to-back matvecs, strategies taking turns.
"""

BASELINE = "sendrecv"


def add_parser(sub) -> None:
    """Register ``bench halo`` (and the ``bench`` group) on the top-level sub-parsers."""
    from ..backends import BACKENDS  # the registries' names: no numba or MPI import
    from ..parallel.halo import STAGING

    bench = sub.add_parser("bench", help="micro-benchmarks on real solver traffic",
                           description="Micro-benchmarks on real solver traffic.")
    bsub = bench.add_subparsers(dest="bench", metavar="BENCHMARK", required=True)
    p = bsub.add_parser(
        "halo", help="time every halo-exchange strategy on a case's partition",
        description=__doc__.split("\n\n", 1)[1], epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("case", nargs="?", default="cavity",
                   help="built-in case name or TOML case file (default: cavity)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a case key, e.g. mesh.cells=[512,512,1] (repeatable)")
    p.add_argument("--strategies", default="all",
                   help="comma-separated strategies, or 'all' (default)")
    p.add_argument("--fields", default="1,3,5", help="field counts per exchange (default 1,3,5)")
    p.add_argument("--staging", choices=STAGING, default="host",
                   help="where fields live and what MPI reads: host, device (staged "
                        "through counted copies) or device-aware (device buffers to a "
                        "GPU-aware MPI); default host")
    p.add_argument("--backend", choices=BACKENDS, default="cpu",
                   help="the device of device staging: cpu emulates one, cuda is a GPU "
                        "(NUMBA_ENABLE_CUDASIM=1: numba's simulator); default cpu")
    p.add_argument("--repeat", type=int, default=1000, metavar="R",
                   help="timed exchanges per strategy and field count (default 1000)")
    p.add_argument("--warmup", type=int, default=100, metavar="W",
                   help="untimed exchanges first (default 100)")
    p.add_argument("--spmv", action="store_true",
                   help="also time the distributed SpMV with each strategy")
    p.add_argument("--threads", type=int, default=1, metavar="T",
                   help="numba threads per rank (default 1)")
    p.add_argument("-o", "--output", type=Path, metavar="JSON",
                   help="results file; a PNG chart is written next to it "
                        "(default: runs/bench-halo-<case>-<cells>-<ranks>r.json)")


def _ints(text: str, what: str) -> list[int]:
    from ..mpiutil import UserError

    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        vals = []
    if not vals or min(vals) < 1:
        raise UserError(f"--{what} {text}: expected positive integers separated by commas")
    return vals


def _strategies(text: str) -> list[str]:
    from ..mpiutil import UserError
    from ..parallel.halo import STRATEGIES

    if text == "all":
        return list(STRATEGIES)
    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in names if s not in STRATEGIES]
    if bad or not names:
        raise UserError(f"--strategies {text}: unknown {', '.join(bad) or 'empty list'} "
                        f"(expected 'all' or some of {', '.join(STRATEGIES)})")
    return names


def _spread(samples: np.ndarray) -> tuple[float, float, float]:
    p10, med, p90 = np.percentile(samples, [10, 50, 90])
    return float(med), float(p10), float(p90)


def _worst(comm, med, p10, p90):
    """The slowest rank's median, with its spread."""
    allv = comm.allgather((med, p10, p90))
    return max(allv)


def _row(name, m, samples, st, comm, space="host") -> dict:
    """One table row: the slowest rank's median and spread, counters per exchange."""
    n = len(samples)
    med, p10, p90 = _worst(comm, *_spread(samples))
    mean = max(comm.allgather(float(samples.mean())))
    tot = np.sum(comm.allgather([st["messages"], st["bytes"], st["copies"], st["copy_bytes"]]),
                 axis=0)
    mx = np.max(comm.allgather([st["pack_s"], st["wait_s"], st["unpack_s"]]), axis=0)
    return {"strategy": name, "fields": m, "messages": int(tot[0]) // n,
            "bytes": int(tot[1]) // n, "copies": int(tot[2]) // n,
            "copy_bytes": int(tot[3]) // n, "us": med * 1e6, "us_p10": p10 * 1e6,
            "us_p90": p90 * 1e6, "mean_us": mean * 1e6, "pack_us": mx[0] / n * 1e6,
            "wait_us": mx[1] / n * 1e6, "unpack_us": mx[2] / n * 1e6, "space": space}


class _Sendrecv:
    """The floor: the same bytes per neighbour with one bare mpi4py ``Sendrecv`` each."""

    def __init__(self, lm, comm, m):
        from mpi4py import MPI

        from ..parallel.halo.base import HaloStats

        sc, rc = np.diff(lm.send_ptr), np.diff(lm.recv_ptr)
        self.comm, self.stats = comm, HaloStats()
        self.msgs = [([np.zeros(m * s), MPI.DOUBLE], int(q), [np.empty(m * r), MPI.DOUBLE])
                     for q, s, r in zip(lm.neighbours, sc, rc, strict=True)]
        self.bytes = 8 * m * int(sc.sum())

    def exchange(self, fields):
        for sb, q, rb in self.msgs:
            self.comm.Sendrecv(sb, q, 7399, rb, q, 7399)
        self.stats.messages += len(self.msgs)
        self.stats.bytes += self.bytes

    def close(self):
        pass


def _bench_fields(names, m, lm, comm, args) -> list[dict]:
    """Every strategy with ``m`` fields, and the Sendrecv floor, taking turns call by call,
    so that a change of machine load hits them all alike."""
    from ..parallel import halo

    exs = [_Sendrecv(lm, comm, m)] + [halo.make(n, lm, comm, staging=args.staging,
                                                backend=args.backend) for n in names]
    sp = exs[-1].space
    # a timed exchange ends when its last kernel has (launches return at once)
    done = sp.backend.synchronize if sp.on_device else (lambda: None)
    gids = lm.global_cells.astype(np.float64)
    expected = [np.sin(gids * (j + 1) * 0.7311) for j in range(m)]
    fields = [sp.asarray(e) for e in expected]
    for ex, name in zip(exs, [BASELINE, *names], strict=True):
        for f in fields:
            f[lm.n_owned:] = 0.0
        for _ in range(max(1, args.warmup)):  # one at least: the ghosts are checked next
            ex.exchange(fields)
        if name == BASELINE:
            continue
        for f, e in zip(fields, expected, strict=True):
            if not np.array_equal(sp.to_numpy(f), e):
                raise RuntimeError(f"{name}: ghost values differ from their owners'")
    st0 = [ex.stats.as_dict() for ex in exs]
    samples = np.empty((len(exs), args.repeat))
    comm.Barrier()
    for r in range(args.repeat):
        for i, ex in enumerate(exs):
            t0 = perf_counter()
            ex.exchange(fields)
            done()
            samples[i, r] = perf_counter() - t0
    rows = []
    for i, (ex, name) in enumerate(zip(exs, [BASELINE, *names], strict=True)):
        st = {k: v - st0[i][k] for k, v in ex.stats.as_dict().items()}
        if name == BASELINE:
            st["wait_s"] = float(samples[i].sum())
        rows.append(_row(name, m, samples[i], st, comm, "host" if i == 0 else sp.name))
        ex.close()
    return rows


def _bench_spmv(names, lm, comm, args) -> list[dict]:
    """Matvec of a Laplacian-like operator with each strategy; products must agree bitwise.

    Strategies take turns, one batch of back-to-back matvecs each per round after a barrier,
    so a change of machine load hits them all alike; within a batch ranks drift as they do
    in a solver, which is the slack ``overlap`` can absorb.
    """
    from ..linalg.matrix import DistMatrix, Pattern
    from ..parallel import halo
    from ..parallel.halo.overlap import OverlapExchanger

    pattern = Pattern(lm)
    ni = lm.n_internal
    coeffs = (np.full(lm.n_cells, 6.5), -np.ones(ni), -np.ones(ni))
    x = np.cos(lm.global_cells * 0.37)
    x[lm.n_owned:] = 0.0
    batches, batch = max(10, args.repeat // 50), 10
    # overlap wraps aggregated; wrapping packed too isolates what overlapping itself gains
    variants = names + (["overlap[packed]"] if "overlap" in names else [])
    mats, ys = [], []
    for name in variants:
        ex = (OverlapExchanger(lm, comm, inner="packed") if name == "overlap[packed]"
              else halo.make(name, lm, comm))
        A = DistMatrix(pattern, ex)
        A.fill(*coeffs)
        mats.append(A)
        ys.append(np.zeros(lm.n_cells))
    samples = np.empty((len(variants), batches))
    for r in range(-2, batches):
        for i, (A, y) in enumerate(zip(mats, ys, strict=True)):
            comm.Barrier()
            t0 = perf_counter()
            for _ in range(batch):
                A.matvec(x, y)
            if r >= 0:
                samples[i, r] = (perf_counter() - t0) / batch
    rows = []
    for i, name in enumerate(variants):
        same = np.array_equal(ys[i][:lm.n_owned], ys[0][:lm.n_owned])
        mats[i].ex.close()
        med, p10, p90 = _worst(comm, *_spread(samples[i]))
        rows.append({"strategy": name, "us": med * 1e6, "us_p10": p10 * 1e6,
                     "us_p90": p90 * 1e6, "bitwise_equal": bool(comm.allreduce(same, op=_min()))})
    return rows


def _min():
    from mpi4py import MPI

    return MPI.MIN


def _table(rows, staged: bool) -> str:
    base = {r["fields"]: r["us"] for r in rows if r["strategy"] == BASELINE}
    head = (f"{'strategy':<11} {'fields':>6} {'msgs':>5} {'bytes':>9} {'us/exch':>9} "
            f"{'p10-p90':>15} {'x sendrecv':>10} {'mean':>7} {'pack':>7} {'wait':>7} "
            f"{'unpack':>7}")
    if staged:
        head += f" {'copies':>6} {'copy KB':>8}"
    out = [head, "-" * len(head)]
    for r in rows:
        ratio = r["us"] / base[r["fields"]] if base.get(r["fields"]) else float("nan")
        line = (f"{r['strategy']:<11} {r['fields']:>6} {r['messages']:>5} {r['bytes']:>9} "
                f"{r['us']:>9.2f} {r['us_p10']:>7.2f}-{r['us_p90']:<7.2f} {ratio:>10.2f} "
                f"{r['mean_us']:>7.2f} {r['pack_us']:>7.2f} {r['wait_us']:>7.2f} "
                f"{r['unpack_us']:>7.2f}")
        if staged:
            line += f" {r['copies']:>6} {r['copy_bytes'] / 1024:>8.1f}"
        out.append(line)
    return "\n".join(out)


def _spmv_table(rows) -> str:
    ref = {r["strategy"]: r["us"] for r in rows}
    out = [f"{'strategy':<15} {'us/matvec':>10} {'p10-p90':>19} {'x packed':>9} {'bitwise':>8}"]
    for r in rows:
        ratio = r["us"] / ref["packed"] if "packed" in ref else float("nan")
        out.append(f"{r['strategy']:<15} {r['us']:>10.1f} {r['us_p10']:>9.1f}-{r['us_p90']:<9.1f}"
                   f" {ratio:>9.3f} {'yes' if r['bitwise_equal'] else 'NO':>8}")
    return "\n".join(out)


def _chart(path: Path, rows, spmv, title: str) -> None:
    from ..io.figure import figure, save

    fig = figure(10.0 if spmv else 7.0, 4.5)
    axes = fig.subplots(1, 2 if spmv else 1, squeeze=False)[0]
    ax = axes[0]
    names = list(dict.fromkeys(r["strategy"] for r in rows))
    counts = sorted({r["fields"] for r in rows})
    width = 0.8 / len(counts)
    for i, m in enumerate(counts):
        sel = {r["strategy"]: r for r in rows if r["fields"] == m}
        xs = [k + (i - (len(counts) - 1) / 2) * width for k, n in enumerate(names) if n in sel]
        rs = [sel[n] for n in names if n in sel]
        us = np.array([r["us"] for r in rs])
        err = np.array([[r["us"] - r["us_p10"] for r in rs], [r["us_p90"] - r["us"] for r in rs]])
        ax.bar(xs, us, width, yerr=err, capsize=2, label=f"{m} field{'s' * (m > 1)}")
    ax.set_xticks(range(len(names)), names, rotation=20)
    ax.set(ylabel="µs per exchange (median, 10-90 %)", title=title)
    ax.grid(axis="y", alpha=0.3)
    ax.legend()
    if spmv:
        ax = axes[1]
        ax.bar([r["strategy"] for r in spmv], [r["us"] for r in spmv], color="tab:gray")
        ax.set(ylabel="µs per SpMV (median)", title="SpMV, exchange included")
        ax.tick_params(axis="x", rotation=20)
        ax.grid(axis="y", alpha=0.3)
    save(fig, path)


def run(args, comm) -> dict:
    import numba

    from ..backends import BackendUnavailable
    from ..case import load_case
    from ..mpiutil import UserError
    from ..run.setup import local_mesh

    names, counts = _strategies(args.strategies), _ints(args.fields, "fields")
    for v, what in ((args.repeat, "--repeat"), (args.threads, "--threads")):
        if v < 1:
            raise UserError(f"{what} {v}: expected a positive integer")
    if args.warmup < 0:
        raise UserError(f"--warmup {args.warmup}: expected an integer >= 0")
    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    case = load_case(args.case, args.overrides)
    lm = local_mesh(case, comm)
    rows = []
    try:
        for m in counts:
            rows += _bench_fields(names, m, lm, comm, args)
    except BackendUnavailable as e:
        raise UserError(str(e)) from None
    spmv = _bench_spmv(names, lm, comm, args) if args.spmv else []
    nbrs = comm.allgather(len(lm.neighbours))
    return {"case": case.name, "cells": int(lm.n_cells_global),
            "mesh_cells": list(getattr(case.mesh, "cells", [lm.n_cells_global])),
            "ranks": comm.size, "threads": args.threads,
            "neighbours_per_rank": nbrs, "staging": args.staging, "backend": args.backend,
            "space": rows[-1]["space"], "repeat": args.repeat, "warmup": args.warmup,
            "decomposition": case.parallel.decomposition, "host": platform.node(),
            "rows": rows, "spmv": spmv}


def main(args) -> int:
    from ..case import CaseError
    from ..mpiutil import UserError, fail_fast, get_comm

    # ranks x threads = cores: no idle numba threads per rank (if numba is not loaded yet)
    os.environ.setdefault("NUMBA_NUM_THREADS", str(max(1, args.threads)))
    comm = get_comm()
    with fail_fast(comm, collective_errors=(UserError, CaseError)):
        res = run(args, comm)
        if comm.rank != 0:
            return 0
        mc = "x".join(str(c) for c in res["mesh_cells"])
        title = (f"{res['case']} {mc}, {res['ranks']} ranks, {res['staging']} staging "
                 f"({res['space']})")
        print(f"bench halo: {title}, neighbours per rank {res['neighbours_per_rank']}, "
              f"R = {res['repeat']}")
        print(_table(res["rows"], args.staging != "host"))
        if res["spmv"]:
            print(f"\nSpMV ({res['cells']} cells, {res['threads']} thread(s) per rank)")
            print(_spmv_table(res["spmv"]))
        out = args.output or Path("runs") / f"bench-halo-{res['case']}-{mc}-{res['ranks']}r.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=2), encoding="utf-8")
        png = out.with_suffix(".png")
        _chart(png, res["rows"], res["spmv"], title)
        print(f"results in {out} and {png}")
    return 0
