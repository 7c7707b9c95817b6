"""Case files drawn from the case schema (tests/schema_fuzz.py): wrong types, missing keys,
extreme numbers and unknown keys end in a run, or in one line and exit 2 (bad input) or 3
(diverged), on one rank.  Drawn from a fixed seed, a bounded number of examples
(``HALOFLOW_FUZZ_EXAMPLES=N``: a longer campaign with fresh random inputs)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from tests.limited import haloflow
from tests.schema_fuzz import FAST, case_files, judge

_LONG = int(os.environ.get("HALOFLOW_FUZZ_EXAMPLES", "0"))


@settings(max_examples=_LONG or 12, deadline=None, derandomize=not _LONG, database=None,
          suppress_health_check=list(HealthCheck))
@given(case_files())
def test_case_files_from_the_schema(text):
    with tempfile.TemporaryDirectory() as tmp:
        case, out = Path(tmp) / "case.toml", Path(tmp) / "out"
        case.write_text(text)
        try:
            res = haloflow("run", case, "-o", out, *FAST, timeout=90, cwd=tmp)
        except subprocess.TimeoutExpired:
            res = None
        judge(res, out, text)
