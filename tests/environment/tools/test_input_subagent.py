"""input_subagent (reference 3.9) through a real Environment, with fake child sessions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import penguin
from penguin import protocol as om
from penguin.config import default_tools
from penguin.environment import ToolServices
from penguin.environment.tools.input_subagent import InputSubagentTool

from ..bare import run_bare
from ..children import (
    Called,
    FakeResult,
    FakeRunner,
    RoundContext,
    call_tool,
    environment_config,
)

PROMPT = "Caller agent: default_agent\nCount the files."


def still_running(subagent_id: str) -> str:
    return f"[subagent still running with subagent_id {subagent_id}]"


def idle(subagent_id: str) -> str:
    return f"[subagent idle with subagent_id {subagent_id}; send a follow-up prompt to continue]"


async def launch(env: penguin.Environment, runner: FakeRunner, **args: Any) -> str:
    """run_subagent that leaves the child registered after a 250 ms window; its id."""
    called = await call_tool(
        env, "run_subagent", {"description": "d", "prompt": PROMPT, "yield_time_ms": 250, **args}
    )
    assert "poll for progress or send a follow-up prompt]" in called.text, called.text
    return f"subagent-{runner.children[-1].session_id[-8:]}"


async def poll(
    env: penguin.Environment,
    subagent_id: str,
    *,
    approve: om.ApproveFn | None = None,
    **args: Any,
) -> Called:
    return await call_tool(
        env,
        "input_subagent",
        {"description": "d", "subagent_id": subagent_id, **args},
        approve=approve,
    )


async def test_3_9_1_no_manager_message(workspace: Path) -> None:
    definition = next(d for d in default_tools() if d.name == "input_subagent")
    tool = InputSubagentTool(definition, ToolServices())
    result, deltas = await run_bare(tool, {}, workspace)
    assert result is not None
    assert result.stop_reason == "failed"
    assert deltas == ["[input_subagent unavailable: no subagent session manager configured]"]


@pytest.mark.parametrize("subagent_id", [None, "", 5])
async def test_3_9_1_missing_subagent_id(workspace: Path, subagent_id: object) -> None:
    args = {} if subagent_id is None else {"subagent_id": subagent_id}
    async with penguin.Environment.open(environment_config(workspace, FakeRunner())) as env:
        called = await call_tool(env, "input_subagent", args)
    assert (called.text, called.stop) == (
        'Missing required argument "subagent_id" for input_subagent.',
        "failed",
    )


async def test_3_9_1_unknown_subagent_id(workspace: Path) -> None:
    async with penguin.Environment.open(environment_config(workspace, FakeRunner())) as env:
        called = await poll(env, "subagent-0badc0de")
    assert (called.text, called.stop) == (
        "[input_subagent error: unknown subagent_id subagent-0badc0de "
        "(the session may have finished and been cleared)]",
        "failed",
    )


async def test_3_9_1_prompt_while_running_is_refused(
    workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    runner = FakeRunner(RoundContext.block)
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        subagent_id = await launch(env, runner)
        called = await poll(env, subagent_id, prompt="more")
        assert (called.text, called.stop) == (
            f"[input_subagent error: subagent {subagent_id} is still running; "
            "poll with an empty prompt to collect progress first]",
            "failed",
        )
        assert runner.children[0].rounds == [PROMPT]


async def test_3_9_1_start_failure(workspace: Path, autojump_clock: trio.testing.MockClock) -> None:
    release = trio.Event()

    async def slow(ctx: RoundContext) -> None:
        await release.wait()

    runner = FakeRunner(slow)
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        subagent_id = await launch(env, runner)
        assert env._subagents is not None
        session = env._subagents.get(subagent_id)
        assert session is not None
        release.set()
        with trio.fail_after(5):
            await session.wait_idle()
        session.kill()  # released behind the registry's back: a race the tool must survive
        called = await poll(env, subagent_id, prompt="again")
    assert (called.text, called.stop) == (
        "[input_subagent error: subagent session disposed]",
        "failed",
    )


async def test_3_9_2_poll_delivers_background_output_first_then_follow_up_round(
    workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    go_on = trio.Event()

    async def two_phases(ctx: RoundContext) -> None:
        if ctx.round == 1:
            await ctx.say("first part")
            await go_on.wait()
            await ctx.say("second part")
        else:
            await ctx.say(f"follow-up: {ctx.prompt}")

    runner = FakeRunner(two_phases)
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        subagent_id = await launch(env, runner)
        go_on.set()
        assert env._subagents is not None
        session = env._subagents.get(subagent_id)
        assert session is not None
        with trio.fail_after(5):
            await session.wait_idle()
        polled = await poll(env, subagent_id)
        assert (polled.text, polled.stop) == ("second part\n" + idle(subagent_id), "completed")
        assert [m.payload.text for m in polled.nested if isinstance(m.payload, om.TextPayload)] == [
            "second part"
        ]
        again = await poll(env, subagent_id, prompt="and the tests?")
        assert (again.text, again.stop) == (
            "follow-up: and the tests?\n" + idle(subagent_id),
            "completed",
        )
        assert runner.children[0].rounds == [PROMPT, "and the tests?"]
        assert not runner.children[0].closed  # still registered after the round


async def test_3_9_2_default_windows(
    workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    runner = FakeRunner(RoundContext.block)
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        subagent_id = await launch(env, runner)
        start = trio.current_time()
        polled = await poll(env, subagent_id, prompt="   ")  # blank: a poll
        assert trio.current_time() - start == pytest.approx(10.0)
        assert (polled.text, polled.stop) == (still_running(subagent_id), "completed")
        start = trio.current_time()
        await poll(env, subagent_id, yield_time_ms=3000)
        assert trio.current_time() - start == pytest.approx(3.0)


async def test_3_9_2_follow_up_default_window_is_300_s(
    workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def first_quick_then_block(ctx: RoundContext) -> FakeResult | None:
        if ctx.round == 1:
            await ctx.say("ok")
            return None
        return await ctx.block()

    runner = FakeRunner(first_quick_then_block)
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        called = await call_tool(
            env, "run_subagent", {"description": "d", "prompt": PROMPT, "yield_time_ms": 250}
        )
        assert called.text == "ok"  # finished in the window: released, not registered
        # A session that stays: a background launch, idle after its first round.
        called = await call_tool(
            env, "run_subagent", {"description": "d", "prompt": PROMPT, "run_in_background": True}
        )
        subagent_id = f"subagent-{runner.children[-1].session_id[-8:]}"
        with trio.fail_after(5):
            await env.background_reports.receive()
        start = trio.current_time()
        polled = await poll(env, subagent_id, prompt="block now")
        assert trio.current_time() - start == pytest.approx(300.0)
        assert polled.text == still_running(subagent_id)


async def test_3_9_2_pending_approvals_are_consulted_through_the_window(
    workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    verdicts: list[str] = []

    async def asks(ctx: RoundContext) -> None:
        verdicts.append(await ctx.ask("write_file", {"file_path": "a", "content": ""}))
        await ctx.say("wrote it")

    runner = FakeRunner(asks)
    asked: list[om.OmniMessage[om.ToolCallPayload]] = []

    def allow(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        asked.append(call)
        return "allow"

    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        subagent_id = await launch(env, runner)  # no approver: the request waits
        called = await poll(env, subagent_id, approve=allow)
    child_id = runner.children[0].session_id
    assert verdicts == ["allow"]
    assert [(c.payload.name, c.origin) for c in asked] == [("write_file", (child_id,))]
    assert called.text == "wrote it\n" + idle(subagent_id)


async def test_3_9_3_interrupt_does_not_kill(
    workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    runner = FakeRunner(RoundContext.block)
    interrupt = trio.Event()
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        subagent_id = await launch(env, runner)
        async with trio.open_nursery() as nursery:

            async def interrupt_later() -> None:
                await trio.sleep(1)
                interrupt.set()

            nursery.start_soon(interrupt_later)
            called = await call_tool(
                env,
                "input_subagent",
                {"description": "d", "subagent_id": subagent_id},
                interrupt=interrupt,
            )
        assert (called.text, called.stop) == ("[interrupted: tool aborted by user]", "aborted")
        assert not runner.children[0].closed
        assert env.has_running_background_subagents()
        polled = await poll(env, subagent_id, yield_time_ms=250)
        assert polled.text == still_running(subagent_id)


async def test_3_9_3_round_exit_note_comes_before_the_idle_note(
    workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    go_on = trio.Event()

    async def fails_late(ctx: RoundContext) -> None:
        await go_on.wait()
        raise RuntimeError("late failure")

    runner = FakeRunner(fails_late)
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        subagent_id = await launch(env, runner)
        go_on.set()
        polled = await poll(env, subagent_id)
    assert (polled.text, polled.stop) == (
        f"[subagent error: late failure] {idle(subagent_id)}",
        "failed",
    )


async def test_3_9_3_still_running_carries_the_approval_hint(
    workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def asks(ctx: RoundContext) -> None:
        await ctx.ask("write_file", {"file_path": "a", "content": ""})

    runner = FakeRunner(asks)
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        subagent_id = await launch(env, runner)
        polled = await poll(env, subagent_id, yield_time_ms=250)
    assert polled.text == (
        still_running(subagent_id)
        + " [subagent is waiting for approval of 1 tool call(s); poll to review]"
    )
