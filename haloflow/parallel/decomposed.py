"""A decomposed case on disk: every rank's LocalMesh written once, read back by its rank alone.

``haloflow decompose CASE -n N -o DIR`` cuts the mesh for N ranks as a run would (rank 0's
mesh, partition and placement) and writes ``DIR/decomposition.json`` and one
``DIR/processorR.npz`` per rank; ``haloflow run CASE --decomposed DIR`` on N ranks then
reads only its own part: no rank builds or holds the whole mesh, as OpenFOAM's
``decomposePar`` and ``-parallel`` do.  The part of the case that decides the parts (the
mesh section, the mesh file's size and time, the decomposition and placement keys) is
digested into the JSON file; a run of another such case, or on another rank count, is
refused.

The files are data: arrays are read without pickles, each array's declared size is checked
against the bytes the file holds before it is read, and every index is checked against the
sizes it points into (:func:`check_part`), so that a damaged or hand-edited part ends in a
one-line error, never a crash, a hang or a huge allocation.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path

import numpy as np

from ..mesh.core import Geometry, Patch
from .local import LocalMesh

FORMAT = 1
INDEX = ("global_cells", "face_ptr", "face_nodes", "owner", "neighbour", "global_faces",
         "neighbours", "send_ptr", "send_cells", "recv_ptr")
REAL = ("points", "face_centres", "face_areas", "cell_centres", "cell_volumes")
OPTIONAL = ("face_shift", "shadow_nodes")  # periodic meshes only
GEOMETRY = ("face_centres", "face_areas", "cell_centres", "cell_volumes")


class DecomposedError(Exception):
    """A decomposed case that cannot be used: its one-line reason."""


def case_digest(case) -> str:
    """What decides the parts: the mesh section, the mesh file's size and modification time
    (a changed file is another mesh), the decomposition and placement keys."""
    import tomllib

    doc = tomllib.loads(case.to_toml())
    par = doc.get("parallel", {})
    keys = {"mesh": doc.get("mesh", {}),
            "parallel": {k: par.get(k) for k in ("decomposition", "placement",
                                                 "ranks_per_node")}}
    if case.mesh.type == "file":
        st = os.stat(case.mesh.file)
        keys["file"] = [st.st_size, st.st_mtime_ns]
    return hashlib.sha256(json.dumps(keys, sort_keys=True).encode()).hexdigest()


def part_name(rank: int) -> str:
    return f"processor{rank}.npz"


def write_part(folder: Path, lm: LocalMesh) -> dict:
    """Write ``lm``'s arrays to ``folder/processorR.npz`` (plain arrays, no pickles); returns
    its scalars and patches for decomposition.json."""
    arrays = {k: np.asarray(getattr(lm, k)) for k in INDEX}
    arrays["points"] = np.asarray(lm.points, dtype=np.float64)
    for k in GEOMETRY:
        arrays[k] = np.asarray(getattr(lm.geometry, k), dtype=np.float64)
    for k in OPTIONAL:
        if getattr(lm, k) is not None:
            arrays[k] = np.asarray(getattr(lm, k))
    path = folder / part_name(lm.rank)
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return {"rank": lm.rank, "n_owned": lm.n_owned, "n_ghost": lm.n_ghost,
            "n_interior": lm.n_interior,
            "patches": [[p.name, p.start, p.size, p.kind] for p in lm.patches]}


def read_index(folder: Path, ranks: int, digest: str) -> dict:
    """decomposition.json of ``folder``, checked against this run's rank count and case."""
    path = folder / "decomposition.json"
    try:
        if path.stat().st_size > 64 << 20:
            raise DecomposedError(f"{path}: over 64 MiB, not a decomposition index")
        doc = json.loads(path.read_text(encoding="utf-8"))
        n = int(doc["ranks"])
        ok = (doc.get("format") == FORMAT and isinstance(doc.get("parts"), list)
              and len(doc["parts"]) == n and all(isinstance(p, dict) for p in doc["parts"]))
    except FileNotFoundError:
        raise DecomposedError(f"{folder}: no decomposition.json (make one with haloflow "
                              "decompose CASE -n RANKS -o DIR)") from None
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
        raise DecomposedError(f"{path}: not a decomposition index ({e})") from None
    if not ok:
        raise DecomposedError(f"{path}: not a decomposition index of format {FORMAT}")
    if n != ranks:
        raise DecomposedError(f"{folder} is decomposed for {n} ranks, this run has {ranks} "
                              f"(run on {n}, or decompose again with -n {ranks})")
    if doc.get("case") != digest:
        raise DecomposedError(f"{folder} was decomposed from another mesh or decomposition "
                              "(mesh section, mesh file or parallel keys changed): "
                              "decompose again")
    return doc


def _array(z: zipfile.ZipFile, path: Path, name: str) -> np.ndarray:
    """One array of the npz, its header's size checked against the bytes it has first."""
    member = f"{name}.npy"
    try:
        info = z.getinfo(member)
    except KeyError:
        raise DecomposedError(f"{path}: no array {name!r}") from None
    if info.compress_type != zipfile.ZIP_STORED:
        raise DecomposedError(f"{path}: array {name!r} is compressed (expected as written)")
    if info.file_size != info.compress_size or info.file_size > path.stat().st_size:
        raise DecomposedError(f"{path}: array {name!r} claims more bytes than the file holds")
    with z.open(member) as f:
        try:
            version = np.lib.format.read_magic(f)
            header = {(1, 0): np.lib.format.read_array_header_1_0,
                      (2, 0): np.lib.format.read_array_header_2_0}.get(version)
            if header is None:
                raise ValueError(f"npy format {version}")
            shape, fortran, dtype = header(f)
        except ValueError as e:
            raise DecomposedError(f"{path}: array {name!r}: {e}") from None
        if dtype.hasobject or fortran or dtype.kind not in "iuf":
            raise DecomposedError(f"{path}: array {name!r} is not a plain number array")
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if count * dtype.itemsize > info.file_size:
            raise DecomposedError(f"{path}: array {name!r} claims {shape} values of "
                                  f"{dtype}, more than the file holds")
        out = np.empty(count, dtype=dtype)
        view, got = memoryview(out.view(np.uint8)), 0
        while got < len(view):
            n = f.readinto(view[got:])
            if not n:
                raise DecomposedError(f"{path}: array {name!r} is cut short")
            got += n
    return out.reshape(shape)


def read_part(folder: Path, rank: int, index: dict) -> LocalMesh:
    """This rank's LocalMesh from ``folder`` (checked: :func:`check_part`)."""
    path = folder / part_name(rank)
    meta = index["parts"][rank]
    try:
        with zipfile.ZipFile(path) as z:
            names = {n[:-4] for n in z.namelist()}
            a = {k: _array(z, path, k) for k in (*INDEX, *REAL)}
            a.update({k: _array(z, path, k) for k in OPTIONAL if k in names})
    except (OSError, zipfile.BadZipFile, EOFError) as e:
        raise DecomposedError(f"{path}: cannot be read ({e})") from None
    try:
        patches = [Patch(str(n), int(s), int(c), str(k)) for n, s, c, k in meta["patches"]]
        lm = LocalMesh(
            rank=rank, n_owned=int(meta["n_owned"]), n_ghost=int(meta["n_ghost"]),
            n_cells_global=int(index["n_cells"]), global_cells=a["global_cells"],
            points=a["points"], face_ptr=a["face_ptr"], face_nodes=a["face_nodes"],
            owner=a["owner"], neighbour=a["neighbour"], n_interior=int(meta["n_interior"]),
            global_faces=a["global_faces"], patches=patches,
            geometry=Geometry(*(a[k] for k in GEOMETRY)), neighbours=a["neighbours"],
            send_ptr=a["send_ptr"], send_cells=a["send_cells"], recv_ptr=a["recv_ptr"],
            face_shift=a.get("face_shift"), shadow_nodes=a.get("shadow_nodes"),
            n_faces_global=int(index["n_faces"]))
    except (KeyError, TypeError, ValueError) as e:
        raise DecomposedError(f"{folder / 'decomposition.json'}: part {rank}: {e}") from None
    why = check_part(lm, len(index["parts"]))
    if why:
        raise DecomposedError(f"{path}: {why}")
    return lm


def _within(a: np.ndarray, hi: int, lo: int = 0) -> bool:
    return a.size == 0 or (int(a.min()) >= lo and int(a.max()) < hi)


def check_part(lm: LocalMesh, ranks: int) -> str | None:
    """Why ``lm`` is no consistent LocalMesh of a ``ranks``-rank decomposition (None if it
    is): every length against the counts, every index within what it indexes."""
    nc, nf = lm.n_owned + lm.n_ghost, len(lm.owner)
    ni, g = len(lm.neighbour), lm.geometry
    checks = [
        (lm.n_owned >= 0 and lm.n_ghost >= 0, "negative cell counts"),
        (len(lm.global_cells) == nc and _within(lm.global_cells, lm.n_cells_global),
         "global cell ids do not match the cell counts"),
        (np.all(np.diff(lm.global_cells[:lm.n_owned]) > 0), "owned cells not ascending"),
        (lm.points.ndim == 2 and lm.points.shape[1:] == (3,), "points are not (n, 3)"),
        (len(lm.face_ptr) == nf + 1 and int(lm.face_ptr[0]) == 0
         and np.all(np.diff(lm.face_ptr) >= 3) and int(lm.face_ptr[-1]) == len(lm.face_nodes),
         "face offsets do not match the faces"),
        (_within(lm.face_nodes, len(lm.points)), "face nodes outside the points"),
        (ni <= nf and 0 <= lm.n_interior <= ni, "internal face counts"),
        (_within(lm.owner, nc) and _within(lm.neighbour, nc), "face cells outside the cells"),
        (len(lm.global_faces) == nf and _within(lm.global_faces, lm.n_faces_global),
         "global face ids do not match the faces"),
        (g.face_centres.shape == (nf, 3) and g.face_areas.shape == (nf, 3)
         and g.cell_centres.shape == (nc, 3) and g.cell_volumes.shape == (nc,),
         "geometry does not match the cells and faces"),
        (_patches_cover(lm.patches, ni, nf), "patches do not cover the boundary faces"),
        (_within(lm.neighbours, ranks) and np.all(np.diff(lm.neighbours) > 0)
         and not np.any(lm.neighbours == lm.rank), "neighbour ranks"),
        (_offsets(lm.send_ptr, len(lm.neighbours), len(lm.send_cells))
         and _within(lm.send_cells, lm.n_owned), "cells to send"),
        (_offsets(lm.recv_ptr, len(lm.neighbours), lm.n_ghost), "ghost cells to receive"),
        (lm.face_shift is None or lm.face_shift.shape == (ni, 3), "periodic shifts"),
        (lm.shadow_nodes is None or (lm.shadow_nodes.shape == lm.face_nodes.shape
                                     and _within(lm.shadow_nodes, len(lm.points))),
         "periodic shadow nodes"),
    ]
    return next((why for ok, why in checks if not ok), None)


def _patches_cover(patches: list, n_internal: int, n_faces: int) -> bool:
    at = n_internal
    for p in patches:
        if p.start != at or p.size < 0:
            return False
        at += p.size
    return at == n_faces


def _offsets(ptr: np.ndarray, n: int, total: int) -> bool:
    return (len(ptr) == n + 1 and int(ptr[0]) == 0 and bool(np.all(np.diff(ptr) >= 0))
            and int(ptr[-1]) == total)
