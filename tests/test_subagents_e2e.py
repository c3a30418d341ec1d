"""Subagents end to end: real Agent sessions, real engines, real traces, real processes.

The parent and its children share one model object (as they do when the child
inherits the parent's model), so :class:`Routed` sends each request to the script
of its conversation: the one whose first user message is that conversation's task.
The last test runs ``penguin run`` as a real process against a local
OpenAI-compatible server and approves the child's tool call on stdin.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import psutil
import pytest
import trio

import penguin
from penguin import config as cfg
from penguin import protocol as om
from penguin.agent import ChildSessionRunner
from penguin.engine import Engine, RunStream, TraceRecorder
from penguin.environment import (
    SubagentRequest,
    SubagentSpawnError,
    ToolContext,
    ToolResult,
    ToolServices,
)
from penguin.llm import LLMRequest, ModelRef, ScriptedLLM, pause, text, tool_call, turn
from penguin.llm import testing as t
from penguin.trace import TraceWriter, read_trace

from .environment.processes import RUN_VARIABLE, marked_processes, wait_until

Message = om.OmniMessage[om.Payload]
TASK = "Delegate the work."


def child_prompt(task: str) -> str:
    return f"Caller agent: default_agent\n{task}"


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


def allow(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
    return "allow"


async def drain(stream: RunStream) -> list[Message]:
    return [message async for message in stream]


async def run_task(
    agent: penguin.Agent,
    workspace: Path,
    llm: Routed,
    approve: om.ApproveFn = allow,
    thinking_level: str | None = None,
) -> list[Message]:
    """One session, one Task; every message of the run."""
    async with (
        agent.session(workspace, llm=llm) as session,
        session.run([om.user_text(TASK)], approve=approve, thinking_level=thinking_level) as stream,
    ):
        return await drain(stream)


def records_of(path: Path) -> list[Message]:
    return read_trace(path)


def child_traces(agent: penguin.Agent, parent_id: str) -> dict[str, list[Message]]:
    """Every other session's trace under ``agent``, by session id."""
    found = {}
    for path in agent.paths.traces_dir.glob("*/*.jsonl"):
        records = read_trace(path)
        meta = records[0].payload
        assert isinstance(meta, om.SessionMetaPayload)
        if meta.session_id != parent_id:
            found[meta.session_id] = records
    return found


def tool_outputs(messages: list[Message]) -> list[om.ToolCallOutputPayload]:
    return [m.payload for m in messages if not m.origin and om.is_tool_call_output(m)]


@pytest.fixture
def no_stray_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Fail if a process started through penguin during the test is still alive after it."""
    run = uuid.uuid4().hex
    monkeypatch.setenv(RUN_VARIABLE, run)
    yield run
    survivors = marked_processes(run=run)
    for proc in survivors:
        try:
            proc.send_signal(signal.SIGKILL)
        except psutil.Error:
            continue
    assert survivors == []


@pytest.fixture
def agent(tmp_path: Path) -> penguin.Agent:
    return penguin.Agent.open(tmp_path / "root")


# --------------------------------------------------------------------------- traces, origin


async def test_children_have_their_own_traces_and_the_parent_one_pointer_each(
    agent: penguin.Agent, workspace: Path
) -> None:
    first, second = child_prompt("Write a."), child_prompt("Write b.")
    llm = Routed(
        {
            TASK: ScriptedLLM(
                [
                    turn(
                        tool_call("run_subagent", {"description": "a", "prompt": first}),
                        tool_call("run_subagent", {"description": "b", "prompt": second}),
                    ),
                    turn(text("Both done.")),
                ]
            ),
            first: ScriptedLLM(
                [turn(tool_call("write_file", {"file_path": "a.txt", "content": "a"})), "Wrote a."]
            ),
            second: ScriptedLLM(["Nothing to write for b."]),
        }
    )
    async with agent.session(workspace, llm=llm) as session:
        async with session.run([om.user_text(TASK)], approve=allow) as stream:
            messages = await drain(stream)
        assert stream.result.status == "completed"
        await session.flush_trace()
        parent_id, parent_trace = session.session_id, session.trace_path
    assert (workspace / "a.txt").read_text() == "a"
    outputs = sorted(o.output for o in tool_outputs(messages))
    assert outputs == ["Nothing to write for b.", "Wrote a."]

    parent = records_of(parent_trace)
    assert not any(r.origin for r in parent)
    pointers = [r.payload.session_id for r in parent if isinstance(r.payload, om.SubagentPayload)]
    children = child_traces(agent, parent_id)
    assert sorted(pointers) == sorted(children)
    assert len(pointers) == 2
    for child_id, records in children.items():
        meta = records[0].payload
        assert isinstance(meta, om.SessionMetaPayload)
        assert (meta.source, meta.workspace, meta.model_id) == (
            "subagent",
            str(workspace),
            "scripted",
        )
        listed = next(r.payload for r in records if isinstance(r.payload, om.ToolListReadyPayload))
        names = {tool.name for tool in listed.tools}
        assert names.isdisjoint({"run_subagent", "input_subagent", "kill_subagent"})
        assert "write_file" in names
        # Every message of the child passed through the parent's stream, tagged.
        assert any(m.origin == (child_id,) and om.is_session_meta(m) for m in messages)
    parent_meta = parent[0].payload
    assert isinstance(parent_meta, om.SessionMetaPayload)
    assert parent_meta.source is None


async def test_child_tool_calls_reach_the_parent_approver_with_the_child_in_origin(
    agent: penguin.Agent, workspace: Path
) -> None:
    prompt = child_prompt("Write two files.")
    llm = Routed(
        {
            TASK: ScriptedLLM(
                [turn(tool_call("run_subagent", {"description": "d", "prompt": prompt})), "ok"]
            ),
            prompt: ScriptedLLM(
                [
                    turn(tool_call("write_file", {"file_path": "yes.txt", "content": "y"})),
                    turn(tool_call("write_file", {"file_path": "no.txt", "content": "n"})),
                    "One was refused.",
                ]
            ),
        }
    )
    asked: list[om.OmniMessage[om.ToolCallPayload]] = []

    def approve(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        asked.append(call)
        return "deny" if "no.txt" in call.payload.arguments else "allow"

    messages = await run_task(agent, workspace, llm, approve)
    child_id = next(m.origin[0] for m in messages if m.origin and om.is_session_meta(m))
    assert [(c.payload.name, c.origin) for c in asked] == [
        ("run_subagent", None),
        ("write_file", (child_id,)),
        ("write_file", (child_id,)),
    ]
    assert (workspace / "yes.txt").exists()
    assert not (workspace / "no.txt").exists()
    denied = [
        m.payload.output for m in messages if m.origin == (child_id,) and om.is_tool_call_output(m)
    ]
    assert "Tool call denied by user." in denied


async def test_thinking_level_is_inherited_unless_given(
    agent: penguin.Agent, workspace: Path
) -> None:
    inherit, given = child_prompt("Inherit."), child_prompt("Given.")
    children = {inherit: ScriptedLLM(["a"]), given: ScriptedLLM(["b"])}
    llm = Routed(
        {
            TASK: ScriptedLLM(
                [
                    turn(tool_call("run_subagent", {"description": "d", "prompt": inherit})),
                    turn(
                        tool_call(
                            "run_subagent",
                            {"description": "d", "prompt": given, "thinking_level": "low"},
                        )
                    ),
                    "done",
                ]
            ),
            **children,
        }
    )
    await run_task(agent, workspace, llm, thinking_level="xhigh")
    assert [r.thinking_level for r in children[inherit].requests] == ["xhigh"]
    assert [r.thinking_level for r in children[given].requests] == ["low"]


# --------------------------------------------------------------------------- spawn errors


async def test_depth_cap_a_child_runner_refuses(agent: penguin.Agent, workspace: Path) -> None:
    runner = ChildSessionRunner(agent, workspace=workspace, llm=ScriptedLLM(), vision=True, depth=1)
    with pytest.raises(SubagentSpawnError, match="depth limit 1 reached"):
        async with runner.open_child(SubagentRequest()):
            pass  # pragma: no cover
    config = penguin.EnvironmentConfig(
        workspace_dir=workspace, services=ToolServices(subagent_runner=runner)
    )
    async with penguin.Environment.open(config) as env:
        out = await env.call_tool(
            om.tool_call("run_subagent", {"description": "d", "prompt": "x"}, "c1")
        )
    assert (out.payload.output, out.payload.stop_reason) == (
        "[run_subagent error: subagent depth limit 1 reached; not spawning another subagent]",
        "failed",
    )


@pytest.mark.parametrize("agent_id", ["nobody", "../escape"])
async def test_unknown_agent_is_refused(
    agent: penguin.Agent, workspace: Path, agent_id: str
) -> None:
    llm = Routed(
        {
            TASK: ScriptedLLM(
                [
                    turn(
                        tool_call(
                            "run_subagent",
                            {"description": "d", "prompt": "p", "agent_id": agent_id},
                        )
                    ),
                    "ok",
                ]
            )
        }
    )
    messages = await run_task(agent, workspace, llm)
    [output] = tool_outputs(messages)
    assert (output.output, output.stop_reason) == (
        f'[run_subagent error: subagent error: agent "{agent_id}" does not exist '
        "or is not accessible]",
        "failed",
    )


async def test_a_child_under_another_agent_traces_there(
    agent: penguin.Agent, workspace: Path, tmp_path: Path
) -> None:
    helper = penguin.Agent.open(tmp_path / "root", agent_id="helper")
    prompt = "Caller agent: default_agent\nHelp."
    llm = Routed(
        {
            TASK: ScriptedLLM(
                [
                    turn(
                        tool_call(
                            "run_subagent",
                            {"description": "d", "prompt": prompt, "agent_id": "helper"},
                        )
                    ),
                    "ok",
                ]
            ),
            prompt: ScriptedLLM(["helped"]),
        }
    )
    messages = await run_task(agent, workspace, llm)
    assert [o.output for o in tool_outputs(messages)] == ["helped"]
    [path] = helper.paths.traces_dir.glob("*/*.jsonl")
    meta = read_trace(path)[0].payload
    assert isinstance(meta, om.SessionMetaPayload)
    assert meta.source == "subagent"
    assert "agent: helper" in meta.system_prompt


async def test_a_given_model_comes_from_the_project_config(
    agent: penguin.Agent, workspace: Path
) -> None:
    def handler(request: t.ReceivedRequest) -> t.Reply:
        return t.sse_reply([t.content_chunk("from the other model"), t.finish_chunk()])

    prompt = child_prompt("Use the other model.")
    llm = Routed(
        {
            TASK: ScriptedLLM(
                [
                    turn(
                        tool_call(
                            "run_subagent",
                            {
                                "description": "d",
                                "prompt": prompt,
                                "provider": "local",
                                "model_id": "other",
                            },
                        )
                    ),
                    turn(
                        tool_call(
                            "run_subagent",
                            {
                                "description": "d",
                                "prompt": prompt,
                                "provider": "local",
                                "model_id": "missing",
                            },
                        )
                    ),
                    "ok",
                ]
            )
        }
    )
    async with t.serve_openai_compatible(handler) as server:
        entry = cfg.ModelEntry(
            provider="local", model_id="other", base_url=server.base_url, api_key="k"
        )
        path = agent.paths.project_config
        cfg.save_project_config(path, cfg.add_model(cfg.load_project_config(path), entry))
        messages = await run_task(agent, workspace, llm)
    first, second = tool_outputs(messages)
    assert first.output == "from the other model"
    assert second.stop_reason == "failed"
    assert second.output.startswith("[run_subagent error: subagent error: no model local/missing")
    child_meta = next(m for m in messages if m.origin and om.is_session_meta(m)).payload
    assert isinstance(child_meta, om.SessionMetaPayload)
    assert (child_meta.provider, child_meta.model_id) == ("local", "other")
    assert len(server.requests) == 1


# --------------------------------------------------------------------------- rounds


async def test_follow_up_rounds_with_input_subagent(agent: penguin.Agent, workspace: Path) -> None:
    prompt = child_prompt("Take your time.")
    registered: list[str] = []

    def after_launch(request: LLMRequest) -> Any:
        last = request.messages[-1].payload
        assert isinstance(last, om.ToolCallOutputPayload)
        registered.append(last.output.split("subagent_id ")[1].split(";")[0])
        return tool_call("input_subagent", {"description": "poll", "subagent_id": registered[0]})

    def follow_up(request: LLMRequest) -> Any:
        return tool_call(
            "input_subagent",
            {"description": "more", "subagent_id": registered[0], "prompt": "And now?"},
        )

    def stop(request: LLMRequest) -> Any:
        return tool_call("kill_subagent", {"description": "stop", "subagent_id": registered[0]})

    parent = ScriptedLLM(
        [
            turn(
                tool_call(
                    "run_subagent", {"description": "d", "prompt": prompt, "yield_time_ms": 250}
                )
            ),
            after_launch,
            follow_up,
            stop,
            "finished",
        ]
    )
    child = ScriptedLLM([turn(pause(0.75), text("first answer")), "second answer"])
    llm = Routed({TASK: parent, prompt: child})
    messages = await run_task(agent, workspace, llm)
    launched, polled, again, killed = (o.output for o in tool_outputs(messages))
    subagent_id = registered[0]
    assert launched.startswith(f"[subagent running with subagent_id {subagent_id};")
    idle = f"[subagent idle with subagent_id {subagent_id}; send a follow-up prompt to continue]"
    assert polled == f"first answer\n{idle}"
    assert again == f"second answer\n{idle}"
    assert killed == f"[subagent {subagent_id} was idle; session removed]"
    # The follow-up round continued the same child session: it saw its first round.
    follow_up_request = child.requests[-1]
    texts = [
        m.payload.text for m in follow_up_request.messages if isinstance(m.payload, om.TextPayload)
    ]
    assert texts == [prompt, "first answer", "And now?"]


async def test_a_background_report_reaches_the_next_run(
    agent: penguin.Agent, workspace: Path
) -> None:
    prompt = child_prompt("Work in the background.")
    parent = ScriptedLLM(
        [
            turn(
                tool_call(
                    "run_subagent",
                    {"description": "bg", "prompt": prompt, "run_in_background": True},
                )
            ),
            "Launched.",
            "Got the report.",
        ]
    )
    child = ScriptedLLM(["background result"])
    llm = Routed({TASK: parent, prompt: child})
    async with agent.session(workspace, llm=llm) as session:
        async with session.run([om.user_text(TASK)], approve=allow) as stream:
            messages = await drain(stream)
        [launched] = tool_outputs(messages)
        assert "running in background with subagent_id" in launched.output
        with trio.fail_after(10):
            while session.environment.has_running_background_subagents():  # noqa: ASYNC110
                await trio.sleep(0.01)
        tapped = session.environment.subagent_messages.receive_nowait()
        assert tapped.origin is not None
        async with session.run([om.user_text("Any news?")], approve=allow) as stream:
            await drain(stream)
    last_request = parent.requests[-1]
    reports = [
        m.payload.text
        for m in last_request.messages
        if isinstance(m.payload, om.TextPayload) and m.payload.sender == "harness"
    ]
    assert len(reports) == 1
    assert "kind: subagent" in reports[0]
    assert reports[0].endswith("\n\nbackground result")


# --------------------------------------------------------------------------- processes


async def test_no_process_of_a_child_outlives_the_parent_session(
    agent: penguin.Agent, workspace: Path, no_stray_processes: str
) -> None:
    background, killed = child_prompt("Start a server."), child_prompt("Start another.")

    def kill_second(request: LLMRequest) -> Any:
        outputs = [
            m.payload.output
            for m in request.messages
            if isinstance(m.payload, om.ToolCallOutputPayload)
        ]
        subagent_id = outputs[-1].split("subagent_id ")[1].split(";")[0]
        return tool_call("kill_subagent", {"description": "stop", "subagent_id": subagent_id})

    llm = Routed(
        {
            TASK: ScriptedLLM(
                [
                    turn(
                        tool_call(
                            "run_subagent",
                            {"description": "a", "prompt": background, "run_in_background": True},
                        )
                    ),
                    turn(
                        tool_call(
                            "run_subagent",
                            {"description": "b", "prompt": killed, "yield_time_ms": 250},
                        )
                    ),
                    kill_second,
                    "done",
                ]
            ),
            background: ScriptedLLM(
                [
                    turn(
                        tool_call(
                            "exec_command",
                            {"description": "s", "cmd": "sleep 301", "run_in_background": True},
                        )
                    ),
                    "server started",
                ]
            ),
            killed: ScriptedLLM(
                [
                    turn(
                        tool_call(
                            "exec_command",
                            {"description": "s", "cmd": "echo up; sleep 302", "yield_time_ms": 600},
                        )
                    ),
                    turn(pause(3600), text("never")),
                ]
            ),
        }
    )
    async with agent.session(workspace, llm=llm) as session:
        async with session.run([om.user_text(TASK)], approve=allow) as stream:
            messages = await drain(stream)
        outputs = [o.output for o in tool_outputs(messages)]
        assert "aborted and removed" in outputs[-1]
        with trio.fail_after(10):
            while session.environment.has_running_background_subagents():  # noqa: ASYNC110
                await trio.sleep(0.01)

        # The killed child's command is gone with it; the background child's still runs
        # (a background launch registers at once and spawns a moment later: wait for it).
        def lines() -> list[str]:
            return [" ".join(p.cmdline()) for p in marked_processes(run=no_stray_processes)]

        with trio.fail_after(10):
            while not any("301" in line for line in lines()):  # noqa: ASYNC110
                await trio.sleep(0.01)
        assert not any("302" in line for line in lines())
    with trio.fail_after(5):
        while marked_processes(run=no_stray_processes):  # noqa: ASYNC110 - the process table
            await trio.sleep(0.01)


# --------------------------------------------------------------------------- depth 2, simulated


class Relay:
    """A custom tool of a child engine that forwards a (fake) grandchild's messages."""

    name = "relay"
    definition = penguin.ToolDefinitionConfig(name="relay", description="relays", permission="r")

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        grandchild = "session-2026-01-01-00-00-00-99999999"
        meta = om.session_meta(
            session_id=grandchild,
            provider="x",
            model_id="x",
            model_context_window="unknown",
            system_prompt="",
            agent_state="",
            workspace="",
            source="subagent",
        )
        await ctx.forward(om.with_origin(meta, grandchild))
        await ctx.forward(om.with_origin(om.partial_text("delta", "grandchild words"), grandchild))
        await ctx.forward(om.with_origin(om.assistant_text("grandchild words"), grandchild))
        await ctx.emit("relayed")
        return None


@attrs.define
class EngineChild:
    session_id: str
    session_meta: om.OmniMessage[om.SessionMetaPayload]
    engine: Engine

    def run(self, prompt: str, *, approve: om.ApproveFn, interrupt: trio.Event) -> Any:
        return self.engine.run([om.user_text(prompt)], approve=approve, interrupt=interrupt)


class EngineRunner:
    """Children that are bare engines with the Relay tool, traced like any session."""

    def __init__(self, tmp_path: Path, llm: ScriptedLLM) -> None:
        self.tmp_path = tmp_path
        self.llm = llm
        self.traces: dict[str, Path] = {}

    @asynccontextmanager
    async def open_child(self, request: SubagentRequest) -> AsyncIterator[EngineChild]:
        session_id = cfg.new_session_id()
        config = penguin.EnvironmentConfig(
            workspace_dir=self.tmp_path, tools=[], custom_tools=[Relay()]
        )
        writer = TraceWriter(self.tmp_path / "child-traces", session_id)
        meta = om.session_meta(
            session_id=session_id,
            provider="scripted",
            model_id="scripted",
            model_context_window="unknown",
            system_prompt="child",
            agent_state="",
            workspace=str(self.tmp_path),
            source="subagent",
        )
        async with penguin.Environment.open(config) as env, TraceRecorder.open(writer) as rec:
            rec.record(meta)
            engine = Engine(
                llm=self.llm,
                environment=env,
                system_prompt="child",
                tools=await env.list_tools(),
                recorder=rec,
                session_meta=meta,
            )
            try:
                yield EngineChild(session_id, meta, engine)
            finally:
                await rec.flush()
                self.traces[session_id] = writer.path


async def test_grandchild_text_is_forwarded_not_mirrored_and_not_traced(tmp_path: Path) -> None:
    child_llm = ScriptedLLM([turn(tool_call("relay", {})), turn(text("child words"))])
    runner = EngineRunner(tmp_path, child_llm)
    parent_llm = ScriptedLLM(
        [turn(tool_call("run_subagent", {"description": "d", "prompt": "p"})), "ok"]
    )
    config = penguin.EnvironmentConfig(
        workspace_dir=tmp_path, services=ToolServices(subagent_runner=runner)
    )
    writer = TraceWriter(tmp_path / "parent-traces", "session-2026-01-01-00-00-00-00000001")
    async with penguin.Environment.open(config) as env, TraceRecorder.open(writer) as recorder:
        engine = Engine(
            llm=parent_llm,
            environment=env,
            system_prompt="parent",
            tools=await env.list_tools(),
            recorder=recorder,
        )
        async with engine.run([om.user_text(TASK)], approve=allow) as stream:
            messages = await drain(stream)
        await recorder.flush()
    [output] = tool_outputs(messages)
    assert output.output == "child words"
    [child_id] = runner.traces
    grandchild = "session-2026-01-01-00-00-00-99999999"
    deep = [m for m in messages if m.origin == (child_id, grandchild)]
    assert [type(m.payload).__name__ for m in deep] == [
        "SessionMetaPayload",
        "PartialTextPayload",
        "TextPayload",
    ]
    parent_records = read_trace(writer.path)
    assert not any(r.origin for r in parent_records)
    assert [
        r.payload.session_id for r in parent_records if isinstance(r.payload, om.SubagentPayload)
    ] == [child_id]
    # The child's own trace points to its own direct child: the grandchild.
    child_records = read_trace(runner.traces[child_id])
    assert [
        r.payload.session_id for r in child_records if isinstance(r.payload, om.SubagentPayload)
    ] == [grandchild]


# --------------------------------------------------------------------------- penguin run


def first_user_text(body: dict[str, Any]) -> str:
    for message in body["messages"]:
        if message["role"] == "user":
            content = message["content"]
            return content if isinstance(content, str) else content[0]["text"]
    raise AssertionError("no user message")


def tool_call_reply(call_id: str, name: str, arguments: dict[str, object]) -> t.Reply:
    return t.sse_reply(
        [
            t.tool_call_chunk(0, id=call_id, name=name, arguments=json.dumps(arguments)),
            t.finish_chunk("tool_calls"),
        ]
    )


async def penguin_run(
    root: Path, workspace: Path, base_url: str, message: str, answers: bytes
) -> subprocess.CompletedProcess[bytes]:
    """``penguin run --approve always-ask`` with the model at ``base_url`` as the default."""
    paths = cfg.AgentPaths(root)
    entry = cfg.ModelEntry(provider="local", model_id="m", base_url=base_url, api_key="sk")
    project = cfg.add_model(cfg.load_project_config(paths.project_config), entry, set_default=True)
    cfg.save_project_config(paths.project_config, project)
    return await trio.run_process(
        [
            *(sys.executable, "-m", "penguin", "run", "-m", message, "--root", str(root)),
            *("--workspace", str(workspace), "--approve", "always-ask"),
        ],
        cwd=root.parent,
        stdin=answers,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )


async def test_penguin_run_approves_a_child_call_through_the_parent_prompt(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    prompt = "Caller agent: default_agent\nCreate report.txt saying done."

    def handler(request: t.ReceivedRequest) -> t.Reply:
        body = request.json()
        answered = any(m["role"] == "tool" for m in body["messages"])
        if first_user_text(body).startswith("Caller agent:"):  # the child's conversation
            if not answered:
                return tool_call_reply(
                    "child_1",
                    "write_file",
                    {"description": "Write it", "file_path": "report.txt", "content": "done\n"},
                )
            return t.sse_reply([t.content_chunk("I wrote report.txt."), t.finish_chunk()])
        if not answered:
            return tool_call_reply(
                "parent_1", "run_subagent", {"description": "Delegate", "prompt": prompt}
            )
        return t.sse_reply([t.content_chunk("The subagent finished."), t.finish_chunk()])

    root = tmp_path / "root"
    async with t.serve_openai_compatible(handler) as server:
        done = await penguin_run(
            root, workspace, server.base_url, "Get report.txt written by a subagent.", b"y\ny\n"
        )
        children = [r for r in server.requests if first_user_text(r.json()).startswith("Caller")]
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert (workspace / "report.txt").read_text() == "done\n"
    assert out.count("? Approve this tool call? [Y/n] ") == 2
    assert "write_file: Write it (report.txt)" in out
    assert out.rstrip().endswith("The subagent finished.")
    assert len(children) == 2
    trace_line = next(
        line for line in done.stderr.decode().splitlines() if line.startswith("trace: ")
    )
    parent = read_trace(Path(trace_line.removeprefix("trace: ")))
    assert not any(r.origin for r in parent)
    [pointer] = [r.payload for r in parent if isinstance(r.payload, om.SubagentPayload)]
    [child_trace] = [
        p
        for p in (root / "default_project/agents/default_agent/traces").glob("*/*.jsonl")
        if p.name.startswith(pointer.session_id)
    ]
    child_records = read_trace(child_trace)
    meta = child_records[0].payload
    assert isinstance(meta, om.SessionMetaPayload)
    assert meta.source == "subagent"
    decisions = [
        r.payload for r in child_records if isinstance(r.payload, om.ApprovalDecisionPayload)
    ]
    assert [(d.decision, d.tool_call_id) for d in decisions] == [("allow", "child_1")]


async def test_penguin_run_asks_one_question_at_a_time_when_parent_and_child_both_ask(
    tmp_path: Path,
) -> None:
    # The parent's turn holds run_subagent and a write_file of its own, and the child
    # writes too: three questions, each on its own line with its answer.
    workspace = tmp_path / "ws"
    workspace.mkdir()

    def handler(request: t.ReceivedRequest) -> t.Reply:
        body = request.json()
        answered = any(m["role"] == "tool" for m in body["messages"])
        if first_user_text(body).startswith("Caller agent:"):
            if not answered:
                args: dict[str, object] = {
                    "description": "Child",
                    "file_path": "child.txt",
                    "content": "c\n",
                }
                return tool_call_reply("child_1", "write_file", args)
            return t.sse_reply([t.content_chunk("Child done."), t.finish_chunk()])
        if not answered:
            delegate = {"description": "Delegate", "prompt": "Caller agent: x\nWrite child.txt."}
            own = {"description": "Parent", "file_path": "parent.txt", "content": "p\n"}
            return t.sse_reply(
                [
                    t.tool_call_chunk(
                        0, id="parent_1", name="run_subagent", arguments=json.dumps(delegate)
                    ),
                    t.tool_call_chunk(
                        1, id="parent_2", name="write_file", arguments=json.dumps(own)
                    ),
                    t.finish_chunk("tool_calls"),
                ]
            )
        return t.sse_reply([t.content_chunk("All done."), t.finish_chunk()])

    async with t.serve_openai_compatible(handler) as server:
        done = await penguin_run(tmp_path / "root", workspace, server.base_url, "Go.", b"y\ny\ny\n")
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert (workspace / "child.txt").read_text() == "c\n"
    assert (workspace / "parent.txt").read_text() == "p\n"
    prompts = [line for line in out.splitlines() if line.startswith("? Approve")]
    assert prompts == ["? Approve this tool call? [Y/n] y"] * 3, out
    assert out.count("✓ [approved]") == 3


# --------------------------------------------------------------------------- configuration


def test_subagents_max_spawned_is_read_and_validated(tmp_path: Path) -> None:
    path = tmp_path / "system_config.yaml"
    path.write_text("")
    assert cfg.load_system_config(path).subagents == cfg.SubagentSettings(max_spawned=32)
    path.write_text("subagents:\n  maxSpawned: 3\n")
    assert cfg.load_system_config(path).subagents.max_spawned == 3
    for body, reason in [
        ("subagents:\n  maxSpawned: 0\n", "expected a positive number of subagents, got 0"),
        ("subagents:\n  maxSpawned: many\n", 'expected an integer, got "many"'),
        ("subagents:\n  max_spawned: 3\n", 'unknown key .*did you mean "maxSpawned"'),
        ("subagents: 5\n", "expected a mapping with maxSpawned"),
    ]:
        path.write_text(body)
        with pytest.raises(cfg.ConfigError, match=reason):
            cfg.load_system_config(path)
    with pytest.raises(ValueError, match="positive"):
        cfg.SubagentSettings(max_spawned=0)
    cfg.dump_default_system_config(path)
    assert "maxSpawned: 32" in path.read_text()
    assert cfg.load_system_config(path).subagents.max_spawned == 32


async def test_the_configured_spawn_limit_applies_to_the_session(
    tmp_path: Path, workspace: Path
) -> None:
    penguin.Agent.open(tmp_path / "root")  # writes the default file
    agent_config = tmp_path / "root/default_project/agents/default_agent/agent_state"
    path = agent_config / "system_config.yaml"
    path.write_text(path.read_text().replace("maxSpawned: 32", "maxSpawned: 1"))
    agent = penguin.Agent.open(tmp_path / "root")
    prompt = child_prompt("Once.")
    spawn = tool_call("run_subagent", {"description": "d", "prompt": prompt})
    llm = Routed({TASK: ScriptedLLM([turn(spawn), turn(spawn), "ok"]), prompt: ScriptedLLM()})
    messages = await run_task(agent, workspace, llm)
    first, second = tool_outputs(messages)
    assert first.output == "Done."
    assert second.output == (
        "[run_subagent error: this session has already spawned 1 subagents (the limit); "
        "finish the task with the ones you have]"
    )


# --------------------------------------------------------------------------- one writer

_RESUME = """\
import sys, trio, penguin
from penguin.llm import ScriptedLLM
async def main():
    agent = penguin.Agent.open(sys.argv[1])
    try:
        async with agent.resume_session(sys.argv[2], llm=ScriptedLLM([])):
            print("opened")
    except penguin.SessionLockedError as exc:
        print(exc)
trio.run(main)
"""


async def test_c5_6_a_running_child_session_is_refused_to_another_process(
    agent: penguin.Agent, workspace: Path
) -> None:
    # A child's trace is a session like any other (resume_session opens it), so while
    # the child is open its parent's process holds its lock, under the parent's surface.
    child = child_prompt("Wait for go.")
    wait = "while [ ! -e go ]; do sleep 0.05; done; echo went"
    llm = Routed(
        {
            TASK: ScriptedLLM(
                [
                    turn(tool_call("run_subagent", {"description": "c", "prompt": child})),
                    "Delegated.",
                ]
            ),
            child: ScriptedLLM(
                [turn(tool_call("exec_command", {"cmd": wait, "yield_time_ms": 60000})), "Went."]
            ),
        }
    )

    async def resume(session_id: str) -> str:
        root = str(agent.paths.root)
        done = await trio.run_process(
            [sys.executable, "-c", _RESUME, root, session_id], capture_stdout=True
        )
        return done.stdout.decode().strip()

    async with (
        agent.session(workspace, llm=llm, surface="penguin chat") as session,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(drain_run, session)
        await wait_until(lambda: bool(written_children(agent, session.session_id)))
        [child_id] = written_children(agent, session.session_id)
        refused = await resume(child_id)
        (workspace / "go").touch()
    assert refused == f"session {child_id} is open in penguin chat (pid {os.getpid()})"
    assert await resume(child_id) == "opened"  # let go with the parent


async def drain_run(session: penguin.Session) -> None:
    async with session.run([om.user_text(TASK)], approve=allow) as stream:
        await drain(stream)
    assert stream.result.status == "completed"


def written_children(agent: penguin.Agent, parent_id: str) -> list[str]:
    """The other sessions whose trace's first record is written (a file may be empty yet)."""
    found = []
    for path in agent.paths.traces_dir.glob("*/*.jsonl"):
        records = read_trace(path)
        meta = records[0].payload if records else None
        if isinstance(meta, om.SessionMetaPayload) and meta.session_id != parent_id:
            found.append(meta.session_id)
    return found
