"""An OpenFOAM case directory read as a haloflow case: ``haloflow foam-case DIR``.

What maps (OpenFOAM v1912's files; everything read as data, nothing evaluated):

- ``constant/polyMesh``, or ``system/blockMeshDict`` where there is none yet: the mesh
  (``[mesh] type = "file"``), its patches' types;
- ``system/controlDict``: ``application`` (icoFoam, pisoFoam, pimpleFoam: PISO; simpleFoam:
  SIMPLE), ``deltaT``, ``startTime`` (0), ``endTime`` (SIMPLE: the iteration limit);
- ``constant/transportProperties``: a Newtonian ``nu``; ``constant/turbulenceProperties``
  (or ``momentumTransport``): laminar only;
- ``system/fvSchemes``: Euler or backward in time, ``div(phi,U)`` Gauss linear, upwind or
  linearUpwind (``bounded`` too), Gauss or leastSquares gradients, corrected, uncorrected
  or orthogonal Laplacians;
- ``system/fvSolution``: the ``p``, ``pFinal`` and ``U`` solvers' ``tolerance`` and
  ``relTol``, PISO's ``nCorrectors`` and ``nNonOrthogonalCorrectors``, SIMPLE's
  ``consistent``, ``residualControl`` and relaxation factors;
- ``0/U``, ``0/p``: each patch's conditions as one of haloflow's patch types (a wall, an
  inlet of a uniform velocity, an outlet at a uniform pressure, symmetry, slip, empty), a
  uniform initial velocity.

What does not map is listed, one line each (``notes``): a setting left at haloflow's own
choice; a boundary or application that cannot be run at all is an error (:class:`CaseError`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from ..mesh import MeshError, mesh_format
from ..mesh.blockmesh import blockmesh_patch_types
from ..mesh.foam import find_polymesh, foam_patch_types, read_bytes
from ..mesh.foam_lexer import Lexer
from .schema import CaseError

PISO_SOLVERS = ("icoFoam", "pisoFoam", "pimpleFoam")
CONVECTION = {"linear": "linear", "upwind": "upwind", "linearUpwind": "linear-upwind"}
GRADIENT = {"linear": "gauss", "leastSquares": "least-squares"}


class _Lexer(Lexer):
    """OpenFOAM's lexer, with ``$name`` references handed back and ``#`` directives
    skipped to the end of their line and listed (``#includeEtc`` and the like: included
    files are never read)."""

    macros = True

    def __init__(self, path: Path, data: bytes):
        super().__init__(path, data)
        self.directives: list[str] = []

    def token(self) -> tuple[str, int]:
        self.skip()
        while self.data.startswith(b"#", self.pos):
            end = self.data.find(b"\n", self.pos)
            end = len(self.data) if end < 0 else end
            self.directives.append(self.data[self.pos:end].decode("utf-8", "replace").strip())
            self.pos = end
            self.skip()
        text, p = super().token()
        if text[:1].isalpha() and self.data.startswith(b"(", self.pos):
            text = self._glued(text, p)
        return text, p

    def _glued(self, text: str, p: int) -> str:
        """A word with its parentheses, as OpenFOAM reads ``div(phi,U)`` or
        ``grad(U)``: one word where they close before any blank."""
        depth, q, d = 0, self.pos, self.data
        while q < len(d) and d[q] not in b" \t\r\n;{}":
            depth += (d[q] == 40) - (d[q] == 41)
            q += 1
            if depth == 0 and d[q - 1] == 41:
                self.pos = q
                return d[p:q].decode("utf-8", "replace")
        return text


NONUNIFORM = re.compile(rb"\binternalField\s+nonuniform\b[^(;]*")


def _skip_nonuniform(data: bytes) -> bytes:
    """``internalField nonuniform List<...> N ( ... )`` with its list emptied: a field's
    values are not needed, and a large mesh's would cost a token each.  The list's end is
    found among the positions of its parentheses alone (two per vector)."""
    m = NONUNIFORM.search(data)
    if m is None or not data.startswith(b"(", m.end()):
        return data
    start = m.end()
    body = np.frombuffer(data, np.uint8, offset=start)
    at = np.flatnonzero((body == ord("(")) | (body == ord(")")))
    depth = np.cumsum(np.where(body[at] == ord("("), 1, -1))
    closed = np.flatnonzero(depth == 0)
    end = start + int(at[closed[0]]) if len(closed) else len(data) - 1
    return data[:start] + b"()" + data[end + 1:]


def read_dictionary(path: Path, notes: list[str]) -> dict:
    """An OpenFOAM dictionary file's entries (``FoamFile`` left out): token lists and
    sub-dictionaries; its directives go to ``notes``."""
    try:
        data = read_bytes(path)
    except OSError as e:
        raise CaseError(f"{path}: cannot read ({e.strerror})") from None
    except MeshError as e:
        raise CaseError(str(e)) from None
    lex = _Lexer(path, _skip_nonuniform(data) + b"\n}")
    try:
        entries = lex.dictionary()
        if lex.token()[0]:
            raise lex.error("unexpected '}' at the top level")
    except MeshError as e:
        raise CaseError(str(e)) from None
    notes += [f"{path}: {d}: not followed (included files are not read)"
              for d in lex.directives]
    entries.pop("FoamFile", None)
    return entries


def _text(value) -> str:
    return " ".join(value) if isinstance(value, list) else "{...}"


def _resolve(value, top: dict, path: Path, key: str):
    """A ``$name`` reference replaced by the top-level entry it names."""
    if isinstance(value, list) and len(value) == 1 and value[0].startswith("$"):
        name = value[0][1:]
        if not isinstance(top.get(name), list):
            raise CaseError(f"{path}: {key}: ${name} names no entry of this file")
        return top[name]
    return value


def _number(value, path: Path, key: str) -> float:
    """The last token of a scalar entry (``nu [0 2 -1 0 0 0 0] 0.01;``, ``deltaT 0.005;``)."""
    try:
        x = float(value[-1]) if isinstance(value, list) and value else float("nan")
    except ValueError:
        x = float("nan")
    if not np.isfinite(x):
        raise CaseError(f"{path}: {key}: expected a number, got {_text(value)!r}")
    return x


def _uniform(value, path: Path, key: str, size: int) -> list[float] | float:
    """``uniform x`` or ``uniform (x y z)``."""
    v = [t for t in value if t not in "()"] if isinstance(value, list) else []
    if len(v) != size + 1 or v[0] != "uniform":
        what = "uniform (x y z)" if size == 3 else "uniform x"
        raise CaseError(f"{path}: {key}: expected '{what}', got {_text(value)!r}")
    try:
        x = [float(t) for t in v[1:]]
    except ValueError:
        raise CaseError(f"{path}: {key}: expected numbers, got {_text(value)!r}") from None
    return x if size == 3 else x[0]


def _get(d: dict, path: Path, *keys, kind=list):
    """``d[k0][k1]...`` or None; a value of the wrong kind (a list where a dictionary is
    expected, or the reverse) is an error naming the key."""
    for i, k in enumerate(keys):
        if not isinstance(d, dict):
            raise CaseError(f"{path}: {'/'.join(keys[:i])}: expected a dictionary")
        d = d.get(k)
        if d is None:
            return None
    if not isinstance(d, kind):
        raise CaseError(f"{path}: {'/'.join(keys)}: expected "
                        f"{'a dictionary' if kind is dict else 'a value'}")
    return d


def _files(folder: Path, notes: list[str]) -> dict:
    """The dictionaries the mapping reads (None where a file is absent)."""
    def read(*names, required=True):
        for name in names:
            if (folder / name).is_file():
                return folder / name, read_dictionary(folder / name, notes)
        if required:
            raise CaseError(f"{folder}: no {names[0]} (an OpenFOAM case directory has "
                            "system/, constant/ and 0/)")
        return folder / names[0], None

    return {
        "control": read("system/controlDict"),
        "schemes": read("system/fvSchemes"),
        "solution": read("system/fvSolution"),
        "transport": read("constant/transportProperties"),
        "turbulence": read("constant/turbulenceProperties", "constant/momentumTransport",
                           required=False),
        "U": read("0/U", "0.orig/U"),
        "p": read("0/p", "0.orig/p"),
    }


def _control(path: Path, d: dict, notes: list[str]) -> tuple[str, dict]:
    app = _text(d.get("application", ["?"]))
    if app in PISO_SOLVERS:
        algorithm = "piso"
    elif app == "simpleFoam":
        algorithm = "simple"
    else:
        raise CaseError(f"{path}: application {app}: haloflow runs icoFoam, pisoFoam and "
                        "pimpleFoam cases (PISO) and simpleFoam cases (SIMPLE)")
    if app == "pimpleFoam":
        notes.append(f"{path}: pimpleFoam runs as PISO (no outer correctors)")
    dt = _number(d.get("deltaT"), path, "deltaT")
    end = _number(d.get("endTime"), path, "endTime")
    start = _number(d.get("startTime", ["0"]), path, "startTime")
    if start != 0.0:
        notes.append(f"{path}: startTime {start!r}: the run starts from 0/ at t = 0")
    if algorithm == "simple":
        return algorithm, {"max_iterations": max(1, int(round(end / dt)))}
    return algorithm, {"dt": dt, "end_time": end - start}


def _transport(files: dict, notes: list[str]) -> float:
    path, d = files["transport"]
    model = _text(d.get("transportModel", ["Newtonian"]))
    if model != "Newtonian":
        raise CaseError(f"{path}: transportModel {model}: only Newtonian fluids are modelled")
    nu = _number(d.get("nu"), path, "nu")
    if nu <= 0.0:
        raise CaseError(f"{path}: nu {nu!r}: expected a positive viscosity")
    tpath, t = files["turbulence"]
    kind = _text(t.get("simulationType", ["laminar"])) if t else "laminar"
    if kind != "laminar":
        raise CaseError(f"{tpath}: simulationType {kind}: only laminar cases are read "
                        "(haloflow's RANS and LES models have case keys of their own)")
    return nu


def _schemes(path: Path, d: dict, algorithm: str, notes: list[str]) -> dict:
    out = {}
    ddt = _text(_get(d, path, "ddtSchemes", "default") or ["Euler"])
    if algorithm == "piso":
        if ddt in ("Euler", "backward"):
            out["time_scheme"] = ddt.lower()
        else:
            notes.append(f"{path}: ddtSchemes {ddt}: not offered, Euler instead")
    div = _get(d, path, "divSchemes", "div(phi,U)") or _get(d, path, "divSchemes", "default")
    words = [w for w in (div or []) if w != "bounded"]
    if len(words) >= 2 and words[0] == "Gauss" and words[1] in CONVECTION:
        out["convection"] = CONVECTION[words[1]]
    else:
        notes.append(f"{path}: div(phi,U) {_text(div or ['none'])}: not offered, "
                     "linear instead")
        out["convection"] = "linear"
    grad = _get(d, path, "gradSchemes", "default") or ["Gauss", "linear"]
    key = grad[1] if grad[0] == "Gauss" and len(grad) > 1 else grad[0]
    if key in GRADIENT:
        out["gradient"] = GRADIENT[key]
    else:
        notes.append(f"{path}: gradSchemes {_text(grad)}: not offered, Gauss linear instead")
    lap = _get(d, path, "laplacianSchemes", "default") or ["Gauss", "linear", "corrected"]
    if lap[-1] in ("corrected", "uncorrected", "orthogonal"):
        out["laplacian"] = "corrected" if lap[-1] == "corrected" else "uncorrected"
    else:
        notes.append(f"{path}: laplacianSchemes {_text(lap)}: not offered, corrected instead")
    return out


def _lookup(entries: dict, name: str):
    """The entry for field ``name``: an exact key first, then the first quoted pattern that
    matches it (``"(U|k)"``, ``".*"``), as OpenFOAM looks them up."""
    if name in entries:
        return entries[name]
    for key, v in entries.items():
        if key.startswith('"'):
            try:
                if re.fullmatch(key.strip('"'), name):
                    return v
            except re.error:
                continue
    return None


def _solver(path: Path, d: dict, name: str) -> dict | None:
    """The ``solvers`` entry for field ``name``."""
    v = _lookup(_get(d, path, "solvers", kind=dict) or {}, name)
    return v if isinstance(v, dict) else None


def _solution(path: Path, d: dict, algorithm: str, notes: list[str]) -> dict:
    out: dict = {"pressure": {}, "momentum": {}}
    for field, table, final in (("p", "pressure", "pFinal"), ("U", "momentum", None)):
        s = _solver(path, d, field)
        if s is None:
            notes.append(f"{path}: no solver for {field}: haloflow's tolerances")
            continue
        for key, mine in (("tolerance", "tol"), ("relTol", "rel_tol")):
            if key in s:
                out[table][mine] = _number(s[key], path, f"solvers/{field}/{key}")
        f = _solver(path, d, final) if final and algorithm == "piso" else None
        if f is not None and "relTol" in f:
            out[table]["final_rel_tol"] = _number(f["relTol"], path, f"solvers/{final}/relTol")
    if out["pressure"] or out["momentum"]:
        notes.append(f"{path}: solver tolerances are OpenFOAM's normalised residuals, "
                     "taken as haloflow's ||b - Ax|| / ||b||")
    out = {k: v for k, v in out.items() if v}
    block = "PISO" if algorithm == "piso" else "SIMPLE"
    ctl = _get(d, path, block, kind=dict) or (
        _get(d, path, "PIMPLE", kind=dict) if algorithm == "piso" else None) or {}
    if "nCorrectors" in ctl and algorithm == "piso":
        out["n_correctors"] = int(_number(ctl["nCorrectors"], path, f"{block}/nCorrectors"))
    if "nNonOrthogonalCorrectors" in ctl:
        out["n_nonorth_correctors"] = int(_number(ctl["nNonOrthogonalCorrectors"], path,
                                                  f"{block}/nNonOrthogonalCorrectors"))
    if algorithm == "simple":
        out.update(_simple(path, d, ctl, notes))
    return out


def _simple(path: Path, d: dict, ctl: dict, notes: list[str]) -> dict:
    out: dict = {}
    if "consistent" in ctl:
        out["consistent"] = _text(ctl["consistent"]) in ("yes", "true", "on")
    rc = ctl.get("residualControl")
    if isinstance(rc, dict):
        tols = [_number(v, path, f"SIMPLE/residualControl/{k}")
                for k in ("p", "U") if isinstance(v := _lookup(rc, k), list)]
        if tols:  # haloflow stops on every equation's residual at once: the loosest
            out["residual_tol"] = max(tols)
            out["residual_norm"] = "normalised"  # simpleFoam's measure
    relax = {"p": 1.0, "U": 1.0}  # OpenFOAM relaxes nothing it is not told to
    for group, key in (("fields", "p"), ("equations", "U")):
        v = _lookup(_get(d, path, "relaxationFactors", group, kind=dict) or {}, key)
        if isinstance(v, list):
            relax[key] = _number(v, path, f"relaxationFactors/{group}/{key}")
    out["relaxation"] = relax
    return out


def _patch(name: str, ptype: str, u, p, upath: Path, ppath: Path) -> dict:
    """One patch's ``[boundary]`` table from its U and p conditions."""
    ut = _text(u.get("type", ["?"])) if isinstance(u, dict) else "?"
    pt = _text(p.get("type", ["?"])) if isinstance(p, dict) else "?"
    if "empty" in (ptype, ut):
        return {"type": "empty"}
    if ptype in ("symmetryPlane", "symmetry") or ut in ("symmetryPlane", "symmetry"):
        return {"type": "symmetry"}
    if ut == "slip":
        return {"type": "slip"}
    if ut == "noSlip" and pt == "zeroGradient":
        return {"type": "wall"}
    if ut in ("fixedValue", "movingWallVelocity") and pt == "zeroGradient":
        value = _uniform(u.get("value"), upath, f"boundaryField/{name}/value", 3)
        if ptype == "wall" or not any(value):
            return {"type": "wall", "U": value}
        return {"type": "inlet", "U": value}
    if ut in ("zeroGradient", "inletOutlet", "pressureInletOutletVelocity") and \
            pt in ("fixedValue", "totalPressure"):
        return {"type": "outlet",
                "p": _uniform(p.get("value" if pt == "fixedValue" else "p0"), ppath,
                              f"boundaryField/{name}/value", 1)}
    raise CaseError(f"{upath}: patch '{name}': U {ut} with p {pt} is none of haloflow's "
                    "patch types (wall, inlet, outlet, symmetry, slip, empty)")


def _boundary(files: dict, types: dict, notes: list[str]) -> tuple[dict, dict]:
    upath, U = files["U"]
    ppath, P = files["p"]
    ub = _get(U, upath, "boundaryField", kind=dict) or {}
    pb = _get(P, ppath, "boundaryField", kind=dict) or {}
    out = {}
    for name, ptype in types.items():
        if ptype == "cyclic":
            raise CaseError(f"{upath}: patch '{name}' is cyclic: give the pairs as "
                            "mesh.periodic in the case file")
        u, p = ub.get(name), pb.get(name)
        if u is None or p is None:
            missing = ppath if u is not None else upath
            raise CaseError(f"{missing}: boundaryField has no entry for patch '{name}'")
        u = {k: _resolve(v, U, upath, f"boundaryField/{name}/{k}") for k, v in u.items()}
        p = {k: _resolve(v, P, ppath, f"boundaryField/{name}/{k}") for k, v in p.items()}
        out[name] = _patch(name, ptype, u, p, upath, ppath)
        if _text(u.get("type", [])) in ("inletOutlet", "pressureInletOutletVelocity"):
            notes.append(f"{upath}: patch '{name}': {_text(u['type'])} as an outlet "
                         "(zero gradient; no backflow value)")
    initial = {}
    field = U.get("internalField", ["uniform", "(", "0", "0", "0", ")"])
    if isinstance(field, list) and field[:1] == ["nonuniform"]:
        notes.append(f"{upath}: internalField nonuniform: the run starts from rest")
    else:
        value = _uniform(field, upath, "internalField", 3)
        if any(value):
            initial = {"type": "uniform", "U": value}
    return out, initial


def read_foam_case(folder: str | Path, out_dir: Path) -> tuple[dict, list[str]]:
    """The case table of OpenFOAM case ``folder`` (its mesh path relative to ``out_dir``,
    where the case file goes) and the notes on what did not map."""
    folder = Path(folder)
    notes: list[str] = []
    try:
        if mesh_format(folder) == "blockmesh":  # meshed as blockMesh would, at run time
            types = blockmesh_patch_types(folder)
        else:
            types = foam_patch_types(find_polymesh(folder))
    except MeshError as e:
        raise CaseError(str(e)) from None
    files = _files(folder, notes)
    algorithm, times = _control(*files["control"], notes)
    nu = _transport(files, notes)
    solver = {"algorithm": algorithm, **times,
              **_schemes(*files["schemes"], algorithm, notes),
              **_solution(*files["solution"], algorithm, notes)}
    boundary, initial = _boundary(files, types, notes)
    rel = os.path.relpath(folder.resolve(), out_dir.resolve())
    case = {"mesh": {"type": "file", "file": rel}, "physics": {"nu": nu}, "solver": solver,
            "boundary": boundary}
    if initial:
        case["initial"] = initial
    return case, notes
