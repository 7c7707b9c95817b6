"""The ``blockMeshDict`` dictionary read as data: vertices, ``hex`` blocks with their cell
counts and gradings, ``arc`` and ``polyLine`` edges, the boundary (or the old ``patches``
list), ``defaultPatch`` and ``$name`` references to earlier top-level entries, each checked
with the file and line of what is wrong.  Building the mesh from it: :mod:`.blockmesh`.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import MeshError
from .foam import COORD_MAX
from .foam_lexer import Lexer, shown

KEYWORDS = ("FoamFile", "scale", "convertToMeters", "vertices", "blocks", "edges", "boundary",
            "patches", "defaultPatch", "mergePatchPairs", "faces", "geometry", "mergeType",
            "checkFaceCorrespondence", "verbose")


UNSUPPORTED_EDGES = ("spline", "simpleSpline", "BSpline", "bezier", "projectCurve", "project")


@dataclass
class _Entry:
    pos: int  # where the keyword is
    toks: list  # (text, offset) of the value, $names expanded
    end: int  # offset of the closing ';' or '}'
    braced: bool


class _Stream:
    """One entry's tokens, read front to back; errors name the entry, line and expectation."""

    def __init__(self, lex: Lexer, name: str, entry: _Entry):
        self.lex, self.name, self.toks, self.end, self.i = lex, name, entry.toks, entry.end, 0

    def error(self, msg: str, pos: int | None = None) -> MeshError:
        return self.lex.error(f"{self.name}: {msg}", self.pos() if pos is None else pos)

    def peek(self) -> str:
        return self.toks[self.i][0] if self.i < len(self.toks) else ""

    def pos(self) -> int:
        return self.toks[self.i][1] if self.i < len(self.toks) else self.end

    def next(self, expected: str) -> tuple[str, int]:
        if self.i >= len(self.toks):
            raise self.error(f"expected {expected}, got the end of the entry")
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def expect(self, what: str, context: str) -> int:
        tok, p = self.next(f"'{what}' {context}")
        if tok != what:
            raise self.error(f"expected '{what}' {context}, got {shown(tok)}", p)
        return p

    def number(self, what: str) -> float:
        tok, p = self.next(what)
        try:
            v = float(tok)
        except ValueError:
            raise self.error(f"expected {what}, got {shown(tok)}", p) from None
        if not np.isfinite(v):
            raise self.error(f"expected {what}, got {shown(tok)}", p)
        return v

    def label(self, what: str, lo: int = 0, hi: int | None = None,
              ctx: str = "") -> tuple[int, int]:
        """An integer in ``lo..hi-1``; ``ctx`` (``"block 3: "``) leads the messages."""
        tok, p = self.next(f"a {what}")
        if not tok.lstrip("-").isdigit():
            raise self.error(f"{ctx}expected a {what}, got {shown(tok)}", p)
        v = int(tok)
        if v < lo or (hi is not None and v >= hi):
            rng = f"{lo}..{hi - 1}" if hi is not None else f">= {lo}"
            raise self.error(f"{ctx}{what} {v} is out of range ({rng})", p)
        return v, p

    def vector(self, what: str) -> np.ndarray:
        self.expect("(", f"to open {what} (x y z)")
        p = self.pos()
        v = [self.number(f"a coordinate of {what}") for _ in range(3)]
        self.expect(")", f"after the 3 coordinates of {what}")
        if max(map(abs, v)) > COORD_MAX:
            raise self.error(f"{what}: coordinates of magnitude above {COORD_MAX:g} make "
                             "areas and volumes overflow", p)
        return np.array(v)

    def open_list(self, what: str) -> None:
        """``(`` or ``N (``: OpenFOAM lists may say their size first."""
        if self.peek().isdigit():
            self.next(what)
        self.expect("(", f"to open the {what} list")

    def more(self) -> bool:
        """True while the current list has items; consumes its closing ')'."""
        if self.peek() == ")":
            self.next(")")
            return False
        if not self.peek():
            raise self.error("list is not closed by ')'")
        return True

    def skip_value(self) -> None:
        """Tokens up to the ';' ending a sub-entry (nested brackets and braces included)."""
        depth = 0
        while True:
            tok, _ = self.next("';'")
            if tok == ";" and not depth:
                return
            depth += (tok in "([{") - (tok in ")]}")

    def done(self) -> None:
        if self.i < len(self.toks):
            raise self.error(f"unexpected {shown(self.peek())} after the value (';' "
                             "missing?)")


MAX_EXPANDED = 1_000_000  # tokens $name references may add: ample for any real dictionary


def _read_entries(path: Path) -> tuple[Lexer, dict[str, _Entry]]:
    """The dictionary's top-level entries, ``$name`` references replaced by the value of the
    earlier entry ``name``; keywords neither known nor referenced are errors (typos)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise MeshError(f"{path}: cannot read ({e.strerror})") from None
    lex = Lexer(path, data)
    lex.macros = True
    entries: dict[str, _Entry] = {}
    used: set[str] = set()
    budget = len(data) + MAX_EXPANDED  # tokens all entries may hold once expanded
    while True:
        key, p = lex.token()
        if not key:
            break
        if key in "(){};[]" or key[0] == "$":
            raise lex.error(f"expected a keyword, got {shown(key)}", p)
        if key in entries:
            first = lex.line(entries[key].pos)
            raise lex.error(f"'{key}' is defined twice (first on line {first})", p)
        toks: list = []
        tok, q = lex.token()
        braced, depth = tok == "{", 0
        while True:
            if not tok:
                raise lex.error(f"entry '{key}' is not closed by {'}' if braced else ';'}", p)
            if tok[0] == "$":
                name = tok[1:]
                if name not in entries or entries[name].braced:
                    raise lex.error(f"{tok}: no entry '{name}' with a value before this line "
                                    "(only plain top-level $name references are expanded)", q)
                used.add(name)
                budget -= len(entries[name].toks)
                if budget < 0:
                    raise lex.error(f"{tok}: $name references expand past {MAX_EXPANDED} tokens "
                                    "(entries that repeat each other grow without end)", q)
                toks.extend(entries[name].toks)
            else:
                depth += (tok in "([{") - (tok in ")]}")
                if depth < 0 or (braced and depth == 0):
                    if not braced:
                        raise lex.error(f"unbalanced {tok!r} in entry '{key}'", q)
                    break
                if tok == ";" and depth == 0 and not braced:
                    break
                toks.append((tok, q))
            tok, q = lex.token()
        if braced:
            toks = toks[1:]  # the opening '{'
        entries[key] = _Entry(p, toks, q, braced)
    for key, e in entries.items():
        if key not in KEYWORDS and key not in used:
            close = difflib.get_close_matches(key, KEYWORDS, 1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise lex.error(f"unknown keyword '{key}' ({hint}expected one of "
                            f"{', '.join(KEYWORDS[1:])}, or an entry used as ${key})", e.pos)
    return lex, entries


@dataclass
class Block:
    labels: np.ndarray  # 8 vertex labels
    cells: tuple[int, int, int]
    grading: list  # 12 edges x sections (block fraction, cell fraction, expansion ratio)
    pos: int


@dataclass
class Edge:
    kind: str  # "arc" or "polyLine"
    start: int
    end: int
    through: np.ndarray  # the arc's middle point, or the polyLine's inner points
    pos: int


@dataclass
class _PatchDef:
    name: str
    type: str
    faces: list  # (4 labels, offset)
    pos: int
    neighbour: str | None = None  # cyclic: the partner patch


@dataclass
class BlockMeshDict:
    """A parsed blockMeshDict."""

    path: Path
    lex: Lexer
    scale: float
    vertices: np.ndarray
    blocks: list[Block]
    edges: list[Edge]
    patches: list[_PatchDef]
    default_name: str = "defaultFaces"
    default_type: str = "empty"
    notes: list[str] = field(default_factory=list)


def _grading_item(s: _Stream) -> list:
    """One edge's grading: a number, or multi-grading sections ``((length cells ratio) ...)``.
    A negative ratio ``-r`` means ``1/r``, as in blockMesh."""
    if s.peek() != "(":
        r = s.number("an expansion ratio")
        sections = [(1.0, 1.0, r)]
    else:
        s.next("(")
        sections = []
        while s.more():
            p = s.expect("(", "to open a grading section (length-fraction cells-fraction ratio)")
            vals = []
            while s.peek() != ")":
                vals.append(s.number("a number of the grading section"))
            s.next(")")
            if len(vals) != 3 or vals[0] <= 0 or vals[1] <= 0:
                raise s.error("a grading section is (length-fraction cells-fraction ratio) with "
                              "positive fractions", p)
            sections.append(tuple(vals))
        if not sections:
            raise s.error("empty multi-grading list")
    if any(r == 0 for _, _, r in sections):
        raise s.error("an expansion ratio of 0 makes no cells")
    if any(not RATIO_MIN <= abs(r) <= 1.0 / RATIO_MIN for _, _, r in sections):
        raise s.error(f"an expansion ratio must lie between {RATIO_MIN:g} and "
                      f"{1.0 / RATIO_MIN:g} in size (last/first cell size), got "
                      f"{max((r for _, _, r in sections), key=lambda r: abs(math.log(abs(r)))):g}")
    return [(f, c, r if r > 0 else -1.0 / r) for f, c, r in sections]


RATIO_MIN = 1e-8  # expansion ratios outside [1e-8, 1e8] make cells too small to measure


# what a block's cell costs while the mesh is built (points, corner lists, faces), a floor:
# a count past what memory holds is refused before anything is allocated
BYTES_PER_CELL = 400


MAX_CELLS = 2**31 - 1  # case.MAX_CELLS


def _count_cells(s: _Stream, b: int, cells: tuple, total: int, p: int) -> int:
    """``total`` plus block ``b``'s cells, refused past MAX_CELLS or the memory left."""
    from ..limits import too_big

    total += math.prod(cells)
    why = f"at most {MAX_CELLS} are allowed" if total > MAX_CELLS else \
        too_big(total * BYTES_PER_CELL)
    if why:
        raise s.error(f"block {b}: cell counts ({' '.join(map(str, cells))}) bring the mesh to "
                      f"{total} cells; {why}", p)
    return total


def _blocks(s: _Stream, n_vertices: int) -> list[Block]:
    blocks, total = [], 0
    s.open_list("blocks")
    while s.more():
        shape, p = s.next("a block ('hex')")
        b = len(blocks)
        if shape != "hex":
            raise s.error(f"block {b}: shape {shown(shape)}: only 'hex' blocks are supported",
                          p)
        s.expect("(", f"to open the vertex labels of block {b}")
        labels, q = [], s.pos()
        while s.peek() != ")" and s.peek():
            labels.append(s.label("vertex label", 0, n_vertices, f"block {b}: ")[0])
        s.expect(")", f"after the vertex labels of block {b}")
        if len(labels) != 8:
            raise s.error(f"block {b}: a hex needs 8 vertex labels, got {len(labels)}", q)
        if len(set(labels)) != 8:
            raise s.error(f"block {b}: vertex labels repeat ({' '.join(map(str, labels))}): "
                          "collapsed (prism or wedge) blocks are not supported", q)
        if s.peek() not in ("(", ""):
            s.next("a cell zone name")  # cell zones: haloflow has no use for them
        s.expect("(", f"to open the cell counts (nx ny nz) of block {b}")
        c = s.pos()
        cells = tuple(s.label("cell count", 1, None, f"block {b}: ")[0] for _ in range(3))
        s.expect(")", f"after the 3 cell counts of block {b}")
        total = _count_cells(s, b, cells, total, c)
        kind, named = "simpleGrading", s.peek() in ("simpleGrading", "edgeGrading")
        if named:
            kind = s.next("a grading")[0]
        if named or s.peek() == "(":
            g = s.pos()
            s.next("(")
            items = []
            while s.more():
                items.append(_grading_item(s))
            want = (3,) if kind == "simpleGrading" else (3, 12)
            if len(items) not in want:
                raise s.error(f"block {b}: {kind} needs {' or '.join(map(str, want))} values, "
                              f"got {len(items)}", g)
            grading = [items[e // 4] for e in range(12)] if len(items) == 3 else items
        else:
            grading = [[(1.0, 1.0, 1.0)]] * 12
        blocks.append(Block(np.array(labels), cells, grading, p))
    s.done()
    if not blocks:
        raise s.error("no blocks")
    return blocks


def _edges(s: _Stream, n_vertices: int) -> list[Edge]:
    edges = []
    s.open_list("edges")
    while s.more():
        kind, p = s.next("an edge kind ('arc' or 'polyLine')")
        if kind in UNSUPPORTED_EDGES:
            raise s.error(f"edge kind '{kind}' is not supported (only arc and polyLine; run "
                          "blockMesh and read its polyMesh instead)", p)
        if kind not in ("arc", "polyLine", "line"):
            raise s.error(f"unknown edge kind {shown(kind)} (expected arc or polyLine)", p)
        a = s.label("vertex label", 0, n_vertices, f"{kind}: ")[0]
        b = s.label("vertex label", 0, n_vertices, f"{kind}: ")[0]
        if kind == "arc":
            if s.peek() == "origin":
                raise s.error("'arc ... origin' is not supported: give a point on the arc", p)
            through = s.vector("the arc's middle point")[None]
        elif kind == "polyLine":
            s.expect("(", "to open the polyLine points")
            pts = []
            while s.more():
                pts.append(s.vector("a polyLine point"))
            through = np.array(pts).reshape(-1, 3)
        else:
            continue  # a straight line is what blockMesh does without an entry
        if a == b:
            raise s.error(f"edge {kind} {a} {b} starts and ends at the same vertex", p)
        edges.append(Edge(kind, a, b, through, p))
    s.done()
    return edges


def _face(s: _Stream, n_vertices: int, what: str) -> tuple[tuple[int, ...], int]:
    p = s.expect("(", f"to open a face of {what} (4 vertex labels)")
    labels = []
    while s.peek() not in (")", ""):
        labels.append(s.label("vertex label", 0, n_vertices, f"{what}: ")[0])
    s.expect(")", f"after a face of {what}")
    if len(labels) != 4 or len(set(labels)) != 4:
        raise s.error(f"a face of {what} needs 4 different vertex labels, got "
                      f"({' '.join(map(str, labels))})", p)
    return tuple(labels), p


def _boundary(s: _Stream, n_vertices: int) -> list[_PatchDef]:
    """The new syntax: ``name { type T; faces ((a b c d) ...); }``."""
    patches = []
    s.open_list("boundary")
    while s.more():
        name, p = s.next("a patch name")
        if name in "(){};":
            raise s.error(f"expected a patch name, got {shown(name)}", p)
        s.expect("{", f"after patch name '{name}'")
        kind, faces, partner = None, None, None
        while s.peek() != "}":
            key, q = s.next("an entry of the patch or '}'")
            if key == "type":
                kind = s.next(f"the type of patch '{name}'")[0]
                s.expect(";", f"after the type of patch '{name}'")
            elif key == "faces":
                faces = []
                s.open_list(f"faces of patch '{name}'")
                while s.more():
                    faces.append(_face(s, n_vertices, f"patch '{name}'"))
                s.expect(";", f"after the faces of patch '{name}'")
            elif key == "neighbourPatch":
                partner = s.next(f"the neighbour patch of '{name}'")[0]
                s.expect(";", f"after the neighbour patch of '{name}'")
            elif key in (";", "(", ")", "{"):
                raise s.error(f"patch '{name}': expected an entry name or '}}', got {key!r}", q)
            else:
                s.skip_value()  # inGroups, transform, ...: no effect on the mesh
        s.next("}")
        if kind is None or faces is None:
            raise s.error(f"patch '{name}': needs 'type' and 'faces' entries", p)
        patches.append(_PatchDef(name, kind, faces, p, partner))
    s.done()
    return patches


def _old_patches(s: _Stream, n_vertices: int) -> list[_PatchDef]:
    """The old syntax: ``type name ((a b c d) ...)``."""
    patches = []
    s.open_list("patches")
    while s.more():
        kind, p = s.next("a patch type")
        name = s.next(f"the name of a {kind} patch")[0]
        if kind in "(){};" or name in "(){};":
            raise s.error("expected 'type name ((a b c d) ...)'", p)
        faces = []
        s.open_list(f"faces of patch '{name}'")
        while s.more():
            faces.append(_face(s, n_vertices, f"patch '{name}'"))
        patches.append(_PatchDef(name, kind, faces, p))
    s.done()
    return patches


def parse(path: Path) -> BlockMeshDict:
    lex, entries = _read_entries(path)

    def stream(key):
        return _Stream(lex, key, entries[key])

    def empty_list(key, why):
        if key in entries:
            toks = [t for t, _ in entries[key].toks]
            if toks not in ([], ["(", ")"], ["0", "(", ")"]):
                raise stream(key).error(f"not supported ({why}); only an empty list is "
                                        "accepted")

    if "scale" in entries and "convertToMeters" in entries:
        raise lex.error("give 'scale' or 'convertToMeters', not both", entries["scale"].pos)
    scale = 1.0
    for key in ("scale", "convertToMeters"):
        if key in entries:
            s = stream(key)
            scale = s.number("a positive scale factor")
            s.done()
            if scale <= 0:
                raise s.error("must be positive", entries[key].pos)
    for key in ("vertices", "blocks"):
        if key not in entries:
            raise MeshError(f"{path}: no '{key}' entry (a blockMeshDict needs vertices and "
                            "blocks)")
    empty_list("mergePatchPairs", "merging non-conforming patches")
    empty_list("faces", "projected faces")
    empty_list("geometry", "projection geometry")

    s = stream("vertices")
    s.open_list("vertices")
    verts = []
    while s.more():
        if s.peek() != "(":
            tok, p = s.next("a vertex")
            raise s.error(f"vertex {len(verts)}: expected (x y z), got {shown(tok)} (named "
                          "and projected vertices are not supported)", p)
        verts.append(s.vector(f"vertex {len(verts)}"))
    s.done()
    if len(verts) < 8:
        raise s.error(f"{len(verts)} vertices: a hex block needs 8", entries["vertices"].pos)
    vertices = np.array(verts)
    blocks = _blocks(stream("blocks"), len(vertices))
    edges = _edges(stream("edges"), len(vertices)) if "edges" in entries else []
    if "boundary" in entries and "patches" in entries:
        raise lex.error("give 'boundary' or the old 'patches', not both",
                        entries["patches"].pos)
    patches = []
    if "boundary" in entries:
        patches = _boundary(stream("boundary"), len(vertices))
    elif "patches" in entries:
        patches = _old_patches(stream("patches"), len(vertices))
    out = BlockMeshDict(path, lex, scale, vertices, blocks, edges, patches)
    if "defaultPatch" in entries:
        s = stream("defaultPatch")
        while s.peek():
            key, q = s.next("name or type")
            if key not in ("name", "type"):
                raise s.error(f"unknown entry {shown(key)} (expected name or type)", q)
            setattr(out, f"default_{key}", s.next(f"the default patch {key}")[0])
            s.expect(";", f"after the default patch {key}")
    names = [p.name for p in patches]
    for p in patches:
        if names.count(p.name) > 1:
            raise lex.error(f"patch '{p.name}' is defined twice", p.pos)
        if p.type == "cyclic":
            other = next((q for q in patches if q.name == p.neighbour), None)
            if other is None or other.type != "cyclic" or other.neighbour != p.name:
                raise lex.error(f"cyclic patch '{p.name}' needs a 'neighbourPatch' naming a "
                                f"cyclic patch that names it back (got {p.neighbour!r})", p.pos)
    if "mergeType" in entries:
        out.notes.append("mergeType ignored: points shared by blocks are merged geometrically")
    return out
