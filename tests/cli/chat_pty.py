"""Driving ``penguin chat`` in a real pseudo-terminal, against a scripted local model.

:func:`open_chat` starts ``python -m penguin chat`` under pexpect (a real pty, the
terminal's own line discipline, prompt_toolkit in raw mode) and hands back a
:class:`ChatPty` whose ``expect`` runs pexpect's blocking wait in a worker thread, so the
test's Trio loop keeps serving the model. Waiting is always on output, with a deadline.

When the block ends, the chat must have exited (or is killed, and the test fails), and
nothing it started may be alive: every process that was ever seen below the chat, and
every process that carries this test's ``PENGUIN_TEST_RUN`` id, is checked with psutil.

:class:`Model` is the scripted model: a queue of replies (a reply, or a function of the
request's JSON body), then a default short answer; every request body is kept.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import attrs
import pexpect
import psutil
import pyte
import trio

from penguin import config as cfg
from penguin.llm import testing as t

from ..environment.processes import RUN_VARIABLE, alive, marked_processes

CONTEXT_WINDOW = 128_000
PROMPT_DRAWN = "\x1b[?2004h"
"""What the terminal is sent when a prompt is drawn: bracketed paste mode on."""
Body = dict[str, Any]
QUESTION = "? Approve this tool call? [Y/a/n]"
"""The chat's approval question (chat.md C5.4)."""


def text_reply(text: str, *, prompt_tokens: int = 100, completion_tokens: int = 20) -> t.Reply:
    """An answer streamed in a few pieces, with its usage."""
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)] or [""]
    return t.sse_reply(
        [
            *(t.content_chunk(piece) for piece in pieces),
            t.finish_chunk(),
            t.usage_chunk(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens),
        ]
    )


def call_reply(
    name: str, arguments: Mapping[str, Any], *, call_id: str = "call_1", text: str = "On it.\n"
) -> t.Reply:
    """Some text, then one tool call."""
    encoded = json.dumps(arguments)
    return t.sse_reply(
        [
            t.content_chunk(text),
            t.tool_call_chunk(0, id=call_id, name=name, arguments=encoded[:9]),
            t.tool_call_chunk(0, arguments=encoded[9:]),
            t.finish_chunk("tool_calls"),
            t.usage_chunk(prompt_tokens=200, completion_tokens=30),
        ]
    )


@attrs.define
class Model:
    """The scripted model: replies in order, then ``fallback``; every body is kept."""

    replies: list[t.Reply | Callable[[Body], t.Reply]] = attrs.Factory(list)
    fallback: str = "Done."
    bodies: list[Body] = attrs.Factory(list)
    received: trio.Event = attrs.Factory(trio.Event)

    def __call__(self, request: t.ReceivedRequest) -> t.Reply:
        body = request.json()
        self.bodies.append(body)
        self.received.set()
        self.received = trio.Event()
        if not self.replies:
            return text_reply(self.fallback)
        reply = self.replies.pop(0)
        return reply(body) if callable(reply) else reply

    def user_texts(self, index: int = -1) -> list[str]:
        """The text of every user message of request ``index``."""
        return [
            m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
            for m in self.bodies[index]["messages"]
            if m["role"] == "user"
        ]


@asynccontextmanager
async def serve(model: Model, root: Path) -> AsyncIterator[t.LocalServer]:
    """Serve ``model`` and configure it as the default model of the data root ``root``."""
    async with t.serve_openai_compatible(model) as server:
        configure(root, server.base_url)
        yield server


def configure(
    root: Path,
    base_url: str,
    provider: str = "local",
    model_id: str = "scripted-model",
    *,
    default: bool = True,
) -> None:
    """Add the model ``provider/model_id`` at ``base_url`` to the project of ``root``."""
    paths = cfg.AgentPaths(root)
    entry = cfg.ModelEntry(
        provider=provider,
        model_id=model_id,
        base_url=base_url,
        api_key="sk-test",
        context_window=CONTEXT_WINDOW,
    )
    project = cfg.load_project_config(paths.project_config)
    project = cfg.add_model(project, entry, set_default=default)
    cfg.save_project_config(paths.project_config, project)


_NEVER = re.compile("(?!)")


class _Tee:
    """pexpect's ``logfile_read``: what the chat prints goes to a log and a terminal emulator."""

    def __init__(self, log: TextIO, stream: pyte.Stream) -> None:
        self.log = log
        self.stream = stream

    def write(self, data: str) -> None:
        self.log.write(data)
        self.stream.feed(data)

    def flush(self) -> None:
        self.log.flush()


class ChatPty:
    """A running ``penguin chat`` on a pty, and the screen a terminal would show."""

    def __init__(self, child: pexpect.spawn[str], screen: pyte.Screen) -> None:
        self.child = child
        self.screen = screen
        self.seen: set[tuple[int, float]] = set()
        """Every process ever seen below the chat (checked when the block ends)."""

    @property
    def pid(self) -> int:
        pid = self.child.pid
        assert pid is not None
        return pid

    def note_descendants(self) -> None:
        """Remember the processes below the chat now (the end checks they are gone)."""
        try:
            children = psutil.Process(self.pid).children(recursive=True)
        except psutil.Error:
            return
        for child in children:
            try:
                self.seen.add((child.pid, child.create_time()))
            except psutil.Error:
                continue

    async def expect(self, pattern: str, *, within: float = 30) -> str:
        """Wait for the literal ``pattern`` in the output; the output up to it."""
        self.note_descendants()
        await trio.to_thread.run_sync(
            functools.partial(self.child.expect_exact, pattern, timeout=within)
        )
        self.note_descendants()
        return str(self.child.before)

    async def expect_re(self, pattern: str, *, within: float = 30) -> str:
        """Wait for the regex ``pattern``; the text it matched."""
        self.note_descendants()
        expect = functools.partial(self.child.expect, pattern, timeout=within)
        await trio.to_thread.run_sync(expect)
        self.note_descendants()
        return str(self.child.after)

    def screen_lines(self) -> list[str]:
        """The emulated terminal's screen now, one string per row, trailing blanks cut."""
        return [row.rstrip() for row in self.screen.display]

    async def screen_shows(self, pattern: str, *, within: float = 30) -> re.Match[str]:
        """Wait until a row of the screen matches ``pattern``; the match.

        For what is drawn in place (the live region), which the byte stream alone does
        not show whole: prompt_toolkit redraws only the cells that changed. What is
        read meanwhile stays in pexpect's buffer for the next ``expect``.
        """
        compiled = re.compile(pattern)

        def wait() -> re.Match[str]:
            deadline = time.monotonic() + within
            while True:
                for row in self.screen_lines():
                    found = compiled.search(row)
                    if found is not None:
                        return found
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"the screen never showed {pattern!r}:\n" + "\n".join(self.screen_lines())
                    )
                # Read on, keeping what is read for the next expect: a pattern that
                # never matches times out with the data still in pexpect's buffer.
                with contextlib.suppress(pexpect.TIMEOUT):
                    self.child.expect(_NEVER, timeout=0.05)

        self.note_descendants()
        found = await trio.to_thread.run_sync(wait)
        self.note_descendants()
        return found

    async def prompt(self) -> None:
        """Wait until a prompt is drawn, in raw mode, ready for keys.

        prompt_toolkit turns bracketed paste on whenever it draws its prompt (and off
        while it prints something above it), so this is the first such draw after the
        output the test waited for last.
        """
        await self.expect(PROMPT_DRAWN)

    async def question(self, *, seen: bool = False, within: float = 30) -> None:
        """Wait until an approval question is drawn and takes keys (chat.md C5.1).

        Keys are dropped for its first 300 ms; then it shows its answers at the right
        (``… n REASON``), which is what this waits for on the screen. ``seen``: the
        test has already waited for the question's text in the output.
        """
        if not seen:
            await self.expect(QUESTION, within=within)
        # Nothing typed between the question and its hint: not an answered one's last draw.
        await self.screen_shows(re.escape(QUESTION) + r"\s+y once .*n REASON$", within=within)

    async def send(self, text: str) -> None:
        await trio.to_thread.run_sync(self.child.send, text)

    async def line(self, text: str) -> None:
        """Type ``text`` and Enter."""
        await self.send(text + "\r")

    async def exit_status(self, *, within: float = 30) -> int:
        """Wait for the chat to end; its exit status (128 + N for a death by signal N)."""
        await trio.to_thread.run_sync(
            functools.partial(self.child.expect, pexpect.EOF, timeout=within)
        )
        await trio.to_thread.run_sync(self.child.wait)
        status = self.child.exitstatus
        if status is None:
            return 128 + int(self.child.signalstatus or 0)
        return int(status)

    def resize(self, *, rows: int, cols: int) -> None:
        """Resize the terminal (the chat gets SIGWINCH), and the emulated screen with it."""
        self.child.setwinsize(rows, cols)
        self.screen.resize(rows, cols)

    def signal(self, signum: int) -> None:
        self.note_descendants()
        os.kill(self.pid, signum)


def chat_env(home: Path, run: str, *, color: bool = False) -> dict[str, str]:
    """The environment of a chat under test: a hermetic HOME, this test's run id."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("NO_COLOR", "COLUMNS", "LINES", "PENGUIN_HOME")
    }
    env.update(
        HOME=str(home),
        TERM="xterm-256color",
        PROMPT_TOOLKIT_NO_CPR="1",  # pexpect is no terminal emulator: nobody answers CPR
        PYTHONUNBUFFERED="1",
    )
    env[RUN_VARIABLE] = run
    if not color:
        env["NO_COLOR"] = "1"
    return env


@asynccontextmanager
async def open_chat(
    tmp_path: Path,
    *args: str,
    color: bool = False,
    rows: int = 40,
    cols: int = 120,
    command: list[str] | None = None,
) -> AsyncIterator[ChatPty]:
    """``penguin chat --root <tmp>/root ARGS`` on a pty; on exit, nothing it started is alive.

    ``command`` replaces the whole command line (run under ``bash -c`` to look at the
    terminal after the chat).
    """
    run = uuid.uuid4().hex
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    root = str(tmp_path / "root")
    argv = command or [sys.executable, "-m", "penguin", "chat", "--root", root, *args]
    child = pexpect.spawn(
        argv[0],
        argv[1:],
        cwd=str(tmp_path),
        env=chat_env(home, run, color=color),
        dimensions=(rows, cols),
        encoding="utf-8",
        codec_errors="replace",
        timeout=30,
    )
    log = (tmp_path / "chat-output.log").open("a", encoding="utf-8")
    screen = pyte.Screen(cols, rows)
    child.logfile_read = _Tee(log, pyte.Stream(screen))  # the log: for a failure's post-mortem
    process = ChatPty(child, screen)
    try:
        yield process
    finally:
        log.close()
        still_running = child.isalive()
        if still_running:
            child.kill(signal.SIGKILL)
        child.close(force=True)
        await _wait_gone(process.seen, run)
        assert not still_running, "the chat did not exit"


def _still_alive(seen: set[tuple[int, float]]) -> list[int]:
    """The processes of ``seen`` still alive (the same process: same pid, same start)."""
    found = []
    for pid, started in seen:
        try:
            same = psutil.Process(pid).create_time() == started
        except psutil.Error:
            continue
        if same and alive(pid):
            found.append(pid)
    return found


async def _wait_gone(seen: set[tuple[int, float]], run: str, within: float = 10.0) -> None:
    """Nothing the chat started is alive (a grace for the kernel to reap them)."""
    with trio.move_on_after(within):
        while _still_alive(seen) or marked_processes(run=run):  # noqa: ASYNC110 - no event
            await trio.sleep(0.05)  # the process table announces nothing: poll it
    survivors = _still_alive(seen) + [p.pid for p in marked_processes(run=run)]
    for pid in survivors:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
    assert survivors == [], f"processes outlived the chat: {survivors}"
