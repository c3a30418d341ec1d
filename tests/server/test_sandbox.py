"""Server sessions' sandbox: set at creation, shown, never patched (spec/sandbox.md X1.3).

The API over real HTTP, and the page's create-form field and badge in Chromium.
"""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest

import penguin
from penguin.environment.sandbox import _linux, probe
from penguin.llm import ScriptedLLM, text, turn
from penguin.server import ServerOptions, open_server

from .support import AUTH, SESSIONS, TOKEN, create_session, error_of

REASON = probe().reason
kernel = pytest.mark.skipif(REASON is not None, reason=f"sandbox unavailable here: {REASON}")


@kernel
async def test_x1_3_sessions_take_their_policy_at_creation(
    client: httpx.AsyncClient, workspace: Path
) -> None:
    default = await create_session(client, workspace=str(workspace))
    assert (default["sandboxMode"], default["network"]) == ("workspace-write", True)
    chosen = await create_session(
        client, workspace=str(workspace), sandboxMode="read-only", network=False
    )
    assert (chosen["sandboxMode"], chosen["network"]) == ("read-only", False)
    again = (await client.get(f"/api/sessions/{chosen['sessionId']}")).json()["session"]
    assert (again["sandboxMode"], again["network"]) == ("read-only", False)
    listed = (await client.get(SESSIONS)).json()["sessions"]
    assert {s["sessionId"]: s["sandboxMode"] for s in listed} == {
        default["sessionId"]: "workspace-write",
        chosen["sessionId"]: "read-only",
    }


@kernel
async def test_x1_3_a_patch_carrying_the_policy_is_refused(
    client: httpx.AsyncClient, workspace: Path
) -> None:
    session = await create_session(client, workspace=str(workspace))
    path = f"/api/sessions/{session['sessionId']}"
    for body in ({"sandboxMode": "off"}, {"network": False}, {"title": "x", "network": True}):
        refused = await client.patch(path, json=body)
        assert error_of(refused) == (400, "invalid_request")
        assert "cannot change policy" in refused.json()["error"]["message"]
    after = (await client.get(path)).json()["session"]
    assert (after["sandboxMode"], after["network"], after.get("title")) == (
        "workspace-write",
        True,
        None,
    )


async def test_x1_3_bad_fields_at_creation(client: httpx.AsyncClient) -> None:
    bad_mode = await client.post(SESSIONS, json={"sandboxMode": "full-access"})
    assert error_of(bad_mode) == (400, "invalid_request")
    assert "sandboxMode" in bad_mode.json()["error"]["message"]
    assert error_of(await client.post(SESSIONS, json={"network": "no"})) == (
        400,
        "invalid_request",
    )


async def test_x3_1_a_chosen_mode_the_kernel_cannot_enforce_is_400(
    client: httpx.AsyncClient, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = _linux.Support("bubblewrap (bwrap) is not installed", None, False, False, None)
    monkeypatch.setattr(_linux, "_probed", missing)
    refused = await client.post(SESSIONS, json={"workspace": str(workspace), "network": False})
    assert error_of(refused) == (400, "sandbox_unavailable")
    assert refused.json()["error"]["message"] == (
        "sandbox unavailable: bubblewrap (bwrap) is not installed; "
        "use --sandbox off to run without it"
    )
    fallback = await create_session(client, workspace=str(workspace))
    assert (fallback["sandboxMode"], fallback["network"]) == ("off", True)


@kernel
async def test_x1_3_sessions_indexed_from_traces_take_the_traces_policy(
    root: Path, workspace: Path
) -> None:
    agent = penguin.Agent.open(root)
    ids = {}
    for name, policy in (
        ("none", None),
        ("boxed", penguin.SandboxPolicy(mode="read-only", network=False)),
    ):
        llm = ScriptedLLM([turn(text("ok"))])
        async with agent.session(workspace, llm=llm, sandbox=policy) as session:
            await session.flush_trace()
            ids[name] = session.session_id
    options = ServerOptions(port=0, root=root, token=TOKEN, grace=5.0)
    async with (
        open_server(options) as server,
        httpx.AsyncClient(base_url=server.base_url, headers=AUTH, timeout=30) as client,
    ):
        listed = (await client.get(SESSIONS)).json()["sessions"]
    found = {s["sessionId"]: (s["sandboxMode"], s["network"]) for s in listed}
    assert found == {ids["none"]: ("off", True), ids["boxed"]: ("read-only", False)}


_SCANNED: list[str] | None = None
"""While a list, the directories ``os.scandir`` is asked for (an audit hook fills it)."""


def _note_scans(event: str, args: tuple[object, ...]) -> None:
    if event == "os.scandir" and _SCANNED is not None and args:
        _SCANNED.append(str(args[0]))


@kernel
async def test_x1_3_a_listing_reads_the_traces_directory_once(root: Path, workspace: Path) -> None:
    """Each session's policy is read from the trace files the listing found: a search of
    the traces directory per session made a first listing of 900 sessions take 3.5 s."""
    global _SCANNED
    agent = penguin.Agent.open(root)
    ids = set()
    for number in range(5):
        policy = penguin.SandboxPolicy(mode="read-only") if number % 2 else None
        llm = ScriptedLLM([turn(text("ok"))])
        async with agent.session(workspace, llm=llm, sandbox=policy) as session:
            await session.flush_trace()
            ids.add(session.session_id)
    traces = str(agent.paths.traces_dir)
    sys.addaudithook(_note_scans)  # for good: it notes nothing once _SCANNED is None again
    options = ServerOptions(port=0, root=root, token=TOKEN, grace=5.0)
    async with (
        open_server(options) as server,
        httpx.AsyncClient(base_url=server.base_url, headers=AUTH, timeout=30) as client,
    ):
        _SCANNED = []
        try:
            listed = (await client.get(SESSIONS)).json()["sessions"]
            again = (await client.get(SESSIONS)).json()["sessions"]
            scanned = list(_SCANNED)
        finally:
            _SCANNED = None
    modes = {s["sessionId"]: s["sandboxMode"] for s in listed}
    assert sorted(modes.values()) == ["off", "off", "off", "read-only", "read-only"]
    assert set(modes) == ids
    assert again == listed
    assert scanned.count(traces) == 2, scanned  # once per listing, whatever the sessions


# --------------------------------------------------------------------------- the page

try:
    from .test_page import Watched as _Watched
    from .test_page import (  # noqa: F401 - fixtures
        browser,
        needs_chromium,
        playwright,
        sign_in,
        site,
        watched,
    )
except ImportError:  # pragma: no cover - playwright missing: the page test is skipped
    needs_chromium = pytest.mark.skip(reason="playwright is not installed")


@kernel
@needs_chromium
def test_x1_3_the_create_form_field_and_the_badge(
    site: object, watched: _Watched, workspace: Path
) -> None:
    from playwright.sync_api import expect

    page = watched.page
    sign_in(page, site)  # type: ignore[arg-type]
    # The network switch is a box at the start of its own line, beside what it says.
    box = page.locator("#create-network").bounding_box()
    label = page.locator("label:has(#create-network)")
    around = label.bounding_box()
    assert box is not None
    assert around is not None
    assert box["width"] < 24, (box, around)  # it was the form's width, drawn in the middle
    assert box["x"] - around["x"] < 2, (box, around)
    assert label.inner_text().strip() == "Commands may reach the network"
    page.fill("#create-workspace", str(workspace))
    page.select_option("#create-sandbox", "read-only")
    page.uncheck("#create-network")
    page.click("#create-button")
    expect(page.locator("#sandbox-badge")).to_have_text("sandbox read-only · no network")
    requests = watched.paths(r"/sessions$")
    posted = [r for r in requests if r.method == "POST"]
    body = posted[-1].post_data_json
    assert body is not None
    assert (body["sandboxMode"], body["network"]) == ("read-only", False)
