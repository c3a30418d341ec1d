"""How a client turns what it produces into an :class:`LLMResponse`, in two ways.

:class:`PulledResponse` is read by the consumer's own task: the client gives it an
async generator of batches, and each step of the consumer's iteration that needs
more runs the generator on (a network read, typically). No task, no channel; the
generator sets the outcome before it ends. The OpenAI client reads its answers so.

:func:`open_response` runs the client's *producer* in a task of its own nursery and
hands the consumer a response backed by a memory channel. The producer gets an
``emit`` function and returns the :class:`LLMOutcome`; the outcome is stored before
the channel closes, so it is always there when the consumer's iteration ends. The
scripted model, whose script is written as a producer, uses it.

Messages travel in batches (one per network read, or per scripted chunk): a batch
costs one channel hand-off and the messages inside it are handed out without
further scheduling, which is what keeps SSE parsing at hundreds of thousands of
fragments per second. The channel is bounded, so a slow consumer slows the producer
down (and the reads from the socket with it) rather than buffering without limit.

What this module does not do: produce messages or classify errors. A producer that
raises has a bug: its exception propagates out of the ``async with``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Final, final

import trio

from penguin import protocol as om
from penguin._concurrency import collapse_single

from ._interface import LLMOutcome, LLMResponse

__all__ = ["Emit", "Producer", "PulledResponse", "open_response"]

Message = om.OmniMessage[om.Payload]
Emit = Callable[[list[Message]], Awaitable[None]]
"""Hands one non-empty batch of messages to the consumer (waits while the buffer is full)."""
Producer = Callable[[Emit], Awaitable[LLMOutcome]]
"""A client's request task: emits batches, returns how the response ended."""

_BUFFERED_BATCHES: Final = 16


class _BatchedResponse:
    """What both responses share: the messages of the batch in hand, then the next batch."""

    __slots__ = ("_batch", "_index", "_outcome")

    def __init__(self) -> None:
        self._batch: list[Message] = []
        self._index = 0
        self._outcome: LLMOutcome | None = None

    def __aiter__(self) -> _BatchedResponse:
        return self

    async def __anext__(self) -> Message:
        if self._index < len(self._batch):
            message = self._batch[self._index]
            self._index += 1
            return message
        self._batch = []
        self._batch = await self._next_batch()
        self._index = 1
        return self._batch[0]

    async def _next_batch(self) -> list[Message]:
        """The next non-empty batch; ``StopAsyncIteration`` after the last one."""
        raise NotImplementedError

    @property
    def outcome(self) -> LLMOutcome:
        """How the response ended; ``RuntimeError`` until the iteration has ended."""
        if self._outcome is None:
            raise RuntimeError("the outcome is known once the response has been read to its end")
        return self._outcome


@final
class PulledResponse(_BatchedResponse):
    """An :class:`LLMResponse` whose batches come from an async generator run by its reader.

    Give it the generator (:attr:`batches`) before the first read; the generator calls
    :meth:`settle` with the outcome before it finishes. Whoever made the generator
    closes it (``aclose``) when the response is left, read to its end or not.
    """

    __slots__ = ("batches",)

    def __init__(self) -> None:
        super().__init__()
        self.batches: AsyncGenerator[list[Message], None] | None = None

    async def _next_batch(self) -> list[Message]:
        assert self.batches is not None, "the response has no batches to read"
        return await self.batches.__anext__()

    def settle(self, outcome: LLMOutcome) -> None:
        """Store how the response ended (the generator's last act)."""
        self._outcome = outcome


@final
class _ChannelResponse(_BatchedResponse):
    """An :class:`LLMResponse` reading batches from a memory channel."""

    __slots__ = ("_receive",)

    def __init__(self, receive: trio.MemoryReceiveChannel[list[Message]]) -> None:
        super().__init__()
        self._receive = receive

    async def _next_batch(self) -> list[Message]:
        try:
            return await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise StopAsyncIteration from None


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
