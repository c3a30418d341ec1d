"""What run_subagent, input_subagent and kill_subagent share: the supervisor, lookups, notes.

The three tools speak about the same child sessions: the "unavailable" failure when
the Environment has no subagent supervisor, the ``subagent_id`` checks of the two that
drive a registered subagent, the approval hint (reference 3.8.5, 3.9.3) and the result of a
finished round (3.8.4). Each tool prints its fixed name (3.1.3).
"""

from __future__ import annotations

from typing import Any

from .._contract import ToolResult
from ..supervisor import RoundExit, SubagentSession, SubagentSupervisor
from ._args import fail, required_string
from ._base import BuiltinTool

__all__ = ["SubagentTool", "approval_hint", "exit_result"]


def approval_hint(session: SubagentSession) -> str:
    """`` [subagent is waiting for approval of n tool call(s); poll to review]``, or ``""``."""
    n = session.pending_approvals
    if n <= 0:
        return ""
    return f" [subagent is waiting for approval of {n} tool call(s); poll to review]"


def exit_result(exit_: RoundExit | None) -> ToolResult:
    """The call's end for a finished round: its status, and its note if any."""
    if exit_ is None:
        return ToolResult()
    return ToolResult(stop_reason=exit_.status, note=exit_.note)


class SubagentTool(BuiltinTool):
    """Base of the subagent tools: the supervisor, the session lookup."""

    def _supervisor(self, label: str) -> SubagentSupervisor:
        """The Environment's subagent supervisor; without one a tool called ``label`` fails."""
        subagents = self.supervisors.subagents
        if subagents is None:
            fail(f"[{label} unavailable: no subagent session manager configured]")
        return subagents

    def _registered(
        self, subagents: SubagentSupervisor, args: dict[str, Any], label: str
    ) -> tuple[str, SubagentSession]:
        """The session ``args["subagent_id"]`` names; else the failure (3.9.1, 3.10.1)."""
        subagent_id = required_string(args, "subagent_id")
        if subagent_id is None:
            fail(f'Missing required argument "subagent_id" for {label}.')
        session = subagents.get(subagent_id)
        if session is None:
            fail(
                f"[{label} error: unknown subagent_id {subagent_id} "
                "(the session may have finished and been cleared)]"
            )
        return subagent_id, session
