"""Trace recording off the hot path: one background task writes, in submission order, when idle.

The engine hands every message to :meth:`TraceRecorder.record`, a plain call that never
blocks and never raises: it appends to a queue and, if the writing task is asleep,
wakes it. That task waits until the Trio loop has nothing else to run, then hands the
records queued so far to the :class:`~penguin.trace.TraceWriter` in bursts (at most
:data:`_BURST` records each): the burst is encoded on the loop and written in one
worker-thread hop, one descriptor for the burst and one ``write(2)`` per record.

Why it waits for an idle loop: a worker thread that needs the GIL while the loop is
busy costs the loop far more than the writing itself (every system call in the
thread is a GIL hand-over, and every ``epoll_wait`` of the loop a chance for the
thread to take the GIL back), and encoding is the loop's own work. A session waits for
its model most of the time, so records normally land within a few milliseconds; on a
loop that never goes idle a record waits at most :data:`_IDLE_BOUND` seconds, after
which the recorder writes without waiting until it has caught up.

Order is kept because the queue is FIFO and the one task writes sequentially;
rotations travel through the same queue, so a record submitted after a rotation lands
in the new file. :meth:`TraceRecorder.flush` does not wait for idleness.

Leaving :meth:`TraceRecorder.open` writes everything still queued (shielded, with a
generous bound), so a run that ends — even by cancellation — leaves a complete
trace behind. Write failures are the writer's to report (``[trace] write failed``);
they never reach the engine.
"""

from __future__ import annotations

import importlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Final, final

import trio

from penguin import protocol as om
from penguin._log import logger as _logger
from penguin.trace import TraceWriter, is_recordable

__all__ = ["TraceRecorder"]

_FLUSH_BOUND: Final = 30.0
"""How long closing may take to write what is still queued."""

_IDLE_BOUND: Final = 1.0
"""How long queued records wait for an idle loop before they are written anyway (s)."""

_BURST: Final = 64
"""Records per worker-thread hop: bounds how long encoding one burst holds the loop."""

_Item = om.OmniMessage[om.Payload] | trio.Event | None
"""A message to write, an event to set once everything before it is written, or a rotation."""


# The run loop's own idle hook, which trio.testing re-exports. Importing trio.testing
# imports pytest wherever pytest is installed (for RaisesGroup): 145 ms of CPU in every
# process that records a trace, for one function that lives in trio._core (loaded by
# ``import trio``). Should a Trio move it, the public path is taken.
_WAIT_ALL_TASKS_BLOCKED: Final[Callable[[], Awaitable[None]] | None] = getattr(
    importlib.import_module("trio._core"), "wait_all_tasks_blocked", None
)


async def _idle() -> None:
    """Return once no task of this Trio run is runnable (the loop would sleep)."""
    if _WAIT_ALL_TASKS_BLOCKED is not None:
        await _WAIT_ALL_TASKS_BLOCKED()
    else:  # pragma: no cover - a Trio that moved it
        import trio.testing

        await trio.testing.wait_all_tasks_blocked()


@final
class TraceRecorder:
    """Writes recordable messages to one trace writer from a background task.

    Make one with :meth:`open`; :meth:`record`, :meth:`rotate` and :meth:`flush` are
    for tasks of the same Trio run.
    """

    __slots__ = ("_closed", "_hurry", "_idle_wait", "_parked", "_queue", "_since", "writer")

    def __init__(self, writer: TraceWriter) -> None:
        self.writer = writer
        self._queue: deque[_Item] = deque()
        self._closed = False
        self._parked: trio.Event | None = None  # set to wake the task sleeping on an empty queue
        self._hurry = 0  # flushes queued: write without waiting for an idle loop
        self._idle_wait: trio.CancelScope | None = None
        self._since = 0.0  # when the queue last became non-empty

    @classmethod
    @asynccontextmanager
    async def open(cls, writer: TraceWriter) -> AsyncIterator[TraceRecorder]:
        """Start the writing task; leaving the block writes what is queued, then stops."""
        recorder = cls(writer)
        # The drain's scope is made here and the task started without ``nursery.start``:
        # a shielded child that reports started while its starter is being cancelled
        # stays under ``start``, which then waits for it forever (a batch stopping as a
        # session opened hung so), and the block below, which would end it, never runs.
        drain_scope = trio.CancelScope(shield=True)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(recorder._drain, drain_scope)
            try:
                yield recorder
            finally:
                recorder._closed = True
                recorder._wake(hurry=True)
                # The drain is shielded from the owner's cancellation; only this bound
                # ends it early, should the disk stop answering.
                drain_scope.deadline = trio.current_time() + _FLUSH_BOUND

    def record(self, message: om.OmniMessage[om.Payload]) -> None:
        """Queue ``message`` if it is recordable (partials and child messages are not)."""
        if is_recordable(message):
            self._put(message)

    def rotate(self) -> None:
        """Queue a rotation: later records go to the next file."""
        self._put(None)

    def _put(self, item: _Item) -> bool:
        if self._closed:
            what = "rotate" if item is None else "write"
            _logger.warning("[trace] %s failed: the trace recorder is closed", what)
            return False
        if not self._queue:
            self._since = trio.current_time()
        self._queue.append(item)
        self._wake(hurry=False)
        return True

    def _wake(self, *, hurry: bool) -> None:
        if self._parked is not None:
            self._parked.set()
            self._parked = None
        if hurry and self._idle_wait is not None:
            self._idle_wait.cancel()

    async def flush(self) -> None:
        """Wait until everything queued so far is written (without waiting for idleness)."""
        if self._closed:
            await trio.lowlevel.checkpoint()  # closed: everything was written on the way out
            return
        written = trio.Event()
        self._hurry += 1
        self._put(written)
        self._wake(hurry=True)
        await written.wait()

    async def _drain(self, scope: trio.CancelScope) -> None:
        with scope:
            while True:
                if not self._queue:
                    if self._closed:
                        return
                    self._parked = parked = trio.Event()
                    await parked.wait()
                    continue
                if not (self._closed or self._hurry):
                    with trio.CancelScope(deadline=self._since + _IDLE_BOUND) as wait:
                        self._idle_wait = wait
                        await _idle()
                    self._idle_wait = None
                await self._write_burst()

    async def _write_burst(self) -> None:
        """Write up to :data:`_BURST` queued records, handling the markers among them."""
        burst: list[om.OmniMessage[om.Payload]] = []
        queue = self._queue
        while queue and len(burst) < _BURST:
            item = queue.popleft()
            if item is None or isinstance(item, trio.Event):
                if burst:
                    await self.writer.record_many(burst)
                    burst = []
                if item is None:
                    await self.writer.try_rotate()
                else:
                    self._hurry -= 1
                    item.set()
            else:
                burst.append(item)
        if burst:
            await self.writer.record_many(burst)
