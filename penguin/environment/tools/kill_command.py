"""The kill_command tool (reference 3.4): end a background command and remove its session.

The completion report is disarmed first (a killed command sends none), then the
whole process tree is ended and waited for — when the call returns, nothing the
command started is still running — and the output not delivered yet, including
what the command wrote while it was being stopped, is handed over.
"""

from __future__ import annotations

from typing import Any, final

import trio

from .._contract import ToolContext, ToolResult
from ..supervisor import ExitStatus
from ._command_tool import CommandTool

__all__ = ["KillCommandTool"]


@final
class KillCommandTool(CommandTool):
    """kill_command: SIGTERM the group, SIGKILL after a grace period, remove the session."""

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """Kill one registered command."""
        commands = self._supervisor("kill_command")
        process_id, session = self._registered(commands, args, "kill_command")
        await trio.lowlevel.checkpoint_if_cancelled()  # an interrupted call kills nothing
        commands.disarm_report(session)
        was_running = session.running
        # Kill first, then hand over the output: what the command wrote until it was
        # gone (during the grace period too) is all in the buffer by then.
        await commands.remove(session)
        if session.buffer:
            await ctx.emit(session.buffer.drain())
        if was_running:
            return ToolResult(
                note=(
                    f"[process {process_id} killed "
                    "(SIGTERM to the process group, SIGKILL after a grace period)]"
                )
            )
        status = (session.exit_status or ExitStatus()).describe()
        return ToolResult(
            note=f"[process {process_id} had already exited ({status}); session removed]"
        )
