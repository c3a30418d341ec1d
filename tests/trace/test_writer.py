"""TraceWriter: reference 7.1–7.5, on real files."""

from __future__ import annotations

import datetime
import errno
import functools
import logging
import os
import random
import stat
from pathlib import Path

import attrs
import pytest
import trio

from penguin import protocol as om
from penguin.trace import (
    DIR_MODE,
    FILE_MODE,
    TraceAppendError,
    TraceError,
    TraceWriteError,
    TraceWriter,
    is_recordable,
    read_trace,
)
from penguin.trace._writer import AppendProgress, encode_record, write_record

from .support import (
    SESSION_ID,
    Outcome,
    current_umask,
    lines_of,
    meta,
    record_bytes,
    submit,
    texts,
)

# ---- 7.1: file name and index ------------------------------------------------------------


async def test_7_1_file_name_and_index(tmp_path: Path) -> None:
    traces = tmp_path / "agent" / "traces"
    before = datetime.date.today().isoformat()
    writer = TraceWriter(traces, SESSION_ID)
    after = datetime.date.today().isoformat()

    assert writer.date_dir in (before, after)
    assert writer.index == 1
    assert writer.path == traces / writer.date_dir / f"{SESSION_ID}_001.jsonl"
    assert not traces.exists()  # nothing touches the disk before the first append

    message = meta()
    assert await writer.append(message) is True
    assert writer.path.read_bytes() == record_bytes(message)


async def test_7_1_resumed_index_and_date_dir(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, "s", start_index=7, date_dir="2024-12-31")
    assert writer.path == tmp_path / "2024-12-31" / "s_007.jsonl"
    assert (writer.traces_dir, writer.session_id, writer.date_dir) == (tmp_path, "s", "2024-12-31")
    await writer.append(om.user_text("hi"))
    assert (tmp_path / "2024-12-31" / "s_007.jsonl").is_file()

    wide = TraceWriter(tmp_path, "s", start_index=1000, date_dir="d")
    assert wide.path.name == "s_1000.jsonl"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"session_id": ""},
        {"session_id": "a/b"},
        {"session_id": ".."},
        {"session_id": "."},
        {"session_id": "nul\0"},
        {"date_dir": "2025/01/01"},
        {"date_dir": ""},
        {"start_index": 0},
        {"start_index": -3},
        {"start_index": True},
    ],
)
def test_7_1_invalid_arguments_are_refused(tmp_path: Path, kwargs: dict[str, object]) -> None:
    arguments: dict[str, object] = {"session_id": "s", "start_index": 1, "date_dir": None}
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=r"session_id|date_dir|index"):
        TraceWriter(
            tmp_path,
            str(arguments["session_id"]),
            start_index=arguments["start_index"],  # type: ignore[arg-type]
            date_dir=arguments["date_dir"],  # type: ignore[arg-type]
        )


async def test_7_1_files_are_private(tmp_path: Path) -> None:
    traces = tmp_path / "deep" / "traces"
    writer = TraceWriter(traces, "s", date_dir="2025-01-01")
    await writer.append(om.user_text("secret"))
    mask = current_umask()
    assert stat.S_IMODE(writer.path.stat().st_mode) == FILE_MODE & ~mask
    assert stat.S_IMODE(writer.path.parent.stat().st_mode) == DIR_MODE & ~mask
    assert stat.S_IMODE(traces.stat().st_mode) == DIR_MODE & ~mask
    # An existing file keeps the mode its owner gave it.
    other = TraceWriter(traces, "t", date_dir="2025-01-01")
    other.path.write_bytes(b"")
    other.path.chmod(0o644)
    await other.append(om.user_text("x"))
    assert stat.S_IMODE(other.path.stat().st_mode) == 0o644


# ---- 7.2: what is recorded ---------------------------------------------------------------


def _recordables() -> list[om.OmniMessage[om.Payload]]:
    return [
        meta(),
        om.tool_list_ready([om.ToolDefinition(name="t", description="d")]),
        om.user_text("hello"),
        om.thinking("hmm"),
        om.assistant_text("hi there"),
        om.tool_call("exec_command", {"cmd": "ls"}, "call_1"),
        om.approval_decision("allow", "call_1"),
        om.tool_call_output("out", "call_1"),
        om.subagent("child-session"),
        om.token_usage(om.TokenCounts(total=3), om.TokenCounts(total=3)),
        om.abort(),
    ]


def _skipped() -> list[om.OmniMessage[om.Payload]]:
    return [
        om.partial_text("start"),
        om.partial_text("delta", "he"),
        om.partial_text("stop"),
        om.partial_thinking("delta", "hm"),
        om.partial_tool_call("delta", "exec_command", "call_1", '{"cmd"'),
        om.partial_tool_call_output("delta", "o", "call_1"),
        om.with_origin(meta("child"), "child"),
        om.with_origin(om.user_text("from a child"), "child"),
        om.with_origin(om.tool_call_output("x", "c"), "child"),
        om.with_origin(om.with_origin(om.abort(), "grandchild"), "child"),
    ]


async def test_7_2_partials_and_origin_skipped(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, "s")
    recordables, skipped = _recordables(), _skipped()
    interleaved = [m for pair in zip(skipped, recordables, strict=False) for m in pair]
    interleaved += recordables[len(skipped) :]

    results = [await writer.append(m) for m in interleaved]

    assert results == [is_recordable(m) for m in interleaved]
    assert all(TraceWriter.recordable(m) for m in recordables)
    assert not any(writer.recordable(m) for m in skipped)
    assert read_trace(writer.path) == recordables
    assert writer.path.read_bytes() == b"".join(record_bytes(m) for m in recordables)


async def test_7_2_only_skipped_messages_create_nothing(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path / "traces", "s")
    for message in _skipped():
        assert await writer.append(message) is False
        assert await writer.record(message) is False
    assert not (tmp_path / "traces").exists()


def test_7_2_empty_origin_is_this_session() -> None:
    message = om.OmniMessage(
        timestamp=om.now_iso(),
        type="model_msg",
        payload=om.TextPayload(role="user", text="x", stop_reason="completed"),
        origin=(),
    )
    assert is_recordable(message)


# ---- 7.3: one write per record -------------------------------------------------------------


def test_7_3_one_write_per_record() -> None:
    record = b"x" * (8 * 1024 * 1024) + b"\n"
    calls: list[int] = []

    def write(view: memoryview) -> int:
        calls.append(len(view))
        return len(view)

    progress = AppendProgress()
    write_record(write, record, progress, "t.jsonl")
    assert calls == [len(record)]
    assert progress.written == len(record)


def test_7_3_short_write_continues_where_it_stopped() -> None:
    record = b'{"a":1}\n'
    landed = bytearray()

    def write(view: memoryview) -> int:
        landed.extend(view[:3])
        return min(3, len(view))

    write_record(write, record, AppendProgress(), "t.jsonl")
    assert bytes(landed) == record


def test_7_3_zero_progress_write_fails() -> None:
    record = b"0123456789\n"
    answers = iter([5, 0])
    progress = AppendProgress()
    with pytest.raises(TraceAppendError) as caught:
        write_record(lambda view: next(answers), record, progress, "/t/s_001.jsonl")
    error = caught.value
    assert str(error) == "Trace append made no progress at byte 5 of 11"
    assert (error.path, error.written, error.total) == ("/t/s_001.jsonl", 5, 11)
    assert isinstance(error, OSError)
    assert isinstance(error, TraceError)
    assert progress.written == 5

    with pytest.raises(TraceAppendError, match=r"^Trace append made no progress at byte 0 of 11$"):
        write_record(lambda view: 0, record, AppendProgress(), "x")


async def test_7_3_record_is_compact_json_and_a_newline(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, "s")
    messages: list[om.OmniMessage[om.Payload]] = [
        meta(),
        om.user_text("ünïcode ✓ 🐧\n\u2028 and \r too"),
        om.abort("why"),
    ]
    for message in messages:
        await writer.append(message)
    data = writer.path.read_bytes()
    assert data == b"".join(record_bytes(m) for m in messages)
    assert data.count(b"\n") == len(messages)
    assert b", " not in data.split(b"\n")[0]  # compact separators
    assert read_trace(writer.path) == messages


async def test_7_3_lone_surrogates_stay_valid_utf8(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, "s")
    message = om.user_text("a\udc80b\ud83d")
    assert encode_record(message).endswith(b'"a\\udc80b\\ud83d","stop_reason":"completed"}}\n')
    await writer.append(message)
    writer.path.read_bytes().decode("utf-8")  # strict: valid UTF-8
    assert read_trace(writer.path) == [message]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
async def test_7_3_descriptor_is_closed_and_outside_appends_are_kept(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, "s")
    first, second = om.user_text("first"), om.user_text("second")
    await writer.append(first)
    with writer.path.open("ab") as outside:  # someone else appends a line between records
        outside.write(record_bytes(om.user_text("outside")))
    await writer.append(second)

    assert texts(read_trace(writer.path)) == ["first", "outside", "second"]
    open_paths = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            open_paths.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    assert str(writer.path) not in open_paths


async def test_7_3_unencodable_message_fails_only_its_call(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, "s")
    bad = om.assistant_text("x", fidelity={"score": float("nan")})
    with pytest.raises(ValueError, match="JSON"):
        await writer.append(bad)
    await writer.append(om.user_text("fine"))
    assert texts(read_trace(writer.path)) == ["fine"]


# ---- 7.4: order, torn tails, failures ----------------------------------------------------------


async def test_7_4_serialized_in_submission_order(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, "s")
    submitted: list[str] = []
    rng = random.Random(7)
    big = "b" * (512 * 1024)

    async def append_one(text: str, *, task_status: trio.TaskStatus[None]) -> None:
        task_status.started()
        submitted.append(text)  # no checkpoint between this and joining the queue
        await writer.append(om.user_text(text))

    async def producer(name: str, count: int, nursery: trio.Nursery) -> None:
        for i in range(count):
            for _ in range(rng.randrange(4)):
                await trio.lowlevel.checkpoint()
            text = f"{name}-{i}" + (big if rng.random() < 0.1 else "")
            if rng.random() < 0.5:
                await nursery.start(append_one, text)  # submit and move on
            else:
                submitted.append(text)
                await writer.append(om.user_text(text))  # submit and wait

    with trio.fail_after(60):
        async with trio.open_nursery() as writes, trio.open_nursery() as producers:
            for p in range(6):
                producers.start_soon(producer, f"p{p}", 40, writes)

    assert len(submitted) == 240
    assert texts(read_trace(writer.path)) == submitted
    assert lines_of(writer.path)[-1] == b""


async def test_7_4_cancelled_before_its_turn_writes_nothing(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, "s")
    with trio.CancelScope() as scope:
        scope.cancel()
        await writer.append(om.user_text("never"))
    assert scope.cancelled_caught
    await writer.append(om.user_text("later"))
    assert texts(read_trace(writer.path)) == ["later"]


async def test_7_4_torn_tail_gets_a_leading_newline(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old = om.user_text("before the crash")
    torn = record_bytes(om.user_text("cut short"))[:25]
    path = tmp_path / "2025-01-01" / "s_003.jsonl"
    path.parent.mkdir()
    path.write_bytes(record_bytes(old) + torn)

    writer = TraceWriter(tmp_path, "s", start_index=3, date_dir="2025-01-01")
    assert writer.path == path
    first, second = om.user_text("resumed 1"), om.user_text("resumed 2")
    await writer.append(first)
    await writer.append(second)

    assert path.read_bytes() == (
        record_bytes(old) + torn + b"\n" + record_bytes(first) + record_bytes(second)
    )
    with caplog.at_level(logging.WARNING, logger="penguin"):
        assert read_trace(path) == [old, first, second]
    assert caplog.messages == [f"[trace] skipped 1 malformed line(s) [2] in {path}"]


@pytest.mark.parametrize("existing", [None, b"", b'{"not": "checked"}\n'])
async def test_7_4_clean_files_get_no_leading_newline(
    tmp_path: Path, existing: bytes | None
) -> None:
    writer = TraceWriter(tmp_path, "s", date_dir="d")
    if existing is not None:
        writer.path.parent.mkdir()
        writer.path.write_bytes(existing)
    message = om.user_text("x")
    await writer.append(message)
    assert writer.path.read_bytes() == (existing or b"") + record_bytes(message)


async def test_7_4_probe_happens_once_per_index(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, "s", date_dir="d")
    await writer.append(om.user_text("one"))
    with writer.path.open("ab") as outside:
        outside.write(b"{torn by someone else")
    await writer.append(om.user_text("two"))
    # The writer trusts its own bookkeeping after the first probe: no second probe, no heal.
    assert lines_of(writer.path)[1].startswith(b"{torn by someone else{")

    # A new index is probed again.
    second = tmp_path / "d" / "s_002.jsonl"
    second.write_bytes(b'{"torn')
    await writer.rotate()
    await writer.append(om.user_text("three"))
    assert second.read_bytes() == b'{"torn\n' + record_bytes(read_trace(second)[0])


async def test_7_4_failed_write_does_not_block_later_ones(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, "s", date_dir="d")
    (tmp_path / "d" / "s_002.jsonl").mkdir(parents=True)  # index 2 cannot be a file
    big = om.user_text("big " + "x" * (16 * 1024 * 1024))  # keeps the queue behind it busy

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            first = await submit(nursery, functools.partial(writer.append, big))
            await submit(nursery, writer.rotate)
            a = await submit(nursery, functools.partial(writer.append, om.user_text("a")))
            rotation = await submit(nursery, writer.rotate)
            b = await submit(nursery, functools.partial(writer.append, om.user_text("b")))
            c = await submit(nursery, functools.partial(writer.append, om.user_text("c")))

    assert first.value is True
    assert isinstance(a.error, IsADirectoryError)
    assert rotation.value == tmp_path / "d" / "s_003.jsonl"
    assert (b.error, b.value, c.error, c.value) == (None, True, None, True)
    assert texts(read_trace(tmp_path / "d" / "s_003.jsonl")) == ["b", "c"]


async def test_7_4_failed_probe_is_retried_by_the_next_append(tmp_path: Path) -> None:
    obstacle = tmp_path / "d"
    obstacle.write_text("a regular file where the date directory goes")
    writer = TraceWriter(tmp_path, "s", date_dir="d")

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            outcomes: list[Outcome[bool]] = [
                await submit(nursery, functools.partial(writer.append, om.user_text(str(i))))
                for i in range(3)
            ]
    assert all(isinstance(o.error, NotADirectoryError) for o in outcomes)

    obstacle.unlink()
    obstacle.mkdir()
    (obstacle / "s_001.jsonl").write_bytes(b'{"torn')  # the retried probe must see this
    message = om.user_text("after the fix")
    assert await writer.append(message) is True
    assert writer.path.read_bytes() == b'{"torn\n' + record_bytes(message)


# ---- 7.3/7.4 for a burst: record_many, the trace recorder's path ---------------------------


def _open_paths() -> set[str]:
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
async def test_7_3_a_burst_lands_in_order_and_closes_its_descriptor(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, "s")
    first = [om.user_text(f"a{n}") for n in range(5)]
    assert await writer.record_many([*first, om.partial_text("delta", "skipped")]) == 5
    assert str(writer.path) not in _open_paths()
    with writer.path.open("ab") as outside:  # someone else appends between two bursts
        outside.write(record_bytes(om.user_text("outside")))
    assert await writer.record_many([om.user_text("b0"), om.user_text("b1")]) == 2

    records = read_trace(writer.path)
    assert texts(records) == ["a0", "a1", "a2", "a3", "a4", "outside", "b0", "b1"]
    assert writer.path.read_bytes() == b"".join(record_bytes(m) for m in records)
    assert str(writer.path) not in _open_paths()


async def test_7_4_a_record_that_fails_in_a_burst_fails_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = TraceWriter(tmp_path, "s", date_dir="d")
    bad = om.assistant_text("x", fidelity={"v": float("nan")})
    with caplog.at_level(logging.WARNING, logger="penguin"):
        landed = await writer.record_many([om.user_text("a"), bad, om.user_text("b")])
    assert landed == 2
    (message,) = caplog.messages  # 3.12 and later add the value (": nan") to json's words
    assert message.startswith(
        "[trace] write failed: Out of range float values are not JSON compliant"
    )
    assert texts(read_trace(writer.path)) == ["a", "b"]


async def test_7_4_a_file_that_cannot_be_opened_fails_each_record_of_the_burst(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = TraceWriter(tmp_path, "s", date_dir="d")
    writer.path.mkdir(parents=True)  # the trace file cannot be a file
    with caplog.at_level(logging.WARNING, logger="penguin"):
        assert await writer.record_many([om.user_text("a"), om.user_text("b")]) == 0
    assert len(caplog.messages) == 2
    assert all(
        m.startswith("[trace] write failed: [Errno 21] Is a directory") for m in caplog.messages
    )

    writer.path.rmdir()
    assert await writer.record_many([om.user_text("c")]) == 1  # the next burst opens again
    assert texts(read_trace(writer.path)) == ["c"]


# ---- 7.5: rotation and the engine's safe calls -------------------------------------------


async def test_7_5_rotate(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, "s", date_dir="d")
    await writer.append(meta())
    assert await writer.rotate() == tmp_path / "d" / "s_002.jsonl"
    assert writer.index == 2
    assert writer.path == tmp_path / "d" / "s_002.jsonl"
    assert not writer.path.exists()  # rotation itself writes nothing

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            before = await submit(nursery, functools.partial(writer.append, om.user_text("b2")))
            third = await submit(nursery, writer.rotate)
            after = await submit(nursery, functools.partial(writer.append, om.user_text("c3")))
    assert (before.value, third.value, after.value) == (True, tmp_path / "d" / "s_003.jsonl", True)

    assert [m.type for m in read_trace(tmp_path / "d" / "s_001.jsonl")] == ["session_meta"]
    assert texts(read_trace(tmp_path / "d" / "s_002.jsonl")) == ["b2"]
    assert texts(read_trace(tmp_path / "d" / "s_003.jsonl")) == ["c3"]
    assert await writer.try_rotate() == tmp_path / "d" / "s_004.jsonl"


async def test_7_5_record_logs_and_never_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    writer = TraceWriter(blocker / "traces", "s", date_dir="d")

    with caplog.at_level(logging.WARNING, logger="penguin"):
        assert await writer.record(om.user_text("lost")) is False
        assert await writer.record(om.assistant_text("x", fidelity={"v": float("inf")})) is False
    assert [r.name for r in caplog.records] == ["penguin", "penguin"]
    assert caplog.messages[0].startswith("[trace] write failed: [Errno ")
    assert str(blocker) in caplog.messages[0]
    assert caplog.messages[1].startswith("[trace] write failed: Out of range float values")

    blocker.unlink()
    caplog.clear()
    assert await writer.record(om.user_text("kept")) is True
    assert caplog.messages == []
    assert texts(read_trace(writer.path)) == ["kept"]

    with trio.CancelScope() as scope:  # cancellation is not swallowed
        scope.cancel()
        await writer.record(om.user_text("cancelled"))
    assert scope.cancelled_caught


async def test_7_5_try_rotate_logs_and_never_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = TraceWriter(tmp_path, "s")

    async def broken_rotate(self: TraceWriter) -> Path:
        raise OSError("disk on fire")

    monkeypatch.setattr(TraceWriter, "rotate", broken_rotate)
    with caplog.at_level(logging.WARNING, logger="penguin"):
        assert await writer.try_rotate() is None
    assert caplog.messages == ["[trace] rotate failed: disk on fire"]


def test_repr_names_the_file(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, "s", date_dir="d")
    assert repr(writer) == f"TraceWriter({str(tmp_path / 'd' / 's_001.jsonl')!r})"


# ---- issue 21.4: a refused record is a fault a caller can see ----------------------------


def _failure(writer: TraceWriter) -> TraceWriteError | None:
    return writer.failure


async def test_21_4_a_refused_record_sets_failure_and_wakes_its_waiter(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, "s", date_dir="d")
    writer.path.mkdir(parents=True)  # the disk refuses: the trace file cannot be a file
    assert _failure(writer) is None
    failures: list[TraceWriteError] = []

    async def wait() -> None:
        failures.append(await writer.wait_failure())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        assert await writer.record_many([om.user_text("a")]) == 0
    assert writer.failure is not None
    assert failures == [writer.failure]
    assert str(writer.failure) == "trace write failed: Is a directory"
    assert isinstance(writer.failure, OSError)
    assert isinstance(writer.failure, TraceError)
    assert writer.failure.errno == errno.EISDIR
    assert writer.failure.path == str(writer.path)


async def test_21_4_a_refused_record_sets_the_events_given_without_a_waiting_task(
    tmp_path: Path,
) -> None:
    writer = TraceWriter(tmp_path, "s", date_dir="d")
    before, after = trio.Event(), trio.Event()
    writer.set_on_failure(before)
    assert await writer.record_many([om.user_text("a")]) == 1  # written: nothing set
    assert not before.is_set()
    writer.path.unlink()
    writer.path.mkdir()  # from now on the disk refuses
    assert await writer.record_many([om.user_text("b")]) == 0
    assert before.is_set()
    writer.set_on_failure(after)  # given once the failure is known: set at once
    assert after.is_set()


async def test_21_4_an_unencodable_message_is_no_disk_failure(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, "s", date_dir="d")
    assert await writer.record(om.assistant_text("x", fidelity={"v": float("nan")})) is False
    assert writer.failure is None


async def test_21_4_append_keeps_the_first_failure_and_still_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    writer = TraceWriter(blocker / "traces", "s", date_dir="d")
    with pytest.raises(OSError, match="File exists") as raised:
        await writer.append(om.user_text("lost"))
    first = writer.failure
    assert first is not None
    assert str(first) == "trace write failed: File exists"
    assert first.__cause__ is raised.value
    with pytest.raises(OSError, match="File exists"):
        await writer.append(om.user_text("lost too"))
    assert writer.failure is first


def _plain_record(message: om.OmniMessage[om.Payload]) -> bytes:
    return (om.dumps(message) + "\n").encode("utf-8", "backslashreplace")


def test_20_1_a_tool_list_record_is_the_bytes_of_one_plain_encoding() -> None:
    """tool_list_ready splices in its tool list's kept JSON: the bytes must not change."""
    odd = om.ToolDefinition(
        name="odd",
        description='quotes " and \\ and \0, é ✓, a lone \udc80 surrogate, </script>',
        parameters={"type": "object", "properties": {"x": {"type": "string", "enum": ["é"]}}},
    )
    plain = om.ToolDefinition(name="plain", description="Nothing.")
    lists = [(odd, plain), (odd, plain), (plain,), (odd,), (odd, plain), ()]
    for tools in lists:
        message = om.tool_list_ready(tools)
        assert encode_record(message) == _plain_record(message)
    # an equal list of other objects, and a record with an origin, come out the same
    copy = tuple(om.ToolDefinition(name=t.name, description=t.description) for t in lists[2])
    copied = om.tool_list_ready(copy)  # one message: two would differ by their timestamps
    assert encode_record(copied) == _plain_record(copied)
    tagged = attrs.evolve(om.tool_list_ready(lists[0]), origin=("child",))
    assert encode_record(tagged) == _plain_record(tagged)
