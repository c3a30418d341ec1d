"""The agent loop's turns: order of events, approvals, concurrency, feeding outputs back."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import penguin
from penguin import protocol as om
from penguin.engine import EngineBusyError
from penguin.environment import ToolContext, ToolResult
from penguin.llm import ScriptedLLM, pause, text, thinking, tool_call, turn, usage

from .support import Message, allow_all, kind, open_harness, run_task, texts


def index_of(messages: list[Message], predicate_kind: str, call_id: str | None = None) -> int:
    for position, message in enumerate(messages):
        if kind(message) != predicate_kind:
            continue
        if call_id is None or getattr(message.payload, "tool_call_id", None) == call_id:
            return position
    raise AssertionError(f"no {predicate_kind} {call_id or ''} in {[kind(m) for m in messages]}")


async def test_a_request_streams_begin_fragments_completes_usage_then_end(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM([turn(thinking("hmm"), text("Hel", "lo"), usage(output=3, total=10))])
    async with open_harness(tmp_path, llm) as h:
        seen, result = await run_task(h.engine, "hi")
    assert result.status == "completed"
    assert result.turns == 1
    assert [kind(m) for m in seen] == [
        "tool_list_ready",
        "text",
        "request_begin",
        "partial_thinking:start",
        "partial_thinking:delta",
        "partial_thinking:stop",
        "thinking",
        "partial_text:start",
        "partial_text:delta",
        "partial_text:delta",
        "partial_text:stop",
        "text",
        "token_usage",
        "request_end:completed",
    ]
    usage_event = seen[-2].payload
    assert isinstance(usage_event, om.TokenUsagePayload)
    assert usage_event.request == om.TokenCounts(output=3, total=10)
    assert usage_event.session == om.TokenCounts(output=3, total=10)


async def test_every_complete_tool_call_gets_one_approval_one_at_a_time_in_stream_order(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    asked: list[str] = []
    inside = 0
    most_inside = 0

    async def slow_approver(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        nonlocal inside, most_inside
        asked.append(call.payload.tool_call_id)
        inside += 1
        most_inside = max(most_inside, inside)
        await trio.sleep(1)
        inside -= 1
        return "allow"

    llm = ScriptedLLM(
        [turn(*(tool_call("probe", {"text": str(n)}, f"c{n}") for n in range(4))), "done"]
    )
    async with open_harness(tmp_path, llm) as h:
        seen, result = await run_task(h.engine, "go", approve=slow_approver)
    assert result.status == "completed"
    assert asked == ["c0", "c1", "c2", "c3"]
    assert most_inside == 1
    decisions = [m.payload for m in seen if isinstance(m.payload, om.ApprovalDecisionPayload)]
    assert [(d.tool_call_id, d.decision) for d in decisions] == [
        (f"c{n}", "allow") for n in range(4)
    ]
    for n in range(4):
        assert index_of(seen, "tool_call", f"c{n}") < index_of(seen, "approval_decision", f"c{n}")
        assert index_of(seen, "approval_decision", f"c{n}") < index_of(
            seen, "partial_tool_call_output:delta", f"c{n}"
        )


async def test_a_call_cut_by_a_model_error_is_never_approved(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    from penguin.llm import error

    asked: list[str] = []

    def approver(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        asked.append(call.payload.tool_call_id)
        return "allow"

    llm = ScriptedLLM([turn(tool_call("probe", {}, "ok"), error("auth", "revoked"))])
    async with open_harness(tmp_path, llm) as h:
        await run_task(h.engine, "go", approve=approver)
    assert asked == ["ok"]


async def test_a_tool_starts_before_the_model_stream_ends(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM(
        [turn(tool_call("probe", {}, "early"), pause(5), text("still talking")), "ok"]
    )
    ended_at: list[float] = []
    async with (
        open_harness(tmp_path, llm) as h,
        h.engine.run([om.user_text("go")], approve=allow_all) as stream,
    ):
        async for message in stream:
            if kind(message) == "request_end:completed" and not ended_at:
                ended_at.append(trio.current_time())
    assert h.probe.started["early"] == 0.0
    assert h.probe.finished["early"] == 0.0
    assert ended_at == [5.0]


async def test_request_end_does_not_wait_for_the_tools(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM([turn(tool_call("probe", {"sleep": 3}, "slow")), "ok"])
    async with open_harness(tmp_path, llm) as h:
        seen, _ = await run_task(h.engine, "go", approve=allow_all)
    assert index_of(seen, "token_usage") < index_of(seen, "request_end:completed")
    assert index_of(seen, "request_end:completed") < index_of(seen, "tool_call_output", "slow")


async def test_concurrent_tools_take_one_second_not_two(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM(
        [turn(tool_call("probe", {"sleep": 1}, "a"), tool_call("probe", {"sleep": 1}, "b")), "ok"]
    )
    async with open_harness(tmp_path, llm) as h:
        start = trio.current_time()
        _, result = await run_task(h.engine, "go", approve=allow_all)
        elapsed = trio.current_time() - start
    assert result.status == "completed"
    assert elapsed == pytest.approx(1.0)
    assert h.probe.started == {"a": 0.0, "b": 0.0}


async def test_outputs_are_fed_back_in_call_order_once_every_call_is_terminal(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM(
        [
            turn(
                text("two calls"),
                tool_call("probe", {"sleep": 2, "text": "first"}, "c1"),
                tool_call("probe", {"sleep": 1, "text": "second"}, "c2"),
            ),
            "ok",
        ]
    )
    begun: list[float] = []
    async with (
        open_harness(tmp_path, llm) as h,
        h.engine.run([om.user_text("go")], approve=allow_all) as stream,
    ):
        seen = []
        async for message in stream:
            seen.append(message)
            if kind(message) == "request_begin":
                begun.append(trio.current_time())
    # c2 finishes first on the stream...
    assert index_of(seen, "tool_call_output", "c2") < index_of(seen, "tool_call_output", "c1")
    # ...but the next request waits for both and lists them in call order.
    assert begun == [0.0, 2.0]
    second = llm.requests[1].messages
    assert [om.to_dict(m)["payload"] for m in second] == [
        {"type": "text", "role": "user", "text": "go", "stop_reason": "completed"},
        {"type": "text", "role": "assistant", "text": "two calls", "stop_reason": "completed"},
        {
            "type": "tool_call",
            "role": "assistant",
            "name": "probe",
            "arguments": '{"sleep":2,"text":"first"}',
            "tool_call_id": "c1",
            "stop_reason": "completed",
        },
        {
            "type": "tool_call",
            "role": "assistant",
            "name": "probe",
            "arguments": '{"sleep":1,"text":"second"}',
            "tool_call_id": "c2",
            "stop_reason": "completed",
        },
        {
            "type": "tool_call_output",
            "role": "user",
            "output": "first",
            "tool_call_id": "c1",
            "stop_reason": "completed",
        },
        {
            "type": "tool_call_output",
            "role": "user",
            "output": "second",
            "tool_call_id": "c2",
            "stop_reason": "completed",
        },
    ]


async def test_the_task_ends_on_a_turn_without_tool_calls(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM(
        [turn(tool_call("probe", {})), turn(tool_call("probe", {})), "all done", "never"]
    )
    async with open_harness(tmp_path, llm) as h:
        seen, result = await run_task(h.engine, "go", approve=allow_all)
    assert result.status == "completed"
    assert result.turns == 3
    assert len(llm.requests) == 3
    assert llm.remaining == 1
    assert kind(seen[-1]) == "request_end:completed"


async def test_max_turns_stops_the_task_with_a_stderr_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM([turn(tool_call("probe", {}, f"c{n}")) for n in range(5)])
    async with open_harness(tmp_path, llm, max_turns=2) as h:
        seen, result = await run_task(h.engine, "go", approve=allow_all)
        assert h.engine.ledger.awaiting == ["c1"]  # the last results wait for the next run
    assert result.status == "max_turns"
    assert result.turns == 2
    assert len(llm.requests) == 2
    assert "[penguin] max_turns (2) reached; the task stops here." in caplog.messages
    assert not any(kind(m) == "abort" for m in seen)


async def test_the_tool_list_is_announced_once_per_engine(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM(["one", "two"])
    async with open_harness(tmp_path, llm) as h:
        first, _ = await run_task(h.engine, "a")
        second, _ = await run_task(h.engine, "b")
        listed = first[0].payload
        assert isinstance(listed, om.ToolListReadyPayload)
        assert [tool.name for tool in listed.tools] == ["probe"]
        assert not any(kind(m) == "tool_list_ready" for m in second)
    assert llm.requests[0].tools == llm.requests[1].tools == h.engine.tools


async def test_the_request_carries_system_prompt_tools_and_thinking_level(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM(["ok"])
    async with (
        open_harness(tmp_path, llm) as h,
        h.engine.run([om.user_text("go")], thinking_level="high") as stream,
    ):
        async for _ in stream:
            pass
    (request,) = llm.requests
    assert request.system_prompt == h.engine.system_prompt
    assert request.thinking_level == "high"
    assert [tool.name for tool in request.tools] == ["probe"]


async def test_one_run_at_a_time(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    llm = ScriptedLLM([turn(pause(10), text("slow"))])
    async with open_harness(tmp_path, llm) as h, h.engine.run([om.user_text("a")]) as stream:
        assert h.engine.running
        with pytest.raises(EngineBusyError):
            async with h.engine.run([om.user_text("b")]):
                pass  # pragma: no cover
        with pytest.raises(EngineBusyError):
            async with h.engine.compact():
                pass  # pragma: no cover
        async for _ in stream:
            pass
    assert not h.engine.running


async def test_a_run_given_something_other_than_a_list_of_messages_says_what_to_pass(
    tmp_path: Path,
) -> None:
    async with open_harness(tmp_path, ScriptedLLM([turn(text("ok"))])) as h:
        for given, got in (
            ("hello", "not a str"),
            (om.user_text("hello"), "not one message"),
            (["hello"], "item 0 is a str"),
            ([om.user_text("a"), {"role": "user"}], "item 1 is a dict"),
            (5, "not an int"),
            (None, "not None"),
        ):
            with pytest.raises(TypeError) as caught:
                async with h.engine.run(given):  # type: ignore[arg-type]
                    pass  # pragma: no cover
            assert str(caught.value).startswith(
                'run() takes a list of messages, such as [om.user_text("...")]'
            )
            assert got in str(caught.value)
            with pytest.raises(TypeError, match=r"^steer\(\) takes a list of messages"):
                h.engine.steer(given)  # type: ignore[arg-type]
        assert not h.engine.running
        _, result = await run_task(h.engine, "hello")  # the session is still usable
    assert result.status == "completed"


async def test_the_trace_holds_records_only_and_decisions_before_outputs(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM(
        [turn(thinking("t"), text("x"), tool_call("probe", {}, "a"), tool_call("probe", {}, "b"))]
    )
    async with open_harness(tmp_path, llm) as h:
        seen, _ = await run_task(h.engine, "go", approve=allow_all)
        records = await h.trace()
    assert any(om.is_partial(m) for m in seen)
    assert not any(om.is_partial(m) for m in records)
    assert not any(m.origin for m in records)
    assert kind(records[0]) == "session_meta"
    recorded = [m for m in seen if not om.is_partial(m)]
    assert [om.to_dict(m) for m in records[1:]] == [om.to_dict(m) for m in recorded]
    for call_id in ("a", "b"):
        assert index_of(records, "approval_decision", call_id) < index_of(
            records, "tool_call_output", call_id
        )


async def test_leaving_the_block_early_is_a_hard_stop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock
) -> None:
    # 200 deltas fill the stream's buffer: the engine is blocked handing one over.
    llm = ScriptedLLM([turn(text(*["x"] * 200))])
    async with open_harness(tmp_path, llm) as h:
        async with h.engine.run([om.user_text("hi")]) as stream:
            await stream.receive()
            await trio.testing.wait_all_tasks_blocked()
        assert not h.engine.running
        records = await h.trace()
        assert kind(records[-1]) == "abort"
        last = records[-1].payload
        assert isinstance(last, om.AbortPayload)
        assert last.reason == "cancelled"
        # The cut turn is the next run's input (it produced no complete message).
        assert [om.to_dict(m)["payload"]["text"] for m in h.engine.ledger.pending] == ["hi"]
        with pytest.raises(RuntimeError):
            _ = stream.result
    assert not caplog.messages


async def test_an_exception_in_the_consumer_propagates_unchanged(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM([turn(text(*["x"] * 200))])
    async with open_harness(tmp_path, llm) as h:

        async def consume_then_fail() -> None:
            async with h.engine.run([om.user_text("hi")]) as stream:
                await stream.receive()
                await trio.testing.wait_all_tasks_blocked()
                raise ValueError("mine")

        with pytest.raises(ValueError, match="mine"):
            await consume_then_fail()
        assert not h.engine.running


async def test_the_default_logger_is_quiet_on_a_clean_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock
) -> None:
    caplog.set_level(logging.DEBUG, logger="penguin")
    llm = ScriptedLLM([turn(tool_call("probe", {})), "ok"])
    async with open_harness(tmp_path, llm) as h:
        await run_task(h.engine, "go", approve=allow_all)
    assert not caplog.messages


class Relay:
    """A custom tool that passes a child session's messages through, as run_subagent does."""

    name = "relay"
    definition = penguin.ToolDefinitionConfig(name="relay", description="forwards a child")

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        child_meta = om.session_meta(
            session_id="session-child",
            provider="scripted",
            model_id="scripted",
            model_context_window=0,
            system_prompt="",
            agent_state="",
            workspace="/",
        )
        await ctx.forward(om.with_origin(child_meta, "session-child"))
        await ctx.forward(om.with_origin(om.assistant_text("from the child"), "session-child"))
        await ctx.emit("child done")
        return None


async def test_child_messages_are_streamed_but_only_a_pointer_is_traced(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM([turn(tool_call("relay", {}, "c1")), "ok"])
    async with open_harness(tmp_path, llm, custom_tools=[Relay()]) as h:
        seen, _ = await run_task(h.engine, "go", approve=allow_all)
        records = await h.trace()
    forwarded = [m for m in seen if m.origin]
    assert [m.origin for m in forwarded] == [("session-child",), ("session-child",)]
    assert not any(m.origin for m in records)
    pointers = [m.payload for m in records if isinstance(m.payload, om.SubagentPayload)]
    assert pointers == [om.SubagentPayload(session_id="session-child")]
    assert "from the child" not in texts(records)
    # The model gets the tool's own output only.
    (output,) = [m for m in llm.requests[1].messages if kind(m) == "tool_call_output"]
    assert output.payload.output == "child done"  # type: ignore[union-attr]
