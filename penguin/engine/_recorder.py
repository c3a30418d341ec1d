"""Trace recording off the hot path: one background task writes, in submission order.

The engine hands every message to :meth:`TraceRecorder.record` (a plain call that
never blocks and never raises) and goes on streaming; one task drains the queue into
the :class:`~penguin.trace.TraceWriter`, which writes each record with one
``write(2)`` in a worker thread, all the records queued at that moment in one hop.
Order is kept because the queue is FIFO and the one task writes sequentially;
rotations travel through the same queue, so a record submitted after a rotation
lands in the new file.

Leaving :meth:`TraceRecorder.open` writes everything still queued (shielded, with a
generous bound), so a run that ends — even by cancellation — leaves a complete
trace behind. Write failures are the writer's to report (``[trace] write failed``);
they never reach the engine.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

import trio

from penguin import protocol as om
from penguin._log import logger as _logger
from penguin.trace import TraceWriter, is_recordable

__all__ = ["TraceRecorder"]

_FLUSH_BOUND: Final = 30.0
"""How long closing may take to write what is still queued."""

_Item = om.OmniMessage[om.Payload] | trio.Event | None
"""A message to write, an event to set once everything before it is written, or a rotation."""


class TraceRecorder:
    """Writes recordable messages to one trace writer from a background task."""

    def __init__(self, writer: TraceWriter, send: trio.MemorySendChannel[_Item]) -> None:
        self.writer = writer
        self._send = send

    @classmethod
    @asynccontextmanager
    async def open(cls, writer: TraceWriter) -> AsyncIterator[TraceRecorder]:
        """Start the writing task; leaving the block writes what is queued, then stops."""
        send, receive = trio.open_memory_channel[_Item](math.inf)
        async with trio.open_nursery() as nursery:
            recorder = cls(writer, send)
            drain_scope: trio.CancelScope = await nursery.start(recorder._drain, receive)
            try:
                yield recorder
            finally:
                send.close()
                # The drain is shielded from the owner's cancellation; only this bound
                # ends it early, should the disk stop answering.
                drain_scope.deadline = trio.current_time() + _FLUSH_BOUND

    def record(self, message: om.OmniMessage[om.Payload]) -> None:
        """Queue ``message`` if it is recordable (partials and child messages are not)."""
        if is_recordable(message):
            self._queue(message)

    def rotate(self) -> None:
        """Queue a rotation: later records go to the next file."""
        self._queue(None)

    def _queue(self, item: _Item) -> None:
        try:
            self._send.send_nowait(item)
        except trio.ClosedResourceError:
            what = "rotate" if item is None else "write"
            _logger.warning("[trace] %s failed: the trace recorder is closed", what)

    async def flush(self) -> None:
        """Wait until everything queued so far is written."""
        written = trio.Event()
        try:
            self._send.send_nowait(written)
        except trio.ClosedResourceError:
            await trio.lowlevel.checkpoint()  # closed: everything was written on the way out
            return
        await written.wait()

    async def _drain(
        self,
        receive: trio.MemoryReceiveChannel[_Item],
        *,
        task_status: trio.TaskStatus[trio.CancelScope],
    ) -> None:
        with trio.CancelScope(shield=True) as scope, receive:
            task_status.started(scope)
            burst: list[om.OmniMessage[om.Payload]] = []
            async for item in receive:
                # Take every message already queued behind this one: they share one
                # worker-thread hop (each is still its own write). Markers end a burst.
                while True:
                    if item is None or isinstance(item, trio.Event):
                        if burst:
                            await self.writer.record_many(burst)
                            burst = []
                        if item is None:
                            await self.writer.try_rotate()
                        else:
                            item.set()
                    else:
                        burst.append(item)
                    try:
                        item = receive.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                if burst:
                    await self.writer.record_many(burst)
                    burst = []
