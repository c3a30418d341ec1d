"""The Environment's execution contract, reference 1, driven with real custom tools."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import penguin
from penguin import protocol as om
from penguin.environment import ToolContext, ToolResult

from ..stopped_server import stopped_server

Message = om.OmniMessage[om.Payload]
Behaviour = Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult | None]]


@attrs.define
class ScriptTool:
    """A custom tool whose behaviour is a test-supplied coroutine function."""

    behaviour: Behaviour
    name: str = "script"
    timeout_ms: int = 120_000
    max_output_length: int = 16_000
    permission: penguin.config.Permission | None = "r"
    calls: list[dict[str, Any]] = attrs.Factory(list)

    @property
    def definition(self) -> penguin.ToolDefinitionConfig:
        return penguin.ToolDefinitionConfig(
            name=self.name,
            description="A scripted tool for tests.",
            parameters={"type": "object", "properties": {}},
            permission=self.permission,
            timeout_ms=self.timeout_ms,
            max_output_length=self.max_output_length,
        )

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        self.calls.append(args)
        return await self.behaviour(args, ctx)


def emits(*parts: str, result: ToolResult | None = None) -> Behaviour:
    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        for part in parts:
            await ctx.emit(part)
        return result

    return behaviour


async def collect(
    env: penguin.Environment,
    call: om.OmniMessage[om.ToolCallPayload],
    *,
    interrupt: trio.Event | None = None,
    approve: om.ApproveFn | None = None,
) -> list[Message]:
    async with env.execute_tool(call, interrupt=interrupt, approve=approve) as stream:
        return [message async for message in stream]


def config(workspace: Path, *tools: ScriptTool, **kwargs: Any) -> penguin.EnvironmentConfig:
    return penguin.EnvironmentConfig(
        workspace_dir=workspace, tools=kwargs.pop("tools", []), custom_tools=tools, **kwargs
    )


def script_call(args: str | dict[str, Any] | None = None, call_id: str = "call_1") -> Any:
    return om.tool_call("script", "{}" if args is None else args, call_id)


def shape(messages: list[Message]) -> list[tuple[str, str, str | None]]:
    out: list[tuple[str, str, str | None]] = []
    for message in messages:
        payload = message.payload
        if isinstance(payload, om.PartialToolCallOutputPayload):
            out.append((payload.event_type, payload.output, payload.stop_reason))
        elif isinstance(payload, om.ToolCallOutputPayload):
            out.append(("complete", payload.output, payload.stop_reason))
        else:
            out.append(("other", getattr(payload, "type", message.type), None))
    return out


def check_invariants(messages: list[Message], call_id: str = "call_1") -> om.ToolCallOutputPayload:
    own = [m for m in messages if not m.origin]
    assert isinstance(own[0].payload, om.PartialToolCallOutputPayload)
    assert own[0].payload.event_type == "start"
    final = own[-1].payload
    stop = own[-2].payload
    assert isinstance(final, om.ToolCallOutputPayload)
    assert isinstance(stop, om.PartialToolCallOutputPayload)
    assert stop.event_type == "stop"
    assert stop.stop_reason == final.stop_reason
    deltas = [
        m.payload
        for m in own
        if isinstance(m.payload, om.PartialToolCallOutputPayload)
        and m.payload.event_type == "delta"
    ]
    assert "".join(d.output for d in deltas) == final.output
    assert final.output
    for message in own:
        assert getattr(message.payload, "tool_call_id", call_id) == call_id
    if final.images:
        assert final.stop_reason == "completed"
        image_delta = own[-3].payload
        assert isinstance(image_delta, om.PartialToolCallOutputPayload)
        assert (image_delta.event_type, image_delta.output) == ("delta", "")
        assert image_delta.images == final.images
    return final


# --------------------------------------------------------------------------- §1.1–1.4


async def test_1_1_stream_shape_start_deltas_stop_complete(tmp_path: Path) -> None:
    tool = ScriptTool(emits("a", "b"))
    async with penguin.Environment.open(config(tmp_path, tool)) as env:
        messages = await collect(env, script_call())
    assert shape(messages) == [
        ("start", "", "completed"),
        ("delta", "a", "completed"),
        ("delta", "b", "completed"),
        ("stop", "", "completed"),
        ("complete", "ab", "completed"),
    ]


async def test_1_1_deltas_stream_as_they_are_emitted(tmp_path: Path) -> None:
    seen: list[str] = []
    first_seen = trio.Event()

    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> None:
        await ctx.emit("first")
        await first_seen.wait()  # only the consumer's receipt can release this
        await ctx.emit("second")

    tool = ScriptTool(behaviour)
    async with (
        penguin.Environment.open(config(tmp_path, tool)) as env,
        env.execute_tool(script_call()) as stream,
    ):
        async for message in stream:
            if (
                isinstance(message.payload, om.PartialToolCallOutputPayload)
                and message.payload.output
            ):
                seen.append(message.payload.output)
                first_seen.set()
    assert seen == ["first", "second"]


async def test_1_2_tool_call_id_is_always_the_requests(tmp_path: Path) -> None:
    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> None:
        await ctx.forward(om.partial_tool_call_output("delta", "x", "someone-else"))
        await ctx.forward(om.tool_call_output("xy", "someone-else"))

    async with penguin.Environment.open(config(tmp_path, ScriptTool(behaviour))) as env:
        messages = await collect(env, script_call(call_id="mine"))
    assert {m.payload.tool_call_id for m in messages} == {"mine"}  # type: ignore[union-attr]
    assert check_invariants(messages, "mine").output == "xy"


async def test_1_3_unknown_tool_is_exactly_four_messages(tmp_path: Path) -> None:
    async with penguin.Environment.open(config(tmp_path)) as env:
        messages = await collect(env, om.tool_call("nope", "{}", "c9"))
    assert shape(messages) == [
        ("start", "", "completed"),
        ("delta", "Unknown tool: nope", "completed"),
        ("stop", "", "failed"),
        ("complete", "Unknown tool: nope", "failed"),
    ]


async def test_1_3_configured_name_without_implementation_is_unknown(tmp_path: Path) -> None:
    entry = penguin.ToolDefinitionConfig(name="not_a_builtin", description="x")
    cfg = penguin.EnvironmentConfig(workspace_dir=tmp_path, tools=[entry])
    async with penguin.Environment.open(cfg) as env:
        out = await env.call_tool(om.tool_call("not_a_builtin", "{}", "c"))
        assert await env.list_tools() == []
    assert (out.payload.output, out.payload.stop_reason) == (
        "Unknown tool: not_a_builtin",
        "failed",
    )


async def streams_then_replaces(args: dict[str, Any], ctx: ToolContext) -> None:
    await ctx.emit("abc")
    await ctx.forward(om.tool_call_output("xyz", "any"))  # does not extend what streamed


@pytest.mark.parametrize(
    ("behaviour", "limit", "name", "raw"),
    [
        (emits("a", "b"), 16_000, "script", "{}"),
        (emits("x" * 50, "y" * 50), 30, "script", "{}"),  # truncated while it streams
        (
            emits("partial", result=ToolResult(stop_reason="failed", note="[why]")),
            0,
            "script",
            "{}",
        ),
        (streams_then_replaces, 16_000, "script", "{}"),  # a complete output that does not fit
        (emits("never"), 16_000, "nope", "{}"),  # unknown tool: the fail-fast shape
        (emits("never"), 16_000, "script", "{oops"),  # invalid JSON: the fail-fast shape
    ],
)
async def test_1_1_call_tool_returns_the_streams_complete_message(
    tmp_path: Path, behaviour: Behaviour, limit: int, name: str, raw: str
) -> None:
    """call_tool builds no partial messages, and its final is the stream's, byte for byte."""
    tool = ScriptTool(behaviour, max_output_length=limit)
    async with penguin.Environment.open(config(tmp_path, tool)) as env:
        streamed = await collect(env, om.tool_call(name, raw, "c1"))
        returned = await env.call_tool(om.tool_call(name, raw, "c1"))
    final = streamed[-1]
    assert isinstance(final.payload, om.ToolCallOutputPayload)
    assert attrs.evolve(returned, timestamp=final.timestamp) == final


@pytest.mark.parametrize("raw", ["", "   ", "\n\t"])
async def test_1_4_empty_arguments(tmp_path: Path, raw: str) -> None:
    tool = ScriptTool(emits("never"))
    async with penguin.Environment.open(config(tmp_path, tool)) as env:
        messages = await collect(env, script_call(raw))
    text = (
        'Tool call "script" failed: the arguments field is empty. '
        "Re-issue the call with a complete JSON object."
    )
    assert shape(messages) == [
        ("start", "", "completed"),
        ("delta", text, "completed"),
        ("stop", "", "failed"),
        ("complete", text, "failed"),
    ]
    assert tool.calls == []


@pytest.mark.parametrize("raw", ['{"a": 1', "{'a': 1}", '{"a": NaN}', "[" * 100_000])
async def test_1_4_invalid_json_arguments(tmp_path: Path, raw: str) -> None:
    tool = ScriptTool(emits("never"))
    async with penguin.Environment.open(config(tmp_path, tool)) as env:
        out = await env.call_tool(script_call(raw))
    assert out.payload.stop_reason == "failed"
    assert out.payload.output.startswith(
        'Tool call "script" failed: the arguments are not valid JSON ('
    )
    assert out.payload.output.endswith("). Re-issue the call with one complete, valid JSON object.")
    assert tool.calls == []


@pytest.mark.parametrize("raw", ["42", '"x"', "null", "[1, 2]", "true"])
async def test_1_4_non_object_arguments_behave_as_empty_object(tmp_path: Path, raw: str) -> None:
    tool = ScriptTool(emits("ok"))
    async with penguin.Environment.open(config(tmp_path, tool)) as env:
        out = await env.call_tool(script_call(raw))
    assert tool.calls == [{}]
    assert out.payload.output == "ok"


# --------------------------------------------------------------------------- §1.5–1.6


async def test_1_5_zero_limits_disable_truncation_and_timeout(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> None:
        await trio.sleep(10_000)
        await ctx.emit("y" * 50_000)

    tool = ScriptTool(behaviour, timeout_ms=0, max_output_length=0)
    async with penguin.Environment.open(config(tmp_path, tool)) as env:
        out = await env.call_tool(script_call())
    assert out.payload.output == "y" * 50_000
    assert out.payload.stop_reason == "completed"


async def test_1_6_context_carries_workspace_call_id_definition_and_approver(
    tmp_path: Path,
) -> None:
    seen: dict[str, Any] = {}

    def approver(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        return "allow"

    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> None:
        seen.update(
            workspace=ctx.workspace_dir,
            call_id=ctx.tool_call_id,
            approve=ctx.approve,
            name=ctx.definition.name,
        )

    async with penguin.Environment.open(config(tmp_path, ScriptTool(behaviour))) as env:
        await env.call_tool(script_call(call_id="cx"), approve=approver)
    assert seen == {
        "workspace": await trio.Path(tmp_path).resolve(),
        "call_id": "cx",
        "approve": approver,
        "name": "script",
    }


# --------------------------------------------------------------------------- §1.7


async def test_1_7a_origin_messages_pass_through_unchanged_and_take_no_part(tmp_path: Path) -> None:
    nested = om.with_origin(om.assistant_text("from the child"), "child-1")
    nested_partial = om.with_origin(om.partial_tool_call_output("delta", "child out", "other"), "c")

    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> None:
        await ctx.emit("own ")
        await ctx.forward(nested)
        await ctx.forward(nested_partial)
        await ctx.emit("text")

    async with penguin.Environment.open(config(tmp_path, ScriptTool(behaviour))) as env:
        messages = await collect(env, script_call())
    assert messages[2] is nested
    assert messages[3] is nested_partial
    assert check_invariants(messages).output == "own text"


async def test_1_7b_head_keep_truncation(tmp_path: Path) -> None:
    tool = ScriptTool(emits("abc", "defg", "hij"), max_output_length=5)
    async with penguin.Environment.open(config(tmp_path, tool)) as env:
        messages = await collect(env, script_call())
    assert shape(messages) == [
        ("start", "", "completed"),
        ("delta", "abc", "completed"),
        ("delta", "de", "completed"),
        ("delta", "\n[output truncated: exceeded 5 chars]", "completed"),
        ("stop", "", "completed"),
        ("complete", "abcde\n[output truncated: exceeded 5 chars]", "completed"),
    ]


async def test_1_7c_tool_start_stop_and_empty_deltas_and_images_are_ignored(tmp_path: Path) -> None:
    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> None:
        await ctx.forward(om.partial_tool_call_output("start", "S", "x"))
        await ctx.forward(om.partial_tool_call_output("delta", "", "x", images=["data:a"]))
        await ctx.forward(om.partial_tool_call_output("delta", "kept", "x", images=["data:b"]))
        await ctx.forward(om.partial_tool_call_output("stop", "T", "x", "failed"))
        await ctx.emit("")

    async with penguin.Environment.open(config(tmp_path, ScriptTool(behaviour))) as env:
        messages = await collect(env, script_call())
    final = check_invariants(messages)
    assert (final.output, final.stop_reason, final.images) == ("kept", "completed", None)
    assert len(messages) == 4


async def test_1_7d_complete_output_becomes_the_basis_and_the_self_report(tmp_path: Path) -> None:
    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> None:
        await ctx.emit("ab")
        await ctx.forward(om.tool_call_output("abcdef", "x", "failed"))

    tool = ScriptTool(behaviour, max_output_length=4)
    async with penguin.Environment.open(config(tmp_path, tool)) as env:
        messages = await collect(env, script_call())
    final = check_invariants(messages)
    assert final.output == "abcd\n[output truncated: exceeded 4 chars]"
    assert final.stop_reason == "failed"


async def test_1_7e_unexpected_message_types_are_ignored_with_a_stderr_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> None:
        await ctx.forward(om.assistant_text("hello"))
        await ctx.forward(om.request_begin())

    async with penguin.Environment.open(config(tmp_path, ScriptTool(behaviour))) as env:
        out = await env.call_tool(script_call())
    assert out.payload.output == "[no output]"
    assert [r.getMessage() for r in caplog.records if r.name == "penguin"] == [
        '[penguin] tool "script" yielded unexpected message type "text"; ignored.',
        '[penguin] tool "script" yielded unexpected message type "request_begin"; ignored.',
    ]


async def test_1_7f_returned_stop_reason_overrides_the_complete_messages(tmp_path: Path) -> None:
    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await ctx.forward(om.tool_call_output("x", "x", "failed"))
        return ToolResult(stop_reason="completed")

    async with penguin.Environment.open(config(tmp_path, ScriptTool(behaviour))) as env:
        out = await env.call_tool(script_call())
    assert (out.payload.output, out.payload.stop_reason) == ("x", "completed")


async def test_1_7g_exception_keeps_forwarded_content(tmp_path: Path) -> None:
    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> None:
        await ctx.emit("partial work\n")
        raise RuntimeError("disk on fire")

    async with penguin.Environment.open(config(tmp_path, ScriptTool(behaviour))) as env:
        messages = await collect(env, script_call())
    final = check_invariants(messages)
    assert (final.output, final.stop_reason) == (
        "partial work\n\n[tool error] disk on fire",
        "failed",
    )


async def test_1_7g_exception_without_message_names_its_type(tmp_path: Path) -> None:
    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> None:
        raise KeyError

    async with penguin.Environment.open(config(tmp_path, ScriptTool(behaviour))) as env:
        out = await env.call_tool(script_call())
    assert out.payload.output == "[tool error] KeyError"


# --------------------------------------------------------------------------- §1.8


async def test_1_8d_timeout_marker(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> None:
        await ctx.emit("started")
        await trio.sleep_forever()

    tool = ScriptTool(behaviour, timeout_ms=1500)
    async with penguin.Environment.open(config(tmp_path, tool)) as env:
        start = trio.current_time()
        messages = await collect(env, script_call())
        elapsed = trio.current_time() - start
    final = check_invariants(messages)
    assert (final.output, final.stop_reason) == (
        "started\n[tool timeout: exceeded 1500ms]",
        "failed",
    )
    assert elapsed == pytest.approx(1.5)


async def test_9_6_an_untimed_block_is_not_on_the_timeout_clock(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # What exec_command does with the one-time login environment (reference 1.5 counts the
    # call's own work): 0.4 s + 0.4 s of work around a 5 s wait fit a 1 s timeout.
    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> None:
        await trio.sleep(0.4)
        async with ctx.untimed():
            await trio.sleep(5)
        await trio.sleep(0.4)
        await ctx.emit("done")

    tool = ScriptTool(behaviour, timeout_ms=1000)
    async with penguin.Environment.open(config(tmp_path, tool)) as env:
        start = trio.current_time()
        out = await env.call_tool(script_call())
        assert (out.payload.output, out.payload.stop_reason) == ("done", "completed")
        assert trio.current_time() - start == pytest.approx(5.8)

        async def too_slow(args: dict[str, Any], ctx: ToolContext) -> None:
            await trio.sleep(0.6)
            async with ctx.untimed():
                await trio.sleep(5)
            await trio.sleep(0.6)  # the clock resumes where it stopped: 0.4 s are left

        tool.behaviour = too_slow
        start = trio.current_time()
        out = await env.call_tool(script_call())
        assert (out.payload.output, out.payload.stop_reason) == (
            "[tool timeout: exceeded 1000ms]",
            "failed",
        )
        assert trio.current_time() - start == pytest.approx(6.0)


async def test_9_6_an_interrupt_still_ends_an_untimed_block(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    interrupt = trio.Event()

    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> None:
        async with ctx.untimed():
            interrupt.set()
            await trio.sleep_forever()

    tool = ScriptTool(behaviour, timeout_ms=1000)
    async with penguin.Environment.open(config(tmp_path, tool)) as env:
        out = await env.call_tool(script_call(), interrupt=interrupt)
    assert (out.payload.output, out.payload.stop_reason) == (
        "[interrupted: tool aborted by user]",
        "aborted",
    )


async def test_1_8d_priority_interrupt_beats_timeout(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    interrupt = trio.Event()

    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> None:
        try:
            await trio.sleep_forever()
        finally:
            interrupt.set()  # the user interrupts while the timeout is unwinding the tool

    tool = ScriptTool(behaviour, timeout_ms=1000)
    async with penguin.Environment.open(config(tmp_path, tool)) as env:
        out = await env.call_tool(script_call(), interrupt=interrupt)
    assert (out.payload.output, out.payload.stop_reason) == (
        "[interrupted: tool aborted by user]",
        "aborted",
    )


async def test_1_8d_interrupt_cancels_a_running_tool(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    interrupt = trio.Event()
    cleaned_up = trio.Event()

    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> None:
        await ctx.emit("working")
        try:
            await trio.sleep_forever()
        finally:
            cleaned_up.set()

    async def interrupt_soon() -> None:
        await trio.sleep(2)
        interrupt.set()

    async with (
        penguin.Environment.open(config(tmp_path, ScriptTool(behaviour))) as env,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(interrupt_soon)
        messages = await collect(env, script_call(), interrupt=interrupt)
    final = check_invariants(messages)
    assert (final.output, final.stop_reason) == (
        "working\n[interrupted: tool aborted by user]",
        "aborted",
    )
    assert cleaned_up.is_set()


async def test_1_8_already_set_interrupt_starts_the_tool_in_a_cancelled_scope(
    tmp_path: Path,
) -> None:
    progress: list[str] = []

    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> None:
        progress.append("started")
        await trio.lowlevel.checkpoint()
        progress.append("past the first checkpoint")

    interrupt = trio.Event()
    interrupt.set()
    async with penguin.Environment.open(config(tmp_path, ScriptTool(behaviour))) as env:
        out = await env.call_tool(script_call(), interrupt=interrupt)
    assert progress == ["started"]
    assert out.payload.stop_reason == "aborted"


async def test_1_8e_tool_error_beats_self_report(tmp_path: Path) -> None:
    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await ctx.forward(om.tool_call_output("x", "x", "completed"))
        raise ValueError("bad")

    async with penguin.Environment.open(config(tmp_path, ScriptTool(behaviour))) as env:
        out = await env.call_tool(script_call())
    assert (out.payload.output, out.payload.stop_reason) == ("x\n[tool error] bad", "failed")


async def test_1_8e_self_reported_abort_after_timeout_is_a_timeout(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            return ToolResult(stop_reason="aborted")  # a misbehaving tool swallows the cancel
        raise AssertionError("unreachable")

    tool = ScriptTool(behaviour, timeout_ms=300)
    async with penguin.Environment.open(config(tmp_path, tool)) as env:
        out = await env.call_tool(script_call())
    assert (out.payload.output, out.payload.stop_reason) == (
        "[tool timeout: exceeded 300ms]",
        "failed",
    )


async def test_1_8c_interrupt_during_archive_write_does_not_change_the_outcome(
    tmp_path: Path,
) -> None:
    interrupt = trio.Event()

    async def interrupt_when_everything_waits() -> None:
        # The only moment every task is blocked is while the archive is written in a
        # worker thread: the tool never blocks, and the consumer is always fed.
        await trio.testing.wait_all_tasks_blocked()
        interrupt.set()

    tool = ScriptTool(emits("x" * 100), max_output_length=10)
    cfg = config(tmp_path, tool, scratchpad_dir=tmp_path / "scratch")
    async with penguin.Environment.open(cfg) as env, trio.open_nursery() as nursery:
        nursery.start_soon(interrupt_when_everything_waits)
        messages = await collect(env, script_call(), interrupt=interrupt)
    final = check_invariants(messages)
    assert interrupt.is_set()
    assert final.stop_reason == "completed"
    assert "[output archived: " in final.output
    assert "[interrupted" not in final.output


# --------------------------------------------------------------------------- §1.9 and §2 wiring


async def test_1_9c_images_delta_comes_last_before_stop_only_when_completed(tmp_path: Path) -> None:
    images = ("data:image/png;base64,AAAA",)
    ok = ScriptTool(emits("pic", result=ToolResult(images=images)), name="ok")
    bad = ScriptTool(
        emits("pic", result=ToolResult(images=images, stop_reason="failed")), name="bad"
    )
    async with penguin.Environment.open(config(tmp_path, ok, bad)) as env:
        good_msgs = await collect(env, om.tool_call("ok", "{}", "call_1"))
        bad_msgs = await collect(env, om.tool_call("bad", "{}", "call_1"))
    assert check_invariants(good_msgs).images == images
    assert shape(good_msgs)[-3] == ("delta", "", "completed")
    assert good_msgs[-3].payload.images == images  # type: ignore[union-attr]
    assert check_invariants(bad_msgs).images is None
    assert all(getattr(m.payload, "images", None) is None for m in bad_msgs)


async def test_2_1_archive_note_and_file_when_scratchpad_is_set(tmp_path: Path) -> None:
    tool = ScriptTool(emits("0123456789", "abcdef"), max_output_length=12)
    cfg = config(tmp_path, tool, scratchpad_dir=tmp_path / "scratch")
    async with penguin.Environment.open(cfg) as env:
        out = await env.call_tool(script_call())
    lines = out.payload.output.split("\n")
    assert lines[0] == "0123456789ab"
    assert lines[1] == "[output truncated: exceeded 12 chars]"
    assert lines[2].startswith("[output archived: ")
    assert lines[2].endswith("]")
    archived = trio.Path(lines[2][len("[output archived: ") : -1])
    assert str(archived.parent) == str(tmp_path / "scratch" / "truncated-tool-output")
    assert await archived.read_text() == "0123456789abcdef"
    assert os.stat(archived).st_mode & 0o777 == 0o600


async def test_2_1_no_archive_without_scratchpad_and_nothing_on_disk_when_untruncated(
    tmp_path: Path,
) -> None:
    long_tool = ScriptTool(emits("x" * 20), max_output_length=5, name="long")
    short_tool = ScriptTool(emits("x"), max_output_length=5, name="short")
    async with penguin.Environment.open(config(tmp_path, long_tool)) as env:
        out = await env.call_tool(om.tool_call("long", "{}", "c"))
    assert out.payload.output == "xxxxx\n[output truncated: exceeded 5 chars]"
    scratch = tmp_path / "scratch"
    async with penguin.Environment.open(
        config(tmp_path, short_tool, scratchpad_dir=scratch)
    ) as env:
        await env.call_tool(om.tool_call("short", "{}", "c"))
    assert not scratch.exists()


async def test_2_2_origin_tagged_output_never_causes_an_archive(tmp_path: Path) -> None:
    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> None:
        await ctx.forward(
            om.with_origin(om.partial_tool_call_output("delta", "y" * 100, "k"), "kid")
        )

    tool = ScriptTool(behaviour, max_output_length=5)
    scratch = tmp_path / "scratch"
    async with penguin.Environment.open(config(tmp_path, tool, scratchpad_dir=scratch)) as env:
        out = await env.call_tool(script_call())
    assert out.payload.output == "[no output]"
    assert not scratch.exists()


# --------------------------------------------------------------------------- hard stop, concurrency


async def test_leaving_the_stream_early_is_a_hard_stop(tmp_path: Path) -> None:
    cancelled = trio.Event()

    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> None:
        await ctx.emit("one")
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.set()
            raise

    async with penguin.Environment.open(config(tmp_path, ScriptTool(behaviour))) as env:
        received: list[Message] = []
        async with env.execute_tool(script_call()) as stream:
            async for message in stream:
                received.append(message)
                if len(received) == 2:
                    break
    assert cancelled.is_set()
    assert shape(received) == [("start", "", "completed"), ("delta", "one", "completed")]


async def test_a_callers_exception_in_the_block_comes_out_unwrapped(tmp_path: Path) -> None:
    async with penguin.Environment.open(config(tmp_path, ScriptTool(emits("x")))) as env:
        with pytest.raises(LookupError, match="mine"):
            async with env.execute_tool(script_call()):
                raise LookupError("mine")


async def test_calls_run_concurrently(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> None:
        await trio.sleep(1)
        await ctx.emit(str(args["n"]))

    results: dict[int, str] = {}
    async with penguin.Environment.open(config(tmp_path, ScriptTool(behaviour))) as env:

        async def one(n: int) -> None:
            out = await env.call_tool(script_call({"n": n}, call_id=f"c{n}"))
            results[n] = out.payload.output

        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            for n in range(5):
                nursery.start_soon(one, n)
        assert trio.current_time() - start == pytest.approx(1.0)
    assert results == {n: str(n) for n in range(5)}


async def test_execute_after_close_raises(tmp_path: Path) -> None:
    async with penguin.Environment.open(config(tmp_path, ScriptTool(emits("x")))) as env:
        pass
    with pytest.raises(penguin.EnvironmentClosedError):
        await env.call_tool(script_call())


async def test_open_rejects_a_missing_workspace(tmp_path: Path) -> None:
    with pytest.raises(penguin.WorkspaceError, match="does not exist"):
        async with penguin.Environment.open(config(tmp_path / "missing")):
            pass  # pragma: no cover
    (tmp_path / "file").write_text("")
    with pytest.raises(penguin.WorkspaceError, match="is not a directory"):
        async with penguin.Environment.open(config(tmp_path / "file")):
            pass  # pragma: no cover


async def test_open_rejects_a_workspace_that_cannot_be_read(tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    remote.mkdir()
    with stopped_server(remote) as server:
        server.answer()  # the file server refuses every look into the workspace
        with pytest.raises(penguin.WorkspaceError) as raised:
            async with penguin.Environment.open(config(remote)):
                pass  # pragma: no cover
    assert str(raised.value) == f"workspace {str(remote)!r} cannot be read: Connection refused"
    assert raised.value.path == remote


async def test_opening_on_a_workspace_whose_server_stopped_answering_can_be_cancelled(
    tmp_path: Path,
) -> None:
    remote = tmp_path / "remote"
    remote.mkdir()
    with stopped_server(remote) as server:
        with trio.move_on_after(0.2) as scope:
            async with penguin.Environment.open(config(remote)):
                pass  # pragma: no cover
        given_up = server.given_up  # before the block's end answers it
    assert scope.cancelled_caught
    assert not given_up  # the opening was left while the server still did not answer


async def test_custom_tool_may_not_shadow_a_builtin(tmp_path: Path) -> None:
    clash = ScriptTool(emits("x"), name="read_file")
    cfg = penguin.EnvironmentConfig(workspace_dir=tmp_path, custom_tools=[clash])
    with pytest.raises(ValueError, match="read_file"):
        async with penguin.Environment.open(cfg):
            pass  # pragma: no cover


async def test_returning_something_else_is_a_tool_error(tmp_path: Path) -> None:
    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> Any:
        return "done"

    async with penguin.Environment.open(config(tmp_path, ScriptTool(behaviour))) as env:
        out = await env.call_tool(script_call())
    assert out.payload.output == "[tool error] tool returned str, expected a ToolResult or None"


# --------------------------------------------------------------------------- §1.10–1.11


async def test_1_10_list_tools_config_order_then_custom_no_leaks(tmp_path: Path) -> None:
    defaults = penguin.config.default_tools()
    custom = ScriptTool(emits("x"), name="shout")
    cfg = penguin.EnvironmentConfig(
        workspace_dir=tmp_path, tools=list(reversed(defaults)), custom_tools=[custom]
    )
    async with penguin.Environment.open(cfg) as env:
        listed = await env.list_tools()
    names = [t.name for t in listed]
    implemented = [d.name for d in reversed(defaults) if d.name in _builtin_names()]
    assert names == [*implemented, "shout"]
    for tool in listed:
        assert set(attrs.asdict(tool)) == {"name", "description", "parameters"}


async def test_1_10_call_description_false_is_applied_to_the_listing(tmp_path: Path) -> None:
    [read] = [d for d in penguin.config.default_tools() if d.name == "write_file"]
    schema = {
        "type": "object",
        "properties": {"description": {"type": "string"}, "file_path": {"type": "string"}},
        "required": ["description", "file_path"],
    }
    entry = attrs.evolve(read, parameters=schema, call_description=False)
    cfg = penguin.EnvironmentConfig(workspace_dir=tmp_path, tools=[entry])
    async with penguin.Environment.open(cfg) as env:
        [listed] = await env.list_tools()
    assert listed.parameters == {
        "type": "object",
        "properties": {"file_path": {"type": "string"}},
        "required": ["file_path"],
    }
    assert entry.parameters == schema  # the stored config is never rewritten


async def test_1_11_tool_permission(tmp_path: Path) -> None:
    entries = [
        penguin.ToolDefinitionConfig(name="read_file", description="r", permission="r"),
        penguin.ToolDefinitionConfig(name="unimplemented", description="u", permission="rw"),
        penguin.ToolDefinitionConfig(name="write_file", description="w"),
    ]
    custom = ScriptTool(emits("x"), name="mine", permission="rw")
    cfg = penguin.EnvironmentConfig(workspace_dir=tmp_path, tools=entries, custom_tools=[custom])
    async with penguin.Environment.open(cfg) as env:
        assert env.tool_permission("read_file") == "r"
        assert env.tool_permission("unimplemented") == "rw"
        assert env.tool_permission("write_file") is None
        assert env.tool_permission("mine") == "rw"
        assert env.tool_permission("absent") is None


def _builtin_names() -> set[str]:
    from penguin.environment.tools.registry import BUILTIN_TOOLS

    return set(BUILTIN_TOOLS)


# --------------------------------------------------------------------------- the property


@attrs.frozen
class Plan:
    deltas: list[str]
    limit: int
    ending: str  # "return" | "raise" | "timeout" | "interrupt"
    stop: om.StopReason | None
    note: str | None
    images: tuple[str, ...]
    archive: bool


PLANS = st.builds(
    Plan,
    deltas=st.lists(st.text(max_size=20), max_size=10),
    limit=st.integers(min_value=-1, max_value=50),
    ending=st.sampled_from(["return", "raise", "timeout", "interrupt"]),
    stop=st.none() | st.sampled_from(["completed", "failed", "aborted"]),
    note=st.none() | st.text(min_size=1, max_size=10),
    images=st.lists(st.just("data:image/png;base64,AA=="), max_size=2).map(tuple),
    archive=st.booleans(),
)


@settings(max_examples=150, deadline=None)
@given(plan=PLANS)
def test_property_closeout_of_any_call(
    tmp_path_factory: pytest.TempPathFactory, plan: Plan
) -> None:
    workspace = tmp_path_factory.mktemp("ws")
    interrupt = trio.Event()

    async def behaviour(args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        for delta in plan.deltas:
            await ctx.emit(delta)
        if plan.ending == "raise":
            raise RuntimeError("boom")
        if plan.ending == "interrupt":
            interrupt.set()
            await trio.sleep_forever()
        if plan.ending == "timeout":
            await trio.sleep_forever()
        return ToolResult(stop_reason=plan.stop, note=plan.note, images=plan.images)

    tool = ScriptTool(behaviour, timeout_ms=50, max_output_length=plan.limit)
    scratch = workspace / "scratch" if plan.archive else None

    async def main() -> list[Message]:
        async with penguin.Environment.open(config(workspace, tool, scratchpad_dir=scratch)) as env:
            return await collect(env, script_call(), interrupt=interrupt)

    messages = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    final = check_invariants(messages)
    expected_marker = {
        "raise": "[tool error] boom",
        "timeout": "[tool timeout: exceeded 50ms]",
        "interrupt": "[interrupted: tool aborted by user]",
    }.get(plan.ending)
    if plan.ending == "return" and plan.stop == "aborted":
        expected_marker = "[interrupted: tool aborted by user]"
    if expected_marker:
        assert final.output.endswith(expected_marker)
    if final.stop_reason != "completed":
        assert final.images is None
    elif plan.images:
        assert final.images == plan.images
    visible = "".join(plan.deltas)
    if plan.limit > 0 and len(visible) > plan.limit:
        assert final.output.startswith(visible[: plan.limit] + "\n[output truncated: exceeded ")


async def test_0_4_limits_count_code_points(tmp_path: Path) -> None:
    tool = ScriptTool(emits("😀" * 3, "é" * 3), max_output_length=4)
    async with penguin.Environment.open(config(tmp_path, tool)) as env:
        out = await env.call_tool(script_call())
    assert out.payload.output == "😀😀😀é\n[output truncated: exceeded 4 chars]"


async def test_custom_tool_name_must_match_its_definition(tmp_path: Path) -> None:
    @attrs.define
    class Renamed(ScriptTool):
        @property
        def definition(self) -> penguin.ToolDefinitionConfig:
            return attrs.evolve(super().definition, name="other")

    with pytest.raises(ValueError, match=r"definition\.name 'other'"):
        async with penguin.Environment.open(config(tmp_path, Renamed(emits("x")))):
            pass  # pragma: no cover


async def test_two_custom_tools_may_not_share_a_name(tmp_path: Path) -> None:
    twins = (ScriptTool(emits("a")), ScriptTool(emits("b")))
    with pytest.raises(ValueError, match="two custom tools are named 'script'"):
        async with penguin.Environment.open(config(tmp_path, *twins)):
            pass  # pragma: no cover


class _Spawns(trio.abc.Instrument):
    """Counts the tasks started and ended whose coroutine has a given name."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.started = 0
        self.ended = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.started += task.coro.__qualname__.endswith(self.name)

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self.ended += task.coro.__qualname__.endswith(self.name)


async def test_20_1_calls_sharing_an_interrupt_one_after_another_start_one_watch(
    tmp_path: Path,
) -> None:
    watches = _Spawns("_InterruptWatcher._wait")
    first, second = trio.Event(), trio.Event()
    tool = ScriptTool(emits("ok"))
    async with penguin.Environment.open(config(tmp_path, tool)) as env:
        trio.lowlevel.add_instrument(watches)
        try:
            for n in range(3):  # a run's calls, one after another (a turn each)
                out = await env.call_tool(script_call(call_id=f"a{n}"), interrupt=first)
                assert out.payload.stop_reason == "completed"
            assert (watches.started, watches.ended) == (1, 0)
            # Another run's event: the idle watch of the first one ends.
            out = await env.call_tool(script_call(call_id="b"), interrupt=second)
            await trio.testing.wait_all_tasks_blocked()
            assert (watches.started, watches.ended) == (2, 1)
            # The kept watch still does its job: an interrupt ends a call under it.

            async def interrupted(args: dict[str, Any], ctx: ToolContext) -> None:
                second.set()
                await trio.sleep_forever()

            tool.behaviour = interrupted
            out = await env.call_tool(script_call(call_id="b2"), interrupt=second)
            assert (out.payload.output, out.payload.stop_reason) == (
                "[interrupted: tool aborted by user]",
                "aborted",
            )
        finally:
            trio.lowlevel.remove_instrument(watches)


@pytest.mark.parametrize("given", ["workspace", Path("workspace")])
async def test_opening_with_a_path_instead_of_a_config_says_what_to_pass(given: object) -> None:
    with pytest.raises(
        TypeError, match=r"^Environment\.open\(\) takes an EnvironmentConfig,"
    ) as info:
        async with penguin.Environment.open(given):  # type: ignore[arg-type]
            pass
    assert str(info.value).endswith(f"not a {type(given).__name__}")
