"""Issue 21.2: ``penguin server`` SIGKILLed at random instants of a running task.

After each kill the server is started again on the same data root, and: the index agrees
with the traces (the killed session is listed, and its trace is the one the index names);
every trace reads back (a torn last line is what a crash may leave, nothing else is
malformed); the session's next task carries its history (the model is sent the killed
task's words); and no process the killed server started is left. The instants are drawn
from a seeded generator, so a failure names an instant that can be run again.
"""

from __future__ import annotations

import random
import signal
from pathlib import Path

import pytest
import trio

from penguin import config as cfg
from penguin.trace import read_trace, trace_files
from tests.environment.processes import marked_processes, wait_until

from .support import (
    ScriptedModel,
    calls,
    create_session,
    exec_command,
    open_stream,
    start_task,
)
from .test_cli import penguin_server

INSTANTS = [round(random.Random(21).uniform(0.05, 1.5), 3) for _ in range(3)]


@pytest.mark.parametrize("instant", INSTANTS)
async def test_21_2_a_server_killed_mid_task_restarts_consistent(
    root: Path, model: ScriptedModel, no_stray_processes: str, instant: float
) -> None:
    steps = [calls(exec_command(f"sleep 0.3; echo step {n}")) for n in range(8)]  # >= 2.4 s
    first = model.script("first task: eight steps", *steps)
    async with penguin_server(root) as server:
        async with server.client() as client:
            sid = (await create_session(client, approvalMode="allow-all"))["sessionId"]
            async with open_stream(client, sid) as stream:
                await start_task(client, sid, first)
                await stream.until(lambda event: event.is_state("running"))
                await trio.sleep(instant)  # the random instant of the running task
                server.process.send_signal(signal.SIGKILL)
        with trio.fail_after(10):
            assert await server.process.wait() == -signal.SIGKILL
    await wait_until(lambda: not marked_processes(run=no_stray_processes), within=5)

    traces = cfg.AgentPaths(root).traces_dir
    for trace in traces.rglob("*.jsonl"):
        read_trace(trace, strict=True)  # raises on any malformed line but a torn last one
    (killed,) = trace_files(traces, sid)
    assert "step 7" not in killed.read_text()  # the kill landed while the task ran

    second = model.script("second task: what came before?")
    async with penguin_server(root) as server:
        async with server.client() as client:
            listed = await client.get(f"/api/sessions/{sid}")
            assert listed.status_code == 200, listed.text
            async with open_stream(client, sid) as stream:
                await start_task(client, sid, second)
                await stream.until_idle()
            detail = (await client.get(f"/api/sessions/{sid}")).json()["session"]
        assert await server.stop(signal.SIGINT) == 0
    asked = model.requests[-1]
    texts = [str(message.get("content")) for message in asked["messages"]]
    assert any(first in text for text in texts)  # the history is carried
    assert any(second in text for text in texts)
    assert trace_files(traces, sid)[0] == killed  # the index's session is the trace's
    assert detail["sessionId"] == sid
    if "tracePath" in detail:
        assert detail["tracePath"] == str(killed)
