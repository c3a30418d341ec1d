"""Shared argument rules (reference 3.0)."""

from __future__ import annotations

import math

import pytest

from penguin.environment.tools._args import clamp_yield_time_ms, finite_number


@pytest.mark.parametrize(
    ("value", "default", "timeout_ms", "expected"),
    [
        (None, 60_000, 120_000, 60_000),  # exec default
        (500_000, 60_000, 120_000, 119_000),  # capped a second before the timeout
        (10, 60_000, 120_000, 250),  # floor
        (60_000, 60_000, 200, 250),  # the Environment's timeout fires first
        (None, 120_000, 130_000, 120_000),  # input_command empty poll
        ("5000", 60_000, 120_000, 60_000),  # a numeric string is not a number
        (math.inf, 60_000, 120_000, 60_000),
        (math.nan, 60_000, 120_000, 60_000),
        (True, 60_000, 120_000, 60_000),
        (1234.5, 60_000, 0, 1234.5),  # no timeout: no cap
        (-5, 300_000, 600_000, 250),
    ],
)
def test_3_0_3_yield_time_clamp(
    value: object, default: int, timeout_ms: int, expected: float
) -> None:
    assert clamp_yield_time_ms(value, default, timeout_ms) == expected


def test_finite_number_rejects_booleans_strings_and_non_finite() -> None:
    assert finite_number(3) == 3.0
    assert finite_number(2.5) == 2.5
    values: tuple[object, ...] = (True, "3", None, [], math.inf, -math.inf, math.nan)
    for value in values:
        assert finite_number(value) is None
