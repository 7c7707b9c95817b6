"""More inputs that lost a user's files, printed tracebacks, hung or read without limit
(issue 50), each run as a user would: one line and exit 2, nothing of the user's touched."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

from haloflow import limits
from haloflow.io import checkpoint as fmt
from tests.limited import haloflow, one_line
from tests.unit.test_fuzz_reproducers import (
    QUICK,
    _case,
    _foam_copy,
    _list_body,
    _listener,
    _talk_to_listener,
)

SMALL = ["--set", "mesh.cells=[8,8,1]", "--steps", "2", "--quiet"]


def _tree(folder: Path) -> dict[str, bytes | None]:
    """Every entry under ``folder``: a file's bytes, None for a folder."""
    return {str(p.relative_to(folder)): None if p.is_dir() else p.read_bytes()
            for p in sorted(folder.rglob("*"))}


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """A run with every output (fields, plots) and two checkpoints."""
    out = tmp_path_factory.mktemp("first") / "R"
    res = haloflow("run", "cavity", *SMALL, "--set", "output.checkpoint_every=1", "-o", out)
    assert res.returncode == 0, res.stderr
    assert len(list((out / "checkpoint").glob("step-*.ckpt"))) == 2
    return out


def _copy(first_run, tmp_path, name="R") -> Path:
    run = tmp_path / name
    shutil.copytree(first_run, run, symlinks=True)
    return run


# -- 1: --force removes only what a run wrote ----------------------------------------------------

def test_force_refuses_a_run_folder_holding_a_users_file(tmp_path, first_run):
    run = _copy(first_run, tmp_path)
    for mine, named in ((run / "notes.txt", "notes.txt"),
                        (run / "fields" / "mine.vtu", "fields/mine.vtu"),
                        (run / "extra" / "a.txt", "extra")):
        mine.parent.mkdir(exist_ok=True)
        mine.write_text("mine\n")
        before = _tree(run)
        msg = one_line(haloflow("run", "cavity", *SMALL, "-o", run, "--force"))
        assert "--force refused" in msg and str(run / named) in msg, msg
        assert _tree(run) == before
        if mine.parent.name == "extra":
            shutil.rmtree(mine.parent)
        else:
            mine.unlink()
    res = haloflow("run", "cavity", *SMALL, "-o", run, "--force")  # only the run's files
    assert res.returncode == 0, res.stderr
    assert (run / "summary.json").is_file() and not (run / "notes.txt").exists()
    assert not (run / "checkpoint").exists()  # the first run's, removed; this one wrote none


def test_force_refuses_a_marker_without_a_list_of_files(tmp_path):
    from haloflow.run import RunError
    from haloflow.run.outdir import MARKER, prepare_outdir

    run = tmp_path / "R"
    run.mkdir()
    (run / MARKER).write_text('{"tool": "haloflow run"}\n')  # an older haloflow's marker
    (run / "summary.json").write_text("{}")
    with pytest.raises(RunError, match="lists no files the run wrote"):
        prepare_outdir(run, force=True)
    assert sorted(p.name for p in run.iterdir()) == [MARKER, "summary.json"]


# -- 2: a restart never removes its own source -------------------------------------------------

@pytest.mark.parametrize("src, out", [(".", "."), ("ckpt", "."), (".", "checkpoint"),
                                      ("ckpt", "checkpoint"), (".", "..")])
def test_restart_into_the_folder_of_its_checkpoint_is_refused(tmp_path, first_run, src, out):
    run = _copy(first_run, tmp_path)
    ckpt = sorted((run / "checkpoint").glob("step-*.ckpt"))[-1]
    source = ckpt if src == "ckpt" else run
    before = _tree(tmp_path)
    msg = one_line(haloflow("run", "--restart", source, "-o", run / out, "--force", "--quiet"))
    assert "--restart" in msg and "-o" in msg and "checkpoint" in msg, msg
    assert _tree(tmp_path) == before


# -- 6: a neighbour list longer than the faces ---------------------------------------------------

def _long_neighbour(tmp_path) -> Path:
    neighbour = _foam_copy(tmp_path) / "neighbour"
    head, body, tail = _list_body(neighbour, 17)
    items = body.split() + ["1"] * 43  # 60 labels for the mesh's 55 faces
    neighbour.write_text(head[: head.rindex("17")] + "60\n(\n" + "\n".join(items) + "\n"
                         + tail)
    return tmp_path / "m"


def test_neighbour_list_longer_than_the_faces(tmp_path):
    mesh = _long_neighbour(tmp_path)
    msg = one_line(haloflow("mesh", "check", mesh))
    assert "neighbour" in msg and "60 neighbours for 55 faces" in msg, msg
    msg = one_line(haloflow("run", _case(tmp_path, mesh), "-o", tmp_path / "o", *QUICK))
    assert "neighbour" in msg and "60 neighbours for 55 faces" in msg, msg


def test_neighbour_list_longer_than_the_faces_on_two_ranks(tmp_path):
    from tests.mpi.conftest import find_mpiexec, run_mpi

    exe = find_mpiexec()
    if exe is None:
        pytest.skip("no mpiexec in the venv")
    mesh = _long_neighbour(tmp_path)
    res = run_mpi(exe, 2, "-m", "haloflow", "run", str(_case(tmp_path, mesh)), "-o",
                  str(tmp_path / "o"), *QUICK)
    msg = one_line(res)
    assert "60 neighbours for 55 faces" in msg, msg


# -- 7: JSON nested too deeply ---------------------------------------------------------------------

DEEP = b"[" * 100000 + b"]" * 100000


def test_checkpoint_metadata_nested_too_deeply(tmp_path):
    ckpt = tmp_path / "R" / "checkpoint" / "step-000000001.ckpt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(fmt.MAGIC + fmt.trailer(b'{"format": ' + DEEP + b"}"))
    for src in (ckpt, tmp_path / "R"):
        msg = one_line(haloflow("run", "--restart", src, "-o", tmp_path / "o"))
        assert str(ckpt) in msg and "nested too deeply" in msg, msg
    assert not (tmp_path / "o").exists()


def test_netpipe_control_message_nested_too_deeply():
    rc, err = _talk_to_listener(struct.pack("!I", len(DEEP)) + DEEP)
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "nested too deeply" in err


def test_netpipe_reply_nested_too_deeply(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as srv:
        port = srv.getsockname()[1]

        def answer():
            conn, _ = srv.accept()
            with conn:
                head = b""
                while len(head) < 4:
                    head += conn.recv(4 - len(head))
                n = struct.unpack("!I", head)[0]
                while n:
                    n -= len(conn.recv(n))
                conn.sendall(struct.pack("!I", len(DEEP)) + DEEP)
                conn.recv(1)  # until the other side closes

        t = threading.Thread(target=answer, daemon=True)
        t.start()
        res = haloflow("netpipe", "--connect", f"127.0.0.1:{port}", "--timeout", "5",
                       "--max", "1K", "-o", tmp_path / "x.out", timeout=60)
        t.join(10)
    assert "nested too deeply" in one_line(res)
    assert not list(tmp_path.iterdir())


def test_other_json_files_nested_too_deeply(tmp_path):
    """The lock of a run folder, the .json beside a NetPIPE .out, a trace's rank summary:
    an error or a fallback, never a RecursionError."""
    from haloflow.io.network import _netpipe_cpu
    from haloflow.run import RunError
    from haloflow.run.outdir import LOCK, prepare_outdir
    from haloflow.study.trace.files import TraceError, summary

    run = tmp_path / "R"
    run.mkdir()
    (run / LOCK).write_bytes(DEEP)
    with pytest.raises(RunError, match="in use by another haloflow run"):
        prepare_outdir(run, force=False)
    (tmp_path / "np.json").write_bytes(DEEP)
    assert _netpipe_cpu(tmp_path / "np.out") == (None, 0.0)
    (tmp_path / "rank-0.json").write_bytes(DEEP)
    with pytest.raises(TraceError, match="not a readable rank summary"):
        summary(tmp_path, 0)


# -- 8: a profile table that is not a file, or too large -------------------------------------------

def edited_case(name: str, pattern: str, replacement: str, path):
    """The shipped case ``name`` with the first match of ``pattern`` replaced, at ``path``."""
    from haloflow.case import CASES_DIR

    text = (CASES_DIR / f"{name}.toml").read_text()
    found = re.search(pattern, text)
    assert found, f"{name}.toml changed: no {pattern!r}"
    path.write_text(text.replace(found.group(), replacement))
    return path


def test_inlet_table_dev_zero(tmp_path):
    case = edited_case("channel", r"U = \[1.0, 0.0, 0.0\].*\nprofile = \"uniform\".*\n",
                       'profile = "table"\ntable = "/dev/zero"\n', tmp_path / "c.toml")
    msg = one_line(haloflow("run", case, "--set", "mesh.cells=[8,4,1]", "-o", tmp_path / "o",
                            *QUICK, timeout=60))
    assert "boundary.left.table" in msg and "/dev/zero" in msg and "not a regular file" in msg
    assert not (tmp_path / "o").exists()


def test_inlet_table_larger_than_the_ceiling(tmp_path, monkeypatch):
    from haloflow.io.profile_table import TableError, read_table

    table = tmp_path / "t.csv"
    table.write_text("y,Ux,Uy,Uz\n" + "".join(f"{k / 100},1,0,0\n" for k in range(101)))
    assert len(read_table(table).coord) == 101
    monkeypatch.setattr(limits, "MAX_TABLE_BYTES", 1000, raising=False)
    with pytest.raises(TableError) as e:
        read_table(table)
    assert str(table) in str(e.value) and "larger than 1000 bytes" in str(e.value)


# -- 9: decompressed mesh files have the ceiling of plain ones -------------------------------------

@pytest.mark.parametrize("gz", [True, False])
def test_points_padded_past_the_ceiling(tmp_path, monkeypatch, gz):
    from haloflow.mesh import MeshError
    from haloflow.mesh.foam import read_foam

    points = _foam_copy(tmp_path) / "points"
    data = points.read_bytes()
    assert read_foam(tmp_path / "m").n_cells == 12
    padded = data + b" " * 20000
    if gz:
        points.unlink()
        points = points.with_name("points.gz")
        points.write_bytes(gzip.compress(padded))
    else:
        points.write_bytes(padded)
    assert read_foam(tmp_path / "m").n_cells == 12  # under the real ceiling: accepted
    monkeypatch.setattr(limits, "MAX_MESH_FILE_BYTES", len(data) + 1000, raising=False)
    with pytest.raises(MeshError) as e:
        read_foam(tmp_path / "m")
    msg = str(e.value)
    assert str(points) in msg and f"larger than {len(data) + 1000} bytes" in msg, msg
    assert "\n" not in msg


# -- 10: non-finite numbers in checkpoint metadata -------------------------------------------------

@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_checkpoint_time_not_finite(tmp_path, first_run, value):
    run = _copy(first_run, tmp_path)
    ckpt = sorted((run / "checkpoint").glob("step-*.ckpt"))[-1]
    data = ckpt.read_bytes()
    n = int.from_bytes(data[-fmt.TRAILER:-fmt.TRAILER + 8], "little")
    meta = json.loads(data[-fmt.TRAILER - n:-fmt.TRAILER])
    meta["time"] = "TIME"
    bad = json.dumps(meta, sort_keys=True).replace('"TIME"', value).encode()
    ckpt.write_bytes(data[:-fmt.TRAILER - n] + fmt.trailer(bad))
    msg = one_line(haloflow("run", "--restart", run, "-o", tmp_path / "o", "--quiet"))
    assert str(ckpt) in msg and "time" in msg and "finite" in msg, msg
    assert not (tmp_path / "o").exists()


# -- 11: --listen --timeout bounds the wait for a peer ---------------------------------------------

def test_netpipe_listen_timeout_without_a_peer():
    t = time.perf_counter()
    msg = one_line(haloflow("netpipe", "--tcp", "--listen", "127.0.0.1:0", "--timeout", "1",
                            timeout=30))
    assert "--listen" in msg and "within 1 s" in msg, msg
    assert time.perf_counter() - t < 20


# -- 12: netpipe's default output names never overwrite -------------------------------------------

def _tcp_sweep(cwd: Path) -> subprocess.CompletedProcess:
    listener = _listener()
    try:
        port = int(listener.stdout.readline().rsplit(":", 1)[1])
        res = haloflow("netpipe", "--connect", f"127.0.0.1:{port}", "--timeout", "5",
                       "--max", "64", "--perturb", "0", "--trials", "1", "--trial-time",
                       "0.01", "--quiet", cwd=cwd, timeout=120)
        listener.wait(timeout=60)
    finally:
        if listener.poll() is None:
            listener.kill()
    assert res.returncode == 0, res.stderr
    return res


def test_netpipe_default_names_are_never_overwritten(tmp_path):
    (tmp_path / "np.out").write_text("mine\n")
    _tcp_sweep(tmp_path)
    assert (tmp_path / "np.out").read_text() == "mine\n"
    assert {p.name for p in tmp_path.iterdir()} == {"np.out", "np-2.out", "np-2.json",
                                                    "np-2.png"}
    json.loads((tmp_path / "np-2.json").read_text())
    before = _tree(tmp_path)
    _tcp_sweep(tmp_path)
    assert {k: v for k, v in _tree(tmp_path).items() if k in before} == before
    assert {"np-3.out", "np-3.json", "np-3.png"} <= {p.name for p in tmp_path.iterdir()}


# -- item 4 and 5: a traceback from a case file a user can write --------------------------

def test_van_driest_without_a_wall_is_one_line(tmp_path):
    res = haloflow("run", "taylor_green_3d", "-o", tmp_path / "r", "--quiet", "--steps", "1",
                   "--set", "physics.van_driest=true", "--set", "mesh.cells=[6,6,6]",
                   "--set", "output.plots=false")
    line = one_line(res)
    assert "van_driest" in line and "no patch of type" in line, line


@pytest.mark.parametrize("key", ["U", "p"])
def test_a_relaxation_factor_too_small_to_divide_by_is_refused(tmp_path, key):
    res = haloflow("run", "channel", "-o", tmp_path / "r", "--quiet", "--steps", "1",
                   "--set", f"solver.relaxation.{key}=1e-320")
    line = one_line(res)
    assert f"solver.relaxation.{key}" in line and "1e-06 to 1" in line, line


def test_a_rayleigh_number_without_gravity_is_refused(tmp_path):
    res = haloflow("run", "heated_cavity", "-o", tmp_path / "r", "--quiet", "--steps", "1",
                   "--set", "physics.g=[0,0,0]")
    line = one_line(res)
    assert "physics.Ra" in line and "gravity" in line, line


def test_cells_too_stretched_for_the_pressure_matrix_are_one_line(tmp_path):
    res = haloflow("run", "backward_step", "-o", tmp_path / "r", "--quiet", "--steps", "1",
                   "--set", "mesh.upstream_length=1e12", "--set", "mesh.cells_x=[2,8]",
                   "--set", "mesh.cells_y=[2,2]")
    assert "round-off" in one_line(res)


# -- minor a: --steps 0 is solver.max_steps = 0, no limit ------------------------------------------

def test_steps_0_means_no_limit(tmp_path):
    """The docs: max_steps 0 is no limit and --steps N sets it; the run goes to end_time
    (3 steps of dt = 0.1)."""
    res = haloflow("run", "cavity", "-o", tmp_path / "r", "--steps", "0", "--quiet",
                   "--set", "mesh.cells=[8,8,1]", "--set", "solver.end_time=0.3",
                   "--set", "output.fields=false", "--set", "output.plots=false")
    assert res.returncode == 0, res.stderr
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert (summary["status"], summary["steps"]) == ("completed", 3)
    assert "0: no limit" in " ".join(haloflow("run", "--help").stdout.split())
    msg = one_line(haloflow("run", "cavity", "-o", tmp_path / "n", "--steps", "-1"))
    assert "--steps -1" in msg and "0 for no limit" in msg, msg
    assert not (tmp_path / "n").exists()


# -- minor b: keys a run cannot use --------------------------------------------------------------

@pytest.mark.parametrize("closure", ["wale", "smagorinsky", "dynamicSmagorinsky"])
def test_k_init_without_the_closure_that_uses_it(closure):
    from tests.case_errors import error

    msg = error("taylor_green_3d", [f'physics.closure="{closure}"', "physics.k_init=0.1"])
    assert msg.startswith("--set physics.k_init=0.1: physics.k_init: a key of the kEqn "
                          f'closure, not used by physics.closure = "{closure}"'), msg


def test_k_init_with_kEqn_and_a_switched_closure_are_accepted():
    from haloflow.case import load_case

    assert load_case("taylor_green_3d", ['physics.closure="kEqn"', "physics.k_init=0.1"]
                     ).physics.k_init == 0.1
    # pitzdaily_les.toml gives kEqn's k_init; --set physics.closure drops it, as a switched
    # model drops the file's keys of the model it leaves
    p = load_case("pitzdaily_les", ['physics.closure="wale"']).physics
    assert (p.closure, p.k_init) == ("wale", None)


def test_k_init_of_a_case_file_with_another_closure(tmp_path):
    case = edited_case("taylor_green_3d", r'\nclosure = "dynamicSmagorinsky".*\n',
                       '\nclosure = "wale"\nk_init = 0.1\n', tmp_path / "w.toml")
    msg = one_line(haloflow("run", case, "-o", tmp_path / "o", *QUICK))
    assert msg.startswith(f"haloflow: error: {case}: physics.k_init: a key of the kEqn"), msg
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("speeds", ["{1=0.5}", "{0=0.5,7=0.25}"])
def test_emulate_speed_of_a_rank_the_run_does_not_have(tmp_path, speeds):
    rank = speeds.split("=")[-2].rsplit(",", 1)[-1].strip("{")
    msg = one_line(haloflow("run", "cavity", "-o", tmp_path / "o", *SMALL,
                            "--set", f"parallel.emulate_speed={speeds}"))
    assert msg == (f"haloflow: error: parallel.emulate_speed: rank {rank} is not one of "
                   "this run's 1 rank (0 to 0)"), msg
    assert not (tmp_path / "o").exists()


# -- minor c: a refused restart leaves no folder -------------------------------------------------

def test_restart_of_another_case_leaves_no_folder(tmp_path, first_run):
    msg = one_line(haloflow("run", "--restart", first_run, "-o", tmp_path / "o", "--quiet",
                            "--set", "physics.nu=0.5"))
    assert "another case" in msg or "case" in msg, msg
    assert not (tmp_path / "o").exists()


def test_restart_from_a_corrupted_checkpoint_leaves_no_folder(tmp_path, first_run):
    run = _copy(first_run, tmp_path)
    ckpt = sorted((run / "checkpoint").glob("step-*.ckpt"))[-1]
    data = bytearray(ckpt.read_bytes())
    data[len(fmt.MAGIC) + 3] ^= 0x40  # a bit of the first field's payload
    ckpt.write_bytes(bytes(data))
    msg = one_line(haloflow("run", "--restart", run, "-o", tmp_path / "o", "--quiet"))
    assert "checksum" in msg, msg
    assert not (tmp_path / "o").exists()


def test_refused_restart_into_an_existing_empty_folder_leaves_it_empty(tmp_path, first_run):
    (tmp_path / "o").mkdir()
    msg = one_line(haloflow("run", "--restart", first_run, "-o", tmp_path / "o", "--quiet",
                            "--set", "physics.nu=0.5"))
    assert "case" in msg, msg
    assert list((tmp_path / "o").iterdir()) == []


# -- minor d: a full disk names the file -----------------------------------------------------------

def _fault_mid_run(tmp_path, plant, *args) -> subprocess.CompletedProcess:
    """A run of the cavity into ``tmp_path/R``: once the run has taken its folder (its
    log.txt is there), ``plant(folder)`` puts the fault in place."""
    import os
    import sys

    from tests.limited import REPO

    out = tmp_path / "R"
    env = {**os.environ, "PYTHONPATH": str(REPO), "NUMBA_NUM_THREADS": "1"}
    env.pop("HALOFLOW_TRACEBACK", None)
    job = subprocess.Popen([sys.executable, "-m", "haloflow", "run", "cavity", "-o", str(out),
                            "--set", "mesh.cells=[8,8,1]", "--steps", "30", "--quiet",
                            "--set", "solver.steady_tol=0", *args],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        t0 = time.monotonic()
        while not (out / "log.txt").exists() and time.monotonic() - t0 < 60:
            time.sleep(0.002)
        plant(out)
        stdout, stderr = job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            job.kill()
    return subprocess.CompletedProcess(job.args, job.returncode, stdout, stderr)


@pytest.mark.parametrize("name", ["summary.json", "fields/cavity_0.vtu", "residuals.csv",
                                  "centerline_u.csv"])
def test_a_full_disk_names_the_file(tmp_path, name):
    def plant(out):
        target = out / name
        target.parent.mkdir(exist_ok=True)
        if name.endswith(".vtu"):
            target = target.with_name(target.name + ".tmp")  # written, then renamed
        target.symlink_to("/dev/full")  # every write: ENOSPC

    res = _fault_mid_run(tmp_path, plant)
    msg = one_line(res)
    assert msg == (f"haloflow: error: {tmp_path / 'R' / name}: cannot write (No space left "
                   "on device)"), msg


# -- minor e: a second SIGTERM ends the run at once ------------------------------------------------

def test_a_second_sigterm_ends_the_run_at_once(tmp_path):
    """The second of two SIGTERMs in a row, while a step is computed, kills the run as the
    signal's default does (exit 143 in a shell, -15 here), as the README says."""
    import os
    import signal
    import sys

    from tests.limited import REPO

    out = tmp_path / "R"
    env = {**os.environ, "PYTHONPATH": str(REPO), "NUMBA_NUM_THREADS": "1"}
    job = subprocess.Popen([sys.executable, "-m", "haloflow", "run", "cavity", "-o", str(out),
                            "--set", "mesh.cells=[160,160,1]", "--set", "solver.steady_tol=0",
                            "--set", "output.log_every=1", "--quiet"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 120 and not ((out / "log.txt").exists() and
                                                   "step      3" in (out / "log.txt").read_text()):
            time.sleep(0.05)
        for _ in range(100):  # two at once are one to the kernel: again until it ends
            job.send_signal(signal.SIGTERM)
            time.sleep(0.03)  # the run sees each (steps take ~0.3 s)
            if job.poll() is not None:
                break
        _, err = job.communicate(timeout=30)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == -signal.SIGTERM and err == "", (job.returncode, err)
    assert not (out / "summary.json").exists()
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "a second SIGTERM ends it at once (exit 143; 15 from MPICH's `mpiexec`)" in readme


def test_pitzdaily_les_runs_with_van_driest_damping(tmp_path):
    """Item 3: the shipped LES case with van Driest damping runs its step: without fields
    to write, set-up freed the face and cell centres the damping reads every step (a numba
    typing error on None)."""
    out = tmp_path / "r"
    res = haloflow("run", "pitzdaily_les", "-o", out, "--quiet", "--steps", "1",
                   "--set", "physics.van_driest=true", "--set", "output.plots=false",
                   "--set", "output.fields=false", timeout=300,
                   memory=4 << 30)  # room for numba, should these kernels compile here
    assert res.returncode == 0, res.stderr
    assert json.loads((out / "summary.json").read_text())["status"] == "completed"
