"""Small Trio idioms shared by every owner of background work.

Nurseries raise exception groups; the public surface of penguin raises plain
exceptions. :func:`collapse_single` is the one place where a group holding exactly one
exception is turned back into that exception, so ``async with`` blocks that own a
nursery (``Environment.open``, ``Environment.execute_tool``) let a caller's own
exception out unchanged.

:func:`run_in_worker` is the short blocking call (a file append, a lock, a small read)
in a worker thread: ``trio.to_thread.run_sync``'s contract at about half its CPU, for
the calls every session makes several times. :func:`run_leavable_in_worker` is the
call a tool makes on the user's files, which a file server that stopped answering can
hold for minutes: a cancel waits for it a second at most, then leaves it to its thread.

:class:`EnterFirst` is a stream's ``async with`` block that says how to use it when a
caller iterates or awaits it instead.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Final, Generic, NoReturn, TypeVar, TypeVarTuple, final

import outcome
import trio

__all__ = [
    "EnterFirst",
    "collapse_single",
    "error_text",
    "require_trio",
    "run_in_worker",
    "run_leavable_in_worker",
]

_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")


@final
class EnterFirst(AbstractAsyncContextManager[_T], Generic[_T]):
    """``inner``, an ``async with`` block, that says how to enter it when it is iterated.

    ``async for m in session.run(...)`` (no ``async with``) otherwise fails with Python's
    ``'async for' requires an object with __aiter__ method, got
    _AsyncGeneratorContextManager``, which names neither penguin nor the cure. This
    raises ``TypeError`` naming ``what`` was called and ``example``, the right form,
    and does the same for ``await``. Type checkers do not see those two methods, so
    they still flag the mistake before it runs.
    """

    __slots__ = ("_example", "_inner", "_what")

    def __init__(self, inner: AbstractAsyncContextManager[_T], what: str, example: str) -> None:
        self._inner = inner
        self._what = what
        self._example = example

    async def __aenter__(self) -> _T:
        return await self._inner.__aenter__()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        return await self._inner.__aexit__(kind, error, traceback)

    if not TYPE_CHECKING:

        def __aiter__(self) -> NoReturn:
            raise TypeError(
                f"{self._what} is entered with 'async with' first, and the stream it gives"
                f" is iterated: {self._example}"
            )

        def __await__(self) -> NoReturn:
            raise TypeError(
                f"{self._what} is not awaited but entered with 'async with': {self._example}"
            )


WORKER_SLOTS: Final = 40
"""Calls :func:`run_in_worker` runs at once in threads of its own (as many as Trio's
default limiter allows ``trio.to_thread.run_sync``)."""


@final
class _Slots:
    """How many :func:`run_in_worker` calls run now, counted by the threads themselves.

    A slot is taken on the event loop as the call starts and given back in the worker
    thread the moment the call returns. Trio's limiter takes its token back only when
    the loop has the value in hand, a whole pass of the scheduler later: with a batch's
    64 busy sessions a pass can take tens of milliseconds, and at about a thousand hops
    a second the 40 tokens ran out while most were held by calls long finished (a third
    of the hops of 200 tasks of ``benchmarks.batch`` then queued through the slower
    ``trio.to_thread.run_sync``; with slots, only the first wave's). Process-wide: every
    Trio run in the process shares it.
    """

    def __init__(self, total: int) -> None:
        self.total = total
        self.taken = 0
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self.taken >= self.total:
                return False
            self.taken += 1
            return True

    def give(self) -> None:
        with self._lock:
            self.taken -= 1


_slots: Final = _Slots(WORKER_SLOTS)


def require_trio(what: str) -> None:
    """Raise a ``RuntimeError`` that says what to do when called outside a Trio run.

    Called first by the ``async with`` blocks a program opens penguin with. Without
    it, awaiting penguin under asyncio fails at its first Trio call with "Task got bad
    yield: WaitTaskRescheduled(...)", which names neither penguin nor the cure.
    """
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        raise RuntimeError(
            f"{what} runs on Trio, and this is not a Trio run (an asyncio program?): call it"
            " from trio.run(...), or from asyncio as a Trio guest of its loop"
            " (trio.lowlevel.start_guest_run; docs/embedding.md, 'From asyncio')"
        ) from None


def error_text(exc: BaseException) -> str:
    """The message of ``exc``, looking through groups of one; its class name if empty."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__


@contextmanager
def collapse_single() -> Iterator[None]:
    """Re-raise a ``BaseExceptionGroup`` of exactly one exception as that exception.

    Groups nested one inside another, each of one member, unwrap to the innermost
    exception. The exception comes out as it went in: its ``__cause__``, its
    ``__suppress_context__`` and its ``__context__`` (a ``ValueError`` raised while
    handling a ``KeyError`` still names the ``KeyError``) are the ones it was raised
    with, not links to the group it travelled in. A group of several exceptions (or of
    none) is re-raised unchanged. ``trio.Cancelled`` unwraps like any other, so the
    cancel scope that fired still catches it.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
            inner = group.exceptions[0]
            if not isinstance(inner, BaseExceptionGroup):
                _raise_unchained(inner)
            group = inner
        raise


def _raise_unchained(exc: BaseException) -> NoReturn:
    # Raising inside an ``except`` block sets the exception's __context__ to the
    # exception being handled (here, the group); put back the one it was raised with.
    # A bare ``raise exc`` (no ``from``) leaves __cause__ and __suppress_context__ alone.
    context = exc.__context__
    try:
        raise exc
    finally:
        exc.__context__ = context
        del exc, context  # the frame would otherwise keep the exception (and its traceback)


async def run_in_worker(fn: Callable[[*_Ts], _T], *args: *_Ts) -> _T:
    """``fn(*args)`` in one of Trio's cached worker threads; its value or its exception.

    The contract of ``trio.to_thread.run_sync(fn, *args)`` with its defaults: a
    checkpoint (``Cancelled`` before ``fn`` starts, when the caller is cancelled), never
    abandoned once started (a cancel that comes while ``fn`` runs is delivered after
    it returned, at the caller's next checkpoint), a bounded number of threads: at most
    :data:`WORKER_SLOTS` calls run at once in threads of its own, each slot free again
    the moment its call returns; past them a call queues through
    ``trio.to_thread.run_sync`` and its default limiter. What it leaves out is what
    costs: the thread is not renamed for the call (two ``prctl`` calls through ctypes),
    there is no message loop for ``trio.from_thread``, and ``fn`` runs in the thread's
    own context, not a copy of the caller's. So ``fn`` must not use
    ``trio.from_thread`` (a call that wants to stop when cancelled takes
    :func:`run_leavable_in_worker`'s check) or read the caller's context variables.
    On a 2-core machine a hop costs ~55 µs of CPU this way against ~90 µs through
    ``run_sync`` (``benchmarks/thread_hop.py``), and a batch task makes about a dozen.
    """
    return await _hop(functools.partial(fn, *args))


LEAVE_GRACE: Final = 1.0
"""Seconds a cancelled :func:`run_leavable_in_worker` waits for its call before leaving it."""


@final
class _Handover:
    """Between a leavable call's thread and its caller: who finished first, under a lock."""

    __slots__ = ("delivered", "left", "lock", "raise_cancel")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.delivered = False  # the outcome is on its way to the caller
        self.left = False  # the caller went: the outcome is the thread's to dispose of
        self.raise_cancel: Callable[[], NoReturn] | None = None  # set: ``check()`` raises


async def run_leavable_in_worker(
    work: Callable[[Callable[[], None]], _T],
    *,
    left: Callable[[_T], None] | None = None,
    grace: float = LEAVE_GRACE,
) -> _T:
    """``work(check)`` in a worker thread, where ``check()`` raises once the caller is cancelled.

    For a blocking call that may wait on something that stopped answering (a file
    server, a process's ``chdir`` into a directory on one), where a tool call's
    interrupt and time limit must still end the call. A cancel that comes while
    ``work`` runs makes ``check()`` raise in the thread (Trio's own ``Cancelled``, so a
    call stops between its steps: a file tool before it commits its write), and is
    delivered once ``work`` returns, when that is within ``grace`` seconds (always, on
    a file system that answers). Otherwise the caller leaves the call: ``Cancelled`` is
    raised then, and ``work`` goes on in its thread, stopping at its next ``check()``.
    A value it returns all the same is given to ``left`` in that thread, to release
    what it holds (a process started too late); an exception is dropped. The thread is
    one of Trio's cached threads, outside :data:`WORKER_SLOTS`: a call left waiting must
    not hold up the short calls. Without a cancel it costs what :func:`run_in_worker`
    costs: one hop there and one back.
    """
    await trio.lowlevel.checkpoint_if_cancelled()
    task = trio.lowlevel.current_task()
    token = trio.lowlevel.current_trio_token()
    handover = _Handover()

    def check() -> None:
        raise_cancel = handover.raise_cancel
        if raise_cancel is not None:
            raise_cancel()  # Trio's Cancelled, from the abort

    def back_in_trio(result: outcome.Outcome[_T]) -> None:
        trio.lowlevel.reschedule(task, result)

    def deliver(result: outcome.Outcome[_T]) -> None:  # in the thread, once work returned
        with handover.lock:
            handover.delivered = not handover.left
        if handover.delivered:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(back_in_trio, result)
        elif left is not None and isinstance(result, outcome.Value):
            left(result.value)

    async def leave_after_grace() -> None:
        await trio.sleep(grace)
        with handover.lock:
            if handover.delivered:
                return
            handover.left = True
        assert handover.raise_cancel is not None
        trio.lowlevel.reschedule(task, outcome.capture(handover.raise_cancel))

    def abort(raise_cancel: Callable[[], NoReturn]) -> trio.lowlevel.Abort:
        handover.raise_cancel = raise_cancel
        trio.lowlevel.spawn_system_task(leave_after_grace)
        return trio.lowlevel.Abort.FAILED

    trio.lowlevel.start_thread_soon(functools.partial(work, check), deliver)
    value: _T = await trio.lowlevel.wait_task_rescheduled(abort)
    return value


async def _hop(call: Callable[[], _T]) -> _T:
    await trio.lowlevel.checkpoint_if_cancelled()
    if not _slots.take():
        return await trio.to_thread.run_sync(call)  # waits for a token of its limiter
    task = trio.lowlevel.current_task()
    token = trio.lowlevel.current_trio_token()

    def work() -> _T:
        try:
            return call()
        finally:
            _slots.give()  # free now, not when the loop comes round to the value

    def back_in_trio(result: outcome.Outcome[_T]) -> None:
        trio.lowlevel.reschedule(task, result)

    def deliver(result: outcome.Outcome[_T]) -> None:
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(back_in_trio, result)

    def abort(raise_cancel: Callable[[], NoReturn]) -> trio.lowlevel.Abort:
        return trio.lowlevel.Abort.FAILED  # never abandoned: the cancel waits for the value

    try:
        trio.lowlevel.start_thread_soon(work, deliver)
    except BaseException:
        _slots.give()
        raise
    value: _T = await trio.lowlevel.wait_task_rescheduled(abort)
    return value
