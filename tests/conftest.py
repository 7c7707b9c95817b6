"""Test order: the modules holding tests marked ``slow`` first.

``make test`` hands whole modules to its workers in this order (pytest-xdist ``--dist
loadfile --no-loadscope-reorder``), so the longest modules start at once on different
workers instead of one of them ending the run alone.
"""

from __future__ import annotations


def pytest_collection_modifyitems(items):
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)  # stable: the same order otherwise
