"""The marker blocks the engine writes into the model's input, spelled in one place.

A marker is a paired square-bracket block, ``[tag]`` newline body newline ``[/tag]``:

- ``[turn_aborted]`` — the user interrupted a turn whose output was incomplete; the
  block transcribes what the model had produced (thinking, text, tool calls and the
  results of calls that ran), so the next run continues instead of starting over.
- ``[turn_retried]`` — a request failed on its own (timeout, disconnect, malformed
  response, provider error) and is being sent again; same transcript, same rule.
- ``[user_steering]`` — a user message sent while a run was live.
- ``[context_summary]`` — the first input of a context that replaced a compacted
  one; the model writes its summary inside ``[summary]…[/summary]``.

Transcript lines are indented two spaces and use inner tags: ``[thinking]``,
``[text]``, ``[tool_call name="…" id="…"]`` (arguments), ``[tool_call_output id="…"
status="…"]`` (output). The spelling follows the PenguinHarness markers, so models
prompted for one harness read the other's transcripts the same way.

Nothing here has I/O; the system prompt explains the markers to the model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

from penguin import protocol as om

__all__ = [
    "CONTEXT_SUMMARY",
    "TURN_ABORTED",
    "TURN_RETRIED",
    "USER_STEERING",
    "context_summary_text",
    "extract_summary",
    "marker_block",
    "steering_text",
    "transcript_lines",
    "turn_block",
]

TURN_ABORTED: Final = "turn_aborted"
TURN_RETRIED: Final = "turn_retried"
USER_STEERING: Final = "user_steering"
CONTEXT_SUMMARY: Final = "context_summary"

_SUMMARY_PATTERNS: Final = (
    re.compile(r"\[summary\]([\s\S]*?)\[/summary\]"),
    re.compile(r"<summary>([\s\S]*?)</summary>"),
)


def marker_block(tag: str, body: str) -> str:
    """``[tag]``, newline, ``body``, newline, ``[/tag]``."""
    return f"[{tag}]\n{body}\n[/{tag}]"


def steering_text(text: str) -> str:
    """A steering message as the model reads it."""
    return marker_block(USER_STEERING, text)


def context_summary_text(summary: str) -> str:
    """The first input of a compacted context."""
    return marker_block(CONTEXT_SUMMARY, summary)


def extract_summary(raw: str) -> str:
    """The text inside ``[summary]…[/summary]`` (or the legacy ``<summary>``), else all of it."""
    for pattern in _SUMMARY_PATTERNS:
        match = pattern.search(raw)
        if match:
            return match.group(1).strip()
    return raw.strip()


def _line(tag: str, body: str, attributes: str = "") -> str:
    return f"  [{tag}{attributes}]{body}[/{tag}]"


def transcript_lines(
    produced: Sequence[om.OmniMessage[om.Payload]],
    outputs: dict[str, om.OmniMessage[om.ToolCallOutputPayload]],
) -> list[str]:
    """Transcribe one attempt: its messages in order, then the results of its calls.

    ``outputs`` maps tool call ids to complete outputs; a call without one is listed
    without a result (it never ran, or it was cut off).
    """
    lines: list[str] = []
    calls: list[str] = []
    for message in produced:
        payload = message.payload
        if isinstance(payload, om.ThinkingPayload) and payload.thinking:
            lines.append(_line("thinking", payload.thinking))
        elif isinstance(payload, om.TextPayload) and payload.text:
            lines.append(_line("text", payload.text))
        elif isinstance(payload, om.ToolCallPayload):
            attributes = f' name="{payload.name}" id="{payload.tool_call_id}"'
            lines.append(_line("tool_call", payload.arguments, attributes))
            calls.append(payload.tool_call_id)
    for call_id in calls:
        output = outputs.get(call_id)
        if output is not None:
            status = output.payload.stop_reason or "completed"
            attributes = f' id="{call_id}" status="{status}"'
            lines.append(_line("tool_call_output", output.payload.output, attributes))
    return lines


def turn_block(tag: str, lines: Iterable[str]) -> str:
    """A ``[turn_aborted]`` or ``[turn_retried]`` block around transcript lines."""
    return "\n".join([f"[{tag}]", *lines, f"[/{tag}]"])
