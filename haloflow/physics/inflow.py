"""Turbulent inflow: seeded random fluctuations on an inlet's velocity (OpenFOAM's
``turbulentInlet``), so an LES gets eddies from its inlet rather than a laminar plug.

An inlet patch with ``fluctuation = [fx, fy, fz]`` changes its face values once per step:
``U_f <- (1 - alpha) U_f + alpha (U_ref + c (r - 1/2) f |U_ref|)``, with ``U_ref`` the
patch's own velocity (uniform, parabolic or a table), ``r`` uniform in [0, 1) per face,
component and step, ``alpha`` = ``fluctuation_alpha`` (0.1 as OpenFOAM's default) and
``c = sqrt(12 (2 alpha - alpha^2)) / alpha``: the filter's stationary fluctuation then has
zero mean and the rms ``f_d |U_ref|`` in component ``d``.

``r`` is a hash (splitmix64) of the patch ``seed``, the step number, the face's number in
the global mesh and the component: no generator state, so every rank count draws the same
number for the same face and step, and a restart replays the filter from step 0 to where it
stopped (cheap: the inlet's faces only) and goes on bit for bit as if never stopped.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np


@nb.njit(cache=True, inline="always")
def _mix(z):
    """splitmix64's finaliser: a bijection of uint64 that scrambles every bit."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@nb.njit(cache=True)
def uniform01(seed, step, gface, comp):
    """A number uniform in [0, 1) from (seed, step, global face, component) alone."""
    golden = np.uint64(0x9E3779B97F4A7C15)
    z = _mix(np.uint64(seed) * golden + np.uint64(step))
    z = _mix(z + np.uint64(gface) * golden)
    z = _mix(z + np.uint64(comp) + np.uint64(1))
    return float(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@nb.njit(cache=True)
def fluctuate(value, ref, gfaces, scale, alpha, seed, first, last):
    """Steps ``first..last`` of the filter on the faces of one patch: ``value`` (m, 3) in
    place, ``ref`` (m, 3) the mean, ``scale`` (3,) the rms fractions of ``|ref|``."""
    c = math.sqrt(12.0 * (2.0 * alpha - alpha * alpha)) / alpha
    for step in range(first, last + 1):
        for i in range(value.shape[0]):
            mag = math.sqrt(ref[i, 0] ** 2 + ref[i, 1] ** 2 + ref[i, 2] ** 2)
            for d in range(3):
                r = uniform01(seed, step, gfaces[i], d) - 0.5
                target = ref[i, d] + c * r * scale[d] * mag
                value[i, d] = (1.0 - alpha) * value[i, d] + alpha * target


class Inflow:
    """The fluctuating inlets of one rank: ``advance(u_value, step)`` brings their faces of
    the boundary array ``u_value`` to step ``step`` (the step about to be solved)."""

    def __init__(self, lmesh, boundary: dict, u_value: np.ndarray):
        self.parts = []
        for patch in lmesh.patches:
            s = boundary[patch.name]
            if s.type != "inlet" or getattr(s, "fluctuation", None) is None:
                continue
            b0 = patch.start - lmesh.n_internal
            sl = slice(b0, b0 + patch.size)
            gf = lmesh.global_faces[patch.start:patch.start + patch.size].astype(np.int64)
            # the case filled in alpha and the seed where they were not given
            self.parts.append((sl, u_value[sl].copy(), gf, np.asarray(s.fluctuation, float),
                               float(s.fluctuation_alpha), int(s.seed)))
        self.step = 0  # the last step applied: none yet

    @classmethod
    def of(cls, lmesh, boundary: dict, u_value: np.ndarray) -> Inflow | None:
        """The case's fluctuating inlets, None where it has none."""
        out = cls(lmesh, boundary, u_value)
        return out if out.parts else None

    def advance(self, u_value: np.ndarray, step: int) -> None:
        """Apply steps ``self.step + 1 .. step``; after a restart (a first call at a late
        step) the values restart from the mean and replay every step before."""
        if step <= self.step:
            return
        first = self.step + 1
        if self.step == 0:
            for sl, ref, *_ in self.parts:
                u_value[sl] = ref
        for sl, ref, gf, scale, alpha, seed in self.parts:
            value = np.ascontiguousarray(u_value[sl])
            fluctuate(value, ref, gf, scale, alpha, seed, first, step)
            u_value[sl] = value
        self.step = step
