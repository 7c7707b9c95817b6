"""ParaView output: one ``.vtu`` piece per rank and a ``.pvtu`` that ties them together.

Written by hand (XML with base64-inline binary arrays) so the solver needs no VTK package.
Hexahedral meshes are written as ``VTK_HEXAHEDRON``; anything else as ``VTK_POLYHEDRON``
with explicit face lists, which ParaView renders for any cell shape.  All cell data are
written as Float64 so a ``.pvtu`` needs only the component counts to describe them.
"""

from __future__ import annotations

import base64
import contextlib
import os
from html import escape

import numpy as np


def quoteattr(text: str) -> str:
    """``text`` as a quoted XML attribute value (``xml.sax.saxutils`` would import ``urllib``
    and ``ssl`` into every rank)."""
    return f'"{escape(text, quote=True)}"'


VTK_HEXAHEDRON = 12
VTK_POLYHEDRON = 42

_VTK_TYPES = {"f8": "Float64", "f4": "Float32", "i8": "Int64", "i4": "Int32", "u1": "UInt8"}
CHUNK_CELLS = 4096  # cells (or points) per block the writer makes and writes at a time


# -- cell topology --------------------------------------------------------------------------

def _ragged(ptr, rows, flip=None):
    """Concatenated entries of CSR ``rows`` (reversed where ``flip``), and their counts."""
    start, size = ptr[rows], ptr[rows + 1] - ptr[rows]
    seg = np.repeat(np.arange(len(rows)), size)
    k = np.arange(size.sum()) - np.repeat(np.cumsum(size) - size, size)
    if flip is not None:
        k = np.where(flip[seg], size[seg] - 1 - k, k)
    return start[seg] + k, size


def cell_faces(lmesh, first=0, last=None):
    """Faces of the owned cells ``first:last`` (all by default), grouped by cell, with nodes
    ordered outward.

    Returns ``(cptr, fptr, nodes)``: cell ``first + c`` has faces ``cptr[c]:cptr[c+1]`` in
    the face CSR ``fptr``/``nodes`` (local point indices).
    """
    last = lmesh.n_owned if last is None else last
    nbr = np.asarray(lmesh.neighbour)
    own = np.asarray(lmesh.owner)
    fo = np.flatnonzero((own >= first) & (own < last))
    fn = np.flatnonzero((nbr >= first) & (nbr < last))
    cells = np.concatenate([own[fo], nbr[fn]]) - first
    faces = np.concatenate([fo, fn])
    flip = np.concatenate([np.zeros(len(fo), bool), np.ones(len(fn), bool)])
    order = np.argsort(cells, kind="stable")
    faces, flip = faces[order], flip[order]
    idx, size = _ragged(np.asarray(lmesh.face_ptr), faces, flip)
    cptr = np.concatenate([[0], np.cumsum(np.bincount(cells, minlength=last - first))])
    fptr = np.concatenate([[0], np.cumsum(size)])
    nodes = np.asarray(lmesh.face_nodes)[idx]
    shadow = getattr(lmesh, "shadow_nodes", None)
    if shadow is not None:  # a periodic neighbour's own points, not its owner's side
        side = np.repeat(flip, size)
        nodes[side] = np.asarray(shadow)[idx[side]]
    return cptr, fptr, nodes


def _is_hex(cptr, fptr):
    """Whether every cell has six quadrilateral faces (then it has 8 points and 12 edges)."""
    return bool(np.all(np.diff(cptr) == 6) and np.all(np.diff(fptr) == 4))


def hex_connectivity(cptr, fptr, nodes):
    """VTK hexahedron node order (n_cells, 8) for cells made of six quads.

    The first face, reversed, is the bottom quad (its normal then points into the cell);
    each bottom node's top partner is the end of its one edge leaving the bottom face.
    """
    nc = len(cptr) - 1
    quads = nodes.reshape(nc, 6, 4)
    bottom = quads[:, 0, ::-1]
    tails = quads.reshape(nc, 24)
    heads = np.roll(quads, -1, axis=2).reshape(nc, 24)
    off_bottom = ~(heads[:, :, None] == bottom[:, None, :]).any(axis=2)
    rows = np.arange(nc)
    top = np.empty_like(bottom)
    for i in range(4):
        hit = (tails == bottom[:, i:i + 1]) & off_bottom
        top[:, i] = heads[rows, hit.argmax(axis=1)]
    return np.concatenate([bottom, top], axis=1)


def _n_distinct(conn):
    s = np.sort(conn, axis=1)
    return 1 + (np.diff(s, axis=1) != 0).sum(axis=1)


# -- XML, streamed ---------------------------------------------------------------------------
# A piece is written as it is made, a block of cells at a time: the writer holds a block's
# work, never the document (its base64 text is a third larger than the arrays it holds).

class _Base64:
    """Base64 of a byte stream fed in pieces, written to a text file as it comes (the one to
    two bytes past a multiple of three wait for the next piece)."""

    def __init__(self, f):
        self.f, self.rest = f, b""

    def write(self, raw: bytes) -> None:
        buf = self.rest + raw
        cut = len(buf) - len(buf) % 3
        self.f.write(base64.b64encode(memoryview(buf)[:cut]).decode("ascii"))
        self.rest = buf[cut:]

    def close(self) -> None:
        self.f.write(base64.b64encode(self.rest).decode("ascii"))


def _blocks(a):
    """``a`` in blocks of ``CHUNK_CELLS`` rows."""
    return (a[i:i + CHUNK_CELLS] for i in range(0, len(a), CHUNK_CELLS))


def _data_array(name, dtype, count, blocks, ncomp=1):
    """A DataArray writer: VTK inline binary, the base64 of a UInt64 byte count followed by
    the raw little-endian data, here ``count`` values made by ``blocks()`` (arrays cast to
    ``dtype``, in order) while they are written."""
    dtype = np.dtype(dtype).newbyteorder("<")
    vtype = _VTK_TYPES[dtype.str[1:]]
    comps = f' NumberOfComponents="{ncomp}"' if ncomp > 1 else ""

    def write(f):
        f.write(f'<DataArray type="{vtype}" Name={quoteattr(name)}{comps} format="binary">')
        out = _Base64(f)
        out.write(np.uint64(count * dtype.itemsize).tobytes())
        for b in blocks():
            out.write(np.ascontiguousarray(b, dtype=dtype).tobytes())
        out.close()
        f.write("</DataArray>")
    return write


def _whole(name, a, ncomp=1):
    """A DataArray writer of array ``a`` as it is (its own dtype)."""
    a = np.asarray(a)
    return _data_array(name, a.dtype, a.size, lambda: _blocks(a), ncomp)


def _cell_arrays(cell_data, n):
    out = []
    for name, v in cell_data.items():
        v = np.asarray(v)[:n]
        out.append(_data_array(name, np.float64, v.size, lambda v=v: _blocks(v),
                               1 if v.ndim == 1 else v.shape[1]))
    return out


def _write(path, items, kind):
    """Write the document: ``items`` (strings and writers of ``f``) one per line."""
    tmp = f"{path}.tmp"
    try:  # whole or not at all: a full disk leaves neither a partial file nor the .tmp
        with open(tmp, "w") as f:
            f.write(f'<?xml version="1.0"?>\n<VTKFile type="{kind}" version="1.0" '
                    f'byte_order="LittleEndian" header_type="UInt64">\n')
            for item in items:
                if isinstance(item, str):
                    f.write(item)
                else:
                    item(f)
                f.write("\n")
            f.write("</VTKFile>\n")
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) and not e.filename:  # a full disk's write names no file
            e.filename = str(path)
        raise


def _hex_blocks(lmesh):
    """The owned cells' VTK hexahedron connectivity (local point indices), a block of
    ``CHUNK_CELLS`` cells at a time: None for a block where a cell is no hexahedron of 8
    distinct points."""
    n = lmesh.n_owned
    for first in range(0, n, CHUNK_CELLS):
        cptr, fptr, nodes = cell_faces(lmesh, first, min(first + CHUNK_CELLS, n))
        conn = hex_connectivity(cptr, fptr, nodes) if _is_hex(cptr, fptr) else None
        yield conn if conn is not None and np.all(_n_distinct(conn) == 8) else None


def _cells_xml(lmesh, force_polyhedron):
    """(used points, Cells DataArray writers) for the owned cells.  Hexahedra are made twice,
    a block at a time, to find the points they use and then to write them: never all of
    their connectivity at once."""
    used = np.zeros(len(lmesh.points), bool)
    hexes = not force_polyhedron
    for conn in _hex_blocks(lmesh) if hexes else ():
        if conn is None:
            hexes = False
            break
        used[conn.ravel()] = True
    if hexes:
        number = np.cumsum(used) - 1  # a point's index among the used ones
        nc = lmesh.n_owned
        arrays = [_data_array("connectivity", np.int64, 8 * nc,
                              lambda: (number[c].ravel() for c in _hex_blocks(lmesh))),
                  _data_array("offsets", np.int64, nc, lambda: (
                      np.arange(8 * (i + 1), 8 * min(i + CHUNK_CELLS, nc) + 1, 8)
                      for i in range(0, nc, CHUNK_CELLS))),
                  _data_array("types", np.uint8, nc, lambda: (
                      np.full(min(CHUNK_CELLS, nc - i), VTK_HEXAHEDRON)
                      for i in range(0, nc, CHUNK_CELLS)))]
        return np.flatnonzero(used), arrays
    del used
    # polyhedra: point list = the cell's distinct points; faces = [nF, (n, ids...)*]
    cptr, fptr, nodes = cell_faces(lmesh)
    nc = len(cptr) - 1
    used, inv = np.unique(nodes, return_inverse=True)
    inv = inv.ravel()
    nfc = np.diff(cptr)
    cell_of_node = np.repeat(np.repeat(np.arange(nc), nfc), np.diff(fptr))
    key = np.unique(cell_of_node * len(used) + inv)
    conn = key % len(used)
    offsets = np.cumsum(np.bincount(key // len(used), minlength=nc))
    face_start = fptr + np.arange(len(fptr))  # face starts once face sizes are inserted
    stream = np.insert(inv, fptr[:-1], np.diff(fptr))
    stream = np.insert(stream, face_start[cptr[:-1]], nfc)
    faceoffsets = face_start[cptr[1:]] + np.arange(1, nc + 1)
    arrays = [_whole("connectivity", conn.astype(np.int64)),
              _whole("offsets", offsets.astype(np.int64)),
              _whole("types", np.full(nc, VTK_POLYHEDRON, np.uint8)),
              _whole("faces", stream.astype(np.int64)),
              _whole("faceoffsets", faceoffsets.astype(np.int64))]
    return used, arrays


# -- public ---------------------------------------------------------------------------------

def write_vtu(path, lmesh, cell_data, force_polyhedron=False):
    """Write the owned cells of ``lmesh`` and their ``cell_data`` (first n_owned rows)."""
    n = lmesh.n_owned
    used, cells = _cells_xml(lmesh, force_polyhedron)
    points = np.asarray(lmesh.points)
    pts = _data_array("Points", np.float64, 3 * len(used),
                      lambda: (points[b] for b in _blocks(used)), 3)
    _write(path, [
        "<UnstructuredGrid>",
        f'<Piece NumberOfPoints="{len(used)}" NumberOfCells="{n}">',
        "<Points>", pts, "</Points>",
        "<Cells>", *cells, "</Cells>",
        "<CellData>", *_cell_arrays(cell_data, n), "</CellData>",
        "</Piece>", "</UnstructuredGrid>",
    ], "UnstructuredGrid")


def write_pvtu(path, piece_files, cell_data_spec):
    """Write the parallel header naming the pieces (relative paths) and the cell arrays."""
    arrays = [f'<PDataArray type="Float64" Name={quoteattr(k)} NumberOfComponents="{c}"/>'
              for k, c in cell_data_spec.items()]
    pieces = [f"<Piece Source={quoteattr(str(p))}/>" for p in piece_files]
    body = "\n".join([
        '<PUnstructuredGrid GhostLevel="0">',
        '<PPoints><PDataArray type="Float64" NumberOfComponents="3"/></PPoints>',
        "<PCellData>", *arrays, "</PCellData>",
        *pieces, "</PUnstructuredGrid>",
    ])
    _write(path, [body], "PUnstructuredGrid")


def cell_data_spec(cell_data):
    """Component count of each cell array, as ``write_pvtu`` wants it."""
    return {k: 1 if np.ndim(v) == 1 else np.shape(v)[1] for k, v in cell_data.items()}


def write_pvd(path, entries):
    """A ParaView collection of ``entries`` ``(time, file relative to path's folder)``:
    ParaView opens it as an animation over the times."""
    sets = [f'<DataSet timestep="{t!r}" part="0" file={quoteattr(str(f))}/>'
            for t, f in entries]
    _write(path, ["\n".join(["<Collection>", *sets, "</Collection>"])], "Collection")


def write_fields(outdir, name, lmesh, cell_data, red, subdir="fields"):
    """Collective: each rank writes ``<subdir>/<name>_<rank>.vtu``; rank 0 adds
    ``<name>.pvtu`` once every piece is written.  ``red``: the run's
    :class:`~haloflow.parallel.reduce.Reducer` (or anything with its ``rank``, ``size``,
    ``bcast`` and ``gather``).

    Returns the path of the ``.pvtu`` file.
    """
    folder = os.path.join(outdir, subdir)
    if red.rank == 0:
        os.makedirs(folder, exist_ok=True)
    red.bcast(None)  # the folder exists before any rank writes into it
    write_vtu(os.path.join(folder, f"{name}_{red.rank}.vtu"), lmesh, cell_data)
    red.gather(None)  # rank 0 writes the .pvtu once every piece is there
    pvtu = os.path.join(folder, f"{name}.pvtu")
    if red.rank == 0:
        pieces = [f"{name}_{r}.vtu" for r in range(red.size)]
        write_pvtu(pvtu, pieces, cell_data_spec(cell_data))
    red.bcast(None)  # and every rank returns once it is written
    return pvtu
