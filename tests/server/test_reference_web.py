"""Issue 22: the reference's own web app, served by ``penguin server --ui``, in headless Chromium.

The app is PenguinHarness's production build (``../shared/reference-web/dist`` beside the
checkout, or ``$PENGUIN_REFERENCE_WEB``); these tests are skipped, saying why, when it is
not there. Nobody here wrote it, so it checks that penguin serves what a real client of
the reference needs: it signs in with the URL penguin prints, lists sessions (past the
first page of 10), opens one with its history, creates one under "Ask every time",
sends a task and watches the reply stream, Allows one call and Denies another (both in
the trace), switches the mode (the next call is not asked), steers, aborts, reloads,
archives a session and finds it again after a reload, sees background processes with
their commands and removes them, and sees another session's Running mark change live.

The server runs with its scripted model on a thread of its own
(:class:`~tests.server.browser.ThreadedServer`), over real sockets. Every test fails on
a script error in the page, a Content-Security-Policy violation, and any HTTP error
except the 404s of the routes the app tolerates penguin not having (terminals, skills,
goals). Screenshots of the main steps go to ``$PENGUIN_SCREENSHOTS`` when set, else to
the test's temporary folder.
"""

from __future__ import annotations

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
    Locator,
    Page,
    Playwright,
    Response,
    expect,
    sync_playwright,
)

from .browser import ThreadedServer, chromium_path
from .support import AUTH, SESSIONS, ScriptedModel, calls, exec_command, gated, hang, say

REPOSITORY = Path(__file__).resolve().parents[2]
REFERENCE_VARIABLE = "PENGUIN_REFERENCE_WEB"


def reference_web() -> Path | None:
    """The built app: ``$PENGUIN_REFERENCE_WEB``, else ``../shared/reference-web/dist``."""
    configured = os.environ.get(REFERENCE_VARIABLE)
    candidates = [Path(configured)] if configured else []
    candidates.append(REPOSITORY.parent / "shared" / "reference-web" / "dist")
    for candidate in candidates:
        if (candidate / "index.html").is_file():
            return candidate
    return None


CHROMIUM = chromium_path()
DIST = reference_web()
pytestmark = [
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="no chromium binary (apt-get install chromium, or set PENGUIN_CHROMIUM)",
    ),
    pytest.mark.skipif(
        DIST is None,
        reason="the reference's web app is not built beside the checkout "
        f"(../shared/reference-web/dist), and ${REFERENCE_VARIABLE} is not set",
    ),
]
WAIT_MS = 20_000
expect.set_options(timeout=WAIT_MS)
TOLERATED = re.compile(r"/api/(terminals|projects/[^/]+/agents/[^/]+/skills|sessions/[^/]+/goal)$")
"""Routes penguin does not have whose 404 the app handles (docs/server.md)."""


# --------------------------------------------------------------------------- fixtures


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
    assert DIST is not None
    with ThreadedServer(tmp_path / "root", model, ui=DIST) as server:
        yield server


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    configured = os.environ.get("PENGUIN_SCREENSHOTS")
    folder = Path(configured) if configured else tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class App:
    """The app's page, what went wrong in it, and the calls it made."""

    def __init__(self, page: Page, site: ThreadedServer, shots: Path) -> None:
        self.page = page
        self.site = site
        self.shots = shots
        self.errors: list[str] = []
        self.calls: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(f"page error: {error}"))
        page.on(
            "console",
            lambda message: (
                self.errors.append(f"console: {message.text}")
                if "Content Security Policy" in message.text
                else None
            ),
        )
        page.on("response", self._seen)

    def _seen(self, response: Response) -> None:
        path = response.url.removeprefix(self.site.base_url).split("?", 1)[0]
        self.calls.append(f"{response.request.method} {path}")
        tolerated = response.status == 404 and TOLERATED.search(path)
        if response.status >= 400 and not tolerated:
            self.errors.append(f"{response.status} {response.request.method} {path}")

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(self.shots / f"{name}.png"))

    def open(self, path: str = "/") -> None:
        """Sign in with the URL penguin prints, then go to ``path``."""
        self.page.goto(self.site.login_url)
        expect(self.page.get_by_role("button", name=re.compile("local"))).to_be_visible()
        if path != "/":
            self.page.goto(self.site.base_url + path)
        self.dismiss_guides()

    def dismiss_guides(self) -> None:
        later = self.page.get_by_role("button", name="Later")
        if later.count():
            later.click()

    def row(self, title: str) -> Locator:
        """The session's row in the sidebar."""
        return (
            self.page.get_by_role("complementary")
            .get_by_role("listitem")
            .filter(has=self.page.get_by_role("button", name=re.compile(re.escape(title))))
        )

    @property
    def composer(self) -> Locator:
        return self.page.get_by_role("main").get_by_role("textbox")

    def send(self, text: str) -> None:
        self.composer.fill(text)
        self.composer.press("Enter")

    def choose_mode(self, label: str) -> None:
        self.page.get_by_role("button", name="Approval mode").click()
        self.page.get_by_text(label, exact=False).last.click()


@pytest.fixture
def app(browser: Browser, site: ThreadedServer, shots: Path) -> Iterator[App]:
    context = browser.new_context(viewport={"width": 1280, "height": 800}, locale="en-US")
    app = App(context.new_page(), site, shots)
    yield app
    context.close()
    assert app.errors == []


def api(site: ThreadedServer, method: str, path: str, **kwargs: Any) -> httpx.Response:
    with httpx.Client(base_url=site.base_url, headers=AUTH, timeout=30) as client:
        return client.request(method, path, **kwargs)


def create_session(site: ThreadedServer, **body: Any) -> str:
    response = api(site, "POST", SESSIONS, json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["session"]["sessionId"])


def run_task(site: ThreadedServer, session_id: str, text: str, *, wait: bool = True) -> None:
    body = {"input": [{"type": "text", "text": text}]}
    answer = api(site, "POST", f"/api/sessions/{session_id}/tasks", json=body)
    assert answer.status_code == 202, answer.text
    deadline = time.monotonic() + WAIT_MS / 1000
    while wait and session(site, session_id)["state"] != "idle":
        assert time.monotonic() < deadline, "the task did not end in time"
        time.sleep(0.02)


def session(site: ThreadedServer, session_id: str) -> dict[str, Any]:
    found: dict[str, Any] = api(site, "GET", f"/api/sessions/{session_id}").json()["session"]
    return found


def decisions(site: ThreadedServer, session_id: str) -> list[tuple[str, str]]:
    """The ``approval_decision`` events of the trace: (tool call id, decision)."""
    history = api(site, "GET", f"/api/sessions/{session_id}/messages").json()["messages"]
    return [
        (m["payload"]["tool_call_id"], m["payload"]["decision"])
        for m in history
        if m["payload"].get("type") == "approval_decision"
    ]


def current_session(page: Page) -> str:
    match = re.search(r"/chat/(session-[0-9a-f-]+)$", page.url)
    assert match is not None, page.url
    return match.group(1)


# --------------------------------------------------------------------------- the chat page


def test_22_chat_ask_every_time_allow_deny_mode_steer_abort_reload(
    app: App, site: ThreadedServer, model: ScriptedModel
) -> None:
    page = app.page
    release = trio.Event()
    # One conversation, so one script (keyed by its first message), turn after turn.
    model.script(
        "Tidy the folder.",
        calls(exec_command("echo kept > kept.txt", "write the kept file")),
        calls(exec_command("echo gone > gone.txt", "write the other file")),
        say("I kept the file and left the rest alone."),
        # "Count the files."
        calls(exec_command("ls | wc -l", "count them")),
        say("There is one file."),
        # "Take your time.", steered while it waits
        gated(release, calls(exec_command("echo waiting", "wait a little"))),
        say("Noted your message."),
        # "Think it over.", aborted
        hang("Let me think this through"),
    )

    app.open("/chat/new")
    expect(page.get_by_role("heading", name="PenguinHarness")).to_be_visible()
    app.dismiss_guides()
    app.choose_mode("Ask every time")
    expect(page.get_by_role("button", name="Approval mode")).to_contain_text("Ask every time")
    app.send("Tidy the folder.")

    # The new session asks before the first call: Allow it.
    allow = page.get_by_role("button", name="Allow", exact=True)
    expect(allow).to_be_visible()
    expect(page.get_by_text("echo kept > kept.txt")).to_be_visible()
    sid = current_session(page)
    assert session(site, sid)["approvalMode"] == "always-ask"
    app.shot("01-pending-approval")
    allow.click()
    # The second call is asked too: Deny it.
    expect(page.get_by_text("echo gone > gone.txt")).to_be_visible()
    page.get_by_role("button", name="Deny", exact=True).click()
    expect(page.get_by_text("I kept the file and left the rest alone.")).to_be_visible()
    app.shot("02-allowed-and-denied")
    assert [verdict for _, verdict in decisions(site, sid)] == ["allow", "deny"]
    workspace = Path(session(site, sid)["workspace"])
    assert (workspace / "kept.txt").read_text() == "kept\n"
    assert not (workspace / "gone.txt").exists()

    # The mode switch applies to the next call: it is not asked.
    app.choose_mode("Approve everything")
    expect(page.get_by_role("button", name="Approval mode")).to_contain_text("Approve everything")
    assert session(site, sid)["approvalMode"] == "allow-all"
    app.send("Count the files.")
    expect(page.get_by_text("There is one file.")).to_be_visible()
    expect(page.get_by_role("button", name="Allow", exact=True)).to_have_count(0)
    assert [verdict for _, verdict in decisions(site, sid)] == ["allow", "deny", "allow"]

    # Steering: a message sent while the task runs reaches the model's next turn.
    app.send("Take your time.")
    expect(page.get_by_role("main").get_by_role("button", name="Stop", exact=True)).to_be_visible()
    app.send("Also say you noted this.")
    deadline = time.monotonic() + WAIT_MS / 1000
    while not any(c == f"POST /api/sessions/{sid}/steer" for c in app.calls):
        assert time.monotonic() < deadline, "the app did not steer"
        page.wait_for_timeout(20)
    site.run_sync(release.set)
    expect(page.get_by_text("Noted your message.")).to_be_visible()
    steered = [r for r in model.requests if "Also say you noted this." in str(r["messages"])]
    assert steered, "the steering message did not reach the model"

    # The reply streams in before the turn ends; Stop aborts it.
    app.send("Think it over.")
    expect(page.get_by_text("Let me think this through")).to_be_visible()
    assert session(site, sid)["state"] == "running"
    app.shot("03-streaming")
    page.get_by_role("main").get_by_role("button", name="Stop", exact=True).click()
    expect(page.get_by_role("main").get_by_role("button", name="Send", exact=True)).to_be_visible()
    deadline = time.monotonic() + WAIT_MS / 1000
    while session(site, sid)["state"] != "idle":
        assert time.monotonic() < deadline, "the abort did not end the task"
        time.sleep(0.02)

    # After a reload the history is there, read back from the trace.
    page.reload()
    app.dismiss_guides()
    expect(page.get_by_text("I kept the file and left the rest alone.")).to_be_visible()
    expect(page.get_by_text("There is one file.")).to_be_visible()
    expect(page.get_by_role("button", name="Approval mode")).to_contain_text("Approve everything")
    app.shot("04-after-reload")


# --------------------------------------------------------------------------- the session list


def test_22_list_pages_past_ten_opens_history_and_archives(
    app: App, site: ThreadedServer, model: ScriptedModel
) -> None:
    page = app.page
    model.script("What is two and two?", say("Two and two make four."))
    old = create_session(site, title="Arithmetic")
    run_task(site, old, "What is two and two?")
    for n in range(11):
        create_session(site, title=f"Chat number {n:02d}")
    app.open()
    sidebar = page.get_by_role("complementary")
    expect(app.row("Chat number 10")).to_be_visible()
    expect(app.row("Chat number 01")).to_be_visible()
    # Ten on the first page: the two oldest need the next one.
    expect(app.row("Arithmetic")).to_have_count(0)
    expect(app.row("Chat number 00")).to_have_count(0)
    app.shot("05-first-page")
    # (grouped by workspace, each group has its own "More")
    sidebar.get_by_role("button", name=re.compile(r"^(More|Load more chats)$")).click()
    expect(app.row("Arithmetic")).to_be_visible()
    expect(app.row("Chat number 00")).to_be_visible()

    # Open the older one: its history is shown.
    app.row("Arithmetic").get_by_role("button", name=re.compile("Arithmetic")).click()
    expect(page.get_by_text("What is two and two?")).to_be_visible()
    expect(page.get_by_text("Two and two make four.")).to_be_visible()
    assert current_session(page) == old

    # Archive one; after a reload it is in the Archived folder.
    target = app.row("Chat number 05")
    target.hover()
    target.get_by_role("button", name="Archive").click()
    expect(app.row("Chat number 05")).to_have_count(0)
    deadline = time.monotonic() + WAIT_MS / 1000
    while not any(s["title"] == "Chat number 05" for s in archived(site)):
        assert time.monotonic() < deadline, "the archive did not reach the server"
        time.sleep(0.02)
    page.reload()
    app.dismiss_guides()
    folder = sidebar.get_by_role("button", name=re.compile(r"Archived \(1\)"))
    expect(folder).to_be_visible()
    folder.click()
    expect(app.row("Chat number 05")).to_be_visible()
    app.shot("06-archived-after-reload")


def archived(site: ThreadedServer) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = api(site, "GET", SESSIONS, params={"archived": "1"}).json()[
        "sessions"
    ]
    return found


# --------------------------------------------------------------------------- processes, live marks


def test_22_processes_are_shown_and_removed_and_running_marks_are_live(
    app: App, site: ThreadedServer, model: ScriptedModel
) -> None:
    page = app.page
    model.script(
        "Start the two commands.",
        calls(
            exec_command("sleep 30", "a long one", run_in_background=True),
            exec_command("echo quick", "a short one", run_in_background=True),
        ),
        say("Both are started."),
    )
    model.script("Keep thinking.", hang("Still thinking"))
    sid = create_session(site, title="With processes")
    other = create_session(site, title="The other chat")
    run_task(site, sid, "Start the two commands.")
    deadline = time.monotonic() + WAIT_MS / 1000
    while [p["running"] for p in processes(site, sid)] != [True, False]:
        assert time.monotonic() < deadline, "the short command did not end"
        time.sleep(0.02)

    app.open(f"/chat/{sid}")
    expect(page.get_by_text("Both are started.")).to_be_visible()
    page.get_by_role("button", name="Session info").click()
    expect(page.get_by_text("sleep 30", exact=True)).to_be_visible()
    expect(page.get_by_text("echo quick", exact=True)).to_be_visible()
    app.shot("07-processes")
    # The exited one is removed (DELETE), the running one stopped (kill).
    page.get_by_role("button", name="Remove").click()
    expect(page.get_by_text("echo quick", exact=True)).to_have_count(0)
    page.get_by_role("button", name="Stop", exact=True).first.click()
    expect(page.get_by_text("sleep 30", exact=True)).to_have_count(0)
    assert processes(site, sid) == []
    assert f"DELETE /api/sessions/{sid}/processes/" in " ".join(app.calls)
    page.keyboard.press("Escape")

    # Another session starts and stops: its Running mark follows, live.
    mark = app.row("The other chat").get_by_role("status", name="Running")
    expect(mark).to_have_count(0)
    run_task(site, other, "Keep thinking.", wait=False)
    expect(mark).to_be_visible()
    app.shot("08-other-session-running")
    assert api(site, "POST", f"/api/sessions/{other}/abort").status_code == 202
    expect(mark).to_have_count(0)
    assert current_session(page) == sid


def processes(site: ThreadedServer, session_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = api(site, "GET", f"/api/sessions/{session_id}/processes").json()[
        "processes"
    ]
    return found
