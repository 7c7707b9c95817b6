"""Published reference data for validation: Ghia, Ghia & Shin (1982) lid-driven cavity;
de Vahl Davis (1983) and Le Quere (1991) heated cavity (see data/devahldavis.csv); the 3D
Taylor-Green vortex at Re 1600 (data/tgv_re1600_spectral.csv).

Ghia, U., Ghia, K. N. & Shin, C. T., J. Comput. Phys. 48 (1982) 387-411, Tables I and II:
u along the vertical centreline x = 0.5 and v along the horizontal centreline y = 0.5 of a
unit cavity whose lid (y = 1) moves in +x at speed 1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent.parent / "data"
GHIA_RE = (100.0, 400.0)

# (component, Re) -> positions whose tabulated value is a known misprint, left out of norms
MISPRINTS = {("v", 400.0): (0.9063,)}


def _column(name, re):
    table = np.genfromtxt(DATA / name, delimiter=",", names=True)
    pos = table.dtype.names[0]
    return np.column_stack([table[pos], table[f"Re{re:g}"]])


def _match(re):
    for known in GHIA_RE:
        if abs(re - known) <= 1e-6 * known:
            return known
    return None


def ghia(re):
    """``(table_u, table_v)`` for Re 100 or 400, else None.

    ``table_u`` has columns (y, u) on x = 0.5, ``table_v`` (x, v) on y = 0.5; walls included.
    """
    known = _match(float(re))
    if known is None:
        return None
    return _column("ghia_u.csv", known), _column("ghia_v.csv", known)


def _interior(table, comp, re):
    """Rows without the walls (first, last) and without known misprints."""
    rows = table[1:-1]
    bad = np.array(MISPRINTS.get((comp, re), ()))
    keep = ~np.isclose(rows[:, :1], bad[None, :], atol=1e-9).any(axis=1)
    return rows[keep]


def _max_dev(table, pos, sim):
    order = np.argsort(pos)
    at = np.interp(table[:, 0], np.asarray(pos)[order], np.asarray(sim)[order])
    return float(np.max(np.abs(at - table[:, 1])))


def ghia_deviation(y, u_sim_at_y, x, v_sim_at_x, re):
    """Largest |simulation - Ghia| over the interior tabulated points.

    The simulated profiles (``u`` at heights ``y`` on x = 0.5, ``v`` at ``x`` on y = 0.5) are
    interpolated linearly to the tabulated positions, so sampling at exactly those positions
    compares them directly.  Walls and the known misprint are left out.
    """
    known = _match(float(re))
    if known is None:
        raise ValueError(f"no Ghia et al. (1982) data for Re = {re}; available: {GHIA_RE}")
    tu, tv = ghia(known)
    du = _max_dev(_interior(tu, "u", known), y, u_sim_at_y)
    dv = _max_dev(_interior(tv, "v", known), x, v_sim_at_x)
    return {"max_du": du, "max_dv": dv, "max_dev": max(du, dv)}


def de_vahl_davis(ra, source="dvd"):
    """Benchmark values of the heated cavity at Rayleigh number ``ra`` (dict, None where the
    table has no row): ``source`` "dvd" is de Vahl Davis (1983), "lq" Le Quere (1991)."""
    import csv

    with open(DATA / "devahldavis.csv", encoding="utf-8") as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        for row in rows:
            if row["source"] == source and abs(float(row["Ra"]) - ra) <= 1e-6 * ra:
                return {k: float(v) for k, v in row.items() if k not in ("source", "Ra")}
    return None


def tgv_spectral() -> np.ndarray:
    """The 3D Taylor-Green vortex at Re 1600: the high-order workshop's 512^3 spectral DNS
    (see data/tgv_re1600_spectral.csv), columns t, kinetic energy, -dE_k/dt, enstrophy."""
    text = (DATA / "tgv_re1600_spectral.csv").read_text(encoding="utf-8").splitlines()
    rows = [line for line in text if line and not line.startswith("#")][1:]  # past the names
    return np.array([[float(v) for v in line.split(",")] for line in rows])
