"""The stream of a run: how its messages reach the consumer, and how a cut one is closed.

This module owns the path a message takes out of the engine: :class:`Outlet` hands
it to the consumer's :class:`RunStream` and then records it (ledger and trace), in
batches, keeping one order for both; :class:`OpenFragments` remembers what a cut
model stream left open so that it can be closed ``aborted``; :class:`RunResult` is
how the run ended, read from the stream once it is over.

It does not decide *what* is streamed (turns, approvals and compaction do) and does
no I/O besides the memory channel. The invariant: a message is either streamed and
recorded, or (its hand-over cancelled) neither, so the consumer, the model context
and the trace always agree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal, TypeAlias, final

import attrs
import trio

from penguin import protocol as om

__all__ = [
    "STREAM_BUFFER",
    "Batch",
    "OpenFragments",
    "Outlet",
    "RunResult",
    "RunStatus",
    "RunStream",
    "finish",
]

Message: TypeAlias = om.OmniMessage[om.Payload]
RunStatus: TypeAlias = Literal[
    "completed", "aborted", "failed", "timeout", "malformed", "auth", "max_turns"
]

STREAM_BUFFER: Final = 1
"""Batches waiting for the consumer, besides the one it may be taking: a slow consumer
slows the run down once about ``STREAM_BUFFER + 1`` full batches are waiting."""
_BATCH_SIZE: Final = 64


@final
@attrs.frozen(kw_only=True)
class RunResult:
    """How a run ended: the status, the model's error when it failed, turns taken.

    ``unreachable`` is True when the run failed because its model's server could not be
    reached at all (connection refused, an unknown host), after the quick retries;
    ``rate_limited`` when it failed because the server kept refusing it for its rate
    limit (HTTP 429) through every retry. Each is a failure of the server, not of the
    task, which a batch stops on.
    """

    status: RunStatus
    error_message: str | None = None
    turns: int = 0
    unreachable: bool = False
    rate_limited: bool = False


@final
class Batch(list[Message]):
    """Messages handed over together; the producer appends until the consumer takes it."""

    __slots__ = ("taken",)

    def __init__(self, first: Message) -> None:
        super().__init__((first,))
        self.taken = False


@final
class RunStream:
    """The messages of one run, in order; :attr:`result` once the iteration ended."""

    def __init__(self, receive: trio.MemoryReceiveChannel[Batch]) -> None:
        self._receive = receive
        self._batch: Batch | None = None
        self._index = 0
        self._result: RunResult | None = None

    def __aiter__(self) -> RunStream:
        return self

    async def __anext__(self) -> Message:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    async def receive(self) -> Message:
        """The next message (``trio.EndOfChannel`` after the last one)."""
        batch = self._batch
        if batch is not None and self._index < len(batch):
            await trio.lowlevel.checkpoint_if_cancelled()
            self._index += 1
            return batch[self._index - 1]
        batch = await self._receive.receive()
        batch.taken = True
        self._batch = batch
        self._index = 1
        return batch[0]

    @property
    def result(self) -> RunResult:
        """How the run ended; ``RuntimeError`` while it is still going."""
        if self._result is None:
            raise RuntimeError("the run has not finished yet")
        return self._result


def finish(stream: RunStream, result: RunResult) -> None:
    """Give ``stream`` its result; the driver calls it before it closes the channel."""
    stream._result = result


@final
class OpenFragments:
    """What a cut model stream left unfinished, so that it can be closed ``aborted``.

    A fragment is open from its ``start`` to its ``stop``; after the ``stop`` its
    complete message is still owed (it follows immediately on the wire, but a cut
    can fall between the two).
    """

    __slots__ = ("_aggregator", "_owed")

    def __init__(self) -> None:
        self._aggregator = om.PartialAggregator()
        self._owed: list[Message] = []

    def push(self, message: Message) -> None:
        """Account for one message that was passed on."""
        if om.is_partial(message):
            self._owed.extend(self._aggregator.push(message))
        elif self._owed and om.is_complete_model_message(message):
            self._owed.clear()

    def close(self) -> list[Message]:
        """The ``stop`` partials and ``aborted`` complete messages that close the stream."""
        closing: list[Message] = []
        for complete in self._owed:
            closing.extend(_aborted(complete, stop=False))
        for complete in self._aggregator.flush():
            closing.extend(_aborted(complete, stop=True))
        self._owed = []
        return closing


def _aborted(complete: Message, *, stop: bool) -> list[Message]:
    """``complete`` cut by an interrupt: its ``stop`` partial (if still open) and itself."""
    payload = complete.payload
    if isinstance(payload, om.TextPayload):
        partial: Message = om.partial_text("stop", "", "aborted")
        closed: Message = om.assistant_text(payload.text, "aborted")
    elif isinstance(payload, om.ThinkingPayload):
        partial = om.partial_thinking("stop", "", "aborted")
        closed = om.thinking(payload.thinking, "aborted")
    elif isinstance(payload, om.ToolCallPayload):
        partial = om.partial_tool_call("stop", payload.name, payload.tool_call_id, "", "aborted")
        closed = om.tool_call(
            payload.name, payload.arguments, payload.tool_call_id, stop_reason="aborted"
        )
    else:  # a model stream carries no other fragments
        return []
    return [partial, closed] if stop else [closed]


@final
class Outlet:
    """Where the messages of a run go: the stream, and then the ledger and the trace.

    A hand-over is atomic: either the message reaches the stream *and* is recorded,
    or (cancelled) neither. Messages travel in batches: until the consumer takes
    the last batch handed over, new messages join it, so a burst costs the consumer
    one wake-up instead of one scheduling round per message. Records keep the
    stream's order exactly: while one hand-over waits for room in a full stream,
    later ones queue behind it.
    """

    __slots__ = ("_channel", "_lock", "_open", "_record")

    def __init__(
        self, channel: trio.MemorySendChannel[Batch], record: Callable[[Message], None]
    ) -> None:
        self._channel = channel
        self._record = record
        self._lock = trio.StrictFIFOLock()
        self._open: Batch | None = None

    async def __call__(self, message: Message) -> None:
        """Stream ``message`` and record it (if it is a record)."""
        await self._hand_over(message, True)

    async def stream_only(self, message: Message) -> None:
        """Stream ``message`` without recording it (fragments, records made already)."""
        await self._hand_over(message, False)

    async def _hand_over(self, message: Message, record: bool) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        if not self._lock.locked():
            batch = self._open
            if batch is not None and not batch.taken and len(batch) < _BATCH_SIZE:
                batch.append(message)
                if record:
                    self._record(message)
                return
            batch = Batch(message)
            try:
                self._channel.send_nowait(batch)
            except trio.WouldBlock:
                pass
            else:
                self._open = batch
                if record:
                    self._record(message)
                return
        async with self._lock:
            batch = Batch(message)
            await self._channel.send(batch)
            self._open = batch
            if record:
                self._record(message)
