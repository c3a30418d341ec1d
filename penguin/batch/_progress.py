"""Progress arithmetic of a batch (spec B2.3): counts, tasks per minute, ETA, the words.

Sans-IO: :class:`BatchProgress` is told when tasks start and finish, with the time
(any monotonic clock, in seconds), and says what the progress line and the
per-task lines read. Drawing them on a terminal is the command line's job.

The rate is finished tasks over the time since the batch started, so it includes
the start-up and is steady rather than jumpy; the ETA is the tasks left at that
rate. While no task runs, a backend may say what it is doing (starting a local Ray
cluster, its workers, stopping them): the *phase*, shown at the end of the line.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Final, final

import attrs

from ._results import BatchResult

__all__ = ["BatchProgress", "format_duration"]

_BREAKS: Final = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_ESCAPES: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


@final
@attrs.define(kw_only=True)
class BatchProgress:
    """How far a batch of ``total`` tasks has got."""

    total: int
    started_at: float | None = None
    done: int = 0
    running: int = 0
    statuses: Counter[str] = attrs.field(factory=Counter)
    phase: str | None = None
    """What the batch is doing while no task runs (``starting 2 Ray workers``), or None.

    Set by the backend; the first task to start clears it."""

    @property
    def failed(self) -> int:
        """Finished tasks that neither completed nor were aborted."""
        return self.done - self.statuses["completed"] - self.statuses["aborted"]

    def start(self, now: float) -> None:
        """The batch started at ``now`` (the first call counts)."""
        if self.started_at is None:
            self.started_at = now

    def task_started(self, now: float) -> None:
        """A task got its slot."""
        self.start(now)
        self.running += 1
        self.phase = None

    def task_lost(self) -> None:
        """A started task was lost with its worker (it will start again, or fail)."""
        if self.running > 0:
            self.running -= 1

    def task_finished(self, result: BatchResult, now: float, *, was_running: bool = True) -> None:
        """A task ended with ``result`` (``was_running``: it had been counted as started)."""
        self.start(now)
        if was_running and self.running > 0:
            self.running -= 1
        self.done += 1
        self.statuses[result.status] += 1

    def per_minute(self, now: float) -> float | None:
        """Finished tasks per minute so far; None before the first one finished."""
        if self.started_at is None or self.done == 0:
            return None
        elapsed = now - self.started_at
        return None if elapsed <= 0 else self.done * 60.0 / elapsed

    def eta_s(self, now: float) -> float | None:
        """Seconds until the last task finishes at the rate so far; None when unknown."""
        rate = self.per_minute(now)
        if rate is None or rate <= 0:
            return None
        return max(0, self.total - self.done) * 60.0 / rate

    def line(self, now: float) -> str:
        """The live progress line: done/total, running, failed, tasks per minute, ETA.

        Then the phase, in parentheses, when there is one.
        """
        rate = self.per_minute(now)
        eta = self.eta_s(now)
        parts = [
            f"{self.done}/{self.total} done",
            f"{self.running} running",
            f"{self.failed} failed",
            "-- tasks/min" if rate is None else f"{rate:.1f} tasks/min",
            "ETA --" if eta is None else f"ETA {format_duration(eta)}",
        ]
        text = ", ".join(parts)
        return text if self.phase is None else f"{text} ({self.phase})"

    def finished_line(self, result: BatchResult, number: int | None = None) -> str:
        """The line a finished task gets when the output is not a terminal.

        ``number`` is the result's place in the output (default: the tasks done so
        far; results that arrive together are shown one by one after the count).
        """
        place = self.done if number is None else number
        head = (
            f"[{place}/{self.total}] {_one_line(result.id)} {result.status}"
            f" in {result.wall_s:.1f} s"
        )
        turns, calls = result.turns, result.tool_calls
        detail = (
            f"{turns} turn{'' if turns == 1 else 's'}, {calls} tool call{'' if calls == 1 else 's'}"
        )
        if result.error and result.status != "completed":
            detail += f"; {_one_line(result.error)}"
        return f"{head} ({detail})"

    def summary(self, now: float) -> str:
        """One closing line: how many tasks ended how, and how long it took."""
        took = 0.0 if self.started_at is None else now - self.started_at
        counts = ", ".join(f"{n} {status}" for status, n in sorted(self.statuses.items()))
        return f"{self.done}/{self.total} tasks in {format_duration(took)}" + (
            f": {counts}" if counts else ""
        )


def _one_line(text: str) -> str:
    r"""``text`` with its control characters escaped (``\n``, ``\x00``): one task, one line.

    An id or an error may hold a line break or a terminal escape; the per-task lines
    are read line by line (``grep``, a CI log), and a terminal must not act on them.
    """
    return _BREAKS.sub(lambda m: _ESCAPES.get(m[0]) or _escape(ord(m[0])), text)


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def format_duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h01m``: short, for a progress line."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _s(count: int) -> str:
    """The plural ending for ``count`` of something: ``1 turn``, ``2 turns``."""
    return "" if count == 1 else "s"
