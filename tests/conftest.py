"""Test order: the modules holding tests marked ``slow`` first; and a cache of the user's
own that the tests neither read nor write.

``make test`` hands whole modules to its workers in this order (pytest-xdist ``--dist
loadfile --no-loadscope-reorder``), so the longest modules start at once on different
workers instead of one of them ending the run alone.

``XDG_CACHE_HOME`` points at a folder of this test session (inherited by every process and
rank it starts), holding a shared-memory curve of its own (0.4 us + bytes / 8 GB/s, where
``haloflow predict`` caches the one it measures): an emulated network's delays are its
curve less this one, and a curve measured on a loaded machine (a run's ping-pong, or a
cache written under load) can be slower than a fast network's, leaving nothing to add.
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
    from haloflow.io.netpipe_file import write_out
    from haloflow.io.network import shm_cache

    shm_cache().parent.mkdir(parents=True)
    sizes = [2**k for k in range(23)]
    write_out(shm_cache(), sizes, [0.4e-6 + n / 8e9 for n in sizes])


def pytest_collection_modifyitems(items):
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)  # stable: the same order otherwise
