r"""The chat's terminal: line editing in a worker thread, output that never lands on a prompt.

:class:`Terminal` is the one owner of the screen while ``penguin chat`` runs on a
terminal. Prompts are prompt_toolkit ``PromptSession.prompt`` calls, each run in a
worker thread (``trio.to_thread.run_sync``), so the Trio loop never blocks on the
keyboard; prompt_toolkit runs its own event loop inside that thread while the prompt
is up, puts the terminal in raw mode for it and restores it when the prompt ends. Every
other piece of output goes through :meth:`Terminal.write`: while a prompt is up, it is
printed *above* the prompt (prompt_toolkit erases the prompt, the text is written, the
prompt is drawn again below it); otherwise straight to the terminal. So output is
never interleaved with a prompt line.

Three kinds of prompt, one at a time:

- :meth:`read` — the input line (``› ``): history (``<root>/chat_history``, 0600, the
  last 1,000 entries), a trailing ``\`` continues on the next line, a bracketed paste
  of several lines is one entry, Tab completes slash commands. Ctrl-C clears a line
  with text and reports an empty one; Ctrl-D on an empty line is end of input.
- :meth:`read` with ``live=`` — the same line while a task runs: its message is the
  live region (the streaming answer, the running calls and their elapsed time),
  redrawn ten times a second. Ctrl-C is reported whatever the line holds (the task is
  interrupted). A question pre-empts it and it comes back, text and all, afterwards.
- :meth:`question` — one line answering a question (an approval, ``Exit? [y/N]``);
  Ctrl-C and Ctrl-D answer ``None``. An approval question is asked with a *guard*
  (chat.md C5.1): what was typed before it is on the screen — keys the input line had
  not read yet, and keys still in the terminal's buffer, a pending Enter included — is
  kept for the input line (:attr:`Terminal.carried`), never read as the answer; and
  keys arriving within the guard after it is drawn (300 ms: nobody has read it yet)
  are dropped.

Cancelling a prompt (the task it belongs to ended, SIGTERM) makes its application exit
and waits for the thread, so the terminal is always back in its normal mode when a
prompt call returns or raises. Nothing here knows about sessions or messages.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Final, Literal, TextIO, final

import attrs
import trio
from prompt_toolkit import PromptSession
from prompt_toolkit.application import Application, run_in_terminal
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import ANSI
from prompt_toolkit.history import History
from prompt_toolkit.input.typeahead import get_typeahead
from prompt_toolkit.input.vt100 import raw_mode
from prompt_toolkit.input.vt100_parser import Vt100Parser
from prompt_toolkit.key_binding import KeyBindings, KeyPress, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.shortcuts import CompleteStyle

__all__ = ["HISTORY_LIMIT", "ChatHistory", "Entry", "SlashCompleter", "Terminal"]

HISTORY_LIMIT: Final = 1000
"""How many entries the history file keeps (the newest)."""
_LIVE_REFRESH: Final = 0.1
"""Seconds between redraws of a live prompt (its elapsed times move)."""
_BATCH: Final = 1 / 60
"""Output that arrives while a prompt is up is printed above it at most this often."""

EntryKind = Literal["line", "eof", "ctrl_c", "preempted", "cancelled"]


@final
@attrs.frozen
class Entry:
    """What a prompt ended with, and the text its line held then."""

    kind: EntryKind
    text: str = ""


def _write_whole(fd: int, data: bytes, progress: list[int]) -> None:
    """Write all of ``data``; ``progress[0]`` counts the bytes written, whatever happens."""
    while progress[0] < len(data):
        count = os.write(fd, data[progress[0] :])
        if count <= 0:
            raise OSError("a write made no progress")
        progress[0] += count


@final
class ChatHistory(History):
    """The input history in a file: one JSON string per line, mode 0600, the newest last.

    Every line is written whole or not at all (issue 21.4): a line the disk refuses is
    cut back, and a rewrite that fails leaves the old file (and no temporary file).

    Only the last :data:`HISTORY_LIMIT` entries are kept: a longer file is cut down
    when it is loaded and whenever an entry is added past the limit.
    """

    def __init__(self, path: Path, limit: int = HISTORY_LIMIT) -> None:
        super().__init__()
        self.path = path
        self.limit = limit
        self._entries: list[str] = []

    def load_history_strings(self) -> Iterable[str]:
        """The stored entries, newest first."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError:
            return []
        entries = []
        for line in raw.decode("utf-8", "replace").splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue  # a torn last line, or a file written by something else
            if isinstance(value, str):
                entries.append(value)
        self._entries = entries[-self.limit :]
        if len(entries) > self.limit:
            self._rewrite()
        return list(reversed(self._entries))

    def store_string(self, string: str) -> None:
        """Append one entry (and cut the file down to the limit)."""
        self._entries.append(string)
        if len(self._entries) > self.limit:
            del self._entries[: len(self._entries) - self.limit]
            self._rewrite()
            return
        with contextlib.suppress(OSError):
            self._append(json.dumps(string, ensure_ascii=False) + "\n")

    def _open(self, flags: int) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, flags | os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        os.fchmod(fd, 0o600)
        return fd

    def _append(self, text: str) -> None:
        """One entry, whole or not at all (what landed of a refused line is cut back)."""
        fd = self._open(os.O_APPEND)
        try:
            progress = [0]
            try:
                _write_whole(fd, text.encode(), progress)
            except OSError:
                if progress[0]:
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, max(0, os.fstat(fd).st_size - progress[0]))
                raise
        finally:
            os.close(fd)

    def _rewrite(self) -> None:
        """The kept entries replace the file at once; a failed write leaves the old file."""
        body = "".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in self._entries)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with contextlib.suppress(OSError):
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                try:
                    _write_whole(fd, body.encode(), [0])
                finally:
                    os.close(fd)
                os.replace(temporary, self.path)
            except OSError:
                temporary.unlink(missing_ok=True)
                raise


@final
class SlashCompleter(Completer):
    """Completes a slash command's name at the start of the line (``/pro`` → ``/processes``)."""

    def __init__(self, commands: Sequence[str]) -> None:
        self.commands = tuple(commands)

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        """The commands whose names start with what is typed, while no space is typed."""
        typed = document.text_before_cursor
        if not typed.startswith("/") or any(c.isspace() for c in typed):
            return
        for command in self.commands:
            if command.startswith(typed):
                yield Completion(command, start_position=-len(typed))


@final
@attrs.define(eq=False)
class _Running:
    """A prompt whose thread is running: its application once it is up."""

    kind: Literal["read", "live", "question"]
    app: Application[Any] | None = None
    exit_requested: EntryKind | None = None
    guard: float = 0.0
    """Seconds after it is first drawn during which keys are dropped (a question)."""
    shown_at: float | None = None
    """When it was first drawn (``time.monotonic()``)."""
    dropped: bool = False
    """Keys were dropped by the guard: a bare Enter right after is not an answer either."""
    done: trio.Event = attrs.Factory(trio.Event)
    """Set once the prompt's thread has ended."""


@final
class Terminal:
    """The screen and the keyboard of one chat (see the module docstring)."""

    def __init__(self, history_path: Path | None, commands: Sequence[str], out: TextIO) -> None:
        self._out = out
        self._lock = threading.Lock()
        self._app: Application[Any] | None = None
        self._pending: list[str] = []
        self._flush_scheduled = False
        self._running: _Running | None = None
        self._question_lock = trio.Lock()
        self._no_question = trio.Event()
        self._no_question.set()
        self.unsent = ""
        """The text a cancelled prompt's line held (to offer again on the next one)."""
        self.carried = ""
        """Type-ahead kept from a guarded question, for the next input line (C5.1)."""
        self.question_hint = ""
        """Shown at the right of a guarded question once it takes keys (its answers)."""
        self.drawn = trio.Event()
        """Set once the first prompt is on the screen (start-up work can wait for it)."""
        self._token: trio.lowlevel.TrioToken | None = None
        history = ChatHistory(history_path) if history_path is not None else None
        bindings = self._bindings()
        self._editor: PromptSession[Entry | str] = PromptSession(
            history=history,
            completer=SlashCompleter(commands),
            complete_style=CompleteStyle.READLINE_LIKE,
            complete_while_typing=False,
            reserve_space_for_menu=0,
            key_bindings=bindings,
            erase_when_done=True,
            prompt_continuation=lambda width, line, soft: "  ",
        )
        self._questions: PromptSession[Entry | str] = PromptSession(
            key_bindings=bindings, erase_when_done=True, reserve_space_for_menu=0
        )

    # ------------------------------------------------------------------ output

    def write(self, text: str) -> None:
        """Show ``text`` (whole lines): above the prompt if one is up. Thread-safe."""
        if not text:
            return
        with self._lock:
            app = self._app
            loop = app.loop if app is not None else None
            if app is None or loop is None:
                self._write_now(text)
                return
            self._pending.append(text)
            if self._flush_scheduled:
                return
            self._flush_scheduled = True
        with contextlib.suppress(RuntimeError):  # closed: the prompt's end writes it
            loop.call_soon_threadsafe(loop.call_later, _BATCH, self._flush_above)

    def _write_now(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):  # a hung-up or closed terminal
            self._out.write(text)
            self._out.flush()

    def _flush_above(self) -> None:
        """In the prompt's loop: print what is pending above the prompt."""
        with self._lock:
            self._flush_scheduled = False
        run_in_terminal(self._write_pending, in_executor=False)

    def _write_pending(self) -> None:
        with self._lock:
            text = "".join(self._pending)
            self._pending.clear()
            if text:
                self._write_now(text)

    # ------------------------------------------------------------------ key bindings

    def _bindings(self) -> KeyBindings:
        bindings = KeyBindings()

        guarded = Condition(self._guarded)

        @bindings.add(Keys.Any, filter=guarded)
        @bindings.add(Keys.BracketedPaste, filter=guarded)
        def _drop(event: KeyPressEvent) -> None:
            """A key in a guarded question's first moments: nobody has read it yet."""
            running = self._running
            if running is not None:
                running.dropped = True

        @bindings.add("enter")
        def _enter(event: KeyPressEvent) -> None:
            running = self._running
            buffer = event.current_buffer
            if running is not None and running.kind == "question" and running.guard > 0:
                if self._guarded():
                    running.dropped = True
                    return
                if running.dropped and not buffer.text:
                    # The end of typing that ran across the question: not a deliberate
                    # empty answer. The next Enter is.
                    running.dropped = False
                    return
            if self._kind() != "question" and buffer.document.text_before_cursor.endswith("\\"):
                buffer.delete_before_cursor(1)
                buffer.insert_text("\n")
                return
            buffer.validate_and_handle()

        @bindings.add("escape", "enter")
        def _newline(event: KeyPressEvent) -> None:
            if self._kind() != "question":
                event.current_buffer.insert_text("\n")

        @bindings.add("c-d", filter=Condition(lambda: self._kind() == "live"))
        def _ctrl_d(event: KeyPressEvent) -> None:
            # While a task runs, Ctrl-D on an empty line must not end the input line.
            buffer = event.current_buffer
            if buffer.text:
                buffer.delete()

        @bindings.add("c-c")
        def _ctrl_c(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            if self._kind() == "read" and buffer.text:
                buffer.reset()
                return
            event.app.exit(result=Entry("ctrl_c", buffer.text))

        return bindings

    def _kind(self) -> str:
        running = self._running
        return running.kind if running is not None else ""

    def _guarded(self) -> bool:
        """Whether keys are dropped now: a guarded question not yet up for its guard."""
        running = self._running
        if running is None or running.kind != "question" or running.guard <= 0:
            return False
        shown = running.shown_at
        return shown is None or time.monotonic() - shown < running.guard

    # ------------------------------------------------------------------ prompts

    async def read(
        self, message: str, *, default: str = "", live: Callable[[], str] | None = None
    ) -> Entry:
        """One entry of the input line (see the module docstring).

        With ``live``, the prompt shows ``live()`` (ANSI text, redrawn) above
        ``message`` and gives way to :meth:`question`: it then ends ``preempted`` with
        its text, and the caller asks again.
        """
        while True:  # a question asked again at once replaces the event: wait on
            no_question = self._no_question
            await no_question.wait()
            if no_question is self._no_question and not self._question_lock.locked():
                break
        if self.carried:
            default, self.carried = default + self.carried, ""
        if live is None:
            return await self._prompt(
                self._editor, "read", ANSI(message), default=default, refresh_interval=0
            )

        def shown() -> ANSI:
            return ANSI(live() + message)

        return await self._prompt(
            self._editor, "live", shown, default=default, refresh_interval=_LIVE_REFRESH
        )

    async def question(self, text: str, *, guard: float = 0.0) -> str | None:
        """Ask ``text``; the answer line, or ``None`` for Ctrl-C and Ctrl-D.

        One question at a time; a live prompt gives way while it is asked. The
        question and its answer stay on the screen. With ``guard`` (seconds), the
        type-ahead is kept for the input line and keys are dropped for ``guard``
        seconds once the question is drawn (see the module docstring).
        """
        async with self._question_lock:
            self._no_question = trio.Event()
            try:
                running = self._running
                if running is not None:
                    if running.kind == "live":
                        self._request_exit(running, "preempted")
                    await running.done.wait()
                if guard > 0:
                    self.carried += self._take_typeahead()
                options: dict[str, Any] = {}
                if guard > 0:
                    # (the trailing space: prompt_toolkit lays it out to the last column)
                    options["rprompt"] = lambda: "" if self._guarded() else self.question_hint + " "
                entry = await self._prompt(
                    self._questions, "question", text, refresh_interval=0, guard=guard, **options
                )
            finally:
                self._no_question.set()
        answer = entry.text if entry.kind == "line" else None
        self.write(f"{text}{answer or ''}\n")
        return answer

    def _take_typeahead(self) -> str:
        """The text typed but not read yet: prompt_toolkit's type-ahead and the tty's buffer.

        Only printable characters are kept (an Enter, arrows and other keys are
        dropped). Reading the terminal's buffer puts it in raw mode for the moment,
        so that a line not yet ended by Enter can be read too.
        """
        source = self._questions.input
        keys = list(get_typeahead(source))
        with contextlib.suppress(OSError, ValueError, AttributeError, NotImplementedError):
            fd = source.fileno()
            data = b""
            with raw_mode(fd):
                while select.select([fd], [], [], 0)[0]:
                    chunk = os.read(fd, 4096)
                    if not chunk:
                        break
                    data += chunk
            if data:
                parser = Vt100Parser(keys.append)
                parser.feed(data.decode("utf-8", "replace"))
                parser.flush()
        return "".join(_typed(key) for key in keys)

    async def _prompt(
        self,
        session: PromptSession[Entry | str],
        kind: Literal["read", "live", "question"],
        message: Any,
        *,
        guard: float = 0.0,
        **options: Any,
    ) -> Entry:
        running = _Running(kind, guard=guard)
        self._running = running
        token = self._token = self._token or trio.lowlevel.current_trio_token()

        def pre_run() -> None:
            app = session.app
            with self._lock:
                running.app = app
                self._app = app
                requested = running.exit_requested
            if guard > 0:

                def shown(_: object) -> None:
                    app.after_render.remove_handler(shown)
                    running.shown_at = time.monotonic()
                    with contextlib.suppress(RuntimeError):  # redraw: the hint appears
                        app.loop.call_later(guard + 0.02, app.invalidate)  # type: ignore[union-attr]

                app.after_render.add_handler(shown)
            if not self.drawn.is_set():

                def first_render(_: object) -> None:
                    app.after_render.remove_handler(first_render)
                    with contextlib.suppress(trio.RunFinishedError):
                        token.run_sync_soon(self.drawn.set)

                app.after_render.add_handler(first_render)
            if requested is not None:
                session.app.exit(result=Entry(requested, session.app.current_buffer.text))

        def in_thread() -> Entry:
            try:
                result = session.prompt(message, pre_run=pre_run, handle_sigint=False, **options)
            except EOFError:
                result = Entry("eof")
            except KeyboardInterrupt:
                result = Entry("ctrl_c")
            except OSError:  # the terminal went away (SIGHUP): nothing more can be read
                result = Entry("eof")
            finally:
                with self._lock:
                    self._app = None
                    running.app = None
                    text = "".join(self._pending)
                    self._pending.clear()
                    self._flush_scheduled = False
                    if text:
                        self._write_now(text)
            return result if isinstance(result, Entry) else Entry("line", result)

        entry = Entry("cancelled")
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._exit_when_cancelled, running)
                entry = await trio.to_thread.run_sync(in_thread)
                nursery.cancel_scope.cancel()
        finally:
            self._running = None
            running.done.set()
            if entry.kind == "cancelled":
                self.unsent = entry.text
        return entry

    async def _exit_when_cancelled(self, running: _Running) -> None:
        try:
            await trio.sleep_forever()
        finally:
            self._request_exit(running, "cancelled")

    def _request_exit(self, running: _Running, kind: EntryKind) -> None:
        """Make ``running``'s prompt end with ``kind`` and its text (from any thread)."""
        with self._lock:
            app = running.app
            loop = app.loop if app is not None else None
            if app is None or loop is None:
                if running.exit_requested is None:
                    running.exit_requested = kind
                return

        def end() -> None:
            if not app.is_done:
                with contextlib.suppress(Exception):  # it ended on its own meanwhile
                    app.exit(result=Entry(kind, app.current_buffer.text))

        with contextlib.suppress(RuntimeError):  # its loop closed: it has ended already
            loop.call_soon_threadsafe(end)


def _typed(key: KeyPress) -> str:
    """The text a key press typed: a printable character (or a paste), else nothing."""
    if key.key == Keys.BracketedPaste:
        return " ".join(key.data.split())
    if isinstance(key.key, Keys):
        return ""
    return key.data if key.data.isprintable() else ""
