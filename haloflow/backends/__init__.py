"""Where kernels run and arrays live: ``make("cpu")`` or ``make("cuda")``.

A backend owns device arrays, the kernels that work on them and the copies between device
and host memory (PyFR's backends, Oceananigans' architectures).  ``cpu`` is numba on the
host; ``cuda`` is numba-cuda on an NVIDIA GPU, or numba's CUDA simulator when
``NUMBA_ENABLE_CUDASIM=1`` (how CI, which has no GPU, tests it).  So far the halo exchange
runs on either (:mod:`haloflow.parallel.halo.staging`), and so do the linear
solves (``solver.backend``: :mod:`haloflow.linalg.device_solve` and
:mod:`haloflow.linalg.device_bicgstab`); the rest of the solver's kernels run on ``cpu``.

Importing this package imports neither numba nor numba-cuda: the names are read by the
case schema and the command line.
"""

from __future__ import annotations

BACKENDS = ("cpu", "cuda")


class BackendUnavailable(RuntimeError):
    """The backend asked for cannot run here; the message says why in one line."""


def make(name: str | None = "cpu"):
    """The backend called ``name`` (``None`` means ``cpu``)."""
    if name is None or name == "cpu":
        from .cpu import CpuBackend

        return CpuBackend()
    if name == "cuda":
        try:
            from .cuda import CudaBackend
        except ImportError as e:  # numba without its CUDA target
            raise BackendUnavailable(f"backend cuda needs numba-cuda ({e})") from None
        return CudaBackend()
    raise ValueError(f"unknown backend {name!r} (expected one of {', '.join(BACKENDS)})")


def for_run(name: str):
    """The device backend a run's ``solver.backend`` names, or None for ``cpu`` (the host's
    kernels as they are); a machine that cannot run it is told why in one line."""
    if name == "cpu":
        return None
    from ..mpiutil import UserError

    try:
        return make(name)
    except BackendUnavailable as e:
        raise UserError(str(e)) from None


__all__ = ["BACKENDS", "BackendUnavailable", "for_run", "make"]
