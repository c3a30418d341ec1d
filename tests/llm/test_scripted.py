"""ScriptedLLM: scripted turns, errors, pauses (MockClock), recorded requests."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from penguin import protocol as om
from penguin.llm import (
    LLMOutcome,
    LLMRequest,
    ModelRef,
    ScriptedLLM,
    Step,
    error,
    pause,
    text,
    thinking,
    tool_call,
    turn,
    usage,
)

from .discipline import check_discipline, kind, texts, tool_calls

Message = om.OmniMessage[om.Payload]


def request(*messages: om.OmniMessage[om.CompleteModelPayload]) -> LLMRequest:
    return LLMRequest(system_prompt="sys", messages=messages or (om.user_text("go"),), tools=())


async def run(llm: ScriptedLLM, req: LLMRequest | None = None) -> tuple[list[Message], LLMOutcome]:
    async with llm.stream(req or request()) as response:
        messages = [message async for message in response]
    return messages, response.outcome


async def test_text_chunks_are_deltas_of_one_message() -> None:
    llm = ScriptedLLM([turn(text("Hel", "lo"))])
    messages, outcome = await run(llm)
    assert outcome == LLMOutcome("completed")
    assert [kind(m) for m in messages] == [
        "partial_text:start",
        "partial_text:delta",
        "partial_text:delta",
        "partial_text:stop",
        "text",
    ]
    assert check_discipline(messages)[0].payload == om.TextPayload(
        role="assistant", text="Hello", stop_reason="completed"
    )


async def test_a_turn_plays_in_script_order() -> None:
    llm = ScriptedLLM(
        [
            turn(
                thinking("Need ", "the file.", fidelity={"signature": "s"}),
                text("Reading."),
                tool_call("read_file", {"file_path": "a.txt"}, chunks=3),
                tool_call("write_file", '{"broken', id="mine"),
                text("Done."),
                usage(output=12, total=300),
            )
        ]
    )
    messages, outcome = await run(llm)
    completes = check_discipline(messages)
    assert [m.payload for m in completes] == [
        om.ThinkingPayload(
            thinking="Need the file.", stop_reason="completed", fidelity={"signature": "s"}
        ),
        om.TextPayload(role="assistant", text="Reading.", stop_reason="completed"),
        om.ToolCallPayload(
            name="read_file",
            arguments='{"file_path":"a.txt"}',
            tool_call_id="call_1",
            stop_reason="completed",
        ),
        om.ToolCallPayload(
            name="write_file", arguments='{"broken', tool_call_id="mine", stop_reason="completed"
        ),
        om.TextPayload(role="assistant", text="Done.", stop_reason="completed"),
    ]
    argument_deltas = [
        m.payload.arguments
        for m in messages
        if isinstance(m.payload, om.PartialToolCallPayload) and m.payload.event_type == "delta"
    ]
    assert argument_deltas[:3] == ['{"file_', 'path":"', 'a.txt"}']
    assert outcome == LLMOutcome("completed", usage=om.TokenCounts(output=12, total=300))


async def test_generated_ids_count_across_turns() -> None:
    llm = ScriptedLLM([turn(tool_call("a"), tool_call("b")), turn(tool_call("c"))])
    first, _ = await run(llm)
    second, _ = await run(llm)
    ids = [p.tool_call_id for p in tool_calls(check_discipline(first + second))]
    assert ids == ["call_1", "call_2", "call_3"]
    assert tool_calls(check_discipline(first))[0].arguments == "{}"


async def test_a_pause_inside_a_message_under_mock_clock(
    autojump_clock: trio.testing.MockClock,
) -> None:
    llm = ScriptedLLM([turn(text("Hel"), pause(30), text("lo"))])
    arrivals: list[tuple[str, float]] = []
    start = trio.current_time()
    async with llm.stream(request()) as response:
        async for message in response:
            arrivals.append((kind(message), trio.current_time() - start))
    assert arrivals == [
        ("partial_text:start", 0),
        ("partial_text:delta", 0),
        ("partial_text:delta", 30),
        ("partial_text:stop", 30),
        ("text", 30),
    ]


async def test_an_error_cuts_the_open_message_and_ends_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    llm = ScriptedLLM(
        [turn(usage(output=3), text("I was say"), pause(5), error("timeout", "stalled"))]
    )
    messages, outcome = await run(llm)
    assert outcome == LLMOutcome("timeout", "stalled", om.TokenCounts(output=3))
    assert [m.payload for m in check_discipline(messages)] == [
        om.TextPayload(role="assistant", text="I was say", stop_reason="timeout")
    ]


async def test_an_error_without_output() -> None:
    llm = ScriptedLLM([error("auth", "401 Unauthorized: bad key"), "after"])
    messages, outcome = await run(llm)
    assert (messages, outcome) == ([], LLMOutcome("auth", "401 Unauthorized: bad key"))
    _, outcome = await run(llm)
    assert outcome.status == "completed"


def test_script_mistakes_are_rejected_early() -> None:
    with pytest.raises(ValueError, match="failing status"):
        error("completed", "no")
    with pytest.raises(ValueError, match="put it last"):
        turn(error("failed", "x"), text("more"))
    with pytest.raises(ValueError, match="chunks"):
        tool_call("f", chunks=0)
    with pytest.raises(ValueError, match="negative"):
        pause(-1)


async def test_requests_are_recorded() -> None:
    llm = ScriptedLLM(["one", "two"])
    first = request(om.user_text("hi"))
    second = request(om.user_text("hi"), om.assistant_text("one"), om.user_text("again"))
    await run(llm, first)
    await run(llm, second)
    assert llm.requests == [first, second]
    assert llm.remaining == 0


async def test_the_fallback_answers_when_the_script_runs_out() -> None:
    llm = ScriptedLLM([])
    messages, outcome = await run(llm)
    assert outcome.status == "completed"
    assert texts(check_discipline(messages)) == ["Done."]
    custom = ScriptedLLM(fallback=turn(text("Nothing more."), usage(output=1)))
    messages, outcome = await run(custom)
    assert texts(check_discipline(messages)) == ["Nothing more."]
    assert outcome.usage == om.TokenCounts(output=1)


async def test_callable_turns_react_to_the_request() -> None:
    def echo_last_output(req: LLMRequest) -> list[Step]:
        outputs = [m.payload.output for m in req.messages if om.is_tool_call_output(m)]
        return [text(f"The tool said: {outputs[-1]}")] if outputs else [tool_call("probe")]

    llm = ScriptedLLM(fallback=echo_last_output)
    first, _ = await run(llm)
    [call] = tool_calls(check_discipline(first))
    reply = request(om.user_text("go"), om.tool_call("probe", "{}", call.tool_call_id))
    reply = LLMRequest(
        system_prompt="sys",
        messages=(*reply.messages, om.tool_call_output("42", call.tool_call_id)),
        tools=(),
    )
    second, _ = await run(llm, reply)
    assert texts(check_discipline(second)) == ["The tool said: 42"]

    once = ScriptedLLM([lambda req: f"{len(req.messages)} messages"])
    messages, _ = await run(once, request(om.user_text("a"), om.user_text("b")))
    assert texts(check_discipline(messages)) == ["2 messages"]


async def test_model_and_context_window() -> None:
    assert ScriptedLLM().model == ModelRef("scripted", "scripted")
    llm = ScriptedLLM(model=ModelRef("demo", "demo-1"), context_window=8192)
    assert (llm.model, llm.context_window) == (ModelRef("demo", "demo-1"), 8192)


async def test_cancelling_during_a_pause_is_a_hard_stop(
    autojump_clock: trio.testing.MockClock,
) -> None:
    llm = ScriptedLLM([turn(text("a"), pause(100), text("b"))])
    seen: list[Message] = []
    with trio.move_on_after(10):
        async with llm.stream(request()) as response:
            async for message in response:
                seen.append(message)
    assert [kind(m) for m in seen] == ["partial_text:start", "partial_text:delta"]
    assert trio.current_time() == pytest.approx(10)
    with pytest.raises(RuntimeError):
        response.outcome  # noqa: B018
