"""The lean exchange (``penguin.llm._lean``) against real sockets on 127.0.0.1.

A plain ``http://`` model server is reached through h11 on the run's own pool; every
other one through httpx. What must hold: the same request bytes, the same outcome and
messages for every faulty server, connections reused, a connection the server closed
while idle never reused, idle connections closed with the last client.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial

import pytest
import trio

from penguin import protocol as om
from penguin.llm import LLMOutcome, LLMRequest, OpenAIChatLLM, _openai
from penguin.llm import testing as t
from penguin.llm._lean import LeanOrigin, lean_origin

REQUEST = LLMRequest(system_prompt="Be brief.", messages=(om.user_text("hi"),), tools=())
Serve = Callable[[trio.SocketStream], Awaitable[None]]


def _event(chunk: dict[str, object]) -> bytes:
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


BODY = _event(t.content_chunk("Hello")) + _event(t.finish_chunk()) + b"data: [DONE]\n\n"


async def read_request(stream: trio.SocketStream) -> bytes:
    """One whole request (head and Content-Length body) as it arrived."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += await stream.receive_some(65536)
    return head + b"\r\n\r\n" + body


def ok_head(length: int | None = None) -> bytes:
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return (
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n" + framing + "\r\n\r\n"
    ).encode()


def chunked(body: bytes) -> bytes:
    return f"{len(body):x}\r\n".encode() + body + b"\r\n"


@asynccontextmanager
async def raw_server(serve: Serve) -> AsyncIterator[str]:
    """A TCP server on 127.0.0.1 that answers each connection with ``serve``."""
    async with trio.open_nursery() as nursery:
        (listener,) = await nursery.start(partial(trio.serve_tcp, serve, 0, host="127.0.0.1"))
        port = listener.socket.getsockname()[1]
        yield f"http://127.0.0.1:{port}/v1"
        nursery.cancel_scope.cancel()


async def outcome_of(
    base_url: str, *, lean: bool, monkeypatch: pytest.MonkeyPatch, read_timeout: float = 120.0
) -> tuple[list[om.Payload], LLMOutcome]:
    with monkeypatch.context() as patch:
        if not lean:  # the path every https:// server takes
            patch.setattr(_openai, "lean_origin", lambda base_url: None)
        llm = OpenAIChatLLM(base_url=base_url, model_id="m", read_timeout=read_timeout)
    async with llm, llm.stream(REQUEST) as response:
        payloads = [message.payload async for message in response]
    return payloads, response.outcome


Outcome = tuple[list[om.Payload], LLMOutcome]


async def both_ways(serve: Serve, monkeypatch: pytest.MonkeyPatch) -> tuple[Outcome, Outcome]:
    """What the client makes of ``serve``'s answer through the lean exchange, then httpx."""
    async with raw_server(serve) as base_url:
        lean = await outcome_of(base_url, lean=True, monkeypatch=monkeypatch, read_timeout=0.3)
        httpx_ = await outcome_of(base_url, lean=False, monkeypatch=monkeypatch, read_timeout=0.3)
    return lean, httpx_


async def ask(llm: OpenAIChatLLM) -> None:
    """One request, read to its end; it must complete."""
    async with llm.stream(REQUEST) as response:
        async for _ in response:
            pass
    assert response.outcome.status == "completed"


# --------------------------------------------------------------------------- faults


async def _no_answer(stream: trio.SocketStream) -> None:
    await read_request(stream)


async def _cut_in_the_body(stream: trio.SocketStream) -> None:
    await read_request(stream)
    await stream.send_all(ok_head() + chunked(_event(t.content_chunk("Hel"))) + b"40\r\npart")


async def _short_body(stream: trio.SocketStream) -> None:
    await read_request(stream)
    events = _event(t.content_chunk("Hello")) + _event(t.finish_chunk())
    await stream.send_all(ok_head(len(events) + 10) + events)  # then gone, 10 bytes short


async def _garbage(stream: trio.SocketStream) -> None:
    await read_request(stream)
    await stream.send_all(b"this is not HTTP\r\n\r\n")


async def _server_error(stream: trio.SocketStream) -> None:
    await read_request(stream)
    body = b'{"error": {"message": "overloaded"}}'
    head = f"HTTP/1.1 503 Service Unavailable\r\nContent-Length: {len(body)}\r\n"
    await stream.send_all(head.encode() + b"Retry-After: 3\r\n\r\n" + body)


async def _rate_limited_then_gone(stream: trio.SocketStream) -> None:
    await read_request(stream)
    await stream.send_all(b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 100\r\n\r\nslow")


async def _stall_after_the_head(stream: trio.SocketStream) -> None:
    await read_request(stream)
    await stream.send_all(ok_head() + chunked(_event(t.content_chunk("Hel"))))
    await trio.sleep_forever()


async def _stall_before_the_head(stream: trio.SocketStream) -> None:
    await read_request(stream)
    await trio.sleep_forever()


async def _whole(stream: trio.SocketStream) -> None:
    await read_request(stream)
    await stream.send_all(ok_head() + chunked(BODY) + b"0\r\n\r\n")


# The lean reader takes a plain answer itself and hands anything else to h11 where it
# stands; these answers are each not plain in one place, and must end as httpx ends them.

SSE_HEAD = b"Content-Type: text/event-stream\r\n"


def _answer(head: bytes, body: bytes) -> Serve:
    async def serve(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(head + body)

    return serve


def _answer_and_stay(head: bytes, body: bytes) -> Serve:
    """An answer, and the connection kept open: its end is only what its head says."""

    async def serve(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(head + body)
        await trio.sleep_forever()

    return serve


def _in_pieces(data: bytes, size: int) -> Serve:
    async def serve(stream: trio.SocketStream) -> None:
        await read_request(stream)
        for start in range(0, len(data), size):
            await stream.send_all(data[start : start + size])
            await trio.sleep(0.001)

    return serve


CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\n" + SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
FIRST, REST = BODY[:40], BODY[40:]
ODD_ANSWERS = {
    "a chunk extension": _answer(
        CHUNKED_HEAD, f"{len(BODY):x};name=value\r\n".encode() + BODY + b"\r\n0\r\n\r\n"
    ),
    "trailers": _answer(CHUNKED_HEAD, chunked(BODY) + b"0\r\nX-Checksum: 1\r\n\r\n"),
    "a bad chunk footer": _answer(
        CHUNKED_HEAD, chunked(FIRST)[:-2] + b"XY" + chunked(REST) + b"0\r\n\r\n"
    ),
    "a bad chunk size": _answer(CHUNKED_HEAD, chunked(FIRST) + b"zz\r\n" + REST),
    "cut in a chunk header": _answer(CHUNKED_HEAD, chunked(FIRST) + b"4"),
    "cut before a chunk footer": _answer(CHUNKED_HEAD, chunked(FIRST)[:-2]),
    "cut before the last chunk": _answer(CHUNKED_HEAD, chunked(BODY)),
    "cut in the head": _answer(b"HTTP/1.1 200 OK\r\nContent-Ty", b""),
    "bare line feeds": _answer(
        b"HTTP/1.1 200 OK\nContent-Type: text/event-stream\nTransfer-Encoding: chunked\n\n",
        chunked(BODY) + b"0\r\n\r\n",
    ),
    "a CRLF, then a bare line feed": _answer_and_stay(
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 36\r\n\n",
        b'{"error": {"message": "overloaded"}}',
    ),
    "a folded header": _answer(
        b"HTTP/1.1 200 OK\r\n"
        + SSE_HEAD
        + b"X-Long: a\r\n b\r\n"
        + f"Content-Length: {len(BODY)}\r\n\r\n".encode(),
        BODY,
    ),
    "HTTP/1.0 to the end of the stream": _answer(b"HTTP/1.0 200 OK\r\n" + SSE_HEAD + b"\r\n", BODY),
    "100 Continue first": _answer(
        b"HTTP/1.1 100 Continue\r\n\r\n" + CHUNKED_HEAD, chunked(BODY) + b"0\r\n\r\n"
    ),
    "both framings": _answer(
        b"HTTP/1.1 200 OK\r\n"
        + SSE_HEAD
        + b"Content-Length: 3\r\n"
        + b"Transfer-Encoding: chunked\r\n\r\n",
        chunked(BODY) + b"0\r\n\r\n",
    ),
    "a gzip transfer coding": _answer(
        b"HTTP/1.1 200 OK\r\n" + SSE_HEAD + b"Transfer-Encoding: gzip\r\n\r\n", BODY
    ),
    "a length too long": _answer(
        b"HTTP/1.1 200 OK\r\n" + SSE_HEAD + b"Content-Length: 99999999999999999999999\r\n\r\n",
        BODY,
    ),
    "a head of 20 KiB": _answer(
        b"HTTP/1.1 200 OK\r\n" + SSE_HEAD + b"X-Big: " + b"x" * 20_000 + b"\r\n", b""
    ),
    "a head of 120 KiB, never ended": _in_pieces(
        b"HTTP/1.1 200 OK\r\n" + SSE_HEAD + b"X-Big: " + b"x" * 120_000, 30_000
    ),
    "an empty reason": _answer(
        b"HTTP/1.1 200 \r\n" + SSE_HEAD + f"Content-Length: {len(BODY)}\r\n\r\n".encode(), BODY
    ),
    "no reason": _answer(
        b"HTTP/1.1 200\r\n" + SSE_HEAD + f"Content-Length: {len(BODY)}\r\n\r\n".encode(), BODY
    ),
    "a byte at a time": _in_pieces(CHUNKED_HEAD + chunked(BODY) + b"0\r\n\r\n", 1),
    "seven bytes at a time": _in_pieces(CHUNKED_HEAD + chunked(BODY) + b"0\r\n\r\n", 7),
    "a length, in pieces": _in_pieces(ok_head(len(BODY)) + BODY, 5),
}


async def test_20_1_an_answer_that_says_close_does_not_keep_its_connection() -> None:
    connections = 0

    async def close_said(stream: trio.SocketStream) -> None:
        nonlocal connections
        connections += 1
        while await read_request(stream):  # the connection stays open, all the same
            head = b"HTTP/1.1 200 OK\r\nConnection: close\r\n"
            await stream.send_all(head + f"Content-Length: {len(BODY)}\r\n\r\n".encode() + BODY)

    async with (
        raw_server(close_said) as base_url,
        OpenAIChatLLM(base_url=base_url, model_id="m") as llm,
    ):
        await ask(llm)
        await ask(llm)
    assert connections == 2


FAULTS = {
    "no answer": _no_answer,
    "cut in the body": _cut_in_the_body,
    "short body": _short_body,
    "not HTTP": _garbage,
    "server error": _server_error,
    "error body cut": _rate_limited_then_gone,
    "stall after the head": _stall_after_the_head,
    "stall before the head": _stall_before_the_head,
    "whole": _whole,
}


@pytest.mark.parametrize("fault", [*FAULTS, *ODD_ANSWERS])
async def test_both_paths_end_a_faulty_server_the_same(
    fault: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also issue 20.1: every answer the lean reader hands to h11 ends as with httpx."""
    lean, httpx_ = await both_ways({**FAULTS, **ODD_ANSWERS}[fault], monkeypatch)
    assert lean == httpx_
    if fault in FAULTS:
        assert (lean[1].status == "completed") is (fault == "whole")


async def test_both_paths_say_a_refused_connection_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with trio.socket.socket() as probe:  # a port nothing listens on
        await probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        base_url = f"http://127.0.0.1:{port}/v1"
        lean = await outcome_of(base_url, lean=True, monkeypatch=monkeypatch)
        httpx_ = await outcome_of(base_url, lean=False, monkeypatch=monkeypatch)
    assert lean == httpx_
    assert lean[1].error_message == f"cannot connect to {base_url} (Connection refused)"
    assert lean[1].unreachable


# httpx's side leaves its request-body iterator suspended when the write fails (its own
# async generator, collected later); that is httpx's, not what this test is about.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_an_answer_before_the_whole_request_is_read_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def refuse_early(stream: trio.SocketStream) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            data += await stream.receive_some(65536)
        body = b'{"error": {"message": "request too large"}}'
        head = f"HTTP/1.1 413 Payload Too Large\r\nContent-Length: {len(body)}\r\n\r\n"
        await stream.send_all(head.encode() + body)
        # Then gone with the rest of the request unread (a reset, on Linux).

    big = LLMRequest(system_prompt="", messages=(om.user_text("x" * 8_000_000),), tools=())
    outcomes = []
    async with raw_server(refuse_early) as base_url:
        for lean in (True, False):
            with monkeypatch.context() as patch:
                if not lean:
                    patch.setattr(_openai, "lean_origin", lambda base_url: None)
                llm = OpenAIChatLLM(base_url=base_url, model_id="m")
            async with llm, llm.stream(big) as response:
                async for _ in response:
                    pass
            outcomes.append(response.outcome)
    assert outcomes[0] == outcomes[1]
    assert (outcomes[0].status, outcomes[0].error_message) == (
        "failed",
        "413 Payload Too Large: request too large",
    )


# --------------------------------------------------------------------------- the bytes


async def test_the_request_bytes_are_those_httpx_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bytes] = []

    async def record(stream: trio.SocketStream) -> None:
        seen.append(await read_request(stream))
        await stream.send_all(ok_head(len(BODY)) + BODY)

    async with raw_server(record) as base_url:
        for lean in (True, False):
            options = {"api_key": "sk-1", "headers": {"X-Extra": "1"}}
            with monkeypatch.context() as patch:
                if not lean:
                    patch.setattr(_openai, "lean_origin", lambda base_url: None)
                llm = OpenAIChatLLM(base_url=base_url, model_id="m", **options)  # type: ignore[arg-type]
            async with llm, llm.stream(REQUEST) as response:
                async for _ in response:
                    pass
            assert response.outcome.status == "completed"
    assert len(seen) == 2
    assert seen[0] == seen[1]
    assert seen[0].startswith(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:")


# --------------------------------------------------------------------------- connections


async def test_an_idle_connection_the_server_closed_is_not_reused() -> None:
    connections = 0
    closed = trio.Event()

    async def one_and_close(stream: trio.SocketStream) -> None:
        nonlocal connections
        connections += 1
        await read_request(stream)
        await stream.send_all(ok_head(len(BODY)) + BODY)  # keep-alive, then gone
        await stream.aclose()
        closed.set()

    async with (
        raw_server(one_and_close) as base_url,
        OpenAIChatLLM(base_url=base_url, model_id="m") as llm,
    ):
        for _ in range(3):
            await ask(llm)
            await closed.wait()
            closed = trio.Event()  # on loopback the FIN has arrived once close returned
    assert connections == 3


async def test_the_last_client_closes_the_idle_connections() -> None:
    connections = 0
    ended = trio.Event()

    async def keep_alive(stream: trio.SocketStream) -> None:
        nonlocal connections
        connections += 1
        while await read_request(stream):
            await stream.send_all(ok_head(len(BODY)) + BODY)
        ended.set()  # the client closed its side

    async with raw_server(keep_alive) as base_url:
        first = OpenAIChatLLM(base_url=base_url, model_id="m")
        second = OpenAIChatLLM(base_url=base_url, model_id="m")
        await ask(first)
        await ask(second)
        await first.aclose()
        await ask(second)  # the second client still holds the pool, and its connection
        assert (connections, ended.is_set()) == (1, False)
        await second.aclose()
        with trio.fail_after(5):
            await ended.wait()


async def test_a_request_cancelled_midway_closes_its_connection() -> None:
    connections = 0
    started = trio.Event()

    async def slow(stream: trio.SocketStream) -> None:
        nonlocal connections
        connections += 1
        while await read_request(stream):
            if connections == 1:
                await stream.send_all(ok_head() + chunked(_event(t.content_chunk("Hel"))))
                started.set()
                await trio.sleep_forever()
            await stream.send_all(ok_head(len(BODY)) + BODY)

    async with (
        raw_server(slow) as base_url,
        OpenAIChatLLM(base_url=base_url, model_id="m") as llm,
    ):
        with trio.move_on_after(5) as scope:
            async with trio.open_nursery() as nursery:

                async def cancel_once_started() -> None:
                    await started.wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(cancel_once_started)
                async with llm.stream(REQUEST) as response:
                    async for _ in response:
                        pass
        assert not scope.cancelled_caught
        async with llm.stream(REQUEST) as response:
            async for _ in response:
                pass
        assert response.outcome.status == "completed"
    assert connections == 2  # the half-read one was not handed to the next request


class _Spawns(trio.abc.Instrument):
    def __init__(self) -> None:
        self.names: list[str] = []

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.names.append(task.name)


async def test_20_1_an_answer_is_read_by_its_consumer_without_a_task_of_its_own() -> None:
    async def keep_alive(stream: trio.SocketStream) -> None:
        while await read_request(stream):
            await stream.send_all(ok_head() + chunked(BODY) + b"0\r\n\r\n")

    spawns = _Spawns()
    async with (
        raw_server(keep_alive) as base_url,
        OpenAIChatLLM(base_url=base_url, model_id="m") as llm,
    ):
        for n in range(3):
            if n == 1:  # the connection is open: what follows is the exchange alone
                trio.lowlevel.add_instrument(spawns)
            async with llm.stream(REQUEST) as response:
                texts = [
                    m.payload.text async for m in response if isinstance(m.payload, om.TextPayload)
                ]
            assert (texts, response.outcome.status) == (["Hello"], "completed")
        trio.lowlevel.remove_instrument(spawns)
    assert spawns.names == []


# --------------------------------------------------------------------------- which path


@pytest.mark.parametrize(
    ("base_url", "origin"),
    [
        ("http://127.0.0.1:8000/v1", LeanOrigin("127.0.0.1", 8000, "/v1")),
        ("http://localhost/v1", LeanOrigin("localhost", 80, "/v1")),
        ("http://[::1]:9/", LeanOrigin("::1", 9, "/")),
        ("https://api.example.invalid/v1", None),
        ("http://user:pw@127.0.0.1/v1", None),
        ("http://127.0.0.1/v1?x=1", None),
        ("http://127.0.0.1/a%20b", None),
        ("http://127.0.0.1:99999/v1", None),
    ],
)
def test_which_servers_take_the_lean_exchange(base_url: str, origin: LeanOrigin | None) -> None:
    assert lean_origin(base_url) == origin


def test_a_proxy_in_the_environment_keeps_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert lean_origin("http://127.0.0.1:8000/v1") is not None
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    assert lean_origin("http://127.0.0.1:8000/v1") is None


def test_the_host_header_leaves_out_the_default_port() -> None:
    assert LeanOrigin("127.0.0.1", 80, "").host_header == "127.0.0.1"
    assert LeanOrigin("::1", 8000, "").host_header == "[::1]:8000"
