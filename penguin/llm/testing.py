"""A local OpenAI-compatible server, for tests and benchmarks of model clients.

:func:`serve_openai_compatible` runs a small HTTP/1.1 server (Trio sockets and
``h11``) on ``127.0.0.1`` with an ephemeral port, inside a nursery that the ``async
with`` block owns. A *handler* decides, per request, what the server answers::

    from penguin.llm import OpenAIChatLLM
    from penguin.llm import testing as t

    def handler(request: t.ReceivedRequest) -> t.Reply:
        return t.sse_reply([t.content_chunk("Hel"), t.content_chunk("lo"), t.finish_chunk()])

    async with t.serve_openai_compatible(handler) as server:
        llm = OpenAIChatLLM(base_url=server.base_url, model_id="test")
        ...
        server.requests[0].json()["messages"]     # every request is recorded

The answers a handler can give:

- :func:`sse_reply` — a ``200 text/event-stream`` of chat completion chunks (built
  with :func:`content_chunk`, :func:`reasoning_chunk`, :func:`tool_call_chunk`,
  :func:`finish_chunk`, :func:`usage_chunk`, or raw SSE text), ending with
  ``data: [DONE]``; ``split=`` re-cuts the bytes into pieces of that size; ``end=``
  says how the body ends: ``"complete"``, ``"cut"`` (the socket is closed mid-body)
  or ``"stall"`` (the server stops writing and waits for the client to give up);
- :class:`ErrorReply` — an HTTP error status with an OpenAI-style JSON error body.

This module is public but only for testing: it is not imported by ``penguin.llm``,
it serves plain HTTP on loopback only, and it is no model server.
"""

from __future__ import annotations

import functools
import http
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final, Literal, TypeAlias, final

import attrs
import h11
import trio

from penguin._concurrency import collapse_single

__all__ = [
    "ErrorReply",
    "Handler",
    "LocalServer",
    "ReceivedRequest",
    "Reply",
    "StreamEnd",
    "StreamReply",
    "completion_chunk",
    "content_chunk",
    "finish_chunk",
    "reasoning_chunk",
    "serve_openai_compatible",
    "sse_reply",
    "tool_call_chunk",
    "usage_chunk",
]

_READ_SIZE: Final = 64 * 1024
StreamEnd: TypeAlias = Literal["complete", "cut", "stall"]
"""How a streamed body ends: properly, by closing the socket, or by going silent."""


# --------------------------------------------------------------------------- requests


@final
@attrs.frozen
class ReceivedRequest:
    """One request as the server received it; header names are lower case.

    ``connection`` numbers the server's connections from 0 in accept order, so a test
    can tell whether the client reused one.
    """

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes
    connection: int = 0

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


# --------------------------------------------------------------------------- replies


@final
@attrs.frozen
class StreamReply:
    """A ``text/event-stream`` answer: each part is written (and flushed) as one chunk."""

    parts: tuple[bytes, ...]
    end: StreamEnd = "complete"
    status: int = 200


@final
@attrs.frozen
class ErrorReply:
    """An error status with the JSON body ``{"error": {"message", "type", "code"}}``."""

    status: int
    message: str = "error"
    headers: tuple[tuple[str, str], ...] = ()
    """Extra response headers, e.g. ``(("retry-after", "2"),)``."""


Reply: TypeAlias = StreamReply | ErrorReply
Handler: TypeAlias = Callable[[ReceivedRequest], Reply | Awaitable[Reply]]
"""Decides the answer to one request (sync or async)."""


def sse_reply(
    events: Iterable[Mapping[str, Any] | str],
    *,
    done: bool = True,
    end: StreamEnd = "complete",
    split: int | None = None,
) -> StreamReply:
    r"""A streamed answer: each mapping is sent as ``data: <json>``, each string verbatim.

    Strings are raw SSE text (``": a comment\n\n"``, ``"data: {broken\n\n"``), for
    testing parsers. ``done`` appends ``data: [DONE]``. ``split`` re-cuts the whole
    body into pieces of ``split`` bytes, so events straddle writes.
    """
    parts = [event.encode() if isinstance(event, str) else _data_line(event) for event in events]
    if done:
        parts.append(b"data: [DONE]\n\n")
    if split is not None:
        if split < 1:
            raise ValueError("split must be at least 1 byte")
        body = b"".join(parts)
        parts = [body[start : start + split] for start in range(0, len(body), split)]
    return StreamReply(tuple(parts), end)


def _data_line(event: Mapping[str, Any]) -> bytes:
    return b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"


def completion_chunk(
    delta: Mapping[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: Mapping[str, Any] | None = None,
    choices: bool = True,
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` object (``choices=False``: an empty choices list)."""
    chunk: dict[str, Any] = {
        "id": "chatcmpl-local",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "local",
        "choices": (
            [{"index": 0, "delta": dict(delta or {}), "finish_reason": finish_reason}]
            if choices
            else []
        ),
    }
    if usage is not None:
        chunk["usage"] = dict(usage)
    return chunk


def content_chunk(text: str) -> dict[str, Any]:
    """A chunk carrying a piece of the answer's text."""
    return completion_chunk({"content": text})


def reasoning_chunk(text: str, field: str = "reasoning_content") -> dict[str, Any]:
    """A chunk carrying a piece of reasoning in ``field`` (or ``"reasoning"``)."""
    return completion_chunk({field: text})


def tool_call_chunk(
    index: int, *, id: str | None = None, name: str | None = None, arguments: str | None = None
) -> dict[str, Any]:
    """A chunk carrying one piece of tool call ``index`` (id and name usually only first)."""
    piece: dict[str, Any] = {"index": index}
    if id is not None:
        piece["id"] = id
        piece["type"] = "function"
    function: dict[str, str] = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    if function:
        piece["function"] = function
    return completion_chunk({"tool_calls": [piece]})


def finish_chunk(reason: str = "stop") -> dict[str, Any]:
    """The chunk that ends the choice (``stop``, ``tool_calls``, ``length``...)."""
    return completion_chunk({}, finish_reason=reason)


def usage_chunk(
    prompt_tokens: int,
    completion_tokens: int,
    *,
    cached_tokens: int | None = None,
    total_tokens: int | None = None,
) -> dict[str, Any]:
    """The final usage chunk that ``stream_options.include_usage`` asks for."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": (
            total_tokens if total_tokens is not None else prompt_tokens + completion_tokens
        ),
    }
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return completion_chunk(usage=usage, choices=False)


# --------------------------------------------------------------------------- the server


@final
class LocalServer:
    """A running local server: its ``base_url`` (ending in ``/v1``) and what it received."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.requests: list[ReceivedRequest] = []
        """Every request received, in arrival order."""
        self.connections = 0
        """How many connections the server has accepted."""
        self.handler_errors: list[Exception] = []
        """Exceptions the handler raised (each was answered with a 500)."""


@asynccontextmanager
async def serve_openai_compatible(handler: Handler) -> AsyncIterator[LocalServer]:
    """Serve on ``127.0.0.1`` (ephemeral port) until the block ends; see the module doc.

    Leaving the block closes the listener and every connection. An exception raised
    by ``handler`` is answered with a ``500`` and raised again when the block ends (if
    the block itself did not raise), so a bug in a handler fails its test.
    """
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    server = LocalServer(f"http://127.0.0.1:{port}/v1")
    connection = functools.partial(_serve_connection, server, handler)
    with collapse_single():
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, connection, listeners)
            try:
                yield server
            finally:
                nursery.cancel_scope.cancel()
    if server.handler_errors:
        raise server.handler_errors[0]


async def _serve_connection(
    server: LocalServer, handler: Handler, stream: trio.SocketStream
) -> None:
    number = server.connections
    server.connections += 1
    async with stream:
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request = await _read_request(conn, stream)
                if request is None:
                    return
                request = attrs.evolve(request, connection=number)
                server.requests.append(request)
                reply = await _ask(server, handler, request)
                if not await _write_reply(conn, stream, reply):
                    return
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            return  # the client went away or spoke nonsense: this connection is over


async def _ask(server: LocalServer, handler: Handler, request: ReceivedRequest) -> Reply:
    try:
        reply = handler(request)
        if not isinstance(reply, StreamReply | ErrorReply):
            reply = await reply
    except Exception as error:
        server.handler_errors.append(error)
        return ErrorReply(500, f"the test handler raised {type(error).__name__}: {error}")
    return reply


async def _read_request(conn: h11.Connection, stream: trio.SocketStream) -> ReceivedRequest | None:
    head: h11.Request | None = None
    body: list[bytes] = []
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await stream.receive_some(_READ_SIZE))
        elif isinstance(event, h11.Request):
            head = event
        elif isinstance(event, h11.Data):
            body.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage):
            assert head is not None
            return ReceivedRequest(
                method=head.method.decode(),
                path=head.target.decode(),
                headers={name.decode().lower(): value.decode() for name, value in head.headers},
                body=b"".join(body),
            )
        elif isinstance(event, h11.ConnectionClosed):
            return None


async def _write_reply(conn: h11.Connection, stream: trio.SocketStream, reply: Reply) -> bool:
    """Answer; ``False`` when the connection must not be reused."""
    if isinstance(reply, ErrorReply):
        body = json.dumps(
            {"error": {"message": reply.message, "type": _error_type(reply.status), "code": None}}
        ).encode()
        headers = [
            ("content-type", "application/json"),
            ("content-length", str(len(body))),
            *reply.headers,
        ]
        await _send(conn, stream, h11.Response(status_code=reply.status, headers=headers))
        await _send(conn, stream, h11.Data(data=body))
        await _send(conn, stream, h11.EndOfMessage())
        return True
    headers = [("content-type", "text/event-stream"), ("cache-control", "no-cache")]
    await _send(conn, stream, h11.Response(status_code=reply.status, headers=headers))
    for part in reply.parts:
        await _send(conn, stream, h11.Data(data=part))
    if reply.end == "cut":
        await stream.aclose()
        return False
    if reply.end == "stall":
        # Silent until the client gives up (EOF) or the server closes.
        while await stream.receive_some(_READ_SIZE):
            pass
        return False
    await _send(conn, stream, h11.EndOfMessage())
    return True


async def _send(conn: h11.Connection, stream: trio.SocketStream, event: h11.Event) -> None:
    data = conn.send(event)
    if data:
        await stream.send_all(data)


def _error_type(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase.lower().replace(" ", "_")
    except ValueError:
        return "error"
