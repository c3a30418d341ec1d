"""The sandbox of Agent sessions: project file, trace, resume, subagents (X1.3, X1.4, X2.3)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import penguin
from penguin import protocol as om
from penguin.llm import LLMRequest, ModelRef, ScriptedLLM, text, tool_call, turn
from penguin.trace import read_trace

from .conftest import tree_digest

pytestmark = pytest.mark.usefixtures("kernel_sandbox")

TASK = "Delegate the work."


def allow(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
    return "allow"


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


def meta_of(path: Path) -> dict[str, Any]:
    first = json.loads(path.read_text().splitlines()[0])
    assert first["type"] == "session_meta"
    payload: dict[str, Any] = first["payload"]
    return payload


async def test_x1_3_project_file_sets_the_policy_and_x1_4_the_trace_records_it(
    tmp_path: Path, workspace: Path, decoy: Path
) -> None:
    agent = penguin.Agent.open(tmp_path / "root")
    agent.paths.project_config.write_text('[sandbox]\nmode = "read-only"\nnetwork = false\n')
    llm = ScriptedLLM([turn(text("ok"))])
    async with agent.session(workspace, llm=llm) as session:
        policy = session.environment.config.sandbox
        assert policy is not None
        assert (policy.mode, policy.network) == ("read-only", False)
        async with session.run([om.user_text("hi")], approve=allow) as stream:
            async for _ in stream:
                pass
        await session.flush_trace()
        trace = session.trace_path
    assert meta_of(trace)["sandbox"] == {"mode": "read-only", "network": False}
    records = read_trace(trace)
    assert isinstance(records[0].payload, om.SessionMetaPayload)
    assert records[0].payload.sandbox == {"mode": "read-only", "network": False}


async def test_x1_3_the_sdk_default_is_off_and_records_nothing(
    tmp_path: Path, workspace: Path
) -> None:
    agent = penguin.Agent.open(tmp_path / "root")
    async with agent.session(workspace, llm=ScriptedLLM([turn(text("ok"))])) as session:
        assert session.environment.config.sandbox is None
        await session.flush_trace()
        trace = session.trace_path
    assert "sandbox" not in meta_of(trace)


async def test_c5_5_resume_keeps_the_recorded_policy_unless_one_is_given(
    tmp_path: Path, workspace: Path
) -> None:
    agent = penguin.Agent.open(tmp_path / "root")
    policy = penguin.SandboxPolicy(mode="read-only", network=False)
    async with agent.session(workspace, llm=ScriptedLLM([]), sandbox=policy) as session:
        await session.flush_trace()
        session_id = session.session_id
    async with agent.resume_session(session_id, llm=ScriptedLLM([])) as resumed:
        kept = resumed.environment.config.sandbox
        assert kept is not None
        assert (kept.mode, kept.network_on) == ("read-only", False)
        out = await resumed.environment.call_tool(
            om.tool_call("exec_command", {"description": "t", "cmd": "touch x"}, "c1")
        )
        assert "Read-only file system" in out.payload.output
    wider = penguin.SandboxPolicy(mode="workspace-write")
    async with agent.resume_session(session_id, llm=ScriptedLLM([]), sandbox=wider) as again:
        assert again.environment.config.sandbox is not None
        assert again.environment.config.sandbox.mode == "workspace-write"


async def test_x2_3_a_subagent_runs_under_exactly_the_parents_policy(
    tmp_path: Path, workspace: Path, decoy: Path
) -> None:
    before = tree_digest(decoy)
    prompt = "Caller agent: default_agent\nWrite outside."
    attack = f"echo x > {decoy}/keep.txt; echo y > {workspace}/child.txt"
    llm = Routed(
        {
            TASK: ScriptedLLM(
                [turn(tool_call("run_subagent", {"description": "d", "prompt": prompt})), "ok"]
            ),
            prompt: ScriptedLLM(
                [turn(tool_call("exec_command", {"description": "w", "cmd": attack})), "done"]
            ),
        }
    )
    agent = penguin.Agent.open(tmp_path / "root")
    policy = penguin.SandboxPolicy(mode="workspace-write", network=False, writable_tmp=False)
    outputs: list[str] = []
    async with (
        agent.session(workspace, llm=llm, sandbox=policy) as session,
        session.run([om.user_text(TASK)], approve=allow) as stream,
    ):
        async for message in stream:
            if om.is_tool_call_output(message) and message.origin:
                outputs.append(message.payload.output)
    assert any("Read-only file system" in out for out in outputs), outputs
    assert (workspace / "child.txt").read_text() == "y\n"
    assert tree_digest(decoy) == before
    child_traces = [
        p for p in agent.paths.traces_dir.rglob("*.jsonl") if meta_of(p).get("source") == "subagent"
    ]
    assert [meta_of(p)["sandbox"] for p in child_traces] == [
        {"mode": "workspace-write", "network": False}
    ]
