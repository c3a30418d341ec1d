"""Issue 22 over real sockets: the routes and shapes the reference's web app needs, and S2 on them.

Each new route's answer is checked field by field (what the app reads), the changed
shapes of spec/server.md's routes (agents, SessionInfo, the list's paging, process
rows, the task's optional fields), ``GET /api/events``, and that every new route
keeps the guard's rules: no token → 401, a foreign Origin → 403, a bad id → the
resource's 404.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from penguin.server import RunningServer, ServerOptions, open_server
from penguin.server._compat import UI_CONTENT_SECURITY_POLICY, UiFolderError

from .support import (
    SESSIONS,
    TOKEN,
    EventStream,
    ScriptedModel,
    calls,
    create_session,
    error_of,
    exec_command,
    gated,
    hang,
    open_stream,
    say,
    start_task,
)

SID = "session-2026-01-02-03-04-05-0123abcd"
NEW_ROUTES = [
    ("GET", "/api/me"),
    ("GET", "/api/me/prefs"),
    ("PUT", "/api/me/prefs"),
    ("POST", "/api/auth/logout"),
    ("GET", "/api/projects"),
    ("GET", "/api/projects/default_project/agents/default_agent/config"),
    ("GET", "/api/projects/default_project/usage"),
    ("GET", "/api/projects/default_project/chat-defaults"),
    ("GET", "/api/version"),
    ("GET", "/api/version/update-check"),
    ("GET", "/api/events"),
    ("DELETE", f"/api/sessions/{SID}/processes/proc-1"),
]


# --------------------------------------------------------------------------- S2 on the new routes


@pytest.mark.parametrize(("method", "path"), NEW_ROUTES)
async def test_22_s2_the_new_routes_need_the_token(
    anonymous: httpx.AsyncClient, method: str, path: str
) -> None:
    body: dict[str, object] | None = {} if method in ("PUT", "POST") else None
    assert error_of(await anonymous.request(method, path, json=body)) == (401, "unauthorized")


@pytest.mark.parametrize(("method", "path"), NEW_ROUTES)
async def test_22_s2_a_foreign_origin_is_refused(
    client: httpx.AsyncClient, method: str, path: str
) -> None:
    answer = await client.request(method, path, headers={"Origin": "http://evil.example"})
    assert error_of(answer) == (403, "forbidden_origin")


async def test_22_s2_bad_ids_get_the_resources_404(client: httpx.AsyncClient) -> None:
    for path, code in [
        ("/api/projects/bad%20id/agents/default_agent/config", "project_not_found"),
        ("/api/projects/default_project/agents/..%2Fx/config", "agent_not_found"),
        ("/api/projects/-x/usage", "project_not_found"),
        ("/api/projects/-x/chat-defaults", "project_not_found"),
    ]:
        assert error_of(await client.get(path)) == (404, code), path
    for path, code in [
        ("/api/sessions/nope/processes/proc-1", "session_not_found"),
        (f"/api/sessions/{SID}/processes/bad%20id", "process_not_found"),
        (f"/api/sessions/{SID}/processes/proc-1", "session_not_found"),
    ]:
        assert error_of(await client.delete(path)) == (404, code), path


async def test_22_s2_login_takes_the_token_as_password_and_sets_the_cookie(
    anonymous: httpx.AsyncClient,
) -> None:
    wrong = await anonymous.post("/api/auth/login", json={"userId": "me", "password": "guess"})
    assert error_of(wrong) == (401, "unauthorized")
    assert "set-cookie" not in wrong.headers
    unknown = await anonymous.post("/api/auth/login", json={"password": TOKEN, "otp": 1})
    assert error_of(unknown) == (400, "invalid_request")
    foreign = await anonymous.post(
        "/api/auth/login", json={"password": TOKEN}, headers={"Origin": "http://evil.example"}
    )
    assert error_of(foreign) == (403, "forbidden_origin")
    right = await anonymous.post("/api/auth/login", json={"userId": "me", "password": TOKEN})
    assert right.status_code == 200
    assert right.json() == {"user": {"userId": "local", "isAdmin": True}}
    cookie = right.headers["set-cookie"].lower()
    assert "penguin_token=" in cookie
    assert "httponly" in cookie
    assert "samesite=strict" in cookie
    assert (await anonymous.get("/api/me")).status_code == 200  # the cookie now authenticates
    out = await anonymous.post("/api/auth/logout", json={})
    assert out.status_code == 200
    assert error_of(await anonymous.get("/api/me")) == (401, "unauthorized")


# --------------------------------------------------------------------------- shapes


async def test_22_2_me_projects_agents_and_the_minimal_answers(
    client: httpx.AsyncClient, root: Path
) -> None:
    me = (await client.get("/api/me")).json()
    assert me["user"] == {"userId": "local", "isAdmin": True}
    assert me["desktopMode"] is False
    assert me["sessionVia"] == "token"
    assert me["uploadLimits"]["attachmentMaxMb"] == 1
    (root / "other" / "agents").mkdir(parents=True)
    (root / "not-a-project").mkdir()
    assert (await client.get("/api/projects")).json() == {
        "projects": [
            {"projectId": "default_project", "name": "default_project", "role": "owner"},
            {"projectId": "other", "name": "other", "role": "owner"},
        ]
    }
    agents = await client.get("/api/projects/fresh/agents")
    assert agents.json() == {"agents": [{"agentId": "default_agent"}]}
    (root / "fresh" / "agents" / "helper").mkdir(parents=True)
    agents = await client.get("/api/projects/fresh/agents")
    assert agents.json() == {"agents": [{"agentId": "default_agent"}, {"agentId": "helper"}]}
    assert not (root / "fresh" / "agents" / "default_agent").exists()
    config = "/api/projects/default_project/agents/default_agent/config"
    assert (await client.get(config)).json() == {"config": {}}
    assert (await client.get("/api/projects/default_project/usage")).json() == {"groups": []}
    assert (await client.get("/api/projects/default_project/chat-defaults")).json() == {}
    assert (await client.get("/api/version")).json()["version"]
    check = (await client.get("/api/version/update-check")).json()
    assert check["disabled"] is True
    assert check["updateAvailable"] is False


async def test_22_2_prefs_are_merged_and_kept(client: httpx.AsyncClient) -> None:
    assert (await client.get("/api/me/prefs")).json() == {"prefs": {}}
    put = await client.put("/api/me/prefs", json={"lastProjectId": "default_project"})
    assert put.json() == {"prefs": {"lastProjectId": "default_project"}}
    await client.put("/api/me/prefs", json={"credentialGuideSeen": True})
    assert (await client.get("/api/me/prefs")).json() == {
        "prefs": {"lastProjectId": "default_project", "credentialGuideSeen": True}
    }
    assert error_of(await client.put("/api/me/prefs", json=[1])) == (400, "invalid_request")


async def test_22_2_session_info_status_has_trace_and_no_null_title(
    client: httpx.AsyncClient,
) -> None:
    info = await create_session(client)
    assert info["status"] == info["state"] == "idle"
    assert info["hasTrace"] is False
    assert "title" not in info
    sid = info["sessionId"]
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, "hello")
        await stream.until_idle()
    after = (await client.get(f"/api/sessions/{sid}")).json()["session"]
    assert after["hasTrace"] is True
    assert after["tracePath"]
    titled = await client.patch(f"/api/sessions/{sid}", json={"title": "Named"})
    assert titled.json()["session"]["title"] == "Named"
    cleared = await client.patch(f"/api/sessions/{sid}", json={"title": None})
    assert "title" not in cleared.json()["session"]


async def test_22_2_the_list_pages_filters_by_category_and_counts(
    client: httpx.AsyncClient, workspace: Path
) -> None:
    made = [await create_session(client, title=f"s{n}") for n in range(12)]
    elsewhere = await create_session(client, title="w", workspace=str(workspace))
    archived = made[0]["sessionId"]
    await client.patch(f"/api/sessions/{archived}", json={"archived": True})
    whole = (await client.get(SESSIONS)).json()
    assert set(whole) == {"sessions"}
    assert len(whole["sessions"]) == 12
    first = (
        await client.get(
            SESSIONS, params={"limit": 11, "offset": 0, "category": "active", "counts": 1}
        )
    ).json()
    assert len(first["sessions"]) == 11
    assert first["counts"] == {"active": 12, "subagent": 0, "schedule": 0, "archived": 1}
    assert first["workspaceCounts"][str(workspace)]["active"] == 1
    temp = first["workspaceCounts"][made[1]["workspace"]]
    assert temp["active"] == 1
    assert temp["archived"] == 0
    rest = (await client.get(SESSIONS, params={"limit": 11, "offset": 11})).json()
    assert set(rest) == {"sessions"}
    ids = [s["sessionId"] for s in first["sessions"] + rest["sessions"]]
    assert len(ids) == len(set(ids)) == 12
    assert elsewhere["sessionId"] in ids
    assert archived not in ids
    stored = (await client.get(SESSIONS, params={"category": "archived"})).json()["sessions"]
    assert [s["sessionId"] for s in stored] == [archived]
    for category in ("subagent", "schedule"):
        assert (await client.get(SESSIONS, params={"category": category})).json() == {
            "sessions": []
        }
    for params in (
        {"limit": "0"},
        {"limit": "-1"},
        {"limit": "x"},
        {"offset": "-3"},
        {"limit": "100000"},
        {"category": "deleted"},
        {"counts": "maybe"},
    ):
        assert error_of(await client.get(SESSIONS, params=params)) == (400, "invalid_request")


async def test_22_2_task_and_patch_take_the_references_optional_fields(
    client: httpx.AsyncClient,
) -> None:
    sid = (await create_session(client))["sessionId"]
    patched = await client.patch(f"/api/sessions/{sid}", json={"thinkingLevel": "high"})
    assert patched.status_code == 200
    assert patched.json()["session"]["sessionId"] == sid
    bad = await client.patch(f"/api/sessions/{sid}", json={"thinkingLevel": 3})
    assert error_of(bad) == (400, "invalid_request")
    unknown = await client.patch(f"/api/sessions/{sid}", json={"model": "x"})
    assert error_of(unknown) == (400, "invalid_request")
    task = {"input": [{"type": "text", "text": "hi"}], "thinkingLevel": "low", "goal": "ship it"}
    async with open_stream(client, sid) as stream:
        answer = await client.post(f"/api/sessions/{sid}/tasks", json=task)
        assert answer.status_code == 202
        assert answer.json() == {"sessionId": sid}
        await stream.until_idle()
    for extra in ({"queueIfBusy": "yes"}, {"priority": 1}):
        body = {"input": [{"type": "text", "text": "hi"}], **extra}
        refused = await client.post(f"/api/sessions/{sid}/tasks", json=body)
        assert error_of(refused) == (400, "invalid_request")


async def test_22_2_queue_if_busy_runs_the_task_after_the_running_one(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    release = trio.Event()
    model.script("first", gated(release, say("first done")))
    sid = (await create_session(client))["sessionId"]
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, "first")
        await stream.until(lambda e: e.is_state("running"))
        busy = await client.post(
            f"/api/sessions/{sid}/tasks", json={"input": [{"type": "text", "text": "second"}]}
        )
        assert error_of(busy) == (409, "task_in_progress")
        queued = await client.post(
            f"/api/sessions/{sid}/tasks",
            json={"input": [{"type": "text", "text": "second"}], "queueIfBusy": True},
        )
        assert queued.status_code == 202
        assert queued.json() == {"sessionId": sid, "queued": True}
        release.set()
        await stream.until(lambda e: e.is_state("idle"))
    states = [e.data["state"] for e in stream.seen if e.type == "task_state"]
    assert states == ["idle", "running", "idle"]  # the snapshot; both tasks in one busy period
    texts = [m["payload"].get("text") for m in (await messages(client, sid))]
    assert texts.index("first") < texts.index("first done") < texts.index("second")
    assert texts.index("second") < texts.index("Done.")  # the queued task's answer


async def test_22_2_queue_if_busy_after_an_abort_waits_and_starts_the_task(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.script("stall", hang("Thinking"))
    sid = (await create_session(client))["sessionId"]
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, "stall")
        await stream.until(lambda e: e.type == "partial_text")
        assert (await client.post(f"/api/sessions/{sid}/abort")).status_code == 202
        after = await client.post(
            f"/api/sessions/{sid}/tasks",
            json={"input": [{"type": "text", "text": "again"}], "queueIfBusy": True},
        )
        assert after.status_code == 202
        assert after.json() == {"sessionId": sid}  # not queued: it started once the other ended
        await stream.until(lambda e: e.is_state("idle"))
        await stream.until(lambda e: e.is_state("running"))
        await stream.until(lambda e: e.is_state("idle"))
    texts = [m["payload"].get("text") for m in (await messages(client, sid))]
    assert texts.index("again") < texts.index("Done.")  # the new task was answered


async def messages(client: httpx.AsyncClient, sid: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (await client.get(f"/api/sessions/{sid}/messages")).json()[
        "messages"
    ]
    return found


async def test_22_2_process_rows_in_both_shapes_and_delete(
    client: httpx.AsyncClient, model: ScriptedModel, workspace: Path
) -> None:
    model.script(
        "start it",
        calls(exec_command("sleep 30", "wait in the background", run_in_background=True)),
        say("started"),
    )
    sid = (await create_session(client, workspace=str(workspace)))["sessionId"]
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, "start it")
        await stream.until_idle()
    with trio.fail_after(10):
        while True:  # pid is null while the background launch waits for its process
            rows = (await client.get(f"/api/sessions/{sid}/processes")).json()["processes"]
            if len(rows) != 1 or rows[0]["pid"] is not None:
                break
            await trio.sleep(0.01)
    assert len(rows) == 1
    row = rows[0]
    assert row["command"] == row["cmd"] == "sleep 30"
    assert row["state"] == "running"
    assert row["running"] is True
    assert row["exitCode"] is None
    assert isinstance(row["pid"], int)
    assert row["cwd"] == str(workspace)
    assert row["startedAt"].endswith("Z")
    assert row["startedAt"][:2] == "20"
    assert "serviceUrl" not in row  # none known: absent (the app reads null as a URL)
    gone = await client.delete(f"/api/sessions/{sid}/processes/{row['processId']}")
    assert gone.status_code == 204
    assert (await client.get(f"/api/sessions/{sid}/processes")).json() == {"processes": []}
    again = await client.delete(f"/api/sessions/{sid}/processes/{row['processId']}")
    assert error_of(again) == (404, "process_not_found")


async def test_22_2_events_carry_session_state_and_title(client: httpx.AsyncClient) -> None:
    sid = (await create_session(client))["sessionId"]
    async with client.stream("GET", "/api/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = EventStream(response)
        try:
            await start_task(client, sid, "hello")
            running = await events.until_type("session_state")
            assert running.data == {
                "type": "session_state",
                "sessionId": sid,
                "state": "running",
                "lastActiveAt": running.data["lastActiveAt"],
                "hasTrace": True,
            }
            assert running.event == "server_event"
            assert running.id
            idle = await events.until_type("session_state")
            assert idle.data["state"] == "idle"
            info = (await client.get(f"/api/sessions/{sid}")).json()["session"]
            assert info["createdAt"] <= running.data["lastActiveAt"] <= idle.data["lastActiveAt"]
            assert idle.data["lastActiveAt"] == info["lastActiveAt"]
            await client.patch(f"/api/sessions/{sid}", json={"title": "Renamed"})
            titled = await events.until_type("session_title")
            assert titled.data == {"type": "session_title", "sessionId": sid, "title": "Renamed"}
        finally:
            await events.aclose()


# --------------------------------------------------------------------------- --ui DIR


@pytest.fixture
def ui(tmp_path: Path) -> Path:
    folder = tmp_path / "ui"
    (folder / "assets").mkdir(parents=True)
    (folder / "index.html").write_text("<!doctype html><title>other ui</title>")
    (folder / "assets" / "app.js").write_text("console.log(1)")
    (folder / "assets" / "app.css").write_text("body{}")
    (folder / "logo.svg").write_text("<svg/>")
    (folder / ".secret").write_text("no")
    (tmp_path / "outside.txt").write_text("no")
    return folder


@pytest.fixture
async def ui_server(root: Path, ui: Path) -> Any:
    options = ServerOptions(port=0, root=root, token=TOKEN, grace=5.0, ui=ui)
    async with open_server(options) as server:
        yield server


async def test_22_1_ui_serves_its_index_files_and_spa_paths(ui_server: RunningServer) -> None:
    async with httpx.AsyncClient(base_url=ui_server.base_url, timeout=30) as browser:
        signin = await browser.get("/")
        assert signin.status_code == 401
        assert "token" in signin.text
        assert (await browser.get("/chat/x")).status_code == 401
        login = await browser.get(f"/?token={TOKEN}")
        assert login.status_code == 303
        page = await browser.get("/")
        assert page.status_code == 200
        assert "other ui" in page.text
        assert page.headers["content-security-policy"] == UI_CONTENT_SECURITY_POLICY
        deep = await browser.get("/chat/session-2026-01-02-03-04-05-0123abcd")
        assert deep.status_code == 200
        assert "other ui" in deep.text
        for path, kind in [
            ("/assets/app.js", "text/javascript"),
            ("/assets/app.css", "text/css"),
            ("/logo.svg", "image/svg+xml"),
        ]:
            answer = await browser.get(path)
            assert answer.status_code == 200, path
            assert answer.headers["content-type"].startswith(kind), path
            assert answer.headers["x-content-type-options"] == "nosniff"
        assert "penguin" not in (await browser.get("/static/page.js")).text  # not penguin's
        for hidden in ("/.secret", "/assets/..%2F..%2Foutside.txt", "/../outside.txt"):
            assert (await browser.get(hidden)).text != "no", hidden
        assert error_of(await browser.get("/api/nothing")) == (404, "not_found")
        assert error_of(await browser.post("/nothing", json={})) == (404, "not_found")
        assert error_of(await browser.put(SESSIONS, json={})) == (405, "method_not_allowed")
        foreign = await browser.get("/", headers={"Origin": "http://evil.example"})
        assert error_of(foreign) == (403, "forbidden_origin")
        rebound = await browser.get("/", headers={"Host": "evil.example"})
        assert error_of(rebound) == (403, "forbidden_host")


async def test_22_1_without_ui_the_page_is_penguins(client: httpx.AsyncClient) -> None:
    page = await client.get("/", headers={"Cookie": f"penguin_token={TOKEN}"})
    assert "penguin" in page.text
    assert page.headers["content-security-policy"] == "default-src 'self'; frame-ancestors 'none'"
    assert (await client.get("/static/page.js")).status_code == 200


async def test_22_1_a_ui_folder_without_index_is_refused(root: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for folder, says in ((tmp_path / "missing", "no folder"), (empty, "no index.html")):
        with pytest.raises(UiFolderError, match=says):
            async with open_server(ServerOptions(port=0, root=root, token=TOKEN, ui=folder)):
                pass


async def test_22_1_penguin_server_ui_without_index_exits_1_naming_it(
    root: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "built"
    empty.mkdir()
    for folder, says in ((tmp_path / "nowhere", "there is no folder"), (empty, "no index.html")):
        done = await trio.run_process(
            [sys.executable, "-m", "penguin", "server", "--root", str(root), "--ui", str(folder)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        assert done.returncode == 1
        stderr = done.stderr.decode()
        assert says in stderr, stderr
        assert str(folder) in stderr, stderr
        assert done.stdout == b""
