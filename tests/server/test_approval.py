"""S6 over real sockets: the mode from the index on every decision, the policy first, manual
decisions through the API, subagents through the parent, and every decision in the trace."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import httpx

from penguin import config as cfg
from penguin import protocol as om
from penguin.trace import read_trace, trace_files

from .support import (
    SESSIONS,
    EventStream,
    ScriptedModel,
    calls,
    create_session,
    error_of,
    exec_command,
    open_stream,
    read_file,
    say,
    start_task,
)


def call_id_of(event: Any) -> str:
    return str(event.data["toolCall"]["payload"]["tool_call_id"])


def decisions(stream: EventStream) -> dict[str, dict[str, Any]]:
    return {
        e.data["payload"]["tool_call_id"]: e.data["payload"]
        for e in stream.seen
        if e.type == "approval_decision"
    }


async def answer(client: httpx.AsyncClient, sid: str, call_id: str, decision: str) -> int:
    response = await client.post(
        f"/api/sessions/{sid}/approvals/{call_id}", json={"decision": decision}
    )
    return response.status_code


async def test_s6_1_mode_is_reread_on_every_decision(
    client: httpx.AsyncClient, model: ScriptedModel, workspace: Path
) -> None:
    task = model.script(
        "two steps",
        calls(exec_command("touch one")),
        calls(exec_command("touch two")),
        say("Both done."),
    )
    sid = (await create_session(client, approvalMode="always-ask", workspace=str(workspace)))[
        "sessionId"
    ]
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        first = await stream.until_type("approval_request")
        # A PATCH does not resolve a call already waiting...
        patched = await client.patch(f"/api/sessions/{sid}", json={"approvalMode": "allow-all"})
        assert patched.status_code == 200
        pending = (await client.get(f"/api/sessions/{sid}/approvals")).json()["approvals"]
        assert [call_id_of_pending(p) for p in pending] == [call_id_of(first)]
        assert patched.json()["session"]["pendingApprovalCount"] == 1
        assert await answer(client, sid, call_id_of(first), "allow") == 204
        # ...but the next decision reads the new mode: no question this time.
        await stream.until_idle()
    assert [e for e in stream.seen if e.type == "approval_request"] == [first]
    assert [d["decision"] for d in decisions(stream).values()] == ["allow", "allow"]
    assert (workspace / "one").exists()
    assert (workspace / "two").exists()


def call_id_of_pending(pending: dict[str, Any]) -> str:
    return str(pending["toolCall"]["payload"]["tool_call_id"])


async def test_s6_1_a_mode_written_to_the_index_by_anyone_applies_to_the_next_call(
    client: httpx.AsyncClient, model: ScriptedModel, root: Path, workspace: Path
) -> None:
    task = model.script(
        "three steps",
        calls(exec_command("touch a")),
        calls(exec_command("touch b")),
        say("Done."),
    )
    sid = (await create_session(client, approvalMode="always-ask", workspace=str(workspace)))[
        "sessionId"
    ]
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        first = await stream.until_type("approval_request")
        with (
            contextlib.closing(sqlite3.connect(root / "server.sqlite3")) as db,
            db,
        ):  # not through the API at all
            db.execute("UPDATE sessions SET approval_mode='deny-all' WHERE session_id=?", (sid,))
        assert await answer(client, sid, call_id_of(first), "allow") == 204
        await stream.until_idle()
    assert [d["decision"] for d in decisions(stream).values()] == ["allow", "deny"]
    assert (workspace / "a").exists()
    assert not (workspace / "b").exists()


async def test_s6_1_each_mode(
    client: httpx.AsyncClient, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "notes.txt").write_text("hello\n")
    task = model.script(
        "read then run", calls(read_file("notes.txt")), calls(exec_command("touch ran")), say("ok")
    )
    denied = (await create_session(client, approvalMode="deny-all", workspace=str(workspace)))[
        "sessionId"
    ]
    async with open_stream(client, denied) as stream:
        await start_task(client, denied, task)
        await stream.until_idle()
    assert [d["decision"] for d in decisions(stream).values()] == ["deny", "deny"]
    outputs = [e.data["payload"]["output"] for e in stream.seen if e.type == "tool_call_output"]
    assert outputs == ["Tool call denied by user.", "Tool call denied by user."]
    assert not (workspace / "ran").exists()

    reading = (await create_session(client, approvalMode="read-only", workspace=str(workspace)))[
        "sessionId"
    ]
    async with open_stream(client, reading) as stream:
        await start_task(client, reading, task)
        asked = await stream.until_type("approval_request")
        assert asked.data["toolCall"]["payload"]["name"] == "exec_command"  # read_file was not
        assert await answer(client, reading, call_id_of(asked), "deny") == 204
        await stream.until_idle()
    assert [d["decision"] for d in decisions(stream).values()] == ["allow", "deny"]
    assert not (workspace / "ran").exists()


async def test_s6_2_the_command_policy_is_checked_before_the_mode(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    task = model.script("wipe", calls(exec_command("rm -rf /")), say("Refused, fine."))
    sid = (await create_session(client, approvalMode="always-ask"))["sessionId"]
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        await stream.until_idle()
    assert "approval_request" not in [e.type for e in stream.seen]
    (decision,) = decisions(stream).values()
    assert decision["decision"] in ("deny", "forbidden")
    assert decision["policy_rule"] == "rm-recursive-force"
    outputs = [e.data["payload"]["output"] for e in stream.seen if e.type == "tool_call_output"]
    assert outputs == ["Tool call denied by policy."]


async def test_s6_3_answers_first_wins_unknown_and_bad_decisions(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    task = model.script("ask me", calls(exec_command("echo asked")), say("ok"))
    sid = (await create_session(client, approvalMode="always-ask"))["sessionId"]
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        asked = await stream.until_type("approval_request")
        call_id = call_id_of(asked)
        bad = await client.post(
            f"/api/sessions/{sid}/approvals/{call_id}", json={"decision": "maybe"}
        )
        assert error_of(bad) == (400, "invalid_request")
        unknown = await client.post(
            f"/api/sessions/{sid}/approvals/call_nope", json={"decision": "allow"}
        )
        assert error_of(unknown) == (404, "approval_not_found")
        assert await answer(client, sid, call_id, "deny") == 204
        late = await client.post(
            f"/api/sessions/{sid}/approvals/{call_id}", json={"decision": "allow"}
        )
        assert error_of(late) == (404, "approval_not_found")
        resolved = await stream.until_type("approval_resolved")
        assert resolved.data == {
            "type": "approval_resolved",
            "toolCallId": call_id,
            "decision": "deny",
        }
        await stream.until_idle()
    assert decisions(stream)[call_id]["decision"] == "deny"


async def test_s6_4_pending_calls_are_listed_with_their_origin(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    task = model.script("list me", calls(exec_command("echo listed")), say("ok"))
    sid = (await create_session(client, approvalMode="always-ask"))["sessionId"]
    assert (await client.get(f"/api/sessions/{sid}/approvals")).json() == {"approvals": []}
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        asked = await stream.until_type("approval_request")
        (pending,) = (await client.get(f"/api/sessions/{sid}/approvals")).json()["approvals"]
        assert pending == {"toolCall": asked.data["toolCall"], "origin": None}
        assert pending["toolCall"]["payload"]["name"] == "exec_command"
        assert asked.data["origin"] is None
        listed = (await client.get(SESSIONS)).json()["sessions"]
        assert listed[0]["pendingApprovalCount"] == 1
        assert await answer(client, sid, call_id_of(asked), "allow") == 204
        await stream.until_idle()


async def test_s6_5_a_subagent_call_is_asked_through_the_parent_with_its_origin(
    client: httpx.AsyncClient, model: ScriptedModel, root: Path, workspace: Path
) -> None:
    model.script("make a file", calls(exec_command("touch by-child")), say("Made."))
    task = model.script(
        "delegate",
        calls(("run_subagent", {"description": "helper", "prompt": "make a file"})),
        say("Delegated."),
    )
    sid = (await create_session(client, approvalMode="always-ask", workspace=str(workspace)))[
        "sessionId"
    ]
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        spawn = await stream.until_type("approval_request")
        assert spawn.data["toolCall"]["payload"]["name"] == "run_subagent"
        assert await answer(client, sid, call_id_of(spawn), "allow") == 204
        child_call = await stream.until_type("approval_request")
        origin = child_call.data["origin"]
        assert origin is not None
        assert len(origin) == 1
        assert child_call.data["toolCall"]["origin"] == origin
        (pending,) = (await client.get(f"/api/sessions/{sid}/approvals")).json()["approvals"]
        assert pending["origin"] == origin
        assert await answer(client, sid, call_id_of(child_call), "allow") == 204
        await stream.until_idle()
    assert (workspace / "by-child").exists()
    child_decisions = [
        e.data for e in stream.seen if e.type == "approval_decision" and e.data.get("origin")
    ]
    assert [d["payload"]["decision"] for d in child_decisions] == ["allow"]
    # The child's trace is its own file, and not a session of its own in the listing.
    traces = cfg.AgentPaths(root).traces_dir
    assert trace_files(traces, origin[0])
    assert [s["sessionId"] for s in (await client.get(SESSIONS)).json()["sessions"]] == [sid]


async def test_s6_6_abort_denies_what_is_pending_and_records_no_decision_for_it(
    client: httpx.AsyncClient, model: ScriptedModel, root: Path, workspace: Path
) -> None:
    task = model.script("abort me", calls(exec_command("touch never")))
    sid = (await create_session(client, approvalMode="always-ask", workspace=str(workspace)))[
        "sessionId"
    ]
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        asked = await stream.until_type("approval_request")
        assert (await client.post(f"/api/sessions/{sid}/abort")).status_code == 202
        resolved = await stream.until_type("approval_resolved")
        assert resolved.data["decision"] == "deny"
        assert resolved.data["toolCallId"] == call_id_of(asked)
        await stream.until(lambda e: e.is_state("idle"))
    assert not (workspace / "never").exists()
    (trace,) = trace_files(cfg.AgentPaths(root).traces_dir, sid)
    recorded = [r.payload for r in read_trace(trace)]
    assert not [p for p in recorded if getattr(p, "type", None) == "approval_decision"]
    assert any(getattr(p, "type", None) == "abort" for p in recorded)
    assert (await client.get(f"/api/sessions/{sid}/approvals")).json() == {"approvals": []}


async def test_s6_7_every_decision_is_an_approval_decision_in_the_trace(
    client: httpx.AsyncClient, model: ScriptedModel, root: Path
) -> None:
    task = model.script(
        "decide thrice",
        calls(exec_command("echo allowed")),
        calls(exec_command("echo denied")),
        calls(exec_command("rm -rf ~")),
        say("ok"),
    )
    sid = (await create_session(client, approvalMode="always-ask"))["sessionId"]
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        for verdict in ("allow", "deny"):
            asked = await stream.until_type("approval_request")
            assert await answer(client, sid, call_id_of(asked), verdict) == 204
        await stream.until_idle()
    (trace,) = trace_files(cfg.AgentPaths(root).traces_dir, sid)
    recorded = [
        r.payload for r in read_trace(trace) if isinstance(r.payload, om.ApprovalDecisionPayload)
    ]
    assert [(p.decision, p.policy_rule) for p in recorded][:2] == [("allow", None), ("deny", None)]
    assert recorded[2].decision in ("deny", "forbidden")
    assert recorded[2].policy_rule is not None


async def test_s6_8_task_state_and_approval_resolved_are_published(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    task = model.script("publish", calls(exec_command("echo x")), say("ok"))
    sid = (await create_session(client, approvalMode="always-ask"))["sessionId"]
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        asked = await stream.until_type("approval_request")
        assert await answer(client, sid, call_id_of(asked), "allow") == 204
        await stream.until_idle()
    server_events = [e.data["type"] for e in stream.seen if e.event == "server_event"]
    assert server_events == [
        "task_state",  # the snapshot: idle
        "task_state",  # running
        "approval_request",
        "approval_resolved",
        "task_state",  # idle
    ]
    states = [e.data["state"] for e in stream.seen if e.type == "task_state"]
    assert states == ["idle", "running", "idle"]


# --------------------------------------------------------------------------- issue 18 item 1


def tool_outputs(stream: EventStream) -> dict[str, str]:
    return {
        e.data["payload"]["tool_call_id"]: e.data["payload"]["output"]
        for e in stream.seen
        if e.type == "tool_call_output" and e.data["payload"].get("stop_reason") is not None
    }


async def test_18_1_deny_with_a_reason_tells_the_model_why(
    client: httpx.AsyncClient, model: ScriptedModel, workspace: Path
) -> None:
    task = model.script("make x", calls(exec_command("touch x")), say("Understood."))
    sid = (await create_session(client, approvalMode="always-ask", workspace=str(workspace)))[
        "sessionId"
    ]
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        asked = await stream.until_type("approval_request")
        response = await client.post(
            f"/api/sessions/{sid}/approvals/{call_id_of(asked)}",
            json={"decision": "deny", "reason": "  not in my workspace, please  "},
        )
        assert response.status_code == 204
        await stream.until_idle()
    assert [d["decision"] for d in decisions(stream).values()] == ["deny"]
    denial = "Tool call denied by user. Reason: not in my workspace, please"
    assert tool_outputs(stream) == {call_id_of(asked): denial}
    assert not (workspace / "x").exists()
    tool_messages = [m for m in model.requests[-1]["messages"] if m.get("role") == "tool"]
    assert [m["content"] for m in tool_messages] == [denial]


async def test_18_1_allow_for_the_session_fills_the_allow_list_shown_in_the_session(
    client: httpx.AsyncClient, model: ScriptedModel, workspace: Path
) -> None:
    task = model.script(
        "three commands",
        calls(exec_command("echo one")),
        calls(exec_command("echo two | cat")),
        calls(exec_command("echo three; touch z")),
        say("Done."),
    )
    sid = (await create_session(client, approvalMode="always-ask", workspace=str(workspace)))[
        "sessionId"
    ]
    assert (await client.get(f"/api/sessions/{sid}")).json()["session"]["allowList"] == []
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        first = await stream.until_type("approval_request")
        response = await client.post(
            f"/api/sessions/{sid}/approvals/{call_id_of(first)}",
            json={"decision": "allow", "forSession": True},
        )
        assert response.status_code == 204
        # "echo two | cat" starts every segment with an allowed word? cat is not: asked
        second = await stream.until_type("approval_request")
        arguments = json.loads(second.data["toolCall"]["payload"]["arguments"])
        assert arguments["cmd"] == "echo two | cat"
        info = (await client.get(f"/api/sessions/{sid}")).json()["session"]
        assert info["allowList"] == ["exec_command echo"]
        assert await answer(client, sid, call_id_of(second), "deny") == 204
        third = await stream.until_type("approval_request")  # touch is not allowed either
        assert await answer(client, sid, call_id_of(third), "deny") == 204
        await stream.until_idle()
    requests = [e for e in stream.seen if e.type == "approval_request"]
    assert len(requests) == 3
    listed = (await client.get(SESSIONS)).json()["sessions"]
    assert [s["allowList"] for s in listed if s["sessionId"] == sid] == [["exec_command echo"]]


async def test_18_1_an_allowed_word_lets_the_next_command_through_unasked(
    client: httpx.AsyncClient, model: ScriptedModel, workspace: Path
) -> None:
    task = model.script(
        "two echoes",
        calls(exec_command("echo one > one.txt")),
        calls(exec_command("echo two > two.txt")),
        say("Done."),
    )
    sid = (await create_session(client, approvalMode="always-ask", workspace=str(workspace)))[
        "sessionId"
    ]
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        first = await stream.until_type("approval_request")
        response = await client.post(
            f"/api/sessions/{sid}/approvals/{call_id_of(first)}",
            json={"decision": "allow", "forSession": True},
        )
        assert response.status_code == 204
        await stream.until_idle()
    assert len([e for e in stream.seen if e.type == "approval_request"]) == 1
    assert [d["decision"] for d in decisions(stream).values()] == ["allow", "allow"]
    assert (workspace / "two.txt").read_text() == "two\n"


async def test_18_1_a_decision_body_is_checked(
    client: httpx.AsyncClient, model: ScriptedModel, workspace: Path
) -> None:
    task = model.script("ask me", calls(exec_command("touch y")), say("ok"))
    sid = (await create_session(client, approvalMode="always-ask", workspace=str(workspace)))[
        "sessionId"
    ]
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        asked = await stream.until_type("approval_request")
        route = f"/api/sessions/{sid}/approvals/{call_id_of(asked)}"
        for body in (
            {"decision": "allow", "reason": "why not"},
            {"decision": "deny", "forSession": True},
            {"decision": "allow", "forSession": "yes"},
            {"decision": "deny", "reason": 3},
            {"decision": "deny", "why": "x"},
        ):
            assert error_of(await client.post(route, json=body)) == (400, "invalid_request"), body
        assert len((await client.get(f"/api/sessions/{sid}/approvals")).json()["approvals"]) == 1
        assert (
            await client.post(route, json={"decision": "deny", "reason": ""})
        ).status_code == 204
        await stream.until_idle()
    assert tool_outputs(stream) == {call_id_of(asked): "Tool call denied by user."}
