"""The close-out of one tool call, sans I/O: output accounting, classification, final text.

This module decides everything about how a call's output looks — which part of each
delta is forwarded, whether the output was truncated, how the call ended and which
notes follow the output — without touching the event loop, a file or a clock. The
Environment (``_environment``) feeds it and sends what it returns.

Invariants it keeps (reference 1.7–1.9):

- only the first ``limit`` chars of the cumulative output are ever forwarded;
- the concatenation of every delta the Environment sends equals the complete output,
  as long as the Environment reports what it actually sent (:meth:`CallOutput.sent`);
- the output is never empty, and the terminal note is never cut;
- images are delivered only when the call ends ``completed``.
"""

from __future__ import annotations

from typing import Final, final

import attrs

from penguin.protocol import StopReason

from ._archive import OutputCapture

__all__ = [
    "NO_OUTPUT",
    "CallOutput",
    "Closing",
    "Outcome",
    "classify",
    "timeout_marker",
    "truncated_note",
]

NO_OUTPUT: Final = "[no output]"
INTERRUPTED: Final = "[interrupted: tool aborted by user]"


def timeout_marker(timeout_ms: int) -> str:
    """The note of a call that ran out of time."""
    return f"[tool timeout: exceeded {timeout_ms}ms]"


def truncated_note(limit: int) -> str:
    """The note of a call whose output went past the visible limit."""
    return f"[output truncated: exceeded {limit} chars]"


@final
@attrs.frozen(kw_only=True)
class Outcome:
    """What happened to the call, as observed by the Environment when it returned.

    ``interrupted`` is the caller's interrupt at the moment of classification;
    ``timed_out`` that the call's deadline fired; ``error`` the message of an
    exception the tool raised; ``self_report`` the stop reason the tool returned
    (or took from a complete message it forwarded).
    """

    interrupted: bool = False
    timed_out: bool = False
    error: str | None = None
    self_report: StopReason | None = None


def classify(outcome: Outcome, timeout_ms: int) -> tuple[StopReason, str | None]:
    """The final stop reason and terminal marker (reference 1.8c–e).

    Priority: user interrupt > timeout > tool raised > tool self-report. A tool that
    reports ``aborted`` because its timeout fired ends ``failed`` with the timeout
    marker; one that reports ``aborted`` on its own is an interrupted call.
    """
    if outcome.interrupted or (not outcome.timed_out and outcome.self_report == "aborted"):
        return "aborted", INTERRUPTED
    if outcome.timed_out:
        return "failed", timeout_marker(timeout_ms)
    if outcome.error is not None:
        return "failed", f"[tool error] {outcome.error}"
    return outcome.self_report or "completed", None


@final
@attrs.frozen(kw_only=True)
class Closing:
    """Everything the Environment sends after the tool returned.

    ``deltas`` are the remaining ``delta`` outputs in order (the compensation for
    output not yet sent, then the notes); ``images`` go in one empty delta just before
    ``stop`` when non-empty; ``output`` is the complete output.
    """

    stop_reason: StopReason
    output: str
    deltas: tuple[str, ...]
    images: tuple[str, ...]


@final
class CallOutput:
    """The output account of one call: what was produced, kept, forwarded, captured.

    Feed it with :meth:`accept` (a content delta) and :meth:`replace` (a complete
    output given by the tool), tell it what really reached the consumer with
    :meth:`sent`, and finish with :meth:`close`.
    """

    __slots__ = (
        "_archive",
        "_capture",
        "_compat",
        "_kept",
        "_kept_len",
        "_produced_len",
        "_sent_len",
        "limit",
    )

    def __init__(self, limit: int, *, archive: bool) -> None:
        self.limit = limit
        """Visible output cap in chars; zero or less disables it."""
        self._archive = archive
        self._kept: list[str] = []
        self._kept_len = 0
        self._produced_len = 0
        self._sent_len = 0
        self._compat: str | None = None
        self._capture: OutputCapture | None = None

    @property
    def capture(self) -> OutputCapture | None:
        """The archive capture, once the call went past its cap (archive enabled)."""
        return self._capture

    def accept(self, text: str) -> str:
        """Account for one delta; return the part of it to forward (maybe ``""``)."""
        if not text:
            return ""
        self._produced_len += len(text)
        visible = text
        if self.limit > 0:
            room = self.limit - self._kept_len
            if room < len(text):
                visible = text[:room] if room > 0 else ""
        if self._capture is not None:
            self._capture.append(text)
        elif self._archive and len(visible) < len(text):
            capture = OutputCapture()
            for part in self._kept:
                capture.append(part)
            capture.append(text)
            self._capture = capture
        if visible:
            self._kept.append(visible)
            self._kept_len += len(visible)
        return visible

    def replace(self, output: str) -> bool:
        """Take a complete output from the tool as the basis of the result (reference 1.7d).

        Refused (``False``) when what was already sent is not a prefix of it: the
        stream cannot take back what the consumer has seen, so the forwarded deltas
        stay the basis and the caller reports the ignored message.
        """
        capped = output[: self.limit] if self.limit > 0 else output
        if self._sent_len and not capped.startswith(self._sent_text()):
            return False
        self._compat = output
        if self._archive and (self._capture is not None or len(capped) < len(output)):
            if self._capture is None:
                self._capture = OutputCapture()
            self._capture.replace(output)
        return True

    def sent(self, text: str) -> None:
        """Record that ``text`` (a value :meth:`accept` returned) reached the consumer."""
        self._sent_len += len(text)

    def _sent_text(self) -> str:
        return "".join(self._kept)[: self._sent_len]

    def close(
        self,
        outcome: Outcome,
        *,
        timeout_ms: int,
        archive_note: str | None = None,
        note: str | None = None,
        images: tuple[str, ...] = (),
    ) -> Closing:
        """Finish the call (reference 1.8–1.9): stop reason, notes, remaining deltas.

        ``archive_note`` is the outcome of saving :attr:`capture`, which the caller
        does *after* :func:`classify` has frozen the outcome and before this call.
        """
        stop_reason, marker = classify(outcome, timeout_ms)
        if self._compat is not None and self._compat.startswith(self._sent_text()):
            base = self._compat
            capped = base[: self.limit] if self.limit > 0 else base
            truncated = len(capped) < len(base)
        else:
            capped = "".join(self._kept)
            truncated = self._produced_len > self._kept_len
        notes: list[str] = []
        if truncated:
            notes.append(truncated_note(self.limit))
        if archive_note:
            notes.append(archive_note)
        if note:
            notes.append(note)
        if marker:
            notes.append(marker)
        if not capped and not notes:
            notes.append(NO_OUTPUT)
        deltas: list[str] = []
        if len(capped) > self._sent_len:
            deltas.append(capped[self._sent_len :])
        output = capped
        if notes:
            joined = "\n".join(notes)
            tail = "\n" + joined if capped else joined
            deltas.append(tail)
            output += tail
        return Closing(
            stop_reason=stop_reason,
            output=output,
            deltas=tuple(deltas),
            images=images if stop_reason == "completed" else (),
        )
