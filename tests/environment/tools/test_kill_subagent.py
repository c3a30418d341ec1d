"""kill_subagent (reference 3.10) through a real Environment, with fake child sessions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import penguin
from penguin.config import default_tools
from penguin.environment import ToolServices
from penguin.environment.tools.kill_subagent import KillSubagentTool

from ..bare import run_bare
from ..children import Called, FakeRunner, RoundContext, call_tool, environment_config

PROMPT = "Caller agent: default_agent\nWatch the build."


async def kill(env: penguin.Environment, subagent_id: object) -> Called:
    return await call_tool(
        env, "kill_subagent", {"description": "stop it", "subagent_id": subagent_id}
    )


async def launch(env: penguin.Environment, runner: FakeRunner, **args: Any) -> str:
    called = await call_tool(
        env, "run_subagent", {"description": "d", "prompt": PROMPT, "yield_time_ms": 250, **args}
    )
    assert "subagent_id" in called.text, called.text
    return f"subagent-{runner.children[-1].session_id[-8:]}"


@pytest.mark.parametrize("subagent_id", [None, ""])
async def test_3_10_1_missing_subagent_id(workspace: Path, subagent_id: object) -> None:
    async with penguin.Environment.open(environment_config(workspace, FakeRunner())) as env:
        called = await kill(env, subagent_id)
    assert (called.text, called.stop) == (
        'Missing required argument "subagent_id" for kill_subagent.',
        "failed",
    )


async def test_3_10_1_unknown_subagent_id(workspace: Path) -> None:
    async with penguin.Environment.open(environment_config(workspace, FakeRunner())) as env:
        called = await kill(env, "subagent-12345678")
    assert (called.text, called.stop) == (
        "[kill_subagent error: unknown subagent_id subagent-12345678 "
        "(the session may have finished and been cleared)]",
        "failed",
    )


async def test_3_10_1_no_manager_message(workspace: Path) -> None:
    definition = next(d for d in default_tools() if d.name == "kill_subagent")
    tool = KillSubagentTool(definition, ToolServices())
    result, deltas = await run_bare(tool, {}, workspace)
    assert result is not None
    assert result.stop_reason == "failed"
    assert deltas == ["[kill_subagent unavailable: no subagent session manager configured]"]


async def test_3_10_2_running_aborted_approvals_denied_text_drained(
    workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    verdicts: list[str] = []
    asked = trio.Event()

    async def asks(ctx: RoundContext) -> None:
        await ctx.say("before the window ends")
        await trio.sleep(1)
        await ctx.say("after it")
        asked.set()
        verdicts.append(await ctx.ask("write_file", {"file_path": "a", "content": ""}))
        await ctx.block()

    runner = FakeRunner(asks)
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        subagent_id = await launch(env, runner)
        await asked.wait()
        called = await kill(env, subagent_id)
        child = runner.children[0]
        assert child.closed  # when the call returns, the child session is closed
        assert (called.text, called.stop) == (
            f"after it\n[subagent {subagent_id} aborted and removed; "
            "its own trace keeps the work done so far]",
            "completed",
        )
        assert verdicts == ["deny"]
        assert not env.has_running_background_subagents()
        again = await kill(env, subagent_id)
        assert again.stop == "failed"
        assert "unknown subagent_id" in again.text


async def test_3_10_2_idle_session_removed(
    workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    runner = FakeRunner()
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        called = await call_tool(
            env, "run_subagent", {"description": "d", "prompt": PROMPT, "run_in_background": True}
        )
        subagent_id = f"subagent-{runner.children[0].session_id[-8:]}"
        assert "in background" in called.text
        with trio.fail_after(5):
            await env.background_reports.receive()
        called = await kill(env, subagent_id)
    assert (called.text, called.stop) == (
        f"[subagent {subagent_id} was idle; session removed]",
        "completed",
    )


async def test_3_10_2_a_killed_background_subagent_sends_no_report(
    workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    runner = FakeRunner(RoundContext.block)
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        called = await call_tool(
            env, "run_subagent", {"description": "d", "prompt": PROMPT, "run_in_background": True}
        )
        subagent_id = f"subagent-{runner.children[0].session_id[-8:]}"
        assert "in background" in called.text
        killed = await kill(env, subagent_id)
        assert "aborted and removed" in killed.text
        await trio.sleep(60)
        assert env.take_background_reports() == []
