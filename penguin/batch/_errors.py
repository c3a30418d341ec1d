"""The batch package's exceptions.

::

    PenguinError                  the root of every penguin exception (penguin._errors)
     ├── TaskFileError            (also ValueError) a line of a task file is not a valid task
     ├── BatchOptionError         (also ValueError) the batch cannot run with these options
     └── BackendUnavailableError  (also RuntimeError) the chosen backend cannot be used here

They are raised before any task runs: once a batch is running, whatever goes wrong
with one task is that task's result (``status: "error"`` and a reason), and the batch
goes on.
"""

from __future__ import annotations

from pathlib import Path

from penguin._errors import PenguinError

__all__ = ["BackendUnavailableError", "BatchOptionError", "TaskFileError"]


class TaskFileError(PenguinError, ValueError):
    """Line ``line`` (1-based) of the task file ``path`` is not a valid task.

    ``reason`` says what is wrong with it; the message is ``path:line: reason``, the
    form editors and ``grep -n`` use, so the line is one click away. ``path`` is None
    for tasks that came from Python rather than a file (then ``line`` counts them).
    """

    def __init__(self, path: Path | None, line: int, reason: str) -> None:
        where = f"{path}:{line}" if path is not None else f"task {line}"
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


class BatchOptionError(PenguinError, ValueError):
    """An option the batch cannot run with; ``option`` names it, the message says why.

    ``value`` is the value given, when the message is about one.
    """

    def __init__(self, option: str, message: str, value: object = None) -> None:
        super().__init__(message)
        self.option = option
        self.value = value


class BackendUnavailableError(PenguinError, RuntimeError):
    """The backend ``backend`` cannot be used here; the message says how to get it."""

    def __init__(self, backend: str, message: str) -> None:
        super().__init__(message)
        self.backend = backend
