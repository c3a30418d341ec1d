"""The chat's view on a terminal: finished answers as Markdown, a live region while work runs.

:class:`ScreenSurface` is the :class:`~._render.Surface` of ``penguin chat`` when
stdout is a terminal. The :class:`~._render.Renderer` words every line as it does for
``penguin run``; this surface decides how the lines reach the screen:

- whole lines (calls, results, decisions, notes) are printed through the
  :class:`~._terminal.Terminal`, above whatever prompt is up;
- the answer streams into the *live region* (its last lines, as plain text) and, once
  it is complete, is printed as Markdown rendered by rich (headings, lists, code blocks
  with syntax highlighting), without colour when ``NO_COLOR`` is set;
- verbose thinking and tool output stream line by line (the unfinished line waits in
  the live region);
- each running call has a line in the live region with a spinner and its elapsed time,
  which disappears when the call ends; while the model works and no call runs, one
  ``working`` line says so.

The live region is drawn by the Terminal's live prompt (:meth:`live`, called from the
prompt's thread), so one owner draws the screen at a time. The state it reads is
guarded by a lock; a streamed token costs an append to a list.

Text from a model or a tool never reaches the terminal raw (:func:`~._render.sanitize`:
an escape sequence in a tool's output cannot clear the screen or move the cursor).
"""

from __future__ import annotations

import io
import shutil
import threading
import time
from typing import TYPE_CHECKING, Final, final

from prompt_toolkit.utils import get_cwidth

from ._render import CallKey, Style, paint, sanitize
from ._terminal import Terminal

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["ScreenSurface"]

_SPINNER: Final = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_MAX_CALL_LINES: Final = 6
_CODE_THEME: Final = "monokai"


def _wrap(line: str, width: int) -> list[str]:
    """``line`` cut into pieces of at most ``width`` terminal cells."""
    if line.isascii():
        return [line[start : start + width] for start in range(0, max(len(line), 1), width)]
    pieces: list[str] = []
    current: list[str] = []
    used = 0
    for char in line:
        cells = get_cwidth(char)
        if used + cells > width and current:
            pieces.append("".join(current))
            current, used = [], 0
        current.append(char)
        used += cells
    pieces.append("".join(current))
    return pieces


def _cells(text: str) -> int:
    return len(text) if text.isascii() else sum(get_cwidth(char) for char in text)


def _fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` terminal cells, ending in ``…`` when cut."""
    if _cells(text) <= width:
        return text
    kept = text[: max(width - 1, 0)]
    while kept and _cells(kept) > width - 1:
        kept = kept[:-1]
    return kept + "…"


@final
class ScreenSurface:
    """Where the chat's Renderer draws on a terminal (see the module docstring)."""

    def __init__(self, terminal: Terminal, *, color: bool) -> None:
        self.terminal = terminal
        self.color = color
        self._lock = threading.Lock()
        self._answer: list[str] = []
        self._partial = ""
        self._partial_style: Style = "dim"
        self._calls: dict[CallKey, tuple[str, float]] = {}
        self._working_since: float | None = None
        self.note = ""
        """A hint under the working line (``interrupting…``); empty for none."""
        self._console: Console | None = None

    # ------------------------------------------------------------------ the Surface

    def stream(self, text: str, style: Style) -> None:
        """Answer text waits in the live region; other streams print line by line."""
        text = sanitize(text)
        if style == "":
            with self._lock:
                self._answer.append(text)
            return
        with self._lock:
            data = self._partial + text
            *complete, self._partial = data.split("\n")
            self._partial_style = style
        if complete:
            self.terminal.write("".join(paint(line, style, self.color) + "\n" for line in complete))

    def line(self, text: str, style: Style) -> None:
        """One whole line, above the prompt (after the unfinished streamed line, if any)."""
        self.terminal.write(self._take_partial() + paint(sanitize(text), style, self.color) + "\n")

    def answer(self, text: str) -> None:
        """The streamed answer is complete: print it as Markdown."""
        with self._lock:
            self._answer.clear()
        if text.strip():
            self.terminal.write(self._take_partial() + self.markdown(sanitize(text)))

    def question(self, text: str) -> None:
        """Questions are the Terminal's (never asked through this surface)."""
        self.terminal.write(text + "\n")

    def answered(self, line: str | None, *, echo: bool) -> None:
        """Questions are the Terminal's (see :meth:`question`)."""

    def call_started(self, key: CallKey, label: str) -> None:
        """Show ``label`` with its elapsed time in the live region until the call ends."""
        with self._lock:
            self._calls[key] = (sanitize(label), time.monotonic())

    def call_ended(self, key: CallKey) -> None:
        """Take the call's line out of the live region."""
        with self._lock:
            self._calls.pop(key, None)

    def end(self) -> None:
        """Print what is still streaming (an answer cut before it completed) as it is."""
        with self._lock:
            answer = "".join(self._answer)
            self._answer.clear()
        tail = self._take_partial()
        if answer.strip():
            tail += answer.rstrip("\n") + "\n"
        self.terminal.write(tail)

    def _take_partial(self) -> str:
        with self._lock:
            partial, self._partial = self._partial, ""
            style = self._partial_style
        return paint(partial, style, self.color) + "\n" if partial else ""

    # ------------------------------------------------------------------ the task

    def working(self, since: float | None) -> None:
        """A task runs since ``since`` (``time.monotonic()``), or (``None``) no longer."""
        with self._lock:
            self._working_since = since
            if since is None:
                self._calls.clear()
                self.note = ""

    # ------------------------------------------------------------------ rendering

    def markdown(self, text: str) -> str:
        """``text`` rendered as Markdown for the terminal's current width (ANSI text)."""
        from rich.console import Console
        from rich.markdown import Markdown

        width = shutil.get_terminal_size().columns
        console = Console(
            file=io.StringIO(),
            force_terminal=True,
            no_color=not self.color,
            width=max(width, 20),
            highlight=False,
            emoji=False,
            soft_wrap=False,
        )
        console.print(Markdown(text, code_theme=_CODE_THEME))
        out = console.file
        assert isinstance(out, io.StringIO)
        # rich pads lines to the width; unpadded, they survive a narrower terminal. (The
        # padding of a code block is coloured: it ends in a reset and stays.)
        return "\n".join(line.rstrip(" ") for line in out.getvalue().split("\n"))

    def live(self) -> str:
        """The live region as ANSI text ending in a newline (empty when nothing runs)."""
        size = shutil.get_terminal_size()
        width = max(size.columns - 1, 10)
        now = time.monotonic()
        with self._lock:
            answer = "".join(self._answer[-400:]) if self._answer else ""
            if len(self._answer) > 4096:  # keep the join cheap on a long answer
                self._answer[:] = ["".join(self._answer)]
            partial, style = self._partial, self._partial_style
            calls = list(self._calls.values())
            since = self._working_since
            note = self.note
        frame = _SPINNER[int(now * 10) % len(_SPINNER)]
        status: list[str] = []
        for label, started in calls[:_MAX_CALL_LINES]:
            elapsed = f" · {now - started:.1f}s"
            running = _fit(f"{frame} {label}", width - len(elapsed)) + elapsed
            status.append(paint(running, "call", self.color))
        if len(calls) > _MAX_CALL_LINES:
            more = len(calls) - _MAX_CALL_LINES
            status.append(paint(f"  (+{more} more running)", "dim", self.color))
        if not calls and since is not None:
            working = f"{frame} working · {now - since:.1f}s · Ctrl-C interrupts"
            status.append(paint(working, "dim", self.color))
        if note:
            status.append(paint(_fit(note, width), "warn", self.color))
        room = max(size.lines - len(status) - 3, 1)
        body: list[str] = []
        if answer:
            for text_line in answer[-(room * width) :].split("\n"):
                body.extend(_wrap(text_line, width))
        if partial:
            body.extend(paint(piece, style, self.color) for piece in _wrap(partial, width))
        shown = [*body[-room:], *status]
        return "".join(line + "\n" for line in shown)
