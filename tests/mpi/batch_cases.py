"""Parallel-marked tests that pass, fail, skip, hang and crash, for ``test_batch_mpi.py``
(which runs this file in a pytest of its own; not collected by ``make test``: no ``test_``
prefix).

Each test appends ``NAME RANK PID`` to ``$HALOFLOW_BATCH_LOG``, so that the jobs they ran in
can be told apart.
"""

from __future__ import annotations

import os
import time

import pytest
from mpi4py import MPI


def _log(name: str) -> None:
    with open(os.environ["HALOFLOW_BATCH_LOG"], "a") as f:
        f.write(f"{name} {MPI.COMM_WORLD.rank} {os.getpid()}\n")


@pytest.mark.parallel(ranks=[2], timeout=60)
def test_first_passes(nranks):
    _log("first")
    assert MPI.COMM_WORLD.allreduce(1) == nranks


@pytest.mark.parallel(ranks=[2], timeout=60)
def test_fails_on_the_last_rank(nranks):
    _log("fails")
    comm = MPI.COMM_WORLD
    assert comm.rank != comm.size - 1, "the last rank says no"
    comm.Barrier()  # the others wait here until the job is aborted


@pytest.mark.parallel(ranks=[2], timeout=60)
def test_after_a_failure_passes(nranks):
    _log("after")
    MPI.COMM_WORLD.Barrier()


@pytest.mark.parallel(ranks=[2], timeout=60)
def test_skipped_on_rank_0(nranks):
    _log("skips")
    if MPI.COMM_WORLD.rank == 0:
        pytest.skip("rank 0 only")


@pytest.mark.parallel(ranks=[2], timeout=4)
def test_hangs(nranks):
    _log("hangs")
    if MPI.COMM_WORLD.rank == 0:
        time.sleep(120)
    MPI.COMM_WORLD.Barrier()


@pytest.mark.parallel(ranks=[2], timeout=60)
def test_last_passes(nranks):
    _log("last")
    MPI.COMM_WORLD.Barrier()


@pytest.mark.parallel(ranks=[3], timeout=60)
def test_other_rank_count_passes(nranks):
    _log("three")
    assert MPI.COMM_WORLD.size == 3


@pytest.mark.parallel(ranks=[1], timeout=60)
def test_crashes(nranks):
    _log("crashes")
    os._exit(7)  # no report, no marks: the job just ends


@pytest.mark.parallel(ranks=[1], timeout=60)
def test_after_a_crash_passes(nranks):
    _log("alone")
