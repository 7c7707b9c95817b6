"""The lexer of OpenFOAM's dictionary files, shared by the polyMesh reader (:mod:`.foam`) and
the blockMeshDict reader (:mod:`.blockmesh_dict`): a file's bytes and a cursor, tokens,
``//`` and ``/* */`` comments, strings, and byte offsets turned into line numbers only in
messages.  Files are data: nothing is ever evaluated.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from . import MeshError

SKIP = re.compile(rb"(?:\s+|//[^\n]*|/\*.*?\*/)*", re.S)
STRING = re.compile(rb'"(?:[^"\\\n]|\\.)*"')
WORD = re.compile(rb'[^\s(){};\[\]"]+')
COMMENT_OR_STRING = re.compile(rb'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/', re.S)
BLANK = bytes(b if b == 10 else 32 for b in range(256))  # keeps newlines, so lines still count
NO_PARENS = bytes.maketrans(b"()", b"  ")
SEPARATOR = np.zeros(256, bool)  # byte -> separates tokens in a list body
SEPARATOR[list(b" \t\r\n\f\v()")] = True


class Lexer:
    """A file's bytes and a cursor; byte offsets become line numbers only in messages."""

    macros = False  # True: ``$name`` comes back as a token (blockMeshDict expands it itself)

    def __init__(self, path: Path, data: bytes):
        self.path, self.data, self.pos = path, data, 0

    def line(self, pos: int | None = None) -> int:
        return self.data.count(b"\n", 0, self.pos if pos is None else pos) + 1

    def error(self, msg: str, pos: int | None = None) -> MeshError:
        return MeshError(f"{self.path}: line {self.line(pos)}: {msg}")

    def skip(self) -> None:
        self.pos = SKIP.match(self.data, self.pos).end()
        if self.data.startswith(b"/*", self.pos):
            raise self.error("comment '/*' is never closed")

    def token(self) -> tuple[str, int]:
        """The next token ('' at the end of the file) and where it starts."""
        self.skip()
        d, p = self.data, self.pos
        if p >= len(d):
            return "", p
        if d[p] in b"(){};[]":
            self.pos = p + 1
            return chr(d[p]), p
        m = (STRING if d[p] == 34 else WORD).match(d, p)
        if m is None:
            raise self.error("string is never closed", p)
        self.pos = m.end()
        text = m.group().decode("utf-8", "replace")
        if text[0] == "#" or (text[0] == "$" and not self.macros):
            raise self.error(f"{text}: directives and macros are not supported (mesh files "
                             "are read as data, never evaluated)", p)
        return text, p

    def expect(self, what: str, context: str) -> int:
        tok, p = self.token()
        if tok != what:
            raise self.error(f"expected '{what}' {context}, got {shown(tok)}", p)
        return p

    def dictionary(self, where: dict | None = None) -> dict:
        """Entries up to the closing '}': ``key value...;`` as token lists, ``key {...}``
        as dicts; ``where`` gets each entry's offset."""
        out: dict = {}
        where = {} if where is None else where
        while True:
            key, p = self.token()
            where[key] = p
            if key == "}":
                return out
            if not key or key in "(){};[]":
                raise self.error(f"expected an entry name or '}}', got {shown(key)}", p)
            tok, q = self.token()
            if tok == "{":
                out[key] = self.dictionary()
                continue
            values, depth = [], 0
            while tok != ";" or depth:
                if not tok:
                    raise self.error(f"entry '{key}' is not closed by ';'", p)
                depth += (tok in "([{") - (tok in ")]}")
                if depth < 0:
                    raise self.error(f"unbalanced {tok!r} in entry '{key}'", q)
                values.append(tok)
                tok, q = self.token()
            out[key] = values


def shown(tok: str) -> str:
    return "the end of the file" if not tok else repr(tok if len(tok) < 40 else tok[:37] + "...")
