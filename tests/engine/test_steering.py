"""Steering a live Task, and background completion reports joining its input."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import penguin
from penguin import protocol as om
from penguin.config import default_tools
from penguin.environment import ToolContext, ToolResult
from penguin.llm import ScriptedLLM, pause, text, tool_call, turn

from .support import allow_all, kind, open_harness, run_task, texts


def steering(text: str) -> str:
    return f"[user_steering]\n{text}\n[/user_steering]"


async def test_steer_returns_false_when_no_task_is_live(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM(["one", "[summary]s[/summary]"])
    async with open_harness(tmp_path, llm) as h:
        assert h.engine.steer([om.user_text("too early")]) is False
        await run_task(h.engine, "hi")
        assert h.engine.steer([om.user_text("too late")]) is False
        async with h.engine.compact() as stream:
            assert h.engine.steer([om.user_text("not a task")]) is False
            async for _ in stream:
                pass
        await run_task(h.engine, "again")
    sent = [text for request in llm.requests for text in texts(request.messages)]
    assert not any("[user_steering]" in text for text in sent)


async def test_steering_is_delivered_as_user_steering_at_the_next_input_assembly(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM([turn(tool_call("probe", {"sleep": 1}, "c1")), "noted"])
    accepted: list[bool] = []
    async with open_harness(tmp_path, llm) as h:
        async with h.engine.run([om.user_text("go")], approve=allow_all) as stream:
            async for message in stream:
                if kind(message) == "request_begin" and not accepted:
                    accepted.append(h.engine.steer([om.user_text("also check the tests")]))
        records = await h.trace()
    assert accepted == [True]
    assert stream.result.turns == 2
    second = llm.requests[1].messages
    assert [m.payload.type for m in second[-2:]] == ["tool_call_output", "text"]
    assert texts(second[-1:]) == [steering("also check the tests")]
    assert second[-1].payload.role == "user"
    # Steering is real user input: streamed and traced like a prompt.
    assert steering("also check the tests") in texts(records)


async def test_a_turn_without_tool_calls_continues_once_more_when_steering_is_queued(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM([turn(text("Working"), pause(5), text(" on it")), "switched", "unused"])
    async with open_harness(tmp_path, llm) as h, h.engine.run([om.user_text("task")]) as stream:
        async for message in stream:
            if kind(message) == "partial_text:start" and len(llm.requests) == 1:
                assert h.engine.steer([om.user_text("actually, do Y")])
    assert stream.result.status == "completed"
    assert stream.result.turns == 2
    assert texts(llm.requests[1].messages) == ["task", "Working on it", steering("actually, do Y")]


async def test_steering_images_follow_the_steering_text(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    image = om.image_url("data:image/png;base64,AAAA")
    llm = ScriptedLLM([turn(text("a"), pause(1)), "b"])
    async with open_harness(tmp_path, llm) as h, h.engine.run([om.user_text("task")]) as stream:
        async for message in stream:
            if kind(message) == "partial_text:start" and len(llm.requests) == 1:
                h.engine.steer([om.user_text("like this"), image])
    last = llm.requests[1].messages[-2:]
    assert texts(last) == [steering("like this")]
    assert last[1] == image


async def test_steering_queued_when_the_user_interrupts_is_kept_for_the_next_run(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM([turn(tool_call("probe", {"block": True}, "c1")), "ok"])
    interrupt = trio.Event()
    async with open_harness(tmp_path, llm) as h:
        async with h.engine.run([om.user_text("go")], approve=allow_all, interrupt=interrupt) as s:
            async for message in s:
                if kind(message) == "request_end:completed":
                    h.engine.steer([om.user_text("stop that")])
                    interrupt.set()
        assert s.result.status == "aborted"
        await run_task(h.engine, "next")
    assert texts(llm.requests[1].messages)[-2:] == [steering("stop that"), "next"]


class ReleaseAndWait:
    """Lets a background command finish (it reads a FIFO), then waits for its report."""

    name = "release"
    definition = penguin.ToolDefinitionConfig(
        name="release", description="release the background command", permission="r"
    )

    def __init__(self, fifo: Path) -> None:
        self.fifo = fifo
        self.env: penguin.Environment | None = None

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        assert self.env is not None
        reports = self.env.background_reports
        with trio.fail_after(30):
            await trio.to_thread.run_sync(self.fifo.write_text, "output\n")
            # A report channel has no "wait until non-empty" without taking the report.
            while reports.statistics().current_buffer_used == 0:  # noqa: ASYNC110
                await trio.sleep(0.01)
        await ctx.emit("released")
        return None


@pytest.fixture
def hermetic_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.mark.usefixtures("hermetic_home")
async def test_a_background_report_arrives_as_a_harness_message_at_the_next_boundary(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "release.fifo"
    os.mkfifo(fifo)
    releaser = ReleaseAndWait(fifo)
    cmd = f"read line < '{fifo}'; echo finished-$line"
    background = {"description": "bg", "cmd": cmd, "run_in_background": True}
    llm = ScriptedLLM(
        [
            turn(tool_call("exec_command", background, "c1")),
            turn(tool_call("release", {}, "c2")),
            "thanks",
        ]
    )
    tools = [entry for entry in default_tools() if entry.name == "exec_command"]
    async with open_harness(tmp_path, llm, tools=tools, custom_tools=[releaser]) as h:
        releaser.env = h.env
        seen, result = await run_task(h.engine, "start it", approve=allow_all)
    assert result.status == "completed"
    assert result.turns == 3
    assert not any(
        "[background_task_done]" in m for r in llm.requests[:2] for m in texts(r.messages)
    )
    third = llm.requests[2].messages
    report = third[-1]
    assert isinstance(report.payload, om.TextPayload)
    assert report.payload.role == "user"
    assert report.payload.sender == "harness"
    assert report.payload.text.startswith("[background_task_done]\n")
    assert "kind: command\n" in report.payload.text
    assert "finished-output" in report.payload.text
    # The report follows the outputs of the turn, and is streamed like any input.
    assert third[-2].payload.type == "tool_call_output"
    assert report in seen
