"""The server's sessions: index rows, open Sessions, tasks, approvals and channels (S4-S7).

:class:`ServerSessions` is what every route calls; it owns the nursery in which the
server's work lives, so nothing a session starts outlives the server:

- **Open sessions.** A penguin :class:`~penguin.Session` is an ``async with`` block; the
  server keeps each one open in a *holder* task of its nursery, from the session's
  creation (or, after a restart, from its first task, when it is resumed from its
  trace) until it is deleted or the server stops. Between tasks the session's
  background commands keep running and can be listed and killed.
- **Tasks** run in the same nursery, one per session at most (S5.4), never in the
  request that started them. Everything a run yields is published on the session's
  :class:`~._channel.EventChannel`; ``task_state`` is published when the state flips,
  ``lastActiveAt`` is written at the start and end of every task.
- **Approvals**: each session has an :class:`~._approvals.ApprovalRegistry`; its runs
  are approved by a :class:`~._approver.SessionApprover` that reads the mode from the
  index on every decision.
- **Idleness** (``idle_close`` seconds, ``penguin server --idle-close``): a session
  whose Session is open with no task running and no background command or background
  subagent alive for that long is closed — its Environment ends its MCP servers and
  everything else it started — and stays listed; its next task reopens it from its
  trace, as after a restart. The sweep runs every :func:`_sweep_interval` seconds and
  takes the session's ``opening`` lock, so it never races a task that is starting.
- **Stopping.** Abort sets the run's interrupt and denies what is pending (in that
  order, so the denied calls record no decision: S6.6). DELETE does that, waits for
  the task, closes the session (its Environment kills every process it started),
  then removes its traces (with those of its subagent children) and scratchpad and
  finally its row; the workspace is never touched. :meth:`ServerSessions.shutdown`
  (S1.4) denies and interrupts everything, waits at most ``grace`` seconds for the
  tasks, closes every session, and leaving :meth:`ServerSessions.open` cancels what
  is still there.

Faults stay inside their session: a task that raises is logged on stderr and the
session goes back to ``idle``; a model that fails ends the task with its stop
reason, as the stream shows. A trace write the disk refuses (the trace writer's
``failure``) interrupts the task: it ends ``failed`` with ``trace write failed: …`` as
its ``task_state`` message, and the Session is closed so that the next task reopens it
from what the trace holds.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Final, Literal, final

import attrs
import trio

from penguin import _log
from penguin import config as cfg
from penguin import protocol as om
from penguin._concurrency import collapse_single
from penguin.agent import Agent, Session, SessionNotFoundError
from penguin.approval import DEFAULT_APPROVAL_MODE, AllowList, Answer
from penguin.environment import BackgroundCommand, WorkspaceError
from penguin.trace import (
    SessionLockedError,
    TraceWriteError,
    find_session,
    read_trace,
    trace_files,
    trace_locations,
)

from ._approvals import ApprovalRegistry, PendingApproval
from ._approver import SessionApprover
from ._channel import EventChannel, Subscriber, server_event_frame
from ._errors import ApiError
from ._index import SessionIndex, SessionRow
from ._requests import CreateSession, Decision, UpdateSession
from ._routes import valid_id
from ._sandbox import SandboxInfo, session_policy
from ._scan import task_title, unindexed_sessions

__all__ = ["IDLE_CLOSE", "SHUTDOWN_GRACE", "ServerSessions", "new_epoch"]

logger: Final = _log.child("server")

SHUTDOWN_GRACE: Final = 10.0
"""Seconds the server waits for interrupted tasks before it stops them hard (S1.4)."""
_CLOSE_GRACE: Final = 10.0
SURFACE: Final = "penguin server"
"""How a session this server holds open is named to a process refused it (chat.md C5.6)."""
"""Seconds a session (and its Environment's process kills) may take to close."""
_FLUSH_GRACE: Final = 5.0
_PUBLISH_SLICE: Final = 32
"""Messages a task publishes before it lets the subscribers' writers run."""
_PROBE_GRACE: Final = 2.0
IDLE_CLOSE: Final = 1800.0
"""Seconds an open session may sit idle before its Environment is closed (S1.1)."""
_SWEEP_MAX: Final = 30.0
_MASK: Final = "********"
"""Stands for a configured API key: the key itself is never sent."""

Opener = Callable[[], AbstractAsyncContextManager[Session]]


def new_epoch() -> str:
    """An epoch for event ids: the server's start time in milliseconds."""
    return str(time.time_ns() // 1_000_000)


@final
@attrs.define(eq=False)
class _Holder:
    """The task that keeps one Session open until it is released."""

    session: Session | None = None
    release: trio.Event = attrs.field(factory=trio.Event)
    done: trio.Event = attrs.field(factory=trio.Event)
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)


@final
@attrs.define(eq=False)
class _Live:
    """What the server holds in memory for one session: channel, approvals, task, Session."""

    session_id: str
    channel: EventChannel
    approvals: ApprovalRegistry
    holder: _Holder | None = None
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


def _task_state(state: str, failure: str | None = None) -> dict[str, object]:
    if failure is not None:
        return {"type": "task_state", "state": state, "message": failure}
    return {"type": "task_state", "state": state}


def _approval_request(pending: PendingApproval) -> dict[str, object]:
    return {"type": "approval_request", **pending.describe()}


@final
class ServerSessions:
    """Every session the server knows; see the module docstring. Open with :meth:`open`."""

    def __init__(
        self,
        root: Path,
        index: SessionIndex,
        nursery: trio.Nursery,
        *,
        epoch: str,
        grace: float = SHUTDOWN_GRACE,
        idle_close: float | None = IDLE_CLOSE,
    ) -> None:
        self.root = root
        self.index = index
        self.epoch = epoch
        self.grace = grace
        self.idle_close = idle_close
        """Seconds of idleness after which an open session is closed; None: never."""
        self.sweeps = 0
        """How many idle sweeps have run (tests wait on it)."""
        self._nursery = nursery
        self._agents: dict[tuple[str, str], Agent] = {}
        self._sandbox = SandboxInfo()
        """Each session's sandboxMode/network (spec/sandbox.md X1.3)."""
        self._live: dict[str, _Live] = {}
        self._retiring: set[str] = set()
        self.closing = False
        self.events = EventChannel(epoch)
        """Server-wide ``session_state`` / ``session_title`` events (``GET /api/events``)."""

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        root: str | os.PathLike[str] | None,
        *,
        epoch: str | None = None,
        grace: float = SHUTDOWN_GRACE,
        idle_close: float | None = IDLE_CLOSE,
    ) -> AsyncIterator[ServerSessions]:
        """Open the index under ``root``, index unlisted traces, and serve until the block ends.

        Leaving the block is the shutdown of S1.4: pending approvals denied, tasks
        interrupted and given ``grace`` seconds, every session closed (and with it
        every process), then whatever is left cancelled. ``idle_close`` is the idleness
        after which an open session is closed (None: never; see the module docstring).
        """
        root_path = cfg.data_root(root)
        index = await SessionIndex.open(root_path)
        try:
            with collapse_single():
                async with trio.open_nursery() as nursery:
                    sessions = cls(
                        root_path,
                        index,
                        nursery,
                        epoch=epoch or new_epoch(),
                        grace=grace,
                        idle_close=idle_close,
                    )
                    await sessions.index_unlisted()
                    if idle_close is not None:
                        nursery.start_soon(sessions._close_idle, idle_close)
                    try:
                        yield sessions
                    finally:
                        try:
                            await sessions.shutdown()
                        finally:
                            nursery.cancel_scope.cancel()
        finally:
            await index.aclose()

    # ------------------------------------------------------------------ the index

    async def index_unlisted(self) -> int:
        """Index the sessions with a trace under the root but no row (S4.8); how many."""
        known = await self.index.ids()
        rows = await trio.to_thread.run_sync(unindexed_sessions, self.root, known)
        added = await self.index.insert_missing(rows)
        if added:
            logger.info("penguin server: indexed %d session(s) found under %s", added, self.root)
        return added

    async def _row(self, session_id: str) -> SessionRow:
        row = None if session_id in self._retiring else await self.index.get(session_id)
        if row is None:
            raise ApiError(404, "session_not_found", f"There is no session {session_id!r}.")
        return row

    async def _known(self, session_id: str) -> _Live | None:
        """404 unless the session exists; its live state when the server holds one.

        A session held in memory exists (it leaves memory before its row goes), so the
        routes a running task needs quickly (approvals, abort, steer) skip the index.
        """
        live = self._live.get(session_id)
        if live is not None and session_id not in self._retiring:
            return live
        await self._row(session_id)
        return self._live.get(session_id)

    def _paths(self, project_id: str, agent_id: str) -> cfg.AgentPaths:
        return cfg.AgentPaths(self.root, project_id, agent_id)

    async def _agent(self, project_id: str, agent_id: str) -> Agent:
        key = (project_id, agent_id)
        agent = self._agents.get(key)
        if agent is None:
            try:
                agent = await trio.to_thread.run_sync(Agent.open, self.root, project_id, agent_id)
            except cfg.ConfigError as exc:
                raise ApiError(
                    400, "agent_config_invalid", f"The agent's configuration is broken: {exc}"
                ) from exc
            agent = self._agents.setdefault(key, agent)
        return agent

    def _live_for(self, session_id: str) -> _Live:
        live = self._live.get(session_id)
        if live is None:
            channel = EventChannel(self.epoch)

            def requested(pending: PendingApproval) -> None:
                channel.publish_server_event(_approval_request(pending))

            def resolved(call_id: str, verdict: str) -> None:
                channel.publish_server_event(
                    {"type": "approval_resolved", "toolCallId": call_id, "decision": verdict}
                )

            live = _Live(session_id, channel, ApprovalRegistry(requested, resolved))
            if self.closing:
                live.approvals.close()
                channel.close()
            self._live[session_id] = live
        return live

    async def _info(
        self, row: SessionRow, *, has_trace: bool | None = None, trace_path: bool = False
    ) -> dict[str, object]:
        live = self._live.get(row.session_id)
        path: Path | None = None
        if live is not None and live.session is not None:
            path = live.session.trace_path
        if has_trace is None or trace_path:
            if path is None or not path.exists():
                traces = self._paths(row.project_id, row.agent_id).traces_dir
                location = await trio.to_thread.run_sync(find_session, traces, row.session_id)
                path = None if location is None else location.path
            has_trace = path is not None
        tasked = row.last_active_at != row.created_at or (live is not None and live.tasked)
        info: dict[str, object] = {
            "sessionId": row.session_id,
            "projectId": row.project_id,
            "agentId": row.agent_id,
            "provider": row.provider,
            "modelId": row.model_id,
            "workspace": row.workspace,
            "approvalMode": row.approval_mode,
            **await self._sandbox.fields(
                row.session_id, self._paths(row.project_id, row.agent_id).traces_dir
            ),
            "title": row.title,
            "archived": row.archived,
            "state": "idle" if live is None else live.state,
            "pendingApprovalCount": 0 if live is None else len(live.approvals),
            "allowList": [] if live is None else list(live.allow_list.entries()),
            "createdAt": row.created_at,
            "lastActiveAt": row.last_active_at,
            "hasTrace": has_trace and tasked,
        }
        info["status"] = info["state"]  # the reference's name for it (issue 22)
        if row.title is None:
            del info["title"]  # absent rather than null, as the reference sends it
        if trace_path:
            info["tracePath"] = None if path is None else str(path)
        return info

    # ------------------------------------------------------------------ sessions

    async def create(
        self, project_id: str, agent_id: str, request: CreateSession
    ) -> dict[str, Any]:
        """Create a session (S4.2): checked, opened, flushed to its trace, then indexed."""
        self._refuse_when_closing()
        if request.workspace is not None:
            await _check_workspace(request.workspace)
        agent = await self._agent(project_id, agent_id)
        await _check_model(agent, request.provider, request.model_id)
        workspace = request.workspace
        policy = await session_policy(agent, request.sandbox_mode, request.network)

        def opener() -> AbstractAsyncContextManager[Session]:
            return agent.session(
                workspace,
                provider=request.provider,
                model_id=request.model_id,
                sandbox=policy,
                surface=SURFACE,
            )

        holder = _Holder()
        session = await self._open(holder, opener)
        try:
            await session.flush_trace()
            meta = session.session_meta
            now = om.now_iso()
            row = SessionRow(
                session_id=session.session_id,
                project_id=project_id,
                agent_id=agent_id,
                provider=None if meta is None else meta.payload.provider,
                model_id=None if meta is None else meta.payload.model_id,
                workspace=str(session.workspace_dir),
                approval_mode=request.approval_mode or DEFAULT_APPROVAL_MODE,
                title=request.title,
                archived=False,
                created_at=now,
                last_active_at=now,
            )
            await self.index.insert(row)
        except BaseException:
            holder.release.set()
            raise
        live = self._live_for(row.session_id)
        live.holder = holder
        live.idle_since = trio.current_time()
        self._sandbox.remember(row.session_id, policy)
        return await self._info(row, has_trace=True)

    async def list_sessions(
        self, project_id: str, agent_id: str, *, archived: bool
    ) -> list[dict[str, Any]]:
        """The agent's sessions, newest ``lastActiveAt`` first (S4.3)."""
        rows = await self.index.list(project_id, agent_id, archived=archived)
        if not rows:
            return []
        traces = self._paths(project_id, agent_id).traces_dir
        with_trace = {
            loc.session_id for loc in await trio.to_thread.run_sync(trace_locations, traces)
        }
        return [await self._info(row, has_trace=row.session_id in with_trace) for row in rows]

    async def get(self, session_id: str) -> dict[str, Any]:
        """One session, with its ``tracePath`` (S4.4)."""
        return await self._info(await self._row(session_id), trace_path=True)

    async def update(self, session_id: str, request: UpdateSession) -> dict[str, Any]:
        """Change mode, title or archived (S4.5); the new mode is stored before this returns."""
        await self._row(session_id)
        row = await self.index.update(
            session_id,
            approval_mode=request.approval_mode,
            title=request.title,
            title_set=request.title_set,
            archived=request.archived,
        )
        if row is None:
            raise ApiError(404, "session_not_found", f"There is no session {session_id!r}.")
        if request.title_set:
            self.events.publish_server_event(
                {"type": "session_title", "sessionId": session_id, "title": row.title}
            )
        return await self._info(row)

    async def messages(self, session_id: str) -> list[dict[str, Any]]:
        """Every record of the session's traces, in order, as the reader returns them (S4.7)."""
        row = await self._row(session_id)
        traces = self._paths(row.project_id, row.agent_id).traces_dir

        def read() -> list[dict[str, Any]]:
            found: list[dict[str, Any]] = []
            for path in trace_files(traces, session_id):
                try:
                    found.extend(om.to_dict(message) for message in read_trace(path))
                except OSError:
                    continue  # removed between the listing and the read
            return found

        return await trio.to_thread.run_sync(read)

    async def delete(self, session_id: str) -> None:
        """Stop everything of the session and remove its files and row (S4.6)."""
        row = await self._row(session_id)
        self._retiring.add(session_id)
        try:
            live = self._live.pop(session_id, None)
            if live is not None:
                await self._retire(live)
            paths = self._paths(row.project_id, row.agent_id)
            await trio.to_thread.run_sync(_remove_session_files, paths, session_id)
            await self.index.delete(session_id)
        finally:
            self._retiring.discard(session_id)

    async def _retire(self, live: _Live) -> None:
        """Interrupt, deny, end the subscribers, wait for the task, close the Session."""
        if live.interrupt is not None:
            live.interrupt.set()
        live.approvals.close()
        live.channel.close()
        with trio.move_on_after(self.grace):
            await live.task_done.wait()
        if not live.task_done.is_set() and live.task_scope is not None:
            live.task_scope.cancel()
            await live.task_done.wait()
        await self._release(live)

    async def _release(self, live: _Live) -> None:
        holder = live.holder
        if holder is None:
            return
        holder.release.set()
        with trio.move_on_after(_CLOSE_GRACE):
            await holder.done.wait()
        if not holder.done.is_set():
            holder.scope.cancel()
            await holder.done.wait()

    # ------------------------------------------------------------------ open Sessions

    async def _open(self, holder: _Holder, opener: Opener) -> Session:
        try:
            session: Session = await self._nursery.start(self._hold, holder, opener)
        except cfg.ConfigError as exc:
            raise ApiError(
                400, "model_not_found", f"The session's model is not usable: {exc}"
            ) from exc
        except WorkspaceError as exc:
            raise ApiError(400, "workspace_not_found", str(exc)) from exc
        except SessionLockedError as exc:  # another process writes it (chat.md C5.6)
            raise ApiError(409, "session_busy", str(exc)) from exc
        return session

    async def _hold(
        self,
        holder: _Holder,
        opener: Opener,
        *,
        task_status: trio.TaskStatus[Session],
    ) -> None:
        started = False
        try:
            with holder.scope:
                async with opener() as session, trio.open_nursery() as tap:
                    holder.session = session
                    tap.start_soon(self._forward_background, session)
                    task_status.started(session)
                    started = True
                    await holder.release.wait()
                    tap.cancel_scope.cancel()
        except Exception:
            if not started:
                raise
            logger.exception("penguin server: closing a session failed")
        finally:
            holder.session = None
            holder.done.set()

    async def _forward_background(self, session: Session) -> None:
        """Publish what background subagents say (their live tap) on the session's channel."""
        async for message in session.environment.subagent_messages:
            target = self._live.get(session.session_id)
            if target is not None:
                target.channel.publish_message(message)

    async def _ensure_open(self, live: _Live, row: SessionRow) -> Session:
        async with live.opening:
            if live.session is not None:
                return live.session
            agent = await self._agent(row.project_id, row.agent_id)
            holder = _Holder()

            def opener() -> AbstractAsyncContextManager[Session]:
                return agent.resume_session(row.session_id, surface=SURFACE)

            try:
                session = await self._open(holder, opener)
            except SessionNotFoundError as exc:
                raise ApiError(
                    409,
                    "session_unavailable",
                    f"Session {row.session_id!r} has no readable trace to resume from: {exc}",
                ) from exc
            live.holder = holder
            live.idle_since = trio.current_time()
            return session

    # ------------------------------------------------------------------ idleness

    async def _close_idle(self, idle_close: float) -> None:
        """Close every session idle for ``idle_close`` seconds, forever (the nursery's task)."""
        interval = _sweep_interval(idle_close)
        while True:
            await trio.sleep(interval)
            for live in list(self._live.values()):
                await self._close_if_idle(live, idle_close)
            self.sweeps += 1

    async def _close_if_idle(self, live: _Live, idle_close: float) -> None:
        if live.holder is None or self.closing or live.session_id in self._retiring:
            return
        now = trio.current_time()
        session = live.session
        if live.busy or (session is not None and _keeps_open(session)):
            live.idle_since = now
            return
        if now - live.idle_since < idle_close:
            return
        async with live.opening:  # a task being started waits until this one is closed
            if live.busy or live.holder is None or live.session_id in self._retiring:
                return
            logger.info(
                "penguin server: closing session %s after %.0f s idle",
                live.session_id,
                now - live.idle_since,
            )
            await self._release(live)
            live.holder = None

    # ------------------------------------------------------------------ tasks

    def _refuse_when_closing(self) -> None:
        if self.closing:
            raise ApiError(503, "shutting_down", "The server is shutting down; try again later.")

    async def start_task(
        self, session_id: str, texts: Sequence[str], *, queue_if_busy: bool = False
    ) -> bool:
        """Start a task (S5.1); it runs in the server's nursery. 409 when one is running.

        With ``queue_if_busy`` a task sent while one runs is queued instead and runs
        when that one ends, in the same busy period; True when it was queued. One
        sent while the running task ends (or after an abort, which drops the queue)
        waits for it to end and then starts as usual.
        """
        row = await self._row(session_id)
        self._refuse_when_closing()
        live = self._live_for(session_id)
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
                    await self.index.update(session_id, title=title, title_set=True)
            session = await self._ensure_open(live, row)
            messages = [om.user_text(text) for text in texts]
            await self._nursery.start(self._run_task, live, session, messages)
        except BaseException:
            live.busy = False
            raise
        return False

    def _publish_state(self, live: _Live, state: str, at: str, failure: str | None = None) -> None:
        live.channel.publish_server_event(_task_state(state, failure))
        self.events.publish_server_event(
            {
                "type": "session_state",
                "sessionId": live.session_id,
                "state": state,
                "lastActiveAt": at,
                "hasTrace": True,
            }
        )

    async def _run_task(
        self,
        live: _Live,
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
            self.index,
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
                        await self.index.update(live.session_id, last_active_at=started)
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
                    await self.index.update(live.session_id, last_active_at=ended)
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

    async def _close_failed(self, live: _Live) -> None:
        """Close the Session of a task whose trace write failed (a later task reopens it)."""
        async with live.opening:
            if live.busy or live.holder is None:
                return
            await self._release(live)
            live.holder = None

    async def steer(self, session_id: str, text: str) -> None:
        """Deliver ``text`` to the running task between turns (S5.2); 409 when idle."""
        live = await self._known(session_id)
        session = None if live is None or not live.running else live.session
        if session is None or not session.steer([om.user_text(text)]):
            raise ApiError(
                409, "not_running", f"Session {session_id!r} has no running task to steer."
            )

    async def abort(self, session_id: str) -> bool:
        """Interrupt the running task gracefully (S5.3); False when the session is idle."""
        live = await self._known(session_id)
        if live is None or not live.running or live.interrupt is None:
            return False
        live.interrupt.set()  # first: the denied calls then record no decision (S6.6)
        live.queue_open = False  # what was queued is dropped; what comes next waits
        live.approvals.deny_all()
        return True

    # ------------------------------------------------------------------ approvals

    async def approvals(self, session_id: str) -> list[dict[str, object]]:
        """The pending calls, in the order they were asked (S6.4)."""
        live = await self._known(session_id)
        return [] if live is None else [p.describe() for p in live.approvals.pending]

    async def decide(self, session_id: str, call_id: str, decision: Decision) -> None:
        """Answer a pending call (S6.3); the first answer wins, later ones are 404.

        A denial's ``reason`` reaches the model in the denial output; an allow
        ``for_session`` puts the call on the session's allow-list.
        """
        live = await self._known(session_id)
        answer = Answer(decision.decision, for_session=decision.for_session, reason=decision.reason)
        if live is None or not live.approvals.answer(call_id, answer):
            raise ApiError(
                404,
                "approval_not_found",
                f"Session {session_id!r} has no pending approval for tool call {call_id!r}.",
            )

    # ------------------------------------------------------------------ the stream

    async def subscribe(self, session_id: str, last_event_id: str | None) -> Subscriber:
        """A subscriber of the session's channel, with the snapshot of S7.3."""
        await self._known(session_id)
        live = self._live_for(session_id)
        snapshot = [server_event_frame(_task_state(live.state))]
        snapshot.extend(server_event_frame(_approval_request(p)) for p in live.approvals.pending)
        return live.channel.subscribe(last_event_id, snapshot)

    # ------------------------------------------------------------------ processes

    async def processes(self, session_id: str) -> list[dict[str, object]]:
        """The session's background commands (S5.5)."""
        live = await self._known(session_id)
        session = None if live is None else live.session
        if session is None:
            return []
        environment = session.environment
        with trio.move_on_after(_PROBE_GRACE):
            await environment.probe_background_command_services()
        return [_process_row(command) for command in environment.list_background_commands()]

    async def kill_process(self, session_id: str, process_id: str) -> None:
        """Kill one background command of the session; 404 ``process_not_found``."""
        live = await self._known(session_id)
        session = None if live is None else live.session
        if session is None or not await session.environment.kill_background_command(process_id):
            raise ApiError(
                404,
                "process_not_found",
                f"Session {session_id!r} has no process {process_id!r}.",
            )

    # ------------------------------------------------------------------ projects

    async def agents(self, project_id: str) -> list[str]:
        """The project's agents that exist on disk."""
        agents_dir = self.root / project_id / "agents"

        def scan() -> list[str]:
            try:
                names = [entry.name for entry in os.scandir(agents_dir) if entry.is_dir()]
            except (FileNotFoundError, NotADirectoryError):
                return []
            return sorted(name for name in names if valid_id(name))

        return await trio.to_thread.run_sync(scan)

    async def models(self, project_id: str) -> list[dict[str, object]]:
        """The project's configured models (never their keys or endpoints)."""
        paths = self._paths(project_id, cfg.DEFAULT_AGENT_ID)
        try:
            project = await trio.to_thread.run_sync(cfg.load_project_config, paths.project_config)
        except cfg.ConfigError as exc:
            raise ApiError(
                400, "model_not_configured", f"The project's configuration is broken: {exc}"
            ) from exc
        default = project.default_entry()
        if default is None and len(project.models) == 1:
            default = project.models[0]
        return [_model_row(entry, default=entry is default) for entry in project.models]

    # ------------------------------------------------------------------ shutdown

    async def shutdown(self) -> None:
        """S1.4: deny every pending call, interrupt every task, wait ``grace``, close all."""
        self.closing = True
        self.events.close()
        lives = list(self._live.values())
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
        async with trio.open_nursery() as closing:
            for live in lives:
                closing.start_soon(self._release, live)


def _trace_failure(exc: BaseException) -> str | None:
    """``trace write failed: …`` when ``exc`` is (or holds only) a failed trace write."""
    if isinstance(exc, TraceWriteError):
        return str(exc)
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _trace_failure(exc.exceptions[0])
    return None


def _sweep_interval(idle_close: float) -> float:
    """How often idleness is checked: a quarter of ``idle_close``, within 0.05-30 s."""
    return min(max(idle_close / 4, 0.05), _SWEEP_MAX)


def _keeps_open(session: Session) -> bool:
    """Whether a background command or background subagent of ``session`` is alive."""
    environment = session.environment
    if environment.has_running_background_subagents():
        return True
    return any(command.running for command in environment.list_background_commands())


def _process_row(command: BackgroundCommand) -> dict[str, object]:
    """S5.5's fields, and the reference's (``pid``, ``cmd``, ``cwd``, ``startedAt``, ``running``).

    ``serviceUrl`` is left out when there is none: the reference's web app reads any
    value present, null included, as a URL (issue 22).
    """
    row: dict[str, object] = {
        "processId": command.process_id,
        "command": command.cmd,
        "state": "running" if command.running else "exited",
        "exitCode": None,
        "pid": command.pid,
        "cmd": command.cmd,
        "cwd": command.cwd,
        "startedAt": _timestamp(command.started_at),
        "running": command.running,
    }
    if command.service_url is not None:
        row["serviceUrl"] = command.service_url
    return row


def _model_row(entry: cfg.ModelEntry, *, default: bool) -> dict[str, object]:
    """One model as the API lists it; the key itself never, only that one is set (issue 22)."""
    row: dict[str, object] = {
        "provider": entry.provider,
        "modelId": entry.model_id,
        "vision": entry.vision,
        "isDefault": default,
    }
    if entry.context_window is not None:
        row["contextWindow"] = entry.context_window
    if entry.api_key:
        row["credential"] = {"apiKeyMasked": _MASK}
    elif entry.api_key_env and os.environ.get(entry.api_key_env):
        row["envKeyMasked"] = _MASK
    return row


def _timestamp(epoch_seconds: float) -> str:
    """``epoch_seconds`` as the protocol writes times (``2026-11-29T21:28:46.123Z``)."""
    millis = int(epoch_seconds * 1000)
    second = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(millis // 1000))
    return f"{second}.{millis % 1000:03d}Z"


async def _check_workspace(workspace: str) -> None:
    if not os.path.isabs(workspace) or not await trio.Path(workspace).is_dir():
        raise ApiError(
            400,
            "workspace_not_found",
            f"The workspace {workspace!r} is not an existing absolute directory.",
        )


async def _check_model(agent: Agent, provider: str | None, model_id: str | None) -> None:
    try:
        project = await trio.to_thread.run_sync(agent.project_config)
    except cfg.ConfigError as exc:
        raise ApiError(
            400, "model_not_configured", f"The project's configuration is broken: {exc}"
        ) from exc
    if provider is not None and model_id is not None:
        if project.find_model(provider, model_id) is None:
            raise ApiError(
                400,
                "model_not_found",
                f"No model {provider}/{model_id} is configured for this project; add it with "
                "`penguin config model add`.",
            )
        return
    try:
        cfg.resolve_model(project)
    except cfg.ConfigError as exc:
        raise ApiError(400, "model_not_configured", exc.reason) from exc


def _remove_session_files(paths: cfg.AgentPaths, session_id: str) -> None:
    """The session's trace files, its subagent children's, and their scratchpads."""
    doomed = [session_id]
    for path in trace_files(paths.traces_dir, session_id):
        try:
            records = read_trace(path)
        except OSError:
            continue
        for record in records:
            if isinstance(record.payload, om.SubagentPayload):
                doomed.append(record.payload.session_id)
    for sid in doomed:
        try:
            cfg.validate_id(sid, "session id")
        except ValueError:
            continue
        for path in trace_files(paths.traces_dir, sid):
            path.unlink(missing_ok=True)
        shutil.rmtree(paths.scratchpad(sid), ignore_errors=True)
