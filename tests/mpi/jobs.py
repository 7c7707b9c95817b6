"""MPI jobs that stay up for the session and run one ``haloflow run`` after another.

Most MPI tests run ``haloflow run`` on a few ranks, and most of such a job's time on this
machine is each rank's start-up (Python, numba, mpi4py, haloflow and its kernels: about a
second of CPU per rank).  ``haloflow_mpi(n, "run", ...)`` therefore hands the command line to
a job of ``n`` ranks started once (``mpiexec -n n python jobs.py n SPOOL``): every rank
waits on its FIFO in SPOOL for the next command line, runs ``haloflow.cli.main`` on it with
its standard output and error sent to files of its own, and reports its exit status on
another FIFO.  The caller gets what a fresh job gives: the exit status (the ranks'
largest), stdout and stderr (the ranks' files, rank after rank, removed once read).

A job that fails a command, dies (``MPI_Abort``) or runs past its timeout is not used
again: the next command starts a fresh one, so a failure leaves nothing behind for the
next test.  Commands given an environment of their own, other commands than ``run`` and
jobs of more than ``MAX_RANKS`` ranks start a job of their own as before
(``conftest.run_mpi``).  ``HALOFLOW_TEST_FRESH_JOBS=1`` starts a job for every command.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MAX_RANKS = 4  # jobs kept up: 1 to 4 ranks (larger ones are rare: each gets its own job)
QUIT = None  # the request that ends a job


# -- the ranks ----------------------------------------------------------------------------------

def _run_one(argv: list[str], out: Path, err: Path) -> int:
    """``haloflow.cli.main(argv)`` with file descriptors 1 and 2 on ``out`` and ``err``."""
    from haloflow.cli import main

    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(out, "w") as fo, open(err, "w") as fe:
        os.dup2(fo.fileno(), 1)
        os.dup2(fe.fileno(), 2)
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, int | None):
                print(e.code, file=sys.stderr)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
    return int(code or 0)


def serve(nranks: int, spool: Path) -> None:
    """A rank's loop: a command line (JSON, one line, null to end) from its FIFO
    ``in.RANK``, then ``k RANK status`` on the FIFO ``done``.  Both block: a job waiting for
    its next command takes no CPU from the tests running meanwhile."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if comm.size != nranks:  # the wrong launcher: N one-rank jobs
        sys.stderr.write(f"jobs.py: the job has {comm.size} rank(s), {nranks} were launched\n")
        os._exit(3)
    import haloflow.cli  # noqa: F401 - loaded once, before the first command

    done = os.open(spool / "done", os.O_WRONLY)
    with open(os.open(spool / f"in.{comm.rank}", os.O_RDWR), encoding="utf-8") as requests:
        for k, line in enumerate(requests):
            argv = json.loads(line)
            if argv is QUIT:
                return
            code = _run_one(argv, spool / f"{k}.{comm.rank}.out", spool / f"{k}.{comm.rank}.err")
            os.write(done, f"{k} {comm.rank} {code}\n".encode())


# -- the test process ---------------------------------------------------------------------------

class Job:
    """One job of ``nranks`` ranks kept up; ``call`` runs a command line on it."""

    def __init__(self, mpiexec: Path, nranks: int, env: dict[str, str], cwd: Path):
        self.nranks = nranks
        self.spool = Path(tempfile.mkdtemp(prefix=f"haloflow-job{nranks}-"))
        self.k = 0
        fifos = [self.spool / f"in.{r}" for r in range(nranks)] + [self.spool / "done"]
        for path in fifos:
            os.mkfifo(path)
        # read-write: neither side's open waits for the other, nor reads an end of file
        self.requests = [os.open(path, os.O_RDWR) for path in fifos[:-1]]
        self.done = os.open(fifos[-1], os.O_RDWR)
        self.pending = b""
        self.cmd = [str(mpiexec), "-n", str(nranks), sys.executable, __file__, str(nranks),
                    str(self.spool)]
        self.log = open(self.spool / "mpiexec.log", "w+")  # noqa: SIM115 - the job's life
        self.proc = subprocess.Popen(self.cmd, cwd=cwd, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def _request(self, argv) -> int:
        line = (json.dumps(argv) + "\n").encode()
        for fd in self.requests:
            os.write(fd, line)
        self.k += 1
        return self.k - 1

    def _outputs(self, k: int) -> tuple[str, str]:
        def read(kind):
            files = [self.spool / f"{k}.{r}.{kind}" for r in range(self.nranks)]
            files = [f for f in files if f.exists()]
            text = "".join(f.read_text(errors="replace") for f in files)
            for f in files:
                f.unlink()
            return text

        return read("out"), read("err")

    def call(self, argv: list[str], timeout: float):
        """``(returncode, stdout, stderr)``, or None if it ran past ``timeout`` (job killed)."""
        k = self._request(argv)
        codes: dict[int, int] = {}
        end = time.monotonic() + timeout
        while len(codes) < self.nranks:
            if not self.alive:  # MPI_Abort, a crash
                out, err = self._outputs(k)
                self.log.seek(0)
                return self.proc.returncode, out, err + self.log.read()
            if time.monotonic() > end:
                self.kill()
                return None
            if select.select([self.done], [], [], 0.2)[0]:
                *lines, self.pending = (self.pending + os.read(self.done, 4096)).split(b"\n")
                for line in lines:
                    step, rank, code = map(int, line.split())
                    if step == k:
                        codes[rank] = code
        out, err = self._outputs(k)
        return max(codes.values()), out, err

    def close(self) -> None:
        """End the job (its ranks return from their loop), or kill it if it does not end."""
        if self.alive:
            self._request(QUIT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        for fd in [*self.requests, self.done]:
            os.close(fd)
        self.log.close()
        shutil.rmtree(self.spool, ignore_errors=True)

    def kill(self) -> None:
        if self.alive:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def _same(env: dict[str, str], other: dict[str, str]) -> bool:
    """Whether two environments are the same but for pytest's name of the running test."""
    return ({k: v for k, v in env.items() if k != "PYTEST_CURRENT_TEST"}
            == {k: v for k, v in other.items() if k != "PYTEST_CURRENT_TEST"})


class Jobs:
    """The session's jobs, one per rank count, each started at its first command.

    ``environment()`` is the environment a fresh job would get now: a command run while it
    differs from the one the jobs started with (a test's ``monkeypatch.setenv``) gets a job
    of its own, as does one made while another runs (a test's threads)."""

    def __init__(self, mpiexec: Path, environment, cwd: Path):
        self.mpiexec, self.environment, self.cwd = mpiexec, environment, cwd
        self.env = environment()
        self.jobs: dict[int, Job] = {}
        self.lock = threading.Lock()

    def serves(self, nranks: int, args: tuple[str, ...], env) -> bool:
        """Whether a kept-up job may run this command (else it gets a job of its own)."""
        return (env is None and args[:1] == ("run",) and 1 <= nranks <= MAX_RANKS
                and not os.environ.get("HALOFLOW_TEST_FRESH_JOBS")
                and _same(self.environment(), self.env))

    def call(self, nranks: int, args: tuple[str, ...], timeout: float):
        """What :meth:`Job.call` returns, or NotImplemented if a command is running
        already."""
        if not self.lock.acquire(blocking=False):
            return NotImplemented
        try:
            job = self.jobs.get(nranks)
            if job is None or not job.alive:
                job = self.jobs[nranks] = Job(self.mpiexec, nranks, self.env, self.cwd)
            got = job.call(list(args), timeout)
            if got is None or got[0] != 0:  # a failed command: the next gets a fresh job
                job.close()
                del self.jobs[nranks]
            return got
        finally:
            self.lock.release()

    def close(self) -> None:
        with self.lock:  # not while a command runs, nor twice at once (a test's threads)
            for job in self.jobs.values():
                job.close()
            self.jobs.clear()


if __name__ == "__main__":
    serve(int(sys.argv[1]), Path(sys.argv[2]))
