"""The three numbers people quote from a NetPIPE curve: latency, peak throughput, n-half.

Definitions (the same for our sweeps and for NetPIPE files we read):

- latency: the median one-way time over the messages of at most ``small`` bytes (1-8 by
  default; those times are flat, and the median ignores a single noisy point); if the sweep
  starts above ``small``, the time of its smallest message;
- peak: the highest throughput of any size, with the size where it occurs;
- n-half: the smallest message size at which the throughput first reaches half the peak,
  interpolated linearly in log(size) between the two measured sizes around the crossing.

Also a Hockney fit ``t(n) = t0 + n / r_inf`` (least squares on relative error), whose
parameters are the latency and bandwidth a performance model adds per message.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from ...io.netpipe_file import MBIT
from .sizes import format_size


@dataclass
class Summary:
    latency_s: float
    latency_sizes: tuple[int, int]
    peak_bytes_per_s: float
    peak_mbps: float
    peak_at_bytes: int
    n_half_bytes: float | None       # None where the first size already reaches half the peak
    hockney_t0_s: float | None
    hockney_r_inf_bytes_per_s: float | None
    points: int

    def to_dict(self) -> dict:
        d = asdict(self)
        d["latency_us"] = self.latency_s * 1e6
        d["latency_sizes"] = list(self.latency_sizes)
        return d

    def line(self) -> str:
        lo, hi = self.latency_sizes
        sizes = f"{lo} B" if lo == hi else f"{lo}-{hi} B"
        nh = ("below the smallest size" if self.n_half_bytes is None
              else format_size(self.n_half_bytes))
        return (f"latency {self.latency_s * 1e6:.3f} us ({sizes}), peak "
                f"{self.peak_mbps:.0f} Mbps = {self.peak_bytes_per_s / 1e9:.2f} GB/s at "
                f"{format_size(self.peak_at_bytes)}, n1/2 {nh}")


def half_bandwidth_size(nbytes, rate) -> float | None:
    """Size where ``rate`` first reaches half its maximum (log-linear interpolation)."""
    n = np.asarray(nbytes, dtype=np.float64)
    r = np.asarray(rate, dtype=np.float64)
    half = 0.5 * r.max()
    i = int(np.argmax(r >= half))
    if i == 0:
        return None
    f = (half - r[i - 1]) / (r[i] - r[i - 1])
    return float(math.exp(math.log(n[i - 1]) + f * (math.log(n[i]) - math.log(n[i - 1]))))


def hockney_fit(nbytes, seconds) -> tuple[float | None, float | None]:
    """``(t0, r_inf)`` of ``t = t0 + n / r_inf`` minimising the relative error, or Nones."""
    n = np.asarray(nbytes, dtype=np.float64)
    t = np.asarray(seconds, dtype=np.float64)
    if len(n) < 2 or np.ptp(n) == 0:
        return None, None
    a = np.column_stack([np.ones_like(n), n]) / t[:, None]
    (t0, inv_r), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    if not (t0 > 0.0 and inv_r > 0.0):
        return None, None
    return float(t0), float(1.0 / inv_r)


def summarize(nbytes, seconds, small: int = 8) -> Summary:
    """Latency, peak and n-half of a sweep given bytes per transfer and one-way seconds."""
    n = np.asarray(nbytes, dtype=np.int64)
    t = np.asarray(seconds, dtype=np.float64)
    if n.size == 0 or n.size != t.size:
        raise ValueError("summarize: need equally long, non-empty bytes and seconds")
    order = np.argsort(n, kind="stable")
    n, t = n[order], t[order]
    sel = n <= small
    if not sel.any():
        sel = n == n[0]
    rate = n / t
    k = int(np.argmax(rate))
    t0, r_inf = hockney_fit(n, t)
    return Summary(
        latency_s=float(np.median(t[sel])),
        latency_sizes=(int(n[sel].min()), int(n[sel].max())),
        peak_bytes_per_s=float(rate[k]),
        peak_mbps=float(rate[k] * 8.0 / MBIT),
        peak_at_bytes=int(n[k]),
        n_half_bytes=half_bandwidth_size(n, rate),
        hockney_t0_s=t0,
        hockney_r_inf_bytes_per_s=r_inf,
        points=int(n.size),
    )
