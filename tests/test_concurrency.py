"""collapse_single: a group of one comes out as its exception, links intact (issue 10 item 4)."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import re
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio

from penguin._concurrency import collapse_single


async def in_a_nursery(*tasks: Callable[[], Awaitable[object]]) -> None:
    """Run ``tasks`` in a nursery under collapse_single, as the Environment does."""
    with collapse_single():
        async with trio.open_nursery() as nursery:
            for task in tasks:
                nursery.start_soon(task)


def collapsed(exc: BaseException) -> None:
    """Raise ``exc`` under collapse_single."""
    with collapse_single():
        raise exc


async def value_error_while_handling_a_key_error() -> None:
    try:
        raise KeyError("outer")
    except KeyError:
        raise ValueError("inner")  # noqa: B904 -- the implicit context is the point


async def test_10_4_the_context_of_the_one_exception_survives() -> None:
    with pytest.raises(ValueError, match=r"^inner$") as caught:
        await in_a_nursery(value_error_while_handling_a_key_error)
    exc = caught.value
    assert isinstance(exc.__context__, KeyError)
    assert exc.__context__.args == ("outer",)
    assert exc.__cause__ is None
    assert not exc.__suppress_context__
    shown = "".join(traceback.format_exception(exc))
    assert "KeyError: 'outer'" in shown
    assert "During handling of the above exception, another exception occurred" in shown
    assert "ExceptionGroup" not in shown


async def test_10_4_an_exception_without_context_gets_none_not_the_group() -> None:
    async def alone() -> None:
        raise ValueError("alone")

    with pytest.raises(ValueError, match=r"^alone$") as caught:
        await in_a_nursery(alone)
    assert caught.value.__context__ is None
    assert caught.value.__cause__ is None


async def test_10_4_an_explicit_cause_is_kept() -> None:
    cause = OSError("disk")

    async def caused() -> None:
        raise ValueError("caused") from cause

    with pytest.raises(ValueError, match=r"^caused$") as caught:
        await in_a_nursery(caused)
    assert caught.value.__cause__ is cause
    assert caught.value.__suppress_context__


async def test_10_4_from_none_stays_silenced_over_the_same_context() -> None:
    async def silenced() -> None:
        try:
            raise KeyError("hidden")
        except KeyError:
            raise ValueError("silenced") from None

    with pytest.raises(ValueError, match=r"^silenced$") as caught:
        await in_a_nursery(silenced)
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__
    assert isinstance(caught.value.__context__, KeyError)


def test_10_4_nested_groups_of_one_unwrap_to_the_innermost() -> None:
    inner = LookupError("deep")
    with pytest.raises(LookupError) as caught:
        collapsed(ExceptionGroup("a", [ExceptionGroup("b", [inner])]))
    assert caught.value is inner
    assert caught.value.__context__ is None


def test_10_4_a_group_of_several_is_raised_unchanged() -> None:
    group = ExceptionGroup("two", [ValueError("a"), KeyError("b")])
    with pytest.raises(ExceptionGroup) as caught:
        collapsed(group)
    assert caught.value is group
    assert [type(e) for e in caught.value.exceptions] == [ValueError, KeyError]


def test_10_4_a_group_holding_a_group_of_several_is_raised_unchanged() -> None:
    group = ExceptionGroup("outer", [ExceptionGroup("two", [ValueError("a"), KeyError("b")])])
    with pytest.raises(ExceptionGroup) as caught:
        collapsed(group)
    assert caught.value is group


def test_10_4_a_plain_exception_passes_untouched() -> None:
    plain = KeyError("plain")
    with pytest.raises(KeyError) as caught:
        collapsed(plain)
    assert caught.value is plain
    assert caught.value.__context__ is None


async def test_10_4_cancellation_still_reaches_its_scope() -> None:
    # One task cancelled: the nursery's group of one Cancelled collapses to it.
    with trio.move_on_after(0.01) as one:
        await in_a_nursery(trio.sleep_forever)
    assert one.cancelled_caught

    # Several tasks cancelled at once: a group of several, still the scope's to catch.
    with trio.move_on_after(0.01) as several:
        await in_a_nursery(trio.sleep_forever, trio.sleep_forever, trio.sleep_forever)
    assert several.cancelled_caught


async def test_10_4_an_error_beside_cancelled_siblings_reaches_the_caller() -> None:
    async def fail() -> None:
        await trio.lowlevel.checkpoint()
        raise ValueError("boom")

    with pytest.raises(ValueError, match=r"^boom$"):
        await in_a_nursery(trio.sleep_forever, fail, trio.sleep_forever)


async def test_10_4_two_errors_stay_a_group() -> None:
    async def first() -> None:
        raise ValueError("one")

    async def second() -> None:
        raise KeyError("two")

    with pytest.raises(ExceptionGroup) as caught:
        await in_a_nursery(first, second)
    assert sorted(type(e).__name__ for e in caught.value.exceptions) == ["KeyError", "ValueError"]


@pytest.mark.parametrize("entry", ["Agent.session", "Environment.open"])
def test_penguin_under_asyncio_says_it_runs_on_trio_and_how(
    entry: str, tmp_path: pathlib.Path
) -> None:
    # Without the check, the first Trio call inside failed with "Task got bad yield:
    # WaitTaskRescheduled(...)", which names neither penguin nor the cure.
    import penguin
    from penguin.llm import ScriptedLLM, text, turn

    async def under_asyncio() -> None:
        opened: contextlib.AbstractAsyncContextManager[object]
        if entry == "Agent.session":
            agent = penguin.Agent.open(tmp_path / "data")
            opened = agent.session(tmp_path, llm=ScriptedLLM([turn(text("hi"))]))
        else:
            opened = penguin.Environment.open(penguin.EnvironmentConfig(workspace_dir=tmp_path))
        async with opened:
            raise AssertionError("opened under asyncio")  # pragma: no cover

    with pytest.raises(RuntimeError) as caught:
        asyncio.run(under_asyncio())
    assert str(caught.value).startswith(f"{entry} runs on Trio, and this is not a Trio run")
    assert "trio.lowlevel.start_guest_run" in str(caught.value)


async def test_a_stream_iterated_or_awaited_without_async_with_says_how_to_enter_it(
    tmp_path: pathlib.Path,
) -> None:
    # Without EnterFirst: "'async for' requires an object with __aiter__ method, got
    # _AsyncGeneratorContextManager", which names neither penguin nor the cure.
    import penguin
    from penguin import protocol as om
    from penguin.llm import ScriptedLLM, text, turn

    agent = penguin.Agent.open(tmp_path / "data")
    call = om.tool_call("exec_command", {"description": "d", "cmd": "echo hi"}, "c1")
    async with agent.session(tmp_path, llm=ScriptedLLM([turn(text("hi"))])) as session:
        env = session.environment
        cases: list[tuple[Any, str]] = [  # Any: a type checker flags these before they run
            (session.run([om.user_text("hello")]), "session.run(...)"),
            (env.execute_tool(call), "Environment.execute_tool(...)"),
        ]
        for opened, what in cases:
            with pytest.raises(TypeError) as iterated:
                async for _ in opened:
                    pass  # pragma: no cover
            assert str(iterated.value).startswith(
                f"{what} is entered with 'async with' first, and the stream it gives is"
                " iterated: async with "
            )
            with pytest.raises(TypeError, match=rf"^{re.escape(what)} is not awaited but"):
                await opened
        async with session.run([om.user_text("hello")]) as stream:  # the right way still works
            said = [m async for m in stream]
        async with env.execute_tool(call) as stream:
            output = [m async for m in stream][-1]
    assert any(isinstance(m.payload, om.TextPayload) and m.payload.text == "hi" for m in said)
    assert isinstance(output.payload, om.ToolCallOutputPayload)
    assert output.payload.output == "hi\n"
