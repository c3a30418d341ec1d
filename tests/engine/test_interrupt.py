"""Interrupts: the ``abort`` event, the run's status, and the carry-over for the next run.

Case A: the model's output was complete (the turn is committed) and tools were
running: the next request re-sends the finished results as outputs and the
unfinished calls as ``[interrupted: tool aborted by user]``. Case B: the model was
cut mid-stream: the open fragment is closed ``aborted`` and the next request re-sends
the turn's input plus one ``[turn_aborted]`` text. The carry-over is derived from the
records; it is never written to the trace itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import trio
import trio.testing

from penguin import protocol as om
from penguin.llm import ScriptedLLM, error, pause, text, thinking, tool_call, turn

from .support import Message, allow_all, dicts, kind, open_harness, run_task, texts

INTERRUPTED = "[interrupted: tool aborted by user]"


def outputs_in(messages: Sequence[Message]) -> list[tuple[str, str, str | None]]:
    return [
        (m.payload.tool_call_id, m.payload.output, m.payload.stop_reason)
        for m in messages
        if isinstance(m.payload, om.ToolCallOutputPayload)
    ]


async def test_carry_over_case_a(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    llm = ScriptedLLM(
        [
            turn(
                tool_call("probe", {"text": "fast"}, "done"),
                tool_call("probe", {"block": True}, "stuck"),
            ),
            "picking up",
        ]
    )
    interrupt = trio.Event()
    async with open_harness(tmp_path, llm) as h:
        seen: list[Message] = []
        async with h.engine.run([om.user_text("go")], approve=allow_all, interrupt=interrupt) as s:
            async for message in s:
                seen.append(message)
                finished = any(kind(m) == "tool_call_output" for m in seen)
                committed = any(kind(m) == "request_end:completed" for m in seen)
                if finished and committed:
                    # Approvals come one at a time: "stuck" may not be running yet.
                    while "stuck" not in h.probe.started:  # noqa: ASYNC110 - no event to wait on
                        await trio.sleep(0.001)
                    interrupt.set()
        assert s.result.status == "aborted"
        assert kind(seen[-1]) == "abort"
        assert outputs_in(seen) == [
            ("done", "fast", "completed"),
            ("stuck", INTERRUPTED, "aborted"),
        ]
        assert len(llm.requests) == 1

        _, result = await run_task(h.engine, "continue")
        records = await h.trace()
    assert result.status == "completed"
    resent = list(llm.requests[1].messages)
    calls = [m for m in seen if kind(m) == "tool_call"]
    outputs = [m for m in seen if kind(m) == "tool_call_output"]
    assert dicts(resent) == dicts([*llm.requests[0].messages, *calls, *outputs, resent[-1]])
    assert texts(resent[-1:]) == ["continue"]
    # Each output is in the trace once: the carry-over was not written again.
    assert outputs_in(records) == outputs_in(seen)


async def test_carry_over_case_a_fills_in_calls_that_never_ran(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    interrupt = trio.Event()
    asked: list[str] = []

    async def approver(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        asked.append(call.payload.tool_call_id)
        if call.payload.tool_call_id == "late":
            await trio.sleep_forever()
        return "allow"

    llm = ScriptedLLM(
        [turn(tool_call("probe", {"text": "ran"}, "early"), tool_call("probe", {}, "late")), "ok"]
    )
    async with open_harness(tmp_path, llm) as h:
        async with h.engine.run([om.user_text("go")], approve=approver, interrupt=interrupt) as s:
            async for message in s:
                if kind(message) == "request_end:completed":
                    await trio.testing.wait_all_tasks_blocked()
                    interrupt.set()
        assert s.result.status == "aborted"
        carried = h.engine.ledger.carry_over()
        await run_task(h.engine, "next")
        records = await h.trace()
    assert asked == ["early", "late"]
    assert h.probe.runs == ["early"]
    expected = [("early", "ran", "completed"), ("late", INTERRUPTED, "aborted")]
    assert outputs_in(carried) == expected
    assert outputs_in(llm.requests[-1].messages) == expected
    assert outputs_in(records) == expected[:1]  # the placeholder is the model's only


async def test_carry_over_case_b(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    llm = ScriptedLLM([turn(text("Hel"), pause(10), text("lo")), "fresh start"])
    interrupt = trio.Event()
    async with open_harness(tmp_path, llm) as h:
        seen: list[Message] = []
        async with h.engine.run([om.user_text("hi")], interrupt=interrupt) as stream:
            async for message in stream:
                seen.append(message)
                if kind(message) == "partial_text:delta":
                    interrupt.set()
        assert stream.result.status == "aborted"
        assert [kind(m) for m in seen[-5:]] == [
            "partial_text:delta",
            "partial_text:stop",
            "text",
            "request_end:aborted",
            "abort",
        ]
        stop, cut = seen[-4].payload, seen[-3].payload
        assert stop == om.PartialTextPayload(event_type="stop", text="", stop_reason="aborted")
        assert cut == om.TextPayload(role="assistant", text="Hel", stop_reason="aborted")

        await run_task(h.engine, "go on")
        records = await h.trace()
    resent = llm.requests[1].messages
    assert texts(resent) == [
        "hi",
        "[turn_aborted]\n  [text]Hel[/text]\n[/turn_aborted]",
        "go on",
    ]
    assert [m.payload.sender for m in resent] == [None, "harness", None]  # type: ignore[union-attr]
    # The trace records what happened; the [turn_aborted] text is the model's only.
    assert not any("[turn_aborted]" in om.dumps(m) for m in records)
    assert texts(records).count("hi") == 1


async def test_carry_over_case_b_transcribes_thinking_calls_and_their_results(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM(
        [
            turn(
                thinking("plan"),
                tool_call("probe", {"text": "result"}, "t1"),
                text("Now"),
                pause(10),
                text(" more"),
            ),
            "ok",
        ]
    )
    interrupt = trio.Event()
    async with open_harness(tmp_path, llm) as h:
        async with h.engine.run([om.user_text("hi")], approve=allow_all, interrupt=interrupt) as s:
            async for message in s:
                if kind(message) == "tool_call_output":
                    interrupt.set()
        await run_task(h.engine, "again")
    assert texts(llm.requests[1].messages) == [
        "hi",
        "[turn_aborted]\n"
        "  [thinking]plan[/thinking]\n"
        '  [tool_call name="probe" id="t1"]{"text":"result"}[/tool_call]\n'
        "  [text]Now[/text]\n"
        '  [tool_call_output id="t1" status="completed"]result[/tool_call_output]\n'
        "[/turn_aborted]",
        "again",
    ]
    # No tool_call or output travels as such: the uncommitted turn is text only.
    assert not any(isinstance(m.payload, om.ToolCallPayload) for m in llm.requests[1].messages)


async def test_an_interrupt_before_the_first_request_keeps_the_input_as_it_is(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM(["answer"])
    interrupt = trio.Event()
    interrupt.set()
    image = om.image_url("data:image/png;base64,AAAA")
    async with open_harness(tmp_path, llm) as h:
        seen, result = await run_task(h.engine, [om.user_text("look"), image], interrupt=interrupt)
        assert result.status == "aborted"
        assert llm.requests == []
        assert [kind(m) for m in seen] == ["tool_list_ready", "text", "image_url", "abort"]
        await run_task(h.engine, "now")
    assert [m.payload.type for m in llm.requests[0].messages] == ["text", "image_url", "text"]
    assert llm.requests[0].messages[1] == seen[2]


async def test_an_interrupt_during_the_retry_wait_ends_the_run(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM([turn(text("part"), error("timeout", "stalled")), "never"])
    interrupt = trio.Event()
    async with open_harness(tmp_path, llm) as h:
        start = trio.current_time()
        async with h.engine.run([om.user_text("hi")], interrupt=interrupt) as stream:
            async for message in stream:
                if kind(message) == "request_end:timeout":
                    interrupt.set()
        assert stream.result.status == "aborted"
        assert trio.current_time() - start < 2
        assert len(llm.requests) == 1
        await run_task(h.engine, "retry please")
    assert texts(llm.requests[1].messages) == [
        "hi",
        "[turn_aborted]\n  [text]part[/text]\n[/turn_aborted]",
        "retry please",
    ]


async def test_the_next_run_after_an_abort_needs_no_new_input(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM([turn(text("Hel"), pause(10), text("lo")), "resumed"])
    interrupt = trio.Event()
    async with open_harness(tmp_path, llm) as h:
        async with h.engine.run([om.user_text("hi")], interrupt=interrupt) as stream:
            async for message in stream:
                if kind(message) == "partial_text:delta":
                    interrupt.set()
        seen, result = await run_task(h.engine, [])
    assert result.status == "completed"
    assert result.turns == 1
    assert texts(llm.requests[1].messages)[0] == "hi"
    assert texts(seen)[-1] == "resumed"


class _EngineWatches(trio.abc.Instrument):
    """Counts the engine's tasks that watch an interrupt."""

    def __init__(self) -> None:
        self.started = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        name = task.coro.__qualname__
        self.started += name.startswith("Engine.") and "watch" in name


async def test_20_1_one_task_watches_the_interrupt_for_every_turn_of_a_run(
    tmp_path: Path,
) -> None:
    llm = ScriptedLLM(
        [
            tool_call("probe", {"text": "one"}, "c1"),
            tool_call("probe", {"text": "two"}, "c2"),
            tool_call("probe", {"block": True}, "c3"),
            "never sent",
        ]
    )
    watches = _EngineWatches()
    interrupt = trio.Event()
    async with open_harness(tmp_path, llm) as h:
        trio.lowlevel.add_instrument(watches)
        try:
            async with h.engine.run(
                [om.user_text("go")], approve=allow_all, interrupt=interrupt
            ) as s:
                async for _ in s:
                    if "c3" in h.probe.started and not interrupt.is_set():
                        interrupt.set()  # in the third turn, its call running
        finally:
            trio.lowlevel.remove_instrument(watches)
    assert s.result.status == "aborted"
    assert watches.started == 1


class _ApprovalTasks(trio.abc.Instrument):
    """Counts the tasks that decide a turn's tool calls."""

    def __init__(self) -> None:
        self.started = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.started += task.coro.__qualname__.endswith("._attempt.<locals>.approvals")


async def test_20_1_a_turn_starts_its_approvals_task_with_its_first_tool_call(
    tmp_path: Path,
) -> None:
    llm = ScriptedLLM(
        [
            turn(
                tool_call("probe", {"text": "one"}, "c1"), tool_call("probe", {"text": "two"}, "c2")
            ),
            "done",
        ]
    )
    tasks = _ApprovalTasks()
    async with open_harness(tmp_path, llm) as h:
        trio.lowlevel.add_instrument(tasks)
        try:
            async with h.engine.run([om.user_text("go")], approve=allow_all) as s:
                messages = [m async for m in s]
        finally:
            trio.lowlevel.remove_instrument(tasks)
    assert s.result.status == "completed"
    assert sorted(h.probe.started) == ["c1", "c2"]
    assert texts(messages)[-1] == "done"
    assert tasks.started == 1  # the closing turn, which only speaks, needed none
