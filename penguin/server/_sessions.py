"""The server's sessions: what every route calls (S4-S7), over the parts that do the work.

:class:`ServerSessions` is a facade; it owns the nursery in which the server's work
lives, so nothing a session starts outlives the server, and it checks what a route
sends before it hands it to the part whose job it is:

- :mod:`._index` keeps the rows (and :mod:`._scan` finds unlisted traces, S4.8);
- :mod:`._live` holds each session's in-memory state and its open Session: a
  penguin :class:`~penguin.Session` is an ``async with`` block, kept open in a
  *holder* task from the session's creation (or, after a restart, from its first
  task, when it is resumed from its trace) until it is deleted, closed idle or the
  server stops; between tasks the session's background commands keep running and
  can be listed and killed;
- :mod:`._tasks` starts, queues, runs, steers and aborts the tasks (S5);
- :mod:`._idle` closes sessions idle for ``idle_close`` seconds (S1.1);
- :mod:`._memory` gives malloc's free pages back after sessions closed;
- :mod:`._approvals` / :mod:`._approver` ask and answer the approvals (S6);
- :mod:`._shapes` shapes the JSON of sessions, processes and models.

Stopping. DELETE stops the session (interrupt, deny, wait for the task, close the
session: its Environment kills every process it started), then removes its traces
(with those of its subagent children) and scratchpad and finally its row; the
workspace is never touched. :meth:`ServerSessions.shutdown` (S1.4) does the same
stop for every session at once (the one close path, :meth:`~._live.LiveSessions.close`),
with ``grace`` seconds shared by the tasks, and leaving :meth:`ServerSessions.open`
cancels what is still there.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, Final, final

import trio

from penguin import _log
from penguin import config as cfg
from penguin import protocol as om
from penguin._concurrency import collapse_single
from penguin.agent import Session, SessionHolder
from penguin.approval import DEFAULT_APPROVAL_MODE, Answer
from penguin.trace import find_session, read_trace, trace_files, trace_locations

from ._agents import Agents, check_model, check_workspace
from ._channel import EventChannel, Subscriber, server_event_frame
from ._errors import ApiError
from ._idle import IdleSweep
from ._index import Page, SessionIndex, SessionRow
from ._live import SURFACE, Live, LiveSessions
from ._memory import MemoryTrim
from ._requests import CreateSession, Decision, UpdateSession
from ._sandbox import SandboxInfo, session_policy
from ._scan import remove_session_files, unindexed_sessions
from ._shapes import approval_request, process_row, session_info, task_state
from ._tasks import Tasks

__all__ = ["IDLE_CLOSE", "SHUTDOWN_GRACE", "ServerSessions", "new_epoch"]

logger: Final = _log.child("server")

SHUTDOWN_GRACE: Final = 10.0
"""Seconds the server waits for interrupted tasks before it stops them hard (S1.4)."""
_PROBE_GRACE: Final = 2.0
IDLE_CLOSE: Final = 1800.0
"""Seconds an open session may sit idle before its Environment is closed (S1.1)."""


def _trace_file(live: Path | None, traces: Path, session_id: str) -> Path | None:
    """The session's current trace file: the live session's, while it exists, else found.

    Blocking (a ``stat``, perhaps a search of the traces' folder): for a worker thread.
    """
    if live is not None and live.exists():
        return live
    location = find_session(traces, session_id)
    return None if location is None else location.path


def new_epoch() -> str:
    """An epoch for event ids: the server's start time in milliseconds."""
    return str(time.time_ns() // 1_000_000)


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
        self._agents = Agents(root)
        self._sandbox = SandboxInfo()
        """Each session's sandboxMode/network (spec/sandbox.md X1.3)."""
        self._registry = LiveSessions(nursery, epoch=epoch, grace=grace)
        self.events = EventChannel(epoch)
        """Server-wide ``session_state`` / ``session_title`` events (``GET /api/events``)."""
        self._tasks = Tasks(
            self._registry,
            index,
            self.events,
            nursery,
            open_session=self._ensure_open,
            refuse_when_closing=self._refuse_when_closing,
        )
        self._idle = IdleSweep(self._registry)
        registry = self._registry
        self._trim = MemoryTrim(lambda: registry.released)

    @property
    def _live(self) -> dict[str, Live]:
        """The sessions held in memory, by id (tests read it)."""
        return self._registry.by_id

    @property
    def sweeps(self) -> int:
        """How many idle sweeps have run (tests wait on it)."""
        return self._idle.sweeps

    @property
    def closing(self) -> bool:
        """The server is shutting down."""
        return self._registry.closing

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
                        nursery.start_soon(sessions._idle.run, idle_close)
                    nursery.start_soon(sessions._trim.run)
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
        row = None if session_id in self._registry.retiring else await self.index.get(session_id)
        if row is None:
            raise ApiError(404, "session_not_found", f"There is no session {session_id!r}.")
        return row

    async def _known(self, session_id: str) -> Live | None:
        """404 unless the session exists; its live state when the server holds one.

        A session held in memory exists (it leaves memory before its row goes), so the
        routes a running task needs quickly (approvals, abort, steer) skip the index.
        """
        live = self._registry.get(session_id)
        if live is not None and session_id not in self._registry.retiring:
            return live
        await self._row(session_id)
        return self._registry.get(session_id)

    def _paths(self, project_id: str, agent_id: str) -> cfg.AgentPaths:
        return self._agents.paths(project_id, agent_id)

    async def _info(
        self, row: SessionRow, *, has_trace: bool | None = None, trace_path: bool = False
    ) -> dict[str, object]:
        live = self._registry.get(row.session_id)
        path: Path | None = None
        if live is not None and live.session is not None:
            path = live.session.trace_path
        if has_trace is None or trace_path:
            traces = self._paths(row.project_id, row.agent_id).traces_dir
            path = await trio.to_thread.run_sync(_trace_file, path, traces, row.session_id)
            has_trace = path is not None
        sandbox = await self._sandbox.fields(
            row.session_id, self._paths(row.project_id, row.agent_id).traces_dir
        )
        return session_info(
            row,
            state="idle" if live is None else live.state,
            pending=0 if live is None else len(live.approvals),
            allow_list=[] if live is None else list(live.allow_list.entries()),
            tasked=live is not None and live.tasked,
            sandbox=sandbox,
            has_trace=has_trace,
            path=path,
            trace_path=trace_path,
        )

    # ------------------------------------------------------------------ sessions

    async def create(
        self, project_id: str, agent_id: str, request: CreateSession
    ) -> dict[str, Any]:
        """Create a session (S4.2): checked, opened, flushed to its trace, then indexed."""
        self._refuse_when_closing()
        if request.workspace is not None:
            await check_workspace(request.workspace)
        agent = await self._agents.agent(project_id, agent_id)
        await check_model(agent, request.provider, request.model_id)
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

        holder = SessionHolder()
        session = await self._registry.open(holder, opener)
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
            holder.release_soon()
            raise
        live = self._registry.for_session(row.session_id)
        live.holder = holder
        live.idle_since = trio.current_time()
        self._sandbox.remember(row.session_id, policy)
        return await self._info(row, has_trace=True)

    async def session_rows(
        self, project_id: str, agent_id: str, *, archived: bool, page: Page
    ) -> list[SessionRow]:
        """The agent's sessions as indexed, newest ``lastActiveAt`` first (S4.3).

        A listing's ``page``, cut by the index; :meth:`describe` makes the page's JSON.
        """
        return await self.index.list(project_id, agent_id, archived=archived, page=page)

    async def workspace_counts(
        self, project_id: str, agent_id: str
    ) -> dict[tuple[bool, str | None], int]:
        """How many sessions each ``(archived, workspace)`` pair has, from the index alone."""
        return await self.index.workspace_counts(project_id, agent_id)

    async def describe(
        self, project_id: str, agent_id: str, rows: Sequence[SessionRow]
    ) -> list[dict[str, Any]]:
        """The JSON of the agent's sessions ``rows`` (S4.3), in their order.

        Only these sessions' files are read, so a page of a long list (the rows of
        :meth:`session_rows`, cut) costs what the page holds.
        """
        if not rows:
            return []
        traces = self._paths(project_id, agent_id).traces_dir
        ids = [row.session_id for row in rows]
        found = await trio.to_thread.run_sync(partial(trace_locations, traces, sessions=ids))
        newest = {loc.session_id: loc for loc in found}  # index order: the newest file last
        await self._sandbox.learn({row.session_id: newest.get(row.session_id) for row in rows})
        return [await self._info(row, has_trace=row.session_id in newest) for row in rows]

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
        self._registry.retiring.add(session_id)
        try:
            live = self._registry.by_id.pop(session_id, None)
            if live is not None:
                await self._registry.close([live], wait_cancelled=True)
            paths = self._paths(row.project_id, row.agent_id)
            await trio.to_thread.run_sync(remove_session_files, paths, session_id)
            await self.index.delete(session_id)
            self._sandbox.forget(session_id)
        finally:
            self._registry.retiring.discard(session_id)

    # ------------------------------------------------------------------ open Sessions

    async def _ensure_open(self, live: Live, row: SessionRow) -> Session:
        """The session's Session, resumed from its trace when it is not open."""
        open_agent = partial(self._agents.agent, row.project_id, row.agent_id)
        return await self._registry.ensure_open(live, row, open_agent)

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
        return await self._tasks.start(row, texts, queue_if_busy=queue_if_busy)

    async def steer(self, session_id: str, text: str) -> None:
        """Deliver ``text`` to the running task between turns (S5.2); 409 when idle."""
        self._tasks.steer(session_id, await self._known(session_id), text)

    async def abort(self, session_id: str) -> bool:
        """Interrupt the running task gracefully (S5.3); False when the session is idle."""
        return self._tasks.abort(await self._known(session_id))

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
        live = self._registry.for_session(session_id)
        snapshot = [server_event_frame(task_state(live.state))]
        snapshot.extend(server_event_frame(approval_request(p)) for p in live.approvals.pending)
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
        return [process_row(command) for command in environment.list_background_commands()]

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
        return await self._agents.agents(project_id)

    async def models(self, project_id: str) -> list[dict[str, object]]:
        """The project's configured models (never their keys or endpoints)."""
        return await self._agents.models(project_id)

    # ------------------------------------------------------------------ shutdown

    async def shutdown(self) -> None:
        """S1.4: deny every pending call, interrupt every task, wait ``grace``, close all."""
        self._registry.closing = True
        self.events.close()
        await self._registry.close(list(self._registry), wait_cancelled=False)
