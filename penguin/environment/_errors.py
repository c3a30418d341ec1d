"""The Environment's exceptions.

::

    Exception
     ├── ValueError
     │    └── WorkspaceError          the workspace is missing or not a directory
     ├── RuntimeError
     │    └── EnvironmentClosedError  a call was started after the Environment closed
     └── SubagentSpawnError           a SubagentRunner refuses or fails to open a child session

Nothing a *tool call* does raises: those outcomes are messages with a
``stop_reason``. ``EnvironmentClosedError`` and ``WorkspaceError`` are about using the
Environment itself wrongly; ``SubagentSpawnError`` is what a runner raises so that
run_subagent shows its message to the model (any exception does, this one says it
was meant for the model's eyes).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["EnvironmentClosedError", "SubagentSpawnError", "WorkspaceError"]


class WorkspaceError(ValueError):
    """The workspace directory does not exist or is not a directory."""

    def __init__(self, message: str, *, path: Path) -> None:
        super().__init__(message)
        self.path = path


class EnvironmentClosedError(RuntimeError):
    """The Environment's ``async with`` block has ended; open a new one."""


class SubagentSpawnError(Exception):
    """A child session was not opened; the message is shown to the model.

    run_subagent reports it as ``[run_subagent error: <message>]``, so the message
    says what happened and what to do instead (``subagent depth limit 1 reached;
    not spawning another subagent``).
    """
