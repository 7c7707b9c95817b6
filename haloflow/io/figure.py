"""The one way haloflow makes a figure: matplotlib's object API on the Agg canvas.

Never pyplot: plotting needs no display, leaves matplotlib's global backend alone and is
safe in any rank or thread.  Imported only where a plot is drawn (matplotlib is heavy).
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def figure(width: float = 6.4, height: float = 4.6) -> Figure:
    """A constrained-layout figure of ``width`` x ``height`` inches with its own canvas."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save(fig: Figure, path: str | Path, dpi: int = 120) -> None:
    """Write ``fig`` as a PNG."""
    fig.savefig(path, dpi=dpi)
