"""One session's event channel: ids, the replay buffer, and bounded subscribers (S7).

A session's events — every message its runs yield, and the server events
(``approval_request``, ``approval_resolved``, ``task_state``) — are published on one
:class:`EventChannel`. Publishing is synchronous and never waits for a reader:

- each published event gets the id ``<epoch>-<seq>`` (``seq`` from 1, +1 per event)
  and is encoded once, as the SSE frame every subscriber is sent;
- the channel keeps the most recent events in a replay buffer, at most
  :data:`REPLAY_EVENTS` events or :data:`REPLAY_BYTES` bytes of frames, whichever is
  less;
- each :class:`Subscriber` has its own queue of frames not yet taken by its writer,
  at most :data:`QUEUE_EVENTS` events or :data:`QUEUE_BYTES` bytes. The writer takes
  *everything* queued at once (:meth:`Subscriber.next_batch`), so events published
  while a write is in progress go out together in the next write: a reader that keeps
  reading is never dropped by a burst. A subscriber whose queue would overflow is
  disconnected instead — the session never waits for it. An empty queue takes any one
  event, however large, so one event bigger than the byte bound still reaches a
  subscriber that is keeping up.

:meth:`EventChannel.subscribe` is atomic (no checkpoint): a new subscriber first gets
the events after its ``Last-Event-ID`` when they are still buffered, else one
``resync_required`` (for an evicted id, another epoch, or an id that was never
issued); then the snapshot frames the caller passes (the ``task_state`` and the
still-pending ``approval_request`` events, which carry no id because they are meant
for this connection only); then every event published from that moment on. Nothing
can fall between the replay and the live events.

The frames of one connection: ``id:`` (published events only), ``event:
server_event`` (server events only), one ``data:`` line of single-line JSON, and a
blank line. ``: ping`` is written after :data:`PING_INTERVAL` seconds of silence.
This module does no I/O; the SSE response in ``_asgi`` writes what
:meth:`Subscriber.next_batch` returns.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterable, Mapping
from typing import Final, final

import trio

from penguin import protocol as om

__all__ = [
    "PING_FRAME",
    "PING_INTERVAL",
    "QUEUE_BYTES",
    "QUEUE_EVENTS",
    "REPLAY_BYTES",
    "REPLAY_EVENTS",
    "RESYNC_REQUIRED",
    "EventChannel",
    "Subscriber",
    "encode_frame",
    "server_event_frame",
]

REPLAY_EVENTS: Final = 10_000
REPLAY_BYTES: Final = 8 * 1024 * 1024
QUEUE_EVENTS: Final = 1_000
QUEUE_BYTES: Final = 8 * 1024 * 1024
PING_INTERVAL: Final = 20.0
"""Seconds of silence after which a connection gets a ``: ping`` comment."""
PING_FRAME: Final = b": ping\n\n"
SERVER_EVENT: Final = "server_event"


def encode_frame(data: str, *, event_id: str | None = None, name: str | None = None) -> bytes:
    """One SSE frame; ``data`` must be a single line (compact JSON is)."""
    if "\n" in data or "\r" in data:
        raise ValueError("an SSE data line must not contain a line break")
    head = ""
    if event_id is not None:
        head += f"id: {event_id}\n"
    if name is not None:
        head += f"event: {name}\n"
    return f"{head}data: {data}\n\n".encode()


def _compact(value: Mapping[str, object]) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def server_event_frame(event: Mapping[str, object], *, event_id: str | None = None) -> bytes:
    """A ``server_event`` frame carrying ``event`` (a JSON object with a ``type``)."""
    return encode_frame(_compact(event), event_id=event_id, name=SERVER_EVENT)


RESYNC_REQUIRED: Final = server_event_frame({"type": "resync_required"})


@final
class Subscriber:
    """One connection's view of a channel: a bounded queue its writer drains in batches."""

    def __init__(self, channel: EventChannel, *, max_events: int, max_bytes: int) -> None:
        self._channel = channel
        self._max_events = max_events
        self._max_bytes = max_bytes
        self._initial: list[bytes] = []
        self._queue: collections.deque[bytes] = collections.deque()
        self._bytes = 0
        self._ready = trio.Event()
        self.closed = False
        """True once the subscriber will get nothing more (after what is queued)."""
        self.overflowed = False
        """True when it was disconnected for not keeping up."""

    @property
    def queued(self) -> int:
        """Live events waiting for the writer."""
        return len(self._queue)

    def _start(self, frames: Iterable[bytes]) -> None:
        # The replay and snapshot are this connection's own: they do not count against
        # the live queue's bounds (a 10,000-event gap must not overflow it at once).
        self._initial.extend(frames)
        if self._initial:
            self._ready.set()

    def offer(self, frame: bytes) -> None:
        """Queue one published frame, or disconnect the subscriber if it would overflow."""
        if self.closed:
            return
        # An empty queue takes any one frame, however large: a single event bigger than
        # the byte bound (a 9 MiB answer) is not a subscriber falling behind.
        if self._queue and (
            len(self._queue) + 1 > self._max_events or self._bytes + len(frame) > self._max_bytes
        ):
            self.overflowed = True
            self._queue.clear()
            self._initial.clear()
            self._bytes = 0
            self._end()
            return
        self._queue.append(frame)
        self._bytes += len(frame)
        self._ready.set()

    def _end(self) -> None:
        self.closed = True
        self._ready.set()
        self._channel._forget(self)

    def close(self) -> None:
        """Stop receiving: what is queued is still delivered, then ``next_batch`` says None."""
        if not self.closed:
            self._end()

    def take(self) -> bytes | None:
        """Everything queued, as one chunk; ``b""`` when nothing is; None once closed and empty."""
        if self.overflowed:
            return None
        chunks = self._initial
        self._initial = []
        chunks.extend(self._queue)
        self._queue.clear()
        self._bytes = 0
        if not chunks:
            return None if self.closed else b""
        if not self.closed:
            self._ready = trio.Event()
        return b"".join(chunks)

    async def next_batch(self, silence: float = PING_INTERVAL) -> bytes | None:
        """The next chunk to write; None when the subscriber is done (closed, overflowed).

        The chunk is every queued frame, or :data:`PING_FRAME` once ``silence``
        seconds passed with nothing to send.
        """
        with trio.move_on_after(silence):
            await self._ready.wait()
        chunk = self.take()
        if chunk == b"":
            return PING_FRAME
        return chunk


@final
class EventChannel:
    """The events of one session, numbered, buffered for replay, fanned out to subscribers."""

    def __init__(
        self,
        epoch: str,
        *,
        replay_events: int = REPLAY_EVENTS,
        replay_bytes: int = REPLAY_BYTES,
        queue_events: int = QUEUE_EVENTS,
        queue_bytes: int = QUEUE_BYTES,
    ) -> None:
        if "-" in epoch or not epoch:
            raise ValueError(f"an epoch is a non-empty string without '-': {epoch!r}")
        self.epoch = epoch
        self.seq = 0
        """The seq of the last published event (0: none yet)."""
        self._replay_events = replay_events
        self._replay_bytes = replay_bytes
        self._queue_events = queue_events
        self._queue_bytes = queue_bytes
        self._buffer: collections.deque[tuple[int, bytes]] = collections.deque()
        self._buffered_bytes = 0
        self._subscribers: dict[Subscriber, None] = {}  # insertion-ordered set
        self.closed = False

    @property
    def subscriber_count(self) -> int:
        """How many subscribers are attached."""
        return len(self._subscribers)

    @property
    def buffered(self) -> int:
        """How many events the replay buffer holds."""
        return len(self._buffer)

    def publish_message(self, message: om.OmniMessage[om.Payload]) -> str:
        """Publish one OmniMessage as an unnamed event; its id."""
        return self._publish(om.dumps(message), None)

    def publish_server_event(self, event: Mapping[str, object]) -> str:
        """Publish one ``server_event`` (``approval_request``, ``task_state``...); its id."""
        return self._publish(_compact(event), SERVER_EVENT)

    def _publish(self, data: str, name: str | None) -> str:
        self.seq += 1
        event_id = f"{self.epoch}-{self.seq}"
        frame = encode_frame(data, event_id=event_id, name=name)
        self._buffer.append((self.seq, frame))
        self._buffered_bytes += len(frame)
        while self._buffer and (
            len(self._buffer) > self._replay_events or self._buffered_bytes > self._replay_bytes
        ):
            _, dropped = self._buffer.popleft()
            self._buffered_bytes -= len(dropped)
        for subscriber in list(self._subscribers):
            subscriber.offer(frame)
        return event_id

    def replay_after(self, last_event_id: str | None) -> list[bytes] | None:
        """The buffered frames after ``last_event_id``; None when that gap cannot be filled.

        No id (a first connection) is an empty replay.
        """
        if last_event_id is None:
            return []
        epoch, _, number = last_event_id.strip().rpartition("-")
        if epoch != self.epoch or not number.isascii() or not number.isdigit():
            return None
        seq = int(number)
        if seq > self.seq:
            return None
        if seq == self.seq:
            return []
        if not self._buffer or self._buffer[0][0] > seq + 1:
            return None  # evicted
        start = seq + 1 - self._buffer[0][0]
        return [frame for _, frame in list(self._buffer)[start:]]

    def subscribe(self, last_event_id: str | None, snapshot: Iterable[bytes] = ()) -> Subscriber:
        """A new subscriber: the gap (or ``resync_required``), ``snapshot``, then live events."""
        subscriber = Subscriber(self, max_events=self._queue_events, max_bytes=self._queue_bytes)
        replay = self.replay_after(last_event_id)
        frames = [RESYNC_REQUIRED] if replay is None else replay
        subscriber._start([*frames, *snapshot])
        if self.closed:
            subscriber.close()
        else:
            self._subscribers[subscriber] = None
        return subscriber

    def _forget(self, subscriber: Subscriber) -> None:
        self._subscribers.pop(subscriber, None)

    def close(self) -> None:
        """End every subscriber (after what it has queued); later subscribers end at once."""
        self.closed = True
        for subscriber in list(self._subscribers):
            subscriber.close()
