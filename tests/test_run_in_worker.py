"""run_in_worker: trio.to_thread.run_sync's contract for short blocking calls (issue 20.1).

A batch task makes about nine thread hops; this hop costs about half of
``run_sync``'s CPU (``benchmarks/thread_hop.py``). These tests hold it to the contract
the call sites relied on: another thread, the value or the exception, a checkpoint
before the call, never abandoned once started, counted against Trio's default limiter.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import trio
import trio.testing

from penguin._concurrency import run_cancellable_in_worker, run_in_worker


async def test_20_1_the_call_runs_in_another_thread_and_gives_its_value() -> None:
    here = threading.get_ident()
    where, value = await run_in_worker(lambda a, b: (threading.get_ident(), a + b), 2, 3)
    assert value == 5
    assert where != here


async def test_20_1_the_calls_exception_comes_out_as_itself() -> None:
    def fails(path: str) -> None:
        raise FileNotFoundError(2, "No such file or directory", path)

    with pytest.raises(FileNotFoundError) as caught:
        await run_in_worker(fails, "/nowhere")
    assert caught.value.filename == "/nowhere"
    assert trio.to_thread.current_default_thread_limiter().borrowed_tokens == 0


async def test_20_1_a_cancelled_caller_never_starts_the_call() -> None:
    ran: list[bool] = []
    with trio.CancelScope() as scope:
        scope.cancel()
        await run_in_worker(ran.append, True)
    assert scope.cancelled_caught
    assert ran == []
    assert trio.to_thread.current_default_thread_limiter().borrowed_tokens == 0


async def test_20_1_a_started_call_is_not_abandoned_by_a_cancel() -> None:
    started, release = threading.Event(), threading.Event()
    steps: list[str] = []

    def blocking() -> str:
        started.set()
        release.wait(10)
        steps.append("returned")
        return "value"

    async def caller(scope: trio.CancelScope) -> None:
        with scope:
            steps.append(await run_in_worker(blocking))
            await trio.lowlevel.checkpoint()  # where the cancel is delivered
            steps.append("not reached")

    scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(caller, scope)
        await trio.to_thread.run_sync(started.wait)
        limiter = trio.to_thread.current_default_thread_limiter()
        assert limiter.borrowed_tokens == 1  # the running call holds a token
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert steps == []  # still waiting for the call, not cancelled out of it
        release.set()
    assert steps == ["returned", "value"]
    assert scope.cancelled_caught
    assert limiter.borrowed_tokens == 0


async def test_20_1_with_no_free_thread_token_the_call_waits_for_one() -> None:
    limiter = trio.to_thread.current_default_thread_limiter()
    limiter.total_tokens = 1
    holder = object()
    await limiter.acquire_on_behalf_of(holder)
    ran: list[str] = []

    async def caller() -> None:
        ran.append(await run_in_worker(lambda: "ran"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(caller)
        await trio.testing.wait_all_tasks_blocked()
        assert ran == []  # queued behind the held token
        assert limiter.statistics().tasks_waiting == 1
        limiter.release_on_behalf_of(holder)
    assert ran == ["ran"]
    assert limiter.borrowed_tokens == 0


async def test_20_1_the_check_passes_while_the_caller_is_not_cancelled() -> None:
    def work(check: Callable[[], None]) -> str:
        for _ in range(3):
            check()
        return "done"

    assert await run_cancellable_in_worker(work) == "done"


class _Write:
    """A blocking write: checks, starts, waits to be let go, checks again, commits."""

    def __init__(self) -> None:
        self.started, self.let_go = threading.Event(), threading.Event()
        self.steps: list[str] = []

    def __call__(self, check: Callable[[], None]) -> None:
        check()
        self.steps.append("checked before the cancel")
        self.started.set()
        self.let_go.wait(10)
        check()
        self.steps.append("committed")  # must not happen: the caller was cancelled


async def _write_in(scope: trio.CancelScope, write: _Write) -> None:
    with scope:
        await run_cancellable_in_worker(write)


async def test_20_1_the_check_raises_cancelled_once_the_caller_is_cancelled() -> None:
    """A write_file is cancelled before it commits: its check raises, nothing lands."""
    write, scope = _Write(), trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_write_in, scope, write)
        await trio.to_thread.run_sync(write.started.wait)
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        write.let_go.set()
    assert scope.cancelled_caught
    assert write.steps == ["checked before the cancel"]
    assert trio.to_thread.current_default_thread_limiter().borrowed_tokens == 0


async def test_20_1_a_queued_call_keeps_its_check() -> None:
    """With no thread token free the call queues through run_sync; the check still works."""
    limiter = trio.to_thread.current_default_thread_limiter()
    limiter.total_tokens = 1
    holder = object()
    await limiter.acquire_on_behalf_of(holder)
    write, scope = _Write(), trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_write_in, scope, write)
        await trio.testing.wait_all_tasks_blocked()
        assert limiter.statistics().tasks_waiting == 1
        limiter.release_on_behalf_of(holder)
        # (the default limiter's one token is the call's now: wait on a limiter of our own)
        await trio.to_thread.run_sync(write.started.wait, limiter=trio.CapacityLimiter(1))
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        write.let_go.set()
    assert scope.cancelled_caught
    assert write.steps == ["checked before the cancel"]
