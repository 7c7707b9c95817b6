"""Test order: the modules holding tests marked ``slow`` first; and a cache of the user's
own that the tests neither read nor write.

``make test`` hands whole modules to its workers in this order (pytest-xdist ``--dist
loadfile --no-loadscope-reorder``), so the longest modules start at once on different
workers instead of one of them ending the run alone.

``XDG_CACHE_HOME`` points at a folder of this test session (inherited by every process and
rank it starts): a shared-memory curve that ``haloflow predict`` once measured on this
machine, perhaps under load, would otherwise be what an emulated network subtracts from its
delays.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

if "HALOFLOW_TEST_CACHE" not in os.environ:  # the session's first process: made and removed here
    os.environ["HALOFLOW_TEST_CACHE"] = tempfile.mkdtemp(prefix="haloflow-test-cache-")
    os.environ["XDG_CACHE_HOME"] = os.environ["HALOFLOW_TEST_CACHE"]
    atexit.register(shutil.rmtree, os.environ["HALOFLOW_TEST_CACHE"], True)


def pytest_collection_modifyitems(items):
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)  # stable: the same order otherwise
