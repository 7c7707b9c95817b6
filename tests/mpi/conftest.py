"""Launching real MPI jobs: the venv's own ``mpiexec`` (docs/design.md, section 11), with a timeout.

Two ways to run on several ranks:

- the ``mpirun`` / ``haloflow_mpi`` fixtures launch a script or the command line
  (``haloflow run`` on a job of that many ranks kept up for the session: ``jobs.py``);
- ``@pytest.mark.parallel(ranks=[2, 3], halo=["packed", "aggregated"], timeout=120)`` on a
  test function (as Devito's ``parallel(mode=...)``): the test is parametrised by ``nranks``
  (and ``halo`` if it takes that argument), and its body runs inside ``mpiexec -n nranks``:
  this process re-launches pytest under mpiexec with ``HALOFLOW_MPI_CHILD`` set, on this
  test and every parallel-marked test after it with the same rank count (one job for the
  batch: one start-up), and the child runs the bodies on every rank.  A rank whose
  test fails prints why and aborts the job, so the others never hang in a collective; each
  test is judged on its own (``batch.py``: a test fails iff it failed on some rank or ran
  past its timeout, the tests an aborted job did not reach run in another job).

Every job checks it got the ranks it was launched with (``launch.py``).  Without the venv's
mpiexec the MPI tests are skipped, except under CI (``CI`` set), where that is an error, as
is a session in which every MPI test was skipped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mpi import batch, jobs

REPO = Path(__file__).resolve().parents[2]


_PASSED: set[str] = set()  # node ids of the tests that passed in this session
CHILD = batch.CHILD
LAUNCH = Path(__file__).with_name("launch.py")


def find_mpiexec() -> Path | None:
    """The mpiexec installed next to this Python (the wrong launcher runs 1-rank jobs)."""
    exe = Path(sys.executable).parent / "mpiexec"
    return exe if exe.exists() else None


def require_mpiexec() -> Path:
    """The venv's mpiexec; without one a skip, or a failure under CI (``CI`` set)."""
    exe = find_mpiexec()
    if exe is None:
        why = f"no mpiexec next to {sys.executable}"
        if os.environ.get("CI"):
            pytest.fail(f"{why} (CI must run the MPI tests)", pytrace=False)
        pytest.skip(why)
    return exe


def require_c_mpi() -> None:
    """The MPI library's C functions (``mpicall.addresses()``) that the compiled solvers call;
    without them a skip, or a failure under CI (``CI`` set): CI must test those solvers."""
    from haloflow.parallel import mpicall

    if mpicall.addresses() is None:
        why = "the MPI library's C functions were not found (mpicall.addresses() is None)"
        if os.environ.get("CI"):
            pytest.fail(f"{why}; CI must test the compiled solvers", pytrace=False)
        pytest.skip(why)


def mpi_env() -> dict[str, str]:
    """Environment for the ranks: the repo importable, one numba/OpenMP thread per rank."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env["NUMBA_NUM_THREADS"] = "1"  # ranks >= cores: one numba thread per rank
    env["OMP_NUM_THREADS"] = "1"
    return env


def run_mpi(exe: Path, n: int, script: Path | str, *args: str, timeout: float = 120,
            env: dict[str, str] | None = None):
    """Run ``script`` on ``n`` ranks; a job still running after ``timeout`` s is killed and fails.

    ``script`` may be ``"-m"`` followed by a module in ``args``.  Every rank checks that the
    job has ``n`` ranks (``launch.py``, exit status 3 if not).  The job gets its own process
    group so that a hang kills mpiexec and every rank with it.
    """
    cmd = [str(exe), "-n", str(n), sys.executable, str(LAUNCH), str(n), str(script), *args]
    proc = subprocess.Popen(cmd, cwd=REPO, env={**mpi_env(), **(env or {})},
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} still running after {timeout} s, killed\n"
                    f"--- stdout ---\n{out}\n--- stderr ---\n{err}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.fixture(scope="session")  # session-wide: module fixtures share runs (a reference)
def mpirun():
    """``mpirun(n, script, *args, timeout=120)`` -> CompletedProcess; skips without mpiexec
    (fails under CI)."""
    exe = require_mpiexec()

    def run(n: int, script: Path | str, *args: str, timeout: float = 120,
            env: dict[str, str] | None = None):
        return run_mpi(exe, n, script, *args, timeout=timeout, env=env)

    return run


_KEPT: list = [None]  # the session's kept-up jobs (``haloflow_mpi``), once made


def pytest_runtest_teardown(item, nextitem):
    """The kept-up jobs end with this directory's last test: the tests after it (threads,
    timings) have the machine to themselves."""
    here = Path(__file__).parent
    if _KEPT[0] is not None and here in item.path.parents and (
            nextitem is None or here not in nextitem.path.parents):
        _KEPT[0].close()


@pytest.fixture(scope="session")
def haloflow_mpi(mpirun):
    """``haloflow_mpi(n, "run", ...)``: the haloflow command on ``n`` ranks, ``run`` on a job
    of ``n`` ranks kept up for the session (``jobs.py``), anything else on a job of its own."""
    kept = _KEPT[0] = jobs.Jobs(require_mpiexec(), mpi_env, REPO)

    def run(n: int, *args: str, timeout: float = 120, env: dict[str, str] | None = None,
            fresh: bool = False):
        """``fresh``: a job of its own, timed as a user's run would be, on a machine without
        the kept-up jobs (ended first: their processes and memory out of the way)."""
        if fresh:
            kept.close()
        got = (kept.call(n, args, timeout) if not fresh and kept.serves(n, args, env)
               else NotImplemented)
        if got is NotImplemented:
            return mpirun(n, "-m", "haloflow", *args, timeout=timeout, env=env)
        cmd = [f"(a kept-up job of {n} rank(s))", "haloflow", *args]
        if got is None:
            pytest.fail(f"{' '.join(cmd)} still running after {timeout} s, killed")
        return subprocess.CompletedProcess(cmd, *got)

    yield run
    kept.close()


# -- @pytest.mark.parallel ---------------------------------------------------------------------

def pytest_generate_tests(metafunc):
    mark = metafunc.definition.get_closest_marker("parallel")
    if mark is None:
        return
    ranks = mark.kwargs.get("ranks", [2])
    metafunc.parametrize("nranks", ranks, ids=[f"n{n}" for n in ranks])
    if "halo" in metafunc.fixturenames:
        metafunc.parametrize("halo", mark.kwargs.get("halo", ["packed"]))


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects: "not mpi" leaves these out too
def pytest_collection_modifyitems(items):
    """Every test of this directory and every parallel-marked test is an MPI test: ``make
    test`` runs them one at a time, after the one-process tests (which run one per core)."""
    here = Path(__file__).parent
    for item in items:
        if item.get_closest_marker("parallel") is not None or here in item.path.parents:
            item.add_marker(pytest.mark.mpi)


_VERDICTS: dict[str, str | None] = {}  # node id -> None if its job passed it, else why not


def _nranks(item) -> int:
    return item.callspec.params["nranks"]


def _batch(item) -> list:
    """The tests one job runs for ``item``: it and every parallel-marked test after it in this
    session with its rank count, whatever their module (one start-up and one loading of the
    kernels for them all: 30-40 s for the 37 of them against 95-140 s a job per module).
    Under pytest-xdist only those of its module (each worker gets whole modules) or, if
    workers get single tests, only it."""
    items = item.session.items
    same_module = False
    if os.environ.get("PYTEST_XDIST_WORKER"):
        if item.config.getoption("dist", "no") not in ("loadfile", "loadscope"):
            return [item]
        same_module = True
    return [i for i in items[items.index(item):] if i.get_closest_marker("parallel")
            and _nranks(i) == _nranks(item) and (i.path == item.path or not same_module)
            and i.nodeid not in _VERDICTS]


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Outside the job: judge the job's verdict on this test instead of running it.  The job
    runs the batch of this test (``batch.py``: each test still passes or fails on its own)."""
    mark = pyfuncitem.get_closest_marker("parallel")
    if mark is None or os.environ.get(CHILD):
        return None
    exe = require_mpiexec()
    if pyfuncitem.nodeid not in _VERDICTS:
        n = _nranks(pyfuncitem)
        # the ranks load no plugins (hypothesis's would cost each 0.9 s to import; a test
        # module that draws examples imports hypothesis itself)
        cmd = [str(exe), "-n", str(n), sys.executable, str(LAUNCH), str(n), "-m", "pytest",
               "-q", "-x", "-p", "no:cacheprovider", "--rootdir", str(REPO)]
        tests = [batch.Test(i.nodeid, i.get_closest_marker("parallel").kwargs.get("timeout", 120))
                 for i in _batch(pyfuncitem)]
        env = {**mpi_env(), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        _VERDICTS.update(batch.run(cmd, tests, n, env, REPO))
    why = _VERDICTS.pop(pyfuncitem.nodeid)
    if why is not None:
        pytest.fail(why, pytrace=False)
    return True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In the job: a rank that fails says why and ends the job (no hang in a collective)."""
    outcome = yield
    rep = outcome.get_result()
    marks = os.environ.get(CHILD)
    if not marks or item.get_closest_marker("parallel") is None:
        return
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if rep.when == "call" and rep.passed:  # what the launching process counts
        batch.mark(marks, item.nodeid, comm.rank, "passed")
    if rep.failed:
        why = (f"[rank {comm.rank}/{comm.size}] {rep.nodeid} failed in {rep.when}:\n"
               f"{rep.longreprtext}\n")
        batch.mark(marks, item.nodeid, comm.rank, "failed", why)
        sys.__stderr__.write(why)
        sys.__stderr__.flush()
        if comm.size > 1:
            comm.Abort(1)


def pytest_runtest_logfinish(nodeid, location):
    """In the job: this rank is through with the test (the launcher's clock for the next)."""
    marks = os.environ.get(CHILD)
    if marks:
        from mpi4py import MPI

        batch.mark(marks, nodeid, MPI.COMM_WORLD.rank, "done")


def pytest_sessionfinish(session, exitstatus):
    """Under CI a run in which every MPI test was skipped (or none ran) fails."""
    if not os.environ.get("CI") or os.environ.get(CHILD) or exitstatus != 0:
        return
    items = [i for i in session.items if i.get_closest_marker("mpi") is not None]
    if items and not any(i.nodeid in _PASSED for i in items):
        sys.stderr.write(f"CI: none of the {len(items)} MPI tests passed (all skipped?)\n")
        session.exitstatus = 1


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    if report.when == "call" and report.passed:
        _PASSED.add(report.nodeid)
