"""``haloflow predict --engine simgrid``: time per step from SimGrid's replay of an MPI trace
(``haloflow trace``) on a cluster built from the same networks as the analytic model, beside
the model where the traced run's profile.json is given too; or, from a profile alone, the
replay of one step that ``synth_trace`` writes from the model's own per-rank pattern on the
run's real partition at every rank count.  Where the two differ by more than ``GAP``, each
effect SimGrid has and the model has not is taken away in turn and the step replayed again:
the one whose absence brings SimGrid nearest the model is named (:func:`explain`)."""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

from . import model as M
from . import synth_trace as T
from .simgrid import Platform, replay
from .trace import TraceError
from .trace import timeline as TL
from .trace.files import decompress, summary, trace_files


def add_arguments(p) -> None:
    p.add_argument("--engine", choices=("model", "simgrid"), default="model",
                   help="model: the analytic model (default); simgrid: replay a trace "
                        "(--trace) in SimGrid on the network(s), the model beside it when "
                        "--profile is given too")
    p.add_argument("--trace", type=Path, metavar="DIR",
                   help="with --engine simgrid: a folder `haloflow trace` wrote")
    p.add_argument("--steps", type=int, default=1, metavar="N",
                   help="with --trace: time steps the trace holds (time per step = the "
                        "replay's time / N; default 1)")
    p.add_argument("--backbone", type=float, metavar="GBPS",
                   help="with --engine simgrid: a backbone shared by all nodes' traffic, in "
                        "GB/s (default: a non-blocking switch)")
    p.add_argument("--fat-tree", metavar="L;DOWN;UP;COUNT",
                   help="with --engine simgrid: the nodes in SimGrid's fat tree of these "
                        "parameters, e.g. '2;4,4;1,2;1,2' (16 hosts)")
    p.add_argument("--budget", type=float, default=1e6, metavar="ACTIONS",
                   help="with --engine simgrid and no --trace: a step of more actions is "
                        "replayed as a sample of about this many, its time scaled (default "
                        "1e6)")
    p.add_argument("--timeline", action="store_true",
                   help="with --engine simgrid and -o: also OUTDIR/timeline.json, each rank's "
                        "simulated compute and MPI calls for Perfetto or chrome://tracing")


def _link(curve: M.Curve) -> tuple[float, float]:
    """A curve as SimGrid's link: the one-way latency of an empty message and the
    asymptotic bandwidth (a preset's exactly; a NetPIPE curve's Hockney fit)."""
    bw = float(curve.bandwidth)
    lat = max(float(curve.seconds[0]) - float(curve.nbytes[0]) / bw, 0.0)
    return lat, bw


def platform(net: M.Curve, shm: M.Curve, ranks: int, per_node: int, speed: float,
             args) -> Platform:
    lat, bw = _link(net)
    loop_lat, loop_bw = _link(shm)
    return Platform(
        nodes=-(-ranks // per_node), cores=per_node, speed=speed, latency=lat, bandwidth=bw,
        loop_latency=loop_lat, loop_bandwidth=loop_bw,
        backbone_Bps=None if args.backbone is None else args.backbone * 1e9,
        fat_tree=args.fat_tree, o=net.o or 0.0, o_byte=net.o_byte)


SPEED = 1e9  # flop/s of a simulated core: a synthetic trace's compute is seconds x SPEED


def step_actions(w: M.Workload, halo: M.Halo, per_node: int) -> float:
    """About how many actions the trace of a whole step has on the ranks of ``halo``."""
    c = T.step_counts(w, halo.ranks)
    leads = M.level_leaders(w, halo.ranks, per_node) if halo.ranks > 1 else []
    hs = [halo] + [M.merged(halo, lead) for lead in leads]
    n = sum(k * (2 * len(h.src) + 2 * halo.ranks)
            for k, h in zip([c.mesh, *c.levels], hs, strict=False))
    return n + halo.ranks * (2 * c.allreduces + 3 * (c.gathers + c.refreshes) + 2)


def replay_step(w: M.Workload, halo: M.Halo, lay: M.Layout, net: M.Curve, shm: M.Curve,
                fraction: float, work: Path, args, timeout: float = 3600,
                change: Callable[[Platform], Platform] | None = None) -> float:
    """SimGrid's seconds per step of ``w`` on the ranks of ``halo`` (a ``fraction`` of the
    step replayed and scaled by ``synth_trace.sample_scale``), on the platform as
    ``change`` leaves it."""
    listing, _ = T.write(work / "traces", w, halo, lay, SPEED, fraction)
    p = platform(net, shm, halo.ranks, lay.per_node(w), SPEED, args)
    seconds = replay(listing, halo.ranks, change(p) if change else p, work / "run", (),
                     timeout)
    for f in (work / "traces").iterdir():
        f.unlink()
    return seconds * T.sample_scale(w, halo, lay, net, shm, fraction)


GAP = 0.2  # SimGrid this far from the model (either way): name the effect


def effects(p: Platform) -> list[tuple[str, Callable[[Platform], Platform]]]:
    """The effects of SimGrid's platform ``p`` that the analytic model does not have, each
    as (name, the platform without it):
    - NIC serialisation: a node's ranks share its one link; without it the link carries
      each of them at full bandwidth at once (bandwidth x cores);
    - contention and topology: a shared backbone or a fat tree; without it a non-blocking
      switch."""
    out = []
    if p.cores > 1 and p.nodes > 1:
        out.append(("NIC serialisation", lambda q: replace(q, bandwidth=q.bandwidth * q.cores)))
    if p.backbone_Bps is not None or p.fat_tree is not None:
        out.append(("contention and topology",
                    lambda q: replace(q, backbone_Bps=None, fat_tree=None)))
    return out


def explain(p: Platform, ratio: float, again: Callable, model: float) -> dict | None:
    """Where SimGrid / model (``ratio``) is beyond ``GAP``: SimGrid's ratio to the model with
    each effect of ``effects(p)`` taken away (``again(change)``: the replay's seconds on the
    changed platform), and the effect whose absence brings it nearest 1, named if that
    halves the gap (in log terms); None within the gap."""
    if abs(ratio - 1.0) <= GAP:
        return None
    without = {name: again(change) / model for name, change in effects(p)}
    best = min(without, key=lambda k: abs(math.log(without[k])), default=None)
    named = best if best is not None and \
        abs(math.log(without[best])) <= 0.5 * abs(math.log(ratio)) else None
    return {"ratio": ratio, "without": without, "named": named}


def _explained(e: dict | None) -> str | None:
    if e is None:
        return None
    parts = ", ".join(f"without {k} {v:.3f}" for k, v in e["without"].items())
    return (f"SimGrid/model {e['ratio']:.3f}" + (f"; {parts}" if parts else "")
            + (f": the difference is {e['named']}" if e["named"] else
               ": no one effect explains it (the model's busiest rank against SimGrid's "
               "every rank waiting for the others)"))


def check_profile_options(args) -> None:
    """The options of a profile's replay, before the profile is partitioned."""
    if not 1e3 <= args.budget <= 1e9:
        raise TraceError(f"--budget {args.budget:g}: expected 1e3 to 1e9 actions")
    if args.timeline:
        raise TraceError("--timeline: only with --trace (a replayed application's timeline)")


def run_profile(args, w: M.Workload, hs: dict, nets: list[M.Curve], shm: M.Curve,
                lay: M.Layout, log) -> int:
    """The profile's step replayed at every rank count of ``hs`` on every network, beside
    the analytic model's (``check_profile_options`` first)."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="haloflow-simgrid-") as tmp:
        for net in nets:
            for P in sorted(hs):
                total = step_actions(w, hs[P], lay.per_node(w))
                frac = min(1.0, args.budget / total)
                log(f"SimGrid: {net.name}, {P} ranks: {total:.3g} actions a step"
                    + (f", a {frac:.3g} sample replayed" if frac < 1 else ""))
                work = Path(tmp) / f"{P}"
                step = replay_step(w, hs[P], lay, net, shm, frac, work, args)
                model = M.predict(w, hs[P], net, shm, lay).step_s
                why = explain(
                    platform(net, shm, P, lay.per_node(w), SPEED, args), step / model,
                    partial(replay_step, w, hs[P], lay, net, shm, frac, work, args, 3600),
                    model) if model else None
                rows.append({"network": net.name, "ranks": P,
                             "nodes": -(-P // lay.per_node(w)), "actions": total,
                             "fraction": frac, "step_s": step, "model_step_s": model,
                             "effects": why})
    _print_rows(rows)
    if args.outdir is not None:
        doc = {"profile": str(args.profile), "budget": args.budget,
               "cores_per_node": lay.per_node(w), "rows": rows}
        (args.outdir / "simgrid.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
        print(f"results in {args.outdir} (simgrid.json)")
    return 0


def _print_rows(rows: list[dict]) -> None:
    print(f"{'network':<24} {'ranks':>5} {'nodes':>5} {'SimGrid s/step':>15} "
          f"{'model s/step':>13} {'SimGrid/model':>14}")
    for r in rows:
        m = r["model_step_s"]
        print(f"{r['network']:<24} {r['ranks']:5d} {r['nodes']:5d} {r['step_s']:15.5g} "
              + (f"{m:13.5g} {r['step_s'] / m:14.3f}" if m else f"{'-':>13} {'-':>14}"))
    for r in rows:
        line = _explained(r.get("effects"))
        if line:
            print(f"{r['network']}, {r['ranks']} ranks: {line}")


def trace_ranks(args) -> int:
    """The traced run's rank count (every rank's file present)."""
    if args.trace is None:
        raise TraceError("--engine simgrid needs --trace DIR (a folder `haloflow trace` "
                         "wrote)")
    if args.steps < 1:
        raise TraceError(f"--steps {args.steps}: expected at least 1")
    if args.timeline and args.outdir is None:
        raise TraceError("--timeline writes OUTDIR/timeline.json: give -o OUTDIR too")
    return len(trace_files(args.trace))


def run(args, nets: list[M.Curve], shm: M.Curve, lay: M.Layout,
        model_of: Callable[[M.Curve], float] | None, log) -> int:
    """Replay the trace on every network; ``model_of(net)``: the model's s/step there (None:
    no model beside the replay)."""
    files = trace_files(args.trace)
    ranks = len(files)
    nominal = float(summary(args.trace, 0).get("flops_per_s", 1e9))
    if not 0 < nominal < 1e18:
        raise TraceError(f"{args.trace}/rank-0.json: flops_per_s {nominal!r}: expected a "
                         "positive speed")
    threads = lay.threads or 1
    per_node = max(lay.cores_per_node // threads, 1)
    speed = nominal * (lay.node.cpu_speed if lay.node is not None else 1.0)
    log(f"SimGrid replay of {args.trace}: {ranks} ranks, {per_node} per node, "
        f"{args.steps} step(s) in the trace; cores at {speed:.4g} flop/s "
        f"(the trace's {nominal:.4g} x --cpu-speed)")
    rows, parts, warnings = [], [], []
    with tempfile.TemporaryDirectory(prefix="haloflow-simgrid-") as tmp:
        listing = decompress(files, Path(tmp) / "traces")
        for pid, net in enumerate(nets, 1):
            p = platform(net, shm, ranks, per_node, speed, args)
            # absolute: smpirun runs in ``work`` and is given the platform's path
            work = (args.outdir.resolve() / "simgrid" / _safe(net.name)) if args.outdir else \
                Path(tmp) / _safe(net.name)
            paje = work / TL.PAJE
            seconds = replay(listing, ranks, p, work,
                             extra=TL.options(paje) if args.timeline else ())
            if args.timeline:
                ev, warn = TL.events(paje, files, pid, f"SimGrid replay on {net.name}")
                parts.append(ev)
                warnings += [f"{net.name}: {w}" for w in warn]
            model = model_of(net) if model_of else None
            why = explain(p, seconds / args.steps / model,
                          partial(_replay_changed, listing, ranks, p, work, args.steps),
                          model) if model else None
            rows.append({"network": net.name, "ranks": ranks, "nodes": p.nodes,
                         "latency_s": p.latency, "bandwidth_Bps": p.bandwidth,
                         "simulated_s": seconds, "step_s": seconds / args.steps,
                         "model_step_s": model, "effects": why})
    _print_rows(rows)
    if args.outdir is not None:
        doc = {"trace": str(args.trace), "steps": args.steps, "cores_per_node": per_node,
               "speed_flops": speed, "rows": rows}
        (args.outdir / "simgrid.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
        print(f"results in {args.outdir} (simgrid.json, simgrid/NETWORK/platform.xml)")
    if parts:
        TL.write(args.outdir / "timeline.json", parts, {"trace": str(args.trace),
                                                        "warnings": warnings})
        for w in warnings:
            print(f"timeline: {w}")
        print(f"timeline in {args.outdir / 'timeline.json'} (open it in https://ui.perfetto.dev "
              "or chrome://tracing)")
    return 0


def _replay_changed(listing: Path, ranks: int, p: Platform, work: Path, steps: int,
                    change: Callable[[Platform], Platform]) -> float:
    """Seconds per step of the trace's replay on ``p`` as ``change`` leaves it."""
    return replay(listing, ranks, change(p), work / "without") / steps


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(name).name)
