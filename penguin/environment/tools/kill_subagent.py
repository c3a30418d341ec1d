"""The kill_subagent tool (reference 3.10): stop a registered subagent and remove it.

The completion report is disarmed first (a killed background subagent sends none).
A running round is aborted (its queued approvals denied), the child session is
closed once that round has ended — when the call returns, nothing the child started
is still running — and the text it produced that was not delivered yet is handed
over. The child's own trace keeps the work it did.
"""

from __future__ import annotations

from typing import Any, final

import trio

from .._contract import ToolContext, ToolResult
from ._subagent_tool import SubagentTool

__all__ = ["KillSubagentTool"]


@final
class KillSubagentTool(SubagentTool):
    """kill_subagent: abort the subagent's round, release its session, remove it."""

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """Kill one registered subagent."""
        subagents = self._supervisor("kill_subagent")
        subagent_id, session = self._registered(subagents, args, "kill_subagent")
        await trio.lowlevel.checkpoint_if_cancelled()  # an interrupted call kills nothing
        subagents.disarm_report(session)
        was_running = session.running
        await subagents.remove(session)
        if session.text:
            await ctx.emit(session.text.drain())
        if was_running:
            return ToolResult(
                note=(
                    f"[subagent {subagent_id} aborted and removed; "
                    "its own trace keeps the work done so far]"
                )
            )
        return ToolResult(note=f"[subagent {subagent_id} was idle; session removed]")
