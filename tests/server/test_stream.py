"""S7 over real sockets: the SSE wire format, ids, replay with Last-Event-ID, resync, the
snapshot, a stalled subscriber that never slows the session, many subscribers."""

from __future__ import annotations

import socket
from typing import Any

import httpx
import trio

from penguin import protocol as om
from penguin.llm import testing as t
from penguin.server import RunningServer

from .support import (
    TOKEN,
    EventStream,
    ScriptedModel,
    calls,
    create_session,
    exec_command,
    open_stream,
    say,
    start_task,
)

SERVER_EVENTS = {"approval_request", "approval_resolved", "task_state", "resync_required"}


def seq(event_id: str | None) -> int:
    assert event_id is not None
    return int(event_id.rsplit("-", 1)[1])


def burst(count: int, size: int) -> t.StreamReply:
    """A model answer streamed as ``count`` text chunks of ``size`` characters."""
    chunks: list[dict[str, Any]] = [t.content_chunk("x" * size) for _ in range(count)]
    return t.sse_reply([*chunks, t.finish_chunk()])


async def test_s7_1_unnamed_events_are_omnimessages_and_named_ones_server_events(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    task = model.script("wire", calls(exec_command("echo wire")), say("done"))
    sid = (await create_session(client, approvalMode="always-ask"))["sessionId"]
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        asked = await stream.until_type("approval_request")
        await client.post(
            f"/api/sessions/{sid}/approvals/{asked.data['toolCall']['payload']['tool_call_id']}",
            json={"decision": "allow"},
        )
        await stream.until_idle()
    for event in stream.seen:
        if event.event is None:
            message = om.from_dict(event.data)  # the protocol's wire format, unchanged
            assert om.to_dict(message) == event.data
        else:
            assert event.event == "server_event"
            assert event.data["type"] in SERVER_EVENTS
    kinds = {e.type for e in stream.seen}
    assert {"partial_text", "text", "tool_call", "partial_tool_call_output"} <= kinds
    assert {"tool_call_output", "approval_decision", "request_end"} <= kinds
    asked_call = om.from_dict(asked.data["toolCall"])
    assert isinstance(asked_call.payload, om.ToolCallPayload)
    assert asked_call.payload.name == "exec_command"


async def test_s7_2_published_ids_count_up_and_connection_frames_have_none(
    client: httpx.AsyncClient, model: ScriptedModel, server: RunningServer
) -> None:
    task = model.script("count", say("one two three"))
    sid = (await create_session(client))["sessionId"]
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        await stream.until_idle()
    snapshot, *published = stream.seen
    assert snapshot.id is None
    assert snapshot.is_state("idle")
    epochs = {e.id.rsplit("-", 1)[0] for e in published if e.id}
    assert epochs == {server.sessions.epoch}
    assert [seq(e.id) for e in published] == list(range(1, len(published) + 1))


async def test_s7_3_reconnecting_gets_the_gap_then_the_snapshot_then_pending_approvals(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    task = model.script("resume me", say("First part."), calls(exec_command("echo later")))
    task2 = model.script("then ask", calls(exec_command("echo asked")), say("ok"))
    sid = (await create_session(client, approvalMode="always-ask"))["sessionId"]
    async with open_stream(client, sid) as first:
        await start_task(client, sid, task)
        await first.until_idle()
        await start_task(client, sid, task2)
        await first.until_type("approval_request")
    checkpoint = next(e for e in first.seen if e.type == "text")  # somewhere in the middle
    last_seen = [e for e in first.seen if e.id][-1]
    async with open_stream(client, sid, last_event_id=checkpoint.id) as again:
        gap = []
        while True:
            event = await again.next()
            if event.id is None:
                break
            gap.append(event)
        assert [seq(e.id) for e in gap] == list(
            range(seq(checkpoint.id) + 1, seq(last_seen.id) + 1)
        )
        assert [e.data for e in gap] == [
            e.data for e in first.seen if e.id and seq(e.id) > seq(checkpoint.id)
        ]
        assert event.is_state("running")  # the snapshot
        resent = await again.next()
        assert resent.id is None
        assert resent.type == "approval_request"
        call_id = resent.data["toolCall"]["payload"]["tool_call_id"]
        await client.post(f"/api/sessions/{sid}/approvals/{call_id}", json={"decision": "deny"})
        live = await again.until_type("approval_resolved")
        assert seq(live.id) == seq(last_seen.id) + 1
        await again.until(lambda e: e.is_state("idle"))


async def test_s7_3_an_unknown_last_event_id_gets_resync_required_first(
    client: httpx.AsyncClient,
) -> None:
    sid = (await create_session(client))["sessionId"]
    for last in ("0-1", "garbage", "123-456"):
        async with open_stream(client, sid, last_event_id=last) as stream:
            first = await stream.next()
            assert first.id is None
            assert first.data == {"type": "resync_required"}
            assert (await stream.next()).is_state("idle")


async def test_s7_5_a_stalled_subscriber_never_slows_the_session(
    client: httpx.AsyncClient, model: ScriptedModel, server: RunningServer
) -> None:
    count = 12_000
    task = model.script("flood", lambda turn: burst(count, 600))
    sid = (await create_session(client))["sessionId"]
    stalled = trio.socket.socket()
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    await stalled.connect(("127.0.0.1", server.port))
    await stalled.send(
        f"GET /api/sessions/{sid}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {TOKEN}\r\n\r\n".encode()
    )
    channel = server.sessions._live[sid].channel
    with trio.fail_after(10):
        while channel.subscriber_count < 1:  # noqa: ASYNC110 - the server has no event to wait on
            await trio.sleep(0.01)
    try:
        async with open_stream(client, sid) as reader:
            await start_task(client, sid, task)
            await reader.until_idle(within=120)  # the session finished: the stall held nothing up
        partials = [e for e in reader.seen if e.type == "partial_text"]
        assert len(partials) == count + 2  # start, the deltas, stop: none dropped
        ids = [seq(e.id) for e in reader.seen if e.id]
        assert ids == list(range(ids[0], ids[0] + len(ids)))
        # The stalled one was cut off: what it can still read ends early.
        received = b""
        with trio.fail_after(60):
            while not received.endswith(b"\r\n0\r\n\r\n"):
                chunk = await stalled.recv(1 << 20)
                if not chunk:
                    break
                received += chunk
        assert b"200 " in received.split(b"\r\n", 1)[0]
        assert received.count(b"id: ") < len(ids) // 2
    finally:
        stalled.close()
    # When it comes back its last id is long evicted (more than 10,000 events since): resync.
    async with open_stream(client, sid, last_event_id=f"{channel.epoch}-1") as back:
        assert (await back.next()).data == {"type": "resync_required"}


async def test_s7_6_every_subscriber_gets_every_event_in_the_same_order(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    task = model.script("fan out", calls(exec_command("seq 1 50")), lambda turn: burst(200, 20))
    sid = (await create_session(client))["sessionId"]
    streams: list[EventStream] = []

    async def follow(task_status: trio.TaskStatus[None]) -> None:
        async with open_stream(client, sid) as stream:
            streams.append(stream)
            task_status.started()
            await stream.until_idle()

    async with trio.open_nursery() as nursery:
        for _ in range(10):
            await nursery.start(follow)
        await start_task(client, sid, task)
    published = [[(e.id, e.data) for e in s.seen if e.id] for s in streams]
    assert len(published[0]) > 200
    assert all(events == published[0] for events in published)
