"""What ``haloflow trace`` writes in its folder: ``rank-R.txt.gz`` (the rank's SimGrid
time-independent trace), ``rank-R.json`` (its calls and bytes per kind, compute seconds) and
``trace.json`` (the command, the library, the nominal compute speed)."""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

from . import TraceError

RANK_FILE = re.compile(r"rank-(\d+)\.txt\.gz")
MAX_JSON = 1 << 20  # a rank's summary is a few hundred bytes


def trace_files(folder: Path) -> list[Path]:
    """The ranks' trace files in rank order; every rank from 0 must have one."""
    if not folder.is_dir():
        raise TraceError(f"--trace {folder}: no such folder (write one with `haloflow trace`)")
    found = {}
    for p in folder.iterdir():
        m = RANK_FILE.fullmatch(p.name)
        if m:
            found[int(m.group(1))] = p
    if not found:
        raise TraceError(f"{folder}: no rank-R.txt.gz trace files (write them with "
                         "`haloflow trace`)")
    missing = sorted(set(range(max(found) + 1)) - set(found))
    if missing:
        raise TraceError(f"{folder}: no trace of rank {missing[0]} (ranks 0 to {max(found)} "
                         "expected)")
    return [found[r] for r in range(len(found))]


def actions(path: Path) -> Iterator[list[str]]:
    """A trace's actions as token lists (``[rank, name, args...]``), comments skipped."""
    try:
        with gzip.open(path, "rt", encoding="ascii") as f:
            for n, line in enumerate(f, 1):
                if line.startswith("#") or not line.strip():
                    continue
                tokens = line.split()
                if len(tokens) < 2:
                    raise TraceError(f"{path}: line {n}: expected 'RANK ACTION ...'")
                yield tokens
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as e:
        raise TraceError(f"{path}: not a readable gzip trace ({e})") from None


def summary(folder: Path, rank: int) -> dict:
    """``rank-R.json``: what the library counted on that rank."""
    path = folder / f"rank-{rank}.json"
    try:
        if path.stat().st_size > MAX_JSON:
            raise TraceError(f"{path}: larger than a rank summary can be")
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TraceError(f"{path}: missing (did rank {rank} reach MPI_Finalize?)") from None
    except (OSError, ValueError, RecursionError) as e:
        raise TraceError(f"{path}: not a readable rank summary ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("calls"), dict):
        raise TraceError(f"{path}: not a rank summary of `haloflow trace`")
    return doc


def decompress(files: list[Path], dest: Path) -> Path:
    """Plain-text copies of the traces in ``dest`` (SimGrid reads no gzip) and the list
    file ``smpirun -replay`` takes: one trace path per rank, in rank order."""
    dest.mkdir(parents=True, exist_ok=True)
    names = []
    for rank, src in enumerate(files):
        out = dest / f"rank-{rank}.txt"
        try:
            with gzip.open(src, "rb") as f, open(out, "wb") as g:
                while chunk := f.read(1 << 20):
                    g.write(chunk)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceError(f"{src}: not a readable gzip trace ({e})") from None
        names.append(str(out.resolve()))
    listing = dest / "traces.txt"
    listing.write_text("\n".join(names) + "\n", encoding="utf-8")
    return listing
