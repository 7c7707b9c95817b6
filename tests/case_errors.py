"""The one-line CaseError a bad case gives: shared by the tests of each physics' keys."""

from __future__ import annotations

import pytest

from haloflow.case import CaseError, load_case


def error(source, overrides=()):
    """The CaseError message for loading ``source``; it must be a single line."""
    with pytest.raises(CaseError) as info:
        load_case(source, overrides)
    msg = str(info.value)
    assert "\n" not in msg
    return msg
