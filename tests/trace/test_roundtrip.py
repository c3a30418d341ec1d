"""Property: what the writer records is exactly what the reader gives back, in order."""

from __future__ import annotations

import functools
import re
import tempfile
from pathlib import Path
from typing import Literal

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from penguin import protocol as om
from penguin.trace import TraceWriter, is_recordable, read_trace, trace_files

from ..protocol.strategies import messages
from .support import submit

Rotate = Literal["rotate"]
ROTATE: Rotate = "rotate"

operations = st.lists(st.one_of(messages(), messages(), messages(), st.just(ROTATE)), max_size=14)


def expected_files(ops: list[om.OmniMessage[om.Payload] | Rotate]) -> list[list[object]]:
    """The recordable messages per context index (index 1 first)."""
    files: list[list[object]] = [[]]
    for op in ops:
        if op == ROTATE:
            files.append([])
        elif is_recordable(op):
            files[-1].append(op)
    return files


def read_back(traces: Path, count: int) -> list[list[object]]:
    by_name = {p.name: p for p in trace_files(traces, "s")}
    out: list[list[object]] = []
    for index in range(1, count + 1):
        path = by_name.get(f"s_{index:03d}.jsonl")
        out.append(list(read_trace(path, strict=True)) if path else [])
    return out


@settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations)
async def test_write_then_read_gives_back_the_recordable_ones(
    ops: list[om.OmniMessage[om.Payload] | Rotate],
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        traces = Path(directory)
        writer = TraceWriter(traces, "s", date_dir="d")
        for op in ops:
            if op == ROTATE:
                await writer.rotate()
            else:
                assert await writer.append(op) is is_recordable(op)
        expected = expected_files(ops)
        assert read_back(traces, len(expected)) == expected


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations)
async def test_concurrent_submissions_keep_their_order(
    ops: list[om.OmniMessage[om.Payload] | Rotate],
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        traces = Path(directory)
        writer = TraceWriter(traces, "s", date_dir="d")
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                for op in ops:
                    if op == ROTATE:
                        await submit(nursery, writer.rotate)
                    else:
                        await submit(nursery, functools.partial(writer.append, op))
        expected = expected_files(ops)
        assert read_back(traces, len(expected)) == expected


_HIGH_THEN_LOW = re.compile("[\ud800-\udbff][\udc00-\udfff]")

# A high surrogate followed by a low one is, in JSON, the same text as the astral
# character they encode ("\ud800\udc00" is "𐀀"): lone surrogates only.
any_text = st.text(
    st.characters(categories=("Cs", "Lu", "Ll", "Lo", "Zl", "Zp", "Cc", "So"))
).filter(lambda text: _HIGH_THEN_LOW.search(text) is None)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(any_text, min_size=1, max_size=5))
async def test_any_text_survives_including_lone_surrogates(texts: list[str]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        writer = TraceWriter(directory, "s", date_dir="d")
        sent = [om.user_text(t) for t in texts]
        for message in sent:
            await writer.append(message)
        writer.path.read_bytes().decode("utf-8")  # always valid UTF-8
        assert read_trace(writer.path, strict=True) == sent
