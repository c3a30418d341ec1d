"""Reading traces back (reference 7.6) and finding them on disk (7.1, for resume)."""

from __future__ import annotations

import logging
import os
import tracemalloc
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from penguin import protocol as om
from penguin.trace import (
    MalformedTraceError,
    TraceError,
    TraceLocation,
    TraceWriter,
    find_session,
    iter_trace,
    latest_session,
    read_trace,
    trace_file_name,
    trace_files,
    trace_locations,
)
from penguin.trace._reader import MalformedLines

from .support import record_bytes, texts

GOOD = [om.user_text(f"m{i}") for i in range(4)]
# Every way a line can fail to be an OmniMessage.
BAD = [
    b'{"timestamp":"2025-01-01T00:00:00.000Z","type":"model_msg","pay',  # cut short
    b"\xff\xfe not utf-8",
    b"[1, 2, 3]",
    b'{"timestamp":"t","type":"model_msg","payload":{"type":"no_such_payload"}}',
    b'{"timestamp":"t","type":"event_msg","payload":{"type":"abort","reason":NaN}}',
    b"null",
]


def write_lines(path: Path, lines: list[bytes], *, final_newline: bool = True) -> Path:
    path.write_bytes(b"\n".join(lines) + (b"\n" if final_newline else b""))
    return path


def line(message: om.OmniMessage[om.Payload]) -> bytes:
    return record_bytes(message).rstrip(b"\n")


@pytest.fixture
def warnings(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.WARNING, logger="penguin")
    return caplog


# ---- 7.6 -----------------------------------------------------------------------------------


def test_7_6_blank_lines_ignored(tmp_path: Path, warnings: pytest.LogCaptureFixture) -> None:
    path = write_lines(
        tmp_path / "t.jsonl",
        [b"", line(GOOD[0]), b"   ", b"\t\r", line(GOOD[1]), b"", b""],
    )
    assert read_trace(path) == GOOD[:2]
    assert read_trace(path, strict=True) == GOOD[:2]
    assert warnings.messages == []


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("final_newline", [False, True])
@pytest.mark.parametrize("strict", [False, True])
def test_7_6_malformed_last_line_ignored(
    tmp_path: Path,
    warnings: pytest.LogCaptureFixture,
    bad: bytes,
    final_newline: bool,
    strict: bool,
) -> None:
    path = write_lines(
        tmp_path / "t.jsonl",
        [line(GOOD[0]), line(GOOD[1]), bad, b"", b"  "],
        final_newline=final_newline,
    )
    assert read_trace(path, strict=strict) == GOOD[:2]
    assert warnings.messages == []


def test_7_6_malformed_middle_lines_reported(
    tmp_path: Path, warnings: pytest.LogCaptureFixture
) -> None:
    path = write_lines(
        tmp_path / "t.jsonl",
        [line(GOOD[0]), BAD[0], b"", line(GOOD[1]), BAD[1], BAD[2], line(GOOD[2]), BAD[3]],
    )
    assert read_trace(path) == GOOD[:3]
    assert warnings.messages == [f"[trace] skipped 3 malformed line(s) [2, 5, 6] in {path}"]
    assert [r.name for r in warnings.records] == ["penguin"]


@pytest.mark.parametrize("bad_lines", [20, 21, 57])
def test_7_6_report_lists_at_most_20_line_numbers(
    tmp_path: Path, warnings: pytest.LogCaptureFixture, bad_lines: int
) -> None:
    path = write_lines(tmp_path / "t.jsonl", [b"{"] * bad_lines + [line(GOOD[0])])
    assert read_trace(path) == GOOD[:1]
    numbers = ", ".join(str(n) for n in range(1, 21))
    more = ", …" if bad_lines > 20 else ""
    assert warnings.messages == [
        f"[trace] skipped {bad_lines} malformed line(s) [{numbers}{more}] in {path}"
    ]


def test_7_6_one_report_per_file(tmp_path: Path, warnings: pytest.LogCaptureFixture) -> None:
    first = write_lines(tmp_path / "a.jsonl", [b"x", line(GOOD[0])])
    second = write_lines(tmp_path / "b.jsonl", [line(GOOD[0]), b"y", b"z", line(GOOD[1])])
    read_trace(first)
    read_trace(second)
    assert warnings.messages == [
        f"[trace] skipped 1 malformed line(s) [1] in {first}",
        f"[trace] skipped 2 malformed line(s) [2, 3] in {second}",
    ]


def test_7_6_strict_mode_raises_on_a_middle_line(
    tmp_path: Path, warnings: pytest.LogCaptureFixture
) -> None:
    path = write_lines(tmp_path / "t.jsonl", [line(GOOD[0]), b"", b"{oops", line(GOOD[1])])
    with pytest.raises(MalformedTraceError) as caught:
        read_trace(path, strict=True)
    error = caught.value
    assert (error.path, error.line) == (str(path), 3)
    assert "malformed JSON" in error.reason
    assert str(error).startswith(f"{path}:3: not an OmniMessage (malformed JSON")
    assert isinstance(error, TraceError)
    assert isinstance(error, ValueError)
    assert warnings.messages == []

    # Lazily: the messages before the bad line come out before the error.
    stream = iter_trace(path, strict=True)
    assert next(stream) == GOOD[0]
    with pytest.raises(MalformedTraceError):
        next(stream)


def test_7_6_messages_of_every_kind_come_back(tmp_path: Path) -> None:
    messages: list[om.OmniMessage[om.Payload]] = [
        om.partial_text("delta", "x"),
        om.with_origin(om.user_text("child"), "c"),
        om.abort(),
    ]
    path = write_lines(tmp_path / "t.jsonl", [line(m) for m in messages])
    assert read_trace(path) == messages


def test_7_6_only_newline_ends_a_line(tmp_path: Path) -> None:
    message = om.user_text("a\rb\u2028c\u2029d\x85e\x0bf\x0cg")
    path = write_lines(tmp_path / "t.jsonl", [line(message)])
    assert b"\r" not in path.read_bytes()  # JSON escapes \r; U+2028 etc. stay raw
    assert read_trace(path) == [message]


def test_7_6_large_files_are_streamed(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    record = record_bytes(om.user_text("z" * 65_000))
    with path.open("wb") as file:
        for _ in range(256):  # ~16 MiB
            file.write(record)
    tracemalloc.start()
    try:
        count = sum(1 for _ in iter_trace(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 256
    assert peak < 2 * 1024 * 1024


def test_7_6_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_trace(tmp_path / "nope.jsonl")


def test_malformed_lines_report_is_none_when_clean() -> None:
    lines = MalformedLines()
    assert lines.report("p") is None
    for n in range(1, 31):
        lines.add(n)
    assert lines.count == 30
    assert lines.first == list(range(1, 21))


# ---- finding trace files ---------------------------------------------------------------------


def touch(path: Path, content: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def test_7_1_trace_files_across_date_dirs_in_index_order(tmp_path: Path) -> None:
    one = touch(tmp_path / "2025-01-01" / "s_001.jsonl")
    two = touch(tmp_path / "2025-01-02" / "s_002.jsonl")
    ten = touch(tmp_path / "2025-01-02" / "s_010.jsonl")
    big = touch(tmp_path / "2025-01-03" / "s_1000.jsonl")
    touch(tmp_path / "2025-01-01" / "other_001.jsonl")
    touch(tmp_path / "2025-01-01" / "s_01.jsonl")  # too few digits
    touch(tmp_path / "2025-01-01" / "s_000.jsonl")  # indices start at 1
    touch(tmp_path / "2025-01-01" / "s_001.jsonl.tmp")
    touch(tmp_path / "2025-01-01" / "notes.md")
    (tmp_path / "2025-01-01" / "s_004.jsonl").mkdir()  # a directory is no trace
    touch(tmp_path / "s_005.jsonl")  # not inside a date directory

    assert trace_files(tmp_path, "s") == [one, two, ten, big]
    assert find_session(tmp_path, "s") == TraceLocation(
        path=big, session_id="s", date_dir="2025-01-03", index=1000
    )
    assert find_session(tmp_path, "unknown") is None
    assert [loc.session_id for loc in trace_locations(tmp_path)] == ["other", "s", "s", "s", "s"]


def test_7_1_session_ids_with_underscores_and_digits(tmp_path: Path) -> None:
    path = touch(tmp_path / "d" / trace_file_name("a_001", 2))
    assert path.name == "a_001_002.jsonl"
    assert trace_locations(tmp_path) == [
        TraceLocation(path=path, session_id="a_001", date_dir="d", index=2)
    ]
    assert trace_files(tmp_path, "a") == []


_NAME_PARTS = st.sampled_from(["a", "a_1", "a_001", "b", "s_x", "_", ""])
_FILE_NAMES = st.builds(
    lambda sid, tail: sid + tail,
    _NAME_PARTS,
    st.sampled_from(["_001.jsonl", "_002.jsonl", "_1000.jsonl", "_01.jsonl", ".jsonl", "_001.txt"]),
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.lists(st.tuples(st.sampled_from(["d1", "d2"]), _FILE_NAMES), max_size=12),
    sessions=st.none() | st.sets(_NAME_PARTS),
    one=st.none() | _NAME_PARTS,
)
def test_7_1_a_scan_for_some_sessions_finds_what_the_whole_scan_finds_of_them(
    tmp_path: Path, files: list[tuple[str, str]], sessions: set[str] | None, one: str | None
) -> None:
    """``sessions=`` (which skips other names unparsed) changes nothing but the filter."""
    root = tmp_path / uuid.uuid4().hex
    root.mkdir()
    for date_dir, name in files:
        touch(root / date_dir / name)
    every = trace_locations(root)
    kept = [
        loc
        for loc in every
        if (sessions is None or loc.session_id in sessions) and one in (None, loc.session_id)
    ]
    assert trace_locations(root, one, sessions=sessions) == kept


def test_7_1_no_traces_dir_means_no_traces(tmp_path: Path) -> None:
    assert trace_files(tmp_path / "missing", "s") == []
    assert find_session(tmp_path / "missing", "s") is None
    assert latest_session(tmp_path / "missing") is None
    not_a_dir = touch(tmp_path / "file")
    assert trace_locations(not_a_dir) == []


def test_latest_session_is_the_one_written_last(tmp_path: Path) -> None:
    old = touch(tmp_path / "2025-01-01" / "zzz_001.jsonl")
    new_first = touch(tmp_path / "2025-01-01" / "aaa_001.jsonl")
    new_second = touch(tmp_path / "2025-01-02" / "aaa_002.jsonl")
    os.utime(old, ns=(3_000_000_000, 3_000_000_000))
    os.utime(new_first, ns=(5_000_000_000, 5_000_000_000))
    os.utime(new_second, ns=(1_000_000_000, 1_000_000_000))
    latest = latest_session(tmp_path)
    assert latest is not None
    assert (latest.session_id, latest.index, latest.path) == ("aaa", 2, new_second)


async def test_found_location_resumes_the_same_file(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, "s", date_dir="2025-01-01")
    await writer.append(om.user_text("one"))
    await writer.rotate()
    await writer.append(om.user_text("two"))

    found = find_session(tmp_path, "s")
    assert found is not None
    resumed = TraceWriter(
        tmp_path, found.session_id, start_index=found.index, date_dir=found.date_dir
    )
    assert resumed.path == writer.path == found.path
    await resumed.append(om.user_text("three"))
    assert [texts(read_trace(p)) for p in trace_files(tmp_path, "s")] == [
        ["one"],
        ["two", "three"],
    ]


def test_trace_file_name_refuses_bad_indices() -> None:
    for index in (0, -1, True, 1.0):
        with pytest.raises(ValueError, match="trace index"):
            trace_file_name("s", index)  # type: ignore[arg-type]
