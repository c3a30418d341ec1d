"""The run_subagent tool (reference 3.8): hand a task to a child session, in the foreground first.

The child is opened by the injected :class:`~penguin.environment.SubagentRunner` (this
module never imports the engine or the agent layer): a whole session of its own, with
its own trace, in the parent's workspace. Its ``session_meta`` flows out of this
call's stream once, origin-tagged, so the parent's trace records a pointer to it.

In the foreground, the child's messages are forwarded as they come (origin-tagged)
and the direct child's text is mirrored as this call's own output, for up to
``yield_time_ms``. A child that finishes in the window is released and the call ends
with its outcome; one still running is registered under a ``subagent_id`` for
input_subagent and kill_subagent. An interrupt (or the timeout) during the window
kills the child. With ``run_in_background: true`` the child is registered at once, its
approvals go to this call's approver (a standing sink), its messages go live to the
host (``Environment.subagent_messages``) and every round ends with a completion report.

Everything about the child's lifetime is the supervisor's; this module checks the
arguments in the order of 3.8.1 and speaks the tool's language.
"""

from __future__ import annotations

import json
from typing import Any, Final, final

import trio

from penguin._concurrency import error_text

from .._contract import SubagentRequest, ToolContext, ToolResult
from ..supervisor import SubagentSession, SubagentSupervisor, report_label
from ._args import clamp_yield_time_ms, fail
from ._subagent_tool import SubagentTool, approval_hint, exit_result

__all__ = ["DEFAULT_YIELD_MS", "THINKING_LEVELS", "RunSubagentTool"]

DEFAULT_YIELD_MS: Final = 300_000
THINKING_LEVELS: Final = ("low", "medium", "high", "xhigh", "max")
"""The thinking levels a subagent may be given (the same as ``penguin.llm.THINKING_LEVELS``)."""


def _json_text(value: object) -> str:
    """``JSON.stringify`` of a parsed argument: compact, and ``1.0`` written ``1``."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _optional_string(args: dict[str, Any], key: str) -> str | None:
    value = args.get(key)
    return value if isinstance(value, str) else None


@final
class RunSubagentTool(SubagentTool):
    """run_subagent: start a child session on ``prompt``; see the module docstring."""

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """Validate (3.8.1), spawn, then collect for one window or launch in the background."""
        runner = self.services.subagent_runner
        if runner is None:
            fail("[run_subagent unavailable: no subagent runner configured]")
        subagents = self.supervisors.subagents
        if subagents is None or subagents.closed:
            fail("[run_subagent unavailable: no subagent session manager available]")
        prompt = args.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            fail("[run_subagent error: missing required string argument `prompt`]")
        model_id = _optional_string(args, "model_id")
        provider = _optional_string(args, "provider")
        if (model_id is None) != (provider is None):
            fail(
                "[run_subagent error: `model_id` and `provider` must be given together "
                "(a model reference is the pair), or both omitted to inherit the parent "
                "session's model]",
            )
        level = args.get("thinking_level")
        if level is not None and level not in THINKING_LEVELS:
            fail(
                f"[run_subagent error: invalid `thinking_level` {_json_text(level)}; use one "
                f"of {' / '.join(THINKING_LEVELS)}, or omit it to inherit the parent "
                "session's level]",
            )
        background = args.get("run_in_background") is True
        window = clamp_yield_time_ms(
            args.get("yield_time_ms"), DEFAULT_YIELD_MS, ctx.definition.timeout_ms
        )
        await trio.lowlevel.checkpoint_if_cancelled()  # an interrupted call spawns nothing
        if subagents.spawn_limit_reached:  # checked first: no eviction for nothing
            limit = subagents.spawn_limit
            fail(
                f"[run_subagent error: this session has already spawned {limit} subagents "
                "(the limit); finish the task with the ones you have]",
            )
        if not subagents.make_room():
            fail(
                "[run_subagent error: too many background subagents; "
                "poll or finish existing ones first]",
            )
        request = SubagentRequest(
            agent_id=_optional_string(args, "agent_id"),
            model_id=model_id,
            provider=provider,
            thinking_level=level if isinstance(level, str) else None,
        )
        try:
            session = await subagents.spawn(runner, request)
        except Exception as exc:
            fail(f"[run_subagent error: {error_text(exc)}]")
        try:
            await ctx.forward(session.session_meta)  # the parent trace's pointer (7.7)
            if background:
                return self._launch(subagents, session, prompt, ctx)
            session.start_round(prompt)
            finished = await subagents.collect(
                session, window / 1000, ctx.emit, ctx.forward, ctx.approve
            )
        except BaseException:
            subagents.kill(session)  # interrupt or timeout in the window: the child goes (3.8.6)
            raise
        if finished:
            subagents.kill(session)  # never registered: released now
            return exit_result(session.exit)
        try:
            subagent_id = subagents.register(session)
        except Exception as exc:  # disposed meanwhile
            fail(f"[run_subagent error: {error_text(exc)}]")
        return ToolResult(
            note=(
                f"[subagent running with subagent_id {subagent_id}; use input_subagent to poll "
                "for progress or send a follow-up prompt]" + approval_hint(session)
            )
        )

    def _launch(
        self, subagents: SubagentSupervisor, session: SubagentSession, prompt: str, ctx: ToolContext
    ) -> ToolResult:
        subagent_id = subagents.launch_in_background(
            session, prompt, report_label(prompt), ctx.approve
        )
        return ToolResult(
            note=(
                f"[subagent running in background with subagent_id {subagent_id}; its "
                "completion will arrive as a user message — no need to poll. Use "
                "input_subagent to interact or kill_subagent to stop it]"
            )
        )
