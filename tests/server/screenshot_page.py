"""The screenshot of the page in docs/server.md: ``python -m tests.server.screenshot_page OUT``.

A server on a thread (:class:`~tests.server.browser.ThreadedServer`) with the scripted
model, three sessions, and one of them in the middle of a task under ``always-ask``:
two calls approved with the page's Allow button (one of them with a long output, shown
collapsed), a third waiting for approval. Headless Chromium at 1280×800 takes the
picture. ``--dark`` takes it in the dark scheme, ``--width``/``--height`` change the size.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import httpx
from playwright.sync_api import expect, sync_playwright

from .browser import ThreadedServer, chromium_path
from .support import AUTH, SESSIONS, ScriptedModel, calls, exec_command, say

TASK = "The date parser rejects ISO dates that end in Z. Find out why and fix it."

PARSE_PY = '''"""Parsing of the timestamps in the log files."""

from datetime import datetime, timedelta, timezone


def parse_date(text: str) -> datetime:
    """An ISO-8601 timestamp with an offset, such as 2026-11-29T21:28:46+01:00."""
    stamp, _, offset = text.partition("+")
    moment = datetime.fromisoformat(stamp)
    hours, _, minutes = offset.partition(":")
    zone = timezone(timedelta(hours=int(hours or 0), minutes=int(minutes or 0)))
    return moment.replace(tzinfo=zone)


def parse_line(line: str) -> tuple[datetime, str]:
    """One log line: the timestamp, a space, the message."""
    stamp, _, message = line.partition(" ")
    return parse_date(stamp), message
'''


def _workspace(base: Path) -> Path:
    workspace = base / "log-tools"
    (workspace / "src").mkdir(parents=True)
    (workspace / "tests").mkdir()
    (workspace / "src" / "parse.py").write_text(PARSE_PY)
    (workspace / "tests" / "test_parse.py").write_text(
        "from src.parse import parse_date\n\n\ndef test_utc():\n"
        '    assert parse_date("2026-11-29T21:28:46Z").utcoffset().total_seconds() == 0\n'
    )
    return workspace


def _script(model: ScriptedModel, workspace: Path) -> None:
    model.script(
        TASK,
        calls(
            exec_command("grep -rn 'def parse' src/ tests/", "Find the parsing functions"),
            text="Let me find where the dates are parsed.",
        ),
        calls(
            (
                "read_file",
                {
                    "description": "Read the parser",
                    "file_path": str(workspace / "src" / "parse.py"),
                },
            )
        ),
        calls(
            (
                "edit_file",
                {
                    "description": "Accept a trailing Z as UTC",
                    "file_path": str(workspace / "src" / "parse.py"),
                    "old_string": '    stamp, _, offset = text.partition("+")\n',
                    "new_string": (
                        '    if text.endswith("Z"):\n'
                        '        text = text[:-1] + "+00:00"\n'
                        '    stamp, _, offset = text.partition("+")\n'
                    ),
                },
            ),
            text=(
                "`parse_date` only splits the offset on `+`, so in `2026-11-29T21:28:46Z` "
                "the `Z` stays in the time and `fromisoformat` gets a string it does not "
                "expect on this code path. I'll turn a trailing `Z` into `+00:00` first."
            ),
        ),
        say("Fixed."),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--dark", action="store_true")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=800)
    args = parser.parse_args()
    executable = chromium_path()
    if executable is None:
        raise SystemExit("no chromium binary: apt-get install chromium")
    with tempfile.TemporaryDirectory(prefix="penguin-demo-") as tmp:
        base = Path(tmp)
        os.environ["HOME"] = str(base / "home")
        (base / "home").mkdir()
        workspace = _workspace(base)
        model = ScriptedModel()
        _script(model, workspace)
        with ThreadedServer(base / "root", model) as server:
            with httpx.Client(base_url=server.base_url, headers=AUTH, timeout=30) as client:
                for title, mode in (
                    ("Nightly log summary", "read-only"),
                    ("Upgrade the CI image", "allow-all"),
                ):
                    made = client.post(
                        SESSIONS, json={"title": title, "approvalMode": mode, "workspace": tmp}
                    )
                    made.raise_for_status()
                main_session = client.post(
                    SESSIONS,
                    json={
                        "title": "Dates ending in Z",
                        "approvalMode": "always-ask",
                        "workspace": str(workspace),
                    },
                )
                main_session.raise_for_status()
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=executable)
                context = browser.new_context(
                    viewport={"width": args.width, "height": args.height},
                    color_scheme="dark" if args.dark else "light",
                )
                page = context.new_page()
                page.goto(server.login_url)
                if page.locator("#sidebar-toggle").is_visible():
                    page.click("#sidebar-toggle")
                page.get_by_role("button", name="Dates ending in Z").click()
                page.fill("#composer-input", TASK)
                page.press("#composer-input", "Enter")
                for done in (1, 2):
                    page.locator(".call.pending").get_by_role(
                        "button", name="Allow", exact=True
                    ).click()
                    expect(page.locator(".call.ok")).to_have_count(done, timeout=20_000)
                expect(page.locator(".call.pending")).to_have_count(1, timeout=20_000)
                expect(page.locator(".output.collapsed")).to_have_count(1)
                page.mouse.move(0, 0)
                page.screenshot(path=str(args.out))
                browser.close()
    print(args.out)


if __name__ == "__main__":
    main()
