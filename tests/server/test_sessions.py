"""S3 and S4 over real sockets: errors, SessionInfo, create/list/get/patch/delete, history,
the index, restarts and sessions made by ``penguin run``."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import sys
from pathlib import Path
from typing import Any

import httpx
import trio

from penguin import config as cfg
from penguin import protocol as om
from penguin.server import ServerOptions, open_server
from penguin.trace import read_trace, trace_files

from ..stopped_server import stopped_server
from .support import (
    AUTH,
    SESSIONS,
    TOKEN,
    ScriptedModel,
    calls,
    create_session,
    error_of,
    exec_command,
    open_stream,
    say,
    start_task,
)

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
INFO_FIELDS = {
    "sessionId",
    "projectId",
    "agentId",
    "provider",
    "modelId",
    "workspace",
    "approvalMode",
    "sandboxMode",
    "network",
    "title",
    "archived",
    "state",
    "pendingApprovalCount",
    "allowList",
    "createdAt",
    "lastActiveAt",
    "hasTrace",
    "status",  # issue 22: the reference's name for state, beside it
}
MISSING = "session-2026-01-02-03-04-05-0123abcd"


def index_row(root: Path, session_id: str) -> dict[str, Any] | None:
    with contextlib.closing(sqlite3.connect(root / "server.sqlite3")) as db, db:
        db.row_factory = sqlite3.Row
        found = db.execute("SELECT * FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    return None if found is None else dict(found)


# --------------------------------------------------------------------------- S3


async def test_s3_3_unknown_route_wrong_method_unknown_session(client: httpx.AsyncClient) -> None:
    assert error_of(await client.get("/api/nothing/here")) == (404, "not_found")
    assert error_of(await client.get("/nothing")) == (404, "not_found")
    wrong = await client.put(SESSIONS, json={})
    assert error_of(wrong) == (405, "method_not_allowed")
    assert "POST" in wrong.headers["allow"]
    assert "GET" in wrong.headers["allow"]
    assert error_of(await client.post(f"/api/sessions/{MISSING}", json={})) == (
        405,
        "method_not_allowed",
    )
    for method, path in [
        ("GET", f"/api/sessions/{MISSING}"),
        ("PATCH", f"/api/sessions/{MISSING}"),
        ("DELETE", f"/api/sessions/{MISSING}"),
        ("GET", f"/api/sessions/{MISSING}/messages"),
        ("POST", f"/api/sessions/{MISSING}/tasks"),
        ("POST", f"/api/sessions/{MISSING}/steer"),
        ("POST", f"/api/sessions/{MISSING}/abort"),
        ("GET", f"/api/sessions/{MISSING}/approvals"),
        ("GET", f"/api/sessions/{MISSING}/stream"),
        ("GET", f"/api/sessions/{MISSING}/processes"),
        ("POST", f"/api/sessions/{MISSING}/processes/proc-1/kill"),
        ("POST", f"/api/sessions/{MISSING}/approvals/call_1"),
    ]:
        body = {
            "tasks": {"input": [{"type": "text", "text": "x"}]},
            "steer": {"text": "x"},
            "call_1": {"decision": "allow"},
        }
        answer = await client.request(
            method, path, json=body.get(path.rsplit("/", 1)[1], {"title": "x"})
        )
        assert error_of(answer) == (404, "session_not_found"), path


async def test_s3_2_malformed_json_and_bad_fields_over_the_wire(client: httpx.AsyncClient) -> None:
    headers = {"Content-Type": "application/json"}
    assert error_of(await client.post(SESSIONS, content=b"{nope", headers=headers)) == (
        400,
        "invalid_json",
    )
    unknown = await client.post(SESSIONS, json={"colour": "blue"})
    assert error_of(unknown) == (400, "invalid_request")
    assert "colour" in unknown.json()["error"]["message"]
    assert error_of(await client.post(SESSIONS, json=[1])) == (400, "invalid_request")
    assert error_of(await client.post(SESSIONS, json={"title": 5})) == (400, "invalid_request")


# --------------------------------------------------------------------------- S4.1-S4.5


async def test_s4_1_and_s4_2_a_created_session_is_indexed_before_the_answer(
    client: httpx.AsyncClient, root: Path, workspace: Path
) -> None:
    created = await client.post(
        SESSIONS, json={"workspace": str(workspace), "title": "First", "approvalMode": "READ-ONLY "}
    )
    assert created.status_code == 201
    info = created.json()["session"]
    assert set(info) == INFO_FIELDS
    assert info["projectId"] == "default_project"
    assert info["agentId"] == "default_agent"
    assert (info["provider"], info["modelId"]) == ("local", "scripted-model")
    assert info["workspace"] == str(workspace)
    assert info["approvalMode"] == "read-only"
    assert info["title"] == "First"
    assert info["archived"] is False
    assert info["state"] == "idle"
    assert info["pendingApprovalCount"] == 0
    assert TIMESTAMP.fullmatch(info["createdAt"])
    assert info["lastActiveAt"] == info["createdAt"]
    assert info["hasTrace"] is False  # issue 22: true once a task has started
    row = index_row(root, info["sessionId"])
    assert row is not None
    assert row["approval_mode"] == "read-only"


async def test_s4_2_defaults_a_temporary_workspace_and_allow_all(
    client: httpx.AsyncClient, root: Path
) -> None:
    info = await create_session(client)
    assert info["approvalMode"] == "allow-all"
    assert "title" not in info  # issue 22: absent rather than null
    workspace = Path(info["workspace"])
    assert workspace.parent == cfg.AgentPaths(root).workspaces_dir
    assert workspace.name.startswith("tmp-")


async def test_s4_2_model_and_workspace_errors(
    client: httpx.AsyncClient, tmp_path: Path, workspace: Path
) -> None:
    only_model = await client.post(SESSIONS, json={"modelId": "scripted-model"})
    assert error_of(only_model) == (400, "invalid_request")
    unknown = await client.post(SESSIONS, json={"modelId": "gpt-9", "provider": "local"})
    assert error_of(unknown) == (400, "model_not_found")
    named = await client.post(SESSIONS, json={"modelId": "scripted-model", "provider": "local"})
    assert named.status_code == 201
    elsewhere = await client.post("/api/projects/empty/agents/default_agent/sessions", json={})
    assert error_of(elsewhere) == (400, "model_not_configured")
    for bad in ("relative/dir", str(tmp_path / "missing"), str(workspace / "file")):
        (workspace / "file").write_text("x")
        refused = await client.post(SESSIONS, json={"workspace": bad})
        assert error_of(refused) == (400, "workspace_not_found")
    remote = tmp_path / "remote"
    remote.mkdir()
    with stopped_server(remote) as server:
        server.answer()  # its file server refuses every look into it
        refused = await client.post(SESSIONS, json={"workspace": str(remote)})
    assert error_of(refused) == (400, "workspace_not_found")
    assert refused.json()["error"]["message"] == (
        f"The workspace {str(remote)!r} cannot be read: Connection refused."
    )
    assert error_of(await client.post(SESSIONS, json={"approvalMode": "maybe"})) == (
        400,
        "invalid_approval_mode",
    )
    assert error_of(await client.post(SESSIONS, json={"approvalMode": ["x"]})) == (
        400,
        "invalid_request",
    )
    listed = await client.get(SESSIONS)
    assert len(listed.json()["sessions"]) == 1


async def test_s4_3_listing_newest_first_and_archived_apart(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    first = await create_session(client, title="one")
    second = await create_session(client, title="two")
    third = await create_session(client, title="three")
    async with open_stream(client, first["sessionId"]) as stream:
        await start_task(client, first["sessionId"], "touch it")
        await stream.until_idle()
    patched = await client.patch(f"/api/sessions/{third['sessionId']}", json={"archived": True})
    assert patched.json()["session"]["archived"] is True
    listed = (await client.get(SESSIONS)).json()["sessions"]
    assert [s["title"] for s in listed] == ["one", "two"]
    assert all(set(s) == INFO_FIELDS for s in listed)
    assert listed[0]["lastActiveAt"] > listed[0]["createdAt"]
    archived = (await client.get(SESSIONS, params={"archived": "1"})).json()["sessions"]
    assert [s["sessionId"] for s in archived] == [third["sessionId"]]
    assert second["sessionId"] not in {s["sessionId"] for s in archived}


async def test_s4_4_get_adds_the_trace_path(client: httpx.AsyncClient) -> None:
    info = await create_session(client)
    got = (await client.get(f"/api/sessions/{info['sessionId']}")).json()["session"]
    assert set(got) == INFO_FIELDS - {"title"} | {"tracePath"}  # no title: absent (issue 22)
    trace = Path(got["tracePath"])
    assert trace.name == f"{info['sessionId']}_001.jsonl"
    assert read_trace(trace)[0].type == "session_meta"


async def test_s4_5_patch_stores_the_mode_before_answering(
    client: httpx.AsyncClient, root: Path
) -> None:
    info = await create_session(client)
    url = f"/api/sessions/{info['sessionId']}"
    changed = await client.patch(url, json={"approvalMode": "Always-Ask", "title": "Renamed"})
    assert changed.status_code == 200
    assert changed.json()["session"]["approvalMode"] == "always-ask"
    row = index_row(root, info["sessionId"])
    assert row is not None
    assert row["approval_mode"] == "always-ask"
    assert row["title"] == "Renamed"
    cleared = await client.patch(url, json={"title": None})
    assert "title" not in cleared.json()["session"]  # issue 22: absent rather than null
    assert cleared.json()["session"]["approvalMode"] == "always-ask"
    assert error_of(await client.patch(url, json={})) == (400, "no_update")
    assert error_of(await client.patch(url, json={"approvalMode": "nope"})) == (
        400,
        "invalid_approval_mode",
    )
    assert error_of(await client.patch(url, json={"archived": "yes"})) == (400, "invalid_request")


# --------------------------------------------------------------------------- S4.6


async def test_s4_6_delete_stops_everything_and_removes_files_but_not_the_workspace(
    client: httpx.AsyncClient, model: ScriptedModel, root: Path, workspace: Path
) -> None:
    task = model.script(
        "work then wait",
        calls(exec_command("sleep 300", yield_time_ms=200)),
        calls(exec_command("touch should-not-exist")),
    )
    info = await create_session(client, workspace=str(workspace), approvalMode="read-only")
    sid = info["sessionId"]
    (workspace / "keep.txt").write_text("mine")
    paths = cfg.AgentPaths(root)
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        first = await stream.until_type("approval_request")
        call_id = first.data["toolCall"]["payload"]["tool_call_id"]
        allowed = await client.post(
            f"/api/sessions/{sid}/approvals/{call_id}", json={"decision": "allow"}
        )
        assert allowed.status_code == 204
        await stream.until(
            lambda e: (
                e.type == "approval_request"
                and "touch" in e.data["toolCall"]["payload"]["arguments"]
            )
        )
        processes = (await client.get(f"/api/sessions/{sid}/processes")).json()["processes"]
        assert [p["state"] for p in processes] == ["running"]
        scratchpad = paths.scratchpad(sid)
        scratchpad.mkdir(parents=True, exist_ok=True)
        deleted = await client.delete(f"/api/sessions/{sid}")
        assert deleted.status_code == 204
        assert await stream.ended()
    assert trace_files(paths.traces_dir, sid) == []
    assert not scratchpad.exists()
    assert index_row(root, sid) is None
    assert error_of(await client.get(f"/api/sessions/{sid}")) == (404, "session_not_found")
    assert (workspace / "keep.txt").read_text() == "mine"
    assert not (workspace / "should-not-exist").exists()
    # the sleep is gone: the no_stray_processes fixture checks it after the test


# --------------------------------------------------------------------------- S4.7


async def test_s4_7_messages_are_the_trace_records_in_order(
    client: httpx.AsyncClient, model: ScriptedModel, root: Path
) -> None:
    task = model.script("say hi", calls(exec_command("echo hi")), say("All done."))
    info = await create_session(client)
    sid = info["sessionId"]
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        await stream.until_idle()
    messages = (await client.get(f"/api/sessions/{sid}/messages")).json()["messages"]
    (trace,) = trace_files(cfg.AgentPaths(root).traces_dir, sid)
    assert messages == [om.to_dict(record) for record in read_trace(trace)]
    types = [m["payload"].get("type", m["type"]) for m in messages]
    assert types[0] == "session_meta"
    assert "approval_decision" in types
    assert messages[-1]["payload"] == {"type": "request_end", "status": "completed"}
    assert any(m["payload"].get("text") == "All done." for m in messages)


# --------------------------------------------------------------------------- S4.8


async def test_s4_8_after_a_restart_sessions_are_listed_and_resume_from_their_trace(
    root: Path, model: ScriptedModel
) -> None:
    model.script("remember 42", say("I will remember 42."))
    options = ServerOptions(port=0, root=root, token=TOKEN, grace=5.0)
    async with (
        open_server(options) as server,
        httpx.AsyncClient(base_url=server.base_url, headers=AUTH) as client,
    ):
        info = await create_session(client, approvalMode="deny-all", title="kept")
        sid = info["sessionId"]
        async with open_stream(client, sid) as stream:
            await start_task(client, sid, "remember 42")
            await stream.until_idle()
    async with (
        open_server(options) as server,
        httpx.AsyncClient(base_url=server.base_url, headers=AUTH) as client,
    ):
        (listed,) = (await client.get(SESSIONS)).json()["sessions"]
        assert listed["sessionId"] == sid
        assert listed["approvalMode"] == "deny-all"
        assert listed["title"] == "kept"
        assert listed["hasTrace"] is True
        async with open_stream(client, sid) as stream:
            await start_task(client, sid, "what was it?")
            await stream.until_idle()
    last = model.requests[-1]["messages"]
    texts = [m.get("content") for m in last]
    assert "remember 42" in texts
    assert "I will remember 42." in texts
    assert texts[-1] == "what was it?"


async def test_s4_8_sessions_made_by_penguin_run_are_indexed_at_start(
    root: Path, model: ScriptedModel, tmp_path: Path
) -> None:
    model.script("from the terminal", say("Hello from run."))
    done = await trio.run_process(
        [sys.executable, "-m", "penguin", "run", "-m", "from the terminal", "--root", str(root)],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr.decode()
    async with (
        open_server(ServerOptions(port=0, root=root, token=TOKEN)) as server,
        httpx.AsyncClient(base_url=server.base_url, headers=AUTH) as client,
    ):
        (listed,) = (await client.get(SESSIONS)).json()["sessions"]
        assert listed["approvalMode"] == "allow-all"
        assert listed["hasTrace"] is True
        assert listed["modelId"] == "scripted-model"
        messages = await client.get(f"/api/sessions/{listed['sessionId']}/messages")
        texts = [m["payload"].get("text") for m in messages.json()["messages"]]
        assert "Hello from run." in texts


# --------------------------------------------------------------------------- issue 18 item 5


async def test_18_5_an_untitled_session_is_named_after_its_first_task(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    first = "  Fix   the failing test\nin tests/test_x.py, then run it"
    long = "word " * 30
    sid = (await create_session(client))["sessionId"]
    titled = (await create_session(client, title="Mine"))["sessionId"]
    for session_id, task in ((sid, first), (sid, "second task"), (titled, first)):
        async with open_stream(client, session_id) as stream:
            await start_task(client, session_id, task)
            await stream.until_idle()
    assert (await client.get(f"/api/sessions/{sid}")).json()["session"]["title"] == (
        "Fix the failing test"
    )
    assert (await client.get(f"/api/sessions/{titled}")).json()["session"]["title"] == "Mine"
    other = (await create_session(client))["sessionId"]
    async with open_stream(client, other) as stream:
        await start_task(client, other, long)
        await stream.until_idle()
    title = (await client.get(f"/api/sessions/{other}")).json()["session"]["title"]
    assert len(title) == 60
    assert title.endswith("…")


async def test_18_5_sessions_made_by_penguin_run_are_titled_after_their_task(
    root: Path, model: ScriptedModel, tmp_path: Path
) -> None:
    model.script("Summarise the README\nplease", say("Done."))
    root_args = ("--root", str(root))
    done = await trio.run_process(
        [sys.executable, "-m", "penguin", "run", "-m", "Summarise the README\nplease", *root_args],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr.decode()
    async with (
        open_server(ServerOptions(port=0, root=root, token=TOKEN)) as server,
        httpx.AsyncClient(base_url=server.base_url, headers=AUTH) as client,
    ):
        (listed,) = (await client.get(SESSIONS)).json()["sessions"]
        assert listed["title"] == "Summarise the README"
