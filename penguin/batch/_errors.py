"""The batch package's exceptions.

::

    PenguinError                  the root of every penguin exception (penguin._errors)
     ├── TaskFileError            (also ValueError) a line of a task file is not a valid task
     ├── BatchOptionError         (also ValueError) the batch cannot run with these options
     ├── BackendUnavailableError  (also RuntimeError) the chosen backend cannot be used here
     ├── ResultsWriteError        (also OSError) a result line could not be written whole
     ├── StorageFullError         (also OSError) a task found the disk full: the batch stops
     ├── ModelUnreachableError    (also RuntimeError) a task's model could not be reached
     └── ModelRateLimitedError    (also RuntimeError) a task's model kept answering 429

The first three are raised before any task runs: once a batch is running, whatever
goes wrong with one task is that task's result (``status: "error"`` and a reason), and
the batch goes on. A disk that stops taking what the batch writes stops it instead: the
results file's (:class:`ResultsWriteError`: a result that cannot be kept is not worth
running for), or the one a task's trace, session lock or workspace is on, full or over a
quota (:class:`StorageFullError`: every task after it would fail the same way, and a
final result for each would keep ``--resume`` from running them once there is room).
A model server that cannot be reached at all stops it for the same reason
(:class:`ModelUnreachableError`): its failure is not the task's; so does one that kept
refusing a request for its rate limit through every retry (:class:`ModelRateLimitedError`:
a limit of the account, which more tasks at once only make worse). :data:`BatchStop` is
any of those three (:data:`BATCH_STOPS` for an ``except``), and :func:`stop_to_wire` /
:func:`stop_from_wire` carry one from a worker process to the driver.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, TypeAlias, final

from penguin._errors import PenguinError

__all__ = [
    "BATCH_STOPS",
    "BackendUnavailableError",
    "BatchOptionError",
    "BatchStop",
    "ModelRateLimitedError",
    "ModelUnreachableError",
    "ResultsWriteError",
    "StorageFullError",
    "TaskFileError",
    "stop_from_wire",
    "stop_to_wire",
]


@final
class TaskFileError(PenguinError, ValueError):
    """Line ``line`` (1-based) of the task file ``path`` is not a valid task.

    ``reason`` says what is wrong with it; the message is ``path:line: reason``, the
    form editors and ``grep -n`` use, so the line is one click away. When more lines
    are bad, :attr:`problems` holds them all, in line order, and the message has one
    such line for each. ``path`` is None
    for tasks that came from Python rather than a file (then ``line`` counts them).
    """

    def __init__(self, path: Path | None, line: int, reason: str) -> None:
        where = f"{path}:{line}" if path is not None else f"task {line}"
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason
        self.problems: tuple[TaskFileError, ...] = (self,)
        """Every bad line of the file, in line order (this one first); the message is
        theirs, one line each."""

    def __str__(self) -> str:
        return "\n".join(str(problem.args[0]) for problem in self.problems)


@final
class BatchOptionError(PenguinError, ValueError):
    """An option the batch cannot run with; ``option`` names it, the message says why.

    ``value`` is the value given, when the message is about one.
    """

    def __init__(self, option: str, message: str, value: object = None) -> None:
        super().__init__(message)
        self.option = option
        self.value = value


@final
class BackendUnavailableError(PenguinError, RuntimeError):
    """The backend ``backend`` cannot be used here; the message says how to get it."""

    def __init__(self, backend: str, message: str) -> None:
        super().__init__(message)
        self.backend = backend


@final
class ResultsWriteError(PenguinError, OSError):
    """A result line could not be written to the results file ``path``; none of it is there.

    The message is ``cannot write results to ${path}: ${reason}`` (``reason`` is the
    system's: ``No space left on device``...). Its task has no result, so ``--resume``
    runs it again.
    """

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(f"cannot write results to {os.fspath(path)}: {reason}")
        self.path = os.fspath(path)
        self.reason = reason

    def __str__(self) -> str:
        return f"cannot write results to {self.path}: {self.reason}"


@final
class StorageFullError(PenguinError, OSError):
    """A task could not write to ``path``: its disk is full, or over a quota.

    The message is ``cannot write to ${path}: ${reason}`` (``reason`` is the system's:
    ``No space left on device``, ``Disk quota exceeded``); ``errno`` is the system's
    (``ENOSPC``, ``EDQUOT``). The batch stops on it: the task that found it and those
    still running get no result, so ``--resume`` runs them once there is room.
    """

    def __init__(self, path: str | os.PathLike[str], reason: str, errno: int | None = None) -> None:
        super().__init__(f"cannot write to {os.fspath(path)}: {reason}")
        self.path = os.fspath(path)
        self.reason = reason
        self.errno = errno

    def __str__(self) -> str:
        return f"cannot write to {self.path}: {self.reason}"

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.path, self.reason, self.errno))


@final
class ModelUnreachableError(PenguinError, RuntimeError):
    """A task's model server could not be reached at all, after the quick retries.

    Connection refused or an unknown host (not a slow or failing server: those are the
    task's ``timeout`` or ``failed``). The message is ``the model cannot be reached:
    ${reason}``, ``reason`` the request's (``cannot connect to
    http://127.0.0.1:8000/v1 (Connection refused)``). The batch stops on it: the task
    that met it and those still running get no result, so ``--resume`` runs them once
    the model is back.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"the model cannot be reached: {reason}")
        self.reason = reason

    def __str__(self) -> str:
        return f"the model cannot be reached: {self.reason}"

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.reason,))


@final
class ModelRateLimitedError(PenguinError, RuntimeError):
    """A task's model server kept refusing its request for a rate limit, through every retry.

    HTTP 429, the ``Retry-After`` waits included: a limit of the account or the server
    (requests or tokens a minute, a spent quota), not of the task, and one that every
    other task would meet too. The message is ``the model kept refusing for its rate
    limit: ${reason}``, ``reason`` the request's (``rate limited (429): Rate limit
    reached for requests``). The batch stops on it, as on an unreachable model: no
    task gets a result for it, and ``--resume`` runs them once the limit allows (a lower
    ``--concurrency`` asks less at once).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"the model kept refusing for its rate limit: {reason}")
        self.reason = reason

    def __str__(self) -> str:
        return f"the model kept refusing for its rate limit: {self.reason}"

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.reason,))


BatchStop: TypeAlias = StorageFullError | ModelUnreachableError | ModelRateLimitedError
"""What a task meets that stops the whole batch (the results file's own failure,
:class:`ResultsWriteError`, is met where the results are written instead)."""
BATCH_STOPS: Final = (StorageFullError, ModelUnreachableError, ModelRateLimitedError)
""":data:`BatchStop`'s classes, to catch."""


def stop_to_wire(stop: BatchStop) -> dict[str, Any]:
    """``stop`` as JSON values, for a worker process or a Ray actor to send to the driver."""
    if isinstance(stop, StorageFullError):
        return {"kind": "full", "path": stop.path, "reason": stop.reason, "errno": stop.errno}
    if isinstance(stop, ModelRateLimitedError):
        return {"kind": "rate_limited", "reason": stop.reason}
    return {"kind": "unreachable", "reason": stop.reason}


def stop_from_wire(wire: Mapping[str, Any]) -> BatchStop:
    """The exception :func:`stop_to_wire` gave ``wire`` for."""
    if wire["kind"] == "full":
        return StorageFullError(wire["path"], wire["reason"], wire["errno"])
    if wire["kind"] == "rate_limited":
        return ModelRateLimitedError(wire["reason"])
    return ModelUnreachableError(wire["reason"])
