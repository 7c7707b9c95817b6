"""The inputs that fuzzing found to hang, allocate gigabytes, print tracebacks or pass a
broken mesh (issue 16), each run as a user would: one line and exit 2 (1 where the mesh is
the verdict), under a memory limit and a timeout."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from haloflow.mesh.blocks import box
from tests.limited import REPO, haloflow, one_line
from tests.unit.test_mesh_io import BOX, CASE, FOAM, GMSH, write_polymesh

QUICK = ["--steps", "1", "--quiet", "--set", "output.fields=false",
         "--set", "output.plots=false"]


def _case(tmp_path, mesh, name="c.toml") -> Path:
    path = tmp_path / name
    path.write_text(CASE.format(file=mesh))
    return path


def _foam_copy(tmp_path, name="m") -> Path:
    d = tmp_path / name
    shutil.copytree(FOAM["ascii"], d)
    return d / "constant" / "polyMesh"


def _list_body(path: Path, n: int):
    """(head, items, tail) of an ASCII polyMesh list of ``n`` items."""
    text = path.read_text()
    a = text.index(f"\n{n}\n(") + len(f"\n{n}\n(")
    b = text.index(")", a) if path.name in ("owner", "neighbour") else text.rindex(")")
    return text[:a], text[a:b], text[b:]


def _set_label(path: Path, n: int, k: int, value: int) -> None:
    head, body, tail = _list_body(path, n)
    items = body.split()
    items[k] = str(value)
    path.write_text(head + "\n" + "\n".join(items) + "\n" + tail)


# -- hangs -----------------------------------------------------------------------------------

def test_a_million_piso_correctors_is_refused():
    msg = one_line(haloflow("run", "--set", "solver.n_correctors=1000000", "-o", "unused"))
    assert "solver.n_correctors" in msg and "from 1 to 100" in msg


def test_netpipe_connect_to_a_listener_that_never_answers():
    with socket.create_server(("127.0.0.1", 0)) as srv:  # accepts in the kernel, says nothing
        port = srv.getsockname()[1]
        t = time.perf_counter()
        msg = one_line(haloflow("netpipe", "--connect", f"127.0.0.1:{port}", "--timeout",
                                "1", timeout=60), code=1)
    assert "no answer within 1 s" in msg and time.perf_counter() - t < 30


def test_netpipe_listener_whose_client_sends_nothing(tmp_path):
    rc, err = _talk_to_listener(b"")
    assert rc == 1 and err.count("\n") == 1, err
    assert "no answer within 1 s" in err


def _listener(*extra):
    """``haloflow netpipe --listen`` on a free port with a 1 s timeout."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "haloflow", "netpipe", "--listen",
                             "127.0.0.1:0", "--timeout", "1", *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _talk_to_listener(message: bytes) -> tuple[int, str]:
    """Connect to a fresh listener, send ``message`` (maybe nothing), wait for it to end:
    its exit code and stderr."""
    listener = _listener()
    try:
        port = int(listener.stdout.readline().rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as c:
            if message:
                c.sendall(message)
            listener.wait(timeout=60)
        err = listener.stderr.read()
    finally:
        if listener.poll() is None:
            listener.kill()
    return listener.returncode, err


# -- gigabytes from a few bytes ----------------------------------------------------------------

def test_uniform_owner_list_of_300_million(tmp_path):
    owner = _foam_copy(tmp_path) / "owner"
    head, _, tail = _list_body(owner, 55)
    owner.write_text(head[: head.rindex("55")] + "300000000{0}" + tail[1:])
    msg = one_line(haloflow("mesh", "check", tmp_path / "m"))
    assert "owner" in msg and "uniform owner list of 300000000 items" in msg and "line" in msg


def test_uniform_points_list_of_200_million(tmp_path):
    points = _foam_copy(tmp_path) / "points"
    head, _, tail = _list_body(points, 40)
    points.write_text(head[: head.rindex("40")] + "200000000{(0 0 0)}" + tail[1:])
    msg = one_line(haloflow("mesh", "check", tmp_path / "m"))
    assert "points" in msg and "200000000" in msg


def _blockmesh(tmp_path, edit) -> Path:
    d = tmp_path / "bm"
    (d / "system").mkdir(parents=True)
    text = (FOAM["ascii"] / "system" / "blockMeshDict").read_text()
    (d / "system" / "blockMeshDict").write_text(edit(text))
    return d


def test_blockmesh_macros_that_double(tmp_path):
    macros = "a0 (0 0 0);\n" + "".join(f"a{i} ($a{i - 1} $a{i - 1});\n" for i in range(1, 40))
    msg = one_line(haloflow("mesh", "check", _blockmesh(tmp_path, lambda t: macros + t)))
    assert "blockMeshDict" in msg and "expand past" in msg and "line" in msg


@pytest.mark.parametrize("cells, words", [
    ("(100000 100000 100000)", ["at most 2147483647"]),
    ("(40000 40000 1)", ["1600000000 cells", "memory"]),
])
def test_blockmesh_huge_cell_counts(tmp_path, cells, words):
    d = _blockmesh(tmp_path, lambda t: t.replace("(4 3 1)", cells))
    msg = one_line(haloflow("mesh", "check", d))
    assert "block 0" in msg and all(w in msg for w in words), msg


def test_blockmesh_grading_of_1e308(tmp_path):
    d = _blockmesh(tmp_path, lambda t: t.replace("simpleGrading (1 1 1)",
                                                 "simpleGrading (1e308 1 1)"))
    assert "expansion ratio" in one_line(haloflow("mesh", "check", d))


def _msh_with_header(tmp_path, name, old_first, new_first) -> Path:
    """tri2d.msh with the line after ``$Elements`` (or a block header) replaced."""
    text = (GMSH / "tri2d.msh").read_text()
    assert old_first in text
    path = tmp_path / name
    path.write_text(text.replace(old_first, new_first, 1))
    return path


def test_gmsh_element_block_claiming_1e8_elements(tmp_path):
    path = _msh_with_header(tmp_path, "e.msh", "$Elements\n5 48 1 48\n1 1 1 4\n",
                            "$Elements\n5 48 1 48\n1 1 1 100000000\n")
    msg = one_line(haloflow("mesh", "check", path))
    assert "e.msh" in msg and "claims 100000000" in msg


def test_gmsh_node_count_claiming_2e8_nodes(tmp_path):
    path = _msh_with_header(tmp_path, "n.msh", "$Nodes\n9 25 1 25\n",
                            "$Nodes\n9 200000000 1 25\n")
    assert "claims 200000000" in one_line(haloflow("mesh", "check", path))


def test_box_of_ten_billion_cells():
    msg = one_line(haloflow("run", "--set", "mesh.cells=[100000,100000,1]", "-o", "unused"))
    assert "mesh.cells" in msg and "10000000000 cells" in msg


def test_box_larger_than_the_memory_left(tmp_path):
    """Below the cell ceiling but past what the process may allocate: refused before."""
    msg = one_line(haloflow("run", "--set", "mesh.cells=[40000,40000,1]", "-o",
                            tmp_path / "o", *QUICK))
    assert "mesh.cells" in msg and "memory" in msg
    assert not (tmp_path / "o" / "summary.json").exists()


def test_netpipe_peer_choosing_max_for_the_listener():
    from haloflow.bench.netpipe.tcp import VERSION

    cfg = {"hello": "haloflow-netpipe-tcp", "version": VERSION, "mode": "pingpong",
           "sizes": [1], "max": 2**40, "trial_time": 0.1, "trials": 1, "integrity": False,
           "nocache": False, "pool": None, "cpu": False}
    data = json.dumps(cfg).encode()
    rc, err = _talk_to_listener(struct.pack("!I", len(data)) + data)
    assert rc == 1 and err.count("\n") == 1, err
    assert "--max" in err


@pytest.fixture(scope="module")
def profile_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("prof") / "run"
    res = haloflow("run", "--set", "mesh.cells=[4,4,1]", "-o", out, *QUICK)
    assert res.returncode == 0, res.stderr
    return out


def test_predict_on_a_case_whose_mesh_is_huge(tmp_path, profile_run):
    run = tmp_path / "run"
    shutil.copytree(profile_run, run)
    text = (run / "case.toml").read_text()
    huge = text.replace("cells = [\n    4,\n    4,\n    1,\n]", "cells = [30000, 30000, 1]")
    assert huge != text
    (run / "case.toml").write_text(huge)
    res = haloflow("predict", "--profile", run, "--network", "gige-tcp", "--ranks", "1,2")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert "process grid" in res.stdout


# -- broken meshes that runs accepted -----------------------------------------------------------

def _broken(kind: str) -> object:
    m = box(**BOX)
    top = m.patch("top")
    if kind == "reversed faces":  # a boundary face turned inward
        a, b = m.face_ptr[top.start], m.face_ptr[top.start + 1]
        m.face_nodes[a:b] = m.face_nodes[a:b][::-1]
    elif kind == "shuffled owners":  # boundary faces given to the wrong cells
        bnd = np.arange(m.n_internal, m.n_faces)
        m.owner[bnd] = np.random.default_rng(3).permutation(m.owner[bnd])
    elif kind == "duplicate faces":  # the first face of the top patch written twice
        f = top.start
        a, b = m.face_ptr[f], m.face_ptr[f + 1]
        last = len(m.owner)
        m.face_nodes = np.concatenate([m.face_nodes, m.face_nodes[a:b]])
        m.face_ptr = np.append(m.face_ptr, m.face_ptr[-1] + (b - a))
        m.owner = np.append(m.owner, m.owner[f])
        m.patches[-1].size += 1
        assert m.patches[-1].start + m.patches[-1].size == last + 1
    elif kind == "open cells":  # the last back face dropped
        m.face_ptr, m.owner = m.face_ptr[:-1], m.owner[:-1]
        m.face_nodes = m.face_nodes[: m.face_ptr[-1]]
        m.patches[-1].size -= 1
    return m


@pytest.mark.parametrize("kind", ["reversed faces", "shuffled owners", "duplicate faces",
                                  "open cells"])
def test_run_refuses_what_mesh_check_rejects(tmp_path, kind):
    write_polymesh(tmp_path / "mesh", _broken(kind))
    check = haloflow("mesh", "check", tmp_path / "mesh")
    assert check.returncode == 1 and "mesh is broken" in check.stderr
    msg = one_line(haloflow("run", _case(tmp_path, tmp_path / "mesh"), "-o", tmp_path / "o",
                            *QUICK))
    assert "mesh is broken" in msg and str(tmp_path / "mesh") in msg
    assert not (tmp_path / "o" / "summary.json").exists()


def test_run_accepts_the_same_mesh_unbroken(tmp_path):
    write_polymesh(tmp_path / "mesh", box(**BOX))
    res = haloflow("run", _case(tmp_path, tmp_path / "mesh"), "-o", tmp_path / "o", *QUICK)
    assert res.returncode == 0, res.stderr


# -- tracebacks or exit 1 instead of one line and exit 2 -----------------------------------------

def test_mesh_check_on_an_owner_of_2147483647(tmp_path):
    _set_label(_foam_copy(tmp_path) / "owner", 55, 54, 2147483647)
    msg = one_line(haloflow("mesh", "check", tmp_path / "m"))
    assert "owner" in msg and "2147483647 out of range" in msg


@pytest.mark.parametrize("override, words", [
    ("mesh.lengths=[1e-300,1e-300,1]", ["mesh.lengths", "1e-30"]),
    ("mesh.grading=[1e300,1,1]", ["mesh.grading", "1e+08"]),
    ("solver.dt=1e-320", ["solver.dt", "1e-30"]),
    ("physics.nu=1e308", ["physics.nu", "1e+30"]),
    ("mesh.cells=[9223372036854775808,1,1]", ["mesh.cells", "2147483647"]),
    ("mesh.cells=[9223372036854775807,1,1]", ["mesh.cells", "2147483647"]),
    ("solver.end_time=nan", ["solver.end_time"]),
    ("boundary.top.U=[1e308,0,0]", ["boundary.top.U"]),
    ("mesh.origin=[-inf,0,0]", ["mesh.origin"]),
])
def test_extreme_values_are_one_line(tmp_path, override, words):
    msg = one_line(haloflow("run", "--set", override, "-o", tmp_path / "o", *QUICK))
    assert all(w in msg for w in words), msg
    assert not (tmp_path / "o").exists()


def test_toml_nested_2000_deep(tmp_path):
    deep = tmp_path / "deep.toml"
    deep.write_text("x = " + "[" * 2000 + "]" * 2000 + "\n")
    for cmd in (["run", deep, "-o", tmp_path / "o"], ["mesh", "check", deep]):
        assert "nested too deeply" in one_line(haloflow(*cmd))
    for depth in (330, 2000):  # 330 parses, but walking it recursively overflowed the stack
        msg = one_line(haloflow("run", "--set", "mesh.cells=" + "[" * depth + "]" * depth,
                                "-o", tmp_path / "o"))
        assert "mesh.cells" in msg and "nested too deeply" in msg and len(msg) < 200


def test_null_byte_in_mesh_file(tmp_path):
    case = tmp_path / "nul.toml"
    case.write_text('[mesh]\ntype = "file"\nfile = "a\\u0000b"\n')
    for cmd in (["run", case, "-o", tmp_path / "o"], ["mesh", "check", case]):
        msg = one_line(haloflow(*cmd))
        assert "mesh.file" in msg and "null" in msg


@pytest.mark.parametrize("content", [b"", b"\x00\x01 junk \xff" * 10, b"$MeshFormat\n4.1 0 8\n"
                                     b"$EndMeshFormat\n$Nodes\n1 2 3\n",
                                     b"$MeshFormat\n2.2 0 8"])  # the last found by fuzzing
def test_empty_or_unreadable_msh(tmp_path, content):
    path = tmp_path / "bad.msh"
    path.write_bytes(content)
    msg = one_line(haloflow("mesh", "check", path))
    assert "bad.msh" in msg and "Gmsh" in msg


def test_meshio_prints_nothing_of_its_own(tmp_path):
    """Found by the fuzz test: meshio wrote a warning and an error line of its own before
    exiting; haloflow's one line must be all."""
    lines = (GMSH / "tri2d.msh").read_text().splitlines(keepends=True)
    path = tmp_path / "noend.msh"
    path.write_text("".join(lines[:2] + lines[3:]))  # $EndMeshFormat dropped
    msg = one_line(haloflow("mesh", "check", path))
    assert "noend.msh: not a readable Gmsh file" in msg


@pytest.mark.parametrize("value", ["nan", "1e308", "-inf"])
def test_non_finite_or_huge_coordinates(tmp_path, value):
    points = _foam_copy(tmp_path) / "points"
    text = points.read_text()
    points.write_text(text.replace("(1.2 0 0)", f"({value} 0 0)", 1))
    msg = one_line(haloflow("mesh", "check", tmp_path / "m"))
    assert "points: point " in msg and "expected finite numbers" in msg
    msh = tmp_path / "c.msh"
    msh.write_text((GMSH / "tri2d.msh").read_text().replace("\n1.2 0 0\n", f"\n{value} 0 0\n",
                                                            1))
    assert "c.msh: point 1" in one_line(haloflow("mesh", "check", msh))
    d = _blockmesh(tmp_path, lambda t: t.replace("(1.2 0 0)", f"({value} 0 0)"))
    assert "vert" in one_line(haloflow("mesh", "check", d))


def test_predict_cells_zero_or_nan_binary_out_and_dev_zero(tmp_path, profile_run):
    prof = json.loads((profile_run / "profile.json").read_text())
    for name, value in (("zero", 0), ("nan", float("nan")), ("neg", -5)):
        d = tmp_path / name
        d.mkdir()
        bad = json.loads(json.dumps(prof))
        bad["mesh"]["cells"] = value
        (d / "profile.json").write_text(json.dumps(bad))
        msg = one_line(haloflow("predict", "--profile", d, "--network", "gige-tcp"))
        assert "profile.json" in msg
    binary = tmp_path / "bin.out"
    binary.write_bytes(bytes(range(256)) * 8)
    msg = one_line(haloflow("predict", "--profile", profile_run, "--network", binary))
    assert "bin.out" in msg and "not a text file" in msg
    msg = one_line(haloflow("predict", "--profile", profile_run, "--network", "/dev/zero",
                            timeout=60))
    assert "/dev/zero" in msg and "not a regular file" in msg


def test_patch_name_with_a_newline_and_terminal_escapes(tmp_path):
    case = tmp_path / "c.toml"
    case.write_text(_cavity() + '\n[boundary."x\\u001b[31mred\\nline"]\ntype = "wall"\n')
    msg = one_line(haloflow("run", case, "-o", tmp_path / "o"))
    assert "\x1b" not in msg and "\\u001b" in msg and "\\n" in msg
    msg = one_line(haloflow("run", "--set", 'boundary.top.type="wa\nll"', "-o",
                            tmp_path / "o"))
    assert "\\n" in msg


def _cavity() -> str:
    from haloflow.case import CASES_DIR

    return (CASES_DIR / "cavity.toml").read_text()


# -- a mesh that mesh check accepted --------------------------------------------------------------

def test_gmsh_overlapping_elements_are_rejected(tmp_path):
    text = (GMSH / "tri2d.msh").read_text()
    # one more triangle over half the domain, on corner nodes 1, 2, 3 (shares no face)
    text = text.replace("$Elements\n5 48 1 48\n", "$Elements\n6 49 1 49\n", 1)
    text = text.replace("$EndElements", "2 1 2 1\n49 1 2 3\n$EndElements", 1)
    path = tmp_path / "overlap.msh"
    path.write_text(text)
    res = haloflow("mesh", "check", path)
    assert res.returncode == 1 and "overlap" in one_line(res, code=1)


def test_gmsh_unchanged_is_accepted():
    assert haloflow("mesh", "check", GMSH / "tri2d.msh").returncode == 0
