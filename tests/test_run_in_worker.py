"""run_in_worker: trio.to_thread.run_sync's contract for short blocking calls (issue 20.1).

A batch task makes about nine thread hops; this hop costs about half of
``run_sync``'s CPU (``benchmarks/thread_hop.py``). These tests hold it to the contract
the call sites relied on: another thread, the value or the exception, a checkpoint
before the call, never abandoned once started, a bounded number of threads: its own
slots (each free the moment its call returns), then Trio's default limiter.

run_leavable_in_worker (DESIGN §2, a file server that stopped answering): the same,
except that a cancel waits for the call a grace period at most, then leaves it to its
thread, whose late value goes to a disposer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from penguin import _concurrency
from penguin._concurrency import WORKER_SLOTS, run_in_worker, run_leavable_in_worker


@pytest.fixture
def no_free_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every one of run_in_worker's own slots taken: a call queues on Trio's limiter."""
    monkeypatch.setattr(_concurrency._slots, "total", 0)


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


@pytest.mark.parametrize(
    ("start", "slots"),
    [
        (run_in_worker, 1),  # the running call holds a slot
        (lambda f: run_leavable_in_worker(lambda _check: f(), grace=60), 0),  # outside them
    ],
    ids=["run_in_worker", "leavable_within_its_grace"],
)
async def test_20_1_a_started_call_is_not_abandoned_by_a_cancel(
    start: Callable[[Callable[[], str]], Awaitable[str]], slots: int
) -> None:
    started, release = threading.Event(), threading.Event()
    steps: list[str] = []

    def blocking() -> str:
        started.set()
        release.wait(10)
        steps.append("returned")
        return "value"

    async def caller(scope: trio.CancelScope) -> None:
        with scope:
            steps.append(await start(blocking))
            await trio.lowlevel.checkpoint()  # where the cancel is delivered
            steps.append("not reached")

    scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(caller, scope)
        await trio.to_thread.run_sync(started.wait)
        assert _concurrency._slots.taken == slots
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert steps == []  # still waiting for the call, not cancelled out of it
        release.set()
    assert steps == ["returned", "value"]
    assert scope.cancelled_caught
    assert _concurrency._slots.taken == 0


async def test_20_1_a_slot_is_free_once_its_call_returns_not_once_the_loop_takes_it() -> None:
    # Under load the loop comes round to a finished call's value a whole scheduler pass
    # later; the slot must not wait for that, or slots run out while no thread works.
    go = threading.Event()
    values: list[int] = []

    async def caller(n: int) -> None:
        values.append(await run_in_worker(lambda: (go.wait(10), n)[1]))

    async with trio.open_nursery() as nursery:
        for n in range(5):
            nursery.start_soon(caller, n)
        await trio.testing.wait_all_tasks_blocked()
        assert _concurrency._slots.taken == 5
        go.set()
        deadline = time.monotonic() + 10
        while _concurrency._slots.taken and time.monotonic() < deadline:
            time.sleep(0.001)  # noqa: ASYNC251 - the loop's thread held: no value is taken
        assert _concurrency._slots.taken == 0
        assert values == []  # every call has returned, none of its values is taken yet
    assert sorted(values) == [0, 1, 2, 3, 4]


async def test_20_1_past_its_slots_a_call_runs_as_far_as_trios_limiter_allows() -> None:
    # WORKER_SLOTS calls at once run in threads of their own; one more queues on Trio's
    # default limiter instead of starting another thread.
    go = threading.Event()
    limiter = trio.to_thread.current_default_thread_limiter()
    limiter.total_tokens = 1
    holder = object()
    await limiter.acquire_on_behalf_of(holder)
    ran: list[str] = []
    slots_done = trio.Event()

    async def caller(name: str) -> None:
        ran.append(await run_in_worker(lambda: (go.wait(10), name)[1]))
        if len(ran) == WORKER_SLOTS:
            slots_done.set()

    async with trio.open_nursery() as nursery:
        for n in range(WORKER_SLOTS):
            nursery.start_soon(caller, f"slot {n}")
        await trio.testing.wait_all_tasks_blocked()
        assert _concurrency._slots.taken == WORKER_SLOTS
        nursery.start_soon(caller, "queued")
        await trio.testing.wait_all_tasks_blocked()
        assert limiter.statistics().tasks_waiting == 1  # behind the held token
        go.set()
        await slots_done.wait()
        assert "queued" not in ran  # slots free again do not take a call already queued
        limiter.release_on_behalf_of(holder)
    assert ran[-1] == "queued"
    assert limiter.borrowed_tokens == 0


@pytest.mark.usefixtures("no_free_slot")
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


async def test_design_2_the_check_passes_while_the_caller_is_not_cancelled() -> None:
    def work(check: Callable[[], None]) -> str:
        for _ in range(3):
            check()
        return "done"

    assert await run_leavable_in_worker(work) == "done"


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
        await run_leavable_in_worker(write, grace=60)


async def test_design_2_the_check_raises_cancelled_once_the_caller_is_cancelled() -> None:
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


@pytest.mark.usefixtures("no_free_slot")
async def test_design_2_a_leavable_call_takes_neither_a_slot_nor_a_thread_token() -> None:
    """A call left waiting on a stopped server must not hold up the short calls."""
    limiter = trio.to_thread.current_default_thread_limiter()
    limiter.total_tokens = 1
    holder = object()
    await limiter.acquire_on_behalf_of(holder)
    try:
        with trio.fail_after(10):
            where = await run_leavable_in_worker(lambda check: threading.get_ident())
    finally:
        limiter.release_on_behalf_of(holder)
    assert where != threading.get_ident()
    assert _concurrency._slots.taken == 0


async def test_design_2_a_leavable_call_gives_its_value_or_its_exception() -> None:
    here = threading.get_ident()
    assert await run_leavable_in_worker(lambda check: threading.get_ident()) != here

    def fails(check: Callable[[], None]) -> None:
        raise FileNotFoundError(2, "No such file or directory", "/gone")

    with pytest.raises(FileNotFoundError) as raised:
        await run_leavable_in_worker(fails)
    assert raised.value.filename == "/gone"


async def test_design_2_a_call_still_blocked_after_the_grace_is_left_to_its_thread(
    autojump_clock: trio.testing.MockClock,
) -> None:
    started, release, disposed = threading.Event(), threading.Event(), threading.Event()
    late: list[str] = []

    def blocking(check: Callable[[], None]) -> str:
        started.set()
        release.wait(10)  # a stat on a server that does not answer
        return "a process started too late"

    def dispose(value: str) -> None:
        late.append(value)
        disposed.set()

    scope = trio.CancelScope()

    async def caller() -> None:
        with scope:
            await run_leavable_in_worker(blocking, left=dispose, grace=5)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(caller)
        await trio.to_thread.run_sync(started.wait)
        cancelled_at = trio.current_time()
        scope.cancel()
    assert scope.cancelled_caught  # the caller went, the call still blocked
    assert trio.current_time() - cancelled_at == pytest.approx(5)
    assert not release.is_set()
    assert late == []
    release.set()
    assert await trio.to_thread.run_sync(disposed.wait, 10)
    assert late == ["a process started too late"]
