"""Several parallel-marked tests in one ``mpiexec`` job, each judged on its own.

The launching process runs ``pytest`` under mpiexec once with the node ids of several tests
(``conftest.py`` gives those of one rank count).  Each rank leaves, in the
directory named by ``HALOFLOW_MPI_CHILD``, for each test (``key`` of its node id):

- ``KEY.RANK.passed``: the test's body passed on this rank;
- ``KEY.RANK.done``: the rank is through with the test (teardown included);
- ``KEY.RANK.failed``: why it failed on this rank, written before the rank aborts the job.

A test passes iff every rank passed it.  It fails if a rank says it failed, if every rank
was through with it but not every rank passed it (a skip on a rank), or if it ran past its
own timeout (counted from the moment the test before it was through on every rank, or from
the launch for the first; the last one's covers the job's exit too, so that a job of one
test has its timeout in all, as an unbatched one had).  The first test to fail ends the
judging of its job, which was aborted there: the tests after it go to a new job.  A job
that ends badly with no rank saying why (a crash, an error at exit, a wrong launcher) is
blamed on no test: each of its tests is run again in a job of its own and judged as the
single test it then is (the job's exit status, every rank passed, its timeout).
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

CHILD = "HALOFLOW_MPI_CHILD"  # in a parallel-marked tests' job: where the ranks leave marks
POLL_S = 0.2  # how often the launching process looks at the ranks' progress


@dataclass(frozen=True)
class Test:
    nodeid: str
    timeout: float


def key(nodeid: str) -> str:
    return hashlib.sha1(nodeid.encode()).hexdigest()[:16]


def mark(directory: str, nodeid: str, rank: int, what: str, text: str = "") -> None:
    """On a rank: record ``what`` (passed, done, failed) for a test."""
    Path(directory, f"{key(nodeid)}.{rank}.{what}").write_text(text)


def _count(names: set[str], test: Test, n: int, what: str) -> int:
    return sum(f"{key(test.nodeid)}.{r}.{what}" in names for r in range(n))


@dataclass
class _Job:
    cmd: list[str]
    returncode: int
    out: tuple[str, str]  # stdout, stderr
    killed: int | None  # index of the test that ran past its timeout (len(tests): the exit)
    names: set[str]
    failures: dict[str, list[str]]  # node id -> the failing ranks' reports

    def output(self) -> str:
        return f"--- stdout ---\n{self.out[0]}\n--- stderr ---\n{self.out[1]}"


def _launch(cmd: list[str], tests: list[Test], n: int, env: dict[str, str], cwd: Path) -> _Job:
    """Run the job, killing it when the test it is on runs past that test's timeout."""
    with tempfile.TemporaryDirectory(prefix="haloflow-mpi-") as d:
        cmd = [*cmd, *(t.nodeid for t in tests)]
        proc = subprocess.Popen(cmd, cwd=cwd,
                                env={**env, CHILD: d}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        on, since, killed = 0, time.monotonic(), None  # the test the job is on, its start
        while True:
            try:
                out = proc.communicate(timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                pass
            now, names = time.monotonic(), set(os.listdir(d))
            while on < len(tests) and _count(names, tests[on], n, "done") == n:
                on += 1
                if on < len(tests):  # (the last test's time covers the job's exit)
                    since = now
            if now - since > tests[min(on, len(tests) - 1)].timeout:
                os.killpg(proc.pid, signal.SIGKILL)
                out, killed = proc.communicate(), on
                break
        names = set(os.listdir(d))
        failures = {t.nodeid: [Path(d, f"{key(t.nodeid)}.{r}.failed").read_text()
                               for r in range(n) if f"{key(t.nodeid)}.{r}.failed" in names]
                    for t in tests}
    return _Job(cmd, proc.returncode, out, killed, names,
                {k: v for k, v in failures.items() if v})


def _judge_one(job: _Job, test: Test, n: int) -> str | None:
    """A job of one test: what the unbatched launcher asserted."""
    if job.killed is not None:
        return (f"{test.nodeid}: still running after {test.timeout} s, killed\n"
                f"{' '.join(job.cmd)}\n{job.output()}")
    if job.returncode != 0:
        return f"{' '.join(job.cmd)} exited with {job.returncode}\n{job.output()}"
    passed = _count(job.names, test, n, "passed")
    if passed != n:
        return f"{passed} of {n} ranks passed the test\n{job.output()}"
    return None


def _judge(job: _Job, tests: list[Test], n: int):
    """Verdicts (node id -> None if passed, else why) of the tests this job decided, and the
    tests left to run; ``None, tests`` if the job ended badly with no rank saying why."""
    verdicts: dict[str, str | None] = {}
    for i, t in enumerate(tests):
        if t.nodeid in job.failures:
            verdicts[t.nodeid] = ("\n".join(job.failures[t.nodeid])
                                  + f"\n(batch job: {' '.join(job.cmd)})\n{job.output()}")
            return verdicts, tests[i + 1:]
        if _count(job.names, t, n, "done") == n:
            passed = _count(job.names, t, n, "passed")
            verdicts[t.nodeid] = None if passed == n else \
                f"{passed} of {n} ranks passed the test\n{job.output()}"
            continue
        if job.killed == i:
            verdicts[t.nodeid] = (f"{t.nodeid}: still running {t.timeout} s after the job "
                                  f"started or the test before it ended, killed\n"
                                  f"{' '.join(job.cmd)}\n{job.output()}")
            return verdicts, tests[i + 1:]
        break  # the job ended before this test did
    else:
        if job.returncode == 0:
            return verdicts, []
    return None, tests


def run(cmd: list[str], tests: list[Test], n: int, env: dict[str, str], cwd: Path):
    """Verdict of every test (node id -> None if it passed, else why it failed): ``cmd``
    followed by node ids runs them under ``mpiexec -n n``."""
    verdicts: dict[str, str | None] = {}
    todo = list(tests)
    while len(todo) > 1:
        got, todo = _judge(_launch(cmd, todo, n, env, cwd), todo, n)
        if got is None:  # blame no test: each alone
            break
        verdicts.update(got)
    for t in todo:
        verdicts[t.nodeid] = _judge_one(_launch(cmd, [t], n, env, cwd), t, n)
    return verdicts
