"""The session index and the scan of traces, without sockets (S4.3, S4.8, S6.1).

The index's calls that wait go to the worker thread together (issue 20 item 4).
"""

from __future__ import annotations

import contextlib
import functools
import json
import sqlite3
import stat
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from penguin import protocol as om
from penguin.server import _index
from penguin.server._approvals import ApprovalRegistry
from penguin.server._approver import SessionApprover
from penguin.server._index import Page, SessionIndex, SessionRow, SessionTable
from penguin.server._scan import unindexed_sessions

SID = "session-2026-01-02-03-04-05-0123abcd"


def row(
    session_id: str = SID, *, active: str = "2026-01-02T03:04:05.000Z", **more: object
) -> SessionRow:
    values: dict[str, object] = {
        "session_id": session_id,
        "project_id": "p",
        "agent_id": "a",
        "provider": "local",
        "model_id": "m",
        "workspace": "/w",
        "approval_mode": "allow-all",
        "title": None,
        "archived": False,
        "created_at": "2026-01-02T03:04:05.000Z",
        "last_active_at": active,
    }
    values.update(more)
    return SessionRow(**values)  # type: ignore[arg-type]


def test_s4_8_the_index_is_one_wal_sqlite_file_of_session_rows(tmp_path: Path) -> None:
    table = SessionTable(tmp_path / "server.sqlite3")
    table.insert(row())
    table.close()
    assert stat.S_IMODE((tmp_path / "server.sqlite3").stat().st_mode) == 0o600
    with contextlib.closing(sqlite3.connect(tmp_path / "server.sqlite3")) as db, db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {
            name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        assert tables == {"sessions"}


def test_s4_3_listing_is_newest_last_active_first_and_archived_apart(tmp_path: Path) -> None:
    with contextlib.closing(SessionTable(tmp_path / "i.sqlite3")) as table:
        _listing(table)


def _listing(table: SessionTable) -> None:
    table.insert(row("session-2026-01-02-03-04-05-00000001", active="2026-01-02T00:00:01.000Z"))
    table.insert(row("session-2026-01-02-03-04-05-00000002", active="2026-01-02T00:00:03.000Z"))
    table.insert(row("session-2026-01-02-03-04-05-00000003", active="2026-01-02T00:00:02.000Z"))
    table.insert(row("session-2026-01-02-03-04-05-00000004", archived=True))
    listed = [r.session_id[-1] for r in table.list("p", "a", archived=False)]
    assert listed == ["2", "3", "1"]
    assert [r.session_id[-1] for r in table.list("p", "a", archived=True)] == ["4"]
    assert table.list("p", "other", archived=False) == []


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sessions=st.lists(
        st.tuples(
            st.integers(0, 3),  # last active, with ties
            st.sampled_from(["/w", "/v", None]),
            st.booleans(),  # archived
            st.sampled_from(["a", "b"]),  # agent
        ),
        max_size=14,
    ),
    offset=st.integers(0, 15),
    limit=st.none() | st.integers(1, 15),
)
def test_s4_3_a_page_cut_by_the_index_is_the_slice_and_counts_add_up(
    tmp_path: Path,
    sessions: list[tuple[int, str | None, bool, str]],
    offset: int,
    limit: int | None,
) -> None:
    """``list(offset=, limit=)`` (LIMIT/OFFSET in SQLite) is the whole list's slice, and
    ``workspace_counts`` counts what the whole lists hold."""
    with contextlib.closing(SessionTable(tmp_path / f"{uuid.uuid4().hex}.sqlite3")) as table:
        for n, (active, workspace, archived, agent) in enumerate(sessions):
            sid = f"session-2026-01-02-03-04-05-{n:08x}"
            stamp = f"2026-01-02T00:00:0{active}.000Z"
            table.insert(
                row(sid, active=stamp, workspace=workspace, archived=archived, agent_id=agent)
            )
        counted: dict[tuple[bool, str | None], int] = {}
        for archived in (False, True):
            whole = table.list("p", "a", archived=archived)
            end = None if limit is None else offset + limit
            cut = table.list("p", "a", archived=archived, page=Page(offset, limit))
            assert cut == whole[offset:end]
            for listed in whole:
                key = (archived, listed.workspace)
                counted[key] = counted.get(key, 0) + 1
        assert table.workspace_counts("p", "a") == counted


def test_s4_5_update_changes_only_the_given_fields(tmp_path: Path) -> None:
    with contextlib.closing(SessionTable(tmp_path / "i.sqlite3")) as table:
        _updates(table)


def _updates(table: SessionTable) -> None:
    table.insert(row(title="old"))
    changed = table.update(SID, approval_mode="always-ask")
    assert changed is not None
    assert changed.approval_mode == "always-ask"
    assert changed.title == "old"
    cleared = table.update(SID, title=None, title_set=True, archived=True)
    assert cleared is not None
    assert cleared.title is None
    assert cleared.archived
    assert table.update("session-2026-01-02-03-04-05-ffffffff", archived=True) is None
    assert table.delete(SID)
    assert not table.delete(SID)


def set_mode(root: Path, mode: str) -> None:
    with contextlib.closing(sqlite3.connect(root / "server.sqlite3")) as other, other:
        other.execute("UPDATE sessions SET approval_mode = ? WHERE session_id = ?", (mode, SID))


async def test_s6_1_mode_is_reread_on_every_decision(tmp_path: Path) -> None:
    index = await SessionIndex.open(tmp_path)
    await index.insert(row(approval_mode="deny-all"))
    reads: list[str] = []
    approver = SessionApprover(
        index, SID, ApprovalRegistry(), lambda name: "r", on_read=reads.append
    )
    call = om.tool_call("read_file", {"description": "d", "file_path": "x"}, "c1")
    assert await approver(call) == "deny"
    with (
        contextlib.closing(sqlite3.connect(tmp_path / "server.sqlite3")) as other,
        other,
    ):  # another writer, not the server
        other.execute(
            "UPDATE sessions SET approval_mode = 'allow-all' WHERE session_id = ?", (SID,)
        )
    assert await approver(call) == "allow"
    with contextlib.closing(sqlite3.connect(tmp_path / "server.sqlite3")) as other, other:
        other.execute(
            "UPDATE sessions SET approval_mode = 'read-only' WHERE session_id = ?", (SID,)
        )
    assert await approver(call) == "allow"  # permission "r"
    assert reads == ["deny-all", "allow-all", "read-only"]
    await index.aclose()


async def test_s6_1_read_only_asks_for_anything_but_r_and_always_ask_asks(tmp_path: Path) -> None:
    index = await SessionIndex.open(tmp_path)
    await index.insert(row(approval_mode="read-only"))
    asked = trio.Semaphore(0, max_value=10)
    registry = ApprovalRegistry(lambda pending: asked.release())
    permissions = {"read_file": "r", "write_file": "rw"}
    approver = SessionApprover(index, SID, registry, permissions.get)  # type: ignore[arg-type]
    answers: list[str] = []

    async def ask(name: str, call_id: str) -> None:
        answers.append(await approver(om.tool_call(name, {"description": "d"}, call_id)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, "write_file", "w")
        nursery.start_soon(ask, "unknown_tool", "u")
        with trio.fail_after(10):
            await asked.acquire()
            await asked.acquire()
        assert {p.tool_call_id for p in registry.pending} == {"w", "u"}
        registry.answer("w", "allow")
        registry.answer("u", "deny")
    assert sorted(answers) == ["allow", "deny"]
    await index.update(SID, approval_mode="always-ask")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, "read_file", "r1")
        with trio.fail_after(10):
            await asked.acquire()
        registry.answer("r1", "deny")
    assert answers[-1] == "deny"
    await index.delete(SID)
    assert await approver(om.tool_call("read_file", {}, "gone")) == "deny"
    await index.aclose()


def write_trace(path: Path, session_id: str, *, source: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = om.session_meta(
        session_id=session_id,
        provider="local",
        model_id="m",
        model_context_window="unknown",
        system_prompt="sp",
        agent_state="/state",
        workspace="/ws",
        source=source,  # type: ignore[arg-type]
    )
    path.write_text(om.dumps(meta) + "\n" + om.dumps(om.user_text("hi")) + "\n")


def test_s4_8_traces_without_rows_are_found_but_not_subagents_or_odd_names(tmp_path: Path) -> None:
    traces = tmp_path / "proj" / "agents" / "ag" / "traces" / "2026-01-02"
    top = "session-2026-01-02-03-04-05-00000001"
    child = "session-2026-01-02-03-04-05-00000002"
    known = "session-2026-01-02-03-04-05-00000003"
    write_trace(traces / f"{top}_001.jsonl", top)
    write_trace(traces / f"{top}_002.jsonl", top)
    write_trace(traces / f"{child}_001.jsonl", child, source="subagent")
    write_trace(traces / f"{known}_001.jsonl", known)
    write_trace(traces / "not-a-session_001.jsonl", "not-a-session")
    # An odd project name: one the id rule refuses ("bad.project" is a project now, issue 17.4).
    bad = tmp_path / "bad project" / "agents" / "ag" / "traces" / "2026-01-02"
    write_trace(bad / f"{top[:-1]}9_001.jsonl", top[:-1] + "9")
    (traces / "session-2026-01-02-03-04-05-00000004_001.jsonl").write_text(json.dumps([1]) + "\n")
    found = unindexed_sessions(tmp_path, {known})
    assert [(r.session_id, r.project_id, r.agent_id, r.approval_mode) for r in found] == [
        (top, "proj", "ag", "allow-all")
    ]
    assert found[0].workspace == "/ws"
    assert found[0].model_id == "m"
    assert found[0].last_active_at >= found[0].created_at


async def test_s4_8_calls_that_wait_for_the_index_run_as_one_batch_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = await SessionIndex.open(tmp_path)
    batches: list[list[str]] = []
    run_batch = _index._run_batch

    def counted(calls: Sequence[Any]) -> None:
        batches.append([call.function.__name__ for call in calls])
        run_batch(calls)

    monkeypatch.setattr(_index, "_run_batch", counted)
    gate = threading.Event()
    ran: list[str] = []
    answers: dict[str, object] = {}

    def work(name: str, *, fail: bool = False) -> Callable[[], str]:
        def function() -> str:
            if name == "first":
                gate.wait(10)
            ran.append(name)
            if fail:
                raise sqlite3.OperationalError(f"{name} failed")
            return name.upper()

        function.__name__ = name
        return function

    async def call(name: str, *, fail: bool = False) -> None:
        try:
            answers[name] = await index._call(work(name, fail=fail))
        except sqlite3.OperationalError as error:
            answers[name] = error

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call, "first")
        await trio.testing.wait_all_tasks_blocked()  # "first" is in the worker thread
        for name in ("a", "b", "c", "d"):
            nursery.start_soon(functools.partial(call, name, fail=name == "c"))
            await trio.testing.wait_all_tasks_blocked()
        gate.set()
    await index.aclose()
    assert batches == [["first"], ["a", "b", "c", "d"], ["close"]]  # one hop for all waiting
    assert ran == ["first", "a", "b", "c", "d"]
    assert {name: str(answer) for name, answer in answers.items()} == {
        "first": "FIRST",
        "a": "A",
        "b": "B",
        "c": "c failed",  # its own error, and only its own
        "d": "D",
    }


async def test_s4_8_a_call_cancelled_while_it_waits_never_runs_and_the_rest_do(
    tmp_path: Path,
) -> None:
    index = await SessionIndex.open(tmp_path)
    gate = threading.Event()
    ran: list[str] = []

    def work(name: str) -> Callable[[], None]:
        def function() -> None:
            if name == "first":
                gate.wait(10)
            ran.append(name)

        return function

    scopes = {name: trio.CancelScope() for name in ("first", "a", "b", "c")}
    cancelled: list[str] = []

    async def call(name: str) -> None:
        with scopes[name]:
            await index._call(work(name))
            await trio.lowlevel.checkpoint()  # where a cancel of a call that ran arrives
        if scopes[name].cancelled_caught:
            cancelled.append(name)

    async with trio.open_nursery() as nursery:
        for name in scopes:
            nursery.start_soon(call, name)
            await trio.testing.wait_all_tasks_blocked()
        scopes["a"].cancel()  # waiting, at the head: the turn passes to "b"
        scopes["first"].cancel()  # in the worker thread: it runs to its end
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
    assert ran == ["first", "b", "c"]
    assert sorted(cancelled) == ["a", "first"]
    assert await index.ids() == set()  # the index serves on
    await index.aclose()


async def test_s6_1_a_mode_change_queued_between_two_reads_is_seen_by_the_later_only(
    tmp_path: Path,
) -> None:
    index = await SessionIndex.open(tmp_path)
    await index.insert(row(approval_mode="deny-all"))
    gate = threading.Event()
    seen: dict[str, object] = {}

    async def held() -> None:
        await index._call(lambda: gate.wait(10))

    async def read(name: str) -> None:
        seen[name] = await index.approval_mode(SID)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(held)
        await trio.testing.wait_all_tasks_blocked()  # the index is busy: what follows waits
        nursery.start_soon(read, "before")
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(functools.partial(index.update, SID, approval_mode="allow-all"))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(read, "after")
        await trio.testing.wait_all_tasks_blocked()
        gate.set()  # all three go in one batch, in the order they were asked
    await index.aclose()
    assert seen == {"before": "deny-all", "after": "allow-all"}
