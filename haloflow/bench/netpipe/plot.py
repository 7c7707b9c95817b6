"""PNG plots of netpipe results: throughput and time against message size, pair heat maps.

Drawn with :mod:`haloflow.io.figure`, the one plot helper.
"""

from __future__ import annotations

import numpy as np
from matplotlib.ticker import FuncFormatter, NullFormatter

from ...io.figure import figure, save
from ...io.netpipe_file import mbps


def sweep_png(path, curves, title="") -> None:
    """Throughput (NetPIPE Mbps) and one-way time against bytes, log axes.

    ``curves`` maps a label to ``(bytes, seconds)``; several curves compare runs (e.g. ours
    and NetPIPE's on the same machine).
    """
    fig = figure(11.0, 4.5)
    ax_bw, ax_t = fig.subplots(1, 2)
    for label, (n, t) in curves.items():
        n, t = np.asarray(n, dtype=np.float64), np.asarray(t, dtype=np.float64)
        ax_bw.semilogx(n, mbps(n, t), ".-", ms=3, lw=1, label=label)
        ax_t.loglog(n, t * 1e6, ".-", ms=3, lw=1, label=label)
    ax_bw.set(xlabel="bytes per transfer", ylabel="throughput [Mbps, 1 Mb = 2^20 bit]",
              title="throughput")
    ax_t.set(xlabel="bytes per transfer", ylabel="time per transfer [us]",
             title="time (latency at small sizes)")
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    ax_t.yaxis.set_major_formatter(plain)
    lo, hi = ax_t.get_ylim()
    ax_t.yaxis.set_minor_formatter(plain if hi / lo < 30 else NullFormatter())
    _finish(fig, path, title, (ax_bw, ax_t), (ax_bw, ax_t))


def pairs_png(path, order, nodes, panels, title="") -> None:
    """Heat maps of rank-pair matrices, ranks ordered by node with node borders drawn.

    ``panels`` maps a title to ``(matrix, colour-bar label)``; ``order`` is the rank order,
    ``nodes`` the node index of each rank.
    """
    order = np.asarray(order)
    k = len(panels)
    fig = figure(5.0 * min(k, 2), 4.2 * ((k + 1) // 2))
    axes = np.atleast_1d(fig.subplots((k + 1) // 2, min(k, 2))).ravel()
    node_of = np.asarray(nodes)[order]
    cuts = [i - 0.5 for i in range(1, len(order)) if node_of[i] != node_of[i - 1]]
    for ax, (name, (m, label)) in zip(axes, panels.items(), strict=False):
        m = np.asarray(m, dtype=np.float64)[np.ix_(order, order)]
        im = ax.imshow(np.ma.masked_invalid(m), cmap="viridis", interpolation="nearest")
        fig.colorbar(im, ax=ax, label=label)
        ax.set(title=name, xlabel="rank", ylabel="rank",
               xticks=range(len(order)), yticks=range(len(order)))
        ax.set_xticklabels(order)
        ax.set_yticklabels(order)
        for c in cuts:
            ax.axhline(c, color="white", lw=1.5)
            ax.axvline(c, color="white", lw=1.5)
    for ax in axes[k:]:
        ax.set_visible(False)
    _finish(fig, path, title, (), ())


def cpu_png(path, points, title="") -> None:
    """CPU time per message of each side (user and system) against message size."""
    fig = figure(11.0, 4.5)
    axes = fig.subplots(1, 2)
    n = np.array([p.size for p in points], dtype=np.float64)
    for k, ax in enumerate(axes):
        user = np.array([p.cpu[k].user_s for p in points]) * 1e6
        system = np.array([p.cpu[k].sys_s for p in points]) * 1e6
        ax.loglog(n, np.maximum(user + system, 1e-3), ".-", ms=3, lw=1, label="user + system")
        ax.loglog(n, np.maximum(system, 1e-3), ".--", ms=3, lw=1, label="system")
        ax.set(xlabel="message bytes", ylabel="CPU per message [us]",
               title=f"rank {k} ({'first' if k == 0 else 'other'} side)")
    _finish(fig, path, title, axes, axes)


def overlap_png(path, rows, title="") -> None:
    """The overlap fraction against message size, with the three times beside it."""
    fig = figure(11.0, 4.5)
    ax_f, ax_t = fig.subplots(1, 2)
    n = np.array([r["message_bytes"] for r in rows], dtype=np.float64)
    ax_f.semilogx(n, [r["overlap"] for r in rows], ".-", ms=4, lw=1)
    ax_f.set(xlabel="message bytes", ylabel="overlap fraction", ylim=(-0.05, 1.05),
             title="computation hidden behind a non-blocking exchange")
    for key, label in (("exchange_s", "exchange alone"), ("compute_s", "computation alone"),
                       ("both_s", "both, computation between post and wait")):
        ax_t.loglog(n, [r[key] * 1e6 for r in rows], ".-", ms=3, lw=1, label=label)
    ax_t.set(xlabel="message bytes", ylabel="time per repetition [us]", title="times")
    _finish(fig, path, title, (ax_f, ax_t), (ax_t,))


def _finish(fig, path, title, gridded, legends) -> None:
    """Grids and legends on the axes that have them, the title, then the PNG at ``path``."""
    for ax in gridded:
        ax.grid(alpha=0.3, which="both")
    for ax in legends:
        ax.legend()
    if title:
        fig.suptitle(title)
    save(fig, path)
