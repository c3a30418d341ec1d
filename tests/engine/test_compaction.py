"""Compaction: triggers (context, turns, manual), modes (summarize, discard), trace rotation.

A completed compaction opens a new model context whose first input is a
``[context_summary]`` user text, and a new trace file (``_002``) that starts with
``session_meta`` and the tool list. A failed one keeps the old context and file.
"""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from penguin import protocol as om
from penguin.engine import DEFAULT_COMPACTION_PROMPT, CompactionSettings, Ledger
from penguin.llm import ScriptedLLM, error, pause, text, thinking, tool_call, turn, usage
from penguin.trace import read_trace

from .support import Message, allow_all, kind, open_harness, run_task, texts


def summary_text(body: str) -> str:
    return f"[context_summary]\n{body}\n[/context_summary]"


def events(messages: list[Message], payload_type: type[object]) -> list[object]:
    return [m.payload for m in messages if isinstance(m.payload, payload_type)]


async def test_compaction_by_context_opens_a_new_context_with_the_summary(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    settings = CompactionSettings(max_context_length=100)
    llm = ScriptedLLM(
        [
            turn(tool_call("probe", {"text": "42"}, "c1"), usage(total=150)),
            turn(thinking("condensing"), text("[summary]found 42[/summary]"), usage(total=30)),
            "the answer is 42",
        ]
    )
    async with open_harness(tmp_path, llm, compaction=settings) as h:
        first_file = h.writer.path
        seen, result = await run_task(h.engine, "find it", approve=allow_all)
        records = await h.trace()
        second_file = h.writer.path
        old = await trio.to_thread.run_sync(read_trace, first_file)
    assert result.status == "completed"
    assert result.turns == 2
    begin, end = events(seen, om.CompactionBeginPayload), events(seen, om.CompactionEndPayload)
    assert begin == [
        om.CompactionBeginPayload(reason="context", mode="summarize", context=150, turns=1)
    ]
    assert end == [
        om.CompactionEndPayload(reason="context", mode="summarize", status="completed", attempt=1)
    ]
    # The summary request: the old context plus the pending outputs, then the prompt.
    summary_request = llm.requests[1]
    assert summary_request.tools == h.engine.tools
    assert texts(summary_request.messages[-1:]) == [DEFAULT_COMPACTION_PROMPT]
    assert [m.payload.type for m in summary_request.messages] == [
        "text",
        "tool_call",
        "tool_call_output",
        "text",
    ]
    # The new context starts with the extracted summary.
    assert texts(llm.requests[2].messages) == [summary_text("found 42")]
    assert llm.requests[2].messages[0].payload.sender == "harness"  # type: ignore[union-attr]
    # Its fragments are streamed; its complete messages are trace-only records.
    assert "partial_text:delta" in [kind(m) for m in seen]
    assert "[summary]found 42[/summary]" not in texts(seen)
    assert "[summary]found 42[/summary]" in texts(old)
    # The trace rotated: the new file starts with session_meta and the tool list.
    assert first_file.name.endswith("_001.jsonl")
    assert second_file.name.endswith("_002.jsonl")
    assert [kind(m) for m in records[:5]] == [
        "session_meta",
        "tool_list_ready",
        "compaction_end:completed",
        "token_usage",
        "text",
    ]
    assert om.to_dict(records[0]) == om.to_dict(old[0])
    assert [kind(m) for m in old[-3:]] == ["text", "token_usage", "request_end:completed"]
    assert kind(old[-4]) == "thinking"
    # The session's token counters carry over into the new file.
    head = records[3].payload
    assert isinstance(head, om.TokenUsagePayload)
    assert head.session == om.TokenCounts(total=180)
    assert head.request == om.TokenCounts()


async def test_compaction_by_turns_counts_the_turns_of_the_context(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    settings = CompactionSettings(max_session_turns=2)
    llm = ScriptedLLM(
        [
            turn(tool_call("probe", {})),
            turn(tool_call("probe", {})),
            "[summary]two probes done[/summary]",
            turn(tool_call("probe", {})),
            "finished",
        ]
    )
    async with open_harness(tmp_path, llm, compaction=settings) as h:
        seen, result = await run_task(h.engine, "go", approve=allow_all)
        assert h.engine.ledger.turns == 2  # counted again from the new context
    assert result.status == "completed"
    assert result.turns == 4
    (begin,) = events(seen, om.CompactionBeginPayload)
    assert begin == om.CompactionBeginPayload(reason="turns", mode="summarize", context=0, turns=2)
    assert texts(llm.requests[3].messages) == [summary_text("two probes done")]


REFUSED = "cannot connect to http://127.0.0.1:9/v1 (Connection refused)"


async def test_18_3_a_summary_request_that_finds_the_model_unreachable_says_so(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # The run ends as a turn's request would have ended it: the server's failure (a
    # batch stops on it), not the task's.
    settings = CompactionSettings(max_context_length=100)
    down = turn(error("timeout", REFUSED, unreachable=True))
    llm = ScriptedLLM([turn(tool_call("probe", {}, "c1"), usage(total=500)), *([down] * 3)])
    async with open_harness(tmp_path, llm, compaction=settings) as h:
        seen, result = await run_task(h.engine, "go", approve=allow_all)
        assert h.engine.ledger.awaiting == ["c1"]
    assert (result.status, result.error_message, result.turns) == ("timeout", REFUSED, 1)
    assert result.unreachable
    (end,) = events(seen, om.CompactionEndPayload)
    assert isinstance(end, om.CompactionEndPayload)
    assert (end.status, end.attempt) == ("timeout", 3)  # tried twice more, as a turn is
    (tmp_path / "manual" / "workspace").mkdir(parents=True)
    async with (
        open_harness(tmp_path / "manual", ScriptedLLM([down] * 3)) as h,
        h.engine.compact() as stream,
    ):
        [message async for message in stream]
    assert (stream.result.status, stream.result.unreachable) == ("timeout", True)


async def test_manual_compaction_between_runs(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM(["first answer", "Sure. [summary]asked once[/summary] Done.", "second"])
    async with open_harness(tmp_path, llm) as h:
        await run_task(h.engine, "first question")
        async with h.engine.compact() as stream:
            seen = [message async for message in stream]
        await run_task(h.engine, "second question")
        await h.recorder.flush()
        assert h.writer.path.name.endswith("_002.jsonl")
    assert stream.result.status == "completed"
    assert [kind(m) for m in seen if not om.is_partial(m)] == [
        "compaction_begin",
        "token_usage",
        "compaction_end:completed",
        "text",
    ]
    (begin,) = events(seen, om.CompactionBeginPayload)
    assert begin == om.CompactionBeginPayload(reason="manual", mode="summarize", context=0, turns=1)
    assert texts(llm.requests[1].messages) == [
        "first question",
        "first answer",
        DEFAULT_COMPACTION_PROMPT,
    ]
    assert texts(llm.requests[2].messages) == [summary_text("asked once"), "second question"]


async def test_discard_mode_keeps_the_last_results_as_text_and_asks_no_model(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    settings = CompactionSettings(max_session_turns=1, mode="discard")
    llm = ScriptedLLM([turn(tool_call("probe", {"text": "result"}, "c1")), "carrying on"])
    async with open_harness(tmp_path, llm, compaction=settings) as h:
        seen, result = await run_task(h.engine, "go", approve=allow_all)
    assert result.status == "completed"
    assert len(llm.requests) == 2
    (end,) = events(seen, om.CompactionEndPayload)
    assert end == om.CompactionEndPayload(
        reason="turns", mode="discard", status="completed", attempt=1
    )
    (first,) = texts(llm.requests[1].messages)
    assert first.startswith("[context_summary]\nThe earlier conversation was discarded")
    assert first.endswith(
        '  [tool_call name="probe" id="c1"]{"text":"result"}[/tool_call]\n'
        '  [tool_call_output id="c1" status="completed"]result[/tool_call_output]\n'
        "[/context_summary]"
    )


async def test_a_failed_compaction_keeps_the_old_context_and_ends_the_run(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    settings = CompactionSettings(max_context_length=100)
    unusable = turn(text("[summary][/summary]"))
    llm = ScriptedLLM(
        [turn(tool_call("probe", {}, "c1"), usage(total=500)), *([unusable] * 6)],
        fallback="[summary]at last[/summary]",
    )
    async with open_harness(tmp_path, llm, compaction=settings) as h:
        start = trio.current_time()
        seen, result = await run_task(h.engine, "go", approve=allow_all)
        elapsed = trio.current_time() - start
        history = list(h.engine.ledger.history)
        assert h.engine.ledger.awaiting == ["c1"]
        assert h.writer.path.name.endswith("_001.jsonl")
        records = await h.trace()
    assert (result.status, result.error_message) == ("failed", "the reply was not a usable summary")
    assert result.turns == 1
    assert elapsed == 60  # the summary request retries on the same ladder
    (end,) = events(seen, om.CompactionEndPayload)
    assert end == om.CompactionEndPayload(
        reason="context",
        mode="summarize",
        status="failed",
        attempt=6,
        error_message="the reply was not a usable summary",
    )
    assert kind(seen[-1]) == "compaction_end:failed"
    assert len(llm.requests) == 7
    assert [kind(m) for m in history] == ["text", "tool_call"]
    assert sum(kind(m) == "session_meta" for m in records) == 1


async def test_compaction_is_retried_by_the_next_run_before_its_new_input(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    settings = CompactionSettings(max_context_length=100)
    llm = ScriptedLLM(
        [
            turn(text("long answer"), usage(total=500)),
            turn(error("auth", "key revoked")),
            "[summary]a long answer was given[/summary]",
            "short answer",
        ]
    )
    async with open_harness(tmp_path, llm, compaction=settings) as h:
        _, first = await run_task(h.engine, "q1")
        _, second = await run_task(h.engine, "q2")
        assert second.status == "auth"
        assert texts(h.engine.ledger.pending) == ["q2"]
        _, third = await run_task(h.engine, "q3")
    assert (first.status, third.status) == ("completed", "completed")
    # The summary requests never see the new input; the new context gets it verbatim.
    assert "q2" not in texts(llm.requests[1].messages)
    assert texts(llm.requests[2].messages) == ["q1", "long answer", "q2", DEFAULT_COMPACTION_PROMPT]
    assert texts(llm.requests[3].messages) == [summary_text("a long answer was given"), "q3"]


async def test_an_interrupt_during_the_summary_request_keeps_the_context(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    settings = CompactionSettings(max_session_turns=1)
    llm = ScriptedLLM(
        [turn(tool_call("probe", {}, "c1")), turn(text("[summary]"), pause(10), text("x"))]
    )
    interrupt = trio.Event()
    async with open_harness(tmp_path, llm, compaction=settings) as h:
        async with h.engine.run([om.user_text("go")], approve=allow_all, interrupt=interrupt) as s:
            seen = []
            async for message in s:
                seen.append(message)
                if kind(message) == "partial_text:delta":
                    interrupt.set()
        assert s.result.status == "aborted"
        assert [kind(m) for m in seen[-2:]] == ["compaction_end:aborted", "abort"]
        assert h.engine.ledger.turns == 1
        assert [kind(m) for m in h.engine.ledger.carry_over()] == ["tool_call_output"]
        assert h.writer.path.name.endswith("_001.jsonl")


async def test_a_hard_stop_during_compaction_leaves_the_ledger_usable(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM(["first", turn(pause(10), text("[summary]s[/summary]")), "after"])
    async with open_harness(tmp_path, llm) as h:
        await run_task(h.engine, "one")
        async with h.engine.compact() as stream:
            await stream.receive()  # compaction_begin
        records = await h.trace()
        assert [kind(m) for m in records[-2:]] == ["request_begin", "compaction_end:aborted"]
        _, result = await run_task(h.engine, "two")
    assert result.status == "completed"
    assert texts(llm.requests[-1].messages) == ["one", "first", "two"]


async def test_steering_sent_during_a_compaction_reaches_the_new_context(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    settings = CompactionSettings(max_session_turns=1)
    llm = ScriptedLLM(
        [turn(tool_call("probe", {})), turn(pause(1), text("[summary]s[/summary]")), "ok"]
    )
    async with (
        open_harness(tmp_path, llm, compaction=settings) as h,
        h.engine.run([om.user_text("go")], approve=allow_all) as stream,
    ):
        async for message in stream:
            if kind(message) == "compaction_begin":
                assert h.engine.steer([om.user_text("mind the tests")])
    assert texts(llm.requests[1].messages)[-1] == DEFAULT_COMPACTION_PROMPT
    assert texts(llm.requests[2].messages) == [
        summary_text("s"),
        "[user_steering]\nmind the tests\n[/user_steering]",
    ]


async def test_a_trace_that_ends_inside_a_compaction_is_closed_before_the_next_run(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # The process died during a summary request: its last records are inside the span.
    crashed: list[Message] = [
        om.user_text("one"),
        om.request_begin(),
        om.assistant_text("first"),
        om.request_end("completed"),
        om.compaction_begin("turns", "summarize", 0, 1),
        om.request_begin(),
    ]
    ledger = Ledger()
    for record in crashed:
        ledger.observe(record)
    assert ledger.open_compaction is not None
    llm = ScriptedLLM(["after"])
    async with open_harness(tmp_path, llm, ledger=ledger) as h:
        seen, result = await run_task(h.engine, "two")
        records = await h.trace()
        assert h.engine.ledger.open_compaction is None
    assert result.status == "completed"
    assert texts(llm.requests[0].messages) == ["one", "first", "two"]
    assert kind(records[1]) == "compaction_end:aborted"
    end = records[1].payload
    assert isinstance(end, om.CompactionEndPayload)
    assert (end.reason, end.mode) == ("turns", "summarize")
    assert not any(kind(m) == "compaction_end:aborted" for m in seen)  # trace-only
