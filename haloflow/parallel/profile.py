"""One run's profile (docs/design.md, section 9): where the time of every rank went.

Each rank reports its phase timers, the counters of every halo exchanger it used (the
solver's and the AMG coarse levels') and its allreduce counters; rank 0 summarises them
(min/mean/max over ranks, share of the time loop, compute imbalance, communication fraction,
exchanges and allreduces per step) and writes ``profile.json``, which later tools read instead
of measuring again.  Its ``counts`` are what each rank sent and reduced per step, and what the
pressure and momentum solves' share was (they scale with the iterations): the figures the
performance model's own counts are checked against.  Schema: docs/profile.md.
"""

from __future__ import annotations

import json
import os
import platform
from time import perf_counter, process_time, thread_time

import numpy as np
from numba import njit

SCHEMA = 2
# Phases inside the time loop.  They do not overlap, except "halo_solve" (the exchanges made
# by matrix-vector products), which is part of solve_U and solve_p; "halo" is the solver's
# other exchanges.
LOOP_PHASES = ("assemble", "fluxes", "solve_U", "solve_p", "halo", "monitor", "halo_solve",
               "amg_replicated")
NESTED = ("halo_solve", "amg_replicated")
HALO_KEYS = ("calls", "fields", "messages", "bytes", "pack_s", "wait_s", "unpack_s",
             "compiled")
REDUCE_KEYS = ("calls", "seconds", "compiled")
# phases whose communication is counted on its own: per iteration of their solves
COUNTED_PHASES = ("solve_p", "solve_U")
COUNT_KEYS = ("exchanges", "fields", "messages", "bytes", "allreduces")


def counter(exchangers, reduce_stats):
    """A function returning this rank's communication so far (``COUNT_KEYS``): every
    exchanger's calls, field exchanges, messages and bytes, and the allreduces."""

    def counts() -> dict:
        out = {"exchanges": 0, "fields": 0, "messages": 0, "bytes": 0,
               "allreduces": int(reduce_stats.calls)}
        for ex in exchangers:
            st = ex.stats.as_dict()
            out["exchanges"] += st["calls"]
            for k in ("fields", "messages", "bytes"):
                out[k] += st[k]
        return out

    return counts


def rank_record(lmesh, timers, exchangers, reduce_stats, loop_s: float) -> dict:
    """This rank's raw figures (plain types, cheap to gather).  From the first record on, the
    ``COUNTED_PHASES`` of ``timers`` count their communication too."""
    if hasattr(timers, "count_with"):
        timers.count_with(counter(exchangers, reduce_stats), COUNTED_PHASES)
    halo = dict.fromkeys(HALO_KEYS, 0)
    for ex in exchangers:
        st = ex.stats.as_dict()
        for k in HALO_KEYS:
            halo[k] += st[k]
    return {
        "cells": int(lmesh.n_owned), "ghosts": int(lmesh.n_ghost),
        "neighbours": int(len(lmesh.neighbours)), "loop_s": float(loop_s),
        "phases": timers.as_dict(), "halo": halo,
        "allreduce": {"calls": int(reduce_stats.calls), "seconds": float(reduce_stats.seconds),
                      "compiled": int(reduce_stats.compiled)},
        # CPU seconds so far of the whole process and of the thread running the loop (its
        # thread blocks' critical path where other threads share the work: threads.account)
        "cpu_s": process_time(), "main_thread_cpu_s": thread_time(),
    }


def since(record: dict, earlier: dict) -> dict:
    """The loop figures of ``record`` minus those of an ``earlier`` record of the same rank
    (the first time step, whose one-time costs a per-step profile leaves out).  Phases
    outside the loop (set-up, I/O) are kept whole."""
    out = dict(record)
    out["loop_s"] = record["loop_s"] - earlier["loop_s"]
    out["phases"] = {}
    for k, v in record["phases"].items():
        e = earlier["phases"].get(k) if k in LOOP_PHASES else None
        out["phases"][k] = v if e is None else {
            "seconds": v["seconds"] - e["seconds"], "calls": v["calls"] - e["calls"],
            **({"counts": {c: n - e.get("counts", {}).get(c, 0)
                           for c, n in v["counts"].items()}} if "counts" in v else {})}
    out["halo"] = {k: record["halo"][k] - earlier["halo"][k] for k in HALO_KEYS}
    out["allreduce"] = {k: record["allreduce"][k] - earlier["allreduce"][k]
                        for k in REDUCE_KEYS}
    for k in ("cpu_s", "main_thread_cpu_s"):
        out[k] = record[k] - earlier[k]
    return out


def amg_since(info: dict | None, earlier: dict | None) -> dict | None:
    """AMG level exchanges, redundant-level allgathers and refreshes made since ``earlier``
    (same hierarchy)."""
    if not info or not earlier or len(info["levels"]) != len(earlier["levels"]):
        return info
    levels = [{**lv, **{k: lv[k] - e[k] for k in ("exchanges", "compiled_exchanges",
                                                            "visits")
                        if k in lv and k in e}}
              for lv, e in zip(info["levels"], earlier["levels"], strict=True)]
    counts = {k: info[k] - earlier[k] for k in ("allgathers", "refreshes")
              if k in info and k in earlier}
    return {**info, "levels": levels, **counts}


def mpi_call_seconds(repeat: int = 2000) -> float:
    """Seconds one fused allreduce costs in haloflow's Python layer with no network under it
    (``MPI_Allreduce`` of two doubles on a 1-rank communicator, called as the solvers call
    it).  The performance model adds it to every reduction the wire latency does not cover."""
    from .reduce import self_reducer

    red = self_reducer()
    red.parallel = True  # time the MPI path even on one rank
    best = float("inf")
    for _ in range(3):
        t0 = perf_counter()
        for _ in range(repeat):
            red.sum(1.0, 2.0)
        best = min(best, (perf_counter() - t0) / repeat)
    return best


@njit(cache=True)
def _empty_kernel(a, b, c, d, n):  # pragma: no cover - compiled
    """Five arguments and no work, as the Krylov loops' small reduction kernels take."""
    return a[0] + n


def kernel_call_seconds(repeat: int = 2000) -> float:
    """Seconds one compiled kernel call costs with no work in it (numba dispatch and the
    Python around it): the floor of every step that more ranks do not shrink."""
    a = np.ones(1)
    best = float("inf")
    for _ in range(3):
        t0 = perf_counter()
        for _ in range(repeat):
            _empty_kernel(a, a, a, a, 1)
        best = min(best, (perf_counter() - t0) / repeat)
    return best


def machine() -> dict:
    return {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version()}


def _spread(values) -> dict:
    v = np.asarray(values, dtype=float)
    return {"per_rank": v.tolist(), "min": float(v.min()), "mean": float(v.mean()),
            "max": float(v.max())}


def counts(records: list[dict], steps: int, amg: dict | None) -> dict:
    """Per rank and step: halo exchanges (every exchanger's: the mesh's and the distributed
    AMG levels'), messages and bytes sent (``transfers``: the AMG's other messages, partial
    restrictions and corrections of aggregates held elsewhere), allreduces and allgathers
    (the redundant AMG level's right-hand side per visit and coefficients per refresh: the
    same on every rank);
    ``busiest``: the most of each over the ranks; ``phases``: the means over ranks of what
    the pressure and momentum solves made of them (``COUNTED_PHASES``)."""
    n = max(steps, 1)
    gathers = (amg.get("allgathers", 0) + amg.get("refreshes", 0)) / n if amg else 0.0
    per_rank = {
        "exchanges": [r["halo"]["calls"] / n for r in records],
        "messages": [r["halo"]["messages"] / n for r in records],
        "bytes": [r["halo"]["bytes"] / n for r in records],
        "allreduces": [r["allreduce"]["calls"] / n for r in records],
        "gathers": [gathers] * len(records),
        # the AMG's point-to-point transfers into coarse levels (not halo exchanges)
        "transfers": [r.get("transfers", 0) / n for r in records]}
    phases = {}
    for name in COUNTED_PHASES:
        got = [r["phases"].get(name, {}).get("counts") for r in records]
        if all(g is not None for g in got):
            phases[name] = {k: float(np.mean([g[k] for g in got])) / n for k in COUNT_KEYS}
    return {"per_rank": per_rank, "busiest": {k: max(v) for k, v in per_rank.items()},
            "phases": phases}


def summarise(records: list[dict], steps: int, iterations: dict, extra: dict | None = None) -> dict:
    """The profile.json document from every rank's record (rank 0); ``extra`` adds keys such
    as ``mesh`` and ``machine`` that the performance model reads."""
    loop = np.array([r["loop_s"] for r in records])
    names = sorted({k for r in records for k in r["phases"]},
                   key=lambda k: (k not in LOOP_PHASES, k))
    phases = {}
    for k in names:
        s = _spread([r["phases"].get(k, {}).get("seconds", 0.0) for r in records])
        s["calls"] = [r["phases"].get(k, {}).get("calls", 0) for r in records]
        s["share_of_loop"] = s["mean"] / loop.mean() if k in LOOP_PHASES and loop.mean() else None
        s["nested"] = k in NESTED
        phases[k] = s
    halo = {k: _spread([r["halo"][k] for r in records]) for k in HALO_KEYS}
    red = {k: _spread([r["allreduce"][k] for r in records]) for k in REDUCE_KEYS}
    comm_s = np.array([r["halo"]["pack_s"] + r["halo"]["wait_s"] + r["halo"]["unpack_s"]
                       + r["allreduce"]["seconds"] for r in records])
    compute = np.maximum(loop - comm_s, 0.0)
    n = max(steps, 1)
    return {
        "schema": SCHEMA,
        "ranks": len(records),
        "steps": steps,
        "cells": [r["cells"] for r in records],
        "ghosts": [r["ghosts"] for r in records],
        "neighbours": [r["neighbours"] for r in records],
        "loop_s": _spread(loop),
        "s_per_step": float(loop.max() / n),
        "phases": phases,
        "halo": halo,
        "allreduce": red,
        "compute_s": _spread(compute),
        "cpu_s": _spread([r["cpu_s"] for r in records]),
        "main_thread_cpu_s": _spread([r["main_thread_cpu_s"] for r in records]),
        "imbalance": float(compute.max() / compute.mean()) if compute.mean() > 0 else 1.0,
        "comm_fraction": float(comm_s.mean() / loop.mean()) if loop.mean() > 0 else 0.0,
        "per_step": {
            "halo_exchanges": halo["calls"]["mean"] / n,
            "field_exchanges": halo["fields"]["mean"] / n,
            "messages": halo["messages"]["mean"] / n,
            "bytes": halo["bytes"]["mean"] / n,
            "allreduces": red["calls"]["mean"] / n,
            # of those, made from compiled code: no Python call cost around them
            "compiled_exchanges": halo["compiled"]["mean"] / n,
            "compiled_allreduces": red["compiled"]["mean"] / n,
            **{k: v for k, v in iterations.items()},
        },
        "counts": counts(records, steps, (extra or {}).get("amg")),
        **(extra or {}),
    }


def table(profile: dict) -> list[str]:
    """A compact text table for the log: phase, min/mean/max seconds over ranks, % of loop."""
    lines = [f"{'phase':<12} {'min s':>9} {'mean s':>9} {'max s':>9} {'% loop':>7}"]
    rows = list(profile["phases"].items()) + [
        ("halo wait", profile["halo"]["wait_s"]), ("allreduce", profile["allreduce"]["seconds"])]
    loop = profile["loop_s"]["mean"]
    for name, s in rows:
        share = s.get("share_of_loop", s["mean"] / loop if loop else None)
        pct = f"{100 * share:6.1f}%" if share is not None else "      -"
        label = f"  ({name})" if s.get("nested") or name in ("halo wait", "allreduce") else name
        lines.append(f"{label:<12} {s['min']:9.3f} {s['mean']:9.3f} {s['max']:9.3f} {pct}")
    ps = profile["per_step"]
    lines.append(f"imbalance (max/mean compute) {profile['imbalance']:.3f}, communication "
                 f"{100 * profile['comm_fraction']:.1f}% of the loop; per step: "
                 f"{ps['halo_exchanges']:.1f} halo exchanges, {ps['allreduces']:.1f} allreduces, "
                 f"{ps['bytes'] / 1e3:.1f} kB sent per rank")
    return lines


def write(path, profile: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(profile, f, indent=1)
