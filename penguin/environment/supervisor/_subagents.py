"""Subagent sessions and their supervisor: the capped registry of live child sessions.

A :class:`SubagentSession` is one child session (opened by the injected
:class:`~penguin.environment.SubagentRunner`) and the rounds run on it. It lives as one
task in the Environment's nursery, started through ``nursery.start`` so that a child
that cannot be opened reaches run_subagent as an exception. The task holds the child
open until the session is *released* (a finished foreground run, kill_subagent,
eviction, the supervisor closing); a round still running then is interrupted first and
the child is closed only after it ended (reference 4.12). Inside, the task owns a small
nursery for the current round and for the approval consultations.

What a round produces goes to three places (reference 4.6):

- every child message, tagged with the child's session id (``om.with_origin``), waits
  in a message buffer (at most 4096, the oldest dropped) for the next collect window
  to forward it — or, for a background launch, goes straight to the host through
  the live tap instead (:class:`MessageTap`, read as ``Environment.subagent_messages``);
- the text of the DIRECT child's ``partial_text`` deltas (origin exactly one hop) goes
  to a capped :class:`~._buffer.UnreadBuffer` (1 MiB, ``earlier subagent output``):
  the window mirrors it as the tool's own output; deeper (grandchild) text is only
  forwarded, never mirrored;
- the child's tool-call approvals queue per session (reference 5.8): the head request is
  consulted through the current sink — the approver of the run_subagent or
  input_subagent call whose window is open, else the standing sink of a background
  launch — one request at a time. A window that ends mid-consultation leaves the
  request queued; the late answer still applies; the first answer wins. A sink that
  raises denies; kill and dispose deny everything queued, and any later request is
  denied at once.

The :class:`SubagentSupervisor` owns the registry (reference 4.2: at most 8 admitted; when
full, the first IDLE session in registration order is evicted, a running one never;
registration after a window may overshoot), the per-session cap on the total number
of subagents spawned, per-round completion reports of background launches (3.13, sent
through the same channel as the command reports), the hourly idle sweep (4.3; only
idle sessions are reaped), the collect windows of the tools, and dispose (4.12).

It does not build sessions (the runner does), know the engine, or decide the tools'
texts beyond the round notes of 3.8.4 (``round_exit``, pure).
"""

from __future__ import annotations

import collections
import contextlib
import secrets
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from typing import Final, Literal, final

import attrs
import trio

from penguin import protocol as om
from penguin._concurrency import error_text
from penguin._log import warn
from penguin.config import DEFAULT_MAX_SPAWNED
from penguin.protocol import consult

from .._contract import SubagentChild, SubagentRequest, SubagentRunner
from .._errors import SubagentSpawnError, SubagentStartError, SubagentSupervisorClosedError
from ._buffer import SUBAGENT_LABEL, UnreadBuffer
from ._registry import (
    IDLE_REAP_AFTER,
    IDLE_SWEEP_INTERVAL,
    SUBAGENT_SESSION_CAP,
    SessionRegistry,
)
from ._reports import BackgroundReport, report_output

__all__ = [
    "DEFAULT_SPAWN_LIMIT",
    "MESSAGE_BUFFER_CAP",
    "SUBAGENT_CAP",
    "MessageTap",
    "RoundExit",
    "SubagentSession",
    "SubagentStartError",
    "SubagentSupervisor",
    "SubagentSupervisorClosedError",
    "round_exit",
]

SUBAGENT_CAP: Final = SUBAGENT_SESSION_CAP
MESSAGE_BUFFER_CAP: Final = 4096
"""Child messages kept for the next window; the oldest go first (the child's trace has all)."""
DEFAULT_SPAWN_LIMIT: Final = DEFAULT_MAX_SPAWNED
"""Subagents one session may spawn in its lifetime, unless configured otherwise (32)."""
TAP_CAPACITY: Final = 4096
"""Background subagents' messages the host channel holds before the oldest are dropped."""
DISPOSE_GRACE: Final = 10.0
"""Seconds a released child may take to end its round gracefully before it is cancelled."""

Message = om.OmniMessage[om.Payload]
ToolCall = om.OmniMessage[om.ToolCallPayload]
Emit = Callable[[str], Awaitable[None]]
Forward = Callable[[Message], Awaitable[None]]


# --------------------------------------------------------------------------- round outcome


@final
@attrs.frozen
class RoundExit:
    """How one round ended, as the tools report it: a stop reason and an optional note."""

    status: Literal["completed", "failed"]
    note: str | None = None


def round_exit(
    *,
    status: str | None,
    error_message: str | None = None,
    abort_reason: str | None = None,
    wrote_text: bool = False,
    error: str | None = None,
) -> RoundExit:
    """Classify a finished round (reference 3.8.4).

    ``error``: the child's run raised (``[subagent error: …]``). ``abort_reason``: the
    direct child sent an ``abort`` event (``[subagent aborted: …]``). A run that ended
    in any other non-completed status (the model failed, ``max_turns``) is reported
    like an abort with the model's message as the reason. Otherwise completed, noting
    when the child never wrote any text.
    """
    if error is not None:
        return RoundExit("failed", f"[subagent error: {error}]")
    if abort_reason is not None:
        return RoundExit("failed", f"[subagent aborted: {abort_reason}]")
    if status is not None and status != "completed":
        return RoundExit("failed", f"[subagent aborted: {error_message or status}]")
    if not wrote_text:
        return RoundExit("completed", "[subagent finished without a text answer]")
    return RoundExit("completed")


# --------------------------------------------------------------------------- the live tap


@final
class MessageTap:
    """The host's view of background subagents: a bounded channel that drops the oldest.

    Background launches hand every child message here as it happens (no per-session
    buffering). Reading :attr:`receive` is optional: a host that never reads loses
    only the oldest messages beyond :data:`TAP_CAPACITY` — each child's own trace keeps
    everything — and never slows a child down.
    """

    def __init__(self, capacity: int = TAP_CAPACITY) -> None:
        self._send, self.receive = trio.open_memory_channel[Message](capacity)

    def __call__(self, message: Message) -> None:
        """Hand ``message`` over without waiting; when full, the oldest one makes room."""
        try:
            self._send.send_nowait(message)
            return
        except trio.WouldBlock:
            pass
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            return
        with contextlib.suppress(trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
            self.receive.receive_nowait()
        with contextlib.suppress(
            trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError
        ):
            self._send.send_nowait(message)

    def close(self) -> None:
        """No more messages; those waiting are dropped (1.13)."""
        self._send.close()
        with contextlib.suppress(trio.EndOfChannel, trio.ClosedResourceError):
            while True:
                self.receive.receive_nowait()


# --------------------------------------------------------------------------- approvals


@final
@attrs.define(eq=False)
class _Sink:
    """One place approvals are asked: a window's approver or a background launch's."""

    approve: om.ApproveFn


@final
@attrs.define(eq=False)
class _PendingApproval:
    call: ToolCall
    decided: trio.Event = attrs.Factory(trio.Event)
    verdict: om.ApprovalVerdict = "deny"
    asked: list[_Sink] = attrs.Factory(list)
    consultations: list[trio.CancelScope] = attrs.Factory(list)


# --------------------------------------------------------------------------- one child


@final
class SubagentSession:
    """One child session and its rounds; see the module docstring.

    Created by :meth:`SubagentSupervisor.spawn`. :attr:`running` says whether a round
    is live; :attr:`exit` is how the last round ended; :attr:`text` holds the direct
    child's undelivered text.
    """

    def __init__(
        self,
        *,
        report: Callable[[BackgroundReport], None],
        on_end: Callable[[SubagentSession], None],
    ) -> None:
        self._report = report
        self._on_end = on_end
        self.subagent_id = ""
        """``subagent-`` + the last 8 chars of the child session id (set at spawn)."""
        self.text = UnreadBuffer(label=SUBAGENT_LABEL)
        self.running = False
        """Whether a round is live."""
        self.exit: RoundExit | None = None
        """How the last round ended (``None`` while the first one runs)."""
        self.last_reply = ""
        """The direct child's latest complete assistant text of the current/last round."""
        self.report_label: str | None = None
        """Set while per-round completion reports are armed (background launches)."""
        self.registered = False
        """Whether the supervisor's registry holds it (a subagent_id the model can use)."""
        self.background = False
        """Launched with ``run_in_background``: a standing sink, messages to the live tap."""
        self.ended = trio.Event()
        """Set once the child session is closed and the session's task returned."""
        self._child: SubagentChild | None = None
        self._messages: collections.deque[Message] = collections.deque(maxlen=MESSAGE_BUFFER_CAP)
        self._tap: Callable[[Message], None] | None = None
        self._killed = False
        self._release = trio.Event()
        self._idle = trio.Event()
        self._idle.set()
        self._scope = trio.CancelScope()
        self._nursery: trio.Nursery | None = None
        self._round_interrupt: trio.Event | None = None
        self._wrote_text = False
        self._ended_line = True
        """Whether the text delivered in this output so far ends a line (answers are
        kept apart by one; a new output, with nothing pending, starts afresh)."""
        self._abort_reason: str | None = None
        self._windows = 0
        self._window_sink: _Sink | None = None
        self._standing_sink: _Sink | None = None
        self._approvals: list[_PendingApproval] = []
        self._changed = trio.lowlevel.ParkingLot()
        self._approvals_changed = trio.lowlevel.ParkingLot()

    # ------------------------------------------------------------------ identity

    @property
    def opened(self) -> bool:
        """Whether the child session was opened (even if its spawner was cancelled since)."""
        return self._child is not None

    @property
    def child(self) -> SubagentChild:
        """The open child session (only after a successful spawn)."""
        assert self._child is not None
        return self._child

    @property
    def session_id(self) -> str:
        """The child's session id: the origin hop of its messages."""
        return self.child.session_id

    @property
    def session_meta(self) -> om.OmniMessage[om.SessionMetaPayload]:
        """The child's ``session_meta``, origin-tagged as it is forwarded upward (once)."""
        return om.with_origin(self.child.session_meta, self.session_id)

    @property
    def killed(self) -> bool:
        """Whether the session was killed (or released): no round starts any more."""
        return self._killed

    @property
    def pending_approvals(self) -> int:
        """Child tool calls waiting for an approval (for the model's hint)."""
        return len(self._approvals)

    @property
    def has_output(self) -> bool:
        """Whether buffered messages or text wait for a window."""
        return bool(self._messages) or bool(self.text)

    # ------------------------------------------------------------------ lifetime

    async def run(
        self,
        runner: SubagentRunner,
        request: SubagentRequest,
        *,
        task_status: trio.TaskStatus[None],
    ) -> None:
        """The session's task: open the child, serve rounds until released, close it.

        A child that cannot be opened raises to the spawner (through ``nursery.start``);
        once it is open, an error while closing it is logged, never raised into the
        Environment's nursery: a broken child must not take its parent down.
        """
        started = False
        try:
            with self._scope:
                async with runner.open_child(request) as child, trio.open_nursery() as nursery:
                    self._child = child
                    self._nursery = nursery
                    nursery.start_soon(self._pump_approvals)
                    task_status.started()
                    started = True
                    await self._release.wait()
                    await self._idle.wait()  # a round ends gracefully after its interrupt
                    nursery.cancel_scope.cancel()
        except Exception as exc:
            if not started:
                raise
            warn(f"[penguin] subagent {self.subagent_id} failed to close: {error_text(exc)}")
        finally:
            self._killed = True
            self.running = False
            self.ended.set()
            self._changed.unpark_all()
            self._on_end(self)

    async def wait_idle(self) -> None:
        """Wait until no round is running (returns at once when none is)."""
        await self._idle.wait()

    def kill(self) -> None:
        """Abort the round, deny every queued approval, release the child (4.12; idempotent).

        Never blocks: the session's task closes the child once the round has ended;
        :attr:`ended` says when. No report is sent for a killed session.
        """
        if self._killed:
            return
        self._killed = True
        self.report_label = None
        if self._round_interrupt is not None:
            self._round_interrupt.set()
        for request in list(self._approvals):
            self._settle(request, "deny")
        self._release.set()
        self._changed.unpark_all()

    def cancel(self) -> None:
        """The hard stop of dispose: cancel the session's task (after :meth:`kill`)."""
        self.kill()
        self._scope.cancel()

    # ------------------------------------------------------------------ rounds

    def start_round(self, prompt: str) -> None:
        """Run ``prompt`` as a new round on the child; :class:`SubagentSpawnError` if not now."""
        if self._killed or self._nursery is None:
            raise SubagentSpawnError("subagent session disposed")
        if self.running:
            raise SubagentSpawnError("subagent is still running")
        self.running = True
        self.exit = None
        self._idle = trio.Event()
        interrupt = self._round_interrupt = trio.Event()
        self._nursery.start_soon(self._round, prompt, interrupt)

    async def _round(self, prompt: str, interrupt: trio.Event) -> None:
        child = self.child
        self._wrote_text = False
        self._ended_line = True
        self._abort_reason = None
        self.last_reply = ""
        exit_ = RoundExit("failed", "[subagent aborted: cancelled]")  # a hard stop
        try:
            async with child.run(prompt, approve=self._child_approve, interrupt=interrupt) as rnd:
                async for message in rnd:
                    self._accept(om.with_origin(message, child.session_id))
                result = rnd.result
            exit_ = round_exit(
                status=result.status,
                error_message=result.error_message,
                abort_reason=self._abort_reason,
                wrote_text=self._wrote_text,
            )
        except Exception as exc:
            exit_ = round_exit(status=None, error=error_text(exc))
        finally:
            self.exit = exit_
            self.running = False
            self._round_interrupt = None
            self._idle.set()
            self._changed.unpark_all()
            self._report_round()

    def _accept(self, message: Message) -> None:
        """One child message (already tagged): account for it, then buffer or tap it."""
        origin = message.origin or ()
        payload = message.payload
        if len(origin) == 1:
            if isinstance(payload, om.PartialTextPayload):
                if payload.event_type == "start" and not self._ended_line:
                    self.text.append("\n")  # the next answer's text starts on a line of its own
                    self._ended_line = True
                if payload.event_type == "delta" and payload.text:
                    self.text.append(payload.text)
                    self._wrote_text = True
                    self._ended_line = payload.text.endswith("\n")
            elif isinstance(payload, om.AbortPayload):
                self._abort_reason = payload.reason or "aborted"
            elif isinstance(payload, om.TextPayload) and payload.role == "assistant":
                self.last_reply = payload.text
        tap = self._tap
        if tap is not None:
            tap(message)
        else:
            self._messages.append(message)
        self._changed.unpark_all()

    def _report_round(self) -> None:
        label = self.report_label
        if label is None or self._killed or self.exit is None:
            return
        if not self._windows:
            # What the report says was produced needs no second delivery, and a background
            # session nobody polls must not hold a megabyte of it.
            self.text.drain()
        self._report(
            BackgroundReport(
                kind="subagent",
                id=self.subagent_id,
                label=label,
                status=self.exit.status,
                detail=self.exit.note or "",
                output=report_output(self.last_reply),
            )
        )

    # ------------------------------------------------------------------ windows

    def take_messages(self) -> list[Message]:
        """Every buffered child message, oldest first; the buffer is emptied."""
        taken = list(self._messages)
        self._messages.clear()
        return taken

    async def wait_for_change(self) -> None:
        """Sleep until a new message or text, the end of a round, or the end of the session."""
        await self._changed.park()

    @contextlib.contextmanager
    def window(self, approve: om.ApproveFn | None) -> Iterator[None]:
        """A collect window is open: ``approve`` is the sink approvals go to meanwhile.

        A later window's sink replaces an earlier one's; when a window closes, the
        standing sink (if any) takes over again.
        """
        sink = None if approve is None else _Sink(approve)
        if not self.text:
            self._ended_line = True  # a new tool output: nothing of it to keep apart yet
        self._windows += 1
        if sink is not None:
            self._window_sink = sink
            self._approvals_changed.unpark_all()
        try:
            yield
        finally:
            self._windows -= 1
            if not self.text:
                self._ended_line = True  # all of it delivered: the next output starts afresh
            if sink is not None and self._window_sink is sink:
                self._window_sink = None
                self._approvals_changed.unpark_all()

    def go_background(self, approve: om.ApproveFn | None, tap: Callable[[Message], None]) -> None:
        """Background launch: a standing approval sink and a live tap (3.8.7)."""
        self.background = True
        self._standing_sink = None if approve is None else _Sink(approve)
        self._tap = tap
        self._approvals_changed.unpark_all()

    # ------------------------------------------------------------------ approvals

    async def _child_approve(self, call: ToolCall) -> om.ApprovalVerdict:
        """The approver the child session is given: queue, and wait for a sink's answer."""
        if self._killed:
            await trio.lowlevel.checkpoint()
            return "deny"
        request = _PendingApproval(om.with_origin(call, self.session_id))
        self._approvals.append(request)
        self._approvals_changed.unpark_all()
        try:
            await request.decided.wait()
        finally:
            if not request.decided.is_set():  # the child stopped waiting (interrupted)
                self._withdraw(request)
        return request.verdict

    def _settle(self, request: _PendingApproval, verdict: om.ApprovalVerdict) -> None:
        """The first answer wins; later ones are ignored."""
        if request.decided.is_set():
            return
        request.verdict = verdict
        request.decided.set()
        self._withdraw(request)

    def _withdraw(self, request: _PendingApproval) -> None:
        with contextlib.suppress(ValueError):
            self._approvals.remove(request)
        for scope in request.consultations:
            scope.cancel()
        self._approvals_changed.unpark_all()

    async def _pump_approvals(self) -> None:
        """Consult the head request through the current sink, one request at a time.

        A request already asked through this very sink is not asked again; a new
        sink (a new window) asks it again, and whichever answer comes first wins.
        """
        while True:
            sink = self._window_sink or self._standing_sink
            if self._approvals and sink is not None and self._nursery is not None:
                head = self._approvals[0]
                if sink not in head.asked:
                    head.asked.append(sink)
                    self._nursery.start_soon(self._consult, head, sink)
            await self._approvals_changed.park()

    async def _consult(self, request: _PendingApproval, sink: _Sink) -> None:
        with trio.CancelScope() as scope:
            request.consultations.append(scope)
            if request.decided.is_set():
                return
            self._settle(request, await consult(sink.approve, request.call))


# --------------------------------------------------------------------------- the supervisor


@final
class SubagentSupervisor:
    """The capped registry of subagent sessions of one Environment.

    Create it with the Environment's nursery and where reports go (the command
    supervisor's channel); :meth:`aclose` ends every session.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        post_report: Callable[[BackgroundReport], None],
        spawn_limit: int = DEFAULT_SPAWN_LIMIT,
        cap: int = SUBAGENT_CAP,
        dispose_grace: float = DISPOSE_GRACE,
    ) -> None:
        if spawn_limit < 1:
            raise ValueError(f"the subagent spawn limit must be at least 1, got {spawn_limit}")
        self._nursery = nursery
        self._post_report = post_report
        self.spawn_limit = spawn_limit
        """How many subagents this session may spawn in its lifetime."""
        self.spawned = 0
        """How many it has spawned so far."""
        self.dispose_grace = dispose_grace
        self._registry: SessionRegistry[SubagentSession] = SessionRegistry(cap)
        self._live: set[SubagentSession] = set()
        self._closed = False
        self.tap = MessageTap()
        """Background launches' messages, for the host (``Environment.subagent_messages``)."""
        self._sweeping = False  # the idle sweep starts with the first registration

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` ran: no spawn, no registration, no report."""
        return self._closed

    def _report(self, report: BackgroundReport) -> None:
        if not self._closed:
            self._post_report(report)

    @property
    def spawn_limit_reached(self) -> bool:
        """Whether this session has spawned as many subagents as it may."""
        return self.spawned >= self.spawn_limit

    # ------------------------------------------------------------------ admission

    def make_room(self) -> bool:
        """Evict idle sessions until one more fits; ``False`` if only running ones are left."""
        while self._registry.full:
            victim = self._registry.eviction_candidate(
                finished=lambda s: not s.running, evict_running=False
            )
            if victim is None:
                return False
            self._drop(victim)
        return True

    async def spawn(self, runner: SubagentRunner, request: SubagentRequest) -> SubagentSession:
        """Open a child session (unregistered); the runner's exception if it cannot.

        Counts toward :attr:`spawn_limit`. Raises :class:`SubagentSupervisorClosedError`
        once the supervisor is closed.
        """
        if self.closed:
            raise SubagentSupervisorClosedError
        session = SubagentSession(report=self._report, on_end=self._live.discard)
        self._live.add(session)
        try:
            await self._nursery.start(partial(session.run, runner, request))
        except BaseException:
            if session.opened:
                session.kill()  # opened, but the caller was cancelled before start() returned
            else:
                self._live.discard(session)
            raise
        self.spawned += 1
        session.subagent_id = self._new_id(session.session_id)
        if session.killed:  # disposed while the child was being opened
            raise SubagentSupervisorClosedError
        return session

    def _new_id(self, session_id: str) -> str:
        taken = {s.subagent_id for s in self._live} | set(self._registry)
        candidate = f"subagent-{session_id[-8:]}"
        while candidate in taken:
            candidate = f"subagent-{secrets.token_hex(4)}"
        return candidate

    def register(self, session: SubagentSession) -> str:
        """Keep a session past its call; evict an idle one first when full (may overshoot).

        Raises :class:`SubagentSupervisorClosedError` (and kills the session) once closed.
        """
        if self._closed:
            session.kill()
            raise SubagentSupervisorClosedError
        self.make_room()
        self._registry.add(session.subagent_id, session, trio.current_time())
        if not self._sweeping:
            self._sweeping = True
            self._nursery.start_soon(self._sweep_idle)
        session.registered = True
        return session.subagent_id

    def get(self, subagent_id: str) -> SubagentSession | None:
        """A registered session by id; refreshes its last access (4.3)."""
        return self._registry.get(subagent_id, trio.current_time())

    def _drop(self, subagent_id: str) -> None:
        session = self._registry.remove(subagent_id)
        if session is not None:
            session.registered = False
            session.kill()

    def kill(self, session: SubagentSession) -> None:
        """Unregister and kill ``session`` without waiting (4.12)."""
        if session.registered:
            self._drop(session.subagent_id)
        session.kill()

    async def remove(self, session: SubagentSession) -> None:
        """Kill ``session`` and wait until its child session is closed."""
        self.kill(session)
        await session.ended.wait()

    # ------------------------------------------------------------------ background

    def launch_in_background(
        self, session: SubagentSession, prompt: str, label: str, approve: om.ApproveFn | None
    ) -> str:
        """Register, arm per-round reports, attach the standing sink and the tap, start (3.8.7)."""
        subagent_id = self.register(session)
        session.report_label = label
        session.go_background(approve, self.tap)
        session.start_round(prompt)
        return subagent_id

    def disarm_report(self, session: SubagentSession) -> None:
        """No more reports for this session (kill_subagent, 3.10.2)."""
        session.report_label = None

    def has_running_background(self) -> bool:
        """Whether a registered subagent has a round running (4.13)."""
        return any(session.running for _, session in self._registry.items())

    # ------------------------------------------------------------------ windows

    async def collect(
        self,
        session: SubagentSession,
        window: float,
        emit: Emit,
        forward: Forward,
        approve: om.ApproveFn | None,
    ) -> bool:
        """Deliver the session's output for ``window`` seconds or until its round ends.

        Buffered messages are forwarded (``forward``) and the direct child's text is
        emitted (``emit``) as they arrive; approvals go to ``approve`` meanwhile.
        Returns whether no round is running (the round ended, or none was). Every
        check before a wait is synchronous: no wake-up is lost between them.
        """
        deadline = trio.current_time() + window
        with session.window(approve):
            while True:
                over = not session.running
                for message in session.take_messages():
                    await forward(message)
                if session.text:
                    await emit(session.text.drain())
                if over:
                    return True
                if trio.current_time() >= deadline:
                    return False
                if not session.has_output and session.running:
                    with trio.move_on_at(deadline):
                        await session.wait_for_change()

    # ------------------------------------------------------------------ lifetime

    async def _sweep_idle(self) -> None:
        while True:
            await trio.sleep(IDLE_SWEEP_INTERVAL)
            for subagent_id in self._registry.idle_keys(trio.current_time(), IDLE_REAP_AFTER):
                session = self._registry.peek(subagent_id)
                if session is not None and not session.running:
                    self._drop(subagent_id)

    async def aclose(self) -> None:
        """Dispose (4.12): every session killed and waited for; no report, no spawn.

        Safe to call more than once. Runs shielded, so a cancelled owner still
        leaves no child session open. A child that does not end its round within
        :attr:`dispose_grace` seconds is cancelled.
        """
        self._closed = True
        with trio.CancelScope(shield=True):
            for subagent_id in list(self._registry):
                self._drop(subagent_id)
            live = list(self._live)
            for session in live:
                session.kill()
            with trio.move_on_after(self.dispose_grace):
                for session in live:
                    await session.ended.wait()
            for session in live:
                if not session.ended.is_set():
                    session.cancel()
            for session in live:
                await session.ended.wait()
        self.tap.close()
