"""The local OpenAI-compatible server itself: recording, handlers, keep-alive, errors."""

from __future__ import annotations

import httpx
import pytest

from penguin.llm import testing as t


async def test_it_records_requests_and_serves_replies() -> None:
    async def handler(request: t.ReceivedRequest) -> t.Reply:
        if request.path.endswith("/missing"):
            return t.ErrorReply(404, "no such route")
        return t.sse_reply([t.content_chunk("hi")], split=4)

    async with t.serve_openai_compatible(handler) as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        assert server.base_url.endswith("/v1")
        async with httpx.AsyncClient() as client:
            streamed = await client.post(server.base_url + "/chat/completions", json={"a": 1})
            missing = await client.post(server.base_url + "/missing", content=b"x")
    assert streamed.status_code == 200
    assert streamed.headers["content-type"] == "text/event-stream"
    assert streamed.text == (
        'data: {"id":"chatcmpl-local","object":"chat.completion.chunk","created":0,'
        '"model":"local","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}'
        "\n\ndata: [DONE]\n\n"
    )
    assert missing.status_code == 404
    assert missing.json() == {
        "error": {"message": "no such route", "type": "not_found", "code": None}
    }
    assert [(r.method, r.path, r.body) for r in server.requests] == [
        ("POST", "/v1/chat/completions", b'{"a":1}'),
        ("POST", "/v1/missing", b"x"),
    ]
    assert server.requests[0].json() == {"a": 1}
    assert server.requests[0].headers["content-type"] == "application/json"
    assert server.connections == 1


def test_sse_reply_building() -> None:
    reply = t.sse_reply([": ping\n\n", {"x": 1}], done=False, end="cut")
    assert reply.parts == (b": ping\n\n", b'data: {"x":1}\n\n')
    assert reply.end == "cut"
    assert b"".join(t.sse_reply([{"x": 1}], split=3).parts) == b'data: {"x":1}\n\ndata: [DONE]\n\n'
    with pytest.raises(ValueError, match="split"):
        t.sse_reply([], split=0)


def test_chunk_builders() -> None:
    assert t.tool_call_chunk(1, id="c", name="f", arguments="{")["choices"][0]["delta"] == {
        "tool_calls": [
            {"index": 1, "id": "c", "type": "function", "function": {"name": "f", "arguments": "{"}}
        ]
    }
    assert t.usage_chunk(10, 2, cached_tokens=4) | {"id": ""} == {
        "id": "",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "local",
        "choices": [],
        "usage": {
            "prompt_tokens": 10,
            "completion_tokens": 2,
            "total_tokens": 12,
            "prompt_tokens_details": {"cached_tokens": 4},
        },
    }


async def test_a_handler_error_is_a_500_then_surfaces_from_the_block() -> None:
    def handler(request: t.ReceivedRequest) -> t.Reply:
        raise LookupError("handler bug")

    answers: list[httpx.Response] = []

    async def ask_once() -> None:
        async with t.serve_openai_compatible(handler) as server, httpx.AsyncClient() as client:
            answers.append(await client.post(server.base_url + "/chat/completions", content=b""))

    with pytest.raises(LookupError, match="handler bug"):
        await ask_once()
    assert answers[0].status_code == 500
    assert "LookupError: handler bug" in answers[0].text
