"""What exec_command, input_command and kill_command share: the supervisor and lookups.

The three tools speak about the same sessions with the same first sentences: the
"unavailable" failure when the Environment has no command supervisor, and, for the
two that drive an existing command, the ``process_id`` checks. Each tool keeps its own
name in those texts (reference 3.1.3: exec_command prints its configured name, the other
two their fixed names).
"""

from __future__ import annotations

from typing import Any

from penguin.config import ToolDefinitionConfig

from .._contract import ToolContext, ToolResult, ToolServices
from ..supervisor import CommandSession, CommandSupervisor
from ._args import fail, required_string

__all__ = ["CommandTool"]


class CommandTool:
    """Base of the command tools: construction, the supervisor, the session lookup."""

    def __init__(self, definition: ToolDefinitionConfig, services: ToolServices) -> None:
        """Build the tool; ``services.commands`` is the Environment's supervisor."""
        self.definition = definition
        self.name = definition.name
        self._commands: CommandSupervisor | None = services.commands

    async def _supervisor(self, ctx: ToolContext, label: str) -> CommandSupervisor | ToolResult:
        """The supervisor, or the failure a tool called ``label`` reports without one."""
        if self._commands is None:
            return await fail(ctx, f"[{label} unavailable: no command session manager configured]")
        return self._commands

    async def _registered(
        self, commands: CommandSupervisor, args: dict[str, Any], ctx: ToolContext, label: str
    ) -> tuple[str, CommandSession] | ToolResult:
        """The session ``args["process_id"]`` names, or the failure (3.3.1, 3.4.1)."""
        process_id = required_string(args, "process_id")
        if process_id is None:
            return await fail(ctx, f'Missing required argument "process_id" for {label}.')
        session = commands.get(process_id)
        if session is None:
            return await fail(
                ctx,
                f"[{label} error: unknown process_id {process_id} "
                "(the session may have exited and been cleared)]",
            )
        return process_id, session
