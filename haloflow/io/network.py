"""Networks as curves: the one-way time of a message against its size, from published
figures (presets, the Hockney line ``latency + bytes / bandwidth`` with LogGP's host overhead)
or from a NetPIPE ``.out`` file a user measured.

Why here, low in the layers: a case file names its network (``[parallel] network``), a run
emulates one (``parallel/emulation.py``) and the model prices one (``study/model.py``), so all
three read the same curve.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Published figures (one-way latency in seconds, asymptotic bandwidth in bytes/s) and the host
# CPU overhead of one message on each side (LogGP's o, seconds, and its part per byte): TCP's
# is `haloflow netpipe --cpu` over TCP loopback (docs/performance.md), the kernel-bypass
# layers' an assumed order of magnitude (posting a descriptor and polling, docs/model.md).
PRESETS = {
    "gige-tcp": (50e-6, 100e6, "Gigabit Ethernet, MPI over TCP (NetPIPE-measured)",
                 10.7e-6, 0.106e-9),
    "gige-lowlatency": (11e-6, 110e6, "Gigabit Ethernet, low-latency messaging layer",
                        2e-6, 0.0),
    "infiniband-sdr": (7.6e-6, 822e6, "InfiniBand SDR 4x, MPI", 1e-6, 0.0),
    "infiniband-fdr": (1.0e-6, 6e9, "InfiniBand FDR-class, MPI", 0.3e-6, 0.0),
}


class ModelError(ValueError):
    """A profile or network the model cannot use; the message says which and why."""


def shm_cache():
    """Where this machine's shared-memory curve is cached (``haloflow predict`` measures it
    on first use)."""
    import os
    import platform
    from pathlib import Path

    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "haloflow"
    return cache / f"shm-{platform.node()}.out"


@dataclass
class Curve:
    """One-way transfer time as a function of message size, read off a measured curve."""

    name: str
    nbytes: np.ndarray  # increasing message sizes
    seconds: np.ndarray  # one-way time of each
    description: str = ""
    o: float | None = None  # CPU seconds per message on each side (None: unknown)
    o_byte: float = 0.0  # and per byte

    def __post_init__(self):
        n = np.asarray(self.nbytes, dtype=np.float64)
        t = np.asarray(self.seconds, dtype=np.float64)
        order = np.argsort(n, kind="stable")
        n, t = n[order], t[order]
        keep = np.concatenate([[True], np.diff(n) > 0])  # one time per size: the fastest
        sizes = n[keep]
        best = np.minimum.reduceat(t, np.flatnonzero(keep))
        if len(sizes) < 2:
            raise ModelError(f"network {self.name!r}: need at least two message sizes")
        # never slower if smaller: a measurement's noise only ever adds time, so one slow
        # small message (a first size caught by a context switch) must not raise every
        # size after it
        self.nbytes, self.seconds = sizes, np.minimum.accumulate(best[::-1])[::-1]
        tail = max(len(sizes) // 8, 1)  # asymptotic bandwidth from the largest messages
        dn = sizes[-1] - sizes[-1 - tail]
        dt = self.seconds[-1] - self.seconds[-1 - tail]
        self.bandwidth = dn / dt if dt > 0 else sizes[-1] / self.seconds[-1]
        if self.o is not None:  # never more CPU per side than half a one-way transfer
            self.o = min(max(self.o, 0.0), 0.5 * float(self.seconds[0]))
            self.o_byte = min(max(self.o_byte, 0.0), 0.5 / self.bandwidth)

    @classmethod
    def hockney(cls, name: str, latency: float, bandwidth: float, description: str = "",
                o: float | None = None, o_byte: float = 0.0):
        """``latency + bytes / bandwidth`` sampled from 1 B to 64 MiB."""
        n = np.unique(np.round(np.logspace(0, 26, 105, base=2.0)))
        return cls(name, n, latency + n / bandwidth, description, o, o_byte)

    @classmethod
    def from_netpipe(cls, path) -> Curve:
        """A ``.out`` file; the CPU overhead from the JSON beside it when `haloflow netpipe
        --cpu` wrote one (the mean of both sides' fits), else unknown."""
        from .netpipe_file import NetpipeFormatError, read_out

        try:
            d = read_out(path)
        except (OSError, NetpipeFormatError) as e:
            raise ModelError(str(e)) from None
        o, o_byte = _netpipe_cpu(path)
        return cls(str(path), d.bytes, d.seconds, f"NetPIPE curve {path}", o, o_byte)

    @property
    def overhead(self) -> float:
        """CPU seconds per message per side: measured, or half the latency when unknown
        (every microsecond of a message then counts as the host's, as a ping-pong sees it)."""
        return 0.5 * float(self.seconds[0]) if self.o is None else self.o

    def cpu(self, nbytes):
        """Host CPU seconds both sides spend on messages of ``nbytes``."""
        n = np.maximum(np.asarray(nbytes, dtype=np.float64), 1.0)
        return 2.0 * (self.overhead + self.o_byte * n)

    def sequence(self, nbytes) -> float:
        """Seconds for one rank's messages of ``nbytes`` (an array) sent one after another
        (LogGP): each costs its whole one-way time, but the part of the latency no CPU spends
        (the wire and the switch) is paid once, as later messages leave while the first
        travels.  With an unknown overhead nothing overlaps."""
        n = np.asarray(nbytes, dtype=np.float64)
        if n.size == 0:
            return 0.0
        return float(self.time(n).sum()) - (n.size - 1) * self.pipelined

    @property
    def pipelined(self) -> float:
        """The latency no CPU spends: what a message sent right after another saves."""
        return max(float(self.seconds[0]) - 2.0 * self.overhead, 0.0)

    @property
    def latency(self) -> float:
        return float(self.time(1))

    def time(self, nbytes):
        """Seconds for messages of ``nbytes`` (array or scalar): log-log interpolation inside
        the measured range, the smallest message's time below it, bandwidth-limited above."""
        n = np.maximum(np.asarray(nbytes, dtype=np.float64), 1.0)
        inside = np.exp(np.interp(np.log(n), np.log(self.nbytes), np.log(self.seconds)))
        t = np.where(n <= self.nbytes[0], self.seconds[0], inside)
        return np.where(n > self.nbytes[-1],
                        self.seconds[-1] + (n - self.nbytes[-1]) / self.bandwidth, t)


def _netpipe_cpu(path) -> tuple[float | None, float]:
    """LogGP's o and its per-byte part from ``FILE.json`` beside ``FILE.out`` (its ``cpu``
    fits, both sides averaged), or (None, 0) where there is none."""
    import json
    from pathlib import Path

    side = Path(path).with_suffix(".json")
    try:
        cpu = json.loads(side.read_text(encoding="utf-8"))["cpu"]
        fits = [cpu["first"], cpu["other"]]
        o = sum(max(float(f["small_us"]), 0.0) for f in fits) / 2e6
        o_byte = sum(max(float(f["per_byte_ns"]), 0.0) for f in fits) / 2e9
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None, 0.0
    return (o, o_byte) if math.isfinite(o) and math.isfinite(o_byte) else (None, 0.0)


def network(spec: str) -> Curve:
    """A preset name or a NetPIPE ``.out`` path."""
    if spec in PRESETS:
        lat, bw, text, o, o_byte = PRESETS[spec]
        return Curve.hockney(spec, lat, bw, text, o, o_byte)
    if spec.endswith(".out") or "/" in spec:
        return Curve.from_netpipe(spec)
    raise ModelError(f"unknown network {spec!r}: expected one of {', '.join(PRESETS)}, 'shm', "
                     "or a NetPIPE .out file")
