"""How background work says it ended: the report, its channel, a command's exit status.

What this module owns, once for both supervisors:

- :class:`BackgroundReport`, the completion report of a background command or
  subagent round (reference 3.13), and its text for the model; :func:`report_label`
  and :func:`report_output` cut what goes into one (3.13.2);
- :class:`ReportChannel`, the one queue reports wait in until the host reads them. The
  Environment owns it and hands it to the command supervisor and the subagent
  supervisor; after :meth:`ReportChannel.close` nothing more is delivered (1.13);
- :class:`ExitStatus`, how a command's foreground process ended, and every wording of
  it: in a report's ``detail`` (:meth:`ExitStatus.describe`) and as the note that ends
  a tool call (:meth:`ExitStatus.note`).

Pure but for the memory channel: no process, no clock.
"""

from __future__ import annotations

import contextlib
import math
import signal
from typing import Final, Literal, final

import attrs
import trio

__all__ = [
    "REPORT_OUTPUT_LIMIT",
    "BackgroundReport",
    "ExitStatus",
    "ReportChannel",
    "report_label",
    "report_output",
]

REPORT_OUTPUT_LIMIT: Final = 4000
"""Characters of undelivered output a report keeps: the last ones (3.13.2)."""


@final
@attrs.frozen
class ExitStatus:
    """How a command's foreground process ended (or that it never started)."""

    code: int | None = None
    signal_name: str | None = None
    spawn_error: str | None = None

    @property
    def failed(self) -> bool:
        """A spawn error, a signal, or a non-zero exit code."""
        return self.spawn_error is not None or self.signal_name is not None or self.code != 0

    def describe(self) -> str:
        """``spawn error: …`` | ``terminated by signal SIG…`` | ``exit code N``."""
        if self.spawn_error is not None:
            return f"spawn error: {self.spawn_error}"
        if self.signal_name is not None:
            return f"terminated by signal {self.signal_name}"
        return f"exit code {self._code_text()}"

    def note(self) -> str | None:
        """The note a call that saw the exit ends with (3.2.8); ``None`` for exit code 0.

        ``[spawn error: …]`` | ``[terminated by signal SIG…]`` | ``[exit code: N]``.
        """
        if self.spawn_error is not None or self.signal_name is not None:
            return f"[{self.describe()}]"
        if self.code != 0:
            return f"[exit code: {self._code_text()}]"
        return None

    def _code_text(self) -> str:
        return "unknown" if self.code is None else str(self.code)

    @classmethod
    def from_returncode(cls, returncode: int | None) -> ExitStatus:
        """Decode a ``Popen``-style return code (negative = killed by a signal)."""
        if returncode is not None and returncode < 0:
            try:
                name = signal.Signals(-returncode).name
            except ValueError:
                name = f"signal {-returncode}"
            return cls(signal_name=name)
        return cls(code=returncode)


@final
@attrs.frozen
class BackgroundReport:
    """A background task finished (reference 3.13); ``text()`` is what the model reads."""

    kind: Literal["command", "subagent"]
    id: str
    label: str
    status: Literal["completed", "failed", "aborted"]
    detail: str
    output: str

    def text(self) -> str:
        """The harness message text of reference 3.13.3."""
        lines = [
            "[background_task_done]",
            "Automatic notification from the harness, not the user: "
            "a background task you started has finished.",
            f"kind: {self.kind}",
            f"id: {self.id}",
            f"status: {self.status}",
        ]
        if self.detail:
            lines.append(f"detail: {self.detail}")
        lines.append("[/background_task_done]")
        outcome = "finished" if self.status == "completed" else "failed"
        key = "process_id" if self.kind == "command" else "subagent_id"
        summary = f"Background {self.kind} {outcome}: `{self.label}` ({key} {self.id})"
        if self.detail:
            summary += f" — {self.detail}"
        text = "\n".join(lines) + "\n\n" + summary
        if self.output.strip():
            text += "\n\n" + self.output
        return text


def report_label(text: str) -> str:
    """The first line of a command or prompt, at most 120 chars (3.13.2)."""
    first = text.split("\n", 1)[0]
    return first if len(first) <= 120 else first[:119] + "…"


def report_output(text: str) -> str:
    """Undelivered output for a report, keeping the last 4000 chars (3.13.2)."""
    if len(text) <= REPORT_OUTPUT_LIMIT:
        return text
    return (
        f"[earlier output dropped: exceeded {REPORT_OUTPUT_LIMIT} chars]\n"
        + text[-REPORT_OUTPUT_LIMIT:]
    )


@final
class ReportChannel:
    """The queue of completion reports, in the order they were posted; unbounded.

    Reports wait in :attr:`receive` until read (a listener may attach late). Posting
    never blocks; once :meth:`close` ran, what waited is dropped and later posts are
    ignored, so no report outlives its owner (1.13).
    """

    def __init__(self) -> None:
        self._send, self.receive = trio.open_memory_channel[BackgroundReport](math.inf)
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran."""
        return self._closed

    def post(self, report: BackgroundReport) -> None:
        """Queue ``report``; dropped once the channel is closed."""
        if self._closed:
            return
        with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
            self._send.send_nowait(report)

    def take(self) -> list[BackgroundReport]:
        """Every report waiting right now, without blocking."""
        taken = []
        while True:
            try:
                taken.append(self.receive.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                return taken

    def close(self) -> None:
        """Deliver nothing more: drop what waits, ignore what comes (idempotent)."""
        self._closed = True
        self._send.close()
        self.take()
