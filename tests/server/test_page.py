"""S8, the page: its files as the server serves them, and the page itself in headless Chromium.

The browser tests are plain (non-async) tests: playwright's sync API drives Debian's
``chromium`` (``executable_path``; no browser download), and the server with its scripted
model runs on a thread of its own (:class:`~tests.server.browser.ThreadedServer`), over
real sockets on 127.0.0.1. Waiting is playwright's ``expect``, which polls the page for the
condition under a deadline. Every test also fails on a script error or a console error
in the page (a Content-Security-Policy violation is one).
"""

from __future__ import annotations

import html.parser
import importlib.resources
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Page,
    Playwright,
    Request,
    Route,
    expect,
    sync_playwright,
)

import penguin
from penguin import config as cfg
from penguin import protocol as om
from penguin.llm import ScriptedLLM, text, turn
from penguin.server import RunningServer
from penguin.trace import read_trace, trace_files

from ..environment.mcp.support import stdio_server
from .browser import ThreadedServer, chromium_path
from .support import AUTH, SESSIONS, ScriptedModel, calls, exec_command, hang, say

CHROMIUM = chromium_path()
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium binary (apt-get install chromium, or set PENGUIN_CHROMIUM); "
    ".ci/run installs it",
)
WAIT_MS = 20_000
expect.set_options(timeout=WAIT_MS)

STATIC_FILES = {
    "index.html": "text/html; charset=utf-8",
    "page.css": "text/css; charset=utf-8",
    "page.js": "text/javascript; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}


# --------------------------------------------------------------------------- the files


class _Markup(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[dict[str, str | None]] = []
        self.inline: list[str] = []
        self.links: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "script":
            self.scripts.append(attributes)
            self._in_script = True
        if tag == "style" or "style" in attributes:
            self.inline.append(tag + " style")
        self.inline.extend(f"{tag} {name}" for name in attributes if name.startswith("on"))
        for name in ("href", "src"):
            value = attributes.get(name)
            if value:
                self.links.append(value)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.inline.append("script body")


def test_s8_1_the_page_files_are_in_the_package() -> None:
    folder = importlib.resources.files("penguin.server") / "static"
    names = {entry.name for entry in folder.iterdir() if entry.is_file()}
    assert set(STATIC_FILES) <= names
    scripts = [name for name in names if name.endswith((".js", ".mjs"))]
    assert scripts == ["page.js"], "the page is one ES module"


async def test_s8_1_the_page_and_its_files_are_served_with_their_types(
    server: RunningServer, anonymous: httpx.AsyncClient
) -> None:
    assert (await anonymous.get(f"/?token={server.token}")).status_code == 303
    page = await anonymous.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"] == STATIC_FILES["index.html"]
    markup = _Markup()
    markup.feed(page.text)
    # One module script, from the server itself; nothing inline (the CSP would block it).
    assert markup.scripts == [{"type": "module", "src": "/static/page.js"}]
    assert markup.inline == []
    assert all(link.startswith("/static/") for link in markup.links), markup.links
    for name, content_type in STATIC_FILES.items():
        response = await anonymous.get(f"/static/{name}")
        assert response.status_code == 200, name
        assert response.headers["content-type"] == content_type, name
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["content-security-policy"].startswith("default-src 'self'")
    script = (await anonymous.get("/static/page.js")).text
    assert "innerHTML" not in script
    assert "insertAdjacentHTML" not in script
    assert "document.write" not in script


# --------------------------------------------------------------------------- the browser


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    assert CHROMIUM is not None
    browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
    yield browser
    browser.close()


@pytest.fixture
def site(tmp_path: Path, model: ScriptedModel) -> Iterator[ThreadedServer]:
    with ThreadedServer(tmp_path / "root", model) as server:
        yield server


class Watched:
    """A page, the errors it reported, and the requests it made."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.errors: list[str] = []
        self.requests: list[Request] = []
        # A test whose server is down for a while on purpose sets this: the page's
        # requests in the gap are refused, and the browser reports each on the console.
        self.refusals_expected = False
        page.on("pageerror", lambda error: self.errors.append(f"page error: {error}"))
        page.on("console", self._console)
        page.on("request", lambda request: self.requests.append(request))

    def _console(self, message: ConsoleMessage) -> None:
        if message.type != "error":
            return
        if self.refusals_expected and message.text.endswith("net::ERR_CONNECTION_REFUSED"):
            return
        self.errors.append(f"console {message.type}: {message.text}")

    def paths(self, pattern: str) -> list[Request]:
        return [r for r in self.requests if re.search(pattern, r.url)]

    def leave(self) -> None:
        """Leave the page for a blank one, ending its timers.

        A test that stops its own server calls this first: the page polls the session
        list every few seconds, and a poll that meets the stopped server is a console
        error ("net::ERR_CONNECTION_REFUSED") that depends only on timing.
        """
        self.page.goto("about:blank")


@pytest.fixture
def watched(browser: Browser) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    watched = Watched(context.new_page())
    yield watched
    context.close()
    assert watched.errors == []


def sign_in(page: Page, site: ThreadedServer) -> None:
    page.goto(site.login_url)
    assert page.url == site.base_url + "/"
    expect(page.locator("body.ready")).to_have_count(1)


def send(page: Page, text: str) -> None:
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")


def create_session(site: ThreadedServer, **body: Any) -> str:
    with httpx.Client(base_url=site.base_url, headers=AUTH, timeout=30) as client:
        response = client.post(SESSIONS, json=body)
        assert response.status_code == 201, response.text
        return str(response.json()["session"]["sessionId"])


def api(site: ThreadedServer, method: str, path: str, **kwargs: Any) -> httpx.Response:
    with httpx.Client(base_url=site.base_url, headers=AUTH, timeout=30) as client:
        return client.request(method, path, **kwargs)


def start_task(site: ThreadedServer, session_id: str, text: str) -> None:
    body = {"input": [{"type": "text", "text": text}]}
    response = api(site, "POST", f"/api/sessions/{session_id}/tasks", json=body)
    assert response.status_code == 202, response.text


def wait_for_answer(site: ThreadedServer, session_id: str, answer: str) -> None:
    """Poll the session until its task ended with ``answer`` in its history (under a deadline)."""
    deadline = time.monotonic() + WAIT_MS / 1000
    while time.monotonic() < deadline:
        info = api(site, "GET", f"/api/sessions/{session_id}").json()["session"]
        history = api(site, "GET", f"/api/sessions/{session_id}/messages").json()["messages"]
        texts = [
            m["payload"].get("text") for m in history if m["payload"].get("role") == "assistant"
        ]
        if info["state"] == "idle" and answer in texts:
            return
        time.sleep(0.02)
    raise AssertionError(f"session {session_id} did not answer {answer!r} in time")


STREAM = re.compile(r"/api/sessions/[^/]+/stream")


def hold_reconnection(page: Page, site: ThreadedServer, session_id: str) -> Route:
    """End the page's stream, and hold the request that reconnects it (until continued)."""
    held: list[Route] = []
    page.route(STREAM, lambda route: held.append(route))
    assert site.drop_streams(session_id) == 1
    deadline = time.monotonic() + WAIT_MS / 1000
    while not held:  # playwright delivers the route while it waits
        assert time.monotonic() < deadline, "the page did not reconnect its stream"
        page.wait_for_timeout(20)
    (route,) = held
    return route


def lines(count: int) -> str:
    return "".join(f"line {n}\n" for n in range(1, count + 1))


@needs_chromium
def test_s8_1_create_a_session_send_a_task_see_it_stream_and_approve_with_allow(
    site: ThreadedServer, watched: Watched, model: ScriptedModel, workspace: Path
) -> None:
    page = watched.page
    task = model.script(
        "Make the file out.txt, then list it.",
        calls(
            exec_command(
                "printf 'made\\n' > out.txt; for n in $(seq 1 12); do echo line $n; done",
                "Write the file and count",
            ),
            text="I will write the file first.",
        ),
        say("The file is made."),
    )
    sign_in(page, site)
    # No sessions yet: the form is open.
    form = page.locator("#create-form")
    expect(form).to_be_visible()
    page.fill("#create-workspace", str(workspace))
    page.select_option("#create-mode", "always-ask")
    page.fill("#create-title", "A first try")
    page.click("#create-button")
    current = page.locator(".session-item[aria-current='true']")
    expect(current).to_contain_text("A first try")
    expect(current.locator(".badge.state")).to_have_text("idle")
    expect(page.locator("#mode-select")).to_have_value("always-ask")
    expect(page.locator("#session-meta")).to_contain_text(str(workspace))
    expect(page.locator("#composer-send")).to_have_text("Send")

    send(page, task)
    expect(page.locator(".turn.user")).to_have_text(re.compile(re.escape(task)))
    expect(page.locator(".turn.assistant").first).to_have_text("I will write the file first.")
    # The call waits under always-ask: one line with its description and command.
    call = page.locator(".call.pending")
    expect(call).to_have_count(1)
    expect(call.locator(".tool")).to_have_text("exec_command")
    expect(call.locator(".description")).to_have_text("Write the file and count")
    expect(call.locator(".argument")).to_contain_text("printf 'made\\n' > out.txt")
    expect(call.locator(".verdict")).to_have_text("waiting for you")
    expect(current.locator(".pending-count")).to_have_text("1")
    expect(current.locator(".badge.state")).to_have_text("running")
    expect(page.locator("#pending-bar")).to_contain_text("1 call is waiting")
    expect(page.locator("#abort-button")).to_be_visible()
    expect(page.locator("#composer-send")).to_have_text("Steer")
    assert not (workspace / "out.txt").exists()

    call.get_by_role("button", name="Allow", exact=True).click()
    done = page.locator(".call.ok")
    expect(done).to_have_count(1)
    expect(done.locator(".verdict")).to_have_text("approved")
    output = done.locator(".output-text")
    # Collapsed to its first lines, with a way to see the rest.
    expect(output).to_contain_text("line 1\nline 2")
    expect(output).not_to_contain_text("line 12")
    toggle = done.locator(".output-toggle")
    expect(toggle).to_have_text("Show 8 more lines (12 in all)")
    toggle.click()
    expect(output).to_have_text(lines(12).rstrip("\n"))
    toggle.click()
    expect(output).not_to_contain_text("line 12")

    expect(page.locator(".turn.assistant").last).to_have_text("The file is made.")
    expect(current.locator(".badge.state")).to_have_text("idle")
    expect(current.locator(".pending-count")).to_have_count(0)
    expect(page.locator("#pending-bar")).to_be_hidden()
    expect(page.locator("#abort-button")).to_be_hidden()
    assert (workspace / "out.txt").read_text() == "made\n"
    # The page's Allow is the decision in the trace.
    session_id = page.evaluate("location.hash.slice(1)")
    (trace,) = trace_files(cfg.AgentPaths(site.root).traces_dir, session_id)
    decisions = [
        (m.payload.decision, m.payload.tool_call_id)
        for m in read_trace(trace)
        if isinstance(m.payload, om.ApprovalDecisionPayload)
    ]
    assert decisions == [("allow", "call_0_0")]
    # A reload draws the same conversation from the history.
    page.reload()
    expect(page.locator(".call.ok .verdict")).to_have_text("approved")
    expect(page.locator(".turn.assistant")).to_have_text(
        ["I will write the file first.", "The file is made."]
    )
    expect(page.locator(".call.ok .output-toggle")).to_have_text("Show 8 more lines (12 in all)")


@needs_chromium
def test_s8_1_on_a_phone_s_width_the_header_and_a_waiting_call_fit_the_screen(
    site: ThreadedServer, browser: Browser, model: ScriptedModel, workspace: Path
) -> None:
    """390 px wide: the controls wrap, the four decision buttons wrap, nothing scrolls sideways."""
    task = model.script(
        "Count to two.", calls(exec_command("echo 1; echo 2", "Count")), say("Counted.")
    )
    session_id = create_session(site, title="On a phone", approvalMode="always-ask")
    context = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        sign_in(page, site)
        page.click("#sidebar-toggle")
        page.locator(".session-item", has_text="On a phone").click()
        send(page, task)
        call = page.locator(".call.pending")
        expect(call.locator(".approval-buttons button")).to_have_count(4)
        expect(page.locator("#abort-button")).to_be_visible()
        widths = page.evaluate(
            """() => [document.documentElement, document.querySelector('#conversation')]
                .map(node => node.scrollWidth - node.clientWidth)"""
        )
        assert widths == [0, 0]  # neither scrolls sideways
        for name in ("Allow", "Allow for session", "Deny", "Deny with reason"):
            box = call.get_by_role("button", name=name, exact=True).bounding_box()
            assert box is not None
            assert box["x"] >= 0, name
            assert box["x"] + box["width"] <= 390, name
        for control in ("#mode-select", "#abort-button", "#archive-button", "#delete-button"):
            box = page.locator(control).bounding_box()
            assert box is not None
            assert box["x"] + box["width"] <= 390, control
        call.get_by_role("button", name="Allow", exact=True).click()
        expect(page.locator(".turn.assistant").last).to_have_text("Counted.")
    finally:
        context.close()
    wait_for_answer(site, session_id, "Counted.")


@needs_chromium
def test_s8_1_a_click_in_a_waiting_call_s_first_300_ms_is_not_an_answer(
    site: ThreadedServer, watched: Watched, model: ScriptedModel, workspace: Path
) -> None:
    """As chat's C5.1 for keys: the click of a person who has not seen the call yet (a
    double click's second, a call scrolled in under the pointer) neither allows nor denies."""
    page = watched.page
    task = model.script(
        "Make a file.", calls(exec_command("echo made > made.txt", "Make it")), say("Made.")
    )
    create_session(site, title="Early clicks", workspace=str(workspace), approvalMode="always-ask")
    sign_in(page, site)
    page.locator(".session-item", has_text="Early clicks").click()
    # Every decision button is clicked the moment it is drawn, before the page goes on.
    page.evaluate(
        """() => {
            window.earlyClicks = [];
            new MutationObserver(() => {
                for (const button of document.querySelectorAll(".approval-buttons button")) {
                    if (button.dataset.tried) continue;
                    button.dataset.tried = "1";
                    window.earlyClicks.push([button.textContent, button.disabled]);
                    button.click();
                }
            }).observe(document.body, { childList: true, subtree: true });
        }"""
    )
    send(page, task)
    call = page.locator(".call.pending")
    expect(call).to_have_count(1)
    allow = call.get_by_role("button", name="Allow", exact=True)
    expect(allow).to_be_enabled()  # armed, 300 ms on
    assert page.evaluate("window.earlyClicks") == [
        ["Allow", True],
        ["Allow for session", True],
        ["Deny", True],
        ["Deny with reason", True],
    ]
    session_id = page.evaluate("location.hash.slice(1)")
    waiting = api(site, "GET", f"/api/sessions/{session_id}/approvals").json()["approvals"]
    assert len(waiting) == 1  # none of the four early clicks answered it
    expect(call.locator(".verdict")).to_have_text("waiting for you")
    expect(page.locator(".reason-form")).to_have_count(0)
    assert not (workspace / "made.txt").exists()
    allow.click()
    expect(page.locator(".turn.assistant").last).to_have_text("Made.")
    assert (workspace / "made.txt").read_text() == "made\n"


@needs_chromium
def test_s8_1_a_waiting_mcp_call_shows_every_argument(
    site: ThreadedServer, watched: Watched, model: ScriptedModel, workspace: Path
) -> None:
    """An MCP tool's line names one argument; the person approving sees all of them, a
    long value cut (until "Show all of it") so that the flag after it is on screen."""
    page = watched.page
    system_config = cfg.AgentPaths(site.root).system_config
    cfg.dump_default_system_config(system_config)
    cfg.add_mcp_server(system_config, stdio_server("s"))
    note = "Meeting notes. " * 40
    arguments = {"description": "Save it", "text": note, "overwrite": True, "to": ["a", "b"]}
    task = model.script("Save the notes.", calls(("mcp__s__write_note", arguments)), say("Saved."))
    create_session(site, title="MCP call", workspace=str(workspace), approvalMode="always-ask")
    sign_in(page, site)
    page.locator(".session-item", has_text="MCP call").click()
    send(page, task)
    call = page.locator(".call.pending")
    expect(call.locator(".detail .line")).to_have_text(
        [
            f"text: {note[:300]}… (+{len(note) - 300} chars)",
            "overwrite: true",
            'to: ["a","b"]',
        ]
    )
    call.get_by_role("button", name="Show all of it").click()
    expect(call.locator(".detail .line").first).to_have_text(f"text: {note}")
    deny = call.get_by_role("button", name="Deny", exact=True)
    expect(deny).to_be_enabled()
    deny.click()
    expect(page.locator(".turn.assistant").last).to_have_text("Saved.")


async def _made_elsewhere(root: Path, workspace: Path, count: int) -> list[str]:
    """``count`` sessions with a trace under ``root`` and no row in the server's index
    (as ``penguin batch`` leaves them): one real session's trace, copied under new ids.
    Their ids, oldest first."""
    agent = penguin.Agent.open(root)
    async with agent.session(workspace, llm=ScriptedLLM([turn(text("ok"))])) as session:
        await session.flush_trace()
        first, path = session.session_id, session.trace_path
    assert path is not None
    record = path.read_text()
    ids = [first]
    start = time.time() + 10  # after the records themselves were written
    os.utime(path, (start, start))
    for number in range(1, count):
        made = f"{first[: -len('00000000')]}{number:08x}"
        copy = path.parent / f"{made}_001.jsonl"
        copy.write_text(record.replace(first, made))
        os.utime(copy, (start + number, start + number))  # last active a second apart
        ids.append(made)
    return ids


@needs_chromium
def test_s8_1_a_long_list_shows_the_newest_sessions_and_older_ones_on_request(
    tmp_path: Path, watched: Watched, model: ScriptedModel, workspace: Path
) -> None:
    """A root of a few batches holds thousands of sessions, and the list is polled: the
    page asks for the newest 200 of each agent, and "Show older sessions" for 200 more,
    in listings of at most 1,000 (the API's limit)."""
    page = watched.page
    root = tmp_path / "root"
    ids = trio.run(_made_elsewhere, root, workspace, 1005)
    with ThreadedServer(root, model) as site:
        sign_in(page, site)
        items = page.locator(".session-item")
        expect(items).to_have_count(200)
        expect(items.first).to_have_attribute("data-session-id", ids[-1])  # the newest
        older = page.locator("#more-sessions")
        for shown in (400, 600, 800, 1000):
            older.click()
            expect(items).to_have_count(shown)
        expect(older).to_be_visible()
        older.click()
        expect(items).to_have_count(1005)
        expect(older).to_be_hidden()
        expect(items.last).to_have_attribute("data-session-id", ids[0])
        watched.leave()
    asked = {re.sub(r".*/sessions", "", r.url) for r in watched.paths(r"/sessions(\?|$)")}
    assert asked == {  # never the whole list, and never more than 1,000 at once
        "?limit=201",
        "?limit=401",
        "?limit=601",
        "?limit=801",
        "?limit=1000",
        "?limit=1&offset=1000",
        "?limit=201&offset=1000",
    }, asked


@needs_chromium
def test_s8_1_text_streams_in_before_the_turn_ends_steer_and_abort(
    site: ThreadedServer, watched: Watched, model: ScriptedModel
) -> None:
    page = watched.page
    task = model.script("Think for a long time.", hang("Let me think about"))
    session_id = create_session(site, title="Thinker")
    sign_in(page, site)
    page.locator(".session-item", has_text="Thinker").click()
    send(page, task)
    # The model has sent part of its answer and is still streaming: the page shows it.
    streaming = page.locator(".turn.assistant.streaming")
    expect(streaming).to_have_text("Let me think about")
    expect(page.locator("#state-badge")).to_have_text("running")
    expect(page.locator("#composer-send")).to_have_text("Steer")
    send(page, "Also check the README.")
    expect(page.locator("#toast")).to_contain_text("after its current turn")
    page.click("#abort-button")
    expect(page.locator("#state-badge")).to_have_text("idle")
    expect(page.locator("#abort-button")).to_be_hidden()
    expect(page.locator("#composer-send")).to_have_text("Send")
    assert api(site, "GET", f"/api/sessions/{session_id}").json()["session"]["state"] == "idle"


@needs_chromium
def test_s8_1_decisions_subagent_work_and_the_mode_selector(
    site: ThreadedServer, watched: Watched, model: ScriptedModel, workspace: Path
) -> None:
    page = watched.page
    model.script("Say hello from the child.", calls(exec_command("echo child says hi")), say("Hi."))
    task = model.script(
        "Try three things.",
        calls(exec_command("touch denied-file", "Make a file")),
        calls(exec_command("rm -rf /", "Clean up everything")),
        calls(
            ("run_subagent", {"description": "Ask a helper", "prompt": "Say hello from the child."})
        ),
        say("All three tried."),
        # The next task of the session continues the same conversation.
        calls(exec_command("touch allowed-file")),
        say("Made it."),
    )
    create_session(site, title="Decisions", approvalMode="always-ask", workspace=str(workspace))
    sign_in(page, site)
    page.locator(".session-item", has_text="Decisions").click()
    send(page, task)
    first = page.locator(".call.pending")
    expect(first.locator(".argument")).to_have_text("touch denied-file")
    first.get_by_role("button", name="Deny", exact=True).click()
    # Denied by the person, then forbidden by the command policy without asking.
    expect(page.locator(".call .verdict.denied")).to_have_count(1)
    expect(page.locator(".call .verdict.forbidden")).to_have_count(1)
    spawn = page.locator(".call.pending")
    expect(spawn.locator(".tool")).to_have_text("run_subagent")
    expect(spawn.locator(".argument")).to_have_text("Say hello from the child.")
    spawn.get_by_role("button", name="Allow", exact=True).click()
    # The child's call is asked through this session and drawn indented under it.
    child = page.locator(".call.pending.depth-1")
    expect(child.locator(".argument")).to_have_text("echo child says hi")
    expect(page.locator(".subagent-label.depth-1")).to_have_count(1)
    child.get_by_role("button", name="Allow", exact=True).click()
    expect(page.locator(".call.ok.depth-1 .output-text")).to_have_text("child says hi")
    expect(page.locator(".turn.assistant.depth-1")).to_have_text("Hi.")
    expect(page.locator(".turn.assistant").last).to_have_text("All three tried.")
    expect(page.locator(".verdict")).to_have_text(["denied", "forbidden", "approved", "approved"])
    assert not (workspace / "denied-file").exists()

    # The mode selector PATCHes the session, and the next task follows it.
    page.select_option("#mode-select", "allow-all")
    expect(page.locator(".session-item[aria-current='true']")).to_contain_text("allow-all")
    session_id = page.evaluate("location.hash.slice(1)")
    info = api(site, "GET", f"/api/sessions/{session_id}").json()["session"]
    assert info["approvalMode"] == "allow-all"
    send(page, "Once more.")
    expect(page.locator(".turn.assistant").last).to_have_text("Made it.")
    expect(page.locator(".call.pending")).to_have_count(0)
    assert (workspace / "allowed-file").exists()


XSS_TEXT = '<img src=x onerror="window.__pwned = 1"> and <script>window.__pwned = 2</script>'


@needs_chromium
def test_s8_2_model_and_tool_text_is_shown_as_text_never_as_html(
    site: ThreadedServer, watched: Watched, model: ScriptedModel, workspace: Path
) -> None:
    page = watched.page
    (workspace / "evil.txt").write_text('<img src=x onerror="window.__pwned = 3">\n')
    task = model.script(
        XSS_TEXT,
        calls(exec_command("cat evil.txt", '<b onmouseover="window.__pwned = 4">bold</b>')),
        calls(
            (
                "edit_file",
                {
                    "description": "Defuse it",
                    "file_path": str(workspace / "evil.txt"),
                    "old_string": '<img src=x onerror="window.__pwned = 3">',
                    "new_string": '<img src=z onerror="window.__pwned = 5">',
                },
            )
        ),
        say(f"Here it is: {XSS_TEXT}\n\n```\n<img src=y onerror=alert(1)>\n```"),
    )
    create_session(site, title="<i>title</i>", workspace=str(workspace))
    sign_in(page, site)
    page.locator(".session-item", has_text="<i>title</i>").click()
    send(page, task)
    expect(page.locator(".turn.assistant")).to_contain_text("Here it is: <img src=x")
    for _ in range(2):
        log = page.locator("#log")
        expect(log.locator(".turn.user")).to_have_text(re.compile(re.escape(XSS_TEXT)))
        expect(log.locator(".call .description")).to_have_text(
            ['<b onmouseover="window.__pwned = 4">bold</b>', "Defuse it"]
        )
        expect(log.locator(".call .output-text").first).to_have_text(
            '<img src=x onerror="window.__pwned = 3">'
        )
        # The edit, as the lines it removes and adds.
        expect(log.locator(".detail .line")).to_have_text(
            [
                '- <img src=x onerror="window.__pwned = 3">',
                '+ <img src=z onerror="window.__pwned = 5">',
            ]
        )
        expect(log.locator(".code-block")).to_have_text("<img src=y onerror=alert(1)>")
        expect(page.locator("#session-title")).to_have_text("<i>title</i>")
        # Not one element was made from that text.
        assert page.locator("#log img, #log script, #log b, #log i").count() == 0
        assert page.locator(".session-list i, #session-title i").count() == 0
        assert page.evaluate("window.__pwned") is None
        page.reload()  # the same text again, drawn from the history
        expect(page.locator(".turn.assistant")).to_contain_text("Here it is: <img src=x")


@needs_chromium
def test_s8_2_a_dropped_stream_reconnects_with_last_event_id_and_gets_the_gap(
    site: ThreadedServer, watched: Watched, model: ScriptedModel
) -> None:
    page = watched.page
    task = model.script("Say something twice.", say("First."), say("Second."))
    session_id = create_session(site, title="Reconnects")
    sign_in(page, site)
    page.locator(".session-item", has_text="Reconnects").click()
    send(page, task)
    expect(page.locator(".turn.assistant")).to_have_text(["First."])
    expect(page.locator("#state-badge")).to_have_text("idle")
    # Hold the page's reconnection until a whole task ran without it.
    route = hold_reconnection(page, site, session_id)
    expect(page.locator("#connection")).to_have_text("reconnecting…")
    start_task(site, session_id, "And again.")
    wait_for_answer(site, session_id, "Second.")
    route.continue_()
    page.unroute(STREAM)
    # EventSource reconnected by itself, sending the last id it saw (Last-Event-ID is added
    # below what playwright reports of a request); the events published meanwhile are
    # replayed, so the page draws them without fetching the history again.
    expect(page.locator(".turn.user .body")).to_have_text([task, "And again."])
    expect(page.locator(".turn.assistant")).to_have_text(["First.", "Second."])
    expect(page.locator("#connection")).to_have_text("live")
    assert len(watched.paths(rf"/api/sessions/{session_id}/messages")) == 1


@needs_chromium
def test_s8_2_a_stream_dropped_before_it_sent_an_id_refetches_the_history(
    site: ThreadedServer, watched: Watched, model: ScriptedModel
) -> None:
    page = watched.page
    task = model.script("Say it once.", say("Once."))
    session_id = create_session(site, title="No id yet")
    sign_in(page, site)
    page.locator(".session-item", has_text="No id yet").click()
    expect(page.locator("#connection")).to_have_text("live")
    route = hold_reconnection(page, site, session_id)
    start_task(site, session_id, task)
    wait_for_answer(site, session_id, "Once.")
    route.continue_()
    page.unroute(STREAM)
    # Only the snapshot (which has no id) had come: nothing to resume from, so the page
    # reads the history again.
    expect(page.locator(".turn.assistant")).to_have_text(["Once."])
    assert len(watched.paths(rf"/api/sessions/{session_id}/messages")) == 2


@needs_chromium
def test_s8_2_after_a_restart_the_page_resyncs_and_refetches_the_history(
    tmp_path: Path, watched: Watched, model: ScriptedModel
) -> None:
    page = watched.page
    first = model.script("Before the restart.", say("First answer."), say("Second answer."))
    root = tmp_path / "root"
    with ThreadedServer(root, model) as site:
        port = site.server.port
        session_id = create_session(site, title="Survivor")
        sign_in(page, site)
        page.locator(".session-item", has_text="Survivor").click()
        send(page, first)
        expect(page.locator(".turn.assistant")).to_have_text(["First answer."])
        expect(page.locator("#state-badge")).to_have_text("idle")
        watched.refusals_expected = True  # the server is down until the next one listens
    expect(page.locator("#connection")).not_to_have_text("live")
    with ThreadedServer(root, model, port=port) as site:
        start_task(site, session_id, "After the restart.")
        # The new process has another epoch: the page's Last-Event-ID gets resync_required,
        # and the page draws the history again, each answer once.
        expect(page.locator(".turn.assistant")).to_have_text(["First answer.", "Second answer."])
        expect(page.locator("#connection")).to_have_text("live")
        assert len(watched.paths(rf"/api/sessions/{session_id}/messages")) == 2
        watched.leave()
