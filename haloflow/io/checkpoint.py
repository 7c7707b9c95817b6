"""The checkpoint file: every field a restart needs, in global cell (or face) order.

A checkpoint does not depend on how the run was decomposed: each field is stored as
``(components, n_global)`` float64 values, component after component, in the global mesh's
cell or face order, so a run on any rank count reads back what it owns.  The file is::

    b"HALOFLOW-CKPT\\0\\0\\0"             16 bytes
    field payloads                      at the offsets the metadata gives
    metadata                            JSON (UTF-8): case hash, step, time, counts, fields
    metadata length                     8 bytes, little-endian
    b"HALOFLOW-END\\0\\0\\0\\0"             16 bytes

The trailer is written last, so a truncated file has none and is refused, and every field
carries a checksum that does not depend on the rank count (an order-free sum of mixed
64-bit words, see :func:`field_checksum`), so a corrupted payload is refused too.  Nothing
in the file is ever evaluated or unpickled.

This module is the format; the collective MPI-IO writing and reading is in
:mod:`haloflow.run.checkpointing`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass

import numba as nb
import numpy as np

from ..mpiutil import UserError

MAGIC = b"HALOFLOW-CKPT\0\0\0"
END = b"HALOFLOW-END\0\0\0\0"
VERSION = 1
TRAILER = 8 + len(END)  # metadata length, end magic
MAX_METADATA = 1 << 20  # bytes: far more than any field list needs
SUFFIX = ".ckpt"
MASK = (1 << 64) - 1

# what makes two runs' solutions differ: a checkpoint restarts only a case with the same
# values of these (end_time and max_steps may change: they say how far to go)
_SOLUTION_SECTIONS = ("mesh", "initial", "physics", "boundary", "solver")
_FREE_KEYS = {"solver": ("end_time", "max_steps")}


class CheckpointError(UserError):
    """A checkpoint that cannot be read back: truncated, corrupted or of another case."""


@dataclass(frozen=True)
class FieldSpec:
    """One stored field: ``kind`` is "cell" or "face", ``comps`` its component count."""

    name: str
    kind: str
    comps: int
    offset: int = 0
    checksum: int = 0

    def nbytes(self, n: int) -> int:
        return 8 * self.comps * n


def case_hash(case) -> str:
    """A digest of the parts of ``case`` that decide its solution."""
    data = case.to_dict()
    keep = {}
    for s in _SOLUTION_SECTIONS:
        section = dict(data.get(s, {}))
        for k in _FREE_KEYS.get(s, ()):
            section.pop(k, None)
        keep[s] = section
    text = json.dumps(keep, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def layout(specs: list[FieldSpec], n_cells: int, n_faces: int) -> list[FieldSpec]:
    """The specs with their payload offsets, one field after the other after the magic."""
    out, at = [], len(MAGIC)
    for s in specs:
        out.append(FieldSpec(s.name, s.kind, s.comps, at, s.checksum))
        at += s.nbytes(n_cells if s.kind == "cell" else n_faces)
    return out


def payload_end(specs: list[FieldSpec], n_cells: int, n_faces: int) -> int:
    last = specs[-1]
    return last.offset + last.nbytes(n_cells if last.kind == "cell" else n_faces)


@nb.njit(cache=True)
def _mix(z):
    """splitmix64's finaliser: every input bit moves about half the output bits."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@nb.njit(cache=True)
def _checksum(bits, first):
    """Sum (mod 2**64) of mix(word ^ mix(index)) over a run of words starting at global
    index ``first``: a sum, so any split of the field over ranks gives the same total."""
    s = np.uint64(0)
    for i in range(bits.size):
        s += _mix(bits[i] ^ _mix(np.uint64(first + i) + np.uint64(0x9E3779B97F4A7C15)))
    return s


def field_checksum(block: np.ndarray, first: int) -> int:
    """This rank's share of a field's checksum: ``block`` holds the field's values from
    global position ``first`` on (component-major positions, see :func:`positions`)."""
    flat = np.ascontiguousarray(block, dtype=np.float64).reshape(-1)
    return int(_checksum(flat.view(np.uint64), first))


def metadata(case, step: int, time: float, n_cells: int, n_faces: int,
             specs: list[FieldSpec], extra: dict) -> bytes:
    """The JSON metadata block."""
    meta = {"format": "haloflow checkpoint", "version": VERSION, "case_hash": case_hash(case),
            "case_name": case.name, "step": int(step), "time": float(time),
            "n_cells": int(n_cells), "n_faces": int(n_faces), "extra": extra,
            "fields": [{"name": s.name, "kind": s.kind, "comps": s.comps, "offset": s.offset,
                        "checksum": f"{s.checksum & MASK:016x}"} for s in specs]}
    return json.dumps(meta, sort_keys=True).encode()


def trailer(meta: bytes) -> bytes:
    return meta + len(meta).to_bytes(8, "little") + END


def _non_finite(doc) -> str | None:
    """``key = value`` of the first NaN or infinity in parsed JSON (``NaN``, ``Infinity``,
    ``1e999``), its key as a dotted path; None if there is none.  Walked without recursion:
    the document may be nested as deeply as the parser allows."""
    todo = [("", doc)]
    while todo:
        key, value = todo.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return f"{key or 'value'} = {value}"
        if isinstance(value, dict):
            todo.extend((f"{key}.{k}" if key else str(k), v) for k, v in value.items())
        elif isinstance(value, list):
            todo.extend((f"{key}[{i}]", v) for i, v in enumerate(value))
    return None


@dataclass
class Checkpoint:
    """A checkpoint's metadata, read and checked (the payload is read collectively)."""

    path: str
    step: int
    time: float
    n_cells: int
    n_faces: int
    case_hash: str
    case_name: str
    fields: dict  # name -> FieldSpec
    extra: dict


def read_metadata(path: str) -> Checkpoint:
    """The metadata of the checkpoint at ``path``, with the file's structure checked: magic,
    trailer, sizes and field offsets inside the file.  One-line errors."""
    def bad(why: str) -> CheckpointError:
        return CheckpointError(f"{path}: not a usable haloflow checkpoint ({why})")

    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < len(MAGIC) + TRAILER or f.read(len(MAGIC)) != MAGIC:
                raise bad("no checkpoint header")
            f.seek(size - TRAILER)
            tail = f.read(TRAILER)
            if tail[8:] != END:
                raise bad("no end marker: the file is truncated")
            n_meta = int.from_bytes(tail[:8], "little")
            if not 0 < n_meta <= min(MAX_METADATA, size - len(MAGIC) - TRAILER):
                raise bad(f"metadata length {n_meta} does not fit the file")
            f.seek(size - TRAILER - n_meta)
            raw = f.read(n_meta)
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read the checkpoint ({e.strerror})") from None
    try:
        meta = json.loads(raw.decode())
        where = _non_finite(meta)
        if where:
            raise bad(f"{where[:200]}: expected a finite number")
        if meta.get("format") != "haloflow checkpoint" or meta.get("version") != VERSION:
            raise bad(f"format {meta.get('format')!r} version {meta.get('version')!r}, "
                      f"expected version {VERSION}")
        n_cells, n_faces = int(meta["n_cells"]), int(meta["n_faces"])
        fields = {}
        for fd in meta["fields"]:
            spec = FieldSpec(str(fd["name"]), str(fd["kind"]), int(fd["comps"]),
                             int(fd["offset"]), int(str(fd["checksum"]), 16))
            if spec.kind not in ("cell", "face") or not 1 <= spec.comps <= 64:
                raise bad(f"field {spec.name!r} of kind {spec.kind!r}, {spec.comps} components")
            n = n_cells if spec.kind == "cell" else n_faces
            if spec.offset < len(MAGIC) or spec.offset + spec.nbytes(n) > size - TRAILER - n_meta:
                raise bad(f"field {spec.name!r} lies outside the file: truncated?")
            fields[spec.name] = spec
        ck = Checkpoint(path, int(meta["step"]), float(meta["time"]), n_cells, n_faces,
                        str(meta["case_hash"]), str(meta["case_name"]), fields,
                        dict(meta.get("extra", {})))
    except CheckpointError:
        raise
    except RecursionError:
        raise bad("metadata nested too deeply") from None
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError,
            OverflowError):
        raise bad("unreadable metadata") from None
    if ck.step < 0 or n_cells < 1 or n_faces < 1:
        raise bad("negative step or empty mesh in the metadata")
    if not math.isfinite(ck.time):
        raise bad(f"time = {ck.time}: expected a finite number")
    return ck


def check_matches(ck: Checkpoint, case, n_cells: int, n_faces: int) -> None:
    """Refuse a checkpoint of another case or mesh (one line, which differs)."""
    if ck.case_hash != case_hash(case):
        raise CheckpointError(
            f"{ck.path}: the checkpoint is of another case (its mesh, initial, physics, "
            "boundary or solver settings differ from this run's)")
    if (ck.n_cells, ck.n_faces) != (n_cells, n_faces):
        raise CheckpointError(f"{ck.path}: the checkpoint has {ck.n_cells} cells and "
                              f"{ck.n_faces} faces, the mesh {n_cells} and {n_faces}")


def checkpoint_name(step: int) -> str:
    return f"step-{step:09d}{SUFFIX}"


def list_checkpoints(folder: str) -> list[str]:
    """The finished checkpoints in ``folder``, oldest first (temporary files excluded)."""
    try:
        names = sorted(n for n in os.listdir(folder)
                       if n.startswith("step-") and n.endswith(SUFFIX))
    except FileNotFoundError:
        return []
    return [os.path.join(folder, n) for n in names]


def read_arrays(path: str) -> tuple[Checkpoint, dict]:
    """The whole checkpoint in one process (tools, tests): its metadata and every field as
    ``(comps, n)`` arrays in global order, each checked against its checksum."""
    ck = read_metadata(path)
    out = {}
    with open(path, "rb") as f:
        for name, spec in ck.fields.items():
            n = ck.n_cells if spec.kind == "cell" else ck.n_faces
            f.seek(spec.offset)
            a = np.fromfile(f, dtype="<f8", count=spec.comps * n).reshape(spec.comps, n)
            total = sum(field_checksum(a[c], c * n) for c in range(spec.comps)) & MASK
            if total != spec.checksum:
                raise CheckpointError(f"{path}: field {name!r} fails its checksum: the "
                                      "checkpoint is corrupted")
            out[name] = a
    return ck, out
