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
    from .file import mbps

    return (f"{i:3d}: {pt.bytes:9d} bytes {pt.reps:8d} times --> "
            f"{float(mbps(pt.bytes, pt.seconds)):10.2f} Mbps in {pt.seconds * 1e6:10.2f} usec")


def write_results(paths, meta: dict, points, title: str) -> dict:
    """The ``.out``, JSON and PNG of a timed sweep; returns the summary dict."""
    from .file import write_out
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
    paths["json"].write_text(json.dumps(doc, indent=1) + "\n")
    sweep_png(paths["png"], {meta.get("label", "haloflow netpipe"): (nbytes, secs)}, title)
    return doc


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
