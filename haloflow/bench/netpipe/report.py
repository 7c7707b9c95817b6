"""What a netpipe run prints and writes: progress lines, the ``.out``/JSON/PNG of a timed
sweep, the JSON and verdict of an integrity check.  Shared by the MPI pair and the TCP run."""

from __future__ import annotations

import json

from .config import IntegrityError
from .sizes import format_size


def say(quiet: bool, line: str) -> None:
    if not quiet:
        print(line, flush=True)


def progress_line(i: int, pt) -> str:
    """NetPIPE's per-size line, so the two are easy to read side by side."""
    from ...io.netpipe_file import mbps

    return (f"{i:3d}: {pt.bytes:9d} bytes {pt.reps:8d} times --> "
            f"{float(mbps(pt.bytes, pt.seconds)):10.2f} Mbps in {pt.seconds * 1e6:10.2f} usec")


def write_results(paths, meta: dict, points, title: str) -> dict:
    """The ``.out``, JSON and PNG of a timed sweep; returns the summary dict."""
    from ...io.netpipe_file import write_out
    from .plot import sweep_png
    from .summary import summarize

    nbytes = [p.bytes for p in points]
    secs = [p.seconds for p in points]
    s = summarize(nbytes, secs)
    for p in paths.values():
        p.parent.mkdir(parents=True, exist_ok=True)
    write_out(paths["out"], nbytes, secs)
    doc = {**meta, "summary": s.to_dict(), "summary_line": s.line(),
           "points": [p.to_dict() for p in points],
           "files": {k: str(v) for k, v in paths.items()}}
    if points and points[0].cpu is not None:
        from .plot import cpu_png

        doc["cpu"] = cpu_summary(points)
        cpu_png(paths["cpu_png"], points, f"{title}: CPU per message")
    paths["json"].write_text(json.dumps(doc, indent=1) + "\n")
    sweep_png(paths["png"], {meta.get("label", "haloflow netpipe"): (nbytes, secs)}, title)
    return doc


def cpu_fit(sizes, cpu_s) -> dict:
    """``cpu = o + n x per_byte`` by least squares over the sizes: LogGP's overhead ``o``
    and its per-byte part, for one side."""
    import numpy as np

    n = np.asarray(sizes, dtype=np.float64)
    c = np.asarray(cpu_s, dtype=np.float64)
    if len(n) >= 2 and np.ptp(n) > 0:
        slope, o = np.polyfit(n, c, 1)
    else:
        slope, o = 0.0, float(c.mean())
    return {"o_us": float(o) * 1e6, "per_byte_ns": float(slope) * 1e9,
            "small_us": float(c[n <= 8].mean() if (n <= 8).any() else c[0]) * 1e6}


def cpu_summary(points) -> dict:
    """Each side's CPU fit and busy fraction, and a line for the terminal."""
    sizes = [p.size for p in points]
    out = {}
    for k, side in enumerate(("first", "other")):
        cpu = [p.cpu[k].user_s + p.cpu[k].sys_s for p in points]
        sys_part = [p.cpu[k].sys_s for p in points]
        out[side] = cpu_fit(sizes, cpu) | {
            "sys_fraction": float(sum(sys_part) / max(sum(cpu), 1e-300)),
            "busy_median": float(sorted(p.cpu[k].busy for p in points)[len(points) // 2])}
    f, o = out["first"], out["other"]
    out["line"] = (f"CPU per message: rank 0 {f['small_us']:.3f} us at <= 8 B (fit o = "
                   f"{f['o_us']:.3f} us + {f['per_byte_ns']:.4f} ns/B, {f['sys_fraction']:.0%} "
                   f"system, busy {f['busy_median']:.0%}); rank 1 {o['small_us']:.3f} us "
                   f"(o = {o['o_us']:.3f} us + {o['per_byte_ns']:.4f} ns/B, "
                   f"{o['sys_fraction']:.0%} system, busy {o['busy_median']:.0%})")
    return out


def write_integrity(paths, meta: dict, results, failures) -> None:
    paths["json"].parent.mkdir(parents=True, exist_ok=True)
    doc = {**meta, "integrity": {"sizes": results, "mismatches": failures,
                                 "ok": not failures}}
    paths["json"].write_text(json.dumps(doc, indent=1) + "\n")


def integrity_failure(failures, nsizes: int) -> IntegrityError:
    from .check import Mismatch

    sizes = sorted({f["size"] for f in failures})
    first = Mismatch(**failures[0]).line()
    return IntegrityError(f"integrity check failed for {len(sizes)} of {nsizes} sizes; "
                          f"first: {first}")


def integrity_report(quiet):
    """Progress callback of an integrity sweep: one line per size."""
    from .check import Mismatch

    def show(res, bad):
        state = "ok" if not bad else "FAILED: " + Mismatch(**bad[0]).line()
        say(quiet, f"{res['message_bytes']:9d} bytes {res['messages']:3d} messages --> "
                    f"{state}")

    return show


def integrity_ok_line(opts, sizes, results, paths) -> str:
    total = sum(r["message_bytes"] for r in results) * opts.trials
    return (f"integrity: {len(sizes)} sizes, {opts.trials} messages per size, "
            f"{format_size(total)} per direction verified: every byte correct; "
            f"wrote {paths['json']}")
