"""A SimGrid replay as a timeline that Perfetto and chrome://tracing open: the replay's Paje
trace (SMPI's tracing, ``options``) becomes Chrome trace-event JSON with one track per rank,
each compute burst and MPI call a complete event at its simulated start and duration, and
each point-to-point message an arrow from the sender's call to the call that received it.

Why: the replay's total time says how long a step takes, the timeline shows which rank waits
for which.  SimGrid 3.32 names most point-to-point states "kernel", so each rank's states are
matched, in order, with the actions of its time-independent trace, which name them
("isend 1 0 200000"); where the two do not match, the events keep SimGrid's names and the
file's ``otherData.warnings`` says which rank.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ...io import timeline as trace_json
from . import TraceError
from .files import actions

PAJE = "replay.paje"  # the replay's Paje trace, in its work folder
PRECISION = 9  # decimals of the Paje timestamps: nanoseconds
TOKEN = re.compile(r'"([^"]*)"|(\S+)')
RANK = re.compile(r"rank-(\d+)")
KERNEL = "kernel"  # SimGrid 3.32's state of send, recv, wait, waitall, barrier, alltoallv, ...
KERNEL_ACTIONS = {"send", "isend", "recv", "irecv", "wait", "waitall", "test", "barrier",
                  "alltoallv"}
RENAMED = {"smpi_replay_run_init": "init", "smpi_replay_run_finalize": "finalize",
           "computing": "compute", "sleeping": "sleep"}
STATELESS = {"comm_size", "comm_split", "comm_dup", "location"}  # the replay traces no state


def options(paje: Path) -> tuple[str, ...]:
    """``smpirun`` options that make the replay write its timed Paje trace to ``paje``:
    every MPI call, compute burst and sleep as a state of its rank, messages as links."""
    return ("--cfg=tracing:yes", "--cfg=tracing/smpi:yes", "--cfg=tracing/smpi/computing:yes",
            "--cfg=tracing/smpi/sleeping:yes", f"--cfg=tracing/precision:{PRECISION}",
            f"--cfg=tracing/filename:{paje.resolve()}")


@dataclass
class State:
    """One state of a rank: an MPI call, a compute burst (nested ones have depth > 0)."""

    start: float
    end: float
    value: str
    depth: int


@dataclass
class Replay:
    """What the Paje trace holds: each rank's states in order of start, the messages."""

    states: dict[int, list[State]]
    links: list[tuple[int, float, int, float]]  # sender, start, receiver, end
    end: float


class _Paje:
    """The reader's state: event definitions, aliases, open states and links."""

    def __init__(self, path: Path):
        self.path = path
        self.defs: dict[str, tuple[str, list[str]]] = {}
        self.names: dict[str, str] = {}  # alias of a type or value -> its name
        self.ranks: dict[str, int] = {}  # alias or name of a container -> its rank
        self.open: dict[int, list[State]] = {}
        self.out = Replay({}, [], 0.0)
        self.pending: dict[str, tuple[str, int, float]] = {}  # link key -> one end

    def header(self, line: str, current: list | None) -> list | None:
        parts = line[1:].split()
        if parts[:1] == ["EventDef"] and len(parts) == 3:
            fields: list[str] = []
            self.defs[parts[2]] = (parts[1], fields)
            return fields
        if parts[:1] == ["EndEventDef"]:
            return None
        if current is not None and parts:
            current.append(parts[0])
        return current

    def event(self, tok: list[str], n: int) -> None:
        d = self.defs.get(tok[0])
        if d is None:
            raise TraceError(f"{self.path}: line {n}: event {tok[0]!r} is not defined in the "
                             "Paje header")
        kind, fields = d
        f = dict(zip(fields, tok[1:], strict=False))
        t = float(f["Time"]) if "Time" in f else 0.0
        self.out.end = max(self.out.end, t)
        if kind in ("PajeDefineContainerType", "PajeDefineStateType", "PajeDefineLinkType",
                    "PajeDefineEntityValue", "PajeDefineVariableType", "PajeDefineEventType"):
            self.names[f["Alias"]] = f["Name"]
        elif kind == "PajeCreateContainer":
            m = RANK.fullmatch(f["Name"])
            if m:
                self.ranks[f["Alias"]] = self.ranks[f["Name"]] = int(m.group(1))
        elif kind == "PajePushState" and self._mpi(f):
            r = self.ranks.get(f["Container"])
            if r is not None:
                stack = self.open.setdefault(r, [])
                s = State(t, math.nan, self.names.get(f["Value"], f["Value"]), len(stack))
                stack.append(s)
                self.out.states.setdefault(r, []).append(s)
        elif kind == "PajePopState" and self._mpi(f):
            stack = self.open.get(self.ranks.get(f["Container"]), [])
            if stack:
                stack.pop().end = t
        elif kind in ("PajeStartLink", "PajeEndLink"):
            self._link(kind == "PajeStartLink", f, t)

    def _mpi(self, f: dict) -> bool:
        return self.names.get(f["Type"], f["Type"]) == "MPI_STATE"

    def _link(self, start: bool, f: dict, t: float) -> None:
        r = self.ranks.get(f["StartContainer" if start else "EndContainer"])
        key = f["Key"]
        other = self.pending.pop(key, None)
        if other is None:
            self.pending[key] = ("start" if start else "end", r, t)
        elif r is not None and other[1] is not None:
            src, t0, dst, t1 = (r, t, other[1], other[2]) if start else \
                (other[1], other[2], r, t)
            self.out.links.append((src, t0, dst, t1))


def read_paje(path: Path) -> Replay:
    """The MPI states of each rank (``rank-R`` containers) and the messages of a Paje trace;
    a state still open at the end ends with the trace."""
    p = _Paje(path)
    current = None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                if line.startswith("%"):
                    current = p.header(line, current)
                elif line.strip() and not line.startswith("#"):
                    p.event([a or b for a, b in TOKEN.findall(line)], n)
    except FileNotFoundError:
        raise TraceError(f"{path}: the replay wrote no Paje trace (SimGrid's tracing "
                         "options not taken?)") from None
    except OSError as e:
        raise TraceError(f"{path}: cannot read the replay's Paje trace ({e.strerror})") from None
    except (KeyError, ValueError) as e:
        raise TraceError(f"{path}: line {n}: not a Paje event SimGrid writes ({e})") from None
    for states in p.out.states.values():
        for s in states:
            if math.isnan(s.end):
                s.end = p.out.end
    return p.out


def stateful(tokens: Iterable[list[str]]) -> Iterator[list[str]]:
    """The actions of a rank's trace that leave a state in the replay's Paje trace: all but
    the communicator actions and a waitall with no request outstanding (SimGrid 3.32)."""
    pending = 0
    for tok in tokens:
        name = tok[1]
        if name in STATELESS:
            continue
        if name in ("isend", "irecv"):
            pending += 1
        elif name == "wait":
            pending = max(pending - 1, 0)
        elif name == "waitall":
            if pending == 0:
                continue
            pending = 0
        yield tok


def _matches(value: str, action: str) -> bool:
    if value == KERNEL:
        return action in KERNEL_ACTIONS
    return RENAMED.get(value, value.removeprefix("action_")) == action


def _name(value: str) -> str:
    return "MPI" if value == KERNEL else RENAMED.get(value, value.removeprefix("action_"))


def name_states(states: list[State], trace: Path, rank: int) -> tuple[list[tuple], str | None]:
    """``(state, name, action text)`` for each state of one rank: the outermost states
    named by the trace's actions in order; a warning instead where they do not match."""
    top = [s for s in states if s.depth == 0]
    acts = list(stateful(actions(trace)))
    named: dict[int, tuple[str, str]] = {}
    warning = None
    for k, (s, tok) in enumerate(zip(top, acts, strict=False)):
        if not _matches(s.value, tok[1]):
            warning = (f"rank {rank}: the replay's state {k} ({s.value}) is not the trace's "
                       f"action {' '.join(tok[1:])!r}: SimGrid's names kept")
            break
        named[id(s)] = (tok[1], " ".join(tok[1:]))
    else:
        if len(top) != len(acts):
            warning = (f"rank {rank}: the replay has {len(top)} states, the trace {len(acts)} "
                       "actions that make one: SimGrid's names kept")
    if warning is not None:
        named = {}
    rows = []
    for s in states:
        name, text = named.get(id(s), (_name(s.value), s.value))
        rows.append((s, name, text))
    return rows, warning


_us = trace_json.us


def events(paje: Path, traces: list[Path], pid: int, label: str) -> tuple[list[dict], list[str]]:
    """One replay's trace events (process ``pid``, called ``label``; one thread per rank)
    and the warnings of ranks whose states kept SimGrid's names.  A message is a flow from
    the sender's call to the receiver's call that completed it (ids ``pid`` * 1e9 + k)."""
    rep = read_paje(paje)
    out: list[dict] = [{"ph": "M", "name": "process_name", "pid": pid,
                        "args": {"name": label}},
                       {"ph": "M", "name": "process_sort_index", "pid": pid,
                        "args": {"sort_index": pid}}]
    warnings = []
    for rank, trace in enumerate(traces):
        out.extend(trace_json.track(pid, rank))
        rows, warning = name_states(rep.states.get(rank, []), trace, rank)
        if warning:
            warnings.append(warning)
        for s, name, text in rows:
            ts = _us(s.start)
            out.append({"ph": "X", "name": name, "cat": "compute" if name == "compute" else
                        "mpi", "pid": pid, "tid": rank, "ts": ts,
                        "dur": round(_us(s.end) - ts, 3), "args": {"action": text}})
    links = sorted(rep.links, key=lambda x: (x[1], x[3]))
    for k, (src, t0, dst, t1) in enumerate(links, pid * 1_000_000_000 + 1):
        common = {"name": "message", "cat": "message", "id": k, "pid": pid}
        out.append({**common, "ph": "s", "tid": src, "ts": _us(t0)})
        out.append({**common, "ph": "f", "bp": "e", "tid": dst, "ts": _us(t1)})
    return out, warnings


def write(path: Path, parts: list[list[dict]], other: dict) -> None:
    """The timeline file: every replay's events, times in microseconds shown as ms."""
    trace_json.write(path, [e for p in parts for e in p], other)
