"""S2 over real sockets: the token, the cookie, Host, Origin, JSON-only writes, the body cap,
ids in paths, the response headers, and no traceback ever sent (S1.2 too)."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from penguin.server import RunningServer
from penguin.server._asgi import host_name
from penguin.server._errors import MAX_BODY_BYTES
from penguin.server._serve import allowed_hosts

from .support import (
    SESSIONS,
    TOKEN,
    ScriptedModel,
    create_session,
    error_of,
    open_stream,
    start_task,
)

SID = "session-2026-01-02-03-04-05-0123abcd"


def tree(top: Path) -> list[Path]:
    return sorted(p.relative_to(top) for p in top.rglob("*"))


def files(top: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in top.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", SESSIONS),
        ("POST", SESSIONS),
        ("GET", f"/api/sessions/{SID}"),
        ("PATCH", f"/api/sessions/{SID}"),
        ("DELETE", f"/api/sessions/{SID}"),
        ("GET", f"/api/sessions/{SID}/messages"),
        ("POST", f"/api/sessions/{SID}/tasks"),
        ("POST", f"/api/sessions/{SID}/abort"),
        ("GET", f"/api/sessions/{SID}/stream"),
        ("POST", f"/api/sessions/{SID}/approvals/call_1"),
        ("GET", f"/api/sessions/{SID}/processes"),
        ("GET", "/api/server"),
        ("GET", "/api/no-such-route"),
    ],
)
async def test_s2_1_every_api_route_needs_the_token(
    anonymous: httpx.AsyncClient, method: str, path: str
) -> None:
    missing = await anonymous.request(method, path)
    assert error_of(missing) == (401, "unauthorized")
    wrong = await anonymous.request(method, path, headers={"Authorization": "Bearer nope"})
    assert error_of(wrong) == (401, "unauthorized")
    almost = await anonymous.request(method, path, headers={"Authorization": f"Bearer {TOKEN}x"})
    assert error_of(almost) == (401, "unauthorized")
    basic = await anonymous.request(method, path, headers={"Authorization": f"Basic {TOKEN}"})
    assert error_of(basic) == (401, "unauthorized")


async def test_s2_1_health_is_open_and_the_token_works_as_header_or_cookie(
    anonymous: httpx.AsyncClient,
) -> None:
    health = await anonymous.get("/api/health")
    assert health.status_code == 200
    assert health.json() == {"status": "ok"}
    header = await anonymous.get(SESSIONS, headers={"Authorization": f"bearer {TOKEN}"})
    assert header.status_code == 200
    assert header.json() == {"sessions": []}
    cookie = await anonymous.get(SESSIONS, headers={"Cookie": f"penguin_token={TOKEN}"})
    assert cookie.status_code == 200
    bad_cookie = await anonymous.get(SESSIONS, headers={"Cookie": "penguin_token=nope"})
    assert error_of(bad_cookie) == (401, "unauthorized")


async def test_s2_2_the_token_url_sets_the_cookie_and_redirects(
    anonymous: httpx.AsyncClient,
) -> None:
    signed_in = await anonymous.get(f"/?token={TOKEN}")
    assert signed_in.status_code == 303
    assert signed_in.headers["location"] == "/"
    cookie = signed_in.headers["set-cookie"]
    assert cookie.startswith(f"penguin_token={TOKEN};")
    attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/"} <= attributes
    page = await anonymous.get("/")  # the client kept the cookie, as a browser does
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    anonymous.cookies.clear()
    wrong = await anonymous.get("/?token=wrong")
    assert error_of(wrong) == (401, "unauthorized")
    assert "set-cookie" not in wrong.headers
    bare = await anonymous.get("/")
    assert bare.status_code == 401
    assert bare.headers["content-type"].startswith("text/html")
    assert "Open the URL" in bare.text
    assert TOKEN not in bare.text


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:7364", "127.0.0.2", "localhost.evil.example", "[::2]"]
)
async def test_s2_3_rebinding_host_is_refused(
    anonymous: httpx.AsyncClient, server: RunningServer, host: str
) -> None:
    for path in ("/api/health", "/", f"/?token={TOKEN}", SESSIONS):
        refused = await anonymous.get(
            path, headers={"Host": host, "Authorization": f"Bearer {TOKEN}"}
        )
        assert error_of(refused) == (403, "forbidden_host")


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]", "LOCALHOST"])
async def test_s2_3_loopback_names_are_accepted_with_or_without_the_port(
    anonymous: httpx.AsyncClient, server: RunningServer, host: str
) -> None:
    for name in (host, f"{host}:{server.port}"):
        answered = await anonymous.get("/api/health", headers={"Host": name})
        assert answered.status_code == 200


def test_s2_3_a_wildcard_host_adds_the_allow_host_names_and_only_then() -> None:
    wildcard = allowed_hosts("0.0.0.0", ["devbox.lan", "fe80::1"])
    assert {"devbox.lan", "[fe80::1]", "localhost", "127.0.0.1", "[::1]", "0.0.0.0"} <= wildcard
    assert "devbox.lan" in allowed_hosts("::", ["devbox.lan"])
    assert "devbox.lan" not in allowed_hosts("127.0.0.1", ["devbox.lan"])
    assert "192.168.1.5" in allowed_hosts("192.168.1.5")
    assert host_name("devbox.lan:7364") == "devbox.lan"
    assert host_name("[::1]:80") == "[::1]"
    assert host_name("devbox.lan:x") is None
    assert host_name("[::1") is None


async def test_s2_4_a_body_that_is_not_json_is_refused(client: httpx.AsyncClient) -> None:
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        refused = await client.post(SESSIONS, content=b"{}", headers={"Content-Type": content_type})
        assert error_of(refused) == (415, "unsupported_media_type")
    untyped = await client.post(SESSIONS, content=b"{}")
    assert error_of(untyped) == (415, "unsupported_media_type")
    patch = await client.patch(
        f"/api/sessions/{SID}", content=b'{"title": "x"}', headers={"Content-Type": "text/plain"}
    )
    assert error_of(patch) == (415, "unsupported_media_type")
    typed = await client.post(
        SESSIONS, content=b"{}", headers={"Content-Type": "application/json; charset=utf-8"}
    )
    assert typed.status_code == 201


async def test_s2_4_a_foreign_origin_is_refused(
    client: httpx.AsyncClient, server: RunningServer
) -> None:
    for origin in ("http://evil.example", "null", f"https://127.0.0.1:{server.port}"):
        refused = await client.post(SESSIONS, json={}, headers={"Origin": origin})
        assert error_of(refused) == (403, "forbidden_origin")
        read = await client.get(SESSIONS, headers={"Origin": origin})
        assert error_of(read) == (403, "forbidden_origin")
    own = await client.post(
        SESSIONS, json={}, headers={"Origin": f"http://127.0.0.1:{server.port}"}
    )
    assert own.status_code == 201


async def test_s2_4_no_cors_header_is_ever_sent(client: httpx.AsyncClient) -> None:
    answers = [
        await client.get(SESSIONS),
        await client.options(SESSIONS, headers={"Access-Control-Request-Method": "POST"}),
        await client.get(SESSIONS, headers={"Origin": "http://evil.example"}),
        await client.get("/api/health"),
    ]
    for answer in answers:
        assert not [name for name in answer.headers if name.lower().startswith("access-control")]
    assert error_of(answers[1]) == (405, "method_not_allowed")


async def test_s2_5_a_body_over_one_mib_is_refused(client: httpx.AsyncClient) -> None:
    big = b'{"title": "' + b"x" * MAX_BODY_BYTES + b'"}'
    declared = await client.post(
        SESSIONS, content=big, headers={"Content-Type": "application/json"}
    )
    assert error_of(declared) == (413, "payload_too_large")

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"title": "'
        for _ in range(20):
            yield b"y" * 65536
        yield b'"}'

    chunked = await client.post(
        SESSIONS, content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert error_of(chunked) == (413, "payload_too_large")
    listed = await client.get(SESSIONS)
    assert listed.json() == {"sessions": []}


async def test_s2_5_a_chunked_body_under_the_cap_is_read(client: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"title": '
        yield b'"chunked"}'

    created = await client.post(
        SESSIONS, content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert created.status_code == 201
    assert created.json()["session"]["title"] == "chunked"


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/api/sessions/..%2F..%2Fetc", "session_not_found"),
        ("/api/sessions/..%2F..%2Fetc/messages", "session_not_found"),
        ("/api/sessions/%2E%2E", "session_not_found"),
        (
            "/api/sessions/session-2026-01-02-03-04-05-0123abcd/processes/..%2Fx/kill",
            "process_not_found",
        ),
        (
            "/api/sessions/session-2026-01-02-03-04-05-0123abcd/approvals/a%20b",
            "approval_not_found",
        ),
        ("/api/projects/..%2F..%2Fetc/agents/a/sessions", "project_not_found"),
        ("/api/projects/%2E%2E/agents/a/sessions", "project_not_found"),
        ("/api/projects/ok/agents/%2E%2E/sessions", "agent_not_found"),
        ("/api/projects/ok/agents/a%2Fb/sessions", "agent_not_found"),
    ],
)
async def test_s2_6_bad_ids_are_404_of_their_kind_and_touch_nothing(
    client: httpx.AsyncClient, root: Path, tmp_path: Path, path: str, code: str
) -> None:
    before = tree(tmp_path)
    method = "POST" if path.endswith(("/kill", "/sessions")) or "/approvals/" in path else "GET"
    body = {"decision": "allow"} if "/approvals/" in path else {}
    answer = await client.request(method, path, json=body)
    assert error_of(answer) == (404, code)
    after = tree(tmp_path)
    assert after == before


async def test_s2_6_projects_and_agents_need_not_exist(
    client: httpx.AsyncClient, root: Path
) -> None:
    listed = await client.get("/api/projects/fresh/agents/new-agent/sessions")
    assert listed.json() == {"sessions": []}
    assert not (root / "fresh").exists()
    agents = await client.get("/api/projects/fresh/agents")
    assert agents.json() == {"agents": [{"agentId": "default_agent"}]}  # issue 22


async def test_s2_7_security_headers(
    anonymous: httpx.AsyncClient, client: httpx.AsyncClient
) -> None:
    for answer in (await client.get(SESSIONS), await anonymous.get("/api/nothing")):
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["cache-control"] == "no-store"
    page = await anonymous.get("/")
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["content-security-policy"] == "default-src 'self'; frame-ancestors 'none'"


async def test_s2_7_an_unexpected_error_is_500_without_a_traceback(
    client: httpx.AsyncClient, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    session = await create_session(client)
    with (
        contextlib.closing(sqlite3.connect(root / "server.sqlite3")) as db,
        db,
    ):  # a real fault under the server
        db.execute("DROP TABLE sessions")
    with caplog.at_level(logging.ERROR, logger="penguin.server"):
        failed = await client.get(f"/api/sessions/{session['sessionId']}")
    assert error_of(failed) == (500, "internal_error")
    assert "Traceback" not in failed.text
    assert "sqlite" not in failed.text.lower()
    assert any(record.exc_info for record in caplog.records)
    assert (await client.get("/api/health")).status_code == 200


async def test_s1_2_the_token_is_never_in_a_log_the_index_or_a_trace(
    client: httpx.AsyncClient,
    anonymous: httpx.AsyncClient,
    model: ScriptedModel,
    root: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    await anonymous.get("/?token=wrong")
    await anonymous.get(f"/?token={TOKEN}")
    session = await create_session(client, title="t")
    async with open_stream(client, session["sessionId"]) as stream:
        await start_task(client, session["sessionId"], f"repeat {TOKEN[:4]}")
        await stream.until_idle()
    server_lines = [
        record.getMessage()
        for record in caplog.records
        if record.name.startswith(("penguin", "hypercorn"))  # not the test's own client
    ]
    assert not [line for line in server_lines if TOKEN in line]
    assert not [path for path, data in files(root).items() if TOKEN.encode() in data]
