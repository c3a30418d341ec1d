"""Spec mcp.md M2: MCP tools run through the Environment's contract, on real servers.

The result kinds are checked over stdio and over Streamable HTTP (the same server
code); limits, cancellation and crashes over stdio, where the server is penguin's child.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

import penguin
from penguin import protocol as om
from penguin.approval import approver_for_mode

from .support import HttpServer, call, environment_config, remote_server, stdio_server

pytestmark = pytest.mark.usefixtures("no_stray_processes")


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@asynccontextmanager
async def opened(
    workspace: Path, transport: str, http: HttpServer | None = None, **options: Any
) -> AsyncIterator[penguin.Environment]:
    if transport == "stdio":
        server = stdio_server(**options)
    else:
        assert http is not None
        server = remote_server("s", http.url, **options)
    config = environment_config(workspace, server, scratchpad_dir=workspace.parent / "scratch")
    async with penguin.Environment.open(config) as env:
        await env.list_tools()
        yield env


@pytest.fixture
def remote(request: pytest.FixtureRequest, transport: str) -> HttpServer | None:
    return request.getfixturevalue("http") if transport == "http" else None


async def test_m2_4_every_result_kind(
    workspace: Path, transport: str, remote: HttpServer | None
) -> None:
    async with opened(workspace, transport, remote) as env:
        echo = await call(env, "echo", '{"text": "hi"}')
        assert (echo.output, echo.stop_reason, echo.images) == ("hi", "completed", None)
        image = await call(env, "image")
        assert image.output == "a picture:"
        assert image.images is not None
        (url,) = image.images
        assert url.startswith("data:image/png;base64,iVBORw0KGgo")
        assert (await call(env, "audio")).output == "listen:\n[audio: audio/wav]"
        assert (await call(env, "resources")).output == (
            "the notes\n[resource: file:///data.bin]\n[resource: https://example.com/doc]"
        )
        assert (await call(env, "structured")).output == '{"answer":42,"ok":true}'
        assert (await call(env, "structured_with_text")).output == "forty-two"
        assert (await call(env, "empty")).output == "[no output]"
        huge = await call(env, "huge_image")
        assert (huge.output, huge.images) == (
            "[image: image/png, 6.0 MB exceeds the 5.0 MB limit; not shown]",
            None,
        )


async def test_m2_4_is_error_fails_with_the_server_s_text(
    workspace: Path, transport: str, remote: HttpServer | None
) -> None:
    async with opened(workspace, transport, remote) as env:
        out = await call(env, "fail")
        assert (out.output, out.stop_reason) == ("it broke", "failed")


async def test_m2_5_a_protocol_error_is_an_output(
    workspace: Path, transport: str, remote: HttpServer | None
) -> None:
    async with opened(workspace, transport, remote) as env:
        out = await call(env, "protocol_error")
        assert (out.output, out.stop_reason) == ("[mcp error: no such thing]", "failed")
        assert (await call(env, "echo", '{"text": "after"}')).output == "after"


async def test_m2_1_an_unknown_mcp_name_is_an_unknown_tool(workspace: Path) -> None:
    async with opened(workspace, "stdio") as env:
        out = await call(env, "nope")
        assert (out.output, out.stop_reason) == ("Unknown tool: mcp__s__nope", "failed")


async def test_m2_2_tool_permission_answers_for_mcp_tools(workspace: Path) -> None:
    async with opened(workspace, "stdio") as env:
        assert env.tool_permission("mcp__s__echo") == "r"  # readOnlyHint: true
        assert env.tool_permission("mcp__s__write_note") == "rw"  # no annotation
        assert env.tool_permission("mcp__s__hang") == "rw"  # readOnlyHint: false
    async with opened(workspace, "stdio", permission="r") as env:
        assert env.tool_permission("mcp__s__write_note") == "r"
    async with opened(workspace, "stdio", permission="rw") as env:
        assert env.tool_permission("mcp__s__echo") == "rw"


async def test_m2_6_read_only_mode_auto_approves_only_the_r_tools(workspace: Path) -> None:
    asked: list[str] = []

    def ask(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        asked.append(call.payload.name)
        return "deny"

    async with opened(workspace, "stdio") as env:
        approve = approver_for_mode("read-only", ask=ask, permission=env.tool_permission)
        read = om.tool_call("mcp__s__echo", "{}", "c1")
        write = om.tool_call("mcp__s__write_note", "{}", "c2")
        assert await penguin.approval.consult(approve, read) == "allow"
        assert await penguin.approval.consult(approve, write) == "deny"
        assert asked == ["mcp__s__write_note"]


async def test_m2_3_output_past_the_limit_is_truncated_and_archived(workspace: Path) -> None:
    async with opened(workspace, "stdio", max_output_length=1000) as env:
        out = await call(env, "flood", '{"chars": 50000}')
    assert out.output.startswith("x" * 1000)
    assert "[output truncated: exceeded 1000 chars]" in out.output
    archives = list((workspace.parent / "scratch" / "truncated-tool-output").iterdir())
    assert len(archives) == 1
    assert "x" * 50000 in archives[0].read_text()
    assert str(archives[0]) in out.output


async def stats(env: penguin.Environment) -> dict[str, int]:
    text = (await call(env, "stats")).output
    return {key: int(value) for key, value in (part.split("=") for part in text.split())}


async def test_m2_3_a_timeout_cancels_the_request_and_the_server_stays_usable(
    workspace: Path, transport: str, remote: HttpServer | None
) -> None:
    async with opened(workspace, transport, remote, timeout_ms=300) as env:
        before = (await stats(env))["cancelled"]
        out = await call(env, "hang")
        assert (out.output, out.stop_reason) == ("[tool timeout: exceeded 300ms]", "failed")
        cancelled = before
        with trio.fail_after(10):
            while cancelled == before:  # the server learns of it by notifications/cancelled
                cancelled = (await stats(env))["cancelled"]
        assert cancelled == before + 1
        assert (await call(env, "echo", '{"text": "still up"}')).output == "still up"


async def test_m2_5_an_interrupt_cancels_the_request_and_the_server_stays_usable(
    workspace: Path,
) -> None:
    async with opened(workspace, "stdio") as env:
        interrupt = trio.Event()
        final = None

        async def interrupt_once_it_hangs() -> None:
            while (await stats(env))["hangs"] == 0:
                pass
            interrupt.set()

        hang = om.tool_call("mcp__s__hang", "{}", "c1")
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(interrupt_once_it_hangs)
                async with env.execute_tool(hang, interrupt=interrupt) as stream:
                    async for message in stream:
                        if om.is_tool_call_output(message):
                            final = message.payload
        assert final is not None
        assert (final.output, final.stop_reason) == (
            "[interrupted: tool aborted by user]",
            "aborted",
        )
        with trio.fail_after(10):
            while (await stats(env))["cancelled"] == 0:  # notifications/cancelled arrives
                pass
        assert (await call(env, "echo", '{"text": "still up"}')).output == "still up"


async def test_m2_5_a_crash_is_disconnected_then_the_next_call_reconnects_once(
    workspace: Path,
) -> None:
    async with opened(workspace, "stdio") as env:
        first = (await call(env, "pid")).output
        out = await call(env, "crash")
        assert (out.output, out.stop_reason) == ('[mcp error: server "s" disconnected]', "failed")
        again = await call(env, "pid")
        assert again.stop_reason == "completed"
        assert again.output != first  # a new server process


async def test_m2_5_a_failed_reconnect_fails_the_call_and_the_server_stays_down(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    once = workspace.parent / "started-once"
    async with opened(workspace, "stdio", env={"MCP_TEST_ONCE": str(once)}) as env:
        await call(env, "crash")
        for _ in range(2):
            out = await call(env, "echo", '{"text": "x"}')
            assert (out.output, out.stop_reason) == (
                '[mcp error: server "s" disconnected]',
                "failed",
            )
    lines = [r.getMessage() for r in caplog.records if "unavailable" in r.getMessage()]
    assert lines == [
        '[penguin] MCP server "s" unavailable: exited with code 1: refusing to start twice'
    ]


async def test_m2_5_a_dead_http_server_is_disconnected(workspace: Path, tmp_path: Path) -> None:
    from .support import http_server

    with http_server(tmp_path) as server:
        async with opened(workspace, "http", server, connect_timeout_ms=2000) as env:
            assert (await call(env, "echo", '{"text": "up"}')).output == "up"
            server.stop()
            out = await call(env, "echo", '{"text": "down"}')
            assert (out.output, out.stop_reason) == (
                '[mcp error: server "s" disconnected]',
                "failed",
            )


async def test_m2_5_a_result_of_the_wrong_shape_is_an_mcp_error(workspace: Path) -> None:
    import sys

    from .support import RAW_MODULE, REPO, command_server

    raw = command_server("raw", sys.executable, "-m", RAW_MODULE, "bad-result")
    raw.transport.env.update({"PYTHONPATH": str(REPO)})  # type: ignore[union-attr]
    async with penguin.Environment.open(environment_config(workspace, raw)) as env:
        out = await call(env, "bare", server="raw")
    assert out.stop_reason == "failed"
    assert out.output == (
        "[mcp error: the server's answer is not a tools/call result: "
        '"content" is not a list (got str)]'
    )


async def test_m2_3_concurrent_calls_share_one_connection(workspace: Path) -> None:
    async with opened(workspace, "stdio") as env:
        outputs: list[str] = []

        async def one(index: int) -> None:
            out = await call(env, "echo", json.dumps({"text": f"n{index}"}))
            outputs.append(out.output)

        async with trio.open_nursery() as nursery:
            for index in range(20):
                nursery.start_soon(one, index)
        assert sorted(outputs) == sorted(f"n{index}" for index in range(20))


async def test_m2_3_a_message_over_the_line_limit_ends_the_server_not_the_host(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from penguin.environment.mcp import _stdio

    monkeypatch.setattr(_stdio, "MAX_LINE", 100_000)
    async with opened(workspace, "stdio") as env:
        first = (await call(env, "pid")).output
        out = await call(env, "flood", '{"chars": 1000000}')
        assert (out.output, out.stop_reason) == ('[mcp error: server "s" disconnected]', "failed")
        fine = await call(env, "flood", '{"chars": 1000}')  # reconnected, a new server
        assert (fine.output, fine.stop_reason) == ("x" * 1000, "completed")
        assert (await call(env, "pid")).output != first
