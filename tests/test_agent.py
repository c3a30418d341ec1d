"""Agent and Session: files on disk, a whole session, resume after an interrupt and a crash."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import trio

import penguin
from penguin import approval
from penguin import protocol as om
from penguin.engine import INTERRUPTED_OUTPUT
from penguin.llm import ScriptedLLM, text, tool_call, turn
from penguin.trace import read_trace


def allow(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
    return "allow"


async def drain(stream: penguin.engine.RunStream) -> list[om.OmniMessage[om.Payload]]:
    return [message async for message in stream]


async def test_first_use_writes_the_default_system_config(tmp_path: Path) -> None:
    agent = penguin.Agent.open(tmp_path)
    config_file = tmp_path / "default_project/agents/default_agent/agent_state/system_config.yaml"
    assert agent.paths.system_config == config_file
    assert config_file.exists()
    assert "tools:" in config_file.read_text()
    assert agent.config.effective_builtin_tools() == penguin.config.default_tools()


async def test_a_session_runs_a_task_and_traces_it(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    llm = ScriptedLLM(
        [
            turn(tool_call("write_file", {"file_path": "a.txt", "content": "x\n"})),
            turn(text("Wrote a.txt.")),
        ]
    )
    agent = penguin.Agent.open(tmp_path / "root")
    async with agent.session(workspace, llm=llm) as session:
        async with session.run([om.user_text("write it")], approve=allow) as stream:
            messages = await drain(stream)
        assert stream.result.status == "completed"
        await session.flush_trace()
        trace_path = session.trace_path
        session_id = session.session_id
    assert (workspace / "a.txt").read_text() == "x\n"
    assert trace_path.name == f"{session_id}_001.jsonl"
    assert stat.S_IMODE(os.stat(trace_path).st_mode) == 0o600
    records = read_trace(trace_path)
    assert records[0].type == "session_meta"
    meta = records[0].payload
    assert isinstance(meta, om.SessionMetaPayload)
    assert (meta.session_id, meta.workspace, meta.model_id) == (
        session_id,
        str(workspace),
        "scripted",
    )
    assert "{{" not in meta.system_prompt
    assert str(workspace) in meta.system_prompt
    kinds = [getattr(r.payload, "type", r.type) for r in records[1:]]
    assert sorted(kinds[:2]) == ["text", "tool_list_ready"]
    assert kinds[2] == "request_begin"
    assert not any(om.is_partial(r) for r in records)
    assert [m for m in messages if om.is_tool_call_output(m)]


async def test_without_an_approver_every_call_is_denied(tmp_path: Path) -> None:
    llm = ScriptedLLM([turn(tool_call("write_file", {"file_path": "a.txt", "content": "x"}))])
    agent = penguin.Agent.open(tmp_path / "root")
    async with (
        agent.session(tmp_path, llm=llm) as session,
        session.run([om.user_text("write it")]) as stream,
    ):
        messages = await drain(stream)
    [output] = [m for m in messages if om.is_tool_call_output(m)]
    assert (output.payload.output, output.payload.stop_reason) == (
        "Tool call denied by user.",
        "aborted",
    )
    assert not (tmp_path / "a.txt").exists()


async def test_resume_after_an_interrupt_resends_the_carry_over_in_the_same_file(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    agent = penguin.Agent.open(tmp_path / "root")
    first = ScriptedLLM(
        [turn(tool_call("exec_command", {"description": "wait", "cmd": "echo started; sleep 30"}))]
    )
    interrupt = trio.Event()
    async with agent.session(workspace, llm=first) as session:
        async with session.run(
            [om.user_text("wait")], approve=allow, interrupt=interrupt
        ) as stream:
            async for message in stream:
                if om.is_partial(message) and "started" in getattr(message.payload, "output", ""):
                    interrupt.set()
        assert stream.result.status == "aborted"
        session_id, trace_path = session.session_id, session.trace_path

    second = ScriptedLLM([turn(text("Picking up where we stopped."))])
    async with agent.resume_session(session_id, llm=second) as resumed:
        assert resumed.trace_path == trace_path
        assert resumed.workspace_dir == workspace
        async with resumed.run([om.user_text("go on")], approve=allow) as stream:
            await drain(stream)
        assert stream.result.status == "completed"
    request = second.requests[0]
    payloads = [m.payload for m in request.messages]
    call = next(p for p in payloads if isinstance(p, om.ToolCallPayload))
    output = next(p for p in payloads if isinstance(p, om.ToolCallOutputPayload))
    assert output.tool_call_id == call.tool_call_id
    assert output.stop_reason == "aborted"
    assert output.output.endswith("[interrupted: tool aborted by user]")
    assert isinstance(payloads[-1], om.TextPayload)
    assert payloads[-1].text == "go on"
    records = read_trace(trace_path)
    assert [r.type for r in records].count("session_meta") == 1
    assert sum(1 for r in records if getattr(r.payload, "type", "") == "request_begin") == 2


CRASHING_SESSION = textwrap.dedent(
    """
    import sys, trio, penguin
    from penguin import protocol as om
    from penguin.llm import ScriptedLLM, tool_call, turn

    async def main():
        agent = penguin.Agent.open(sys.argv[1])
        llm = ScriptedLLM([turn(tool_call(
            "exec_command", {"description": "wait", "cmd": "sleep 60"}, id="call_crash"))])
        async with agent.session(sys.argv[2], llm=llm) as session:
            print(session.session_id, flush=True)
            async with session.run([om.user_text("wait")], approve=lambda c: "allow") as stream:
                async for message in stream:
                    if getattr(message.payload, "type", "") == "request_end":
                        await session.flush_trace()
                        print("tool running", flush=True)
    trio.run(main)
    """
)


async def test_resume_after_a_crash_keeps_pairing_and_tolerates_a_torn_tail(
    tmp_path: Path,
) -> None:
    root, workspace = tmp_path / "root", tmp_path / "ws"
    workspace.mkdir()
    process = await trio.lowlevel.open_process(
        [sys.executable, "-c", CRASHING_SESSION, str(root), str(workspace)],
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None
    seen = b""
    with trio.fail_after(30):
        while b"tool running\n" not in seen:
            chunk = await process.stdout.receive_some()
            assert chunk, seen
            seen += chunk
        process.send_signal(signal.SIGKILL)
        await process.wait()
    session_id = seen.decode().split("\n", 1)[0]
    agent = penguin.Agent.open(root)
    [trace_path] = list((agent.paths.traces_dir).glob(f"*/{session_id}_001.jsonl"))
    with trace_path.open("ab") as handle:
        handle.write(b'{"timestamp":"2026-01-01T00:00:00.000Z","type":"model_m')  # a torn write

    after = ScriptedLLM([turn(text("Recovered."))])
    async with agent.resume_session(session_id, llm=after) as resumed:
        async with resumed.run([om.user_text("what happened?")], approve=allow) as stream:
            await drain(stream)
        await resumed.flush_trace()
    payloads = [m.payload for m in after.requests[0].messages]
    outputs = [p for p in payloads if isinstance(p, om.ToolCallOutputPayload)]
    assert [(p.tool_call_id, p.output, p.stop_reason) for p in outputs] == [
        ("call_crash", INTERRUPTED_OUTPUT, "aborted")
    ]
    records = read_trace(trace_path)
    assert records[-1].type == "event_msg"
    assert getattr(records[-1].payload, "type", "") == "request_end"
    assert any(
        isinstance(r.payload, om.TextPayload) and r.payload.text == "Recovered." for r in records
    )
    assert trace_path.read_bytes().count(b'"type":"model_m\n') == 1  # healed with a newline


# ----------------------------------------------- issue 9.1: forbidden in the audit record


def _decisions(path: Path) -> list[dict[str, object]]:
    """The ``approval_decision`` payloads of a trace file, as written (JSON)."""
    with path.open() as handle:
        payloads = [json.loads(line)["payload"] for line in handle if line.strip()]
    return [p for p in payloads if p.get("type") == "approval_decision"]


@pytest.mark.parametrize("mode", ["allow-all", "deny-all", "read-only", "always-ask"])
async def test_9_1_a_policy_hit_is_traced_as_forbidden_under_every_approval_mode(
    tmp_path: Path, mode: str
) -> None:
    workspace = tmp_path / "ws"
    (workspace / "scratch").mkdir(parents=True)
    command = {"description": "Clean up", "cmd": "rm -rf ./scratch"}
    llm = ScriptedLLM([turn(tool_call("exec_command", command, "call_1")), "Understood."])
    asked: list[str] = []

    async def ask(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        asked.append(call.payload.tool_call_id)
        return "allow"

    agent = penguin.Agent.open(tmp_path / "root")
    async with agent.session(workspace, llm=llm) as session:
        approve = approval.approver_for_mode(
            approval.parse_approval_mode(mode),
            ask=ask,
            permission=session.environment.tool_permission,
        )
        async with session.run([om.user_text("tidy up")], approve=approve) as stream:
            messages = await drain(stream)
        await session.flush_trace()
        trace_path = session.trace_path
    assert asked == []  # the policy answered before the mode's approver was consulted
    assert (workspace / "scratch").is_dir()
    assert _decisions(trace_path) == [
        {
            "type": "approval_decision",
            "decision": "forbidden",
            "tool_call_id": "call_1",
            "policy_rule": "rm-recursive-force",
        }
    ]
    [output] = [m.payload for m in messages if isinstance(m.payload, om.ToolCallOutputPayload)]
    assert (output.output, output.stop_reason) == ("Tool call denied by policy.", "aborted")
    # The typed reader gives the same verdict back.
    records = read_trace(trace_path)
    [decision] = [r.payload for r in records if isinstance(r.payload, om.ApprovalDecisionPayload)]
    assert (decision.decision, decision.policy_rule) == ("forbidden", "rm-recursive-force")


async def test_9_1_an_approver_answering_forbidden_is_traced_as_forbidden_without_a_rule(
    tmp_path: Path,
) -> None:
    llm = ScriptedLLM([turn(tool_call("read_file", {"file_path": "a.txt"}, "call_1")), "Ok."])

    def strict(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        return "forbidden"

    agent = penguin.Agent.open(tmp_path / "root")
    async with agent.session(tmp_path, llm=llm) as session:
        async with session.run([om.user_text("read it")], approve=strict) as stream:
            messages = await drain(stream)
        await session.flush_trace()
        trace_path = session.trace_path
    assert _decisions(trace_path) == [
        {"type": "approval_decision", "decision": "forbidden", "tool_call_id": "call_1"}
    ]
    [output] = [m.payload for m in messages if isinstance(m.payload, om.ToolCallOutputPayload)]
    assert output.output == "Tool call denied by policy."


async def test_a_workspace_maker_runs_in_the_opening_worker_and_the_prompt_has_the_real_path(
    tmp_path: Path,
) -> None:
    # Agent.session(workspace_dir=f): f makes the workspace in the worker thread that
    # opens the session (with its lock and its files), once; the prompt's CWD and SHELL
    # are the Environment's (the link resolved), its AGENTS.md the one f wrote.
    real = tmp_path / "real"
    link = tmp_path / "link"
    loop_thread = threading.get_ident()
    made_in: list[int] = []

    def make() -> Path:
        made_in.append(threading.get_ident())
        real.mkdir()
        (real / "AGENTS.md").write_text("Made by the maker.\n")
        link.symlink_to(real)
        return link

    agent = penguin.Agent.open(tmp_path / "root")
    async with agent.session(make, llm=ScriptedLLM([turn(text("Hi."))])) as session:
        assert session.workspace_dir == real
        assert session.session_meta is not None
        prompt = session.session_meta.payload.system_prompt
        shell = session.environment.shell_name
    assert len(made_in) == 1
    assert made_in[0] != loop_thread
    assert f"relative paths resolve here): {real}\n" in prompt
    assert str(link) not in prompt
    assert f"Shell used by exec_command: {shell}\n" in prompt
    assert "Made by the maker." in prompt


async def test_a_session_that_cannot_start_calls_no_workspace_maker_and_holds_no_lock(
    tmp_path: Path,
) -> None:
    agent = penguin.Agent.open(tmp_path / "root")
    called: list[str] = []

    def make() -> Path:
        called.append("made")  # pragma: no cover - the point is that it is not called
        return tmp_path

    with pytest.raises(penguin.config.ConfigError):  # no model configured, none given
        async with agent.session(make):
            pass  # pragma: no cover
    assert called == []
    assert not agent.paths.workspaces_dir.exists()  # nor a temporary one
    assert list(agent.paths.traces_dir.rglob("*.lock")) == []


async def test_a_workspace_maker_that_raises_lets_go_of_the_lock(tmp_path: Path) -> None:
    agent = penguin.Agent.open(tmp_path / "root")

    def make() -> Path:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left on device"):
        async with agent.session(make, llm=ScriptedLLM([turn(text("Unseen."))])):
            pass  # pragma: no cover
    assert agent.paths.traces_dir.is_dir()  # the lock was taken there, and let go
    assert list(agent.paths.traces_dir.rglob("*.lock")) == []
