"""NetPIPE's ``.out`` format: one line per message size, ``bytes Mbps seconds``.

NetPIPE 3.x writes each line as ``"%8d %lf %12.8lf"``: the bytes moved per transfer (for its
bidirectional mode, both directions together), the throughput in NetPIPE's megabits (bits
divided by 2**20 per second, not 10**6) and the time of one transfer in seconds (half a round
trip for ping-pong).  Older versions separate the columns with tabs and some add CPU-time
columns.  We write exactly the 3.x layout, with no header, so that NetPIPE's users' plotting
scripts read our files, and read any of those variants, so that ``haloflow predict`` takes
files measured with NetPIPE itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

MBIT = float(1 << 20)  # NetPIPE's "Mbps" unit: 2**20 bits per second


def mbps(nbytes, seconds):
    """Throughput in NetPIPE's Mbps (bits / 2**20 / s)."""
    return np.asarray(nbytes, dtype=np.float64) * 8.0 / (np.asarray(seconds) * MBIT)


@dataclass
class NetpipeData:
    """The three columns of a ``.out`` file, as arrays of equal length."""

    bytes: np.ndarray     # int64: bytes per transfer
    mbps: np.ndarray      # float64: NetPIPE Mbps
    seconds: np.ndarray   # float64: time of one transfer

    def __len__(self) -> int:
        return len(self.bytes)


class NetpipeFormatError(ValueError):
    """A file that is not NetPIPE output; the message names file and line."""


def format_line(nbytes: int, seconds: float) -> str:
    """One line as NetPIPE 3.x prints it (``%8d %lf %12.8lf``)."""
    return f"{int(nbytes):8d} {float(mbps(nbytes, seconds)):f} {seconds:12.8f}\n"


def write_out(path, nbytes, seconds) -> None:
    """Write a ``.out`` file; Mbps is recomputed from bytes and seconds, as NetPIPE does."""
    lines = [format_line(n, t) for n, t in zip(nbytes, seconds, strict=True)]
    Path(path).write_text("".join(lines))


MAX_TEXT = 16 << 20  # a NetPIPE curve is a few hundred lines


def read_small_text(path: Path, error=ValueError, limit: int = MAX_TEXT) -> str:
    """A regular file's text, read no further than ``limit`` bytes (``/dev/zero`` or a
    multi-gigabyte file named by mistake must not be read to the end), as UTF-8."""
    try:
        if not path.is_file():
            raise error(f"{path}: {'not a regular file' if path.exists() else 'no such file'}")
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise error(f"{path}: cannot read ({e.strerror})") from None
    if len(data) > limit:
        size = f"{limit >> 20} MiB" if limit % (1 << 20) == 0 else f"{limit} bytes"
        raise error(f"{path}: larger than {size}; expected a small text file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{path}: not a text file (not UTF-8)") from None


def read_out(path) -> NetpipeData:
    """Read NetPIPE output (3.x spaces or 2.x tabs, extra columns ignored, '#' comments).

    The seconds column is what a model needs; the printed Mbps has only six decimals, so it
    is kept as written rather than trusted for small messages.
    """
    path = Path(path)
    rows = []
    for k, line in enumerate(read_small_text(path, NetpipeFormatError).splitlines(), start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        cols = text.split()
        try:
            if len(cols) < 3:
                raise ValueError
            n, rate, t = int(float(cols[0])), float(cols[1]), float(cols[2])
        except ValueError:
            hint = (" (NetPIPE's integrity-check output has no timings)"
                    if len(cols) == 2 else "")
            raise NetpipeFormatError(
                f"{path} line {k}: expected 'bytes Mbps seconds', got {line.strip()!r}{hint}"
            ) from None
        if n < 1 or not 0.0 < t < float("inf") or not 0.0 <= rate < float("inf"):
            raise NetpipeFormatError(
                f"{path} line {k}: bytes must be >= 1 and seconds > 0, got {line.strip()!r}")
        rows.append((n, rate, t))
    if not rows:
        raise NetpipeFormatError(f"{path}: no 'bytes Mbps seconds' lines")
    a = np.array(rows, dtype=np.float64)
    n, rate, t = a[:, 0], a[:, 1], a[:, 2]
    return NetpipeData(n.astype(np.int64), rate, _sharpen(n, rate, t))


def _sharpen(n, rate, t):
    """Seconds to more digits where the Mbps column has them.

    ``%12.8lf`` keeps only 10 ns of a 300 ns latency (two digits), while the Mbps column of
    the same line has six decimals: where the two agree to the printed precision (so the
    file does use NetPIPE's Mbps), the time recomputed from Mbps is the sharper one.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        t_rate = n * 8.0 / (rate * MBIT)
        agree = np.abs(t_rate - t) <= 0.51e-8 + 1e-6 * t
        sharper = 0.5e-6 / rate < 0.5e-8 / t
    return np.where(agree & sharper & (rate > 0), t_rate, t)
