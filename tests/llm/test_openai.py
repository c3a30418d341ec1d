"""OpenAIChatLLM against a real local server on 127.0.0.1 (penguin.llm.testing)."""

from __future__ import annotations

import gc
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

from penguin import protocol as om
from penguin.llm import LLMOutcome, LLMRequest, OpenAIChatLLM
from penguin.llm import testing as t

from .discipline import check_discipline, kind

Message = om.OmniMessage[om.Payload]
REQUEST = LLMRequest(system_prompt="Be brief.", messages=(om.user_text("hi"),), tools=())


@asynccontextmanager
async def serve(
    handler: t.Handler, **options: Any
) -> AsyncIterator[tuple[t.LocalServer, OpenAIChatLLM]]:
    async with t.serve_openai_compatible(handler) as server:
        llm = OpenAIChatLLM(base_url=server.base_url, model_id="test-model", **options)
        async with llm:
            yield server, llm


def replying(*replies: t.Reply) -> Callable[[t.ReceivedRequest], t.Reply]:
    queue = list(replies)
    return lambda request: queue.pop(0)


async def run(
    llm: OpenAIChatLLM, request: LLMRequest = REQUEST
) -> tuple[list[Message], LLMOutcome]:
    async with llm.stream(request) as response:
        messages = [message async for message in response]
    return messages, response.outcome


def payloads(messages: list[Message]) -> list[om.Payload]:
    return [message.payload for message in check_discipline(messages)]


# --------------------------------------------------------------------------- answers


async def test_streamed_text_deltas_concatenate_to_the_complete_text() -> None:
    reply = t.sse_reply(
        [
            t.completion_chunk({"role": "assistant", "content": ""}),
            t.content_chunk("Hel"),
            t.content_chunk("lo, "),
            t.content_chunk("world"),
            t.finish_chunk(),
        ],
        split=5,
    )
    async with serve(replying(reply)) as (_, llm):
        messages, outcome = await run(llm)
    assert outcome == LLMOutcome("completed")
    deltas = [m.payload.text for m in messages if isinstance(m.payload, om.PartialTextPayload)]
    assert deltas == ["", "Hel", "lo, ", "world", ""]
    assert payloads(messages) == [
        om.TextPayload(role="assistant", text="Hello, world", stop_reason="completed")
    ]


async def test_reasoning_becomes_thinking_with_its_field_in_fidelity() -> None:
    reply = t.sse_reply(
        [
            t.reasoning_chunk("Let me "),
            t.reasoning_chunk("think."),
            t.content_chunk("42"),
            t.finish_chunk(),
        ]
    )
    async with serve(replying(reply)) as (_, llm):
        messages, outcome = await run(llm)
    assert outcome.status == "completed"
    assert payloads(messages) == [
        om.ThinkingPayload(
            thinking="Let me think.",
            stop_reason="completed",
            fidelity={"reasoning_field": "reasoning_content"},
        ),
        om.TextPayload(role="assistant", text="42", stop_reason="completed"),
    ]


async def test_parallel_tool_calls_split_across_chunks() -> None:
    reply = t.sse_reply(
        [
            t.content_chunk("Reading both."),
            t.tool_call_chunk(0, id="call_a", name="read_file", arguments='{"file'),
            t.tool_call_chunk(1, id="call_b", name="read_file", arguments=""),
            t.tool_call_chunk(1, arguments='{"file_path": "b.txt"}'),
            t.tool_call_chunk(0, arguments='_path": "a.txt"}'),
            t.finish_chunk("tool_calls"),
            t.usage_chunk(50, 20),
        ],
        split=3,
    )
    async with serve(replying(reply)) as (_, llm):
        messages, outcome = await run(llm)
    assert outcome == LLMOutcome(
        "completed", usage=om.TokenCounts(cache_read=0, cache_write=0, output=20, total=70)
    )
    assert payloads(messages) == [
        om.TextPayload(role="assistant", text="Reading both.", stop_reason="completed"),
        om.ToolCallPayload(
            name="read_file",
            arguments='{"file_path": "a.txt"}',
            tool_call_id="call_a",
            stop_reason="completed",
        ),
        om.ToolCallPayload(
            name="read_file",
            arguments='{"file_path": "b.txt"}',
            tool_call_id="call_b",
            stop_reason="completed",
        ),
    ]


async def test_tool_call_ids_are_unique_per_client() -> None:
    def calls(*ids: str | None) -> t.StreamReply:
        return t.sse_reply(
            [
                *(
                    t.tool_call_chunk(index, id=call_id, name="f", arguments="{}")
                    for index, call_id in enumerate(ids)
                ),
                t.finish_chunk("tool_calls"),
            ]
        )

    async with serve(replying(calls("call_1", None, ""), calls("call_1", "call_2"))) as (_, llm):
        first, _ = await run(llm)
        second, _ = await run(llm)
    ids = [
        m.payload.tool_call_id
        for m in check_discipline(first) + check_discipline(second)
        if isinstance(m.payload, om.ToolCallPayload)
    ]
    assert (ids[0], ids[4]) == ("call_1", "call_2")
    assert len(set(ids)) == 5
    assert all(call_id.startswith("call_") for call_id in ids)


async def test_usage_becomes_token_counts() -> None:
    reply = t.sse_reply(
        [t.content_chunk("ok"), t.finish_chunk(), t.usage_chunk(1200, 30, cached_tokens=1024)]
    )
    async with serve(replying(reply)) as (_, llm):
        _, outcome = await run(llm)
    assert outcome.usage == om.TokenCounts(cache_read=1024, cache_write=0, output=30, total=1230)


async def test_a_finish_reason_without_done_completes() -> None:
    reply = t.sse_reply([t.content_chunk("ok"), t.finish_chunk()], done=False)
    async with serve(replying(reply)) as (_, llm):
        messages, outcome = await run(llm)
    assert outcome.status == "completed"
    assert check_discipline(messages)[0].payload.stop_reason == "completed"


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("status", "stop_reason", "message"),
    [
        (401, "auth", "401 Unauthorized: Incorrect API key provided"),
        (403, "auth", "403 Forbidden: Incorrect API key provided"),
        (429, "timeout", "rate limited (429): Incorrect API key provided"),
        (500, "timeout", "server error 500: Incorrect API key provided"),
        (400, "failed", "400 Bad Request: Incorrect API key provided"),
    ],
)
async def test_http_errors_become_stop_reasons(
    status: int, stop_reason: om.StopReason, message: str
) -> None:
    reply = t.ErrorReply(status, "Incorrect API key provided")
    async with serve(replying(reply)) as (_, llm):
        messages, outcome = await run(llm)
    assert messages == []
    assert outcome == LLMOutcome(stop_reason, message, rate_limited=status == 429)


async def test_rate_limit_message() -> None:
    async with serve(replying(t.ErrorReply(429, "rate limited"))) as (_, llm):
        _, outcome = await run(llm)
    assert outcome.error_message == "rate limited (429): rate limited"


async def test_a_stream_cut_midway_is_malformed_and_closes_what_was_streamed() -> None:
    reply = t.sse_reply(
        [
            t.content_chunk("Half an ans"),
            t.tool_call_chunk(0, id="call_x", name="f", arguments='{"a": '),
        ],
        done=False,
        end="cut",
    )
    async with serve(replying(reply)) as (_, llm):
        messages, outcome = await run(llm)
    assert outcome.status == "malformed"
    assert outcome.error_message is not None
    assert outcome.error_message.startswith("the response stream broke: ")
    assert payloads(messages) == [
        om.TextPayload(role="assistant", text="Half an ans", stop_reason="completed"),
        om.ToolCallPayload(
            name="f", arguments='{"a": ', tool_call_id="call_x", stop_reason="malformed"
        ),
    ]


async def test_a_clean_eof_before_done_is_malformed() -> None:
    # The body ends properly (chunked terminator) but the stream never finished.
    reply = t.sse_reply([t.content_chunk("Half")], done=False, end="complete")
    async with serve(replying(reply)) as (_, llm):
        messages, outcome = await run(llm)
    assert outcome == LLMOutcome(
        "malformed", "the response stream ended before [DONE] or a finish_reason"
    )
    assert payloads(messages) == [
        om.TextPayload(role="assistant", text="Half", stop_reason="malformed")
    ]


async def test_invalid_json_in_an_event_is_malformed() -> None:
    reply = t.sse_reply([t.content_chunk("ok "), "data: {not json\n\n", t.content_chunk("never")])
    async with serve(replying(reply)) as (_, llm):
        messages, outcome = await run(llm)
    assert outcome.status == "malformed"
    assert "invalid JSON" in str(outcome.error_message)
    assert payloads(messages) == [
        om.TextPayload(role="assistant", text="ok ", stop_reason="malformed")
    ]


async def test_an_error_inside_the_stream() -> None:
    reply = t.sse_reply(
        [t.content_chunk("a"), {"error": {"message": "Overloaded", "code": 529}}], done=False
    )
    async with serve(replying(reply)) as (_, llm):
        messages, outcome = await run(llm)
    assert outcome == LLMOutcome("timeout", "error in the response stream (529): Overloaded")
    assert check_discipline(messages)[0].payload.stop_reason == "timeout"


async def test_a_stalled_stream_ends_as_timeout_after_the_read_timeout() -> None:
    reply = t.sse_reply([t.content_chunk("I was say")], done=False, end="stall")
    async with serve(replying(reply), read_timeout=0.3) as (_, llm):
        start = trio.current_time()
        messages, outcome = await run(llm)
        elapsed = trio.current_time() - start
    assert outcome == LLMOutcome(
        "timeout", "the response stream stalled: no data for 0.3 s (read timeout)"
    )
    assert payloads(messages) == [
        om.TextPayload(role="assistant", text="I was say", stop_reason="timeout")
    ]
    assert 0.3 <= elapsed < 5


async def test_no_response_headers_within_the_read_timeout() -> None:
    never = trio.Event()

    async def handler(request: t.ReceivedRequest) -> t.Reply:
        await never.wait()
        raise AssertionError("unreachable")

    async with serve(handler, read_timeout=0.3) as (_, llm):
        messages, outcome = await run(llm)
    assert messages == []
    assert outcome == LLMOutcome("timeout", "no response within 0.3 s (read timeout)")


_PROXY_VARIABLES = [
    *("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"),
    *("all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"),
]


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY"])
async def test_a_proxy_in_the_environment_carries_the_requests(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    # The test server stands in for a forward proxy: a request sent through one names
    # the whole URL (absolute form), and the model's host need not resolve here at all.
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    async with t.serve_openai_compatible(
        replying(t.sse_reply([t.content_chunk("Via."), t.finish_chunk()]))
    ) as server:
        proxy = server.base_url.removesuffix("/v1")
        monkeypatch.setenv(variable, proxy)
        async with OpenAIChatLLM(base_url="http://model.invalid/v1", model_id="m") as llm:
            messages, outcome = await run(llm)
    assert outcome.status == "completed", outcome
    assert payloads(messages) == [
        om.TextPayload(role="assistant", text="Via.", stop_reason="completed")
    ]
    assert [r.path for r in server.requests] == ["http://model.invalid/v1/chat/completions"]


async def test_18_3_a_refused_connection_says_it_cannot_connect() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"
    async with OpenAIChatLLM(base_url=base_url, model_id="m") as llm:
        messages, outcome = await run(llm)
    assert messages == []
    assert outcome.status == "timeout"
    assert outcome.error_message == f"cannot connect to {base_url} (Connection refused)"
    assert outcome.unreachable
    assert outcome.retry_after is None


# --------------------------------------------------------------------------- the request


async def test_request_shape() -> None:
    request = LLMRequest(
        system_prompt="You are penguin.",
        messages=(
            om.user_text("Read a.txt"),
            om.thinking("Need the file.", fidelity={"reasoning_field": "reasoning_content"}),
            om.assistant_text("Reading it."),
            om.tool_call("read_file", {"file_path": "a.txt"}, "call_1"),
            om.tool_call_output("     1\thello\n     2\tworld", "call_1"),
            om.assistant_text("It says hello world."),
            om.user_text("Thanks"),
        ),
        tools=(
            om.ToolDefinition(
                name="read_file",
                description="Read a file.",
                parameters={"type": "object", "properties": {"file_path": {"type": "string"}}},
            ),
        ),
        thinking_level="medium",
    )
    reply = t.sse_reply([t.content_chunk("ok"), t.finish_chunk()])
    async with serve(replying(reply), api_key="sk-test") as (server, llm):
        await run(llm, request)
    [received] = server.requests
    assert (received.method, received.path) == ("POST", "/v1/chat/completions")
    assert received.headers["authorization"] == "Bearer sk-test"
    assert received.headers["content-type"] == "application/json"
    body = received.json()
    assert body["model"] == "test-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["reasoning_effort"] == "medium"
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": {"type": "object", "properties": {"file_path": {"type": "string"}}},
            },
        }
    ]
    assert body["messages"] == [
        {"role": "system", "content": "You are penguin."},
        {"role": "user", "content": "Read a.txt"},
        {
            "role": "assistant",
            "content": "Reading it.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"file_path":"a.txt"}'},
                }
            ],
            "reasoning_content": "Need the file.",
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "     1\thello\n     2\tworld"},
        {"role": "assistant", "content": "It says hello world."},
        {"role": "user", "content": "Thanks"},
    ]


async def test_no_authorization_header_without_a_key() -> None:
    reply = t.sse_reply([t.content_chunk("ok"), t.finish_chunk()])
    async with serve(replying(reply), headers={"X-Extra": "1"}) as (server, llm):
        await run(llm)
    assert "authorization" not in server.requests[0].headers
    assert server.requests[0].headers["x-extra"] == "1"


async def test_requests_reuse_the_connection() -> None:
    ok = t.sse_reply([t.content_chunk("ok"), t.finish_chunk(), t.usage_chunk(1, 1)])
    async with serve(replying(ok, ok, ok)) as (server, llm):
        for _ in range(3):
            _, outcome = await run(llm)
            assert outcome.status == "completed"
    assert [request.connection for request in server.requests] == [0, 0, 0]


# --------------------------------------------------------------------------- lifetime


async def test_outcome_before_the_end_is_an_error() -> None:
    reply = t.sse_reply([t.content_chunk("a"), t.finish_chunk()])
    async with serve(replying(reply)) as (_, llm), llm.stream(REQUEST) as response:
        with pytest.raises(RuntimeError, match="read to its end"):
            response.outcome  # noqa: B018
        async for _ in response:
            pass
        assert response.outcome.status == "completed"


async def test_cancelling_the_caller_is_a_hard_stop() -> None:
    reply = t.sse_reply([t.content_chunk("I was say")], done=False, end="stall")
    async with serve(replying(reply), read_timeout=60) as (_, llm):
        seen: list[Message] = []
        with trio.CancelScope() as scope:
            async with llm.stream(REQUEST) as response:
                async for message in response:
                    seen.append(message)
                    if isinstance(message.payload, om.PartialTextPayload) and message.payload.text:
                        scope.cancel()
        assert scope.cancelled_caught
        assert [kind(m) for m in seen] == ["partial_text:start", "partial_text:delta"]
        with pytest.raises(RuntimeError):
            response.outcome  # noqa: B018


def long_answer(pieces: int) -> t.StreamReply:
    return t.sse_reply([t.content_chunk(f"{n} ") for n in range(pieces)] + [t.finish_chunk()])


async def test_leaving_early_while_the_client_waits_for_the_consumer() -> None:
    # The producer is blocked handing over a batch when the consumer leaves: nothing
    # of httpx's body iterators may be left behind (Trio would warn at collection).
    async with serve(replying(long_answer(20_000), long_answer(20_000))) as (server, llm):
        async with llm.stream(REQUEST) as response:
            async for _ in response:
                break
        with trio.CancelScope() as scope:
            async with llm.stream(REQUEST) as response:
                async for _ in response:
                    await trio.lowlevel.checkpoint()
                    scope.cancel()
        gc.collect()
        await trio.testing.wait_all_tasks_blocked()
    assert len(server.requests) == 2


async def test_leaving_the_block_early_stops_the_request() -> None:
    reply = t.sse_reply([t.content_chunk("I was say")], done=False, end="stall")
    async with serve(replying(reply), read_timeout=60) as (_, llm):
        with trio.fail_after(5):
            async with llm.stream(REQUEST) as response:
                async for _ in response:
                    break


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ((("Retry-After", "7"),), 7.0),
        ((("Retry-After", "0.5"),), 0.5),
        ((("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT"),), 0.0),  # a date in the past
        ((("Retry-After", "soon"),), None),
        ((), None),
    ],
)
async def test_18_3_a_429_carries_the_servers_retry_after(
    headers: tuple[tuple[str, str], ...], wait: float | None
) -> None:
    reply = t.ErrorReply(429, "slow down", headers=headers)
    async with serve(replying(reply)) as (_, llm):
        _, outcome = await run(llm)
    assert outcome == LLMOutcome(
        "timeout", "rate limited (429): slow down", retry_after=wait, rate_limited=True
    )


async def test_18_3_a_5xx_says_server_error_and_is_not_unreachable() -> None:
    async with serve(replying(t.ErrorReply(503, "overloaded"))) as (_, llm):
        _, outcome = await run(llm)
    assert outcome == LLMOutcome("timeout", "server error 503: overloaded")
    assert not outcome.unreachable
    assert not outcome.rate_limited  # overloaded is not a rate limit of the account
