r"""The result record (spec B1.2) and the bookkeeping of a results file (B1.3).

Sans-IO: :class:`BatchResult` and its JSON line, reading the ids a results file
already holds (for ``--resume``), and the mapping from how a run ended to a task's
status. Writing the file is :mod:`._output`'s job.

A result line is one JSON object, keys in the spec's order, ending in ``\n``; it is
what :meth:`BatchResult.line` returns and what one ``write(2)`` appends.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, final, get_args

import attrs

__all__ = [
    "BATCH_STATUSES",
    "BatchResult",
    "BatchStatus",
    "TokenTotals",
    "recorded_ids",
    "recorded_statuses",
    "status_of_run",
]

BatchStatus: TypeAlias = Literal[
    "completed", "failed", "timeout", "auth", "max_turns", "aborted", "error"
]
"""How a task ended; ``error`` is penguin itself failing to run it (``error`` says why)."""

BATCH_STATUSES: Final[tuple[BatchStatus, ...]] = get_args(BatchStatus)

_RUN_STATUS: Final[Mapping[str, BatchStatus]] = {
    "completed": "completed",
    "failed": "failed",
    "malformed": "failed",  # a broken model stream is the model failing
    "timeout": "timeout",
    "auth": "auth",
    "max_turns": "max_turns",
    "aborted": "aborted",
}


def status_of_run(run_status: str) -> BatchStatus:
    """The task status for an engine run status (``malformed`` reads as ``failed``)."""
    return _RUN_STATUS.get(run_status, "failed")


@final
@attrs.frozen(kw_only=True)
class TokenTotals:
    """The tokens one task used over all its requests; ``cached`` is part of ``input``."""

    input: int = 0
    output: int = 0
    cached: int = 0


@final
@attrs.frozen(kw_only=True)
class BatchResult:
    """One task's result, as a line of the results file (spec B1.2).

    ``session_id``, ``trace_path`` and ``workspace`` are None when penguin could not
    open a session for the task (``status: "error"``). ``trace_path`` is where the
    trace is on the machine that ran the task. ``wall_s`` counts from the moment
    the task got its slot (waiting for one is not its time).
    """

    id: str
    status: BatchStatus
    session_id: str | None = None
    trace_path: str | None = None
    workspace: str | None = None
    turns: int = 0
    tokens: TokenTotals = TokenTotals()
    tool_calls: int = 0
    wall_s: float = 0.0
    final_text: str | None = None
    error: str | None = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The result as its JSON object, keys in the spec's order."""
        return {
            "id": self.id,
            "status": self.status,
            "session_id": self.session_id,
            "trace_path": self.trace_path,
            "workspace": self.workspace,
            "turns": self.turns,
            "tokens": {
                "input": self.tokens.input,
                "output": self.tokens.output,
                "cached": self.tokens.cached,
            },
            "tool_calls": self.tool_calls,
            "wall_s": round(self.wall_s, 3),
            "final_text": self.final_text,
            "error": self.error,
            "metadata": dict(self.metadata),
        }

    def line(self) -> bytes:
        """The result as one line of the results file, newline included."""
        text = json.dumps(self.to_json(), ensure_ascii=False, separators=(", ", ": "))
        return text.encode("utf-8") + b"\n"

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> BatchResult:
        """A result from its JSON object (what :meth:`to_json` made)."""
        tokens = obj.get("tokens") or {}
        status = obj["status"]
        if status not in BATCH_STATUSES:
            raise ValueError(f"unknown status {status!r}")
        return cls(
            id=str(obj["id"]),
            status=status,
            session_id=obj.get("session_id"),
            trace_path=obj.get("trace_path"),
            workspace=obj.get("workspace"),
            turns=int(obj.get("turns", 0)),
            tokens=TokenTotals(
                input=int(tokens.get("input", 0)),
                output=int(tokens.get("output", 0)),
                cached=int(tokens.get("cached", 0)),
            ),
            tool_calls=int(obj.get("tool_calls", 0)),
            wall_s=float(obj.get("wall_s", 0.0)),
            final_text=obj.get("final_text"),
            error=obj.get("error"),
            metadata=obj.get("metadata") or {},
        )

    @classmethod
    def from_line(cls, line: str | bytes) -> BatchResult:
        """A result from one line of a results file; ``ValueError`` when it is not one."""
        obj = json.loads(line)
        if not isinstance(obj, dict):
            raise ValueError("a result line is a JSON object")
        return cls.from_json(obj)

    @property
    def trace_file(self) -> Path | None:
        """:attr:`trace_path` as a path."""
        return None if self.trace_path is None else Path(self.trace_path)


def recorded_ids(lines: Iterable[str | bytes]) -> tuple[set[str], list[int]]:
    """The task ids a results file's lines hold, and the numbers of lines that hold none.

    A line that is not a JSON object with a string ``id`` (a line torn by a crash,
    say) counts as no result: its task runs again on ``--resume``.
    """
    statuses, unreadable = recorded_statuses(lines)
    return set(statuses), unreadable


def recorded_statuses(lines: Iterable[str | bytes]) -> tuple[dict[str, str | None], list[int]]:
    """Each id's status on its last line (the last line wins); lines that hold no result.

    The status is None when that line's ``status`` is not a string. Lines that hold no
    result are those :func:`recorded_ids` skips.
    """
    statuses: dict[str, str | None] = {}
    unreadable: list[int] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            unreadable.append(number)
            continue
        task_id = obj.get("id") if isinstance(obj, dict) else None
        if isinstance(task_id, str):
            status = obj.get("status")
            statuses[task_id] = status if isinstance(status, str) else None
        else:
            unreadable.append(number)
    return statuses, unreadable
