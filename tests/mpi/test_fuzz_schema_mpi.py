"""Case files drawn from the case schema (tests/schema_fuzz.py) on two ranks: a run, or one
line and exit 2 or 3 whichever rank meets the problem; a smaller, seeded set than the
one-rank test (tests/unit/test_fuzz_schema.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.schema_fuzz import FAST, case_files, judge


@pytest.mark.mpi
def test_case_files_from_the_schema_on_two_ranks(haloflow_mpi):
    @settings(max_examples=4, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case_files())
    def check(text):
        with tempfile.TemporaryDirectory() as tmp:
            case, out = Path(tmp) / "case.toml", Path(tmp) / "out"
            case.write_text(text)
            judge(haloflow_mpi(2, "run", str(case), "-o", str(out), *FAST, timeout=120),
                  out, text)

    check()
