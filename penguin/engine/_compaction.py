"""Compaction: when a model context is due for it, and how it is replaced.

This module owns the settings (:class:`CompactionSettings`, the default prompt), the
triggers (:func:`compaction_reason`) and one compaction from ``compaction_begin`` to
``compaction_end`` (:class:`Compaction`): in ``summarize`` mode it asks the model for
a summary, retried like a turn (:mod:`._reconnect`); in ``discard`` mode it writes a
note and the last calls' transcript instead. The new context opens with the
``[context_summary]`` user text, in a new trace file.

It does not decide when a compaction may run (the engine checks between turns and
exposes the manual one) and does not own the trace: it is handed the engine's record
function and the rotation. The invariant: a compaction that does not complete keeps
the old context, and the trace never stays inside one — a hard stop records
``compaction_end`` ``aborted``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeAlias, final

import attrs
import trio

from penguin import protocol as om
from penguin.llm import LLM, LLMOutcome, LLMRequest

from ._ledger import Ledger
from ._markers import context_summary_text, extract_summary, transcript_lines
from ._reconnect import ReconnectPolicy, end_request, usage_record, wait_to_retry
from ._stream import Outlet, RunResult

__all__ = ["DEFAULT_COMPACTION_PROMPT", "Compaction", "CompactionSettings", "compaction_reason"]

Message: TypeAlias = om.OmniMessage[om.Payload]

DEFAULT_COMPACTION_PROMPT: Final = """\
The conversation so far is about to be replaced by a summary, to free the context \
window. Write that summary now: the user's goal and every requirement they stated, \
what has been done (files created or changed, commands run and their outcomes, \
background processes still running with their process_id), what was learned, and \
exactly what remains to do next. Keep names, paths, numbers and error messages \
verbatim. Reply with text only, no tool calls, in exactly this format:

[summary]the summary[/summary]"""

_DISCARDED_NOTE: Final = (
    "The earlier conversation was discarded to free the context window; it is not "
    "available any more. Continue the task from what you can see now."
)


@final
@attrs.frozen(kw_only=True)
class CompactionSettings:
    """When and how a context is compacted between turns.

    ``max_context_length`` (tokens, the last request's total) and
    ``max_session_turns`` (turns of the current context) trigger it; zero or less
    disables a trigger. ``summarize`` asks the model for a summary that opens the
    new context; ``discard`` drops the old context.
    """

    max_context_length: int = 0
    max_session_turns: int = 0
    mode: om.CompactionMode = "summarize"
    prompt: str = DEFAULT_COMPACTION_PROMPT


def compaction_reason(
    settings: CompactionSettings | None, ledger: Ledger
) -> om.CompactionReason | None:
    """Which trigger says the context in ``ledger`` is due (``None``: not due)."""
    if settings is None or ledger.turns == 0:
        return None
    if 0 < settings.max_context_length <= ledger.last_request_total:
        return "context"
    if 0 < settings.max_session_turns <= ledger.turns:
        return "turns"
    return None


@final
@attrs.frozen
class _Summary:
    text: str | None = None
    status: om.StopReason = "failed"
    attempt: int = 1
    error_message: str | None = None
    unreachable: bool = False
    rate_limited: bool = False


@final
@attrs.frozen(kw_only=True)
class Compaction:
    """One compaction of the context in ``ledger``, with the engine's pieces it needs.

    ``emit`` streams and records, ``record`` records only (the ledger and the trace),
    ``rotate`` starts the new trace file (with its session meta and tool list). The
    summary request is the engine's own: its model, system prompt and tools.
    """

    llm: LLM
    ledger: Ledger
    system_prompt: str
    tools: tuple[om.ToolDefinition, ...]
    prompt: str
    reconnect: ReconnectPolicy
    emit: Outlet
    record: Callable[[Message], None]
    rotate: Callable[[], None]

    async def run(
        self, reason: om.CompactionReason, mode: om.CompactionMode, interrupt: trio.Event
    ) -> RunResult:
        """Replace the context; ``completed`` on success, else the context is kept.

        The result's ``unreachable`` (``rate_limited``) says a summary request found the
        model's server unreachable (kept refused for its rate limit), as a turn's does
        (``turns`` is left to the caller).
        """
        ledger, emit = self.ledger, self.emit
        await emit(om.compaction_begin(reason, mode, ledger.last_request_total, ledger.turns))
        ended = False
        try:
            if mode == "discard":
                # The last results would be lost with their calls: keep them as text.
                awaited = set(ledger.awaiting)
                calls = [
                    m
                    for m in ledger.history
                    if om.is_tool_call(m) and m.payload.tool_call_id in awaited
                ]
                lines = transcript_lines(calls, ledger.outputs)
                result = _Summary(text="\n".join([_DISCARDED_NOTE, *lines]), status="completed")
            else:
                result = await self._summarize(interrupt)
            if result.text is None:
                failed = om.compaction_end(
                    reason,
                    mode,
                    result.status,
                    attempt=result.attempt,
                    error_message=result.error_message,
                )
                await emit(failed)
                ended = True
                return RunResult(
                    status=result.status,
                    error_message=result.error_message,
                    unreachable=result.unreachable,
                    rate_limited=result.rate_limited,
                )
            # The new context exists once these are recorded, whether or not the
            # stream still takes them: record first, then stream.
            self.rotate()
            closing = om.compaction_end(reason, mode, "completed", attempt=result.attempt)
            summary = om.user_text(context_summary_text(result.text), harness=True)
            self.record(closing)
            ended = True
            # The new file carries the session's counters: a resume reads only it.
            self.record(om.token_usage(ledger.session_tokens, om.TokenCounts()))
            self.record(summary)
            await emit.stream_only(closing)
            await emit.stream_only(summary)
            return RunResult(status="completed")
        finally:
            if not ended:  # a hard stop: the trace must not stay inside the compaction
                self.record(om.compaction_end(reason, mode, "aborted"))

    async def _summarize(self, interrupt: trio.Event) -> _Summary:
        """Ask the model for a summary, retrying like a turn; the text, or why not.

        The summary's fragments are streamed; its complete messages and request
        events are trace-only records (the ledger ignores them: not a turn).
        """
        messages = [*self.ledger.history, *self.ledger.carry_over(), om.user_text(self.prompt)]
        attempt = 0
        while True:
            attempt += 1
            self.record(om.request_begin())
            request = LLMRequest(
                system_prompt=self.system_prompt, messages=tuple(messages), tools=self.tools
            )
            texts: list[str] = []
            bad_reply = False
            outcome: LLMOutcome | None = None
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as watcher:
                    watcher.start_soon(_cancel_on, interrupt, scope)
                    async with self.llm.stream(request) as response:
                        async for message in response:
                            payload = message.payload
                            if om.is_partial(message):
                                await self.emit.stream_only(message)
                                continue
                            self.record(message)
                            if isinstance(payload, om.TextPayload):
                                texts.append(payload.text)
                            elif isinstance(payload, om.ToolCallPayload):
                                bad_reply = True
                        outcome = response.outcome
                    watcher.cancel_scope.cancel()
            if scope.cancelled_caught or outcome is None:
                self.record(end_request(None, attempt, self.reconnect).record)
                return _Summary(status="aborted", attempt=attempt)
            usage = usage_record(outcome, self.ledger.session_tokens)
            if usage is not None:
                await self.emit(usage)
            summary = extract_summary("".join(texts))
            usable = bool(summary) and not bad_reply
            end = end_request(outcome, attempt, self.reconnect, usable=usable)
            self.record(end.record)
            if outcome.status == "completed" and usable:
                return _Summary(text=summary, status="completed", attempt=attempt)
            if end.retry_in is None:
                status = "failed" if outcome.status == "completed" else outcome.status
                error = outcome.error_message or "the reply was not a usable summary"
                return _Summary(
                    status=status,
                    attempt=attempt,
                    error_message=error,
                    unreachable=outcome.unreachable,
                    rate_limited=outcome.rate_limited,
                )
            if not await wait_to_retry(end.retry_in, interrupt):
                return _Summary(status="aborted", attempt=attempt)


async def _cancel_on(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
