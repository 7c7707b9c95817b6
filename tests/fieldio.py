"""Reading a run's fields back for tests: every piece, reordered by global cell id."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def read_fields(outdir: Path, name: str = "cavity") -> dict[str, np.ndarray]:
    meshio = __import__("pytest").importorskip("meshio")
    pieces = sorted((Path(outdir) / "fields").glob(f"{name}_*.vtu"))
    assert pieces, f"no field pieces in {outdir}/fields"
    data: dict[str, list] = {}
    for piece in pieces:
        m = meshio.read(piece)
        for k, v in m.cell_data.items():
            data.setdefault(k, []).append(np.concatenate(v))
    out = {k: np.concatenate(v) for k, v in data.items()}
    order = np.argsort(out["cell_id"])
    assert np.array_equal(out["cell_id"][order], np.arange(len(order))), "cells missing or twice"
    return {k: v[order] for k, v in out.items()}
