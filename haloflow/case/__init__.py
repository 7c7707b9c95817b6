"""Case files: TOML data in, one validated :class:`Case` out.

A case file is data, never code: it is read with :mod:`tomllib`, merged with
``--set section.key=VALUE`` overrides and checked against a schema that also supplies the
defaults (:mod:`.schema`, the sections' keys in :mod:`.sections`, :mod:`.boundary` and
:mod:`.postprocess`).  Every problem becomes a one-line :class:`CaseError` naming the file
(or the override), the dotted key and what was expected, so a user can fix it without a
traceback.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from .boundary import _boundary
from .postprocess import check_postprocessors
from .schema import _BARE, CaseError, KeyProblem, _known, _string, _table
from .sections import (
    _LES,
    _RANS,
    _SECTIONS,
    _THERMAL,
    _initial,
    _mesh,
    _needs_wall,
    _physics,
    _schema,
    _solver,
    _transient_inflow,
)

__all__ = ["Case", "CaseError", "KeyProblem", "builtin_cases", "load_case"]


CASES_DIR = Path(__file__).parent.parent / "cases"


@dataclass
class Case:
    """A validated case with every default filled in.

    ``name`` and ``source`` say where it came from and take no part in ``==``: a case written
    out with :meth:`to_toml` and read back is the same case.
    """

    mesh: SimpleNamespace
    physics: SimpleNamespace
    boundary: dict[str, SimpleNamespace]
    solver: SimpleNamespace
    parallel: SimpleNamespace
    output: SimpleNamespace
    postprocess: SimpleNamespace
    initial: SimpleNamespace
    name: str = field(default="case", compare=False)
    source: Path | None = field(default=None, compare=False)

    def to_dict(self) -> dict:
        """The resolved case as plain TOML-ready data (lists, no ``None``)."""
        return {s: _plain(getattr(self, s)) for s in _SECTIONS}

    def to_toml(self) -> str:
        """The resolved case as a TOML file that :func:`load_case` reads back unchanged
        (floats written with repr: bit for bit)."""
        import tomli_w

        header = f"# haloflow case {_string(self.name)}, all defaults resolved\n\n"
        return header + tomli_w.dumps(self.to_dict())


def _plain(v):
    if isinstance(v, SimpleNamespace):
        v = vars(v)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items() if x is not None}
    if isinstance(v, tuple | list):
        return [_plain(x) for x in v]
    return v


def builtin_cases() -> list[str]:
    """Names of the cases shipped in ``haloflow/cases``."""
    return sorted(p.stem for p in CASES_DIR.glob("*.toml"))


def load_case(source: str | Path, overrides: Iterable[str] = ()) -> Case:
    """Read a built-in case by name, or a TOML file by path, apply overrides and validate."""
    path, label = _locate(source)
    raw = _read(path, label)
    physics = raw.get("physics")
    file_model = physics.get("model") if isinstance(physics, dict) else None
    file_closure = physics.get("closure") if isinstance(physics, dict) else None
    applied = []
    for text in overrides:
        keys, value = _parse_override(text)
        _apply(raw, keys, value, text)
        applied.append((keys, text))
    # a mesh file or profile table is relative to the case file, or to the working directory
    # if --set gave it
    by_override = frozenset(tuple(keys) for keys, _ in applied)
    _drop_switched_model_keys(raw, file_model, by_override)
    _drop_switched_closure_keys(raw, file_closure, by_override)
    try:
        parts = _resolve(raw, path.parent, by_override)
    except KeyProblem as p:
        raise CaseError(f"{_blame(p.paths, applied, label)}: {p}") from None
    return Case(**parts, name=path.stem, source=path)


def _drop_switched_model_keys(raw: dict, file_model, by_override) -> None:
    """``--set physics.model`` away from the file's model drops the file's keys of that
    model (an LES case's closure and constants, say), which would otherwise be refused as
    keys of another model: switching the model from the command line takes the new model's
    defaults.  Keys that ``--set`` gave are kept, and checked."""
    physics = raw.get("physics")
    if not isinstance(physics, dict) or ("physics", "model") not in by_override \
            or physics.get("model") == file_model:
        return
    own = {"les": _LES, "rans": _RANS, "boussinesq": _THERMAL}.get(file_model, {})
    plain = _schema()["physics"]
    for k in [k for k in physics if k in own and k not in plain]:
        if ("physics", k) not in by_override:
            del physics[k]


def _drop_switched_closure_keys(raw: dict, file_closure, by_override) -> None:
    """``--set physics.closure`` away from the file's closure drops the file's keys of that
    closure (kEqn's ``k_init``), as a switched model drops its keys; ``--set`` ones stay."""
    physics = raw.get("physics")
    if isinstance(physics, dict) and ("physics", "closure") in by_override \
            and physics.get("closure") != file_closure \
            and ("physics", "k_init") not in by_override:
        physics.pop("k_init", None)


def _locate(source: str | Path) -> tuple[Path, str]:
    """The file to read and how to name it in messages."""
    path = Path(source)
    if path.is_file():
        return path, str(source)
    known = f"built-in cases: {', '.join(builtin_cases()) or 'none'}"
    if isinstance(source, str) and _BARE.fullmatch(source):
        builtin = CASES_DIR / f"{source}.toml"
        if builtin.is_file():
            return builtin, builtin.name
        raise CaseError(f"{source}: no such built-in case or file ({known})")
    if path.exists():
        raise CaseError(f"{source}: not a case file ({known})")
    raise CaseError(f"{source}: no such case file ({known})")


MAX_CASE_BYTES = 1 << 24  # a case file is a page of settings, never megabytes


def _read(path: Path, label: str) -> dict:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_CASE_BYTES + 1)
        if len(data) > MAX_CASE_BYTES:
            raise CaseError(f"{label}: larger than {MAX_CASE_BYTES >> 20} MiB; expected a "
                            "case file (TOML settings)")
        raw = tomllib.loads(data.decode("utf-8"))
        if _too_deep(raw):
            raise RecursionError
        return raw
    except RecursionError:
        raise CaseError(f"{label}: arrays or tables nested too deeply") from None
    except tomllib.TOMLDecodeError as e:
        # tomllib ends its message with "(at line L, column C)"; lead with the line instead
        msg = str(e)
        m = re.search(r"\s*\(at line (\d+), column (\d+)\)$", msg)
        if m:
            msg = f"line {m[1]}: {msg[: m.start()]} (column {m[2]})"
        raise CaseError(f"{label}: {msg}") from None
    except UnicodeDecodeError:
        raise CaseError(f"{label}: not a UTF-8 text file") from None
    except OSError as e:
        raise CaseError(f"{label}: cannot read ({e.strerror})") from None


MAX_DEPTH = 32  # tables and arrays within each other: a case needs 4


def _too_deep(value) -> bool:
    """Nested deeper than MAX_DEPTH (checked without recursion: messages and checks that
    walk a value recursively must never meet one deep enough to exhaust the stack)."""
    level = [value]
    for _ in range(MAX_DEPTH + 1):
        level = [x for v in level for x in (v.values() if isinstance(v, dict) else
                                            v if isinstance(v, list) else ())]
        if not level:
            return False
    return True


def _parse_override(text: str) -> tuple[tuple[str, ...], Any]:
    """``"solver.pressure.tol=1e-9"`` -> (("solver", "pressure", "tol"), 1e-9)."""
    key, eq, value = text.partition("=")
    keys = tuple(k.strip() for k in key.split("."))
    if not eq or len(keys) < 2 or not all(_BARE.fullmatch(k) for k in keys):
        raise CaseError(f"{_set(text)}: expected section.key=VALUE, e.g. --set solver.dt=0.01")
    value = value.strip()
    try:
        parsed = tomllib.loads("v = " + value)["v"]
        if _too_deep(parsed):
            raise RecursionError
        return keys, parsed
    except RecursionError:
        raise CaseError(f"{_set(text)}: the value is nested too deeply") from None
    except tomllib.TOMLDecodeError:
        return keys, value  # not a TOML value: a bare word, as in parallel.halo=packed


def _apply(raw: dict, keys: tuple[str, ...], value, text: str):
    table = raw
    for i, k in enumerate(keys[:-1]):
        table = table.setdefault(k, {})
        if not isinstance(table, dict):
            raise CaseError(f"{_set(text)}: {'.'.join(keys[: i + 1])} is not a table")
    table[keys[-1]] = value


def _blame(paths: list[tuple[str, ...]], applied, label: str) -> str:
    """The last override touching one of ``paths`` caused the problem; otherwise the file."""
    for keys, text in reversed(applied):
        for path in paths:
            n = min(len(keys), len(path))
            if keys[:n] == path[:n]:
                return _set(text)
    return label


def _set(text: str) -> str:
    """An override as named in messages, kept on one line and not too long."""
    shown = text if text.isprintable() else _string(text)
    return f"--set {shown if len(shown) <= 120 else shown[:117] + '...'}"


def _resolve(raw: dict, base: Path = Path("."), by_override=frozenset()) -> dict:
    """Validate every section; file paths are relative to ``base`` (the case file's folder),
    or to the working directory for keys set by ``--set`` (``by_override``)."""

    def base_of(keys):
        return Path.cwd() if tuple(keys) in by_override else base

    _known(raw, _SECTIONS, ())
    out = {}
    for section in _SECTIONS:
        if section == "mesh":
            out[section] = _mesh(raw.get(section, {}), base_of(("mesh", "file")))
        elif section == "physics":
            out[section] = _physics(raw.get(section, {}))
        elif section == "boundary":
            out[section] = _boundary(raw.get(section, {}), out["mesh"], base_of,
                                     out["physics"].model)
        elif section == "solver":
            out[section] = _solver(raw.get(section, {}), out["physics"].model)
        else:
            out[section] = _table(raw.get(section, {}), _schema()[section], (section,))
    case = SimpleNamespace(**out)
    check_postprocessors(case)
    _initial(case)
    _needs_wall(case)
    _transient_inflow(case)
    return out
