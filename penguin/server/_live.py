"""What the server holds in memory per session, and the one way a Session is opened and closed.

:class:`Live` is one session's in-memory state (channel, approvals, the task's flags,
its open Session); :class:`LiveSessions` is the registry of them: a penguin
:class:`~penguin.Session` is an ``async with`` block, so each open one is kept open by a
:class:`~penguin.agent.SessionHolder` (the chat's too) in the server's nursery
(:meth:`LiveSessions.open`, :meth:`LiveSessions.ensure_open`) until it is released.
:meth:`LiveSessions.close` is the one close path of live sessions, for DELETE and the
shutdown alike: interrupt, deny, end the subscribers, wait ``grace`` seconds for the
tasks, cancel what is left, then close the Sessions (their Environments kill every
process they started).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Final, Literal, final

import attrs
import trio

from penguin import config as cfg
from penguin import protocol as om
from penguin.agent import Agent, Session, SessionHolder, SessionNotFoundError
from penguin.approval import AllowList
from penguin.environment import WorkspaceError
from penguin.trace import SessionLockedError

from ._approvals import ApprovalRegistry, PendingApproval
from ._channel import EventChannel
from ._errors import ApiError
from ._index import SessionRow
from ._shapes import approval_request

__all__ = ["SURFACE", "Live", "LiveSessions", "Opener"]


SURFACE: Final = "penguin server"
"""How a session this server holds open is named to a process refused it (chat.md C5.6)."""

Opener = Callable[[], AbstractAsyncContextManager[Session]]


@final
@attrs.define(eq=False)
class Live:
    """What the server holds in memory for one session: channel, approvals, task, Session."""

    session_id: str
    channel: EventChannel
    approvals: ApprovalRegistry
    holder: SessionHolder | None = None
    opening: trio.Lock = attrs.field(factory=trio.Lock)
    busy: bool = False
    """A task is being started or is running (a second one is refused)."""
    running: bool = False
    interrupt: trio.Event | None = None
    task_scope: trio.CancelScope | None = None
    task_done: trio.Event = attrs.field(factory=trio.Event)
    idle_since: float = 0.0
    """``trio.current_time()`` when the session was last seen busy (or opened)."""
    allow_list: AllowList = attrs.field(factory=AllowList)
    """What the session allows without asking ("allow for the session"); kept in memory."""
    failure: str | None = None
    """Why the last task failed (``trace write failed: …``); None after a task that did not."""
    tasked: bool = False
    """A task has started since the server opened the session (``hasTrace``)."""
    queued: list[list[om.OmniMessage[om.Payload]]] = attrs.field(factory=list)
    """Tasks sent with ``queueIfBusy`` while one ran; they run next, in order."""
    queue_open: bool = False
    """The running task will still take what is queued (not ending, not aborted)."""

    def __attrs_post_init__(self) -> None:
        self.task_done.set()  # idle

    @property
    def state(self) -> Literal["idle", "running", "failed"]:
        """``running`` while a task runs; ``failed`` after a task that failed, until the next."""
        if self.running:
            return "running"
        return "idle" if self.failure is None else "failed"

    @property
    def session(self) -> Session | None:
        """The open Session, if it is open."""
        return None if self.holder is None else self.holder.session


@final
class LiveSessions:
    """The sessions the server holds in memory, and their holder tasks in ``nursery``."""

    def __init__(self, nursery: trio.Nursery, *, epoch: str, grace: float) -> None:
        self.epoch = epoch
        self.grace = grace
        self.by_id: dict[str, Live] = {}
        self.retiring: set[str] = set()
        """Sessions being deleted: they are gone for every route already."""
        self.closing = False
        """The server is shutting down (new channels are born closed)."""
        self.released = 0
        """How many open Sessions have been closed (:mod:`._memory` trims after them)."""
        self._nursery = nursery

    def get(self, session_id: str) -> Live | None:
        """The session's live state, if the server holds one."""
        return self.by_id.get(session_id)

    def __iter__(self) -> Iterator[Live]:
        return iter(list(self.by_id.values()))

    def for_session(self, session_id: str) -> Live:
        """The session's live state, created (with its channel and approvals) if new."""
        live = self.by_id.get(session_id)
        if live is None:
            channel = EventChannel(self.epoch)

            def requested(pending: PendingApproval) -> None:
                channel.publish_server_event(approval_request(pending))

            def resolved(call_id: str, verdict: str) -> None:
                channel.publish_server_event(
                    {"type": "approval_resolved", "toolCallId": call_id, "decision": verdict}
                )

            live = Live(session_id, channel, ApprovalRegistry(requested, resolved))
            if self.closing:
                live.approvals.close()
                channel.close()
            self.by_id[session_id] = live
        return live

    # ------------------------------------------------------------------ opening

    async def open(self, holder: SessionHolder, opener: Opener) -> Session:
        """Open a Session in a holder task of the nursery; 400 when it cannot be opened."""
        try:
            return await holder.open(self._nursery, opener, while_open=self._forward_background)
        except cfg.ConfigError as exc:
            raise ApiError(
                400, "model_not_found", f"The session's model is not usable: {exc}"
            ) from exc
        except WorkspaceError as exc:
            raise ApiError(400, "workspace_not_found", str(exc)) from exc
        except SessionLockedError as exc:  # another process writes it (chat.md C5.6)
            raise ApiError(409, "session_busy", str(exc)) from exc

    async def _forward_background(self, session: Session) -> None:
        """Publish what background subagents say (their live tap) on the session's channel."""
        async for message in session.environment.subagent_messages:
            target = self.by_id.get(session.session_id)
            if target is not None:
                target.channel.publish_message(message)

    async def ensure_open(
        self, live: Live, row: SessionRow, open_agent: Callable[[], Awaitable[Agent]]
    ) -> Session:
        """The session's open Session, resumed from its trace (by ``open_agent()``'s Agent)."""
        async with live.opening:
            if live.session is not None:
                return live.session
            agent = await open_agent()
            holder = SessionHolder()

            def opener() -> AbstractAsyncContextManager[Session]:
                return agent.resume_session(row.session_id, surface=SURFACE)

            try:
                session = await self.open(holder, opener)
            except SessionNotFoundError as exc:
                raise ApiError(
                    409,
                    "session_unavailable",
                    f"Session {row.session_id!r} has no readable trace to resume from: {exc}",
                ) from exc
            live.holder = holder
            live.idle_since = trio.current_time()
            return session

    # ------------------------------------------------------------------ closing

    async def release(self, live: Live) -> None:
        """Close the session's Session (bounded; then cancelled) and wait until it is closed."""
        if live.holder is not None:
            await live.holder.release()
            self.released += 1

    async def close(self, lives: Sequence[Live], *, wait_cancelled: bool) -> None:
        """Interrupt, deny, end the subscribers, wait for the tasks, close the Sessions.

        The tasks share ``grace`` seconds; those still running then are cancelled
        (and, with ``wait_cancelled``, waited for) before the Sessions close together.
        """
        for live in lives:
            if live.interrupt is not None:
                live.interrupt.set()
            live.approvals.close()
            live.channel.close()
        with trio.move_on_after(self.grace):
            for live in lives:
                await live.task_done.wait()
        for live in lives:
            if not live.task_done.is_set() and live.task_scope is not None:
                live.task_scope.cancel()
                if wait_cancelled:
                    await live.task_done.wait()
        async with trio.open_nursery() as closing:
            for live in lives:
                closing.start_soon(self.release, live)
