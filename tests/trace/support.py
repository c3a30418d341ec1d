"""Helpers shared by the trace tests: sample messages, raw file views, ordered submission."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Generic, TypeVar

import attrs
import trio

from penguin import protocol as om

T = TypeVar("T")

SESSION_ID = "session-2025-01-02-03-04-05-0a1b2c3d"


def meta(session_id: str = SESSION_ID) -> om.OmniMessage[om.SessionMetaPayload]:
    return om.session_meta(
        session_id=session_id,
        provider="openai",
        model_id="gpt-test",
        model_context_window=128000,
        system_prompt="You are a test.",
        agent_state="/tmp/agent_state",
        workspace="/tmp/workspace",
    )


def record_bytes(message: om.OmniMessage[om.Payload]) -> bytes:
    """What the writer must put in the file for ``message``: compact JSON and a newline."""
    return om.dumps(message).encode() + b"\n"


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def texts(messages: list[om.OmniMessage[om.Payload]]) -> list[str]:
    out = []
    for message in messages:
        assert isinstance(message.payload, om.TextPayload)
        out.append(message.payload.text)
    return out


@attrs.define
class Outcome(Generic[T]):
    """How one submitted operation ended."""

    value: T | None = None
    error: Exception | None = None
    done: bool = False


async def submit(nursery: trio.Nursery, operation: Callable[[], Awaitable[T]]) -> Outcome[T]:
    """Start ``operation`` in its own task and return once it has been *submitted*.

    ``nursery.start`` resumes this caller only after the child has run up to its first
    blocking point, which for a writer operation is its place in the writer's queue, so
    consecutive ``submit`` calls define the submission order exactly.
    """
    outcome: Outcome[T] = Outcome()

    async def run(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            outcome.value = await operation()
        except Exception as exc:
            outcome.error = exc
        outcome.done = True

    await nursery.start(run)
    return outcome


def lines_of(path: Path) -> list[bytes]:
    """The file split at ``\\n`` (the last element is what follows the last newline)."""
    return path.read_bytes().split(b"\n")
