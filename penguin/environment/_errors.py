"""The Environment's exceptions.

::

    Exception
     ├── ValueError
     │    └── WorkspaceError          the workspace is missing or not a directory
     └── RuntimeError
          └── EnvironmentClosedError  a call was started after the Environment closed

Nothing a *tool call* does raises: those outcomes are messages with a
``stop_reason``. These exceptions are about using the Environment itself wrongly.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["EnvironmentClosedError", "WorkspaceError"]


class WorkspaceError(ValueError):
    """The workspace directory does not exist or is not a directory."""

    def __init__(self, message: str, *, path: Path) -> None:
        super().__init__(message)
        self.path = path


class EnvironmentClosedError(RuntimeError):
    """The Environment's ``async with`` block has ended; open a new one."""
