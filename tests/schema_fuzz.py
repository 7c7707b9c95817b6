"""Case files drawn from the case schema itself, for the property-based tests of bad input
(tests/unit/test_fuzz_schema.py on one rank, tests/mpi/test_fuzz_schema_mpi.py on two).

Every key the schema knows (``haloflow.case.sections._schema``, the keys of the other
physics models and of a mesh file, and a patch's keys,
``haloflow.case.boundary._patch_schema``) can be given a value of the wrong type, an
extreme number or nothing at all (the key removed from the shipped cavity), or a key the
schema does not know can be added.  The outcome must be a run (exit 0), one line and exit
2 (bad input), or one line and exit 3 (the solution diverged): never a traceback, exit 1,
a second line or a hang.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import tomli_w
from hypothesis import strategies as st

from haloflow.case import CASES_DIR
from haloflow.case.boundary import _patch_schema
from haloflow.case.sections import _LES, _MESH_FILE, _RANS, _THERMAL, _schema

# every run is one step on a tiny mesh: the drawn values decide validity, not run time
FAST = ["--steps", "1", "--quiet", "--set", "mesh.cells=[3,3,1]", "--set",
        "output.fields=false", "--set", "output.plots=false"]


def schema_keys() -> list[tuple[str, ...]]:
    """Every dotted key of the schema (tables walked), and the keys of the cavity's lid."""
    out = []

    def walk(table, path):
        for k, v in table.items():
            if isinstance(v, dict):
                walk(v, path + (k,))
            else:
                out.append(path + (k,))

    walk(_schema(), ())
    walk({"physics": {**_THERMAL, **_LES, **_RANS}, "mesh": _MESH_FILE}, ())
    out += [("boundary", "top", k) for k in ("type", *_patch_schema()[1])]
    # the tiny mesh is forced (FAST); [boundary] is a table of patches, drawn above
    return sorted(k for k in set(out) if len(k) > 1 and k != ("mesh", "cells"))


# values near and past every edge, of every TOML type
NUMBERS = [0, -1, 1, 2, 3, 2**31, 2**63 - 1, -(2**63), 1e30, 1e31, 1e-30, 1e-31, 5e-324,
           1e308, -1e308, float("nan"), float("inf"), float("-inf"), 0.5, -0.0]
scalars = st.one_of(st.sampled_from(NUMBERS), st.integers(-3, 12), st.booleans(),
                    st.text(max_size=8).filter(lambda s: "\x00" not in s),
                    st.sampled_from(["wall", "inlet", "packed", "amg", "file", "piso",
                                    "boussinesq", "les", "rans", "wale", "simple"]))
values = st.one_of(scalars, st.lists(scalars, max_size=4),
                   st.dictionaries(st.sampled_from(["a", "U", "type"]), scalars, max_size=2))


def _set(raw: dict, key: tuple[str, ...], value) -> None:
    for k in key[:-1]:
        if not isinstance(raw.get(k), dict):
            raw[k] = {}
        raw = raw[k]
    raw[key[-1]] = value


def _remove(raw: dict, key: tuple[str, ...]) -> None:
    for k in key[:-1]:
        raw = raw.get(k)
        if not isinstance(raw, dict):
            return
    raw.pop(key[-1], None)


@st.composite
def case_files(draw) -> str:
    """The cavity's case file with one to three keys of the schema changed or removed, or
    an unknown key added."""
    raw = tomllib.loads((CASES_DIR / "cavity.toml").read_text())
    keys = schema_keys()
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(keys))
        op = draw(st.sampled_from(["value", "value", "remove", "unknown"]))
        if op == "remove":
            _remove(raw, key)
        elif op == "unknown":
            _set(raw, key[:-1] + (key[-1] + "_x",), draw(scalars))
        else:
            _set(raw, key, draw(values))
    return tomli_w.dumps(raw)


def judge(res, out: Path, text: str) -> None:
    """Exit 0 with a summary, or exit 2 or 3 with one printable line; nothing else."""
    assert res is not None, f"hung (timeout) on\n{text}"
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    if res.returncode == 0:
        assert (out / "summary.json").exists() and "Traceback" not in res.stderr, text
        return
    assert res.returncode in (2, 3), f"exit {res.returncode} on\n{text}\n{res.stderr[-3000:]}"
    assert len(lines) == 1, f"{len(lines)} lines on\n{text}\n{res.stderr[-3000:]}"
    assert lines[0].startswith("haloflow: error") and lines[0].isprintable(), (text, lines)
