"""S5 over real sockets: tasks, steering, abort, many sessions, processes; and the faults of
the issue's list (a model that fails or hangs, a client that leaves mid-stream)."""

from __future__ import annotations

import ctypes
import os

import httpx
import trio

from penguin.llm import testing as t
from penguin.server import RunningServer
from tests.environment.processes import marked_processes, wait_until

from .support import (
    ScriptedModel,
    calls,
    create_session,
    error_of,
    exec_command,
    fail,
    gated,
    hang,
    open_stream,
    say,
    start_task,
)


async def test_s5_1_a_task_is_accepted_at_once_and_runs_in_the_server(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    release = trio.Event()
    task = model.script("slow", gated(release, say("Finally.")))
    sid = (await create_session(client))["sessionId"]
    async with open_stream(client, sid) as stream:
        accepted = await client.post(
            f"/api/sessions/{sid}/tasks", json={"input": [{"type": "text", "text": task}]}
        )
        assert accepted.status_code == 202
        assert accepted.json() == {"sessionId": sid}
        await stream.until(lambda e: e.is_state("running"))
        info = (await client.get(f"/api/sessions/{sid}")).json()["session"]
        assert info["state"] == "running"
        busy = await client.post(
            f"/api/sessions/{sid}/tasks", json={"input": [{"type": "text", "text": "another"}]}
        )
        assert error_of(busy) == (409, "task_in_progress")
        release.set()
        await stream.until(lambda e: e.is_state("idle"))
    texts = [e.data["payload"].get("text") for e in stream.seen if e.event is None]
    assert "Finally." in texts


async def test_s5_1_bad_input_is_refused_and_starts_nothing(client: httpx.AsyncClient) -> None:
    sid = (await create_session(client))["sessionId"]
    bodies: list[dict[str, object]] = [
        {"input": [{"type": "image_url", "url": "x"}]},
        {"input": [{"type": "text", "text": ""}]},
        {"input": []},
        {},
    ]
    for body in bodies:
        refused = await client.post(f"/api/sessions/{sid}/tasks", json=body)
        assert error_of(refused) == (400, "invalid_request")
    info = (await client.get(f"/api/sessions/{sid}")).json()["session"]
    assert info["state"] == "idle"


async def test_s5_2_steering_reaches_the_running_task_and_idle_is_409(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    release = trio.Event()
    task = model.script("steer me", gated(release, calls(exec_command("echo step"))))
    sid = (await create_session(client))["sessionId"]
    idle = await client.post(f"/api/sessions/{sid}/steer", json={"text": "hello?"})
    assert error_of(idle) == (409, "not_running")
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        await stream.until(lambda e: e.type == "request_begin")
        steered = await client.post(f"/api/sessions/{sid}/steer", json={"text": "use tabs"})
        assert steered.status_code == 202
        release.set()
        await stream.until_idle()
    second = model.requests[-1]["messages"]
    assert any("use tabs" in str(m.get("content")) for m in second)
    assert error_of(await client.post(f"/api/sessions/{sid}/steer", json={})) == (
        400,
        "invalid_request",
    )


async def test_s5_3_abort_interrupts_the_task_and_idle_abort_is_204(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    task = model.script("long command", calls(exec_command("sleep 60")))
    sid = (await create_session(client))["sessionId"]
    assert (await client.post(f"/api/sessions/{sid}/abort")).status_code == 204
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        await stream.until(
            lambda e: (
                e.type == "partial_tool_call_output" and e.data["payload"]["event_type"] == "start"
            )
        )
        aborted = await client.post(f"/api/sessions/{sid}/abort")
        assert aborted.status_code == 202
        await stream.until(lambda e: e.is_state("idle"))
    outputs = [e.data["payload"] for e in stream.seen if e.type == "tool_call_output"]
    assert outputs[-1]["output"].endswith("[interrupted: tool aborted by user]")
    assert "abort" in [e.type for e in stream.seen]
    assert (await client.post(f"/api/sessions/{sid}/abort")).status_code == 204


async def test_s5_4_many_sessions_run_at_once_in_one_server(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    release = trio.Event()
    arrived = trio.Semaphore(0)
    count = 5

    async def hold(turn: int) -> t.Reply:
        arrived.release()
        await release.wait()
        return t.sse_reply([t.content_chunk("ok"), t.finish_chunk()])

    task = model.script("together", hold)
    sessions = [(await create_session(client))["sessionId"] for _ in range(count)]
    for sid in sessions:
        await start_task(client, sid, task)
    with trio.fail_after(30):
        for _ in range(count):
            await arrived.acquire()  # every session is inside its model request at once
    states = [
        (await client.get(f"/api/sessions/{sid}")).json()["session"]["state"] for sid in sessions
    ]
    assert states == ["running"] * count
    release.set()
    for sid in sessions:
        async with open_stream(client, sid) as stream:
            await stream.until(lambda e: e.is_state("idle"))


async def test_s5_5_processes_are_listed_and_killed(
    client: httpx.AsyncClient, model: ScriptedModel, no_stray_processes: str
) -> None:
    task = model.script(
        "serve", calls(exec_command("echo up; sleep 300", yield_time_ms=300)), say("Started.")
    )
    sid = (await create_session(client))["sessionId"]
    assert (await client.get(f"/api/sessions/{sid}/processes")).json() == {"processes": []}
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        await stream.until_idle()
    (process,) = (await client.get(f"/api/sessions/{sid}/processes")).json()["processes"]
    # issue 22: the reference's fields beside these; serviceUrl only when one is known
    assert {"processId", "command", "state", "exitCode"} <= set(process)
    assert process["command"] == "echo up; sleep 300"
    assert process["state"] == "running"
    assert process["exitCode"] is None
    assert "serviceUrl" not in process
    assert marked_processes(run=no_stray_processes)
    killed = await client.post(f"/api/sessions/{sid}/processes/{process['processId']}/kill")
    assert killed.status_code == 204
    await wait_until(
        lambda: not marked_processes(run=no_stray_processes)
    )  # dead, not just unlisted
    assert (await client.get(f"/api/sessions/{sid}/processes")).json() == {"processes": []}
    again = await client.post(f"/api/sessions/{sid}/processes/{process['processId']}/kill")
    assert error_of(again) == (404, "process_not_found")
    unknown = await client.post(f"/api/sessions/{sid}/processes/proc-00000000/kill")
    assert error_of(unknown) == (404, "process_not_found")


async def test_fault_a_model_that_fails_ends_the_task_and_others_go_on(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    broken = model.script("broken model", fail(401))
    fine = model.script("fine model", say("Working."))
    bad_sid = (await create_session(client))["sessionId"]
    good_sid = (await create_session(client))["sessionId"]
    async with open_stream(client, bad_sid) as stream:
        await start_task(client, bad_sid, broken)
        await stream.until_idle()
    ends = [e.data["payload"] for e in stream.seen if e.type == "request_end"]
    assert ends[-1]["status"] == "auth"
    async with open_stream(client, good_sid) as stream:
        await start_task(client, good_sid, fine)
        await stream.until_idle()
    messages = (await client.get(f"/api/sessions/{bad_sid}/messages")).json()["messages"]
    assert messages[-1]["payload"]["status"] == "auth"


async def test_fault_a_model_that_hangs_is_aborted_while_others_are_served(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    stuck = model.script("stuck model", hang())
    fine = model.script("quick model", say("Quick."))
    stuck_sid = (await create_session(client))["sessionId"]
    good_sid = (await create_session(client))["sessionId"]
    async with open_stream(client, stuck_sid) as stuck_stream:
        await start_task(client, stuck_sid, stuck)
        await stuck_stream.until(lambda e: e.type == "partial_text")
        async with open_stream(client, good_sid) as stream:
            await start_task(client, good_sid, fine)
            await stream.until_idle()
        assert (await client.post(f"/api/sessions/{stuck_sid}/abort")).status_code == 202
        await stuck_stream.until(lambda e: e.is_state("idle"))
    texts = [e.data["payload"] for e in stuck_stream.seen if e.type == "text"]
    assert texts[-1]["stop_reason"] == "aborted"


async def test_fault_a_client_that_leaves_mid_stream_changes_nothing(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    release = trio.Event()
    task = model.script("keep going", gated(release, calls(exec_command("echo fine"))), say("End."))
    sid = (await create_session(client))["sessionId"]
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        await stream.until(lambda e: e.is_state("running"))
    release.set()  # the first reader is gone; the task goes on without it
    async with open_stream(client, sid) as stream:
        await stream.until(lambda e: e.is_state("idle"), within=30)
    messages = (await client.get(f"/api/sessions/{sid}/messages")).json()["messages"]
    assert any(m["payload"].get("text") == "End." for m in messages)
    assert any(m["payload"].get("output") == "fine\n" for m in messages)


async def test_21_4_a_trace_write_that_fails_ends_the_task_failed_with_its_message(
    client: httpx.AsyncClient, server: RunningServer, model: ScriptedModel
) -> None:
    release = trio.Event()
    task = model.script("write it down", gated(release, say("Written.")))
    sid = (await create_session(client))["sessionId"]
    trace = trio.Path((await client.get(f"/api/sessions/{sid}")).json()["session"]["tracePath"])
    aside = trace.with_name("aside.jsonl")
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, task)
        await stream.until(lambda e: e.is_state("running"))
        # Every later append of this session's trace fails (EISDIR): the file and a new
        # directory swap names in one step, so no append can re-create the file between
        # a rename and a mkdir.
        await aside.mkdir()
        await trio.to_thread.run_sync(_exchange, trace, aside)
        release.set()
        ended = await stream.until(
            lambda e: e.type == "task_state" and e.data["state"] != "running"
        )
    assert ended.data == {
        "type": "task_state",
        "state": "failed",
        "message": "trace write failed: Is a directory",
    }
    info = (await client.get(f"/api/sessions/{sid}")).json()["session"]
    assert info["state"] == "failed"
    # the disk is writable again: the next task reopens the session from its trace
    await wait_until(lambda: server.sessions._live[sid].session is None)
    await trio.to_thread.run_sync(_exchange, trace, aside)
    await aside.rmdir()
    async with open_stream(client, sid) as stream:
        await start_task(client, sid, "and now?")
        idle = await stream.until_idle()
    assert idle.data == {"type": "task_state", "state": "idle"}
    info = (await client.get(f"/api/sessions/{sid}")).json()["session"]
    assert info["state"] == "idle"
    assert model.requests[-1]["messages"][-1]["content"] == "and now?"


def _exchange(one: os.PathLike[str], other: os.PathLike[str]) -> None:
    """Swap two paths atomically (Linux's renameat2 with RENAME_EXCHANGE)."""
    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd, rename_exchange = -100, 2
    if libc.renameat2(at_fdcwd, os.fsencode(one), at_fdcwd, os.fsencode(other), rename_exchange):
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno), os.fspath(one))
