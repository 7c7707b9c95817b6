"""A whole PISO step on a device backend (``solver.backend = "cuda"``).

The fields live on the device between steps; the step assembles the momentum equation,
solves it (:class:`~haloflow.linalg.device_bicgstab.DeviceBiCGStab`), builds ``H/A`` and
the Rhie-Chow fluxes, assembles and solves the pressure equation
(:class:`~haloflow.linalg.device_solve.DeviceSolve`) and corrects fluxes and velocity with
the kernels of :mod:`haloflow.physics.device_kernels`, each the twin of the host kernel that
:class:`~haloflow.physics.piso.PisoSolver` calls, with the halos exchanged on the device by
the run's strategy.  Its fields equal the host step's to the solvers' round-off.

What still crosses PCI-E each step, counted in ``profile()`` with the solvers' copies: the
reductions' scalars and the AMG's coarsest level (its entries out for the host's factors,
its right-hand side out and solution in at each visit).  On several ranks the host
refreshes the AMG (its Galerkin sums cross ranks): the pressure matrix goes out once per
step and the coarse levels come back.  The host's
copies of ``U``, ``p``, ``phi`` and ``grad p`` are brought up to date by :meth:`to_host`
only where something on the host reads them (samplers, field files, checkpoints, the
report at the end).

Laminar PISO with implicit Euler, Gauss gradients, upwind or linear convection, orthogonal
meshes, BiCGStab-Jacobi momentum and AMG-CG pressure: :func:`unsupported` names what else a
case asks for, and such a case runs with the linear solves alone on the device.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..linalg.device_solve import Copies
from ..parallel import halo
from . import device_kernels as ks
from .final_guess import step_length


def unsupported(flow, solver) -> str | None:
    """What of this case the device step does not do yet (None: it does it all)."""
    s = solver
    checks = (
        (flow.algorithm != "piso", f"the {flow.algorithm.upper()} algorithm"),
        (flow.closure.name != "laminar", f"the {flow.closure.name} closure"),
        (flow.energy is not None, "heat transfer"),
        (flow.nonorth, "non-orthogonal corrections"),
        (flow.gradient.scheme != "gauss", f"{flow.gradient.scheme} gradients"),
        (s.convection not in ("linear", "upwind"), f"{s.convection} convection"),
        (s.momentum.method != "bicgstab-jacobi", f"momentum by {s.momentum.method}"),
        (flow.inflow is not None, "fluctuating inlets"),
        (s.time_scheme != "euler", f"the {s.time_scheme} time scheme"),
        (s.residual_norm != "relative", f"{s.residual_norm} residuals"),
        (getattr(s, "implicit_convection", False), "implicit convection"),
        (getattr(s, "ddt_corr", False), "ddt_corr"),
        (getattr(s, "transpose_stress", False), "the transpose stress"),
    )
    asked = [what for bad, what in checks if bad]
    return ", ".join(asked) if asked else None


class DeviceStep:
    """The state and one-step advance of ``flow`` (a :class:`~.piso.PisoSolver`) on
    ``backend``'s device; the host solver keeps its set-up, its AMG and its host fields."""

    def __init__(self, flow, backend):
        self.flow, self.be = flow, backend
        self.k = backend.sparse()
        self.copies = Copies(backend)
        lm, bc, fc = flow.lm, flow.bc, flow.fc
        put = self.copies.put
        n, nc, nf = lm.n_owned, lm.n_cells, lm.n_faces
        owner = flow.momentum.owner  # the visited faces (empty patches at the end left out)
        self.n, self.nc, self.ni, self.nvis = n, nc, lm.n_internal, len(owner)
        ptr, ent, bptr, bfc = ks.cell_faces(lm, owner, bc.u_kind)
        pat = flow.momentum.M.pattern
        i64 = np.int64
        self.mesh = SimpleNamespace(
            ptr=put(ptr), ent=put(ent), bptr=put(bptr), bfc=put(bfc),
            owner=put(owner.astype(i64)), neighbour=put(lm.neighbour.astype(i64)),
            weight=put(fc.weight), gdiff=put(fc.gdiff), vol=put(lm.geometry.cell_volumes),
            sf=put(lm.geometry.face_areas), ukind=put(bc.u_kind.astype(i64)),
            uvalue=put(bc.u_value), pkind=put(bc.p_kind.astype(i64)),
            pvalue=put(bc.p_value), nu=put(flow.closure.nu_face),
            solved=put(np.array([d in flow.comps for d in range(3)])),
            dpos=put(pat.diag_pos.astype(i64)), upos=put(pat.upper_pos.astype(i64)),
            lpos=put(pat.lower_pos.astype(i64)))
        self.linear = flow.momentum.linear

        def zeros(m):  # as the host's arrays start (a component not solved stays zero)
            return put(np.zeros(max(m, 1)))

        def cells(m=nc):
            return [zeros(m) for _ in range(3)]

        guess = flow.ts.U_prev is not None
        self.f = SimpleNamespace(
            u=cells(), uo=cells(), up=cells() if guess else None, grad=cells(m=n),
            h=cells(), b0=cells(m=n), rau=zeros(nc), p=zeros(nc), phi=zeros(nf),
            phiH=zeros(nf), g=zeros(nf), rhs=zeros(n), diag=zeros(n), pdata=zeros(pat.nnz),
            change=zeros(nc) if flow.pressure.last_guess is not None else None)
        self.bicg = flow.momentum.device
        u = [f for d, f in enumerate(self.f.u) if d in flow.comps]  # what each exchange sends
        h = [f for d, f in enumerate(self.f.h) if d in flow.comps]
        self._sends = SimpleNamespace(u=u, h_first=h + [self.f.rau], h=h)
        ex = flow.ex
        aware = ex.space.name.startswith("device-aware")  # else MPI on host buffers
        self.ex = halo.make(ex.name, lm, ex.comm, staging="device-aware" if aware else "device",
                            backend=backend)
        self.on_device = False  # the device's fields are the run's (else: the host's)
        self.host_stale = False  # the host's copies lag behind the device's

    # -- between host and device ----------------------------------------------------------------
    def to_device(self) -> None:
        """The host's fields (set-up, a restart) copied in; the pressure gradient made
        current first where the host has none."""
        fl, f, up = self.flow, self.f, self.copies.upload
        n = self.n
        if not fl.pressure.grad_current:
            fl.gradient(fl.p, fl.bc.p_kind, fl.bc.p_value, fl.grad)
            fl.pressure.grad_current = True
        for d in range(3):
            up(f.u[d], fl.U[d])
            up(f.uo[d], fl.ts.U_old[d])
            up(f.grad[d], fl.grad[d, :n])
        up(f.p, fl.p)
        up(f.phi, fl.phi)
        if f.change is not None:
            up(f.change, fl.pressure.last_guess.change)
        self.on_device, self.host_stale = True, False

    def to_host(self) -> None:
        """The host's ``U`` (ghosts included), ``p``, ``phi``, ``grad p`` and ``U^n`` brought
        up to date, where the device has moved on since."""
        if not (self.on_device and self.host_stale):
            return
        fl, f, down = self.flow, self.f, self.copies.download
        n = self.n
        for d in range(3):
            down(fl.U[d], f.u[d])
            down(fl.ts.U_old[d], f.uo[d])
            down(fl.grad[d, :n], f.grad[d])
        down(fl.p, f.p)
        down(fl.phi[:self.nvis], f.phi)
        if f.change is not None:
            down(fl.pressure.last_guess.change, f.change)
        self.host_stale = False

    def host_changed(self) -> None:
        """The host's fields were replaced (a restart): copied in before the next step."""
        self.on_device = False

    # -- the step -------------------------------------------------------------------------------
    def step(self):
        """One PISO step on the device: ``(u_solves, p_solves, continuity, change)``."""
        fl, f, T = self.flow, self.f, self.flow.timers
        if not self.on_device:
            self.to_device()
        self.host_stale = True
        use_guess = self._begin_step()
        with T("assemble"):
            self._assemble_momentum()
        if use_guess:
            g = self.k.grid(self.n)
            for d in fl.comps:
                ks.extrapolate[g](f.u[d], f.up[d], self.n)
        u_solves = self._predict()
        p_solves = [self._correct(k == 0, k == fl.n_corr - 1) for k in range(fl.n_corr)]
        fl.time += fl.dt
        with T("monitor"):
            sums = self.k.reduce(ks.step_norms, self.n, 3, self.mesh.ptr, self.mesh.ent,
                                 self.mesh.bptr, self.mesh.bfc, f.phi, *f.u, *f.uo,
                                 self.mesh.vol, self.mesh.solved, self.n)
            dv, a, b = fl.red.sum(*sums)
        continuity, change = fl.monitor.judge(dv, a, b, fl.dt, fl.time)
        return u_solves, p_solves, continuity, change

    def _begin_step(self) -> bool:
        """``time.Euler.begin_step`` and ``guess`` on the device's arrays (the host scheme's
        flags kept as it keeps them); whether the first guess is extrapolated."""
        ts, f = self.flow.ts, self.f
        if f.up is not None:
            f.up, f.uo = f.uo, f.up
            ts.has_prev = ts.stepped
        for d in range(3):
            self.k.copy(f.u[d], f.uo[d], self.flow.lm.n_cells)
        ts.stepped = True
        return f.up is not None and ts.has_prev

    def _assemble_momentum(self) -> None:
        """``Momentum.assemble`` and ``fill``: the coefficients into the BiCGStab's matrix,
        the right-hand sides without the pressure gradient, the Jacobi diagonal."""
        fl, f, m = self.flow, self.f, self.mesh
        data = self.bicg.m.data
        ks.momentum_cells[self.k.grid(self.n)](
            m.ptr, m.ent, m.bptr, m.bfc, m.owner, m.neighbour, m.weight, f.phi, m.gdiff, m.nu,
            m.vol, fl.ts.ddt, m.ukind, m.uvalue, m.sf, *f.u, *f.uo, self.linear, m.solved,
            f.diag, *f.b0, data, m.dpos, self.ni, self.n)
        ks.momentum_faces[self.k.grid(self.ni)](m.owner, m.neighbour, f.phi, m.gdiff, m.nu,
                                               m.upos, m.lpos, data, self.ni)
        ks.inverse[self.k.grid(self.n)](f.diag, self.bicg.v.invd, self.n)

    def _predict(self) -> list:
        """``Momentum.predict``: each component solved with the pressure gradient, then the
        velocity's ghosts exchanged."""
        fl, f, cfg = self.flow, self.f, self.flow.momentum.cfg
        out = []
        with fl.timers("solve_U"):
            for d in fl.comps:
                ks.momentum_rhs[self.k.grid(self.n)](f.b0[d], self.mesh.vol, f.grad[d], f.rhs,
                                                   self.n)
                out.append(self.bicg.solve_on_device(f.rhs, f.u[d], cfg.tol, cfg.max_iter,
                                                     fl.red, cfg.rel_tol))
        with fl.timers("halo"):
            self.ex.exchange(self._sends.u)
        return out

    def _correct(self, first: bool, last: bool):
        """One pressure correction: ``H/A``, fluxes and the pressure system (its matrix
        only on the ``first``), the solve, then fluxes, gradient and velocity."""
        f, m, T = self.f, self.mesh, self.flow.timers
        n = self.n
        with T("assemble"):
            ks.h_by_a[self.k.grid(n)](self.bicg.m.ip, self.bicg.m.ix, self.bicg.m.data, m.dpos,
                                     f.diag, *f.u, *f.b0, m.vol, m.solved, *f.h, f.rau, n)
        with T("halo"):
            self.ex.exchange(self._sends.h_first if first else self._sends.h)
        with T("fluxes"):
            ks.face_fluxes[self.k.grid(self.nvis)](
                m.owner, m.neighbour, m.weight, m.sf, m.gdiff, *f.h, f.rau, m.ukind, m.uvalue,
                m.pkind, f.phiH, f.g, m.upos, m.lpos, f.pdata, first, self.ni, self.nvis)
            ks.pressure_cells[self.k.grid(n)](m.ptr, m.ent, m.bptr, m.bfc, f.phiH, f.g,
                                             m.pkind, m.pvalue, f.rhs, f.pdata, m.dpos, first,
                                             self.ni, n)
        info = self._solve_pressure(first, last)
        with T("halo"):
            self.ex.exchange([f.p])
        guess = self.flow.pressure.last_guess if last else None
        if guess is not None:  # ``FinalGuess.finish``, the ghosts' change as their owners'
            ks.change_since[self.k.grid(self.nc)](f.p, f.change, self.nc)
            guess.known = True
        with T("fluxes"):
            ks.correct_faces[self.k.grid(self.nvis)](m.owner, m.neighbour, f.phiH, f.g, f.p,
                                                    m.pkind, m.pvalue, f.phi, self.ni,
                                                    self.nvis)
            ks.correct_cells[self.k.grid(n)](m.ptr, m.ent, m.bptr, m.bfc, m.owner, m.neighbour,
                                            m.weight, m.sf, m.vol, f.p, m.pkind, m.pvalue,
                                            *f.h, f.rau, m.solved, *f.grad, *f.u, self.ni, n)
        with T("halo"):
            self.ex.exchange(self._sends.u)
        return info

    def _solve_pressure(self, first: bool, last: bool):
        """``Pressure._solve`` on the device: the AMG built (the first time) or refreshed
        from the new matrix (:meth:`_refresh`), the free constant pinned where it is
        singular."""
        fl, f = self.flow, self.f
        pe, cfg, lm, red = fl.pressure, fl.pressure.cfg, fl.lm, fl.red
        n = self.n
        if pe.singular:
            with fl.timers("assemble"):
                mean = red.sum(self._total(f.rhs))[0] / lm.n_cells_global
                ks.shift[self.k.grid(n)](f.rhs, mean, n)
        guess = pe.last_guess if last else None  # finished by ``_correct``
        with fl.timers("solve_p"):
            if first:
                self._refresh()
            if guess is not None:
                self._start_along(guess)
            info = pe.compiled.solve_on_device(f.rhs, f.p, cfg.tol, cfg.max_iter,
                                               cfg.final_rel_tol if last else cfg.rel_tol)
            if pe.singular:
                mean = red.sum(self._total(f.p))[0] / lm.n_cells_global
                ks.shift[self.k.grid(n)](f.p, mean, n)
        return info

    def _start_along(self, guess) -> None:
        """``FinalGuess.start`` on the device's arrays: the last solve's start moved along
        the previous step's last change."""
        f, n = self.f, self.n
        theta = 0.0
        if guess.known:
            top = self.flow.pressure.compiled.levels[0]
            theta = step_length(*self.flow.red.sum(*self.k.reduce(
                ks.projection_sums, n, 2, top.ip, top.ix, f.pdata, f.p, f.change, f.rhs, n)))
        ks.move_on[self.k.grid(self.nc)](f.p, f.change, theta, n, self.nc)
        guess.theta = theta

    def _total(self, x) -> float:
        return self.k.reduce(ks.total, self.n, 1, x, self.n)[0]

    def _refresh(self) -> None:
        """The AMG of the new pressure matrix: refreshed on the device where it can be (one
        rank); else the matrix to the host, the AMG built from it the first time (with the
        ``V/A`` a restart rebuilds it from) or refreshed there, the coarse levels back on
        the device and the top one read where the step assembles it."""
        pe, f = self.flow.pressure, self.f
        if pe.amg is not None and pe.compiled.sums is not None:  # all on the device
            pe.compiled.share_top(f.pdata)
            pe.compiled.refresh_on_device()
            return
        P = pe.P
        self.copies.download(P.data, f.pdata)
        P.diag[:] = P.data[P.pattern.diag_pos]
        built = pe.amg is None
        if built:
            self.copies.download(self.flow.rAU, f.rau)
            pe.first_amg(self.flow.rAU)
        # (a restart's hierarchy, built from the saved V/A's matrix, reads it from now on too)
        pe.compiled.share_top(f.pdata)
        if not built:
            pe.compiled.refresh(top=False)

    def profile(self) -> dict:
        """The step's own copies (fields in and out, the pressure matrix out, reductions)
        and its halo exchanges."""
        return self.copies.profile(self.k, [self.ex])
