"""What run_subagent, input_subagent and kill_subagent share: the supervisor, lookups, notes.

The three tools speak about the same child sessions: the "unavailable" failure when
the Environment has no subagent supervisor, the ``subagent_id`` checks of the two that
drive a registered subagent, the approval hint (reference 3.8.5, 3.9.3) and the result of a
finished round (3.8.4). Each tool prints its fixed name (3.1.3).
"""

from __future__ import annotations

from typing import Any

from penguin.config import ToolDefinitionConfig

from .._contract import ToolContext, ToolResult, ToolServices
from ..supervisor import RoundExit, SubagentSession, SubagentSupervisor
from ._args import fail, required_string

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


class SubagentTool:
    """Base of the subagent tools: construction, the supervisor, the session lookup."""

    def __init__(self, definition: ToolDefinitionConfig, services: ToolServices) -> None:
        """Build the tool; ``services.subagents`` is the Environment's supervisor."""
        self.definition = definition
        self.name = definition.name
        self._subagents: SubagentSupervisor | None = services.subagents
        self._services = services

    async def _supervisor(self, ctx: ToolContext, label: str) -> SubagentSupervisor | ToolResult:
        """The supervisor, or the failure a tool called ``label`` reports without one."""
        if self._subagents is None:
            return await fail(ctx, f"[{label} unavailable: no subagent session manager configured]")
        return self._subagents

    async def _registered(
        self, subagents: SubagentSupervisor, args: dict[str, Any], ctx: ToolContext, label: str
    ) -> tuple[str, SubagentSession] | ToolResult:
        """The session ``args["subagent_id"]`` names, or the failure (3.9.1, 3.10.1)."""
        subagent_id = required_string(args, "subagent_id")
        if subagent_id is None:
            return await fail(ctx, f'Missing required argument "subagent_id" for {label}.')
        session = subagents.get(subagent_id)
        if session is None:
            return await fail(
                ctx,
                f"[{label} error: unknown subagent_id {subagent_id} "
                "(the session may have finished and been cleared)]",
            )
        return subagent_id, session
