"""The server's tasks: start, queue, run, steer and abort (S5.1-S5.4).

Tasks run in the server's nursery, one per session at most (S5.4), never in the
request that started them. Everything a run yields is published on the session's
:class:`~._channel.EventChannel`; ``task_state`` is published (on the session's channel
and, as ``session_state``, on the server's) when the state flips, ``lastActiveAt`` is
written at the start and end of every task. Each run is approved by a
:class:`~._approver.SessionApprover` that reads the mode from the index on every
decision.

Abort sets the run's interrupt and denies what is pending (in that order, so the
denied calls record no decision: S6.6). A task that raises is logged on stderr and the
session goes back to ``idle``. A trace write the disk refuses (the trace writer's
``failure``) interrupts the task: it ends ``failed`` with ``trace write failed: …`` as
its ``task_state`` message, and the Session is closed so that the next task reopens it
from what the trace holds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Final, final

import trio

from penguin import _log
from penguin import protocol as om
from penguin.agent import Session
from penguin.trace import TraceWriteError

from ._approver import SessionApprover
from ._channel import EventChannel
from ._errors import ApiError
from ._index import SessionIndex, SessionRow
from ._live import Live, LiveSessions
from ._scan import task_title
from ._shapes import task_state

__all__ = ["Tasks"]

logger: Final = _log.child("server")

_FLUSH_GRACE: Final = 5.0
_PUBLISH_SLICE: Final = 32
"""Messages a task publishes before it lets the subscribers' writers run."""

OpenSession = Callable[[Live, SessionRow], Awaitable[Session]]


@final
class Tasks:
    """Starts and runs the tasks of ``live``'s sessions in ``nursery``; see the module docstring."""

    def __init__(
        self,
        live: LiveSessions,
        index: SessionIndex,
        events: EventChannel,
        nursery: trio.Nursery,
        *,
        open_session: OpenSession,
        refuse_when_closing: Callable[[], None],
    ) -> None:
        self._live = live
        self._index = index
        self._events = events
        self._nursery = nursery
        self._open_session = open_session
        self._refuse_when_closing = refuse_when_closing

    async def start(
        self, row: SessionRow, texts: Sequence[str], *, queue_if_busy: bool = False
    ) -> bool:
        """Start a task of ``row``'s session, or queue it; True when it was queued."""
        session_id = row.session_id
        self._refuse_when_closing()
        live = self._live.for_session(session_id)
        while live.busy and queue_if_busy:
            if live.queue_open:
                live.queued.append([om.user_text(text) for text in texts])
                return True
            await live.task_done.wait()  # it is ending: this one starts after it
            self._refuse_when_closing()
        if live.busy:
            raise ApiError(
                409,
                "task_in_progress",
                f"Session {session_id!r} is already running a task; steer it or abort it.",
            )
        live.busy = True
        try:
            if row.title is None:  # untitled: named after its first task
                title = task_title(texts[0]) if texts else None
                if title is not None:
                    await self._index.update(session_id, title=title, title_set=True)
            session = await self._open_session(live, row)
            messages = [om.user_text(text) for text in texts]
            await self._nursery.start(self._run, live, session, messages)
        except BaseException:
            live.busy = False
            raise
        return False

    def _publish_state(self, live: Live, state: str, at: str, failure: str | None = None) -> None:
        live.channel.publish_server_event(task_state(state, failure))
        self._events.publish_server_event(
            {
                "type": "session_state",
                "sessionId": live.session_id,
                "state": state,
                "lastActiveAt": at,
                "hasTrace": True,
            }
        )

    async def _run(
        self,
        live: Live,
        session: Session,
        messages: list[om.OmniMessage[om.Payload]],
        *,
        task_status: trio.TaskStatus[None],
    ) -> None:
        interrupt = trio.Event()
        writer = session.recorder.writer
        failure: str | None = None
        watching = trio.CancelScope()

        async def end_on_trace_failure() -> None:
            nonlocal failure
            with watching:
                failure = str(await writer.wait_failure())
                interrupt.set()  # the trace has a gap: end the task (issue 21 item 4)

        approver = SessionApprover(
            self._index,
            live.session_id,
            live.approvals,
            session.environment.tool_permission,
            allow_list=live.allow_list,
        )
        live.interrupt = interrupt
        live.running = True
        live.failure = None
        live.task_done = trio.Event()
        live.tasked = True
        live.queue_open = True
        try:
            with trio.CancelScope() as scope:
                live.task_scope = scope
                started = om.now_iso()
                self._publish_state(live, "running", started)
                self._nursery.start_soon(end_on_trace_failure)
                task_status.started()
                try:
                    while True:
                        await self._index.update(live.session_id, last_active_at=started)
                        async with session.run(
                            messages, approve=approver, interrupt=interrupt
                        ) as run:
                            published = 0
                            async for message in run:
                                live.channel.publish_message(message)
                                published += 1
                                if published % _PUBLISH_SLICE == 0:
                                    await trio.lowlevel.checkpoint()
                        if not live.queued or interrupt.is_set():
                            break
                        messages = live.queued.pop(0)
                        started = om.now_iso()
                except Exception as exc:
                    trace_failure = _trace_failure(exc)
                    if trace_failure is None:
                        logger.exception("penguin server: the task of %s failed", live.session_id)
                    else:
                        failure = trace_failure
        finally:
            watching.cancel()
            live.queue_open = False  # before any checkpoint: a later task waits for the end
            ended = om.now_iso()
            with trio.CancelScope(shield=True), trio.move_on_after(_FLUSH_GRACE):
                try:
                    await session.flush_trace()
                    await self._index.update(live.session_id, last_active_at=ended)
                except Exception:
                    logger.exception("penguin server: ending the task of %s", live.session_id)
            if failure is None and writer.failure is not None:
                failure = str(writer.failure)  # the task's last records, flushed just now
            if failure is not None:
                logger.warning("penguin server: task of %s failed: %s", live.session_id, failure)
                # Its writer has a gap now: the next task reopens the session from what the
                # trace holds, with a new writer, as after a restart.
                self._nursery.start_soon(self._close_failed, live)
            live.failure = failure
            live.running = False
            live.busy = False
            live.interrupt = None
            live.task_scope = None
            live.queued.clear()
            live.approvals.deny_all()
            live.idle_since = trio.current_time()
            self._publish_state(live, live.state, ended, failure)
            live.task_done.set()

    async def _close_failed(self, live: Live) -> None:
        """Close the Session of a task whose trace write failed (a later task reopens it)."""
        async with live.opening:
            if live.busy or live.holder is None:
                return
            await self._live.release(live)
            live.holder = None

    @staticmethod
    def steer(session_id: str, live: Live | None, text: str) -> None:
        """Deliver ``text`` to the running task between turns (S5.2); 409 when idle."""
        session = None if live is None or not live.running else live.session
        if session is None or not session.steer([om.user_text(text)]):
            raise ApiError(
                409, "not_running", f"Session {session_id!r} has no running task to steer."
            )

    @staticmethod
    def abort(live: Live | None) -> bool:
        """Interrupt the running task gracefully (S5.3); False when the session is idle."""
        if live is None or not live.running or live.interrupt is None:
            return False
        live.interrupt.set()  # first: the denied calls then record no decision (S6.6)
        live.queue_open = False  # what was queued is dropped; what comes next waits
        live.approvals.deny_all()
        return True


def _trace_failure(exc: BaseException) -> str | None:
    """``trace write failed: …`` when ``exc`` is (or holds only) a failed trace write."""
    if isinstance(exc, TraceWriteError):
        return str(exc)
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _trace_failure(exc.exceptions[0])
    return None
