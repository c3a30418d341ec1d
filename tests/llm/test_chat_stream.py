"""Decoding a Chat Completions stream, and classifying errors (pure: no sockets)."""

from __future__ import annotations

import datetime
import http
import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from penguin import protocol as om
from penguin.llm._assemble import StreamAssembler
from penguin.llm._chat_stream import (
    ChatStreamDecoder,
    http_error_message,
    retry_after_seconds,
    status_stop_reason,
    usage_counts,
)
from penguin.llm._errors import LLMStreamError
from penguin.llm._sse import SSEEvent
from penguin.llm.testing import (
    completion_chunk,
    content_chunk,
    finish_chunk,
    reasoning_chunk,
    tool_call_chunk,
    usage_chunk,
)

from .discipline import check_discipline, tool_calls

Message = om.OmniMessage[om.Payload]


def make() -> tuple[ChatStreamDecoder, StreamAssembler]:
    counter = itertools.count(1)
    assembler = StreamAssembler(lambda given: given or f"gen_{next(counter)}")
    return ChatStreamDecoder(assembler), assembler


def events(*chunks: dict[str, Any] | str, **dumps: Any) -> list[SSEEvent]:
    return [
        SSEEvent(chunk if isinstance(chunk, str) else json.dumps(chunk, **dumps))
        for chunk in chunks
    ]


def decode(
    *chunks: dict[str, Any] | str,
) -> tuple[ChatStreamDecoder, list[om.OmniMessage[om.Payload]]]:
    decoder, assembler = make()
    decoder.feed(events(*chunks))
    decoder.end_of_stream()
    assembler.close()
    return decoder, assembler.take()


def test_content_reasoning_and_usage() -> None:
    decoder, out = decode(
        completion_chunk({"role": "assistant", "content": ""}),
        reasoning_chunk("think "),
        reasoning_chunk("hard"),
        content_chunk("Hi"),
        content_chunk(" there"),
        finish_chunk(),
        usage_chunk(100, 7, cached_tokens=40),
        "[DONE]",
    )
    completes = check_discipline(out)
    assert [m.payload for m in completes] == [
        om.ThinkingPayload(
            thinking="think hard",
            stop_reason="completed",
            fidelity={"reasoning_field": "reasoning_content"},
        ),
        om.TextPayload(role="assistant", text="Hi there", stop_reason="completed"),
    ]
    assert (decoder.done, decoder.finish_reason) == (True, "stop")
    assert decoder.usage == om.TokenCounts(cache_read=40, cache_write=0, output=7, total=107)


def test_the_reasoning_field_is_remembered() -> None:
    _, out = decode(reasoning_chunk("r", field="reasoning"), finish_chunk())
    assert check_discipline(out)[0].payload == om.ThinkingPayload(
        thinking="r", stop_reason="completed", fidelity={"reasoning_field": "reasoning"}
    )


def test_parallel_tool_calls_interleaved_by_index() -> None:
    _, out = decode(
        tool_call_chunk(0, id="call_a", name="read_file", arguments=""),
        tool_call_chunk(1, id="call_b", name="list", arguments='{"pa'),
        tool_call_chunk(0, arguments='{"file_path":'),
        tool_call_chunk(1, arguments='th":"."}'),
        tool_call_chunk(0, arguments='"a.txt"}'),
        finish_chunk("tool_calls"),
    )
    completes = check_discipline(out)
    assert [m.payload for m in completes] == [
        om.ToolCallPayload(
            name="read_file",
            arguments='{"file_path":"a.txt"}',
            tool_call_id="call_a",
            stop_reason="completed",
        ),
        om.ToolCallPayload(
            name="list", arguments='{"path":"."}', tool_call_id="call_b", stop_reason="completed"
        ),
    ]


def test_tool_call_pieces_without_index() -> None:
    def piece(**fields: Any) -> dict[str, Any]:
        return completion_chunk({"tool_calls": [fields]})

    _, out = decode(
        piece(id="x", function={"name": "f", "arguments": "{"}),
        piece(function={"arguments": "}"}),
        piece(id="y", function={"name": "g", "arguments": "[]"}),
        piece(id="x", function={"arguments": ""}),
        finish_chunk("tool_calls"),
    )
    completes = check_discipline(out)
    assert [(p.tool_call_id, p.arguments) for p in tool_calls(completes)] == [
        ("x", "{}"),
        ("y", "[]"),
    ]


def test_missing_ids_are_asked_for() -> None:
    _, out = decode(tool_call_chunk(0, name="f", arguments="{}"), finish_chunk("tool_calls"))
    assert tool_calls(check_discipline(out))[0].tool_call_id == "gen_1"


def test_finish_reason_without_done_is_a_proper_end() -> None:
    decoder, _ = decode(content_chunk("x"), finish_chunk("length"))
    assert (decoder.done, decoder.finish_reason) == (False, "length")


def test_an_end_without_done_or_finish_reason_is_malformed() -> None:
    decoder, _ = make()
    decoder.feed(events(content_chunk("x")))
    with pytest.raises(LLMStreamError) as caught:
        decoder.end_of_stream()
    assert caught.value.status == "malformed"


@pytest.mark.parametrize("data", ['{"choices": [', "not json", "[1, 2]", '"text"'])
def test_an_event_that_is_no_json_object_is_malformed(data: str) -> None:
    decoder, _ = make()
    with pytest.raises(LLMStreamError) as caught:
        decoder.feed([SSEEvent(data)])
    assert caught.value.status == "malformed"
    assert data[:5] in caught.value.message


@pytest.mark.parametrize(
    ("error", "status"),
    [
        ({"message": "overloaded", "code": 529}, "timeout"),
        ({"message": "bad key", "code": "401"}, "auth"),
        ({"message": "context too long", "code": "context_length_exceeded"}, "failed"),
        ("plain", "failed"),
    ],
)
def test_an_error_object_in_the_stream(error: object, status: om.StopReason) -> None:
    decoder, _ = make()
    with pytest.raises(LLMStreamError) as caught:
        decoder.feed(events(content_chunk("x"), {"error": error}))
    assert caught.value.status == status
    assert str(error["message"] if isinstance(error, dict) else error) in caught.value.message


def test_an_error_event_type_is_an_error() -> None:
    decoder, _ = make()
    with pytest.raises(LLMStreamError) as caught:
        decoder.feed([SSEEvent('{"message": "boom"}', event="error")])
    assert caught.value.status == "failed"
    assert "boom" in caught.value.message


def test_events_after_done_are_ignored() -> None:
    decoder, assembler = make()
    decoder.feed(events(content_chunk("a"), "[DONE]", content_chunk("b"), "garbage"))
    assembler.close()
    assert check_discipline(assembler.take())[0].payload == om.TextPayload(
        role="assistant", text="a", stop_reason="completed"
    )


def test_usage_counts_without_details_or_total() -> None:
    assert usage_counts({"prompt_tokens": 5, "completion_tokens": 2}) == om.TokenCounts(
        cache_read=0, cache_write=0, output=2, total=7
    )
    assert usage_counts(
        {"completion_tokens": 2, "total_tokens": 9, "prompt_tokens_details": None}
    ) == om.TokenCounts(output=2, total=9)


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (401, "auth"),
        (403, "auth"),
        (408, "timeout"),
        (429, "timeout"),
        (500, "timeout"),
        (503, "timeout"),
        (400, "failed"),
        (404, "failed"),
        (422, "failed"),
        (302, "failed"),
    ],
)
def test_status_stop_reasons(status: int, reason: om.StopReason) -> None:
    assert status_stop_reason(status) == reason


def test_18_3_http_error_messages() -> None:
    body = b'{"error": {"message": "slow down", "type": "x"}}'
    assert http_error_message(429, "Too Many Requests", body) == "rate limited (429): slow down"
    assert http_error_message(429, "", b"") == "rate limited (429)"
    assert http_error_message(401, "", b'{"error": "bad key"}') == "401 Unauthorized: bad key"
    # The standard phrase, as this Python names it (3.13 says "Unprocessable Content").
    phrase = http.HTTPStatus(422).phrase
    assert http_error_message(422, "", b'{"detail": "no"}') == f"422 {phrase}: no"
    assert http_error_message(500, "Internal Server Error", b"") == (
        "server error 500: Internal Server Error"
    )
    assert http_error_message(502, "Bad Gateway", b"<html>\n oops </html>") == (
        "server error 502: <html> oops </html>"
    )
    assert http_error_message(599, "", b"x" * 1000).startswith("server error 599: xxx")
    assert len(http_error_message(599, "", b"x" * 1000)) < 520


# --------------------------------------------------------------------------- the fast path


def pieces_of(out: list[Message]) -> list[tuple[str, str]]:
    pieces: list[tuple[str, str]] = []
    for message in out:
        payload = message.payload
        if isinstance(payload, om.PartialTextPayload) and payload.event_type == "delta":
            pieces.append((payload.type, payload.text))
        elif isinstance(payload, om.PartialThinkingPayload) and payload.event_type == "delta":
            pieces.append((payload.type, payload.thinking))
    return pieces


def joined(pieces: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Adjacent pieces of one kind as one: how the assembler batches one read's deltas."""
    out: list[tuple[str, str]] = []
    for kind, text in pieces:
        if out and out[-1][0] == kind:
            out[-1] = (kind, out[-1][1] + text)
        else:
            out.append((kind, text))
    return out


_pieces = st.lists(
    st.tuples(st.sampled_from(["content", "reasoning_content", "reasoning"]), st.text(max_size=8)),
    max_size=30,
)


@given(_pieces, st.booleans(), st.sampled_from([(",", ":"), (", ", ": ")]), st.data())
def test_the_template_path_decodes_like_json_loads(
    pieces: list[tuple[str, str]],
    ensure_ascii: bool,
    separators: tuple[str, str],
    data: st.DataObject,
) -> None:
    chunks: list[dict[str, Any] | str] = []
    for field, text in pieces:
        chunk = completion_chunk({field: text})
        # Vary the surroundings now and then, so templates are also missed and replaced.
        if data.draw(st.booleans()):
            chunk["id"] = data.draw(st.sampled_from(["a", "b"]))
        chunks.append(chunk)
    decoder, assembler = make()
    decoder.feed(events(*chunks, ensure_ascii=ensure_ascii, separators=separators))
    assembler.close()
    out = assembler.take()
    check_discipline(out)
    kind = {"content": "partial_text"}
    expected = [(kind.get(field, "partial_thinking"), text) for field, text in pieces if text]
    assert pieces_of(out) == joined(expected)


def test_the_template_path_leaves_other_values_to_the_full_path() -> None:
    decoder, assembler = make()
    decoder.feed(
        events(
            content_chunk("a"),
            content_chunk("b"),
            '{"id":"chatcmpl-local","object":"chat.completion.chunk","created":0,"model":"local",'
            '"choices":[{"index":0,"delta":{"content":null},"finish_reason":"stop"}]}',
            content_chunk('"c" \\ \u2028 ✓'),
        )
    )
    assembler.close()
    assert pieces_of(assembler.take()) == [("partial_text", 'ab"c" \\ \u2028 ✓')]
    assert decoder.finish_reason == "stop"


def test_a_template_literal_with_a_control_character_is_malformed() -> None:
    decoder, _ = make()
    good = json.dumps(content_chunk("a"))
    bad = good.replace('"a"', '"a\nb"')
    with pytest.raises(LLMStreamError) as caught:
        decoder.feed([SSEEvent(good), SSEEvent(bad)])
    assert caught.value.status == "malformed"


def test_18_3_retry_after_reads_seconds_and_http_dates() -> None:
    now = datetime.datetime(2026, 12, 1, 12, 0, 0, tzinfo=datetime.UTC)
    assert retry_after_seconds("120", now) == 120.0
    assert retry_after_seconds(" 1.5 ", now) == 1.5
    assert retry_after_seconds("-3", now) == 0.0
    assert retry_after_seconds("Tue, 01 Dec 2026 12:00:30 GMT", now) == 30.0
    assert retry_after_seconds("Tue, 01 Dec 2026 11:00:00 GMT", now) == 0.0
    assert retry_after_seconds("nan", now) is None
    assert retry_after_seconds("inf", now) is None
    assert retry_after_seconds("in a while", now) is None
    assert retry_after_seconds(None, now) is None
