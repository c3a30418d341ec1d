"""run_subagent (reference 3.8) through a real Environment, with fake child sessions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import penguin
from penguin import protocol as om
from penguin.config import default_tools
from penguin.environment import SubagentRequest, ToolServices
from penguin.environment.tools.run_subagent import RunSubagentTool

from ..bare import run_bare
from ..children import (
    FakeResult,
    FakeRunner,
    RoundContext,
    call_tool,
    environment_config,
    subagent_id_in,
)

PROMPT = "Caller agent: default_agent\nCount the files."


def run_args(**args: Any) -> dict[str, Any]:
    return {"description": "delegate", "prompt": PROMPT, **args}


def running_note(subagent_id: str) -> str:
    return (
        f"[subagent running with subagent_id {subagent_id}; use input_subagent to poll "
        "for progress or send a follow-up prompt]"
    )


# --------------------------------------------------------------------------- 3.8.1 checks


async def test_3_8_1_no_runner(workspace: Path) -> None:
    config = penguin.EnvironmentConfig(workspace_dir=workspace)
    async with penguin.Environment.open(config) as env:
        called = await call_tool(env, "run_subagent", {})  # checked before the prompt
    assert (called.text, called.stop) == (
        "[run_subagent unavailable: no subagent runner configured]",
        "failed",
    )


async def test_3_8_1_no_manager(workspace: Path) -> None:
    runner = FakeRunner()
    definition = next(d for d in default_tools() if d.name == "run_subagent")
    tool = RunSubagentTool(definition, ToolServices(subagent_runner=runner))
    result, deltas = await run_bare(tool, run_args(), workspace)
    assert result is not None
    assert result.stop_reason == "failed"
    assert deltas == ["[run_subagent unavailable: no subagent session manager available]"]
    assert runner.requests == []


@pytest.mark.parametrize("prompt", [None, "", "   \n", 42, ["x"]])
async def test_3_8_1_prompt_must_be_a_non_blank_string(workspace: Path, prompt: object) -> None:
    runner = FakeRunner()
    args = run_args(prompt=prompt)
    if prompt is None:
        del args["prompt"]
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        called = await call_tool(env, "run_subagent", args)
    assert (called.text, called.stop) == (
        "[run_subagent error: missing required string argument `prompt`]",
        "failed",
    )
    assert runner.requests == []


@pytest.mark.parametrize(
    "pair", [{"model_id": "m"}, {"provider": "p"}, {"model_id": "m", "provider": 7}]
)
async def test_3_8_1_model_id_and_provider_go_together(
    workspace: Path, pair: dict[str, Any]
) -> None:
    runner = FakeRunner()
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        called = await call_tool(env, "run_subagent", run_args(**pair, thinking_level="bad"))
    assert called.text == (
        "[run_subagent error: `model_id` and `provider` must be given together (a model "
        "reference is the pair), or both omitted to inherit the parent session's model]"
    )
    assert runner.requests == []


@pytest.mark.parametrize(
    ("level", "shown"),
    [("none", '"none"'), ("", '""'), (3, "3"), (2.0, "2"), (False, "false"), ("HIGH", '"HIGH"')],
)
async def test_3_8_1_invalid_thinking_level(workspace: Path, level: object, shown: str) -> None:
    runner = FakeRunner()
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        called = await call_tool(env, "run_subagent", run_args(thinking_level=level))
    assert (called.text, called.stop) == (
        f"[run_subagent error: invalid `thinking_level` {shown}; use one of low / medium / "
        "high / xhigh / max, or omit it to inherit the parent session's level]",
        "failed",
    )
    assert runner.requests == []


async def test_3_8_1_an_interrupted_call_spawns_nothing(workspace: Path) -> None:
    runner = FakeRunner()
    interrupt = trio.Event()
    interrupt.set()
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        called = await call_tool(env, "run_subagent", run_args(), interrupt=interrupt)
    assert (called.text, called.stop) == ("[interrupted: tool aborted by user]", "aborted")
    assert runner.requests == []


async def test_3_8_1_runner_errors_are_reported(workspace: Path) -> None:
    runner = FakeRunner(fail="subagent depth limit 1 reached; not spawning another subagent")
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        called = await call_tool(env, "run_subagent", run_args())
    assert (called.text, called.stop) == (
        "[run_subagent error: subagent depth limit 1 reached; not spawning another subagent]",
        "failed",
    )


async def test_3_8_1_no_room_when_eight_are_running(
    workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    runner = FakeRunner(RoundContext.block)
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        for _ in range(8):
            called = await call_tool(env, "run_subagent", run_args(yield_time_ms=250))
            assert called.text.startswith("[subagent running with subagent_id")
        called = await call_tool(env, "run_subagent", run_args())
        assert (called.text, called.stop) == (
            "[run_subagent error: too many background subagents; "
            "poll or finish existing ones first]",
            "failed",
        )
        assert len(runner.requests) == 8
    assert runner.open_children == []


async def test_total_spawn_cap(workspace: Path) -> None:
    runner = FakeRunner()
    config = environment_config(workspace, runner, subagent_spawn_limit=2)
    async with penguin.Environment.open(config) as env:
        for _ in range(2):
            assert (await call_tool(env, "run_subagent", run_args())).stop == "completed"
        called = await call_tool(env, "run_subagent", run_args())
    assert (called.text, called.stop) == (
        "[run_subagent error: this session has already spawned 2 subagents (the limit); "
        "finish the task with the ones you have]",
        "failed",
    )
    assert len(runner.requests) == 2


# --------------------------------------------------------------------------- 3.8.2 – 3.8.4


async def test_3_8_2_only_the_given_fields_reach_the_runner(workspace: Path) -> None:
    runner = FakeRunner()
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        await call_tool(env, "run_subagent", run_args(thinking_level=None))
        await call_tool(
            env,
            "run_subagent",
            run_args(agent_id="helper", model_id="m", provider="p", thinking_level="xhigh"),
        )
    assert runner.requests == [
        SubagentRequest(),
        SubagentRequest(agent_id="helper", model_id="m", provider="p", thinking_level="xhigh"),
    ]


async def test_18_the_childs_answers_are_mirrored_on_lines_of_their_own(workspace: Path) -> None:
    async def behaviour(ctx: RoundContext) -> None:
        await ctx.say("I will look.")
        await ctx.say("Found it.\n")
        await ctx.say("Done.")

    runner = FakeRunner(behaviour)
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        called = await call_tool(env, "run_subagent", run_args())
    assert (called.text, called.stop) == ("I will look.\nFound it.\nDone.", "completed")


async def test_3_8_3_direct_text_is_mirrored_deeper_text_only_forwarded(workspace: Path) -> None:
    async def behaviour(ctx: RoundContext) -> None:
        await ctx.say("Three ", "files.")
        deep = om.with_origin(om.partial_text("delta", "grandchild text"), "session-grandchild")
        await ctx.send(deep)
        await ctx.send(om.with_origin(om.assistant_text("grandchild text"), "session-grandchild"))

    runner = FakeRunner(behaviour)
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        called = await call_tool(env, "run_subagent", run_args())
    child_id = runner.children[0].session_id
    assert (called.text, called.stop) == ("Three files.", "completed")
    assert "grandchild" not in "".join(called.deltas)
    nested = called.nested
    assert all(m.origin and m.origin[0] == child_id for m in nested)
    deep = [m for m in nested if m.origin == (child_id, "session-grandchild")]
    assert [type(m.payload).__name__ for m in deep] == ["PartialTextPayload", "TextPayload"]
    texts = [m.payload.text for m in nested if isinstance(m.payload, om.TextPayload)]
    assert texts == ["Three files.", "grandchild text"]


async def test_session_meta_flows_out_once_origin_tagged(workspace: Path) -> None:
    runner = FakeRunner()
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        called = await call_tool(env, "run_subagent", run_args())
    child_id = runner.children[0].session_id
    metas = [m for m in called.messages if om.is_session_meta(m)]
    assert len(metas) == 1
    assert metas[0].origin == (child_id,)
    assert metas[0].payload.source == "subagent"
    assert called.messages[1] is metas[0]  # right after start, before any child output


async def test_3_8_4_finished_child_is_released_not_registered(workspace: Path) -> None:
    runner = FakeRunner()
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        called = await call_tool(env, "run_subagent", run_args())
        assert (called.text, called.stop) == (f"done: {PROMPT}", "completed")
        with trio.fail_after(5):
            await runner.wait_all_closed()
        assert env._subagents is not None
        assert len(env._subagents._registry) == 0


async def test_3_8_4_no_text(workspace: Path) -> None:
    async def silent(ctx: RoundContext) -> None:
        await ctx.send(om.request_begin())

    async with penguin.Environment.open(environment_config(workspace, FakeRunner(silent))) as env:
        called = await call_tool(env, "run_subagent", run_args())
    assert (called.text, called.stop) == ("[subagent finished without a text answer]", "completed")


async def test_3_8_4_abort_event(workspace: Path) -> None:
    async def aborts(ctx: RoundContext) -> FakeResult:
        await ctx.say("half")
        await ctx.send(om.abort("model gave up"))
        return FakeResult("aborted")

    async with penguin.Environment.open(environment_config(workspace, FakeRunner(aborts))) as env:
        called = await call_tool(env, "run_subagent", run_args())
    assert (called.text, called.stop) == ("half\n[subagent aborted: model gave up]", "failed")


async def test_3_8_4_abort_without_reason(workspace: Path) -> None:
    async def aborts(ctx: RoundContext) -> FakeResult:
        await ctx.send(om.abort())
        return FakeResult("aborted")

    async with penguin.Environment.open(environment_config(workspace, FakeRunner(aborts))) as env:
        called = await call_tool(env, "run_subagent", run_args())
    assert (called.text, called.stop) == ("[subagent aborted: aborted]", "failed")


async def test_3_8_4_child_run_raised(workspace: Path) -> None:
    async def raises(ctx: RoundContext) -> None:
        await ctx.say("partial")
        raise RuntimeError("the child broke")

    async with penguin.Environment.open(environment_config(workspace, FakeRunner(raises))) as env:
        called = await call_tool(env, "run_subagent", run_args())
    assert (called.text, called.stop) == ("partial\n[subagent error: the child broke]", "failed")


async def test_3_8_4_model_failure_is_reported(workspace: Path) -> None:
    async def fails(ctx: RoundContext) -> FakeResult:
        return FakeResult("auth", "bad key")

    async with penguin.Environment.open(environment_config(workspace, FakeRunner(fails))) as env:
        called = await call_tool(env, "run_subagent", run_args())
    assert (called.text, called.stop) == ("[subagent aborted: bad key]", "failed")


# --------------------------------------------------------------------------- 3.8.5 – 3.8.8


async def test_3_8_5_still_running_is_registered_with_the_approval_hint(
    workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def asks(ctx: RoundContext) -> FakeResult:
        await ctx.say("working")
        await ctx.ask("write_file", {"file_path": "a", "content": ""})
        return await ctx.block()

    runner = FakeRunner(asks)
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        called = await call_tool(env, "run_subagent", run_args(yield_time_ms=1000))
        subagent_id = f"subagent-{runner.children[0].session_id[-8:]}"
        assert called.stop == "completed"
        assert called.text == (
            "working\n"
            + running_note(subagent_id)
            + " [subagent is waiting for approval of 1 tool call(s); poll to review]"
        )
        assert env.has_running_background_subagents()
        assert not runner.children[0].closed
    assert runner.children[0].closed


async def test_3_8_5_window_clamp(workspace: Path, autojump_clock: trio.testing.MockClock) -> None:
    runner = FakeRunner(RoundContext.block)
    tools = [
        attrs.evolve(t, timeout_ms=5000) if t.name == "run_subagent" else t for t in default_tools()
    ]
    async with penguin.Environment.open(environment_config(workspace, runner, tools=tools)) as env:
        start = trio.current_time()
        called = await call_tool(env, "run_subagent", run_args(yield_time_ms=10_000_000))
        assert trio.current_time() - start == pytest.approx(4.0)
        assert called.text.startswith("[subagent running")
        start = trio.current_time()
        called = await call_tool(env, "run_subagent", run_args(yield_time_ms=1))
        assert trio.current_time() - start == pytest.approx(0.25)
        start = trio.current_time()
        called = await call_tool(env, "run_subagent", run_args(yield_time_ms="9"))
        assert trio.current_time() - start == pytest.approx(4.0)  # the default, clamped


async def test_3_8_6_interrupt_in_the_window_kills_the_child(
    workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    asked = trio.Event()

    async def asks(ctx: RoundContext) -> FakeResult:
        asked.set()
        verdict = await ctx.ask("write_file", {"file_path": "a", "content": ""})
        assert verdict == "deny"
        return await ctx.block()

    async def never(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        await trio.sleep_forever()
        raise AssertionError

    runner = FakeRunner(asks)
    interrupt = trio.Event()
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        async with trio.open_nursery() as nursery:

            async def interrupt_later() -> None:
                await asked.wait()
                await trio.sleep(1)
                interrupt.set()

            nursery.start_soon(interrupt_later)
            called = await call_tool(
                env, "run_subagent", run_args(), approve=never, interrupt=interrupt
            )
        assert (called.text, called.stop) == ("[interrupted: tool aborted by user]", "aborted")
        with trio.fail_after(5):
            await runner.wait_all_closed()
        assert env._subagents is not None
        assert len(env._subagents._registry) == 0


async def test_3_8_7_background_launch(workspace: Path) -> None:
    proceed = trio.Event()

    async def works(ctx: RoundContext) -> None:
        await proceed.wait()
        await ctx.say("all ", "counted")

    runner = FakeRunner(works)
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        called = await call_tool(env, "run_subagent", run_args(run_in_background=True))
        child = runner.children[0]
        subagent_id = f"subagent-{child.session_id[-8:]}"
        assert (called.text, called.stop) == (
            f"[subagent running in background with subagent_id {subagent_id}; its completion "
            "will arrive as a user message — no need to poll. Use input_subagent to interact "
            "or kill_subagent to stop it]",
            "completed",
        )
        assert len(called.nested) == 1  # only the session_meta
        assert om.is_session_meta(called.nested[0])
        assert env.has_running_background_subagents()
        proceed.set()
        with trio.fail_after(5):
            report = await env.background_reports.receive()
        assert report == penguin.environment.BackgroundReport(
            kind="subagent",
            id=subagent_id,
            label="Caller agent: default_agent",
            status="completed",
            detail="",
            output="all counted",
        )
        tapped = []
        while True:
            try:
                tapped.append(env.subagent_messages.receive_nowait())
            except trio.WouldBlock:
                break
        assert all(m.origin == (child.session_id,) for m in tapped)
        assert [m.payload.text for m in tapped if isinstance(m.payload, om.TextPayload)] == [
            "all counted"
        ]
        assert not env.has_running_background_subagents()


async def test_3_8_8_subagent_id_from_the_session_id_random_on_collision(
    workspace: Path,
) -> None:
    ids = ["session-2026-01-02-03-04-05-0000abcd", "session-2026-01-02-03-04-06-0000abcd"]
    runner = FakeRunner(RoundContext.block, ids=ids)
    async with penguin.Environment.open(environment_config(workspace, runner)) as env:
        first = await call_tool(env, "run_subagent", run_args(run_in_background=True))
        second = await call_tool(env, "run_subagent", run_args(run_in_background=True))
    assert subagent_id_in(first.text) == "subagent-0000abcd"
    other = subagent_id_in(second.text)
    assert other != "subagent-0000abcd"
    assert other.startswith("subagent-")
    assert len(other) == len("subagent-") + 8
