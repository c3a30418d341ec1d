"""The agent loop: turns, approvals, concurrent tools, reconnects, carry-over, compaction.

A *run* (one Task) is a series of *turns*. Each turn is one model request, retried
in place when the model side fails:

1. ``request_begin``; the request is the ledger's context plus the turn's input.
2. The model streams; fragments and complete messages are passed on as they come.
   Every complete ``tool_call`` goes to the approval queue; approvals happen one at
   a time, in stream order, each recorded as ``approval_decision`` before any output
   of its call; approved calls start at once and run concurrently while the model
   stream continues; a denied call gets one complete ``aborted`` output.
3. At the end of the model stream: ``token_usage`` (when the request completed or
   reported usage) then ``request_end`` — without waiting for the tools. A failure
   other than ``auth`` is retried (2, 4, 8, 16, 30 s); tools are never re-run, and
   the retry carries a ``[turn_retried]`` block with what the failed attempt produced.
4. Once every call of the turn is terminal, their outputs (in call order), plus any
   background reports and steering, are the next turn's input. A turn without tool
   calls and with nothing else to say ends the Task.

Between turns (and at the start of a run, before its new input) the context may be
compacted; a compaction that fails ends the run and keeps the old context, to be
tried again by the next run.

An interrupt (``interrupt=`` event) ends the run gracefully at any point: the model
stream stops (open fragments are closed ``aborted``), pending approvals are dropped,
running tools close out with ``[interrupted: tool aborted by user]``, and an
``abort`` event ends the stream. What the next run must re-send (the carry-over)
is not built here: it is derived by the :class:`~._ledger.Ledger` from the very
records the trace gets, which is why resuming a session reproduces it exactly.
Leaving the ``async with`` early is a hard stop: everything is cancelled, nothing
more is streamed, and an ``abort`` record keeps the trace honest.

Every message of the run goes to the stream first, then (if it is a record) to the
ledger and the trace recorder. A message whose hand-off was cancelled is therefore
in none of them: the consumer, the model context and the trace always agree.
"""

from __future__ import annotations

import collections
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Final, Literal, TypeAlias

import attrs
import trio

from penguin import protocol as om
from penguin._concurrency import collapse_single
from penguin._log import warn
from penguin.approval import Approval, CommandPolicy, decide, with_command_policy
from penguin.environment import Environment
from penguin.llm import LLM, LLMOutcome, LLMRequest
from penguin.trace import is_recordable

from ._errors import EngineBusyError
from ._ledger import Ledger
from ._markers import context_summary_text, extract_summary, steering_text, transcript_lines
from ._recorder import TraceRecorder

__all__ = [
    "DEFAULT_COMPACTION_PROMPT",
    "CompactionSettings",
    "Engine",
    "ReconnectPolicy",
    "RunResult",
    "RunStatus",
    "RunStream",
]

Message: TypeAlias = om.OmniMessage[om.Payload]
ToolCall: TypeAlias = om.OmniMessage[om.ToolCallPayload]
RunStatus: TypeAlias = Literal[
    "completed", "aborted", "failed", "timeout", "malformed", "auth", "max_turns"
]

_STREAM_BUFFER: Final = 1
"""Batches waiting for the consumer, besides the one it may be taking: a slow consumer
slows the run down once about ``_STREAM_BUFFER + 1`` full batches are waiting."""
_BATCH_SIZE: Final = 64
_RETRYABLE: Final = frozenset({"failed", "timeout", "malformed"})

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


@attrs.frozen(kw_only=True)
class ReconnectPolicy:
    """Waits before each in-run retry of a failed request (reference D6: 2, 4, 8, 16, 30 s)."""

    delays: tuple[float, ...] = (2.0, 4.0, 8.0, 16.0, 30.0)

    def delay(self, attempt: int) -> float | None:
        """Seconds to wait after failed attempt ``attempt`` (1-based), or None: give up."""
        return self.delays[attempt - 1] if attempt <= len(self.delays) else None


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


@attrs.frozen(kw_only=True)
class RunResult:
    """How a run ended: the status, the model's error when it failed, turns taken."""

    status: RunStatus
    error_message: str | None = None
    turns: int = 0


class _Batch(list[Message]):
    """Messages handed over together; the producer appends until the consumer takes it."""

    __slots__ = ("taken",)

    def __init__(self, first: Message) -> None:
        super().__init__((first,))
        self.taken = False


class RunStream:
    """The messages of one run, in order; :attr:`result` once the iteration ended."""

    def __init__(self, receive: trio.MemoryReceiveChannel[_Batch]) -> None:
        self._receive = receive
        self._batch: _Batch | None = None
        self._index = 0
        self._result: RunResult | None = None

    def __aiter__(self) -> RunStream:
        return self

    async def __anext__(self) -> Message:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    async def receive(self) -> Message:
        """The next message (``trio.EndOfChannel`` after the last one)."""
        batch = self._batch
        if batch is not None and self._index < len(batch):
            await trio.lowlevel.checkpoint_if_cancelled()
            self._index += 1
            return batch[self._index - 1]
        batch = await self._receive.receive()
        batch.taken = True
        self._batch = batch
        self._index = 1
        return batch[0]

    @property
    def result(self) -> RunResult:
        """How the run ended; ``RuntimeError`` while it is still going."""
        if self._result is None:
            raise RuntimeError("the run has not finished yet")
        return self._result


@attrs.frozen(kw_only=True)
class _Summary:
    text: str | None = None
    status: om.StopReason = "failed"
    attempt: int = 1
    error_message: str | None = None


@attrs.define
class _AttemptEnd:
    outcome: LLMOutcome | None
    interrupted: bool


class _OpenFragments:
    """What a cut model stream left unfinished, so that it can be closed ``aborted``.

    A fragment is open from its ``start`` to its ``stop``; after the ``stop`` its
    complete message is still owed (it follows immediately on the wire, but a cut
    can fall between the two).
    """

    __slots__ = ("_aggregator", "_owed")

    def __init__(self) -> None:
        self._aggregator = om.PartialAggregator()
        self._owed: list[Message] = []

    def push(self, message: Message) -> None:
        """Account for one message that was passed on."""
        if om.is_partial(message):
            self._owed.extend(self._aggregator.push(message))
        elif self._owed and om.is_complete_model_message(message):
            self._owed.clear()

    def close(self) -> list[Message]:
        """The ``stop`` partials and ``aborted`` complete messages that close the stream."""
        closing: list[Message] = []
        for complete in self._owed:
            closing.extend(_aborted(complete, stop=False))
        for complete in self._aggregator.flush():
            closing.extend(_aborted(complete, stop=True))
        self._owed = []
        return closing


def _aborted(complete: Message, *, stop: bool) -> list[Message]:
    """``complete`` cut by an interrupt: its ``stop`` partial (if still open) and itself."""
    payload = complete.payload
    if isinstance(payload, om.TextPayload):
        partial: Message = om.partial_text("stop", "", "aborted")
        closed: Message = om.assistant_text(payload.text, "aborted")
    elif isinstance(payload, om.ThinkingPayload):
        partial = om.partial_thinking("stop", "", "aborted")
        closed = om.thinking(payload.thinking, "aborted")
    elif isinstance(payload, om.ToolCallPayload):
        partial = om.partial_tool_call("stop", payload.name, payload.tool_call_id, "", "aborted")
        closed = om.tool_call(
            payload.name, payload.arguments, payload.tool_call_id, stop_reason="aborted"
        )
    else:  # a model stream carries no other fragments
        return []
    return [partial, closed] if stop else [closed]


class _Outlet:
    """Where the messages of a run go: the stream, and then the ledger and the trace.

    A hand-over is atomic: either the message reaches the stream *and* is recorded,
    or (cancelled) neither. Messages travel in batches: until the consumer takes
    the last batch handed over, new messages join it, so a burst costs the consumer
    one wake-up instead of one scheduling round per message. Records keep the
    stream's order exactly: while one hand-over waits for room in a full stream,
    later ones queue behind it.
    """

    __slots__ = ("_channel", "_lock", "_open", "_record")

    def __init__(
        self, channel: trio.MemorySendChannel[_Batch], record: Callable[[Message], None]
    ) -> None:
        self._channel = channel
        self._record = record
        self._lock = trio.StrictFIFOLock()
        self._open: _Batch | None = None

    async def __call__(self, message: Message) -> None:
        """Stream ``message`` and record it (if it is a record)."""
        await self._hand_over(message, True)

    async def stream_only(self, message: Message) -> None:
        """Stream ``message`` without recording it (fragments, records made already)."""
        await self._hand_over(message, False)

    async def _hand_over(self, message: Message, record: bool) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        if not self._lock.locked():
            batch = self._open
            if batch is not None and not batch.taken and len(batch) < _BATCH_SIZE:
                batch.append(message)
                if record:
                    self._record(message)
                return
            batch = _Batch(message)
            try:
                self._channel.send_nowait(batch)
            except trio.WouldBlock:
                pass
            else:
                self._open = batch
                if record:
                    self._record(message)
                return
        async with self._lock:
            batch = _Batch(message)
            await self._channel.send(batch)
            self._open = batch
            if record:
                self._record(message)


class Engine:
    """Runs Tasks for one session: a model, an Environment, a ledger and a trace.

    Build it with the session's pieces; :meth:`run` is the only entry point for a
    Task, :meth:`steer` talks to a live one, :meth:`compact` compacts between runs.
    """

    def __init__(
        self,
        *,
        llm: LLM,
        environment: Environment,
        system_prompt: str,
        tools: Sequence[om.ToolDefinition],
        recorder: TraceRecorder | None = None,
        ledger: Ledger | None = None,
        session_meta: om.OmniMessage[om.SessionMetaPayload] | None = None,
        max_turns: int = -1,
        reconnect: ReconnectPolicy | None = None,
        compaction: CompactionSettings | None = None,
        command_policy: CommandPolicy | None = None,
    ) -> None:
        self.llm = llm
        self.environment = environment
        self.system_prompt = system_prompt
        self.tools = tuple(tools)
        self.ledger = ledger if ledger is not None else Ledger()
        self.max_turns = max_turns
        self.reconnect = reconnect or ReconnectPolicy()
        self.compaction = compaction
        self.command_policy = command_policy
        self._recorder = recorder
        self._session_meta = session_meta
        self._tool_list_sent = False
        self._running = False
        self._task_live = False
        self._steering: collections.deque[list[Message]] = collections.deque()
        self._reports: collections.deque[Message] = collections.deque()

    # ------------------------------------------------------------------ public

    @property
    def running(self) -> bool:
        """Whether a run (or a compaction) is live."""
        return self._running

    def steer(self, messages: Iterable[Message]) -> bool:
        """Queue user messages for the live Task (``[user_steering]``); False if none is live.

        They join the next turn's input; a Task that was about to end takes one more
        turn for them. A run that stops early (interrupt, failure, ``max_turns``)
        still records them, as input for the next run; a hard stop drops them.
        """
        if not self._task_live:
            return False
        self._steering.append(list(messages))
        return True

    @asynccontextmanager
    async def run(
        self,
        messages: Sequence[Message],
        *,
        approve: om.ApproveFn | None = None,
        interrupt: trio.Event | None = None,
        thinking_level: str | None = None,
    ) -> AsyncIterator[RunStream]:
        """Run one Task; iterate the yielded stream for its messages.

        ``approve`` answers every tool call (``None`` denies them all); when the
        engine has a command policy, it is consulted first. ``interrupt`` ends the
        run gracefully. Raises :class:`EngineBusyError` when a run is already live.
        """
        event = interrupt if interrupt is not None else trio.Event()
        if self.command_policy is not None:
            approve = with_command_policy(approve, self.command_policy)
        inputs = list(messages)

        async def drive(emit: _Outlet, stream: RunStream) -> None:
            ended = False
            self._close_open_compaction()
            self._task_live = True
            try:
                stream._result = await self._task(inputs, approve, event, thinking_level, emit)
                ended = True
            finally:
                self._task_live = False
                if not ended:
                    # A hard stop: nothing more is streamed, but the trace (and with it
                    # the ledger) says the run ended here.
                    self._record(om.abort("cancelled"))

        async with self._live(
            drive, "a run is already live on this session; steer it or wait"
        ) as s:
            yield s

    @asynccontextmanager
    async def compact(
        self, mode: om.CompactionMode | None = None, *, interrupt: trio.Event | None = None
    ) -> AsyncIterator[RunStream]:
        """Compact the context now (``manual``), between runs; stream its events.

        The result's status is ``completed`` when a new context replaced the old one;
        otherwise the old context is kept and the status says why.
        """
        event = interrupt if interrupt is not None else trio.Event()
        chosen = mode or (self.compaction.mode if self.compaction else "summarize")

        async def drive(emit: _Outlet, stream: RunStream) -> None:
            self._close_open_compaction()
            status, error = await self._compact("manual", chosen, event, emit)
            stream._result = RunResult(status=status, error_message=error)

        async with self._live(drive, "cannot compact while a run is live") as s:
            yield s

    # ------------------------------------------------------------------ plumbing

    @asynccontextmanager
    async def _live(
        self, drive: Callable[[_Outlet, RunStream], Awaitable[None]], busy: str
    ) -> AsyncIterator[RunStream]:
        """One run or compaction at a time: its driving task and the stream it fills."""
        if self._running:
            raise EngineBusyError(busy)
        self._running = True
        send, receive = trio.open_memory_channel[_Batch](_STREAM_BUFFER)
        stream = RunStream(receive)

        async def main() -> None:
            with send:
                await drive(_Outlet(send, self._record), stream)

        try:
            with collapse_single():
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(main)
                    try:
                        yield stream
                    finally:
                        # Cancel before closing: a driver blocked on a full stream must
                        # get Cancelled (a hard stop), not BrokenResourceError.
                        nursery.cancel_scope.cancel()
                        receive.close()
        finally:
            self._running = False
            self._steering.clear()

    def _close_open_compaction(self) -> None:
        """Close a compaction that a resumed trace left open: it was abandoned.

        The process died during it; the old context stands. The record says so
        before anything else is written.
        """
        begin = self.ledger.open_compaction
        if begin is not None:
            self._record(om.compaction_end(begin.reason, begin.mode, "aborted"))

    def _record(self, message: Message) -> None:
        """The ledger and the trace, not the stream (trace-only records)."""
        if is_recordable(message):
            self.ledger.observe(message)
            if self._recorder is not None:
                self._recorder.record(message)

    # ------------------------------------------------------------------ the run

    async def _task(
        self,
        inputs: list[Message],
        approve: om.ApproveFn | None,
        interrupt: trio.Event,
        thinking_level: str | None,
        emit: _Outlet,
    ) -> RunResult:
        if not self._tool_list_sent:
            self._tool_list_sent = True
            await emit(om.tool_list_ready(self.tools))
        # A context due for compaction is compacted before the new input joins it, so
        # that the input reaches the new context verbatim.
        cut = await self._checkpoint(interrupt, emit, turns=0)
        for message in inputs:
            await emit(message)
        if cut is not None:
            return await self._end_run(cut, emit)
        turns = 0
        while True:
            self._collect_reports()
            if interrupt.is_set():
                return await self._end_run(RunResult(status="aborted", turns=turns), emit)
            if not (self.ledger.has_input() or self._reports or self._steering):
                return RunResult(status="completed", turns=turns)
            if 0 <= self.max_turns <= turns:
                warn(f"[penguin] max_turns ({self.max_turns}) reached; the task stops here.")
                return await self._end_run(RunResult(status="max_turns", turns=turns), emit)
            if turns > 0:
                cut = await self._checkpoint(interrupt, emit, turns=turns)
                if cut is not None:
                    return await self._end_run(cut, emit)
            await self._deliver_extras(emit)
            end = await self._turn(approve, interrupt, thinking_level, emit)
            if end.interrupted:
                return await self._end_run(RunResult(status="aborted", turns=turns), emit)
            assert end.outcome is not None
            if end.outcome.status != "completed":
                failed = RunResult(
                    status=end.outcome.status,
                    error_message=end.outcome.error_message,
                    turns=turns,
                )
                return await self._end_run(failed, emit)
            turns += 1

    async def _end_run(self, result: RunResult, emit: _Outlet) -> RunResult:
        """End a run that stops with input left: it is kept for the next run."""
        await self._deliver_extras(emit)
        self._task_live = False  # nothing queued from here on would be delivered
        if result.status == "aborted":
            await emit(om.abort())
        return result

    def _collect_reports(self) -> None:
        for report in self.environment.take_background_reports():
            self._reports.append(om.user_text(report.text(), harness=True))

    async def _deliver_extras(self, emit: _Outlet) -> None:
        """Background reports, then steering, join the next input (as user messages)."""
        self._collect_reports()
        while self._reports:
            await emit(self._reports[0])
            self._reports.popleft()
        while self._steering:
            for message in self._steering.popleft():
                payload = message.payload
                if isinstance(payload, om.TextPayload):
                    await emit(om.user_text(steering_text(payload.text)))
                elif om.is_complete_model_message(message):
                    await emit(message)

    # ------------------------------------------------------------------ one turn

    async def _turn(
        self,
        approve: om.ApproveFn | None,
        interrupt: trio.Event,
        thinking_level: str | None,
        emit: _Outlet,
    ) -> _AttemptEnd:
        while True:
            await emit(om.request_begin())
            attempt = self.ledger.attempt
            request = LLMRequest(
                system_prompt=self.system_prompt,
                messages=tuple(self.ledger.request_messages()),
                tools=self.tools,
                thinking_level=thinking_level,
            )
            end = await self._attempt(request, attempt, approve, interrupt, emit)
            if end.interrupted or end.outcome is None or end.outcome.status == "completed":
                return end
            delay = self._retry_delay(end.outcome, attempt)
            if delay is None:
                return end
            with trio.move_on_after(delay):
                await interrupt.wait()
                return _AttemptEnd(outcome=None, interrupted=True)

    def _retry_delay(self, outcome: LLMOutcome, attempt: int) -> float | None:
        if outcome.status not in _RETRYABLE:
            return None
        return self.reconnect.delay(attempt)

    async def _attempt(
        self,
        request: LLMRequest,
        attempt: int,
        approve: om.ApproveFn | None,
        interrupt: trio.Event,
        emit: _Outlet,
    ) -> _AttemptEnd:
        calls_send, calls_receive = trio.open_memory_channel[ToolCall](math.inf)
        stream_scope = trio.CancelScope()
        watch_scope = trio.CancelScope()
        approving: list[trio.CancelScope] = []
        work_done = trio.Event()
        outcome: LLMOutcome | None = None

        async def watch() -> None:
            with watch_scope:
                await interrupt.wait()
                stream_scope.cancel()
                for scope in approving:
                    scope.cancel()

        async def approvals() -> None:
            try:
                async with trio.open_nursery() as tools:
                    with calls_receive:
                        async for call in calls_receive:
                            if interrupt.is_set():
                                continue  # the run is over: no decision, nothing runs
                            with trio.CancelScope() as scope:
                                approving.append(scope)
                                approval = await decide(approve, call)
                            approving.clear()
                            if scope.cancelled_caught or interrupt.is_set():
                                continue
                            await self._settle(call, approval, approve, interrupt, emit, tools)
            finally:
                work_done.set()

        async with trio.open_nursery() as work:
            work.start_soon(watch)
            work.start_soon(approvals)
            fragments = _OpenFragments()
            with stream_scope, calls_send:
                if interrupt.is_set():
                    stream_scope.cancel()
                async with self.llm.stream(request) as response:
                    async for message in response:
                        await emit(message)
                        fragments.push(message)
                        if om.is_tool_call(message) and message.payload.stop_reason in (
                            None,
                            "completed",
                        ):
                            calls_send.send_nowait(message)
                outcome = response.outcome
            if outcome is None:  # interrupted mid-stream
                for message in fragments.close():
                    await emit(message)
                await emit(om.request_end("aborted", attempt=attempt if attempt > 1 else None))
            else:
                await self._end_request(outcome, attempt, emit)
            await work_done.wait()
            watch_scope.cancel()
        return _AttemptEnd(outcome=outcome, interrupted=outcome is None)

    async def _end_request(self, outcome: LLMOutcome, attempt: int, emit: _Outlet) -> None:
        await self._token_usage(outcome, emit)
        if outcome.status == "completed":
            await emit(om.request_end("completed", attempt=attempt if attempt > 1 else None))
            return
        delay = self._retry_delay(outcome, attempt)
        await emit(
            om.request_end(
                outcome.status,
                error_message=outcome.error_message,
                attempt=attempt,
                retry_in_ms=None if delay is None else round(delay * 1000),
            )
        )

    async def _token_usage(self, outcome: LLMOutcome, emit: _Outlet) -> None:
        """``token_usage`` of a completed request, or of a failed one that reported usage.

        A failed request without usage says nothing about the context's size, so it
        does not overwrite the last measure.
        """
        if outcome.usage is None and outcome.status != "completed":
            return
        usage = outcome.usage or om.TokenCounts()
        await emit(om.token_usage(self.ledger.session_tokens + usage, usage))

    async def _settle(
        self,
        call: ToolCall,
        approval: Approval,
        approve: om.ApproveFn | None,
        interrupt: trio.Event,
        emit: _Outlet,
        tools: trio.Nursery,
    ) -> None:
        """Record the decision; start the call, or answer it with its denial."""
        call_id = call.payload.tool_call_id
        if approval.verdict == "allow":
            await emit(om.approval_decision("allow", call_id))
            tools.start_soon(self._run_tool, call, approve, interrupt, emit)
            return
        await emit(om.approval_decision(approval.verdict, call_id, approval.policy_rule))
        reason = "policy" if approval.verdict == "forbidden" else "user"
        await emit(om.tool_call_output(f"Tool call denied by {reason}.", call_id, "aborted"))

    async def _run_tool(
        self, call: ToolCall, approve: om.ApproveFn | None, interrupt: trio.Event, emit: _Outlet
    ) -> None:
        finished = False

        async def forward(message: Message) -> None:
            nonlocal finished
            origin = message.origin
            if origin and len(origin) == 1 and om.is_session_meta(message):
                self._record(om.subagent(origin[0]))  # the parent's pointer (7.7)
            await emit(message)
            if not origin and om.is_tool_call_output(message):
                finished = True

        try:
            await self.environment.run_call(call, forward, interrupt=interrupt, approve=approve)
        except Exception as exc:  # reference 1.12: the engine's safety net
            reason = str(exc) or type(exc).__name__
            if finished:
                warn(f"[penguin] tool {call.payload.name!r} failed after its output: {reason}")
            else:
                await emit(
                    om.tool_call_output(
                        f"[tool error] {reason}", call.payload.tool_call_id, "failed"
                    )
                )

    # ------------------------------------------------------------------ compaction

    def _compaction_reason(self) -> om.CompactionReason | None:
        settings = self.compaction
        if settings is None or self.ledger.turns == 0:
            return None
        if 0 < settings.max_context_length <= self.ledger.last_request_total:
            return "context"
        if 0 < settings.max_session_turns <= self.ledger.turns:
            return "turns"
        return None

    async def _checkpoint(
        self, interrupt: trio.Event, emit: _Outlet, *, turns: int
    ) -> RunResult | None:
        """Compact if a trigger says so; the run's end if the compaction did not complete."""
        reason = self._compaction_reason()
        if reason is None or self.compaction is None or interrupt.is_set():
            return None
        status, error = await self._compact(reason, self.compaction.mode, interrupt, emit)
        if status == "completed":
            return None
        return RunResult(status=status, error_message=error, turns=turns)

    async def _compact(
        self,
        reason: om.CompactionReason,
        mode: om.CompactionMode,
        interrupt: trio.Event,
        emit: _Outlet,
    ) -> tuple[om.StopReason, str | None]:
        """Replace the context; ``completed`` on success, else the context is kept."""
        ledger = self.ledger
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
                result = await self._summarize(interrupt, emit)
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
                return result.status, result.error_message
            # The new context exists once these are recorded, whether or not the
            # stream still takes them: record first, then stream.
            self._start_new_trace_file()
            closing = om.compaction_end(reason, mode, "completed", attempt=result.attempt)
            summary = om.user_text(context_summary_text(result.text), harness=True)
            self._record(closing)
            ended = True
            # The new file carries the session's counters: a resume reads only it.
            self._record(om.token_usage(ledger.session_tokens, om.TokenCounts()))
            self._record(summary)
            await emit.stream_only(closing)
            await emit.stream_only(summary)
            return "completed", None
        finally:
            if not ended:  # a hard stop: the trace must not stay inside the compaction
                self._record(om.compaction_end(reason, mode, "aborted"))

    async def _summarize(self, interrupt: trio.Event, emit: _Outlet) -> _Summary:
        """Ask the model for a summary, retrying like a turn; the text, or why not.

        The summary's fragments are streamed; its complete messages and request
        events are trace-only records (the ledger ignores them: not a turn).
        """
        prompt = self.compaction.prompt if self.compaction else DEFAULT_COMPACTION_PROMPT
        messages = [*self.ledger.history, *self.ledger.carry_over(), om.user_text(prompt)]
        attempt = 0
        while True:
            attempt += 1
            self._record(om.request_begin())
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
                                await emit.stream_only(message)
                                continue
                            self._record(message)
                            if isinstance(payload, om.TextPayload):
                                texts.append(payload.text)
                            elif isinstance(payload, om.ToolCallPayload):
                                bad_reply = True
                        outcome = response.outcome
                    watcher.cancel_scope.cancel()
            numbered = attempt if attempt > 1 else None
            if scope.cancelled_caught or outcome is None:
                self._record(om.request_end("aborted", attempt=numbered))
                return _Summary(status="aborted", attempt=attempt)
            await self._token_usage(outcome, emit)
            summary = extract_summary("".join(texts))
            if outcome.status == "completed" and summary and not bad_reply:
                self._record(om.request_end("completed", attempt=numbered))
                return _Summary(text=summary, status="completed", attempt=attempt)
            error = outcome.error_message or "the reply was not a usable summary"
            delay = None if outcome.status == "auth" else self.reconnect.delay(attempt)
            self._record(
                om.request_end(
                    outcome.status,
                    error_message=outcome.error_message,
                    attempt=attempt,
                    retry_in_ms=None if delay is None else round(delay * 1000),
                )
            )
            if delay is None:
                status = "failed" if outcome.status == "completed" else outcome.status
                return _Summary(status=status, attempt=attempt, error_message=error)
            with trio.move_on_after(delay):
                await interrupt.wait()
                return _Summary(status="aborted", attempt=attempt)

    def _start_new_trace_file(self) -> None:
        """Rotate the trace; the new file opens with the session meta and the tool list."""
        if self._recorder is None:
            return
        self._recorder.rotate()
        if self._session_meta is not None:
            self._recorder.record(self._session_meta)
        self._recorder.record(om.tool_list_ready(self.tools))


async def _cancel_on(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
