"""OpenFOAM polyMesh reader: ``points``, ``faces``, ``owner``, ``neighbour``, ``boundary``.

ASCII and binary files (``format binary;``, label and scalar sizes from the header's
``arch``), gzipped or not.  The files are read as data: the FoamFile header, ``//`` and
``/* */`` comments, ``N(...)`` lists (compact faces ``4(0 1 2 3)`` included), uniform
``N{value}`` lists and binary ``N(<raw bytes>)`` lists are understood; ``#include``,
``$macro`` and ``#calc`` are refused with the file and line, never evaluated.

OpenFOAM orders faces as haloflow does (internal faces first, upper-triangular, then the
patches); the reader checks that and restores it when a tool wrote something else.
"""

from __future__ import annotations

import gzip
import os
import re
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import MeshError
from .foam_lexer import BLANK, COMMENT_OR_STRING, NO_PARENS, SEPARATOR, Lexer, shown

__all__ = ["find_polymesh", "foam_patch_names", "read_foam"]

FILES = ("points", "faces", "owner", "neighbour", "boundary")

# OpenFOAM patch types haloflow has a kind for; any other type is read as a plain patch
KINDS = {"patch": "patch", "wall": "wall", "empty": "empty", "symmetry": "symmetry",
         "symmetryPlane": "symmetry"}

# what each file must hold (header ``class``); the first one is assumed without a header
CLASSES = {
    "points": ("vectorField", "pointField", "List<vector>"),
    "faces": ("faceList", "faceCompactList"),
    "owner": ("labelList", "List<label>"),
    "neighbour": ("labelList", "List<label>"),
    "boundary": ("polyBoundaryMesh",),
}

# -- file level --------------------------------------------------------------------------------

@dataclass
class _Header:
    binary: bool
    cls: str
    label: np.dtype
    scalar: np.dtype


def _open(folder: Path, name: str) -> Lexer:
    for path in (folder / name, folder / f"{name}.gz"):
        if path.is_file():
            try:
                data = read_bytes(path)
            except (OSError, EOFError, zlib.error) as e:
                raise MeshError(f"{path}: cannot read ({e})") from None
            return Lexer(path, data)
    raise MeshError(f"{folder}: no '{name}' file (a polyMesh needs {', '.join(FILES)})")


def read_bytes(path: Path) -> bytes:
    """The file's bytes, decompressed if it is a .gz, at most the mesh file ceiling of
    :mod:`haloflow.limits` (a small .gz can claim terabytes; a plain file has the same
    ceiling), read with that limit so that no more is ever held."""
    from ..limits import mesh_file_ceiling

    cap, why = mesh_file_ceiling()
    gz = path.suffix == ".gz"
    too_large = MeshError(f"{path}: larger than {cap} bytes{' decompressed' if gz else ''} "
                          f"({why})")
    chunks, n = [], 0
    with (gzip.open if gz else open)(path, "rb") as f:
        if not gz and os.fstat(f.fileno()).st_size > cap:
            raise too_large
        while chunk := f.read(1 << 22):
            n += len(chunk)
            if n > cap:
                raise too_large
            chunks.append(chunk)
    return b"".join(chunks)


def _header(lex: Lexer, name: str) -> _Header:
    """Parse the FoamFile header; ASCII files strip their comments afterwards (offsets kept)."""
    lex.skip()
    start = lex.pos
    tok, p = lex.token()
    head: dict = {}
    where: dict = {}
    if tok == "FoamFile":
        lex.expect("{", "after FoamFile")
        head = lex.dictionary(where)
    else:
        lex.pos = start
    fmt = " ".join(head.get("format", ["ascii"]))
    if fmt not in ("ascii", "binary"):
        raise lex.error(f"format {fmt}: expected ascii or binary", where.get("format", p))
    cls = " ".join(head.get("class", [CLASSES[name][0]]))
    if cls not in CLASSES[name]:
        raise lex.error(f"class {cls}: the {name} file holds a {' or '.join(CLASSES[name])}",
                        where.get("class", p))
    arch = " ".join(head.get("arch", ['"LSB;label=32;scalar=64"'])).strip('"')
    sizes = dict(re.findall(r"(label|scalar)=(\d+)", arch))
    order = ">" if "MSB" in arch else "<"
    label = {"32": "i4", "64": "i8"}.get(sizes.get("label", "32"))
    scalar = {"32": "f4", "64": "f8"}.get(sizes.get("scalar", "64"))
    if label is None or scalar is None:
        raise lex.error(f"arch {arch!r}: labels must be 32 or 64 bits, scalars 32 or 64",
                        where.get("arch", p))
    if fmt == "ascii":
        lex.data = lex.data[: lex.pos] + COMMENT_OR_STRING.sub(
            lambda m: m.group() if m.group()[:1] == b'"' else m.group().translate(BLANK),
            lex.data[lex.pos:])
    return _Header(fmt == "binary", cls, np.dtype(order + label), np.dtype(order + scalar))


def _size(lex: Lexer, what: str) -> tuple[int | None, str, int]:
    """A list's size (None for an ASCII list written without one), its opening token and
    where the list starts."""
    tok, p = lex.token()
    if tok == "(":
        return None, tok, p
    if not tok.isdigit():
        raise lex.error(f"expected the size of the {what} list, got {shown(tok)}", p)
    lex.skip()
    if lex.pos >= len(lex.data) or lex.data[lex.pos] not in b"({":
        raise lex.error(f"expected '(' or '{{' after the list size {tok}", lex.pos)
    opener = chr(lex.data[lex.pos])
    lex.pos += 1
    return int(tok), opener, p


def _binary(lex: Lexer, n: int, dtype: np.dtype, what: str, width: int = 1) -> np.ndarray:
    """``n`` raw items of ``width`` numbers after the '(' just read, then the closing ')'."""
    a, b = lex.pos, lex.pos + n * width * dtype.itemsize
    if b >= len(lex.data) or lex.data[b] != ord(")"):
        raise lex.error(f"binary {what} list of {n} items is truncated or not closed by ')' "
                        "(label or scalar size in the header's arch wrong?)", a)
    lex.pos = b + 1
    return np.frombuffer(lex.data, dtype, n * width, a).astype(dtype.newbyteorder("="))


def _closing(lex: Lexer, what: str) -> int:
    """Offset of the ')' closing the ASCII list whose '(' was just read."""
    arr = np.frombuffer(lex.data, np.uint8)[lex.pos:]
    parens = np.flatnonzero((arr == 40) | (arr == 41))
    depth = np.cumsum(np.where(arr[parens] == 40, 1, -1))
    hits = np.flatnonzero(depth < 0)
    if not len(hits):
        raise lex.error(f"{what} list is not closed by ')'")
    return lex.pos + int(parens[hits[0]])


def _numbers(lex: Lexer, a: int, b: int, dtype, what: str) -> np.ndarray:
    """The numbers between offsets ``a`` and ``b`` (parentheses ignored).

    ``np.fromstring`` in text mode parses without a Python object per number (3x faster
    than splitting); it stops at the first bad token, which is then looked for by hand.
    """
    body = lex.data[a:b].translate(NO_PARENS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            return np.fromstring(body, dtype=dtype, sep=" ")
        except (ValueError, DeprecationWarning):
            pass
    convert = float if np.dtype(dtype).kind == "f" else int
    for m in re.finditer(rb"\S+", body):
        try:
            convert(m.group())
        except ValueError:
            raise lex.error(f"{shown(m.group().decode('utf-8', 'replace'))} in the {what} "
                            f"list is not {'a number' if convert is float else 'an integer'}",
                            a + m.start()) from None
    return np.array(body.split(), dtype=dtype)


def _groups(lex: Lexer, a: int, b: int, what: str):
    """Inner lists ``(...)`` between offsets ``a`` and ``b``: per group the tokens written
    before its '(' and inside it, and where each group opens."""
    arr = np.frombuffer(lex.data, np.uint8)[a:b]
    opens, closes = np.flatnonzero(arr == 40), np.flatnonzero(arr == 41)
    if len(opens) != len(closes):
        raise lex.error(f"unbalanced parentheses in the {what} list", a)
    bad = np.flatnonzero((closes < opens) | (np.append(opens[1:], len(arr)) < closes))
    if len(bad):
        raise lex.error(f"nested or unbalanced parentheses in the {what} list", a + opens[bad[0]])
    sep = SEPARATOR[arr]
    starts = np.flatnonzero(sep[:-1] & ~sep[1:]) + 1  # where tokens begin
    if len(arr) and not sep[0]:
        starts = np.concatenate([[0], starts])

    def count(at):  # tokens beginning before each offset in ``at``
        return np.searchsorted(starts, at)

    n_open = count(opens)
    inside = count(closes) - n_open
    before = n_open - np.concatenate([[0], count(closes[:-1])])
    after = len(starts) - (count(closes[-1:])[0] if len(closes) else 0)
    if after:
        raise lex.error(f"stray value after the last item of the {what} list",
                        a + (closes[-1] if len(closes) else 0))
    return before, inside, n_open, a + opens


def _check_size(lex: Lexer, n: int | None, got: int, what: str, p: int) -> None:
    if n is not None and got != n:
        raise lex.error(f"the {what} list says {n} items but holds {got}", p)


def _uniform(lex: Lexer, n: int | None, limit: int, what: str, p: int) -> int:
    """The size of a uniform ``N{value}`` list, at most ``limit`` (what the mesh's other
    lists allow): a few bytes must not allocate gigabytes."""
    if n is not None and n > limit:
        raise lex.error(f"uniform {what} list of {n} items; the mesh allows at most {limit}", p)
    return n or 0


def _labels(lex: Lexer, head: _Header, what: str, limit: int = 0) -> np.ndarray:
    """A label list; a uniform one holds at most ``limit`` items."""
    n, opener, p = _size(lex, what)
    if opener == "{":
        n = _uniform(lex, n, limit, what, p)
        tok, q = lex.token()
        lex.expect("}", f"after the uniform {what} value")
        if not re.fullmatch(r"-?\d+", tok):
            raise lex.error(f"{shown(tok)} in the {what} list is not an integer", q)
        return np.full(n, int(tok), np.int64)
    if head.binary and n is not None:
        return _binary(lex, n, head.label, what).astype(np.int64)
    end = _closing(lex, what)
    if b"(" in lex.data[lex.pos:end]:
        raise lex.error(f"the {what} list holds lists; expected plain integers", p)
    out = _numbers(lex, lex.pos, end, np.int64, what)
    _check_size(lex, n, len(out), what, p)
    lex.pos = end + 1
    return out


def _vectors(lex: Lexer, head: _Header, what: str, limit: int = 0) -> np.ndarray:
    """A vector list; a uniform one holds at most ``limit`` items."""
    n, opener, p = _size(lex, what)
    if opener == "{":
        n = _uniform(lex, n, limit, what, p)
        lex.expect("(", f"in the uniform {what} value")
        end = _closing(lex, what)
        v = _numbers(lex, lex.pos, end, np.float64, what)
        lex.pos = end + 1
        lex.expect("}", f"after the uniform {what} value")
        if len(v) != 3:
            raise lex.error(f"uniform {what} value needs 3 components", p)
        return np.tile(v, (n, 1))
    if head.binary and n is not None:
        return _binary(lex, n, head.scalar, what, 3).astype(np.float64).reshape(n, 3)
    end = _closing(lex, what)
    before, inside, _, at = _groups(lex, lex.pos, end, what)
    bad = np.flatnonzero((before != 0) | (inside != 3))
    if len(bad):
        raise lex.error(f"expected (x y z) in the {what} list", at[bad[0]])
    _check_size(lex, n, len(inside), what, p)
    out = _numbers(lex, lex.pos, end, np.float64, what).reshape(-1, 3)
    lex.pos = end + 1
    return out


def _faces(lex: Lexer, head: _Header) -> tuple[np.ndarray, np.ndarray]:
    """Faces as CSR ``(ptr, nodes)``, from a faceList or a faceCompactList."""
    if head.cls == "faceCompactList":  # offsets list, then the flat list
        ptr = _labels(lex, head, "face offsets")
        nodes = _labels(lex, head, "face points")
        if len(ptr) == 0 or ptr[0] != 0 or np.any(np.diff(ptr) < 0) or ptr[-1] != len(nodes):
            raise lex.error("face offsets do not run from 0 up to the number of face points")
        return ptr, nodes
    n, opener, p = _size(lex, "faces")
    if opener == "{":
        raise lex.error("a uniform faces list makes no mesh", p)
    if head.binary and n is not None:  # rare: a faceList in binary, one face at a time
        sizes, parts = [], []
        for _ in range(n):
            k, _, _ = _size(lex, "face")
            parts.append(_binary(lex, k, head.label, "face").astype(np.int64))
            sizes.append(k)
        lex.expect(")", "after the last face")
        return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64), np.concatenate(parts)
    end = _closing(lex, "faces")
    before, inside, first, at = _groups(lex, lex.pos, end, "faces")
    bad = np.flatnonzero(before != 1)
    if len(bad):
        raise lex.error("expected N(point point ...) in the faces list", at[bad[0]])
    _check_size(lex, n, len(inside), "faces", p)
    flat = _numbers(lex, lex.pos, end, np.int64, "faces")
    heads = first - 1  # the size token in front of each '('
    bad = np.flatnonzero(flat[heads] != inside)
    if len(bad):
        raise lex.error(f"face says {flat[heads[bad[0]]]} points but lists {inside[bad[0]]}",
                        at[bad[0]])
    keep = np.ones(len(flat), bool)
    keep[heads] = False
    lex.pos = end + 1
    return np.concatenate([[0], np.cumsum(inside)]).astype(np.int64), flat[keep]


# -- boundary ----------------------------------------------------------------------------------

@dataclass
class _Entry:
    name: str
    type: str
    n_faces: int
    start: int
    neighbour: str | None
    line: int


def _boundary(folder: Path) -> tuple[Path, list[_Entry]]:
    """The boundary file's patches, ordered by their first face."""
    lex = _open(folder, "boundary")
    _header(lex, "boundary")
    n, opener, p = _size(lex, "boundary")
    if opener != "(":
        raise lex.error("expected '(' to open the list of patches", p)
    entries = []
    while True:
        name, q = lex.token()
        if name == ")":
            break
        if not name or name in "(){};[]":
            raise lex.error(f"expected a patch name or ')', got {shown(name)}", q)
        lex.expect("{", f"after patch name '{name}'")
        where: dict = {}
        d = lex.dictionary(where)

        def need(key, name=name, d=d, q=q):
            v = d.get(key)
            if v is None:
                raise lex.error(f"patch '{name}': no '{key}' entry", q)
            return " ".join(v) if isinstance(v, list) else "{...}"

        counts = []
        for key in ("nFaces", "startFace"):
            v = need(key)
            if not v.isdigit():
                raise lex.error(f"patch '{name}': {key} {v!r} is not a non-negative integer",
                                where[key])
            counts.append(int(v))
        nb = d.get("neighbourPatch")
        entries.append(_Entry(name, need("type"), counts[0], counts[1],
                              " ".join(nb) if isinstance(nb, list) else None, lex.line(q)))
    _check_size(lex, n, len(entries), "boundary", p)
    names = [e.name for e in entries]
    dup = next((x for x in names if names.count(x) > 1), None)
    if dup:
        raise lex.error(f"patch '{dup}' is defined twice", p)
    return lex.path, sorted(entries, key=lambda e: e.start)


# -- public ------------------------------------------------------------------------------------

def find_polymesh(path: str | Path) -> Path:
    """The polyMesh folder of a case directory, a ``constant`` or ``polyMesh`` directory,
    or a ParaView ``case.foam`` marker file."""
    p = Path(path)
    if p.is_file() or p.suffix == ".foam":  # case.foam, or one of the polyMesh files
        p = p.parent
    for folder in (p, p / "polyMesh", p / "constant" / "polyMesh"):
        if any((folder / f).is_file() or (folder / f"{f}.gz").is_file()
               for f in ("faces", "owner")):
            return folder
    what = "no such file or directory" if not p.exists() else "no OpenFOAM mesh"
    raise MeshError(f"{path}: {what} (expected a case with constant/polyMesh/"
                    f"{{{','.join(FILES)}}} or a polyMesh directory)")


def foam_patch_types(path: str | Path) -> dict[str, str]:
    """Each patch's ``type`` in the ``boundary`` file (wall, patch, empty, cyclic...), in mesh
    order."""
    return {e.name: e.type for e in _boundary(find_polymesh(path))[1]}


def foam_patch_names(path: str | Path) -> list[str]:
    """Patch names in mesh order, from the ``boundary`` file alone; ``cyclic`` patches are
    left out, as :func:`read_foam` joins them into internal faces."""
    return [e.name for e in _boundary(find_polymesh(path))[1] if e.type != "cyclic"]


def read_foam(path: str | Path, notes: list[str] | None = None):
    """Read a polyMesh into a :class:`~haloflow.mesh.core.Mesh`; ``notes`` collects what the
    reader decided for the user (patch types it cannot honour, faces it reordered)."""
    from .core import Mesh, Patch, take_faces  # numba comes with core: not needed for patch names

    notes = [] if notes is None else notes
    folder = find_polymesh(path)
    bpath, entries = _boundary(folder)

    def read(name, parse):
        lex = _open(folder, name)
        head = _header(lex, name)
        out = parse(lex, head)
        tok, p = lex.token()
        if tok:
            raise lex.error(f"unexpected {shown(tok)} after the {name} list", p)
        return lex.path, out

    # faces first: their size bounds what uniform lists in the other files may claim
    fpath, (ptr, nodes) = read("faces", _faces)
    nf = len(ptr) - 1
    ppath, points = read("points", lambda lex, h: _vectors(lex, h, "points", len(nodes)))
    opath, owner = read("owner", lambda lex, h: _labels(lex, h, "owner", nf))
    npath, neighbour = read("neighbour", lambda lex, h: _labels(lex, h, "neighbour", nf))
    check_finite(ppath, points)

    npts = len(points)
    if len(nodes) and (nodes.min() < 0 or nodes.max() >= npts):
        k = int(np.flatnonzero((nodes < 0) | (nodes >= npts))[0])
        f = int(np.searchsorted(ptr, k, side="right") - 1)
        raise MeshError(f"{fpath}: face {f} refers to point {nodes[k]}, but there are "
                        f"{npts} points")
    small = np.flatnonzero(np.diff(ptr) < 3)
    if len(small):
        raise MeshError(f"{fpath}: face {small[0]} has fewer than 3 points")
    if len(owner) != nf:
        raise MeshError(f"{opath}: {len(owner)} owners for {nf} faces")
    if len(neighbour) > nf:
        neighbour = neighbour[neighbour >= 0]  # very old meshes padded with -1
        if len(neighbour) > nf:
            raise MeshError(f"{npath}: {len(neighbour)} neighbours for {nf} faces; expected "
                            "one per internal face, at most one per face")
    if len(owner) and owner.min() < 0:
        raise MeshError(f"{opath}: negative cell index {owner.min()}")
    if len(neighbour) and neighbour.min() < 0:
        raise MeshError(f"{npath}: negative cell index {neighbour.min()}")
    ni = len(neighbour)
    n_cells = _cell_count(owner, neighbour, opath, npath)

    same = np.flatnonzero(owner[:ni] == neighbour)
    if len(same):
        raise MeshError(f"{npath}: face {same[0]} has cell {neighbour[same[0]]} on both sides")
    sizes = np.diff(ptr)
    flip = owner[:ni] > neighbour
    if flip.any():  # owner must be the lower cell: swap and turn the face round
        notes.append(f"{int(flip.sum())} internal faces had owner > neighbour: turned round")
        lo = np.minimum(owner[:ni], neighbour)
        neighbour = np.maximum(owner[:ni], neighbour)
        owner = np.concatenate([lo, owner[ni:]])
        nodes = _reverse(ptr, nodes, np.flatnonzero(flip))
    order = np.lexsort((neighbour, owner[:ni]))
    if np.any(order != np.arange(ni)):
        notes.append("internal faces reordered to upper-triangular order")
        perm = np.concatenate([order, np.arange(ni, nf)])
        nodes = take_faces(ptr, nodes, perm)[1]
        sizes = sizes[perm]
        ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        owner, neighbour = owner[perm], neighbour[order]

    patches, end, cyclic = [], ni, []
    for e in entries:
        if e.type == "processor" or e.type.startswith("processor"):
            raise MeshError(f"{bpath}: line {e.line}: patch '{e.name}' is a processor "
                            "boundary: read the undecomposed case, not processor*/")
        if e.start != end:
            raise MeshError(f"{bpath}: line {e.line}: patch '{e.name}' starts at face "
                            f"{e.start}, expected {end} (patches must follow the "
                            f"{ni} internal faces and each other)")
        kind = KINDS.get(e.type)
        if e.type == "cyclic":
            kind = "patch"
            cyclic.append(e)
        elif kind is None:
            kind = "patch"
            extra = f" (neighbour patch '{e.neighbour}')" if e.neighbour else ""
            notes.append(f"patch '{e.name}' has type {e.type}{extra}, which haloflow does "
                         "not model: read as a plain patch")
        patches.append(Patch(e.name, e.start, e.n_faces, kind))
        end += e.n_faces
    if end != nf:
        raise MeshError(f"{bpath}: patches cover faces {ni} to {end}, but the mesh has {nf} "
                        "faces")
    mesh = Mesh(points=points, face_ptr=ptr, face_nodes=nodes, owner=owner.astype(np.int64),
                neighbour=neighbour.astype(np.int64), patches=patches, n_cells=n_cells)
    if cyclic:
        mesh = _join_cyclic(mesh, bpath, cyclic)
        notes.append(f"cyclic patches joined into internal faces: "
                     f"{', '.join(e.name for e in cyclic)}")
    return mesh


def _cell_count(owner, neighbour, opath: Path, npath: Path) -> int:
    """Cells = the largest index + 1, which every cell's four faces or more bound: an index
    past that is a corrupt file, not a mesh to allocate cell arrays for."""
    most = (len(owner) + len(neighbour)) // 4
    for path, cells in ((opath, owner), (npath, neighbour)):
        top = int(cells.max(initial=-1))
        if top >= most:
            raise MeshError(f"{path}: cell index {top} out of range ({len(owner)} faces make "
                            f"at most {most} cells of 4 faces or more)")
    return int(max(owner.max(initial=-1), neighbour.max(initial=-1))) + 1


COORD_MAX = 1e30  # coordinates past this make areas and volumes overflow (case.BIG)


def check_finite(path: Path, points: np.ndarray) -> None:
    """Every coordinate finite and of a size whose squares and cubes a double holds."""
    bad = ~np.isfinite(points).all(axis=1)
    bad |= np.abs(np.where(bad[:, None], 0.0, points)).max(axis=1, initial=0.0) > COORD_MAX
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise MeshError(f"{path}: point {k} has coordinates {tuple(points[k].tolist())}; "
                        f"expected finite numbers of magnitude at most {COORD_MAX:g}")


def _join_cyclic(mesh, bpath: Path, cyclic: list[_Entry]):
    """Join each cyclic patch with its ``neighbourPatch`` (translational transforms only)."""
    from .periodic import stitch

    by_name = {e.name: e for e in cyclic}
    pairs, done = [], set()
    for e in cyclic:
        if e.name in done:
            continue
        other = by_name.get(e.neighbour or "")
        if other is None or other.neighbour != e.name:
            raise MeshError(f"{bpath}: line {e.line}: cyclic patch '{e.name}' needs a "
                            "'neighbourPatch' naming a cyclic patch that names it back "
                            f"(got {e.neighbour!r}); old single-patch cyclics need "
                            "foamUpgradeCyclics")
        pairs.append((e.name, other.name))
        done.update((e.name, other.name))
    return stitch(mesh, pairs, where=str(bpath))


def _reverse(ptr: np.ndarray, nodes: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """``nodes`` with the point order of ``faces`` reversed (their normals turned round)."""
    out = nodes.copy()
    start, size = ptr[faces], ptr[faces + 1] - ptr[faces]
    offs = np.arange(size.sum()) - np.repeat(np.cumsum(size) - size, size)
    out[np.repeat(start, size) + offs] = nodes[np.repeat(start + size - 1, size) - offs]
    return out
