"""Spec mcp.md M1.4, M2.6, M2.7 through real sessions: the connect phase, calls, subagents.

The agent's ``system_config.yaml`` names the test MCP server (a real stdio process);
the model is scripted. Every test also checks, with psutil, that no server process
outlives the session.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio

import penguin
from penguin import config as cfg
from penguin import protocol as om
from penguin.llm import LLMRequest, ModelRef, ScriptedLLM, text, tool_call, turn
from penguin.trace import read_trace

from ..processes import marked_processes
from .support import command_server, stdio_server

pytestmark = pytest.mark.usefixtures("no_stray_processes")

Message = om.OmniMessage[om.Payload]


def allow(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
    return "allow"


def kind(message: Message) -> str:
    return str(getattr(message.payload, "type", message.type))


def agent_with(tmp_path: Path, *servers: cfg.McpServerConfig) -> penguin.Agent:
    agent = penguin.Agent.open(tmp_path / "root")
    for server in servers:
        cfg.add_mcp_server(agent.paths.system_config, server)
    return penguin.Agent.open(tmp_path / "root")


async def test_m1_4_the_first_run_connects_after_its_input_and_lists_the_mcp_tools(
    no_stray_processes: str, tmp_path: Path, workspace: Path
) -> None:
    agent = agent_with(tmp_path, stdio_server("s"), command_server("gone", "/nonexistent/server"))
    assert [server.name for server in agent.config.mcp_servers] == ["s", "gone"]
    llm = ScriptedLLM(
        [turn(tool_call("mcp__s__echo", {"text": "from the model"})), turn(text("Done."))]
    )
    async with agent.session(workspace, llm=llm) as session:
        assert not marked_processes(
            run=no_stray_processes
        )  # creating the session connected nothing
        async with session.run([om.user_text("echo it")], approve=allow) as stream:
            messages = [message async for message in stream]
        assert stream.result.status == "completed"
        async with session.run([om.user_text("again")], approve=allow) as stream:
            second = [kind(message) async for message in stream]
        await session.flush_trace()
        records = read_trace(session.trace_path)
    kinds = [kind(m) for m in messages if not om.is_partial(m)]
    assert kinds[:5] == [
        "text",
        "mcp_connect_begin",
        "mcp_connect_end",
        "tool_list_ready",
        "request_begin",
    ]
    begin = next(m.payload for m in messages if kind(m) == "mcp_connect_begin")
    assert isinstance(begin, om.McpConnectBeginPayload)
    assert begin.servers == ("s", "gone")
    end = next(m.payload for m in messages if kind(m) == "mcp_connect_end")
    assert isinstance(end, om.McpConnectEndPayload)
    assert end.status == "failed"
    good, bad = end.results
    assert (good.server, good.transport, good.status, good.tools) == ("s", "stdio", "completed", 18)
    assert (bad.server, bad.status, bad.tools) == ("gone", "failed", None)
    assert bad.error == "cannot start '/nonexistent/server': No such file or directory"
    ready = next(m.payload for m in messages if kind(m) == "tool_list_ready")
    assert isinstance(ready, om.ToolListReadyPayload)
    names = [tool.name for tool in ready.tools]
    assert names[0] == "read_file"
    assert "mcp__s__echo" in names
    assert not any(name.startswith("mcp__gone__") for name in names)
    assert names.index("mcp__s__echo") > names.index("run_subagent")
    (output,) = [m.payload for m in messages if om.is_tool_call_output(m)]
    assert (output.output, output.stop_reason) == ("from the model", "completed")
    assert llm.requests[0].tools == ready.tools  # the model is offered the MCP tools
    # The phase is once per session: the second run neither connects nor re-lists.
    assert "mcp_connect_begin" not in second
    assert "tool_list_ready" not in second
    traced = [kind(r) for r in records]
    assert traced[1:5] == ["text", "mcp_connect_begin", "mcp_connect_end", "tool_list_ready"]
    assert not marked_processes(run=no_stray_processes)


async def test_m1_4_without_mcp_servers_neither_event_is_emitted(
    tmp_path: Path, workspace: Path
) -> None:
    agent = agent_with(tmp_path)
    llm = ScriptedLLM([turn(text("hi"))])
    async with (
        agent.session(workspace, llm=llm) as session,
        session.run([om.user_text("hello")], approve=allow) as stream,
    ):
        kinds = [kind(m) async for m in stream]
    assert kinds[0] == "tool_list_ready"
    assert not any(k.startswith("mcp_") for k in kinds)


async def test_m1_4_an_interrupt_during_the_phase_aborts_it_and_the_next_run_connects_afresh(
    no_stray_processes: str, tmp_path: Path, workspace: Path
) -> None:
    gate = tmp_path / "gate"
    agent = agent_with(tmp_path, stdio_server("slow", env={"MCP_TEST_WAIT_FOR": str(gate)}))
    llm = ScriptedLLM([turn(text("Connected now."))])
    async with agent.session(workspace, llm=llm) as session:
        interrupt = trio.Event()
        first: list[Message] = []
        async with session.run([om.user_text("go")], approve=allow, interrupt=interrupt) as s:
            async for message in s:
                first.append(message)
                if kind(message) == "mcp_connect_begin":
                    interrupt.set()
        assert s.result.status == "aborted"
        assert [kind(m) for m in first] == ["text", "mcp_connect_begin", "mcp_connect_end", "abort"]
        aborted = first[2].payload
        assert isinstance(aborted, om.McpConnectEndPayload)
        assert (aborted.status, aborted.results) == ("aborted", ())
        assert llm.requests == []
        await trio.to_thread.run_sync(gate.touch)
        async with session.run([om.user_text("go on")], approve=allow) as s:
            second = [kind(m) async for m in s if not om.is_partial(m)]
        assert s.result.status == "completed"
        assert second[:4] == ["text", "mcp_connect_begin", "mcp_connect_end", "tool_list_ready"]
    assert not marked_processes(run=no_stray_processes)


class Routed:
    """One model object, one script per conversation (keyed by its first user message)."""

    def __init__(self, scripts: Mapping[str, ScriptedLLM]) -> None:
        self.scripts = dict(scripts)
        self.model = ModelRef("scripted", "scripted")
        self.context_window: int | None = None

    def stream(self, request: LLMRequest) -> Any:
        first = next(m for m in request.messages if isinstance(m.payload, om.TextPayload))
        assert isinstance(first.payload, om.TextPayload)
        return self.scripts[first.payload.text].stream(request)


async def test_m2_7_a_subagent_connects_its_own_servers_and_keeps_their_tools(
    no_stray_processes: str, tmp_path: Path, workspace: Path
) -> None:
    agent = agent_with(tmp_path, stdio_server("s"))
    parent = ScriptedLLM(
        [
            turn(tool_call("run_subagent", {"description": "delegate", "prompt": "use mcp"})),
            turn(text("The child answered.")),
        ]
    )
    child = ScriptedLLM([turn(tool_call("mcp__s__pid", {})), turn(text("pid told"))])
    llm = Routed({"delegate it": parent, "use mcp": child})
    async with agent.session(workspace, llm=llm) as session:
        async with session.run([om.user_text("delegate it")], approve=allow) as stream:
            messages = [message async for message in stream]
        assert stream.result.status == "completed"
    nested = [m for m in messages if m.origin and om.is_tool_call_output(m)]
    (pid_output,) = [m.payload for m in nested if isinstance(m.payload, om.ToolCallOutputPayload)]
    assert pid_output.stop_reason == "completed"
    assert pid_output.output.isdigit()
    child_tools = [tool.name for tool in child.requests[0].tools]
    assert "mcp__s__pid" in child_tools
    assert "run_subagent" not in child_tools
    assert not marked_processes(run=no_stray_processes)
