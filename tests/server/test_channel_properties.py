"""Issue 17 item 6: the event channel's bounds and ids hold for any sequence of operations.

Hypothesis drives one :class:`EventChannel` with small bounds through publishes of any
size, subscriptions from any ``Last-Event-ID`` (buffered, evicted, never issued, of
another epoch) and reads, and checks against a plain model of what S7 promises:

- ids are ``<epoch>-1``, ``<epoch>-2``, ... with no gap;
- the replay buffer is the newest events only, within both of its bounds;
- a subscriber gets exactly the events after its ``Last-Event-ID`` when they are still
  buffered, else ``resync_required`` first, then every event published since, in order;
- its queue never holds more than its bounds: one that would overflow is cut off, and
  gets nothing more.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from penguin.server import EventChannel
from penguin.server._channel import RESYNC_REQUIRED, Subscriber, server_event_frame

EPOCH = "e1"
REPLAY_EVENTS = 6
REPLAY_BYTES = 1500
QUEUE_EVENTS = 4
QUEUE_BYTES = 1000
_ID = re.compile(rb"^id: (\S+)$", re.M)

operations = st.lists(
    st.one_of(
        st.tuples(st.just("publish"), st.one_of(st.integers(0, 20), st.integers(100, 600))),
        st.tuples(st.just("subscribe"), st.integers(-3, 40)),
        st.tuples(st.just("take"), st.integers(0, 7)),
    ),
    max_size=60,
)


def last_event_id(choice: int, published: int) -> str | None:
    """-3: no id; -2: another epoch; -1: garbage; n: the id of event n (maybe never issued)."""
    if choice == -3:
        return None
    if choice == -2:
        return f"e0-{max(published, 1)}"
    if choice == -1:
        return f"{EPOCH}-x"
    return f"{EPOCH}-{choice}"


def ids_in(chunk: bytes) -> list[str]:
    return [match.decode() for match in _ID.findall(chunk)]


class Watched:
    """A subscriber and what the model says it must have received."""

    def __init__(self, subscriber: Subscriber, expected: list[str], resync: bool) -> None:
        self.subscriber = subscriber
        self.expected = expected
        self.resync = resync
        self.received: list[str] = []
        self.saw_resync = False
        self.queued_ids: list[str] = []  # published since its last take


@settings(max_examples=300, deadline=None)
@given(operations)
def test_17_6_channel_ids_replay_and_queue_bounds_hold(ops: list[tuple[str, int]]) -> None:
    channel = EventChannel(
        EPOCH,
        replay_events=REPLAY_EVENTS,
        replay_bytes=REPLAY_BYTES,
        queue_events=QUEUE_EVENTS,
        queue_bytes=QUEUE_BYTES,
    )
    sizes: dict[int, int] = {}  # seq -> frame size
    buffered: list[int] = []  # the model's replay buffer: seqs, oldest first
    watched: list[Watched] = []
    for op, value in ops:
        if op == "publish":
            event_id = channel.publish_server_event({"type": "x", "pad": "a" * value})
            seq = len(sizes) + 1
            assert event_id == f"{EPOCH}-{seq}"
            assert channel.seq == seq
            sizes[seq] = len(
                server_event_frame({"type": "x", "pad": "a" * value}, event_id=event_id)
            )
            buffered.append(seq)
            while buffered and (
                len(buffered) > REPLAY_EVENTS or sum(sizes[s] for s in buffered) > REPLAY_BYTES
            ):
                buffered.pop(0)
            assert channel.buffered == len(buffered) <= REPLAY_EVENTS
            for w in watched:
                if w.subscriber.overflowed:
                    continue
                w.queued_ids.append(event_id)
                queued = w.queued_ids
                if (
                    len(queued) > QUEUE_EVENTS
                    or sum(sizes[int(i.rpartition("-")[2])] for i in queued) > QUEUE_BYTES
                ):
                    assert w.subscriber.overflowed
                else:
                    assert not w.subscriber.overflowed
                    assert w.subscriber.queued == len(queued)
        elif op == "subscribe":
            published = len(sizes)
            last = last_event_id(value, published)
            subscriber = channel.subscribe(last)
            if last is None:
                expected, resync = [], False
            elif last.startswith(f"{EPOCH}-") and last.rpartition("-")[2].isdigit():
                seq = int(last.rpartition("-")[2])
                gap = list(range(seq + 1, published + 1))
                fillable = seq <= published and (not gap or (buffered and buffered[0] <= gap[0]))
                expected = [f"{EPOCH}-{s}" for s in gap] if fillable else []
                resync = not fillable
            else:
                expected, resync = [], True
            watched.append(Watched(subscriber, expected, resync))
        elif watched:
            w = watched[value % len(watched)]
            chunk = w.subscriber.take()
            if w.subscriber.overflowed:
                assert chunk is None
                continue
            assert chunk is not None
            if chunk.startswith(RESYNC_REQUIRED):
                w.saw_resync = True
            w.received.extend(ids_in(chunk))
            w.expected.extend(w.queued_ids)
            w.queued_ids = []
    for w in watched:
        if w.subscriber.overflowed:
            assert w.subscriber.take() is None
            continue
        chunk = w.subscriber.take()
        assert chunk is not None
        if chunk.startswith(RESYNC_REQUIRED):
            w.saw_resync = True
        w.received.extend(ids_in(chunk))
        w.expected.extend(w.queued_ids)
        assert w.received == w.expected
        assert w.saw_resync is w.resync
