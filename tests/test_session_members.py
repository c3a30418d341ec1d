"""Issue 17 item 1: what a surface needs of a Session, from the Session itself.

A run's own ``max_turns``, the model and how to change it, the usage so far, and the
reconnect and compaction settings, all without reaching for the engine.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

import penguin
from penguin import protocol as om
from penguin.agent import SessionHolder, SessionUsage
from penguin.engine import CompactionSettings, EngineBusyError, ReconnectPolicy
from penguin.llm import ModelRef, ScriptedLLM, text, tool_call, turn, usage


def allow(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
    return "allow"


def looping() -> ScriptedLLM:
    """A model that calls a tool every turn, so only max_turns ends its runs."""
    call = tool_call("read_file", {"file_path": "missing.txt"})
    return ScriptedLLM(fallback=turn(call, usage(output=5, total=100)))


async def test_17_1_max_turns_is_the_runs_own(tmp_path: Path) -> None:
    agent = penguin.Agent.open(tmp_path / "root")
    with trio.fail_after(60):  # without the cap the model would loop for ever
        await runs_capped(agent, tmp_path)


async def runs_capped(agent: penguin.Agent, tmp_path: Path) -> None:
    async with agent.session(tmp_path, llm=looping()) as session:
        async with session.run([om.user_text("go")], approve=allow, max_turns=2) as stream:
            async for _ in stream:
                pass
        assert (stream.result.status, stream.result.turns) == ("max_turns", 2)
        async with session.run([om.user_text("more")], approve=allow, max_turns=1) as stream:
            async for _ in stream:
                pass
        assert (stream.result.status, stream.result.turns) == ("max_turns", 1)


async def test_17_1_the_model_is_read_and_changed_on_the_session(tmp_path: Path) -> None:
    first = ScriptedLLM([turn(text("one"))])
    second = ScriptedLLM([turn(text("two"))], model=ModelRef("other", "m2"))
    agent = penguin.Agent.open(tmp_path / "root")
    async with agent.session(tmp_path, llm=first) as session:
        assert session.llm is first
        session.set_llm(second)
        assert session.llm is second
        async with session.run([om.user_text("hi")]) as stream:
            with pytest.raises(EngineBusyError):
                session.set_llm(first)  # not while a run is live
            live = session.running
            async for _ in stream:
                pass
        assert (live, session.running) == (True, False)
        assert session.llm is second
    assert (len(first.requests), len(second.requests)) == (0, 1)


async def test_17_1_usage_counts_turns_and_tokens(tmp_path: Path) -> None:
    llm = ScriptedLLM(
        [turn(text("a"), usage(output=3, total=40)), turn(text("b"), usage(total=90))]
    )
    agent = penguin.Agent.open(tmp_path / "root")
    async with agent.session(tmp_path, llm=llm) as session:
        assert session.usage == SessionUsage(turns=0, tokens=om.TokenCounts(), context_tokens=0)
        for prompt in ("one", "two"):
            async with session.run([om.user_text(prompt)]) as stream:
                async for _ in stream:
                    pass
        seen = session.usage
    assert (seen.turns, seen.context_tokens) == (2, 90)
    assert (seen.tokens.output, seen.tokens.total) == (3, 130)


async def test_17_1_reconnect_and_compaction_are_set_on_the_session(tmp_path: Path) -> None:
    agent = penguin.Agent.open(tmp_path / "root")
    async with agent.session(tmp_path, llm=ScriptedLLM(context_window=1000)) as session:
        assert session.reconnect == ReconnectPolicy()
        assert session.compaction == CompactionSettings(max_context_length=800)
        session.reconnect = ReconnectPolicy(delays=(0.1,))
        session.compaction = None
        assert session.reconnect.delays == (0.1,)
        assert session.compaction is None


# ---------------------------------------------------------------------- 17.2: one holder


async def test_17_2_a_holder_keeps_the_session_open_until_released(tmp_path: Path) -> None:
    agent = penguin.Agent.open(tmp_path / "root")
    holder = SessionHolder()
    beside: list[str] = []

    async def while_open(session: penguin.Session) -> None:
        beside.append(session.session_id)
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        session = await holder.open(
            nursery, lambda: agent.session(tmp_path, llm=looping()), while_open=while_open
        )
        assert holder.session is session
        assert holder.session_id == session.session_id
        assert not holder.closed.is_set()
        async with session.run([om.user_text("go")], approve=allow, max_turns=1) as stream:
            async for _ in stream:
                pass
        await holder.release()
        assert holder.closed.is_set()
        after: list[object] = [holder.session, holder.session_id]
        assert after == [None, session.session_id]
    assert beside == [session.session_id]
    with pytest.raises(RuntimeError, match="holds one session"):
        await holder.open(nursery, lambda: agent.session(tmp_path, llm=looping()))


async def test_17_2_an_error_while_opening_is_raised_by_open(tmp_path: Path) -> None:
    agent = penguin.Agent.open(tmp_path / "root")
    holder = SessionHolder()
    async with trio.open_nursery() as nursery:
        with pytest.raises(penguin.WorkspaceError):
            await holder.open(nursery, lambda: agent.session(tmp_path / "missing", llm=looping()))
        assert holder.closed.is_set()
        await holder.release()  # nothing to wait for


async def test_17_2_a_session_that_does_not_close_in_grace_is_cancelled(tmp_path: Path) -> None:
    agent = penguin.Agent.open(tmp_path / "root")
    holder = SessionHolder()
    stuck = trio.Event()

    @contextlib.asynccontextmanager
    async def slow_to_close() -> AsyncIterator[penguin.Session]:
        async with agent.session(tmp_path, llm=looping()) as session:
            try:
                yield session
            finally:
                stuck.set()
                await trio.sleep_forever()  # cancelled by the holder after grace

    async with trio.open_nursery() as nursery:
        await holder.open(nursery, slow_to_close)
        with trio.fail_after(30):
            await holder.release(grace=0.2)
    assert stuck.is_set()
    assert holder.closed.is_set()
