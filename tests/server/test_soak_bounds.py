"""Issue 21 item 5: what a long-lived server holds stays bounded by what is alive.

A real server (hypercorn on 127.0.0.1, real sessions with their shells) goes through
what ``benchmarks/soak.py`` does for ten minutes, in small: sessions created, tasks
started under ``always-ask`` and approved from the stream, some aborted, streams
dropped and subscribed again, every session deleted. Afterwards nothing of them is
left: no row, no live state, no remembered sandbox fields, no task in the server's
nursery beyond its own, and no object of the per-session classes (counted by the
garbage collector). One session that runs many tasks keeps its per-task state at
zero between tasks. The malloc trim runs after sessions closed, and not on an idle
server (a MockClock).
"""

from __future__ import annotations

import gc
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from penguin._gc import MANY_SESSIONS_THRESHOLD
from penguin.agent import Session, SessionHolder
from penguin.environment import Environment
from penguin.llm import testing as t
from penguin.server import RunningServer, ServerOptions, open_server
from penguin.server._approvals import ApprovalRegistry, PendingApproval
from penguin.server._channel import EventChannel, Subscriber
from penguin.server._live import Live
from penguin.server._memory import MemoryTrim, malloc_trim, trim_in_thread
from tests.environment.processes import wait_until

from .support import (
    AUTH,
    SESSIONS,
    TOKEN,
    ScriptedModel,
    calls,
    create_session,
    exec_command,
    open_stream,
    say,
)

PER_SESSION = (Live, SessionHolder, EventChannel, Subscriber, ApprovalRegistry, PendingApproval)
OPEN = (Session, Environment)
TASK = "bounded: two commands"


class PerTask(ScriptedModel):
    """Every task, however many the session ran before: two commands, then ``Done.``."""

    async def __call__(self, request: t.ReceivedRequest) -> t.Reply:
        messages = request.json()["messages"]
        task = max(i for i, message in enumerate(messages) if message.get("role") == "user")
        turn = sum(1 for message in messages[task + 1 :] if message.get("role") == "assistant")
        step = calls(exec_command(f"echo {turn}")) if turn < 2 else say("Done.")
        reply = step(turn)
        assert isinstance(reply, t.StreamReply)
        return reply


@pytest.fixture
def model() -> ScriptedModel:
    return PerTask()


def alive(*kinds: type) -> Counter[str]:
    gc.collect()
    counts: Counter[str] = Counter()
    for obj in gc.get_objects():
        if isinstance(obj, kinds):
            counts[type(obj).__name__] += 1
    return counts


def call_id_of(data: Any) -> str:
    return str(data["toolCall"]["payload"]["tool_call_id"])


async def one_task(client: httpx.AsyncClient, sid: str, plan: str) -> None:
    """Start the task, then approve each call, abort at the first, or drop the stream once."""
    async with open_stream(client, sid) as stream:
        await stream.until(lambda event: event.is_state("idle"))  # the snapshot
        response = await client.post(
            f"/api/sessions/{sid}/tasks", json={"input": [{"type": "text", "text": TASK}]}
        )
        assert response.status_code == 202, response.text
        request = await stream.until_type("approval_request")
        if plan == "abort":
            assert (await client.post(f"/api/sessions/{sid}/abort")).status_code == 202
            await stream.until(lambda event: event.is_state("idle"))
            return
        if plan != "reconnect":
            await approve_until_idle(client, sid, stream, request.data)
            return
    async with open_stream(client, sid) as stream:  # its snapshot carries the pending call
        request = await stream.until_type("approval_request")
        await approve_until_idle(client, sid, stream, request.data)


async def approve_until_idle(client: httpx.AsyncClient, sid: str, stream: Any, data: Any) -> None:
    while True:
        answer = await client.post(
            f"/api/sessions/{sid}/approvals/{call_id_of(data)}", json={"decision": "allow"}
        )
        assert answer.status_code == 204, answer.text
        event = await stream.until(
            lambda event: event.type == "approval_request" or event.is_state("idle")
        )
        if event.type != "approval_request":
            return
        data = event.data


async def test_21_5_sessions_created_tasked_and_deleted_leave_nothing_behind(
    server: RunningServer, client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    sessions = server.sessions
    registry = sessions._registry
    nursery_tasks = len(registry._nursery.child_tasks)
    before = alive(*PER_SESSION, *OPEN)
    plans = ("approve", "abort", "reconnect", "approve")
    count = 12

    async def one_session(number: int) -> None:
        sid = (await create_session(client, approvalMode="always-ask"))["sessionId"]
        for task in range(2):
            await one_task(client, sid, plans[(number + task) % len(plans)])
        assert (await client.delete(f"/api/sessions/{sid}")).status_code == 204

    for start in range(0, count, 4):
        async with trio.open_nursery() as nursery:
            for number in range(start, start + 4):
                nursery.start_soon(one_session, number)

    assert (await client.get(SESSIONS)).json()["sessions"] == []
    assert sessions._live == {}
    assert registry.retiring == set()
    assert sessions._sandbox._known == {}
    assert registry.released == count
    assert len(registry._nursery.child_tasks) == nursery_tasks
    assert sessions.events.subscriber_count == 0
    assert alive(*PER_SESSION, *OPEN) == before


async def test_21_5_a_session_that_runs_many_tasks_holds_no_per_task_state_between_them(
    server: RunningServer, client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    sid = (await create_session(client, approvalMode="always-ask"))["sessionId"]
    registry = server.sessions._registry
    nursery_tasks = len(registry._nursery.child_tasks)
    for task in range(12):
        await one_task(client, sid, ("approve", "abort", "reconnect")[task % 3])
        live = server.sessions._live[sid]
        assert not live.running
        assert not live.busy
        assert len(live.approvals) == 0
        assert live.queued == []
        assert live.interrupt is None
        assert live.task_scope is None
        assert len(registry._nursery.child_tasks) == nursery_tasks
    # the dropped streams' writers end with their connections
    await wait_until(lambda: live.channel.subscriber_count == 0, within=30)
    counts = alive(*PER_SESSION, *OPEN)
    assert counts["Live"] == counts["SessionHolder"] == counts["ApprovalRegistry"] == 1
    assert counts["EventChannel"] == 2  # the session's and the server's own
    assert counts["Subscriber"] == 0
    assert counts["PendingApproval"] == 0
    assert counts["Session"] == 1


async def test_21_5_malloc_is_trimmed_after_sessions_close_and_never_when_idle(
    autojump_clock: trio.testing.MockClock,
) -> None:
    released = 0
    trimmed_at: list[float] = []

    async def trim() -> None:
        trimmed_at.append(trio.current_time())

    trim_loop = MemoryTrim(lambda: released, interval=10.0, trim=trim)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trim_loop.run)
        await trio.sleep(35.0)
        assert trimmed_at == []  # nothing closed: nothing to give back
        released += 3
        await trio.sleep(10.0)
        assert trimmed_at == [40.0]  # three closes since the last look: one trim
        await trio.sleep(60.0)
        assert trimmed_at == [40.0]
        released += 1
        await trio.sleep(10.0)
        assert trimmed_at == [40.0, 110.0]
        assert trim_loop.trims == 2
        nursery.cancel_scope.cancel()


@pytest.mark.skipif(malloc_trim is None, reason="the C library has no malloc_trim")
async def test_21_5_the_real_trim_runs_in_a_worker_thread() -> None:
    garbage = [bytes(4096) for _ in range(2000)]
    del garbage
    with trio.fail_after(10):
        await trim_in_thread()


async def test_20_1_the_server_collects_young_objects_less_often_while_it_serves(
    root: Path,
) -> None:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        async with (
            open_server(ServerOptions(port=0, root=root, token=TOKEN, grace=5.0)) as server,
            httpx.AsyncClient(base_url=server.base_url, headers=AUTH, timeout=30) as client,
        ):
            assert gc.get_threshold() == (MANY_SESSIONS_THRESHOLD, 10, 10)
            sid = (await create_session(client, approvalMode="always-ask"))["sessionId"]
            await one_task(client, sid, "approve")  # two approved commands, then Done.
            assert gc.get_threshold()[0] == MANY_SESSIONS_THRESHOLD
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*before)
