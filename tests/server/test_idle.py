"""Issue 21 item 3: a server that runs for weeks closes what sits idle (``--idle-close``).

Real processes: the agent has the test MCP server configured over stdio, so an open
session has a live process of its own (marked with the test's run id); after
``idle_close`` seconds with no task and no background command that process is gone
(psutil), and the next task reopens the session from its trace (the model sees the
history) and starts the MCP server again. A running task or a live background command
keeps the session open through many sweeps.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import trio

from penguin import config as cfg
from penguin.server import RunningServer, ServerOptions, open_server
from tests.environment.mcp.support import stdio_server
from tests.environment.processes import marked_processes, wait_until

from .support import (
    AUTH,
    TOKEN,
    ScriptedModel,
    calls,
    create_session,
    exec_command,
    gated,
    open_stream,
    say,
    start_task,
)

IDLE = 0.4


def with_mcp_server(root: Path) -> None:
    path = cfg.AgentPaths(root).system_config
    cfg.dump_default_system_config(path)
    cfg.add_mcp_server(path, stdio_server("s"))


@asynccontextmanager
async def idle_server(root: Path) -> AsyncIterator[tuple[RunningServer, httpx.AsyncClient]]:
    options = ServerOptions(port=0, root=root, token=TOKEN, grace=5.0, idle_close=IDLE)
    async with (
        open_server(options) as server,
        httpx.AsyncClient(base_url=server.base_url, headers=AUTH, timeout=30) as client,
    ):
        yield server, client


async def sweeps_pass(server: RunningServer, count: int) -> None:
    """Wait until ``count`` more idle sweeps have run (each one could have closed it)."""
    target = server.sessions.sweeps + count
    await wait_until(lambda: server.sessions.sweeps >= target, within=30)


async def test_21_3_an_idle_session_is_closed_and_its_next_task_resumes_from_the_trace(
    root: Path, model: ScriptedModel, no_stray_processes: str
) -> None:
    with_mcp_server(root)
    model.script("remember 42", say("I will remember 42."))
    async with idle_server(root) as (server, client):
        sid = (await create_session(client))["sessionId"]
        async with open_stream(client, sid) as stream:
            await start_task(client, sid, "remember 42")
            await stream.until_idle()
        await wait_until(lambda: bool(marked_processes(run=no_stray_processes)), within=30)
        # idle: the Environment is closed, its MCP server with it
        await wait_until(lambda: server.sessions._live[sid].session is None, within=30)
        assert not marked_processes(run=no_stray_processes)
        info = (await client.get(f"/api/sessions/{sid}")).json()["session"]
        assert info["state"] == "idle"  # still listed, still there
        async with open_stream(client, sid) as stream:
            await start_task(client, sid, "what was it?")
            await stream.until_idle()
        # reopened: its MCP server started again
        await wait_until(lambda: bool(marked_processes(run=no_stray_processes)), within=30)
    last = [m.get("content") for m in model.requests[-1]["messages"]]
    assert "remember 42" in last
    assert "I will remember 42." in last
    assert last[-1] == "what was it?"


async def test_21_3_a_running_task_keeps_the_session_open(
    root: Path, model: ScriptedModel, no_stray_processes: str
) -> None:
    with_mcp_server(root)
    release = trio.Event()
    task = model.script("slow", gated(release, say("Finally.")))
    async with idle_server(root) as (server, client):
        sid = (await create_session(client))["sessionId"]
        async with open_stream(client, sid) as stream:
            await start_task(client, sid, task)
            await stream.until(lambda e: e.is_state("running"))
            await wait_until(lambda: bool(marked_processes(run=no_stray_processes)), within=30)
            pids = {p.pid for p in marked_processes(run=no_stray_processes)}
            await sweeps_pass(server, 3 * round(IDLE / 0.1))  # well past IDLE seconds
            assert {p.pid for p in marked_processes(run=no_stray_processes)} == pids
            release.set()
            await stream.until(lambda e: e.is_state("idle"))
        texts = [e.data["payload"].get("text") for e in stream.seen if e.event is None]
        assert "Finally." in texts
        await wait_until(lambda: not marked_processes(run=no_stray_processes), within=30)


async def test_21_3_a_live_background_command_keeps_the_session_open(
    root: Path, model: ScriptedModel, no_stray_processes: str
) -> None:
    task = model.script(
        "serve", calls(exec_command("echo up; sleep 300", yield_time_ms=300)), say("Started.")
    )
    async with idle_server(root) as (server, client):
        sid = (await create_session(client))["sessionId"]
        async with open_stream(client, sid) as stream:
            await start_task(client, sid, task)
            await stream.until_idle()
        (process,) = (await client.get(f"/api/sessions/{sid}/processes")).json()["processes"]
        assert process["state"] == "running"
        await sweeps_pass(server, 3 * round(IDLE / 0.1))
        (still,) = (await client.get(f"/api/sessions/{sid}/processes")).json()["processes"]
        assert still == process  # the session stayed open: its command is still listed
        assert marked_processes(run=no_stray_processes)
        killed = await client.post(f"/api/sessions/{sid}/processes/{process['processId']}/kill")
        assert killed.status_code == 204
        # nothing alive any more: closed after IDLE seconds, the listing empty
        await wait_until(lambda: not marked_processes(run=no_stray_processes), within=30)
        await wait_until(lambda: server.sessions._live[sid].session is None, within=30)
        assert (await client.get(f"/api/sessions/{sid}/processes")).json() == {"processes": []}
