"""What exec_command, input_command and kill_command share: the supervisor and lookups.

The three tools speak about the same sessions with the same first sentences: the
"unavailable" failure when the Environment has no command supervisor, and, for the
two that drive an existing command, the ``process_id`` checks. Each tool keeps its own
name in those texts (reference 3.1.3: exec_command prints its configured name, the other
two their fixed names).
"""

from __future__ import annotations

from typing import Any

from ..supervisor import CommandSession, CommandSupervisor
from ._args import fail, required_string
from ._base import BuiltinTool

__all__ = ["CommandTool"]


class CommandTool(BuiltinTool):
    """Base of the command tools: the supervisor, the session lookup."""

    def _supervisor(self, label: str) -> CommandSupervisor:
        """The Environment's command supervisor; without one a tool called ``label`` fails."""
        commands = self.supervisors.commands
        if commands is None:
            fail(f"[{label} unavailable: no command session manager configured]")
        return commands

    def _registered(
        self, commands: CommandSupervisor, args: dict[str, Any], label: str
    ) -> tuple[str, CommandSession]:
        """The session ``args["process_id"]`` names; else the failure (3.3.1, 3.4.1)."""
        process_id = required_string(args, "process_id")
        if process_id is None:
            fail(f'Missing required argument "process_id" for {label}.')
        session = commands.get(process_id)
        if session is None:
            fail(
                f"[{label} error: unknown process_id {process_id} "
                "(the session may have exited and been cleared)]"
            )
        return process_id, session
