"""The session index: ``<root>/server.sqlite3``, one row per session (S4.8).

It holds only what the trace files do not: which project and agent a session belongs
to, its approval mode, title and archived flag, and the two times the listing sorts
by. Traces, scratchpads and workspaces stay files; the messages of a session are
always read from its traces.

:class:`SessionTable` is the blocking part — the stdlib ``sqlite3`` on one
connection, WAL journal, every statement its own transaction — and
:class:`SessionIndex` is how async code uses it: its calls run in a worker thread
(:func:`~penguin._concurrency.run_in_worker`), one batch at a time, so the Trio loop
never waits on the disk and the connection is never used by two threads at once. The
approver reads a session's mode through :meth:`SessionIndex.approval_mode` on every
decision (S6.1): there is no cache to go stale.

The calls are batched: those made while a batch is in the worker thread wait, in
order, and go to the thread together as the next batch, run one after another, each
with its own result or error. A statement takes tens of microseconds; the hop to the
thread and back takes the loop two of its passes, each a millisecond or more when 64
sessions are busy (and a call's caller waited for the pass that ended the call before
the next could start). One hop per call, with one call at a time, made every approval
decision of ``penguin server`` wait behind every other session's (the mode read's p50
was 287 ms at 64 sessions in ``python -m benchmarks.server``); a batch serves all of
them in one hop. The caller that finds no batch running runs one; when it ends, the
first waiting call's caller runs the next. Each caller runs at most one batch, so none
is kept serving the others. A call cancelled while it waits is not run; one already
in a batch runs to its end (as a call in a worker thread always did).
"""

from __future__ import annotations

import collections
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Final, Generic, TypeVar, cast, final

import attrs
import trio

from penguin._concurrency import run_in_worker
from penguin.approval import APPROVAL_MODES, ApprovalMode

__all__ = ["INDEX_FILE", "WHOLE", "Page", "SessionIndex", "SessionRow", "SessionTable"]

INDEX_FILE: Final = "server.sqlite3"

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id     TEXT PRIMARY KEY,
    project_id     TEXT NOT NULL,
    agent_id       TEXT NOT NULL,
    provider       TEXT,
    model_id       TEXT,
    workspace      TEXT,
    approval_mode  TEXT NOT NULL,
    title          TEXT,
    archived       INTEGER NOT NULL DEFAULT 0,
    created_at     TEXT NOT NULL,
    last_active_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_agent
    ON sessions (project_id, agent_id, archived, last_active_at);
"""
_COLUMNS: Final = (
    "session_id, project_id, agent_id, provider, model_id, workspace, approval_mode, "
    "title, archived, created_at, last_active_at"
)

T = TypeVar("T")


@final
@attrs.frozen
class Page:
    """Which rows of a listing: ``limit`` rows (``None``: all) from ``offset``."""

    offset: int = 0
    limit: int | None = None

    @property
    def sql_limit(self) -> int:
        """``LIMIT``'s value: -1 is SQLite's "no limit"."""
        return -1 if self.limit is None else self.limit


WHOLE: Final = Page()
"""Every row."""


@final
@attrs.frozen
class SessionRow:
    """One indexed session."""

    session_id: str
    project_id: str
    agent_id: str
    provider: str | None
    model_id: str | None
    workspace: str | None
    approval_mode: ApprovalMode
    title: str | None
    archived: bool
    created_at: str
    last_active_at: str


def _row(values: tuple[object, ...]) -> SessionRow:
    (sid, project, agent, provider, model, workspace, mode, title, archived, created, active) = (
        values
    )
    approval_mode: ApprovalMode = "deny-all"  # an unknown stored value fails safe
    for known in APPROVAL_MODES:
        if mode == known:
            approval_mode = known
    return SessionRow(
        session_id=str(sid),
        project_id=str(project),
        agent_id=str(agent),
        provider=None if provider is None else str(provider),
        model_id=None if model is None else str(model),
        workspace=None if workspace is None else str(workspace),
        approval_mode=approval_mode,
        title=None if title is None else str(title),
        archived=bool(archived),
        created_at=str(created),
        last_active_at=str(active),
    )


def _values(row: SessionRow) -> tuple[object, ...]:
    return (
        row.session_id,
        row.project_id,
        row.agent_id,
        row.provider,
        row.model_id,
        row.workspace,
        row.approval_mode,
        row.title,
        int(row.archived),
        row.created_at,
        row.last_active_at,
    )


@final
class SessionTable:
    """The blocking index: one sqlite3 connection (WAL), safe to call from any one thread."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():  # the index names workspaces: keep it to its owner
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()

    def insert(self, row: SessionRow) -> None:
        """Add a session (its id must be new)."""
        with self._lock:
            self._db.execute(
                f"INSERT INTO sessions ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)", _values(row)
            )

    def insert_missing(self, rows: Iterable[SessionRow]) -> int:
        """Add the rows whose session is not indexed yet; how many were added."""
        with self._lock:
            before = self._db.total_changes
            self._db.execute("BEGIN")
            try:
                self._db.executemany(
                    f"INSERT OR IGNORE INTO sessions ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    [_values(row) for row in rows],
                )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            return self._db.total_changes - before

    def get(self, session_id: str) -> SessionRow | None:
        """The row of ``session_id``, or None."""
        with self._lock:
            found = self._db.execute(
                f"SELECT {_COLUMNS} FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
        return None if found is None else _row(found)

    def approval_mode(self, session_id: str) -> ApprovalMode | None:
        """The session's approval mode as stored now, or None when it has no row."""
        with self._lock:
            found = self._db.execute(
                "SELECT approval_mode FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
        if found is None:
            return None
        for known in APPROVAL_MODES:
            if found[0] == known:
                return known
        return "deny-all"

    def list(
        self, project_id: str, agent_id: str, *, archived: bool, page: Page = WHOLE
    ) -> list[SessionRow]:
        """The agent's sessions (archived or not), newest ``last_active_at`` first.

        ``page`` is cut in SQLite, so a page of a long list costs what the page holds.
        """
        with self._lock:
            found = self._db.execute(
                f"SELECT {_COLUMNS} FROM sessions WHERE project_id = ? AND agent_id = ? "
                "AND archived = ? ORDER BY last_active_at DESC, session_id DESC LIMIT ? OFFSET ?",
                (project_id, agent_id, int(archived), page.sql_limit, page.offset),
            ).fetchall()
        return [_row(values) for values in found]

    def workspace_counts(
        self, project_id: str, agent_id: str
    ) -> dict[tuple[bool, str | None], int]:
        """How many of the agent's sessions each ``(archived, workspace)`` pair has."""
        with self._lock:
            found = self._db.execute(
                "SELECT archived, workspace, COUNT(*) FROM sessions "
                "WHERE project_id = ? AND agent_id = ? GROUP BY archived, workspace",
                (project_id, agent_id),
            ).fetchall()
        return {
            (bool(archived), None if workspace is None else str(workspace)): int(count)
            for archived, workspace, count in found
        }

    def ids(self) -> set[str]:
        """Every indexed session id."""
        with self._lock:
            return {str(v[0]) for v in self._db.execute("SELECT session_id FROM sessions")}

    def update(
        self,
        session_id: str,
        *,
        approval_mode: ApprovalMode | None = None,
        title: str | None = None,
        title_set: bool = False,
        archived: bool | None = None,
        last_active_at: str | None = None,
    ) -> SessionRow | None:
        """Change the given fields; the row afterwards, or None when there is none."""
        sets: list[str] = []
        values: list[object] = []
        if approval_mode is not None:
            sets.append("approval_mode = ?")
            values.append(approval_mode)
        if title_set:
            sets.append("title = ?")
            values.append(title)
        if archived is not None:
            sets.append("archived = ?")
            values.append(int(archived))
        if last_active_at is not None:
            sets.append("last_active_at = ?")
            values.append(last_active_at)
        if sets:
            with self._lock:
                self._db.execute(
                    f"UPDATE sessions SET {', '.join(sets)} WHERE session_id = ?",
                    (*values, session_id),
                )
        return self.get(session_id)

    def delete(self, session_id: str) -> bool:
        """Remove the row; False when there was none."""
        with self._lock:
            cursor = self._db.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
        return cursor.rowcount > 0


@final
class _Call(Generic[T]):
    """One call of the table, waiting for its batch; then its result or its error."""

    __slots__ = ("error", "function", "ran", "result", "settled", "taken")

    def __init__(self, function: Callable[[], T]) -> None:
        self.function = function
        self.settled = trio.Event()
        """Set when the call has run, or (not taken) when its caller runs the next batch."""
        self.taken = False
        """In a batch (run, or being run): it runs to its end."""
        self.ran = False
        self.result: T | None = None
        self.error: BaseException | None = None


def _run_batch(calls: Sequence[_Call[Any]]) -> None:
    """Run each call in order (in the worker thread): its result or its error."""
    for call in calls:
        try:
            call.result = call.function()
        except Exception as error:
            call.error = error
        finally:
            call.ran = True


@final
class SessionIndex:
    """:class:`SessionTable` for async code: calls run in a worker thread, in batches."""

    def __init__(self, table: SessionTable) -> None:
        self.table = table
        self._waiting: collections.deque[_Call[Any]] = collections.deque()
        self._running = False
        """A batch is being run (by the caller that started it)."""

    @classmethod
    async def open(cls, root: str | os.PathLike[str]) -> SessionIndex:
        """Open (creating) ``<root>/server.sqlite3``."""
        path = Path(root) / INDEX_FILE
        return cls(await trio.to_thread.run_sync(SessionTable, path))

    async def _call(self, function: Callable[[], T]) -> T:
        await trio.lowlevel.checkpoint_if_cancelled()  # a cancelled caller's call never runs
        call = _Call(function)
        self._waiting.append(call)
        if not self._running:
            self._running = True
            await self._run_next_batch()
        else:
            try:
                await call.settled.wait()
            except BaseException:
                if not call.taken:  # cancelled before it ran: it never will
                    self._waiting.remove(call)
                    if call.settled.is_set():  # it had the turn: the next waiting call has it
                        self._pass_turn()
                raise
            if not call.taken:  # the next batch is this caller's to run
                await self._run_next_batch()
        if call.error is not None:
            raise call.error
        return cast("T", call.result)

    async def _run_next_batch(self) -> None:
        batch = list(self._waiting)
        self._waiting.clear()
        for call in batch:
            call.taken = True
        try:
            with trio.CancelScope(shield=True):  # taken calls run, and are answered
                await run_in_worker(_run_batch, batch)
        except BaseException as error:  # not a call's error: the batch itself failed
            for call in batch:
                if not call.ran:
                    call.error = error
            raise
        finally:
            for call in batch:
                call.settled.set()
            self._pass_turn()

    def _pass_turn(self) -> None:
        """The first waiting call's caller runs the next batch; none waiting: idle."""
        if self._waiting:
            self._waiting[0].settled.set()
        else:
            self._running = False

    async def aclose(self) -> None:
        """Close the connection."""
        with trio.CancelScope(shield=True):
            await self._call(self.table.close)

    async def insert(self, row: SessionRow) -> None:
        """See :meth:`SessionTable.insert`."""
        await self._call(lambda: self.table.insert(row))

    async def insert_missing(self, rows: Iterable[SessionRow]) -> int:
        """See :meth:`SessionTable.insert_missing`."""
        listed = list(rows)
        return await self._call(lambda: self.table.insert_missing(listed))

    async def get(self, session_id: str) -> SessionRow | None:
        """See :meth:`SessionTable.get`."""
        return await self._call(lambda: self.table.get(session_id))

    async def approval_mode(self, session_id: str) -> ApprovalMode | None:
        """See :meth:`SessionTable.approval_mode` (read from the file, every time)."""
        return await self._call(lambda: self.table.approval_mode(session_id))

    async def list(
        self, project_id: str, agent_id: str, *, archived: bool, page: Page = WHOLE
    ) -> list[SessionRow]:
        """See :meth:`SessionTable.list`."""
        return await self._call(
            lambda: self.table.list(project_id, agent_id, archived=archived, page=page)
        )

    async def workspace_counts(
        self, project_id: str, agent_id: str
    ) -> dict[tuple[bool, str | None], int]:
        """See :meth:`SessionTable.workspace_counts`."""
        return await self._call(lambda: self.table.workspace_counts(project_id, agent_id))

    async def ids(self) -> set[str]:
        """See :meth:`SessionTable.ids`."""
        return await self._call(self.table.ids)

    async def update(
        self,
        session_id: str,
        *,
        approval_mode: ApprovalMode | None = None,
        title: str | None = None,
        title_set: bool = False,
        archived: bool | None = None,
        last_active_at: str | None = None,
    ) -> SessionRow | None:
        """See :meth:`SessionTable.update`."""
        return await self._call(
            lambda: self.table.update(
                session_id,
                approval_mode=approval_mode,
                title=title,
                title_set=title_set,
                archived=archived,
                last_active_at=last_active_at,
            )
        )

    async def delete(self, session_id: str) -> bool:
        """See :meth:`SessionTable.delete`."""
        return await self._call(lambda: self.table.delete(session_id))
