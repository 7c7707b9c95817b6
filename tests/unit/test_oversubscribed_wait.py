"""Oversubscribed MPICH ranks sleep while they wait; a node with a core per rank is left as is."""

from __future__ import annotations

import os
import subprocess
import sys

from haloflow.mpiutil import SLEEP_WHILE_WAITING, sleep_when_oversubscribed

CORES = os.cpu_count() or 1


def test_set_only_with_more_ranks_on_the_node_than_cores():
    env = {"MPI_LOCALNRANKS": str(CORES + 1)}
    assert sleep_when_oversubscribed(env) and env[SLEEP_WHILE_WAITING] == "1"
    for local in (str(CORES), "1", "", "many"):
        env = {"MPI_LOCALNRANKS": local}
        assert not sleep_when_oversubscribed(env) and SLEEP_WHILE_WAITING not in env
    assert not sleep_when_oversubscribed({})  # not launched by MPICH's mpiexec


def test_a_users_setting_wins():
    env = {"MPI_LOCALNRANKS": str(CORES + 1), SLEEP_WHILE_WAITING: "0"}
    assert not sleep_when_oversubscribed(env) and env[SLEEP_WHILE_WAITING] == "0"


def test_importing_haloflow_sets_it_before_mpi_starts():
    """The package does it on import (MPICH reads the variable when MPI starts)."""
    code = (f"import os, sys, haloflow; print(os.environ.get('{SLEEP_WHILE_WAITING}'), "
            "'mpi4py.MPI' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k != SLEEP_WHILE_WAITING}
    for local, want in ((CORES + 2, "1 False"), (1, "None False")):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={**env, "MPI_LOCALNRANKS": str(local)}, check=True).stdout
        assert out.split() == want.split(), out
