"""The sans-IO SSE parser: the text/event-stream rules, and chunking never matters."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from penguin.llm._sse import SSEEvent, SSEParser


def parse(*chunks: bytes) -> list[SSEEvent]:
    parser = SSEParser()
    events = [event for chunk in chunks for event in parser.feed(chunk)]
    return events + parser.close()


def test_data_lines_make_events_on_blank_lines() -> None:
    assert parse(b"data: one\n\ndata: two\n\n") == [SSEEvent("one"), SSEEvent("two")]


def test_events_come_out_as_soon_as_their_blank_line_arrives() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: one\n") == []
    assert parser.feed(b"\ndata: tw") == [SSEEvent("one")]
    assert parser.feed(b"o\n\n") == [SSEEvent("two")]
    assert parser.close() == []


def test_multi_line_data_is_joined_with_newlines() -> None:
    assert parse(b"data: a\ndata: b\ndata:\ndata:c\n\n") == [SSEEvent("a\nb\n\nc")]


def test_only_one_space_after_the_colon_is_dropped() -> None:
    assert parse(b"data:  two spaces\n\n") == [SSEEvent(" two spaces")]


def test_crlf_cr_and_lf_line_ends() -> None:
    expected = [SSEEvent("a"), SSEEvent("b"), SSEEvent("c")]
    assert parse(b"data: a\r\n\r\ndata: b\r\rdata: c\n\n") == expected


def test_a_cr_at_a_chunk_end_pairs_with_the_next_lf() -> None:
    # Were the \r and \n two line ends, the blank line would dispatch "a" early and
    # the second data line would make a separate event.
    assert parse(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == [SSEEvent("a\nb")]


def test_comments_are_ignored() -> None:
    assert parse(b": keep-alive\n\n: x\ndata: a\n: y\n\n") == [SSEEvent("a")]


def test_event_type_and_id() -> None:
    events = parse(b"event: error\nid: 7\ndata: x\n\ndata: y\n\nid\ndata: z\n\n")
    assert events == [SSEEvent("x", "error", "7"), SSEEvent("y", "message", "7"), SSEEvent("z")]


def test_an_id_with_nul_is_ignored() -> None:
    assert parse(b"id: 1\n\nid: a\0b\ndata: x\n\n") == [SSEEvent("x", "message", "1")]


def test_retry_is_remembered_when_it_is_digits() -> None:
    parser = SSEParser()
    parser.feed(b"retry: 1500\n\nretry: soon\n\n")
    assert parser.retry == 1500


def test_a_blank_line_without_data_dispatches_nothing_and_resets_the_type() -> None:
    assert parse(b"event: odd\n\ndata: x\n\n") == [SSEEvent("x")]


def test_unknown_fields_and_bare_field_names() -> None:
    assert parse(b"foo: bar\nbaz\ndata\n\n") == [SSEEvent("")]


def test_a_leading_bom_is_skipped_once() -> None:
    assert parse(b"\xef\xbb", b"\xbfdata: a\n\n") == [SSEEvent("a")]
    assert parse(b"\n\xef\xbb\xbfdata: a\n\n") == []  # not at the start: part of a field name


def test_utf8_split_across_chunks_and_invalid_bytes() -> None:
    text = "data: héllo ✓\n\n".encode()
    assert parse(*(text[i : i + 1] for i in range(len(text)))) == [SSEEvent("héllo ✓")]
    assert parse(b"data: \xff\n\n") == [SSEEvent("\ufffd")]


def test_close_dispatches_an_event_whose_blank_line_never_came() -> None:
    assert parse(b"data: [DONE]\n") == [SSEEvent("[DONE]")]
    assert parse(b"data: [DONE]") == [SSEEvent("[DONE]")]
    assert parse(b'data: {"cut') == [SSEEvent('{"cut')]
    assert parse(b"") == []


# --------------------------------------------------------------------------- properties

_values = st.text(st.characters(codec="utf-8", exclude_characters="\r\n\0"), max_size=12)
_lines = st.one_of(
    _values.map(lambda value: f"data: {value}"),
    _values.map(lambda value: f"data:{value}"),
    _values.map(lambda value: f": {value}"),
    _values.map(lambda value: f"event: {value}"),
    _values.map(lambda value: f"id: {value}"),
    st.just(""),
    st.just("retry: 10"),
)
_streams = st.tuples(
    st.lists(_lines, max_size=25), st.sampled_from(["\n", "\r\n", "\r"]), st.booleans()
).map(lambda parts: parts[1].join(parts[0]) + (parts[1] if parts[2] else ""))


@given(_streams, st.data())
def test_any_chunking_yields_the_same_events(stream: str, data: st.DataObject) -> None:
    body = stream.encode()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=12)))
    chunks = [body[start:end] for start, end in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    assert parse(*chunks) == parse(body)
    assert parse(*(body[i : i + 1] for i in range(len(body)))) == parse(body)


@given(st.lists(st.lists(_values, min_size=1, max_size=3), max_size=8), st.data())
def test_data_events_round_trip(events: list[list[str]], data: st.DataObject) -> None:
    end = data.draw(st.sampled_from(["\n", "\r\n", "\r"]))
    body = "".join(
        "".join(f"data: {line}{end}" for line in lines) + end for lines in events
    ).encode()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=6)))
    chunks = [body[start:end] for start, end in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    assert parse(*chunks) == [SSEEvent("\n".join(lines)) for lines in events]
