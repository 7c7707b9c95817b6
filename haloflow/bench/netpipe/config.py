"""What one ``haloflow netpipe`` run measures: the checked options, shared by the MPI, TCP
and pairs runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...mpiutil import UserError
from .sizes import schedule

MODES = ("pingpong", "bidir", "stream", "put", "get")


class IntegrityError(UserError):
    """Some byte arrived wrong; raised on every rank together."""

    exit_code = 3


@dataclass
class Options:
    output: Path | None
    lo: int
    hi: int
    perturb: int
    mode: str
    sync: str
    integrity: bool
    nocache: bool
    pool: int | None
    trial_time: float
    trials: int
    engine: str
    quiet: bool
    tcp: bool
    listen: str | None
    connect: str | None
    pairs: bool
    timeout: float = 60.0  # --tcp: seconds to wait for a connection to answer or for data
    cpu: bool = False  # also the CPU time each side spends per message
    overlap: bool = False  # also how much computation a non-blocking exchange lets through

    def sizes(self) -> list[int]:
        return schedule(self.lo, self.hi, 0 if self.integrity else self.perturb)

    def paths(self, default: str) -> dict[str, Path]:
        out = self.output if self.output is not None else Path(default)
        return {"out": out, "json": out.with_suffix(".json"), "png": out.with_suffix(".png"),
                "cpu_png": out.with_name(out.stem + "-cpu.png"),
                "overlap_png": out.with_name(out.stem + "-overlap.png")}
