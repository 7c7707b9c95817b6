"""The parts of a decomposed case are data: read without pickles, sizes checked before any
allocation, every index checked (``haloflow/parallel/decomposed.py``)."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

from haloflow.case import load_case
from haloflow.cli.decompose import decompose
from haloflow.parallel.decomposed import (
    DecomposedError,
    case_digest,
    check_part,
    read_index,
    read_part,
)
from haloflow.parallel.local import build_local

SETS = ["mesh.cells=[6,5,1]", "parallel.decomposition=rcb"]


@pytest.fixture
def parts(tmp_path):
    case = load_case("cavity", SETS)
    out = tmp_path / "parts"
    decompose(case, 2, out, log=lambda *a: None)
    return case, out


def test_parts_read_back_as_they_were_cut(parts):
    from haloflow.mesh import from_case

    case, out = parts
    index = read_index(out, 2, case_digest(case))
    mesh = from_case(case.mesh)
    mesh.compact_indices()
    cells = np.zeros(mesh.n_cells, np.int64)
    for r in range(2):
        lm = read_part(out, r, index)
        cells[lm.global_cells[:lm.n_owned]] = r
    for r in range(2):
        want, got = build_local(mesh, cells, r), read_part(out, r, index)
        for k in ("global_cells", "owner", "neighbour", "face_ptr", "face_nodes", "points",
                  "send_cells", "recv_ptr", "global_faces"):
            a, b = getattr(want, k), getattr(got, k)
            assert a.dtype == b.dtype and np.array_equal(a, b), k
        assert np.array_equal(want.geometry.cell_volumes, got.geometry.cell_volumes)
        assert [p.name for p in want.patches] == [p.name for p in got.patches]
        assert got.global_cells.flags.writeable


def _replace(path, name, data: bytes):
    """Rewrite the npz ``path`` with member ``name.npy`` replaced by ``data``."""
    members = {}
    with zipfile.ZipFile(path) as z:
        for n in z.namelist():
            members[n] = z.read(n)
    members[f"{name}.npy"] = data
    with zipfile.ZipFile(path, "w") as z:
        for n, d in members.items():
            z.writestr(n, d)


def _npy(a) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def test_a_header_claiming_more_than_the_file_holds_allocates_nothing(parts):
    case, out = parts
    index = read_index(out, 2, case_digest(case))
    buf = io.BytesIO()  # a header claiming 10^12 values (8 TB), then 8 bytes
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<i8", "fortran_order": False, "shape": (10**12,)})
    _replace(out / "processor0.npz", "owner", buf.getvalue() + bytes(8))
    with pytest.raises(DecomposedError, match="more than the file holds"):
        read_part(out, 0, index)
    _replace(out / "processor0.npz", "owner", _npy(np.array([object()], dtype=object)))
    with pytest.raises(DecomposedError, match="not a plain number array"):
        read_part(out, 0, index)


def test_a_member_claiming_more_bytes_than_the_file_allocates_nothing(parts):
    """The zip's directory says the member holds 2 GB (a header to match would then pass
    the header check): refused from the sizes alone."""
    import struct

    case, out = parts
    index = read_index(out, 2, case_digest(case))
    path = out / "processor1.npz"
    data = bytearray(path.read_bytes())
    at = data.find(b"PK\x01\x02")
    while at != -1:  # every central directory entry: compressed and plain sizes
        data[at + 20:at + 28] = struct.pack("<II", 2**31, 2**31)
        at = data.find(b"PK\x01\x02", at + 4)
    path.write_bytes(bytes(data))
    with pytest.raises(DecomposedError, match="claims more bytes than the file holds"):
        read_part(out, 1, index)


@pytest.mark.parametrize("name,change,why", [
    ("owner", lambda a: a + 10**6, "face cells outside the cells"),
    ("face_nodes", lambda a: -a - 1, "face nodes outside the points"),
    ("send_cells", lambda a: a[:-1], "cells to send"),
    ("face_ptr", lambda a: a[::-1].copy(), "face offsets"),
])
def test_every_index_is_checked(parts, name, change, why):
    case, out = parts
    index = read_index(out, 2, case_digest(case))
    a = read_part(out, 1, index)
    _replace(out / "processor1.npz", name, _npy(change(np.asarray(getattr(a, name)))))
    with pytest.raises(DecomposedError, match=why):
        read_part(out, 1, index)


def test_the_index_names_what_does_not_match(parts):
    case, out = parts
    with pytest.raises(DecomposedError, match="decomposed for 2 ranks, this run has 4"):
        read_index(out, 4, case_digest(case))
    other = load_case("cavity", ["mesh.cells=[6,6,1]", "parallel.decomposition=rcb"])
    with pytest.raises(DecomposedError, match="another mesh or decomposition"):
        read_index(out, 2, case_digest(other))
    (out / "decomposition.json").write_text(json.dumps({"format": 1, "ranks": "two"}))
    with pytest.raises(DecomposedError, match="not a decomposition index"):
        read_index(out, 2, case_digest(case))


def test_check_part_accepts_what_build_local_cuts():
    from haloflow.mesh.blocks import box

    m = box((4, 3, 2))
    parts = np.arange(m.n_cells) % 3
    for r in range(3):
        assert check_part(build_local(m, parts, r), 3) is None
