"""The case file's schema engine: kinds of values, keys with defaults, tables checked
against them, and the one-line messages that name the dotted key and what was expected.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any


class CaseError(Exception):
    """A case file or override is wrong; the message is one line meant for the user."""


class _Invalid(Exception):
    """A checker's verdict: the value is not of the kind the key expects."""


class KeyProblem(Exception):
    """A problem at a dotted key, raised before we know if the file or an override caused it
    (also by the post-processors' ``validate``)."""

    def __init__(self, path: Sequence[str], message: str, also: Sequence[Sequence[str]] = ()):
        super().__init__(message)
        self.paths = [tuple(path), *map(tuple, also)]  # keys whose values may be to blame


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
            "\r": "\\r"}


def _string(s: str) -> str:
    def esc(c):
        if c in _ESCAPES:
            return _ESCAPES[c]
        return f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c

    return '"' + "".join(esc(c) for c in s) + '"'


def _q(name: str) -> str:
    """A name from the user in quotes; escaped when it holds control characters."""
    return f"'{name}'" if name.isprintable() else _string(name)


def _key(k: str) -> str:
    return k if _BARE.fullmatch(k) else _string(k)


def _fmt(v) -> str:
    """``v`` in TOML syntax on one line, as a message quotes it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_fmt(x)}" for k, x in v.items()) + "}"
    if hasattr(v, "isoformat"):  # tomllib's dates and times
        return v.isoformat()
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _shown(v, limit: int = 60) -> str:
    """A value as quoted in an error message: TOML syntax, one line, not too long."""
    s = _fmt(v)
    return s if len(s) <= limit else s[: limit - 3] + "..."


@dataclass(frozen=True)
class _Kind:
    """What a key holds: ``what`` completes "expected ...", ``check`` converts or raises."""

    what: str
    check: Callable[[Any], Any]


def _is_number(v) -> bool:
    # bool is an int in Python, but `nu = true` is a mistake, not 1.0
    return isinstance(v, int | float) and not isinstance(v, bool)


# Magnitudes past these make a mesh's areas and volumes (a length cubed, over up to 10^9
# cells) or a solver's coefficients under- or overflow a double: refused as input.
BIG = 1e30


TINY = 1e-30


def _number(lo: float | None = None, *, strict: bool = False, tiny: float = 0.0,
            big: float = BIG) -> _Kind:
    """A finite number above ``lo``, at most ``big`` in magnitude and, when ``tiny`` is set,
    at least ``tiny`` unless zero is allowed and given."""
    if lo is None:
        what = f"a number between -{big:g} and {big:g}"
    elif strict and lo == 0:
        what = f"a positive number from {tiny:g} to {big:g}" if tiny else \
            f"a positive number up to {big:g}"
    else:
        what = f"a number {'>' if strict else '>='} {lo:g}, at most {big:g}"

    def check(v):
        if not _is_number(v) or not math.isfinite(v) or abs(v) > big:
            raise _Invalid
        if lo is not None and (v <= lo if strict else v < lo):
            raise _Invalid
        if tiny and v and abs(v) < tiny:
            raise _Invalid
        return float(v)

    return _Kind(what, check)


def _integer(lo: int, hi: int = 2**31 - 1) -> _Kind:
    """An integer in [lo, hi]: every count has a ceiling, so that no input asks for a loop
    or an array without end (a million PISO correctors, 2**63 cells)."""
    def check(v):
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            raise _Invalid
        return v

    return _Kind(f"an integer from {lo} to {hi}", check)


def _boolean() -> _Kind:
    def check(v):
        if not isinstance(v, bool):
            raise _Invalid
        return v

    return _Kind("true or false", check)


def _choice(*options: str) -> _Kind:
    quoted = [_fmt(o) for o in options]
    what = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"

    def check(v):
        if not isinstance(v, str) or v not in options:
            raise _Invalid
        return v

    return _Kind(what, check)


def _vector(item: _Kind, plural: str, n: int = 3) -> _Kind:
    def check(v):
        if not isinstance(v, list | tuple) or len(v) != n:
            raise _Invalid
        return tuple(item.check(x) for x in v)

    return _Kind(f"a list of {n} {plural}", check)


_REQUIRED = object()


@dataclass(frozen=True)
class _Key:
    kind: _Kind
    default: Any = _REQUIRED


def _text(what: str) -> _Kind:
    def check(v):
        if not isinstance(v, str) or not v.strip():
            raise _Invalid
        return v

    return _Kind(what, check)


def _network() -> _Kind:
    def check(v):
        if not isinstance(v, str):
            raise _Invalid
        if v:
            from ..io.network import ModelError, network

            try:
                network(v)
            except ModelError as e:
                raise _Invalid from e
        return v

    return _Kind("a network preset (gige-tcp, gige-lowlatency, infiniband-sdr, "
                 "infiniband-fdr) or a NetPIPE .out file", check)


def _pairs() -> _Kind:
    def check(v):
        if not isinstance(v, list | tuple):
            raise _Invalid
        out = []
        for pair in v:
            if (not isinstance(pair, list | tuple) or len(pair) != 2
                    or not all(isinstance(x, str) and x for x in pair)):
                raise _Invalid
            out.append(tuple(pair))
        return tuple(out)

    return _Kind('a list of patch-name pairs, e.g. [["left", "right"]]', check)


def _speeds() -> _Kind:
    """A table of rank number -> relative compute speed in (0, 1] (emulated slow cores)."""
    def check(v):
        if not isinstance(v, dict) or len(v) > 1 << 20:
            raise _Invalid
        out = {}
        for k, x in v.items():
            if not (isinstance(k, str) and k.isdigit() and len(k) < 8 and _is_number(x)
                    and 0.001 <= x <= 1.0):
                raise _Invalid
            out[str(int(k))] = float(x)
        return out

    return _Kind("a table of rank numbers to speeds from 0.001 to 1, e.g. {1 = 0.5}", check)


def _fraction(lo: float = 0.0) -> _Kind:
    """A number in (0, 1], or in [lo, 1] where ``lo`` > 0."""
    def check(v):
        if not _is_number(v) or not (lo <= v if lo > 0.0 else 0.0 < v) or v > 1.0:
            raise _Invalid
        return float(v)

    return _Kind(f"a number from {lo:g} to 1" if lo > 0.0 else "a number in (0, 1]", check)


_POSITIVE = _number(0, strict=True, tiny=TINY)


_GRADING = _number(0, strict=True, tiny=1e-8, big=1e8)  # last/first cell size


_FRACTION = _fraction()
# an under-relaxation factor: A / a stays finite (1e-320 made the pressure matrix's V/A zero)
_RELAXATION = _fraction(1e-6)


_REAL = _number()


_XYZ = _vector(_REAL, f"numbers between -{BIG:g} and {BIG:g}")


_MESH_TYPE = _Key(_choice("box", "step", "cylinder", "file"), "box")


# patch pairs joined by a translation (haloflow.mesh.periodic); any mesh type takes it
_PERIODIC = _Key(_pairs(), ())


# The most cells a mesh may have: rank 0 builds the whole mesh, with 32-bit-safe counts.
MAX_CELLS = 2**31 - 1


_BARE = re.compile(r"[A-Za-z0-9_-]+")


def _dotted(path: Sequence[str]) -> str:
    """A key path as a message names it: parts that are not bare words quoted and escaped,
    so a key holding a newline or a terminal escape cannot break or colour the line."""
    return ".".join(_key(k) for k in path)


def _known(raw: dict, allowed: Sequence[str], path: tuple[str, ...]):
    """Reject unknown keys first: a typo explains a "missing" key better than the miss."""
    for k in raw:
        if k not in allowed:
            what = "section" if not path else "key"
            msg = f"unknown {what} '{_dotted(path + (k,))}' (expected one of: {', '.join(allowed)})"
            close = difflib.get_close_matches(k, allowed, n=1)
            if close:
                msg += f"; did you mean '{close[0]}'?"
            raise KeyProblem(path + (k,), msg)


def _is_table(raw, path: tuple[str, ...]):
    if not isinstance(raw, dict):
        raise KeyProblem(path, f"{_dotted(path)}: expected a table, got {_shown(raw)}")


def _table(raw, schema: dict, path: tuple[str, ...]) -> SimpleNamespace:
    _is_table(raw, path)
    _known(raw, list(schema), path)
    out = {}
    for k, spec in schema.items():
        if isinstance(spec, dict):
            out[k] = _table(raw.get(k, {}), spec, path + (k,))
        else:
            out[k] = _value(raw, k, spec, path)
    return SimpleNamespace(**out)


def _value(raw: dict, k: str, key: _Key, path: tuple[str, ...]):
    where = path + (k,)
    if k not in raw:
        if key.default is _REQUIRED:
            raise KeyProblem(where, f"{_dotted(where)}: required key missing "
                                    f"(expected {key.kind.what})")
        if key.default is None:  # optional, no default
            return None
        return key.kind.check(key.default)
    try:
        return key.kind.check(raw[k])
    except _Invalid:
        raise KeyProblem(where, f"{_dotted(where)}: expected {key.kind.what}, "
                                f"got {_shown(raw[k])}") from None
