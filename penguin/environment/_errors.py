"""The Environment's exceptions: the Environment itself, and its two supervisors.

::

    PenguinError                         the root of every penguin exception (penguin._errors)
     ├── WorkspaceError                  (also ValueError) the workspace is missing, not a
     │                                   directory, or cannot be read
     ├── EnvironmentClosedError          (also RuntimeError) a call was started after the
     │                                   Environment closed
     ├── SubagentSpawnError              a subagent did not start: a runner could not open a
     │    │                              child session, or a round could not start on one
     │    │                              (SubagentStartError is the same class)
     │    └── SubagentSupervisorClosedError   the subagent supervisor is closed
     ├── SpawnError                      a command could not be started
     │    └── SupervisorClosedError      the command supervisor is closed
     ├── DuplicateSessionError           (also ValueError) a session id was registered twice
     └── McpCallError                    an MCP request got no result (.text, .disconnected)

The image tools' failures (``ImageError`` and its five subclasses, one per way a load
fails) are PenguinErrors too; they live with the loader, in ``tools/_images.py``,
whose docstring draws them.

Nothing a *tool call* does raises: those outcomes are messages with a
``stop_reason``. ``EnvironmentClosedError`` and ``WorkspaceError`` are about using the
Environment itself wrongly. ``SubagentSpawnError`` is what a runner raises so that
run_subagent shows its message to the model (any exception does, this one says it
was meant for the model's eyes), and what the subagent supervisor raises for a round
it will not start; ``SpawnError`` is the same for a command. Both supervisors raise
their ``…ClosedError`` once the Environment is closing, and ``DuplicateSessionError``
is a bug in the caller of a registry, never something the model did. ``McpCallError``
never leaves the MCP tools: it becomes the call's ``[mcp error: …]`` output.
"""

from __future__ import annotations

from pathlib import Path
from typing import final

from penguin._errors import PenguinError

__all__ = [
    "DuplicateSessionError",
    "EnvironmentClosedError",
    "McpCallError",
    "SpawnError",
    "SubagentSpawnError",
    "SubagentStartError",
    "SubagentSupervisorClosedError",
    "SupervisorClosedError",
    "WorkspaceError",
]


@final
class WorkspaceError(PenguinError, ValueError):
    """The workspace directory does not exist, is not a directory, or cannot be read."""

    def __init__(self, message: str, *, path: Path) -> None:
        super().__init__(message)
        self.path = path


@final
class EnvironmentClosedError(PenguinError, RuntimeError):
    """The Environment's ``async with`` block has ended; open a new one."""


class SubagentSpawnError(PenguinError):
    """A subagent did not start; the message is shown to the model.

    A :class:`~penguin.environment.SubagentRunner` raises it when it will not or
    cannot open a child session, and the subagent supervisor when a round cannot
    start on a child (``subagent is still running``). run_subagent and
    input_subagent report it as ``[<tool> error: <message>]``, so the message says
    what happened and what to do instead (``subagent depth limit 1 reached; not
    spawning another subagent``). It is to subagents what :class:`SpawnError` is to
    commands.
    """


SubagentStartError = SubagentSpawnError
"""The same class as :class:`SubagentSpawnError`, under the name the supervisor used."""


@final
class SubagentSupervisorClosedError(SubagentSpawnError):
    """The supervisor is closed (disposed): nothing spawns or registers any more."""

    def __init__(self) -> None:
        super().__init__("subagent session manager disposed")


class SpawnError(PenguinError):
    """A command could not be started; the message is what the model is shown."""


@final
class SupervisorClosedError(SpawnError):
    """The supervisor is closed; no new command starts."""

    def __init__(self) -> None:
        super().__init__("command session manager disposed")


@final
class DuplicateSessionError(PenguinError, ValueError):
    """A session id was registered twice; ids are unique for the registry's lifetime."""

    def __init__(self, key: str) -> None:
        super().__init__(
            f"session {key!r} is already registered; remove it before registering it again"
        )
        self.key = key


@final
class McpCallError(PenguinError):
    """An MCP request got no result: ``text`` says why in one line.

    ``disconnected`` means the connection is gone (the server's next call reconnects
    once); otherwise the server or the SDK answered with an error.
    """

    def __init__(self, text: str, *, disconnected: bool) -> None:
        super().__init__(text)
        self.text = text
        self.disconnected = disconnected
