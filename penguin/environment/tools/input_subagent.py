"""The input_subagent tool (reference 3.9): poll a registered subagent, or give it a new round.

A blank (or absent) ``prompt`` polls: what the child produced since it was last seen
is delivered first (buffered messages forwarded, its text as this call's output),
then new output for up to ``yield_time_ms`` (default 10 s). A non-blank prompt on an
idle subagent starts a new round on the same child session, which keeps its
context (default window 300 s); on a running one it is refused. The child's pending
approvals are asked through this call's approver while the window is open.

An interrupt of this call never kills the subagent (kill_subagent does).
"""

from __future__ import annotations

from typing import Any, Final, final

import trio

from .._contract import ToolContext, ToolResult
from .._errors import SubagentSpawnError
from ._args import clamp_yield_time_ms, fail
from ._subagent_tool import SubagentTool, approval_hint

__all__ = ["POLL_YIELD_MS", "PROMPT_YIELD_MS", "InputSubagentTool"]

PROMPT_YIELD_MS: Final = 300_000
POLL_YIELD_MS: Final = 10_000


@final
class InputSubagentTool(SubagentTool):
    """input_subagent: collect a subagent's progress or send it a follow-up prompt."""

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """Start a round if asked, then collect for one window."""
        subagents = self._supervisor("input_subagent")
        subagent_id, session = self._registered(subagents, args, "input_subagent")
        prompt = args.get("prompt")
        prompt = prompt if isinstance(prompt, str) and prompt.strip() else None
        if prompt is not None and session.running:
            fail(
                f"[input_subagent error: subagent {subagent_id} is still running; "
                "poll with an empty prompt to collect progress first]",
            )
        await trio.lowlevel.checkpoint_if_cancelled()  # an interrupted call starts nothing
        if prompt is not None:
            try:
                session.start_round(prompt)
            except SubagentSpawnError as exc:
                fail(f"[input_subagent error: {exc}]")
        window = clamp_yield_time_ms(
            args.get("yield_time_ms"),
            PROMPT_YIELD_MS if prompt is not None else POLL_YIELD_MS,
            ctx.definition.timeout_ms,
        )
        finished = await subagents.collect(
            session, window / 1000, ctx.emit, ctx.forward, ctx.approve
        )
        if not finished:
            return ToolResult(
                note=f"[subagent still running with subagent_id {subagent_id}]"
                + approval_hint(session)
            )
        exit_ = session.exit
        idle = (
            f"[subagent idle with subagent_id {subagent_id}; send a follow-up prompt to continue]"
        )
        if exit_ is None:
            return ToolResult(note=idle)
        note = f"{exit_.note} {idle}" if exit_.note else idle
        return ToolResult(stop_reason=exit_.status, note=note)
