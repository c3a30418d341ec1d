"""Issue 18 item 3 through a whole Session and a batch, with a real local HTTP server.

The server answers 429 with ``Retry-After``, then 500, then the answer: the session
waits what the server asked for, then the ladder's wait, and every ``request_end`` says
what happened. A batch whose model is not there says the same words as it stops (a
server that cannot be reached is not a task's result: issue 20's trials, where a model
server gone mid-batch turned every task left into a final ``timeout``).
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import trio

import penguin
from penguin import batch
from penguin import config as cfg
from penguin import protocol as om
from penguin.engine import ReconnectPolicy
from penguin.llm import OpenAIChatLLM
from penguin.llm import testing as t


async def test_18_3_a_session_honours_retry_after_then_keeps_the_ladder(tmp_path: Path) -> None:
    arrived: list[float] = []
    replies: list[t.Reply] = [
        t.ErrorReply(429, "slow down", headers=(("Retry-After", "1"),)),
        t.ErrorReply(500, "boom"),
        t.sse_reply([t.content_chunk("Hello."), t.finish_chunk()]),
    ]

    def handler(request: t.ReceivedRequest) -> t.Reply:
        arrived.append(trio.current_time())
        return replies[len(arrived) - 1]

    agent = penguin.Agent.open(tmp_path / "root")
    async with (
        t.serve_openai_compatible(handler) as server,
        OpenAIChatLLM(base_url=server.base_url, model_id="m") as llm,
        agent.session(tmp_path, llm=llm) as session,
    ):
        # Short ladder waits, so that the 1 s the server asked for stands out.
        session.reconnect = ReconnectPolicy(delays=(0.1, 0.2, 0.3))
        async with session.run([om.user_text("hi")]) as stream:
            ends = [m.payload async for m in stream if isinstance(m.payload, om.RequestEndPayload)]
        result = stream.result
    assert result.status == "completed"
    assert [(e.status, e.retry_in_ms, e.error_message) for e in ends] == [
        ("timeout", 1000, "rate limited (429): slow down"),
        ("timeout", 200, "server error 500: boom"),
        ("completed", None, None),
    ]
    assert arrived[1] - arrived[0] >= 1.0  # the server's wait, not the ladder's 0.1 s


async def test_18_3_a_batch_stopped_by_its_model_says_cannot_connect(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"
    root = tmp_path / "root"
    configure(root, base_url)
    tasks = [batch.BatchTask(id="down", prompt="hi"), batch.BatchTask(id="next", prompt="hi")]
    got: list[batch.BatchResult] = []

    async def run() -> None:
        async with batch.run_batch(tasks, root=root, concurrency=1) as results:
            got.extend([r async for r in results])

    began = trio.current_time()
    with pytest.raises(batch.ModelUnreachableError) as raised:
        await run()
    assert raised.value.reason == f"cannot connect to {base_url} (Connection refused)"
    assert str(raised.value) == f"the model cannot be reached: {raised.value.reason}"
    assert trio.current_time() - began < 5  # twice more within 2 s, then the stop
    assert got == []  # neither task got a result: --resume runs both


async def test_18_3_a_timed_out_batch_task_names_the_last_model_error(tmp_path: Path) -> None:
    root = tmp_path / "root"
    async with t.serve_openai_compatible(lambda r: t.ErrorReply(503, "overloaded")) as server:
        configure(root, server.base_url)
        tasks = [batch.BatchTask(id="busy", prompt="hi", timeout_s=1)]
        async with batch.run_batch(tasks, root=root) as results:
            [result] = [r async for r in results]
    assert (result.status, result.error) == (
        "timeout",
        "timed out after 1 s; last model error: server error 503: overloaded",
    )


def configure(root: Path, base_url: str) -> None:
    paths = cfg.AgentPaths(root)
    entry = cfg.ModelEntry(provider="local", model_id="m", base_url=base_url, api_key="k")
    project = cfg.add_model(cfg.load_project_config(paths.project_config), entry, set_default=True)
    cfg.save_project_config(paths.project_config, project)
