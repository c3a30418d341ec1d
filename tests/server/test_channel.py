"""The event channel without sockets (S7.2, S7.3, S7.4, S7.5, S7.6)."""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing

from penguin import protocol as om
from penguin.server import EventChannel
from penguin.server._channel import PING_FRAME, PING_INTERVAL, RESYNC_REQUIRED, encode_frame


def frames(chunk: bytes | None) -> list[dict[str, object]]:
    """The frames of a written chunk: {"id", "event", "data"} (absent fields left out)."""
    assert chunk is not None
    found = []
    for raw in chunk.decode().split("\n\n"):
        if not raw:
            continue
        frame: dict[str, object] = {}
        for line in raw.split("\n"):
            name, _, value = line.partition(": ")
            frame[name] = json.loads(value) if name == "data" else value
        found.append(frame)
    return found


def text(n: int) -> om.OmniMessage[om.Payload]:
    return om.assistant_text(f"message {n}")


def test_s7_2_every_published_event_has_epoch_dash_seq_ids() -> None:
    channel = EventChannel("1700")
    ids = [channel.publish_message(text(n)) for n in range(3)]
    ids.append(channel.publish_server_event({"type": "task_state", "state": "idle"}))
    assert ids == ["1700-1", "1700-2", "1700-3", "1700-4"]
    subscriber = channel.subscribe("1700-2")
    got = frames(subscriber.take())
    assert [f["id"] for f in got] == ["1700-3", "1700-4"]
    assert "event" not in got[0]
    assert got[1]["event"] == "server_event"
    assert got[1]["data"] == {"type": "task_state", "state": "idle"}


def test_s7_1_an_omnimessage_is_one_line_of_its_wire_json() -> None:
    channel = EventChannel("9")
    message = om.assistant_text("two\nlines")
    channel.publish_message(message)
    (frame,) = frames(channel.subscribe("9-0").take())
    assert frame["data"] == om.to_dict(message)


def test_s7_2_snapshot_frames_carry_no_id() -> None:
    channel = EventChannel("5")
    channel.publish_message(text(1))
    snapshot = encode_frame('{"type":"task_state","state":"idle"}', name="server_event")
    subscriber = channel.subscribe(None, [snapshot])
    (frame,) = frames(subscriber.take())
    assert "id" not in frame


def test_s7_3_a_buffered_last_event_id_gets_the_gap_then_the_snapshot_then_live() -> None:
    channel = EventChannel("7")
    for n in range(5):
        channel.publish_message(text(n))
    snapshot = encode_frame('{"type":"task_state","state":"running"}', name="server_event")
    subscriber = channel.subscribe("7-3", [snapshot])
    channel.publish_message(text(5))
    got = frames(subscriber.take())
    assert [f.get("id") for f in got] == ["7-4", "7-5", None, "7-6"]


@pytest.mark.parametrize("last", ["7-1", "8-5", "other-5", "7-99", "garbage", "7-", "7-x1"])
def test_s7_3_an_evicted_foreign_or_unknown_id_gets_resync_required_first(last: str) -> None:
    channel = EventChannel("7", replay_events=3)
    for n in range(6):
        channel.publish_message(text(n))
    assert channel.buffered == 3
    subscriber = channel.subscribe(last)  # 7-1 was evicted; the others were never issued
    chunk = subscriber.take()
    assert chunk is not None
    assert chunk.startswith(RESYNC_REQUIRED)
    assert frames(chunk)[0] == {"event": "server_event", "data": {"type": "resync_required"}}


def test_s7_3_the_oldest_still_buffered_id_is_replayed_without_resync() -> None:
    channel = EventChannel("7", replay_events=3)
    for n in range(6):
        channel.publish_message(text(n))
    got = frames(channel.subscribe("7-3").take())
    assert [f["id"] for f in got] == ["7-4", "7-5", "7-6"]
    assert channel.subscribe("7-6").take() == b""


def test_s7_3_the_replay_buffer_is_bounded_by_bytes_too() -> None:
    channel = EventChannel("1", replay_bytes=1000)
    for n in range(50):
        channel.publish_message(om.assistant_text("x" * 100 + str(n)))
    assert 1 <= channel.buffered < 10
    assert channel.replay_after("1-1") is None
    assert channel.replay_after("1-49") is not None


def test_s7_3_defaults_are_ten_thousand_events_or_eight_mib() -> None:
    channel = EventChannel("1")
    for n in range(10_050):
        channel.publish_message(text(n))
    assert channel.buffered == 10_000
    assert channel.replay_after("1-49") is None
    assert channel.replay_after("1-50") is not None


def test_s7_5_a_subscriber_that_does_not_read_is_disconnected_and_the_rest_go_on() -> None:
    channel = EventChannel("1", queue_events=10)
    stalled = channel.subscribe(None)
    reading = channel.subscribe(None)
    for n in range(25):
        channel.publish_message(text(n))
        if n % 5 == 0:
            assert reading.take() is not None
    assert stalled.overflowed
    assert stalled.take() is None
    assert not reading.overflowed
    assert channel.subscriber_count == 1


def test_s7_5_queue_bounded_by_bytes() -> None:
    channel = EventChannel("1", queue_bytes=2000)
    subscriber = channel.subscribe(None)
    for _ in range(30):
        channel.publish_message(om.assistant_text("y" * 100))
    assert subscriber.overflowed


def test_21_3_one_event_larger_than_the_byte_bound_reaches_a_subscriber_that_keeps_up() -> None:
    channel = EventChannel("1")  # the default 8 MiB bound
    reading = channel.subscribe(None)
    answer = om.assistant_text("x" * (9 * 1024 * 1024))  # a 9 MiB model answer
    channel.publish_message(answer)
    assert not reading.overflowed
    (frame,) = frames(reading.take())
    assert frame["data"] == om.to_dict(answer)
    after = text(1)  # one message: two text(1) calls may differ in their timestamps
    channel.publish_message(after)  # and it goes on receiving
    assert [f["data"] for f in frames(reading.take())] == [om.to_dict(after)]
    assert channel.subscriber_count == 1


def test_21_3_a_large_event_behind_a_queued_one_still_overflows() -> None:
    channel = EventChannel("1", queue_bytes=2000)
    behind = channel.subscribe(None)
    channel.publish_message(text(0))
    channel.publish_message(om.assistant_text("y" * 3000))
    assert behind.overflowed
    assert behind.take() is None


def test_s7_5_defaults_one_thousand_queued_events() -> None:
    channel = EventChannel("1")
    subscriber = channel.subscribe(None)
    for n in range(1000):
        channel.publish_message(text(n))
    assert not subscriber.overflowed
    channel.publish_message(text(1000))
    assert subscriber.overflowed


def test_s7_5_what_queued_during_a_write_goes_out_together() -> None:
    channel = EventChannel("1")
    subscriber = channel.subscribe(None)
    for n in range(600):
        channel.publish_message(text(n))
    first = frames(subscriber.take())
    for n in range(600, 1200):  # the writer took the first 600: room for 600 more
        channel.publish_message(text(n))
    second = frames(subscriber.take())
    assert len(first) == len(second) == 600
    assert not subscriber.overflowed


def test_s7_3_a_replay_larger_than_the_queue_does_not_overflow_it() -> None:
    channel = EventChannel("1")
    for n in range(5000):
        channel.publish_message(text(n))
    subscriber = channel.subscribe("1-0")
    channel.publish_message(text(5000))
    assert not subscriber.overflowed
    assert len(frames(subscriber.take())) == 5001


def test_s7_6_every_subscriber_gets_every_event_in_the_same_order() -> None:
    channel = EventChannel("3")
    subscribers = [channel.subscribe(None) for _ in range(10)]
    for n in range(100):
        channel.publish_message(text(n))
    streams = [[f["id"] for f in frames(s.take())] for s in subscribers]
    assert streams[0] == [f"3-{n}" for n in range(1, 101)]
    assert all(stream == streams[0] for stream in streams)


async def test_s7_4_ping_after_twenty_seconds_of_silence(
    autojump_clock: trio.testing.MockClock,
) -> None:
    channel = EventChannel("1")
    subscriber = channel.subscribe(None)
    start = trio.current_time()
    assert await subscriber.next_batch() == PING_FRAME
    assert trio.current_time() - start == pytest.approx(PING_INTERVAL)
    channel.publish_message(text(1))
    chunk = await subscriber.next_batch()
    assert trio.current_time() - start == pytest.approx(PING_INTERVAL)
    assert chunk is not None
    assert b"message 1" in chunk


async def test_s7_4_no_ping_while_events_flow(autojump_clock: trio.testing.MockClock) -> None:
    channel = EventChannel("1")
    subscriber = channel.subscribe(None)

    async def publish() -> None:
        for n in range(5):
            await trio.sleep(15)
            channel.publish_message(text(n))
        channel.close()

    chunks = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(publish)
        while (chunk := await subscriber.next_batch()) is not None:
            chunks.append(chunk)
    assert PING_FRAME not in chunks
    assert len(chunks) == 5


async def test_closing_the_channel_ends_subscribers_after_what_they_have() -> None:
    channel = EventChannel("1")
    subscriber = channel.subscribe(None)
    channel.publish_message(text(1))
    channel.close()
    assert b"message 1" in (await subscriber.next_batch() or b"")
    assert await subscriber.next_batch() is None
    late = channel.subscribe(None, [b"data: {}\n\n"])
    assert late.closed
    assert await late.next_batch() == b"data: {}\n\n"
    assert await late.next_batch() is None


def test_an_epoch_cannot_contain_a_dash() -> None:
    with pytest.raises(ValueError, match="without '-'"):
        EventChannel("1-2")


def test_a_data_line_never_holds_a_line_break() -> None:
    with pytest.raises(ValueError, match="line break"):
        encode_frame("a\nb")
