"""Fixtures of the engine tests."""

from __future__ import annotations

import pytest
import trio.testing


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    """pytest-trio's autojump clock, jumping after 1 ms of real idleness rather than 0.

    Virtual time is just as exact. The trace is written in worker threads, and a
    clock that jumps while a write is in flight races through the Environment's
    hourly idle sweep — thousands of virtual hours, a busy CPU, for nothing.
    """
    return trio.testing.MockClock(autojump_threshold=0.001)
