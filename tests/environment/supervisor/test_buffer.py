"""Reference 4.4: the capped unread buffer of a command (or subagent) session."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from penguin.environment.supervisor._buffer import (
    BUFFER_CAPACITY,
    SUBAGENT_LABEL,
    UnreadBuffer,
)

PREFIX = re.compile(r"\A\[\.\.\. (\d+) chars of (.+?) dropped \.\.\.\]\n")


def split_drain(text: str) -> tuple[int, str]:
    """(dropped count announced by the prefix, the rest) of a drained text."""
    match = PREFIX.match(text)
    if match is None:
        return 0, text
    return int(match.group(1)), text[match.end() :]


def test_4_4_capacity_is_one_mib_of_chars() -> None:
    assert BUFFER_CAPACITY == 1_048_576
    assert UnreadBuffer().capacity == BUFFER_CAPACITY
    assert UnreadBuffer().label == "earlier output"


def test_4_4_empty_drains_to_empty_string() -> None:
    buffer = UnreadBuffer()
    assert not buffer
    assert len(buffer) == 0
    assert buffer.drain() == ""
    buffer.append("")
    assert not buffer
    assert buffer.drain() == ""


def test_4_4_drain_returns_everything_once() -> None:
    buffer = UnreadBuffer()
    buffer.append("hello ")
    buffer.append("world\n")
    assert buffer
    assert len(buffer) == 12
    assert buffer.drain() == "hello world\n"
    assert not buffer
    assert buffer.drain() == ""
    buffer.append("again")
    assert buffer.drain() == "again"


def test_4_4_overflow_drops_oldest_and_tallies() -> None:
    buffer = UnreadBuffer(capacity=10)
    buffer.append("abcdef")
    buffer.append("ghijkl")
    assert len(buffer) == 10
    assert buffer.dropped == 2
    buffer.append("mn")
    assert buffer.dropped == 4
    assert buffer.drain() == "[... 4 chars of earlier output dropped ...]\nefghijklmn"
    # The tally was delivered: it starts afresh.
    assert buffer.dropped == 0
    buffer.append("xyz")
    assert buffer.drain() == "xyz"


def test_4_4_overflow_at_full_capacity_in_small_appends() -> None:
    buffer = UnreadBuffer(capacity=1_000)
    text = "".join(chr(ord("a") + i % 26) for i in range(5_000))
    for ch in text:
        buffer.append(ch)
    assert len(buffer) == 1_000
    assert buffer.drain() == f"[... 4000 chars of earlier output dropped ...]\n{text[-1000:]}"


def test_4_4_tally_only_buffer_drains_to_prefix() -> None:
    # append/drain never leave a tally without text (a non-empty append keeps at least
    # one char), but the spec fixes what such a buffer means, so the state is set up
    # directly: the tally alone is something to deliver.
    buffer = UnreadBuffer(label=SUBAGENT_LABEL)
    buffer._dropped = 7
    assert buffer
    assert len(buffer) == 0
    assert buffer.drain() == "[... 7 chars of earlier subagent output dropped ...]\n"
    assert not buffer
    assert buffer.drain() == ""


def test_4_4_capacity_one_keeps_the_last_char() -> None:
    buffer = UnreadBuffer(capacity=1)
    buffer.append("ab")
    assert buffer.dropped == 1
    assert len(buffer) == 1
    assert buffer.drain() == "[... 1 chars of earlier output dropped ...]\nb"


def test_4_4_single_append_larger_than_capacity_keeps_its_tail() -> None:
    buffer = UnreadBuffer(capacity=8)
    buffer.append("0123")
    buffer.append("abcdefghijklmnop")
    assert len(buffer) == 8
    assert buffer.dropped == 4 + 8
    assert buffer.drain() == "[... 12 chars of earlier output dropped ...]\nijklmnop"


def test_4_4_append_of_exactly_capacity() -> None:
    buffer = UnreadBuffer(capacity=8)
    buffer.append("xy")
    buffer.append("abcdefgh")
    assert buffer.drain() == "[... 2 chars of earlier output dropped ...]\nabcdefgh"


def test_4_4_counts_code_points_not_utf16_units() -> None:
    buffer = UnreadBuffer(capacity=3)
    buffer.append("🐧🐧🐧🐧")
    assert buffer.drain() == "[... 1 chars of earlier output dropped ...]\n🐧🐧🐧"


def test_4_4_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        UnreadBuffer(capacity=0)


def test_4_4_full_size_stream_keeps_the_last_mib() -> None:
    buffer = UnreadBuffer()
    chunk = "x" * 65_535 + "\n"
    for _ in range(40):
        buffer.append(chunk)
    buffer.append("end")
    assert len(buffer) == BUFFER_CAPACITY
    dropped, text = split_drain(buffer.drain())
    assert dropped == 40 * 65_536 + 3 - BUFFER_CAPACITY
    assert text.endswith("\nend")
    assert len(text) == BUFFER_CAPACITY


Op = tuple[str, str]
ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.text(max_size=40)),
        st.tuples(st.just("drain"), st.just("")),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(capacity=st.integers(min_value=1, max_value=64), operations=ops)
def test_4_4_property_nothing_is_lost_or_duplicated(capacity: int, operations: list[Op]) -> None:
    buffer = UnreadBuffer(capacity=capacity)
    since_drain = ""
    total_in = 0
    total_out = 0
    for op, text in [*operations, ("drain", "")]:
        if op == "append":
            buffer.append(text)
            since_drain += text
            total_in += len(text)
            held = len(buffer)
            assert held <= capacity
            assert held == min(capacity, len(since_drain))
            assert buffer.dropped == len(since_drain) - held
            assert bool(buffer) == bool(since_drain)
        else:
            drained = buffer.drain()
            dropped, kept = split_drain(drained)
            # The kept text is the suffix of what came in since the last drain.
            assert since_drain.endswith(kept)
            assert dropped + len(kept) == len(since_drain)
            assert (dropped > 0) == drained.startswith("[... ")
            total_out += dropped + len(kept)
            since_drain = ""
            assert not buffer
            assert buffer.dropped == 0
    assert total_out == total_in
