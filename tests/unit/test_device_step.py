"""The whole PISO step on the (simulated) device against the host's step, in one process.

Every step kernel computes its host twin's values in the host's order, so the fields after
each step equal the host's to the linear solvers' round-off (their dot products sum in
another order), with the same iterations; a restart goes on as if never stopped.  The
cases cover each boundary kind the kernels branch on (wall, moving wall, inlet, outlet,
symmetry), 2D and 3D, upwind and linear convection.  The simulator interprets every
simulated thread in Python, so the meshes are small.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from haloflow.backends.cuda_sparse import MAX_DOTS  # a read-back copies all its scalars
from haloflow.physics.device_piso import unsupported

SIM_STEP = r"""
import json
import numpy as np
from mpi4py import MPI
from haloflow.case import load_case
from haloflow.mesh.blocks import box
from haloflow.parallel import halo
from haloflow.parallel.local import build_local
from haloflow.physics import solver_from_case

def solver(name, backend, sets):
    case = load_case(name, [*sets, f'solver.backend="{backend}"'])
    m = box(case.mesh.cells, case.mesh.lengths)
    lm = build_local(m, np.zeros(m.n_cells, dtype=np.int64), 0)
    return solver_from_case(lm, case, halo.make("packed", lm, MPI.COMM_SELF), MPI.COMM_SELF)

RUNS = [
    ("cavity", ["mesh.cells=[9,8,1]"]),
    ("cavity", ["mesh.cells=[4,4,3]", 'solver.convection="upwind"']),
    ("channel", ["mesh.cells=[10,5,1]", 'solver.algorithm="piso"', 'boundary.top.type="symmetry"',
                 'solver.momentum.guess="previous"']),
]
out = []
for name, sets in RUNS:
    host, dev = solver(name, "cpu", sets), solver(name, "cuda", sets)
    assert dev.device_step is not None, dev.device_step_lacks
    steps, moved = [], []
    for k in range(3):
        before = dict(dev.device_step.profile())
        a, b = host.step(), dev.step()
        after = dev.device_step.profile()
        moved.append({key: after[key] - before[key] for key in ("to_host_bytes", "to_device")})
        dev.to_host()
        scale = max(np.abs(host.U).max(), 1e-300)
        steps.append(dict(
            U=float(np.abs(dev.U - host.U).max() / scale),
            p=float(np.abs(dev.p - host.p).max() / max(np.abs(host.p).max(), 1e-300)),
            phi=float(np.abs(dev.phi - host.phi).max() / max(np.abs(host.phi).max(), 1e-300)),
            grad=float(np.abs(dev.grad[:, :dev.lm.n_owned] - host.grad[:, :host.lm.n_owned]).max()
                       / max(np.abs(host.grad).max(), 1e-300)),
            iters=[[i.iters for i in a.u_solves + a.p_solves],
                   [i.iters for i in b.u_solves + b.p_solves]],
            change=[a.change, b.change], continuity=[a.continuity, b.continuity]))
    out.append(dict(name=name, sets=sets, steps=steps, moved=moved,
                    nnz=int(dev.pressure.P.pattern.nnz), n_corr=dev.n_corr,
                    singular=bool(dev.pressure.singular),
                    guess=dev.pressure.last_guess is not None,
                    refreshed_on_device=dev.pressure.compiled.sums is not None,
                    pressure=dev.pressure.device_profile()))
# a restart: two steps, the state a checkpoint saves, a new solver that takes it back and
# steps twice more; against four steps straight (a smaller cavity)
sets = ["mesh.cells=[6,5,1]"]
straight, first = solver("cavity", "cuda", sets), solver("cavity", "cuda", sets)
for k in range(2):
    straight.step(), first.step()
arrays, extra = first.checkpoint_state()
saved = {name: a.copy() for name, (a, kind) in arrays.items()}
again = solver("cavity", "cuda", sets)
again.restore_state(saved, json.loads(json.dumps(extra)))
for k in range(2):
    straight.step(), again.step()
straight.to_host(), again.to_host()
out.append(dict(name="restart", same=[bool(np.array_equal(getattr(straight, f),
                                                           getattr(again, f)))
                                      for f in ("U", "p", "phi")]))
# what the device step leaves to the host names itself; the solves still go to the device
sets = ["mesh.cells=[6,6,1]", 'solver.time_scheme="backward"']
host, hybrid = solver("cavity", "cpu", sets), solver("cavity", "cuda", sets)
for k in range(3):
    host.step(), hybrid.step()
out.append(dict(name="hybrid", lacks=hybrid.device_step_lacks,
                solves=hybrid.momentum.device is not None and hybrid.pressure.compiled is not None,
                U=float(np.abs(hybrid.U - host.U).max() / np.abs(host.U).max())))
print(json.dumps(out))
"""


def test_the_device_step_equals_the_host_step():
    res = subprocess.run([sys.executable, "-c", SIM_STEP], capture_output=True, text=True,
                         timeout=600, env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    runs = json.loads(res.stdout)
    for r in runs[:-2]:
        for s in r["steps"]:
            assert s["iters"][0] == s["iters"][1], r
            for name in ("U", "p", "phi", "grad"):
                assert s[name] < 1e-12, (r["name"], name, s)
            assert abs(s["change"][0] - s["change"][1]) <= 1e-12 * s["change"][0], r
            # the net outflows are round-off (the pressure solve's tolerance) on both
            assert max(s["continuity"]) < 1e-8 and min(s["continuity"]) > 0.0, r
        # after the first step's upload of the fields (and the pressure matrix to the host,
        # for the AMG's set-up) nothing goes in, and out only the reductions' scalars:
        # the monitor's, with a singular pressure two means per correction, and from the
        # second step the last solve's step along the last change (one rank: the AMG's
        # refresh runs on the device, which counts its own copies)
        reads = 1 + (2 * r["n_corr"] if r["singular"] else 0) + r["guess"]
        first = r["moved"][0]
        assert first["to_device"] > 0 and first["to_host_bytes"] >= 8 * r["nnz"], r
        for moved in r["moved"][1:]:
            assert moved == {"to_device": 0, "to_host_bytes": 8 * MAX_DOTS * reads}, r
        assert r["refreshed_on_device"], r
    assert runs[-2] == {"name": "restart", "same": [True, True, True]}, runs[-2]
    hybrid = runs[-1]
    assert hybrid["lacks"] == "the backward time scheme" and hybrid["solves"], hybrid
    assert hybrid["U"] < 1e-12, hybrid


def test_unsupported_names_every_option_it_lacks():
    from types import SimpleNamespace as NS

    flow = NS(algorithm="simple", closure=NS(name="WALE"), energy=object(), nonorth=True,
              gradient=NS(scheme="least-squares"), inflow=object())
    s = NS(convection="linear-upwind", momentum=NS(method="sgs"), time_scheme="backward",
           residual_norm="normalised")
    said = unsupported(flow, s)
    for what in ("SIMPLE", "WALE closure", "heat transfer", "non-orthogonal", "least-squares",
                 "linear-upwind", "momentum by sgs", "fluctuating inlets", "backward",
                 "normalised residuals"):
        assert what in said, said
    ok = NS(algorithm="piso", closure=NS(name="laminar"), energy=None, nonorth=False,
            gradient=NS(scheme="gauss"), inflow=None)
    assert unsupported(ok, NS(convection="upwind", momentum=NS(method="bicgstab-jacobi"),
                              time_scheme="euler", residual_norm="relative")) is None

