"""Rendering a run's message stream for a terminal, one line of view per tool call.

The assistant's text streams as it arrives; thinking shows as a one-line marker
(streamed in full with ``verbose``); each tool call is one line (``● name: what``),
its result another (``⎿ status: first line``); retries, denials, background reports,
steering, the MCP connect phase (``[mcp] connecting: …`` then ``[mcp] connected: …``)
and the end of the run get a short bracketed line. Colour is used only on
a terminal that did not ask for ``NO_COLOR``.

Sans-IO apart from writing to the given text streams: the same renderer serves
``penguin run`` and ``penguin demo``, and tests feed it messages directly.
"""

from __future__ import annotations

import json
import os
from typing import Final, TextIO

from penguin import protocol as om

__all__ = ["Renderer", "call_summary", "mcp_connected_line"]

_SUMMARY_WIDTH: Final = 100
_LABELS: Final = {
    "allow": "✓ [approved]",
    "deny": "× [denied]",
    "forbidden": "× [forbidden by policy]",
}


def _shorten(text: str, width: int = _SUMMARY_WIDTH) -> str:
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
    return f"{call.name}: {_shorten(shown)}"


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


class Renderer:
    """Writes a readable view of a run's messages to ``out``."""

    def __init__(self, out: TextIO, *, color: bool | None = None, verbose: bool = False) -> None:
        self.out = out
        self.verbose = verbose
        if color is None:
            color = out.isatty() and not os.environ.get("NO_COLOR")
        self._color = color
        self._at_line_start = True
        self._thinking_open = False
        self._shown_calls: set[tuple[tuple[str, ...], str]] = set()
        self._held: list[str] | None = None
        """Output that arrived while a prompt waits, shown after its answer."""

    # ------------------------------------------------------------------ output helpers

    def _paint(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self._color else text

    def _write(self, text: str) -> None:
        if not text:
            return
        self._at_line_start = text.endswith("\n")
        if self._held is not None:
            self._held.append(text)
            return
        self.out.write(text)
        self.out.flush()

    def line(self, text: str, code: str = "") -> None:
        """One whole line, starting on a fresh line."""
        if not self._at_line_start:
            self._write("\n")
        self._write((self._paint(text, code) if code else text) + "\n")

    def prompt(self, text: str) -> None:
        """A question on a line of its own, the cursor left after it.

        Until :meth:`answered`, whatever else is rendered (a subagent keeps working while
        its parent's prompt waits) is held back, so the question stays where the
        person types.
        """
        if not self._at_line_start:
            self._write("\n")
        self._write(text)
        self._held = []
        self._at_line_start = True  # held output starts on the line after the answer

    def answered(self, line: str | None, *, echo: bool) -> None:
        """The prompt was answered with ``line`` (``None``: end of input, or Ctrl-C).

        On a terminal the person's own Enter ended the line; with ``echo`` (input that
        is not a terminal) the answer is written out, so a log shows what was answered.
        """
        held, self._held = self._held or [], None
        if echo and line:
            self._write(line.rstrip("\r\n") + "\n")
        elif line is None or not line.endswith("\n"):
            self._write("\n")
        self._at_line_start = True
        self._write("".join(held))

    def verdict(self, verdict: om.ApprovalVerdict, origin: tuple[str, ...] = ()) -> None:
        """The label of an approval decision (indented for a subagent's call)."""
        prefix = "  │ " * len(origin)
        self.line(f"{prefix}  {_LABELS[verdict]}", "32" if verdict == "allow" else "31")

    def _call_line(self, origin: tuple[str, ...], call: om.ToolCallPayload) -> None:
        """A call's ``●`` line, once: an approval prompt may show it before the stream."""
        key = (origin, call.tool_call_id)
        if key not in self._shown_calls:
            self._shown_calls.add(key)
            self.line(f"{'  │ ' * len(origin)}● {call_summary(call)}", "36")

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
                self._write(text)
            case om.PartialThinkingPayload(event_type=event, thinking=text):
                if self.verbose and event == "delta":
                    self._write(self._paint(text, "2"))
                elif event == "start" and not self.verbose:
                    self.line("· thinking…", "2")
            case om.ToolCallPayload() if payload.stop_reason in (None, "completed"):
                self._call_line((), payload)
            case om.ToolCallOutputPayload():
                self._show_output(payload)
            case om.PartialToolCallOutputPayload(event_type="delta", output=text) if self.verbose:
                self._write(self._paint(text, "2"))
            case om.RequestEndPayload(status=status) if status not in ("completed", "aborted"):
                self._show_failure(payload)
            case om.AbortPayload():
                self.line("[interrupted]", "33")
            case om.TextPayload(role="user", sender="harness", text=text):
                first = text.split("\n\n", 1)[-1].split("\n", 1)[0]
                self.line(f"[{_shorten(first)}]", "35")
            case om.TextPayload(role="user", text=text) if text.startswith("[user_steering]"):
                self.line(f"[steering] {_shorten(text.removeprefix('[user_steering]'))}", "35")
            case om.CompactionBeginPayload(reason=reason, mode=mode):
                self.line(f"[compacting the context ({reason}, {mode})…]", "2")
            case om.CompactionEndPayload(status=status):
                self.line(f"[compaction {status}]", "2")
            case om.McpConnectBeginPayload(servers=servers):
                self.line(f"[mcp] connecting: {', '.join(servers)}", "2")
            case om.McpConnectEndPayload(status=status):
                self.line(mcp_connected_line(payload), "2" if status == "completed" else "33")
            case _:
                pass

    def _show_output(self, payload: om.ToolCallOutputPayload) -> None:
        lines = payload.output.strip("\n").split("\n")
        more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
        status = payload.stop_reason or "completed"
        code = "32" if status == "completed" else "31"
        self.line(f"  ⎿ {status}: {_shorten(lines[0], 80)}{more}", code)

    def _show_failure(self, payload: om.RequestEndPayload) -> None:
        detail = f": {payload.error_message}" if payload.error_message else ""
        if payload.retry_in_ms is not None:
            seconds = payload.retry_in_ms / 1000
            self.line(
                f"[model request {payload.status}{detail}; "
                f"retry {payload.attempt} in {seconds:g}s]",
                "33",
            )
        else:
            self.line(f"[model request {payload.status}{detail}]", "31")

    def _show_nested(self, message: om.OmniMessage[om.Payload]) -> None:
        payload = message.payload
        prefix = "  │ " * len(message.origin or ())
        if isinstance(payload, om.ToolCallPayload):
            self._call_line(message.origin or (), payload)
        elif isinstance(payload, om.ToolCallOutputPayload):
            first = payload.output.strip("\n").split("\n")[0]
            self.line(f"{prefix}  ⎿ {payload.stop_reason or 'completed'}: {_shorten(first, 70)}")
        elif isinstance(payload, om.TextPayload) and payload.role == "assistant":
            for text_line in payload.text.strip().split("\n"):
                self.line(f"{prefix}{text_line}")

    def finish(self) -> None:
        """End the view on a fresh line."""
        if not self._at_line_start:
            self._write("\n")
