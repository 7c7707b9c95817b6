"""DFG 1995 cylinder benchmark post-processing (Schäfer & Turek 1996): forces, dp, L_a, St.

Definitions (Schäfer & Turek, "Benchmark computations of laminar flow around a cylinder",
Notes on Numerical Fluid Mechanics 52 (1996) 547-566), rho = 1:

- ``c_D = 2 F_D / (rho Ubar^2 D)``, ``c_L = 2 F_L / (rho Ubar^2 D)``, the force per unit
  depth (the mesh is one cell thick: the force is divided by its thickness), ``Ubar`` the
  mean inflow velocity (the inlet's ``U``), ``D`` the diameter;
- ``dp = p(0.15, 0.2) - p(0.25, 0.2)``, the front and back points of the cylinder;
- ``L_a = x_r - 0.25``, ``x_r`` where ``u`` on the axis ``y = 0.2`` behind the cylinder turns
  from negative to positive;
- ``St = D f / Ubar``, ``f`` the frequency of the lift.

The force on the cylinder is what the fluid exerts on it, summed over the faces of the
``cylinder`` patch, whose area vectors ``S`` point out of the fluid, into the cylinder:
pressure ``p_f S`` and wall shear ``nu |S| (U_P - U_w)_t / d_n`` (the tangential part of the
velocity of the wall cell P over its normal distance from the wall: the same wall flux the
momentum equation uses, so the force is the momentum the discrete equations lose there).
The wall pressure ``p_f`` is the cell value extrapolated to the face centre with a
least-squares gradient from the cell's interior neighbours (exact for a linear field and
independent of the solver's zero-gradient wall condition); plain cell values are kept as
``cd_cell_p`` for comparison.  The two points of ``dp`` lie on the wall: the pressure there
is extrapolated the same way from the wall cell(s) nearest to them (two cells in a tie).

Every rank sums its own faces; one fused allreduce per step (:meth:`Cylinder.sample`).
"""

from __future__ import annotations

import math
import os

import numpy as np

from .base import PostProcessor
from .step import reattachment

# Published ranges (Schäfer & Turek 1996, table 4 and 5: the band the best results of the
# participating groups fall in), per benchmark Reynolds number.
REFERENCE = {
    20.0: {"test": "2D-1 (steady, Re = 20)", "cd": [5.57, 5.59], "cl": [0.0104, 0.0110],
           "la": [0.0842, 0.0852], "dp": [0.1172, 0.1176]},
    100.0: {"test": "2D-2 (periodic, Re = 100)", "cd_max": [3.22, 3.24],
            "cl_max": [0.99, 1.01], "st": [0.295, 0.305], "dp_half_period": [2.46, 2.50]},
}
MAX_SERIES = 2000  # summary.json time series are subsampled to at most this many points
MIN_PERIODS = 3  # lift periods needed for a Strouhal number


def reference(re: float) -> dict | None:
    """The published ranges at ``re`` (20 or 100, to 0.1 %), None for other Reynolds numbers."""
    for r, ref in REFERENCE.items():
        if abs(re - r) <= 1e-3 * r:
            return {k: list(v) if isinstance(v, list) else v for k, v in ref.items()}
    return None


class Cylinder(PostProcessor):
    """Forces and ``dp`` each step (collective: every rank calls :meth:`sample`), the time
    series kept on every rank (a few floats per step), the final report on rank 0."""

    name = "cylinder"
    samples = True
    gathers = True

    def __init__(self, lmesh, case, solver, red):
        from ..mesh.cylinder import CENTRE, DIAMETER
        from .wall_forces import lsq_stencil, wall_sums

        super().__init__(lmesh, case, solver, red)
        once = red.with_stats(None)  # set-up reductions stay out of the run's counts
        self.nu = float(case.physics.nu)
        self.u_mean = abs(float(case.boundary["inlet"].U[0]))
        self.depth = float(case.mesh.thickness)
        self.diameter = DIAMETER
        self.re = self.u_mean * self.diameter / self.nu
        self.scale = 2.0 / (self.u_mean ** 2 * self.diameter * self.depth)  # rho = 1
        self.algorithm = solver.algorithm
        g, n = lmesh.geometry, lmesh.n_owned
        patch = lmesh.patch("cylinder")
        faces = np.arange(patch.start, patch.start + patch.size)
        faces = faces[lmesh.owner[faces] < n]
        self.cells = lmesh.owner[faces].astype(np.int64)
        self.sf = np.ascontiguousarray(g.face_areas[faces])
        self.rf = np.ascontiguousarray(g.face_centres[faces] - g.cell_centres[self.cells])
        mag = np.linalg.norm(self.sf, axis=1)
        self.dn = np.abs(np.einsum("ij,ij->i", self.rf, self.sf)) / mag
        self.uw = np.ascontiguousarray(solver.bc.u_value[faces - lmesh.n_internal])
        self.ptr, self.nbr, self.coef = lsq_stencil(lmesh, self.cells)
        self.grad = np.zeros((len(self.cells), 3))
        self.out = np.zeros(9)
        self.wall_sums = wall_sums  # compiled: loaded with the first cylinder run only

        # dp: the wall cells nearest to the front and back points, found over all ranks
        cx, cy = CENTRE
        r = 0.5 * self.diameter
        z = float(g.cell_centres[:, 2].mean()) if len(g.cell_centres) else 0.0
        self.points = np.array([[cx - r, cy, z], [cx + r, cy, z]])
        self.pick = []  # per point: (indices into the wall faces, offsets to the point)
        self.count = []
        for x in self.points:
            dist = np.linalg.norm((g.cell_centres[self.cells] - x)[:, :2], axis=1)
            (dmin,) = once.min(float(dist.min(initial=np.inf)))
            k = np.flatnonzero(dist <= dmin * (1.0 + 1e-9))
            k = k[np.unique(self.cells[k], return_index=True)[1]]  # a cell once
            self.pick.append((k, x - g.cell_centres[self.cells[k]]))
            self.count.append(int(once.sum(float(len(k)))[0]))
        self.series: list[tuple] = []  # (time, Fx, Fy, dp, Fpx, Fpy, Fvx, Fvy, Fx_cell_p)

    def sample(self, solver) -> None:
        """Forces and dp of the current solution: local sums, one allreduce."""
        self.wall_sums(self.cells, self.sf, self.dn, self.rf, self.uw, self.ptr, self.nbr,
                       self.coef, solver.U, solver.p, self.nu, self.grad, self.out)
        pts = []
        for k, off in self.pick:
            pts.append(float(np.sum(solver.p[self.cells[k]] + np.einsum(
                "ij,ij->i", self.grad[k], off))))
        o = self.out
        s = self.red.sum(o[0], o[1], o[3], o[4], o[6], pts[0], pts[1])
        fpx, fpy, fvx, fvy, fcx, pf, pb = s
        dp = pf / self.count[0] - pb / self.count[1]
        self.series.append((solver.time, fpx + fvx, fpy + fvy, dp, fpx, fpy, fvx, fvy,
                            fcx + fvx))

    # -- the report (rank 0) -------------------------------------------------------------------

    def report(self, outdir, fields) -> dict | None:
        """``forces.csv``, ``plots/cylinder_forces.png`` and the summary's ``cylinder`` entry,
        from the recorded series and the gathered final field (for L_a)."""
        if fields is None:
            return None
        cc, uc, bxy, bu = fields
        plots_on = self.case.output.plots
        a = np.array(self.series) if self.series else np.zeros((0, 9))
        t, cd, cl, dp = a[:, 0], a[:, 1] * self.scale, a[:, 2] * self.scale, a[:, 3]
        np.savetxt(os.path.join(outdir, "forces.csv"),
                   np.column_stack([t, cd, cl, dp, a[:, 1:3] / self.depth]), delimiter=",",
                   header="time,cd,cl,dp,Fx,Fy", comments="", fmt="%.10g")
        steady = self.algorithm == "simple"
        step = max(1, math.ceil(len(t) / MAX_SERIES))
        last = (lambda v: float(v[-1])) if len(t) else (lambda v: None)
        out = {"time": t[::step].tolist(), "cd": cd[::step].tolist(),
               "cl": cl[::step].tolist(), "dp": dp[::step].tolist(), "every": step,
               "time_axis": "iteration" if steady else "time",
               "re": self.re, "u_mean": self.u_mean, "diameter": self.diameter,
               "depth": self.depth, "samples": len(t),
               "cd_final": last(cd), "cl_final": last(cl), "dp_final": last(dp),
               "cd_pressure": last(a[:, 4] * self.scale), "cd_viscous": last(a[:, 6] * self.scale),
               "cd_cell_p": last(a[:, 8] * self.scale),
               "la": recirculation_length(cc, uc, bxy, bu, self.diameter)}
        out.update(periodic(t, cd, cl, dp, self.diameter, self.u_mean) if not steady else
                   {"st": None, "cd_max": None, "cl_max": None, "dp_half_period": None,
                    "periods": 0})
        out["reference"] = reference(self.re)
        if plots_on and len(t):
            os.makedirs(os.path.join(outdir, "plots"), exist_ok=True)
            forces_png(os.path.join(outdir, "plots", "cylinder_forces.png"), t, cd, cl, out)
        return out

    def log_line(self, entry: dict) -> str | None:
        return log_line(entry)


def recirculation_length(cc, uc, bxy, bu, diameter=None, n=2001) -> float | None:
    """``L_a``: where u on the axis behind the cylinder turns from negative to positive,
    less the cylinder's back point; u sampled on 2D-linear interpolation of the gathered
    cell centres and wall faces.  None without a recirculation.  ``diameter``: the DFG
    cylinder's by default."""
    from ..io.probes import sample_2d
    from ..mesh.cylinder import CENTRE, DIAMETER

    diameter = DIAMETER if diameter is None else diameter
    cx, cy = CENTRE
    x0 = cx + 0.5 * diameter
    x = np.linspace(x0, min(x0 + 10 * diameter, float(cc[:, 0].max())), n)
    u = sample_2d(np.column_stack([x, np.full(n, cy)]), cc[:, :2], uc[:, 0],
                  None if bxy is None else bxy[:, :2], None if bu is None else bu[:, 0])
    xr = reattachment(x[1:], u[1:])  # the back point itself has u = 0
    return None if xr is None else float(xr - x0)


def periodic(t, cd, cl, dp, diameter, u_mean) -> dict:
    """Strouhal number, max c_D and c_L and dp half a period after the lift's maximum from
    the last whole lift periods (upward zero crossings of c_L about its mean, linearly
    interpolated); Nones with fewer than MIN_PERIODS periods."""
    none = {"st": None, "cd_max": None, "cl_max": None, "dp_half_period": None,
            "periods": 0}
    if len(t) < 8:
        return none
    half = t >= t[0] + 0.5 * (t[-1] - t[0])  # the mean from the second half of the run
    s = cl - cl[half].mean()
    up = np.flatnonzero((s[:-1] < 0.0) & (s[1:] >= 0.0))
    tc = t[up] - s[up] * (t[up + 1] - t[up]) / (s[up + 1] - s[up])
    tc = tc[-(2 * MIN_PERIODS + 1):]  # at most the last 2 * MIN_PERIODS periods
    if len(tc) < MIN_PERIODS + 1:
        return {**none, "periods": max(0, len(tc) - 1)}
    period = float(np.mean(np.diff(tc)))
    w = (t >= tc[0]) & (t <= tc[-1])
    # t0: the last lift maximum that still has half a period after it in the run
    cand = np.flatnonzero(w & (t + 0.5 * period <= t[-1]))
    dp_half = None
    if len(cand):
        cand = cand[t[cand] >= t[cand[-1]] - period]  # one period: it holds one maximum
        i0 = cand[np.argmax(cl[cand])]
        dp_half = float(np.interp(t[i0] + 0.5 * period, t, dp))
    return {"st": diameter / (u_mean * period), "period": period, "frequency": 1.0 / period,
            "cd_max": float(cd[w].max()), "cl_max": float(cl[w].max()),
            "cd_mean": float(cd[w].mean()), "cl_min": float(cl[w].min()),
            "dp_half_period": dp_half, "periods": len(tc) - 1}


def forces_png(path, t, cd, cl, out):
    """c_D and c_L against time (or SIMPLE iterations), the published ranges shaded."""
    from ..io.figure import figure, save

    fig = figure(7.0, 5.0)
    ax1, ax2 = fig.subplots(2, 1, sharex=True)
    ref = out.get("reference") or {}
    for ax, y, name, key in ((ax1, cd, "c_D", "cd"), (ax2, cl, "c_L", "cl")):
        ax.plot(t, y, lw=0.9, label=f"{name} (haloflow)")
        rng = ref.get(key) or ref.get(key + "_max")
        if rng:
            ax.axhspan(*rng, color="C1", alpha=0.3,
                       label=f"{name}{'' if key in ref else ',max'} Schäfer & Turek 1996")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if len(t) > 10:  # the start (impulsive, or SIMPLE's first iterations) off the scale
        for ax, y, key in ((ax1, cd, "cd"), (ax2, cl, "cl")):
            rng = ref.get(key) or ref.get(key + "_max") or []
            lo = min(y[len(y) // 2:].min(), *rng)
            hi = max(y[len(y) // 2:].max(), *rng)
            pad = max(0.15 * (hi - lo), 0.02 * max(abs(lo), abs(hi)), 1e-6)
            ax.set_ylim(lo - pad, hi + pad)
    ax2.set_xlabel("SIMPLE iteration" if out["time_axis"] == "iteration" else "t")
    st = f", St = {out['st']:.4f}" if out.get("st") else ""
    ax1.set_title(f"Cylinder, Re = {out['re']:g}: c_D = {out['cd_final']:.4f}, "
                  f"c_L = {out['cl_final']:.4f}{st}")
    save(fig, path)


def log_line(out: dict) -> str:
    """One log line: the coefficients, and the published ranges where the Re has them."""
    def f(v, fmt=".4f"):
        return "n/a" if v is None else format(v, fmt)

    ref = out.get("reference") or {}

    def rng(key):
        return f" [{ref[key][0]:g}, {ref[key][1]:g}]" if key in ref else ""

    line = (f"cylinder, Re = {out['re']:g}: c_D {f(out['cd_final'])}{rng('cd')}, "
            f"c_L {f(out['cl_final'], '.5f')}{rng('cl')}, dp {f(out['dp_final'])}{rng('dp')}, "
            f"L_a {f(out['la'])}{rng('la')}")
    if out["time_axis"] == "time":
        line += (f"; over the last {out['periods']} lift periods: St {f(out['st'])}{rng('st')}, "
                 f"c_D,max {f(out['cd_max'])}{rng('cd_max')}, "
                 f"c_L,max {f(out['cl_max'])}{rng('cl_max')}, "
                 f"dp(t0 + 1/2f) {f(out['dp_half_period'])}{rng('dp_half_period')}")
    if ref:
        line += f" (Schäfer & Turek 1996, {ref['test']})"
    return line
