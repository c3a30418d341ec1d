"""The agent loop: the run, its turns, approvals and concurrent tool calls.

This module owns :class:`Engine`: one run (or manual compaction) at a time, the loop
of turns, a turn's model stream with its approvals and tool calls, and the hand-off
of background reports and steering into the next input. It delegates the rest: the
stream and what is recorded (:mod:`._stream`), how a request ends and whether it is
retried (:mod:`._reconnect`), compaction (:mod:`._compaction`), the model context
(:mod:`._ledger`), the trace (:mod:`._recorder`); tools run through a
:class:`~._runner.ToolRunner`, which ``penguin.Environment`` is.

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
   (``failed``, ``timeout``, ``malformed``; not ``auth``) is retried (2, 4, 8, 16,
   30 s) once the tools are done; tools are never re-run, and
   the retry carries a ``[turn_retried]`` block with what the failed attempt produced.
4. Once every call of the turn is terminal, their outputs (in call order), plus any
   background reports and steering, are the next turn's input. A turn without tool
   calls and with nothing else to say ends the Task.

A session with MCP servers (a :class:`~._runner.ToolCatalog` given as ``mcp``) has no
tool list until they are connected: its first run streams its input, then
``mcp_connect_begin``, connects every server (an interrupt aborts the phase:
``mcp_connect_end`` ``aborted``, and the next run tries again), ``mcp_connect_end``
with each server's result, and only then ``tool_list_ready`` with every tool.

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
from typing import TypeAlias, final

import attrs
import trio

from penguin import protocol as om
from penguin._concurrency import collapse_single
from penguin._log import warn
from penguin.approval import (
    Approval,
    CommandPolicy,
    decide,
    denial_output,
    with_command_policy,
)
from penguin.llm import LLM, LLMOutcome, LLMRequest
from penguin.trace import is_recordable

from ._compaction import (
    DEFAULT_COMPACTION_PROMPT,
    Compaction,
    CompactionSettings,
    compaction_reason,
)
from ._errors import EngineBusyError
from ._ledger import Ledger
from ._markers import steering_text
from ._reconnect import ReconnectPolicy, end_request, usage_record, wait_to_retry
from ._recorder import TraceRecorder
from ._runner import ToolCatalog, ToolRunner
from ._stream import STREAM_BUFFER, Batch, OpenFragments, Outlet, RunResult, RunStream, finish

__all__ = ["Engine"]

Message: TypeAlias = om.OmniMessage[om.Payload]


def _as_messages(messages: Iterable[Message], method: str) -> list[Message]:
    """``messages`` as a list; a ``TypeError`` that says what to pass for anything else.

    A caller's likeliest slip is a bare string (or one message) for the list, which
    would otherwise fail deep inside with an ``AttributeError``.
    """
    example = 'such as [om.user_text("...")]'
    given: object = messages
    if isinstance(given, om.OmniMessage):
        raise TypeError(f"{method}() takes a list of messages, {example}, not one message")
    if isinstance(given, (str, bytes)) or not isinstance(given, Iterable):
        name = type(given).__name__
        what = "None" if given is None else f"{'an' if name[0] in 'aeiou' else 'a'} {name}"
        raise TypeError(f"{method}() takes a list of messages, {example}, not {what}")
    taken = list(messages)
    for index, message in enumerate(taken):
        if not isinstance(message, om.OmniMessage):
            raise TypeError(
                f"{method}() takes a list of messages, {example}; item {index} is a"
                f" {type(message).__name__}"
            )
    return taken


ToolCall: TypeAlias = om.OmniMessage[om.ToolCallPayload]


@final
@attrs.define
class _AttemptEnd:
    outcome: LLMOutcome | None
    interrupted: bool
    retry_in: float | None = None


@final
class Engine:
    """Runs Tasks for one session: a model, a tool runner, a ledger and a trace.

    Build it with the session's pieces; :meth:`run` is the only entry point for a
    Task, :meth:`steer` talks to a live one, :meth:`compact` compacts between runs.
    """

    def __init__(
        self,
        *,
        llm: LLM,
        environment: ToolRunner,
        system_prompt: str,
        tools: Sequence[om.ToolDefinition],
        recorder: TraceRecorder | None = None,
        ledger: Ledger | None = None,
        session_meta: om.OmniMessage[om.SessionMetaPayload] | None = None,
        max_turns: int = -1,
        reconnect: ReconnectPolicy | None = None,
        compaction: CompactionSettings | None = None,
        command_policy: CommandPolicy | None = None,
        mcp: ToolCatalog | None = None,
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
        self._mcp = mcp if mcp is not None and mcp.mcp_servers else None
        self._running = False
        self._task_live = False
        self._steering: collections.deque[list[Message]] = collections.deque()
        self._reports: collections.deque[Message] = collections.deque()
        # What the run's interrupt cancels: the live attempt's model stream and pending
        # approval (one watching task per run, not one per turn).
        self._on_interrupt: set[trio.CancelScope] = set()

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
        taken = _as_messages(messages, "steer")
        if not self._task_live:
            return False
        self._steering.append(taken)
        return True

    @asynccontextmanager
    async def run(
        self,
        messages: Sequence[Message],
        *,
        approve: om.ApproveFn | None = None,
        interrupt: trio.Event | None = None,
        thinking_level: str | None = None,
        max_turns: int | None = None,
    ) -> AsyncIterator[RunStream]:
        """Run one Task; iterate the yielded stream for its messages.

        ``approve`` answers every tool call (``None`` denies them all); when the
        engine has a command policy, it is consulted first. ``interrupt`` ends the
        run gracefully. ``max_turns`` caps this run's turns (``None``: the engine's
        :attr:`max_turns`). Raises :class:`EngineBusyError` when a run is already live.
        """
        inputs = _as_messages(messages, "run")
        event = interrupt if interrupt is not None else trio.Event()
        limit = self.max_turns if max_turns is None else max_turns
        if self.command_policy is not None:
            approve = with_command_policy(approve, self.command_policy)

        async def drive(emit: Outlet) -> RunResult:
            ended = False
            self._close_open_compaction()
            self._task_live = True
            try:
                result = await self._task(inputs, approve, event, thinking_level, limit, emit)
                ended = True
                return result
            finally:
                self._task_live = False
                if not ended:
                    # A hard stop: nothing more is streamed, but the trace (and with it
                    # the ledger) says the run ended here.
                    self._record(om.abort("cancelled"))

        async with self._live(
            drive, "a run is already live on this session; steer it or wait", interrupt=interrupt
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

        async def drive(emit: Outlet) -> RunResult:
            self._close_open_compaction()
            return await self._compact("manual", chosen, event, emit)

        async with self._live(drive, "cannot compact while a run is live") as s:
            yield s

    # ------------------------------------------------------------------ plumbing

    @asynccontextmanager
    async def _live(
        self,
        drive: Callable[[Outlet], Awaitable[RunResult]],
        busy: str,
        *,
        interrupt: trio.Event | None = None,
    ) -> AsyncIterator[RunStream]:
        """One run or compaction at a time: its driving task and the stream it fills.

        The stream gets the driver's result before it ends, so a consumer that saw the
        end of the iteration can read it. With ``interrupt``, one task watches it for the
        whole run and cancels what :attr:`_on_interrupt` holds when it is set.
        """
        if self._running:
            raise EngineBusyError(busy)
        self._running = True
        send, receive = trio.open_memory_channel[Batch](STREAM_BUFFER)
        stream = RunStream(receive)

        async def main() -> None:
            with send:
                finish(stream, await drive(Outlet(send, self._record)))

        try:
            with collapse_single():
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(main)
                    if interrupt is not None:
                        nursery.start_soon(self._watch_interrupt, interrupt)
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
            self._on_interrupt.clear()

    async def _watch_interrupt(self, interrupt: trio.Event) -> None:
        """Cancel the live attempt's stream and approval once ``interrupt`` is set.

        Whatever registers later checks the event itself before it starts.
        """
        await interrupt.wait()
        for scope in self._on_interrupt:
            scope.cancel()

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
        max_turns: int,
        emit: Outlet,
    ) -> RunResult:
        if not self._tool_list_sent and self._mcp is None:
            self._tool_list_sent = True
            await emit(om.tool_list_ready(self.tools))
        # A context due for compaction is compacted before the new input joins it, so
        # that the input reaches the new context verbatim.
        cut = await self._checkpoint(interrupt, emit, turns=0)
        for message in inputs:
            await emit(message)
        if cut is not None:
            return await self._end_run(cut, emit)
        if not self._tool_list_sent and not await self._connect_mcp(interrupt, emit):
            return await self._end_run(RunResult(status="aborted", turns=0), emit)
        turns = 0
        while True:
            self._collect_reports()
            if interrupt.is_set():
                return await self._end_run(RunResult(status="aborted", turns=turns), emit)
            if not (self.ledger.has_input() or self._reports or self._steering):
                return RunResult(status="completed", turns=turns)
            if 0 <= max_turns <= turns:
                warn(f"[penguin] max_turns ({max_turns}) reached; the task stops here.")
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
                    unreachable=end.outcome.unreachable,
                    rate_limited=end.outcome.rate_limited,
                )
                return await self._end_run(failed, emit)
            turns += 1

    async def _connect_mcp(self, interrupt: trio.Event, emit: Outlet) -> bool:
        """The MCP connect phase and the tool list (M1.4); False when it was interrupted."""
        catalog = self._mcp
        assert catalog is not None
        await emit(om.mcp_connect_begin(catalog.mcp_servers))
        results: tuple[om.McpServerConnectResult, ...] | None = None
        with trio.CancelScope() as phase:

            async def watch() -> None:
                await interrupt.wait()
                phase.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch)
                results = await catalog.connect_mcp()
                nursery.cancel_scope.cancel()
        if results is None:
            await emit(om.mcp_connect_end("aborted"))
            return False
        failed = any(result.status != "completed" for result in results)
        await emit(om.mcp_connect_end("failed" if failed else "completed", results))
        self.tools = tuple(await catalog.list_tools())
        self._tool_list_sent = True
        await emit(om.tool_list_ready(self.tools))
        return True

    async def _end_run(self, result: RunResult, emit: Outlet) -> RunResult:
        """End a run that stops with input left: it is kept for the next run."""
        await self._deliver_extras(emit)
        self._task_live = False  # nothing queued from here on would be delivered
        if result.status == "aborted":
            await emit(om.abort())
        return result

    def _collect_reports(self) -> None:
        for report in self.environment.take_background_reports():
            self._reports.append(om.user_text(report.text(), harness=True))

    async def _deliver_extras(self, emit: Outlet) -> None:
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
        emit: Outlet,
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
            if end.retry_in is None:
                return end
            if not await wait_to_retry(end.retry_in, interrupt):
                return _AttemptEnd(outcome=None, interrupted=True)

    async def _attempt(
        self,
        request: LLMRequest,
        attempt: int,
        approve: om.ApproveFn | None,
        interrupt: trio.Event,
        emit: Outlet,
    ) -> _AttemptEnd:
        calls_send, calls_receive = trio.open_memory_channel[ToolCall](math.inf)
        stream_scope = trio.CancelScope()
        outcome: LLMOutcome | None = None
        on_interrupt = self._on_interrupt

        async def settle(call: ToolCall, tools: trio.Nursery) -> None:
            if interrupt.is_set():
                return  # the run is over: no decision, nothing runs
            with trio.CancelScope() as scope:
                on_interrupt.add(scope)
                try:
                    approval = await decide(approve, call)
                finally:
                    on_interrupt.discard(scope)
            if scope.cancelled_caught or interrupt.is_set():
                return
            await self._settle(call, approval, approve, interrupt, emit, tools)

        async def approvals(first: ToolCall) -> None:
            # Handed its first call, it decides it in its first step, as a task that had
            # waited on the channel from the start would.
            async with trio.open_nursery() as tools:
                with calls_receive:
                    await settle(first, tools)
                    async for call in calls_receive:
                        await settle(call, tools)

        deciding = False  # the approvals task starts with the turn's first tool call
        async with trio.open_nursery() as work:
            fragments = OpenFragments()
            on_interrupt.add(stream_scope)
            try:
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
                                if deciding:
                                    calls_send.send_nowait(message)
                                else:
                                    deciding = True
                                    work.start_soon(approvals, message)
                    outcome = response.outcome
            finally:
                on_interrupt.discard(stream_scope)
            if outcome is None:  # interrupted mid-stream
                for message in fragments.close():
                    await emit(message)
            else:
                usage = usage_record(outcome, self.ledger.session_tokens)
                if usage is not None:
                    await emit(usage)
            end = end_request(outcome, attempt, self.reconnect)
            await emit(end.record)
            if not deciding:
                calls_receive.close()  # a turn without calls: no task was needed
            # else leaving the block waits for the approvals task and the calls it started
        return _AttemptEnd(outcome=outcome, interrupted=outcome is None, retry_in=end.retry_in)

    async def _settle(
        self,
        call: ToolCall,
        approval: Approval,
        approve: om.ApproveFn | None,
        interrupt: trio.Event,
        emit: Outlet,
        tools: trio.Nursery,
    ) -> None:
        """Record the decision; start the call, or answer it with its denial."""
        call_id = call.payload.tool_call_id
        if approval.verdict == "allow":
            await emit(om.approval_decision("allow", call_id))
            tools.start_soon(self._run_tool, call, approve, interrupt, emit)
            return
        await emit(om.approval_decision(approval.verdict, call_id, approval.policy_rule))
        await emit(om.tool_call_output(denial_output(approval), call_id, "aborted"))

    async def _run_tool(
        self, call: ToolCall, approve: om.ApproveFn | None, interrupt: trio.Event, emit: Outlet
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

    async def _checkpoint(
        self, interrupt: trio.Event, emit: Outlet, *, turns: int
    ) -> RunResult | None:
        """Compact if a trigger says so; the run's end if the compaction did not complete."""
        reason = compaction_reason(self.compaction, self.ledger)
        if reason is None or self.compaction is None or interrupt.is_set():
            return None
        result = await self._compact(reason, self.compaction.mode, interrupt, emit)
        if result.status == "completed":
            return None
        return attrs.evolve(result, turns=turns)

    async def _compact(
        self,
        reason: om.CompactionReason,
        mode: om.CompactionMode,
        interrupt: trio.Event,
        emit: Outlet,
    ) -> RunResult:
        """Replace the context (:class:`~._compaction.Compaction`); ``completed`` on success."""
        compaction = Compaction(
            llm=self.llm,
            ledger=self.ledger,
            system_prompt=self.system_prompt,
            tools=self.tools,
            prompt=self.compaction.prompt if self.compaction else DEFAULT_COMPACTION_PROMPT,
            reconnect=self.reconnect,
            emit=emit,
            record=self._record,
            rotate=self._start_new_trace_file,
        )
        return await compaction.run(reason, mode, interrupt)

    def _start_new_trace_file(self) -> None:
        """Rotate the trace; the new file opens with the session meta and the tool list."""
        if self._recorder is None:
            return
        self._recorder.rotate()
        if self._session_meta is not None:
            self._recorder.record(self._session_meta)
        self._recorder.record(om.tool_list_ready(self.tools))
