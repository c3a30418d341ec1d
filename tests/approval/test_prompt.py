"""Reference 5.6: the interactive prompt's words and answers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from penguin import protocol as om
from penguin.approval import (
    APPROVED_LABEL,
    DENIED_LABEL,
    FORBIDDEN_LABEL,
    PROMPT,
    parse_prompt_answer,
    verdict_label,
)


def test_5_6_prompt_text() -> None:
    assert PROMPT == "? Approve this tool call? [Y/n] "


@pytest.mark.parametrize(
    ("line", "verdict"),
    [
        ("y", "allow"),
        ("yes", "allow"),
        ("Y\n", "allow"),
        (" YES ", "allow"),
        ("", "allow"),
        ("\n", "allow"),
        ("sure", "allow"),
        ("nah", "allow"),
        ("n", "deny"),
        ("no", "deny"),
        ("N\n", "deny"),
        ("  No  \r\n", "deny"),
        (None, "deny"),
    ],
)
def test_5_6_prompt_answers(line: str | None, verdict: om.ApprovalVerdict) -> None:
    assert parse_prompt_answer(line) == verdict


@given(st.text())
def test_5_6_prompt_denies_only_n_no_and_eof(line: str) -> None:
    expected = "deny" if line.strip().lower() in {"n", "no"} else "allow"
    assert parse_prompt_answer(line) == expected


def test_5_6_render_labels() -> None:
    assert APPROVED_LABEL == "✓ [approved]"
    assert DENIED_LABEL == "× [denied]"
    assert FORBIDDEN_LABEL == "× [forbidden by policy]"
    assert verdict_label("allow") == "✓ [approved]"
    assert verdict_label("deny") == "× [denied]"
    assert verdict_label("forbidden") == "× [forbidden by policy]"
