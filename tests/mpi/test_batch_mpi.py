"""The batched launch of parallel-marked tests (``batch.py``) judges each test on its own:
``batch_cases.py`` run by a pytest of its own passes, fails, skips, hangs and crashes as it
would one test per job, with the tests of one rank count sharing a job until one fails."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict

import pytest

from tests.mpi.conftest import REPO, require_mpiexec

pytestmark = pytest.mark.mpi


def test_each_test_of_a_batch_gets_its_own_verdict(tmp_path):
    require_mpiexec()
    log = tmp_path / "log.txt"
    env = {**os.environ, "HALOFLOW_BATCH_LOG": str(log)}
    env.pop("CI", None)  # the session's own CI check does not apply to this sub-session
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                          "tests/mpi/batch_cases.py"], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=240)
    out = res.stdout + res.stderr
    verdicts = {line.split()[1].split("::")[1]: line.split()[0]
                for line in res.stdout.splitlines()
                if line.split()[:1] in (["PASSED"], ["FAILED"])}
    assert verdicts == {
        "test_first_passes[n2]": "PASSED",
        "test_fails_on_the_last_rank[n2]": "FAILED",
        "test_after_a_failure_passes[n2]": "PASSED",
        "test_skipped_on_rank_0[n2]": "FAILED",
        "test_hangs[n2]": "FAILED",
        "test_last_passes[n2]": "PASSED",
        "test_other_rank_count_passes[n3]": "PASSED",
        "test_crashes[n1]": "FAILED",
        "test_after_a_crash_passes[n1]": "PASSED"}, out
    assert res.returncode == 1, out
    assert "the last rank says no" in out and "[rank 1/2]" in out
    assert "1 of 2 ranks passed the test" in out
    assert "still running 4 s after" in out
    assert "exited with 7" in out
    jobs = defaultdict(set)  # pid of rank 0 -> the tests it ran
    for line in log.read_text().splitlines():
        name, rank, pid = line.split()
        if rank == "0":
            jobs[pid].add(name)
    # one job up to the failure, the next from the test after it up to the hang, then the
    # rest; the 3-rank test in a job of its own; the crash, which no rank reported, blamed on
    # no test: both 1-rank tests again, each in a job of its own
    assert sorted(map(sorted, jobs.values())) == [
        ["after", "hangs", "skips"], ["alone"], ["crashes"], ["crashes"], ["fails", "first"],
        ["last"], ["three"]], jobs
