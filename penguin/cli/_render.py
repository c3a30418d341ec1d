"""What the terminal shows of a session's message stream: one view for ``run`` and ``chat``.

The :class:`Renderer` decides *what* is shown, the same way for every front end: the
assistant's text streams as it arrives; thinking shows as a one-line marker (streamed
in full with ``verbose``); each tool call is one line (``● name: what``), its result
another (``⎿ status: first line (+N lines)``); approval decisions get their label
(``✓ [approved]``, ``× [denied]``, ``× [forbidden by policy]``) when the call was asked
about or not allowed; retries, background reports, steering, compaction, the MCP connect phase
(``[mcp] connecting: …`` then ``[mcp] connected: …``) and the end of a run get a
short bracketed line; a subagent's work is indented with one ``│`` per level.

*Where* it goes is a :class:`Surface`. :class:`TextSurface` writes a plain text stream
(``penguin run``, ``penguin demo``, and ``penguin chat`` when stdout is not a terminal),
coloured only on a terminal that did not ask for ``NO_COLOR``. ``penguin chat`` on a
terminal has its own surface (``_screen.py``) that keeps the streaming answer and the
running calls in a live region under the prompt and prints the finished answer as
Markdown; the lines themselves are the ones this module words.

While a question waits for its answer (:meth:`Renderer.prompt` or
:meth:`Renderer.hold`), everything else is held back and shown after the answer, so the
question stays where the person types.

Sans-IO apart from the surface: tests feed the renderer messages and read a
``StringIO``. :func:`history_lines` (a resumed session's past, compactly) and
:class:`TaskStats` (the line after each chat task) are plain functions of messages too.
"""

from __future__ import annotations

import difflib
import json
import os
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final, Literal, Protocol, TextIO, TypeAlias, final

import attrs

from penguin import protocol as om
from penguin.approval import verdict_label

__all__ = [
    "MCP_PREFIX",
    "PREVIEW_ARGUMENTS",
    "PREVIEW_CONTENT_LINES",
    "PREVIEW_DIFF_LINES",
    "PREVIEW_VALUE_CHARS",
    "CallKey",
    "Renderer",
    "Style",
    "Surface",
    "TaskStats",
    "TextSurface",
    "call_preview",
    "call_summary",
    "decision_verdict",
    "diff_style",
    "harness_note",
    "history_lines",
    "mcp_connected_line",
    "paint",
    "sanitize",
    "shorten",
    "use_color",
]

Style: TypeAlias = Literal["", "call", "ok", "error", "warn", "note", "dim"]
"""What a piece of the view is, for the surface to colour: a call, a success, a failure..."""

CallKey: TypeAlias = tuple[tuple[str, ...], str]
"""A tool call across sessions: the origin (subagent session ids) and the call id."""

_SGR: Final[dict[Style, str]] = {
    "call": "36",
    "ok": "32",
    "error": "31",
    "warn": "33",
    "note": "35",
    "dim": "2",
}
_SUMMARY_WIDTH: Final = 100
_NEST: Final = "  │ "
_STEERING: Final = ("[user_steering]", "[/user_steering]")
_DIFF_TOOLS: Final = frozenset({"edit_file", "write_file"})
_SUMMARY: Final = "[context_summary]"
_SUMMARY_END: Final = "[/context_summary]"


def diff_style(line: str) -> Style:
    """How a diff line is coloured: removed red, added green, headers dim, context plain."""
    if line.startswith("+") and not line.startswith("+++"):
        return "ok"
    if line.startswith("-") and not line.startswith("---"):
        return "error"
    if line.startswith(("@@", "---", "+++")):
        return "dim"
    return ""


def use_color(out: TextIO) -> bool:
    """Colour for ``out``: only on a terminal, and not when ``NO_COLOR`` is set."""
    try:
        return out.isatty() and not os.environ.get("NO_COLOR")
    except ValueError:  # a closed stream
        return False


def paint(text: str, style: Style, color: bool) -> str:
    """``text`` in ``style``'s ANSI colour when ``color``, else unchanged."""
    code = _SGR.get(style) if color else None
    return f"\x1b[{code}m{text}\x1b[0m" if code else text


_CONTROL: Final[dict[int, str]] = {
    code: "\ufffd"
    for code in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))
    if code != 0x0D
}
_CONTROL[0x0D] = ""


def sanitize(text: str) -> str:
    r"""``text`` without the control characters a terminal would act on, shown as ``�``.

    Newline and tab stay; a carriage return goes. A model's text, a call's arguments and
    a tool's output are not to move the cursor, erase a line or recolour the screen: an
    approval question drawn after ``ESC [2K`` or ``\r`` would show what the text chose.
    C1 controls (U+0080 to U+009F) go too: some terminals read U+009B as a CSI.
    """
    return text.translate(_CONTROL)


def shorten(text: str, width: int = _SUMMARY_WIDTH) -> str:
    """``text`` on one line (runs of white space made one space), cut to ``width`` with ``…``."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def call_summary(call: om.ToolCallPayload) -> str:
    """``name: what it does`` — the call's ``description`` argument, else its arguments."""
    try:
        args = json.loads(call.arguments)
    except ValueError:
        args = None
    if isinstance(args, dict):
        description = args.get("description")
        detail = next(
            (
                str(args[key])
                for key in ("cmd", "file_path", "process_id", "source", "prompt", "chars")
                if isinstance(args.get(key), str)
            ),
            None,
        )
        if isinstance(description, str) and description.strip():
            shown = description.strip() + (f" ({detail})" if detail else "")
        else:
            shown = detail if detail is not None else json.dumps(args, ensure_ascii=False)
    else:
        shown = call.arguments
    return f"{call.name}: {shorten(shown)}"


def call_preview(
    call: om.ToolCallPayload, workspace: Path | None = None, width: int = 100
) -> list[tuple[str, Style]]:
    """What a question about ``call`` shows under its ``●`` line (chat.md C5.3).

    ``edit_file``: the change as a diff (removed lines red, added green, at most
    :data:`PREVIEW_DIFF_LINES` lines, then ``(+N lines)``); ``write_file``: whether
    it creates or overwrites the file (looked up under ``workspace``), then the first
    lines of the content; ``exec_command``: the whole command, wrapped at ``width``
    and never cut; an MCP server's tool: every argument on a line of its own (see
    :func:`_arguments_preview`). Other calls: nothing. Reads at most one ``stat``.
    """
    try:
        args = json.loads(call.arguments)
    except ValueError:
        return []
    if not isinstance(args, dict):
        return []
    if call.name == "edit_file":
        return _edit_preview(args)
    if call.name == "write_file":
        return _write_preview(args, workspace)
    if call.name == "exec_command" and isinstance(args.get("cmd"), str):
        lines: list[tuple[str, Style]] = []
        room = max(width - 6, 20)
        for index, command_line in enumerate(args["cmd"].split("\n")):
            pieces = textwrap.wrap(
                command_line,
                room,
                break_long_words=True,
                break_on_hyphens=False,
                drop_whitespace=False,
            ) or [""]
            for number, piece in enumerate(pieces):
                lead = "  $ " if index == 0 and number == 0 else "    "
                lines.append((lead + piece, ""))
        return lines
    if call.name.startswith(MCP_PREFIX):
        return _arguments_preview(args, width)
    return []


MCP_PREFIX: Final = "mcp__"
"""How an MCP server's tools are named: ``mcp__<server>__<tool>`` (spec/mcp.md)."""
PREVIEW_VALUE_CHARS: Final = 300
"""The most characters of one argument's value an MCP call's question shows."""
PREVIEW_ARGUMENTS: Final = 40
"""The most arguments an MCP call's question lists before ``(+N more arguments)``."""
PREVIEW_DIFF_LINES: Final = 40
"""The most diff lines an edit_file question shows before ``(+N lines)``."""
PREVIEW_CONTENT_LINES: Final = 12
"""The most lines of new content a write_file question shows before ``(+N lines)``."""


def _capped(lines: list[tuple[str, Style]], cap: int) -> list[tuple[str, Style]]:
    if len(lines) <= cap:
        return lines
    return [*lines[:cap], (f"    (+{len(lines) - cap} lines)", "dim")]


def _edit_preview(args: dict[str, Any]) -> list[tuple[str, Style]]:
    old, new = args.get("old_string"), args.get("new_string")
    if not isinstance(old, str) or not isinstance(new, str):
        return []
    diff = list(difflib.unified_diff(old.split("\n"), new.split("\n"), lineterm="", n=3))[
        2:
    ]  # no ---/+++ header: both sides are the call's own strings
    lines: list[tuple[str, Style]] = []
    if args.get("replace_all") is True:
        lines.append(("    (every occurrence)", "dim"))
    for diff_line in diff:
        if diff_line.startswith("@@"):
            if lines:
                lines.append(("    …", "dim"))
            continue
        lines.append((f"    {diff_line}", diff_style(diff_line)))
    return _capped(lines, PREVIEW_DIFF_LINES)


def _write_preview(args: dict[str, Any], workspace: Path | None) -> list[tuple[str, Style]]:
    path, content = args.get("file_path"), args.get("content")
    if not isinstance(path, str) or not isinstance(content, str):
        return []
    target = Path(path).expanduser()
    if workspace is not None and not target.is_absolute():
        target = workspace / target
    try:
        size = target.stat().st_size
        what = f"    overwrites {path} ({size:,} bytes now)"
        style: Style = "warn"
    except OSError:
        what, style = f"    creates {path}", "dim"
    body = content.split("\n")
    if body and body[-1] == "":
        body.pop()
    lines: list[tuple[str, Style]] = [(f"    + {line}", "ok") for line in body]
    return [(what, style), *_capped(lines, PREVIEW_CONTENT_LINES)]


def _arguments_preview(args: dict[str, Any], width: int) -> list[tuple[str, Style]]:
    """An MCP call's arguments, one per line, so that nothing it asks for is off screen.

    The call's one-line summary is cut at the terminal's width, and a tool of an MCP
    server may take anything: what follows the cut (a flag after a long text) would be
    approved unseen. Every argument but ``description`` gets ``name: value``, wrapped at
    ``width``; a value is its text (a string) or its JSON, cut after
    :data:`PREVIEW_VALUE_CHARS` characters with ``… (+N chars)``, so a long value
    cannot push the next argument away. More than :data:`PREVIEW_ARGUMENTS` arguments
    end with ``(+N more arguments)``.
    """
    shown = [(name, value) for name, value in args.items() if name != "description"]
    room = max(width - 8, 20)
    lines: list[tuple[str, Style]] = []
    for name, value in shown[:PREVIEW_ARGUMENTS]:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if len(text) > PREVIEW_VALUE_CHARS:
            text = f"{text[:PREVIEW_VALUE_CHARS]}… (+{len(text) - PREVIEW_VALUE_CHARS:,} chars)"
        first, *rest = textwrap.wrap(
            f"{name}: {text}",
            room,
            break_long_words=True,
            break_on_hyphens=False,
            drop_whitespace=False,
        ) or [f"{name}:"]
        lines.append((f"    {first}", ""))
        lines.extend((f"      {piece}", "") for piece in rest)
    if len(shown) > PREVIEW_ARGUMENTS:
        lines.append((f"    (+{len(shown) - PREVIEW_ARGUMENTS} more arguments)", "dim"))
    return lines


def mcp_connected_line(payload: om.McpConnectEndPayload) -> str:
    """``[mcp] connected: a (3 tools), b failed: REASON`` (spec/mcp.md M3.1)."""
    if payload.status == "aborted":
        return "[mcp] connecting interrupted"
    parts = []
    for result in payload.results:
        if result.status == "completed":
            count = result.tools or 0
            parts.append(f"{result.server} ({count} tool{'s' if count != 1 else ''})")
        else:
            parts.append(f"{result.server} failed: {result.error}")
    return "[mcp] connected: " + ", ".join(parts)


def decision_verdict(payload: om.ApprovalDecisionPayload) -> om.ApprovalVerdict:
    """What an ``approval_decision`` record says was decided.

    A command-policy denial is ``forbidden`` whether the record says so in its
    ``decision`` or, as older traces do, by naming the ``policy_rule`` of a ``deny``.
    """
    decision: str = payload.decision
    if decision == "forbidden" or payload.policy_rule:
        return "forbidden"
    return "allow" if decision == "allow" else "deny"


class Surface(Protocol):
    """Where a :class:`Renderer`'s view goes; every method is called from one task."""

    def stream(self, text: str, style: Style) -> None:
        """A streamed piece: answer text (style ``""``), or verbose thinking and tool output."""
        ...

    def line(self, text: str, style: Style) -> None:
        """One whole line, starting on a fresh line."""
        ...

    def answer(self, text: str) -> None:
        """The answer streamed so far is complete, and this is its whole text."""
        ...

    def question(self, text: str) -> None:
        """A question on a fresh line, the cursor left after it (text surfaces only)."""
        ...

    def answered(self, line: str | None, *, echo: bool) -> None:
        """The question was answered with ``line`` (``None``: end of input or Ctrl-C)."""
        ...

    def call_started(self, key: CallKey, label: str) -> None:
        """The call ``key`` runs now (for a live indicator; a text stream ignores it)."""
        ...

    def call_ended(self, key: CallKey) -> None:
        """The call ``key`` has its output."""
        ...

    def end(self) -> None:
        """The view of a run is over: end on a fresh line."""
        ...


@final
class TextSurface:
    """A plain text stream: what ``penguin run`` and ``penguin demo`` print."""

    def __init__(self, out: TextIO, *, color: bool | None = None) -> None:
        self.out = out
        self.color = use_color(out) if color is None else color
        self._at_line_start = True

    def _write(self, text: str) -> None:
        if text:
            self._at_line_start = text.endswith("\n")
            self.out.write(text)
            self.out.flush()

    def stream(self, text: str, style: Style) -> None:
        """Write ``text`` as it is (coloured by ``style``), control characters made inert."""
        self._write(paint(sanitize(text), style, self.color))

    def line(self, text: str, style: Style) -> None:
        """One whole line, starting on a fresh line (control characters made inert)."""
        if not self._at_line_start:
            self._write("\n")
        self._write(paint(sanitize(text), style, self.color) + "\n")

    def answer(self, text: str) -> None:
        """Nothing more to show: the text was streamed as it came."""

    def question(self, text: str) -> None:
        """The question on a line of its own; what follows starts after the answer's line."""
        if not self._at_line_start:
            self._write("\n")
        self._write(text)
        self._at_line_start = True

    def answered(self, line: str | None, *, echo: bool) -> None:
        """End the question's line.

        On a terminal the person's own Enter ended it; with ``echo`` (input that is not
        a terminal) the answer is written out, so a log shows what was answered.
        """
        if echo and line:
            self._write(sanitize(line.rstrip("\r\n")) + "\n")
        elif line is None or not line.endswith("\n"):
            self._write("\n")
        self._at_line_start = True

    def call_started(self, key: CallKey, label: str) -> None:
        """No live indicator in a text stream."""

    def call_ended(self, key: CallKey) -> None:
        """No live indicator in a text stream."""

    def end(self) -> None:
        """End on a fresh line."""
        if not self._at_line_start:
            self._write("\n")


@final
class Renderer:
    """Shows a run's messages on a :class:`Surface` (a :class:`TextSurface` on ``out``).

    ``verbose`` (a plain attribute: the chat's ``/verbose`` flips it) streams thinking
    and tool output in full.
    """

    def __init__(
        self,
        out: TextIO | None = None,
        *,
        color: bool | None = None,
        verbose: bool = False,
        surface: Surface | None = None,
    ) -> None:
        if surface is None:
            if out is None:
                raise TypeError("Renderer needs a text stream or a surface")
            surface = TextSurface(out, color=color)
        self.surface = surface
        self.verbose = verbose
        self._thinking_open = False
        self._shown_calls: set[CallKey] = set()
        self._asked: set[CallKey] = set()
        self._decided: dict[CallKey, om.ApprovalVerdict] = {}
        """Verdicts shown with their answer (:meth:`decided`), not shown again."""
        self._labels: dict[CallKey, str] = {}
        self._names: dict[CallKey, str] = {}
        self._diff_partial: dict[CallKey, str] = {}
        self._tail: CallKey | None = None
        """The call whose ``●`` line or decision is the last line shown, if it is one."""
        self._last_call: CallKey | None = None
        """The call the last call line, decision or result shown was about."""
        self._held: list[Callable[[], None]] | None = None
        """Output that arrived while a question waits, shown after its answer."""

    # ------------------------------------------------------------------ output helpers

    def _do(self, action: Callable[[], None]) -> None:
        if self._held is not None:
            self._held.append(action)
        else:
            action()

    def _stream(self, text: str, style: Style = "") -> None:
        if text:
            self._do(lambda: self._shown(None, self.surface.stream, text, style))

    def line(self, text: str, style: Style = "", *, call: CallKey | None = None) -> None:
        """One whole line, starting on a fresh line (``call``: the call the line is about)."""
        self._do(lambda: self._shown(call, self.surface.line, text, style))

    def _shown(
        self, call: CallKey | None, show: Callable[[str, Style], None], text: str, style: Style
    ) -> None:
        show(text, style)
        self._tail = call
        if call is not None:
            self._last_call = call

    def hold(self) -> None:
        """Hold back what is rendered from now on, until :meth:`release`."""
        if self._held is None:
            self._held = []

    def release(self) -> None:
        """Show what was held back, in order, and stop holding."""
        held, self._held = self._held or [], None
        for action in held:
            action()

    def prompt(self, text: str) -> None:
        """A question on a line of its own, the cursor left after it.

        Until :meth:`answered`, whatever else is rendered (a subagent keeps working while
        its parent's prompt waits) is held back, so the question stays where the
        person types.
        """
        self._do(lambda: self.surface.question(text))
        self.hold()

    def answered(self, line: str | None, *, echo: bool, release: bool = True) -> None:
        """The prompt was answered with ``line`` (``None``: end of input, or Ctrl-C).

        ``release=False`` keeps holding the rest back, for :meth:`decided` to follow.
        """
        self.surface.answered(line, echo=echo)
        if release:
            self.release()

    def decided(
        self,
        origin: tuple[str, ...],
        tool_call_id: str,
        verdict: om.ApprovalVerdict,
        notes: Iterable[str] = (),
    ) -> None:
        """The person's verdict on a call, right under their answer, then what was held.

        The label (and ``notes``, e.g. what ``a`` allowed) comes before whatever arrived
        while the question waited, such as another call's result: a label drawn after
        that would seem to be about it. The session's ``approval_decision`` for the call
        then shows nothing more, unless it says something else.
        """
        key = (origin, tool_call_id)
        self._decided[key] = verdict
        held, self._held = self._held, None  # the label and notes first, past the hold
        self.verdict(verdict, origin, call=key)
        for note in notes:
            self.line(note, "note")
        self._held = held
        self.release()

    def mark_asked(self, origin: tuple[str, ...], tool_call_id: str) -> None:
        """The call was put to the person: its decision is shown whatever it is."""
        self._asked.add((origin, tool_call_id))

    def verdict(
        self,
        verdict: om.ApprovalVerdict,
        origin: tuple[str, ...] = (),
        *,
        rule: str | None = None,
        call: CallKey | None = None,
    ) -> None:
        """The label of an approval decision (indented for a subagent's call).

        A command-policy denial names its rule: ``× [forbidden by policy] rule: mkfs``.
        """
        named = f" rule: {rule}" if rule and verdict == "forbidden" else ""
        self.line(
            f"{_NEST * len(origin)}  {verdict_label(verdict)}{named}",
            "ok" if verdict == "allow" else "error",
            call=call,
        )

    def _call_line(self, origin: tuple[str, ...], call: om.ToolCallPayload) -> None:
        """A call's ``●`` line, once: an approval prompt may show it before the stream."""
        key = (origin, call.tool_call_id)
        if key not in self._shown_calls:
            self._shown_calls.add(key)
            summary = call_summary(call)
            self._labels[key] = summary
            self._names[key] = call.name
            self.line(f"{_NEST * len(origin)}● {summary}", "call", call=key)

    def question_header(
        self, call: om.OmniMessage[om.ToolCallPayload], preview: Iterable[tuple[str, Style]] = ()
    ) -> None:
        """What a question is about, right above it (chat.md C5.2, C5.3).

        The call's ``●`` line — drawn again unless it is the last line shown, so that no
        other call's line, question or result stands between it and its question —
        then the ``preview`` lines (a diff, the content to write, the whole command).
        """
        origin = call.origin or ()
        key = (origin, call.payload.tool_call_id)
        if key not in self._shown_calls:
            self._call_line(origin, call.payload)
        else:
            label = f"{_NEST * len(origin)}● {self._labels.get(key, call_summary(call.payload))}"

            def again() -> None:
                if self._tail != key:
                    self._shown(key, self.surface.line, label, "call")

            self._do(again)
        prefix = _NEST * len(origin)
        for text, style in preview:
            self.line(f"{prefix}{text}", style, call=key)

    def _decision(self, origin: tuple[str, ...], payload: om.ApprovalDecisionPayload) -> None:
        key = (origin, payload.tool_call_id)
        verdict = decision_verdict(payload)
        shown = self._decided.pop(key, None)
        if (key in self._asked or verdict != "allow") and verdict != shown:
            self.verdict(verdict, origin, rule=payload.policy_rule, call=key)
        if verdict == "allow":
            label = f"{_NEST * len(origin)}{self._labels.get(key, payload.tool_call_id)}"
            self._do(lambda: self.surface.call_started(key, label))

    def _output_ended(self, origin: tuple[str, ...], tool_call_id: str) -> None:
        key = (origin, tool_call_id)
        self._do(lambda: self.surface.call_ended(key))

    # ------------------------------------------------------------------ messages

    def show(self, message: om.OmniMessage[om.Payload]) -> None:
        """Render one message of the stream (messages of subagents are indented)."""
        payload = message.payload
        if message.origin:
            self._show_nested(message)
            return
        match payload:
            case om.PartialTextPayload(event_type="delta", text=text):
                self._thinking_open = False
                self._stream(text)
            case om.TextPayload(role="assistant", text=text):
                self._do(lambda: self._shown(None, lambda t, _: self.surface.answer(t), text, ""))
            case om.PartialThinkingPayload(event_type=event, thinking=text):
                if self.verbose and event == "delta":
                    self._stream(text, "dim")
                elif event == "start" and not self.verbose:
                    self.line("· thinking…", "dim")
            case om.ToolCallPayload() if payload.stop_reason in (None, "completed"):
                self._call_line((), payload)
            case om.ApprovalDecisionPayload():
                self._decision((), payload)
            case om.ToolCallOutputPayload():
                self._flush_diff(((), payload.tool_call_id))
                self._show_output(payload)
                self._output_ended((), payload.tool_call_id)
            case om.PartialToolCallOutputPayload(event_type="delta", output=text) if self.verbose:
                key = ((), payload.tool_call_id)
                if self._names.get(key) in _DIFF_TOOLS:
                    self._stream_diff(key, text)
                else:
                    self._stream(text, "dim")
            case om.RequestEndPayload(status=status) if status not in ("completed", "aborted"):
                self._show_failure(payload)
            case om.AbortPayload():
                self.line("[interrupted]", "warn")
            case om.TextPayload(role="user", sender="harness", text=text):
                self.line(f"[{harness_note(text)}]", "note")
            case om.TextPayload(role="user", text=text) if text.startswith(_STEERING[0]):
                self.line(f"[steering] {shorten(_unwrap_steering(text))}", "note")
            case om.CompactionBeginPayload(reason=reason, mode=mode):
                self.line(f"[compacting the context ({reason}, {mode})…]", "dim")
            case om.CompactionEndPayload(status=status):
                self.line(f"[compaction {status}]", "dim")
            case om.McpConnectBeginPayload(servers=servers):
                self.line(f"[mcp] connecting: {', '.join(servers)}", "dim")
            case om.McpConnectEndPayload(status=status):
                self.line(mcp_connected_line(payload), "dim" if status == "completed" else "warn")
            case _:
                pass

    def _show_output(self, payload: om.ToolCallOutputPayload) -> None:
        key: CallKey = ((), payload.tool_call_id)
        lines = payload.output.strip("\n").split("\n")
        more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
        status = payload.stop_reason or "completed"
        style: Style = "ok" if status == "completed" else "error"

        def show() -> None:
            # Named when another call's line, decision or result came since its own
            # line (results of parallel calls interleaving, C5.2).
            name = "" if self._last_call == key else self._result_name(key)
            text = f"  ⎿ {name}{status}: {shorten(lines[0], 80)}{more}"
            self._shown(key, self.surface.line, text, style)
            self._tail = None

        self._do(show)

    def _result_name(self, key: CallKey) -> str:
        label = self._labels.get(key)
        return f"[{shorten(label, 60)}] " if label else ""

    def _stream_diff(self, key: CallKey, text: str) -> None:
        """Verbose edit_file/write_file output: its diff lines in red and green."""
        data = self._diff_partial.pop(key, "") + text
        *complete, rest = data.split("\n")
        if rest:
            self._diff_partial[key] = rest
        for diff_line in complete:
            self.line(diff_line, diff_style(diff_line))

    def _flush_diff(self, key: CallKey) -> None:
        rest = self._diff_partial.pop(key, "")
        if rest:
            self.line(rest, diff_style(rest))

    def _show_failure(self, payload: om.RequestEndPayload) -> None:
        detail = f": {payload.error_message}" if payload.error_message else ""
        if payload.retry_in_ms is not None:
            seconds = payload.retry_in_ms / 1000
            self.line(
                f"[model request {payload.status}{detail}; "
                f"retry {payload.attempt} in {seconds:g}s]",
                "warn",
            )
        else:
            self.line(f"[model request {payload.status}{detail}]", "error")

    def _show_nested(self, message: om.OmniMessage[om.Payload]) -> None:
        payload = message.payload
        origin = message.origin or ()
        prefix = _NEST * len(origin)
        if isinstance(payload, om.ToolCallPayload):
            self._call_line(origin, payload)
        elif isinstance(payload, om.ApprovalDecisionPayload):
            self._decision(origin, payload)
        elif isinstance(payload, om.ToolCallOutputPayload):
            first = payload.output.strip("\n").split("\n")[0]
            self.line(f"{prefix}  ⎿ {payload.stop_reason or 'completed'}: {shorten(first, 70)}")
            self._output_ended(origin, payload.tool_call_id)
        elif isinstance(payload, om.TextPayload) and payload.role == "assistant":
            for text_line in payload.text.strip().split("\n"):
                self.line(f"{prefix}{text_line}")

    def finish(self) -> None:
        """End the view on a fresh line."""
        self._do(self.surface.end)


# ---------------------------------------------------------------------- a session's past


def history_lines(
    records: Iterable[om.OmniMessage[om.Payload]],
) -> list[tuple[str, Style]]:
    """A session's conversation, compactly: what ``penguin chat --resume`` shows first.

    One line per user message (``› first line``), per tool call (``● name: what``) and
    per answer (its first line), and the outcomes a person would want to know of: a
    call denied or forbidden (``× [denied]``, with the policy's rule), a run
    interrupted (``[interrupted]``). Subagents' records, harness notes, thinking and
    other events are left out.
    """
    shown: list[tuple[str, Style]] = []
    for record in records:
        payload = record.payload
        if record.origin:
            continue
        if isinstance(payload, om.TextPayload) and payload.role == "user":
            if payload.sender == "harness":
                continue
            text = _unwrap_steering(payload.text)
            more = text.strip().count("\n")
            suffix = f" (+{more} lines)" if more else ""
            shown.append((f"› {shorten(_first_line(text), 96)}{suffix}", "dim"))
        elif isinstance(payload, om.TextPayload) and payload.role == "assistant":
            if payload.text.strip():
                shown.append((shorten(_first_line(payload.text), 100), ""))
        elif isinstance(payload, om.ToolCallPayload):
            shown.append((f"● {call_summary(payload)}", "call"))
        elif isinstance(payload, om.ApprovalDecisionPayload):
            verdict = decision_verdict(payload)
            if verdict != "allow":
                rule = payload.policy_rule if verdict == "forbidden" else None
                named = f" rule: {rule}" if rule else ""
                shown.append((f"  {verdict_label(verdict)}{named}", "error"))
        elif isinstance(payload, om.AbortPayload):
            shown.append(("[interrupted]", "warn"))
    return shown


def harness_note(text: str) -> str:
    """One line for a note the harness gave the model (shown in brackets).

    A compacted context's summary reads ``context summary: FIRST LINE`` rather than
    its marker (``[context_summary]``); any other note shows its first line.
    """
    if text.startswith(_SUMMARY):
        body = text.removeprefix(_SUMMARY).strip("\n").removesuffix(_SUMMARY_END).strip()
        return f"context summary: {shorten(_first_line(body), 90)}"
    return shorten(text.split("\n\n", 1)[-1].split("\n", 1)[0])


def _unwrap_steering(text: str) -> str:
    """The steering text a ``[user_steering]`` block carries (any other text as it is)."""
    start, end = _STEERING
    if text.startswith(start):
        text = text.removeprefix(start).strip("\n").removesuffix(end).strip("\n")
    return text


def _first_line(text: str) -> str:
    stripped = text.strip()
    return stripped.split("\n", 1)[0] if stripped else ""


# ---------------------------------------------------------------------- the stats line


@final
@attrs.define
class TaskStats:
    """The token counts and times of one task, fed its ``token_usage`` messages.

    :meth:`line` is the dim line ``penguin chat`` prints after each task: the task's
    tokens (input, output, cached), the context's size after its last request against
    the model's window when that is known, and the wall time.
    """

    context_window: int | None = None
    input: int = 0
    output: int = 0
    cached: int = 0
    context: int | None = None

    def observe(self, message: om.OmniMessage[om.Payload]) -> None:
        """Count a ``token_usage`` of the session itself (not of its subagents)."""
        payload = message.payload
        if isinstance(payload, om.TokenUsagePayload) and not message.origin:
            request = payload.request
            self.input += max(request.total - request.output, 0)
            self.output += request.output
            self.cached += request.cache_read
            if request.total:
                self.context = request.total

    def line(self, seconds: float) -> str:
        """``tokens 1,200 in · 30 out · 0 cached · context 1,230 of 128,000 (1%) · 2.4s``."""
        parts = [f"tokens {self.input:,} in · {self.output:,} out · {self.cached:,} cached"]
        if self.context is not None:
            if self.context_window:
                share = 100 * self.context / self.context_window
                parts.append(f"context {self.context:,} of {self.context_window:,} ({share:.0f}%)")
            else:
                parts.append(f"context {self.context:,}")
        parts.append(f"{seconds:.1f}s")
        return " · ".join(parts)
