"""The one way a client turns its producing task into an :class:`LLMResponse`.

:func:`open_response` runs the client's *producer* in a task of its own nursery and
hands the consumer a response backed by a memory channel. The producer gets an
``emit`` function and returns the :class:`LLMOutcome`; the outcome is stored before
the channel closes, so it is always there when the consumer's iteration ends.

Messages travel in batches (one per network read, or per scripted chunk): a batch
costs one channel hand-off and the messages inside it are handed out without
further scheduling, which is what keeps SSE parsing at hundreds of thousands of
fragments per second. The channel is bounded, so a slow consumer slows the producer
down (and the reads from the socket with it) rather than buffering without limit.

What this module does not do: produce messages or classify errors. A producer that
raises has a bug: its exception propagates out of the ``async with``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Final, final

import trio

from penguin import protocol as om
from penguin._concurrency import collapse_single

from ._interface import LLMOutcome, LLMResponse

__all__ = ["Emit", "Producer", "open_response"]

Message = om.OmniMessage[om.Payload]
Emit = Callable[[list[Message]], Awaitable[None]]
"""Hands one non-empty batch of messages to the consumer (waits while the buffer is full)."""
Producer = Callable[[Emit], Awaitable[LLMOutcome]]
"""A client's request task: emits batches, returns how the response ended."""

_BUFFERED_BATCHES: Final = 16


@final
class _ChannelResponse:
    """An :class:`LLMResponse` reading batches from a memory channel."""

    def __init__(self, receive: trio.MemoryReceiveChannel[list[Message]]) -> None:
        self._receive = receive
        self._batch: list[Message] = []
        self._index = 0
        self._outcome: LLMOutcome | None = None

    def __aiter__(self) -> _ChannelResponse:
        return self

    async def __anext__(self) -> Message:
        if self._index < len(self._batch):
            message = self._batch[self._index]
            self._index += 1
            return message
        try:
            self._batch = await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            self._batch = []
            raise StopAsyncIteration from None
        self._index = 1
        return self._batch[0]

    @property
    def outcome(self) -> LLMOutcome:
        """How the response ended; ``RuntimeError`` until the iteration has ended."""
        if self._outcome is None:
            raise RuntimeError("the outcome is known once the response has been read to its end")
        return self._outcome


@asynccontextmanager
async def open_response(produce: Producer) -> AsyncIterator[LLMResponse]:
    """Run ``produce`` in a task and yield the response that streams what it emits.

    Leaving the block cancels the producer if it is still running (a hard stop: the
    outcome then stays unknown).
    """
    send, receive = trio.open_memory_channel[list[Message]](_BUFFERED_BATCHES)
    response = _ChannelResponse(receive)

    async def drive() -> None:
        with send:
            try:
                outcome = await produce(send.send)
            except trio.BrokenResourceError:
                return  # the consumer closed its end: nobody is listening any more
            response._outcome = outcome

    with collapse_single():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drive)
            with receive:
                yield response
            nursery.cancel_scope.cancel()
