"""The OpenAI Chat Completions streaming client over httpx.

:class:`OpenAIChatLLM` sends ``POST {base_url}/chat/completions`` with ``stream:
true`` and ``stream_options.include_usage`` and streams the answer as OmniMessages
(reference D6). That one protocol reaches OpenAI and the OpenAI-compatible servers:
vLLM, SGLang, ollama, llama.cpp, DeepSeek, OpenRouter and the like.

This module is the thin Trio shell: one ``httpx.AsyncClient`` per instance (its
connections are the Trio run's shared pool, ``_transport``; with a proxy in the
environment, httpx's own pool, which goes through it), the request, the reads and
the error classification at the edge. The pieces it drives
are pure and tested alone: ``_chat_request`` builds the body, ``_sse`` splits the
bytes into events, ``_chat_stream`` decodes them and ``_assemble`` keeps the
fragment discipline.

How a request ends (``LLMOutcome.status``):

=========================================================  ============
the stream reached ``[DONE]`` or a ``finish_reason``        ``completed``
HTTP 401 or 403                                            ``auth``
HTTP 408, 429, 5xx; connect errors and timeouts; no
response headers within the read timeout; a stall of more
than ``read_timeout`` seconds between two chunks             ``timeout``
the stream was cut (EOF or a broken connection before
``[DONE]``/``finish_reason``), or held invalid JSON           ``malformed``
any other HTTP status, an error object inside the stream   ``failed``
=========================================================  ============

``error_message`` says what happened in words: ``cannot connect to <base_url>
(Connection refused)`` for a server that cannot be reached (the outcome is then
``unreachable``), ``server error 500: <the server's message>`` for a 5xx, ``rate
limited (429): <message>`` for a 429 (the outcome is then ``rate_limited``, with its
``retry_after`` when the answer had a ``Retry-After`` header), the status and the
server's message otherwise (``401 Unauthorized: bad key``). Whatever was streamed
before an error is closed with the error's stop reason. Nothing here retries; that is
the engine's job.

Tool call ids are unique per instance: a missing or empty id, or one this instance
has already handed out, is replaced by a fresh ``call_<24 hex>``.

The request asks for an uncompressed body (``Accept-Encoding: identity``): a
compressed event stream arrives in bursts and costs CPU for nothing. After
``[DONE]`` the end of the body is read (briefly) so the connection can be reused.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Final, Protocol, Self, TypeAlias, final

import attrs
import httpx
import trio

from penguin import protocol as om
from penguin._ids import token_hex
from penguin._kept import Kept
from penguin._tls import shared_tls_context

from ._assemble import StreamAssembler
from ._chat_request import REASONING_EFFORTS, chat_completions_body
from ._chat_stream import (
    ChatStreamDecoder,
    http_error_message,
    retry_after_seconds,
    status_stop_reason,
)
from ._errors import LLMStreamError
from ._interface import LLMOutcome, LLMRequest, LLMResponse, ModelRef
from ._lean import LeanLease, lean_origin
from ._response import PulledResponse
from ._sse import SSEParser
from ._transport import environment_proxies, shared_transport

__all__ = ["OpenAIChatLLM"]

Message: TypeAlias = om.OmniMessage[om.Payload]

_MAX_ERROR_BODY: Final = 64 * 1024
"""How much of an error response is read for its message."""
_DRAIN_GRACE: Final = 0.5
"""Seconds to wait for the end of the body after ``[DONE]`` (to reuse the connection)."""
_KEPT_TOOLS: Final = 8
"""Encoded tool lists a client keeps (the sessions of one agent share one list)."""
_KEPT_PROMPTS: Final = 512
"""Encoded system prompts a client keeps: one per session (each names its session id and
workspace), and a batch's client serves every session in flight at once."""
_TOOLS_PLACEHOLDER: Final = f"\0penguin-tools-{secrets.token_hex(8)}\0"
_TOOLS_PLACEHOLDER_JSON: Final = json.dumps(_TOOLS_PLACEHOLDER).encode()
_PROMPT_KEPT_FROM: Final = 512
"""Characters from which a system prompt's encoding is kept: below it, encoding is cheap."""
_PROMPT_PLACEHOLDER: Final = f"\0penguin-prompt-{secrets.token_hex(8)}\0"
_PROMPT_PLACEHOLDER_JSON: Final = json.dumps(_PROMPT_PLACEHOLDER).encode()


@final
class OpenAIChatLLM:
    """A streaming OpenAI Chat Completions client (an :class:`~penguin.llm.LLM`).

    ``base_url`` is the API root, e.g. ``https://api.openai.com/v1`` or
    ``http://localhost:8000/v1``. ``api_key`` is sent as ``Authorization: Bearer``
    (no header when it is empty, for local servers). ``connect_timeout`` bounds
    connecting and sending the request; ``read_timeout`` bounds every wait for data:
    the response headers, then the silence between two chunks of the stream, so a
    stalled stream ends as ``timeout`` after that many seconds. There is no overall
    deadline: a long answer that keeps streaming is never cut.

    ``reasoning_efforts`` maps a request's ``thinking_level`` to ``reasoning_effort``
    (default :data:`~penguin.llm.REASONING_EFFORTS`); ``return_reasoning=False``
    stops sending earlier reasoning back (for servers that reject it);
    ``extra_body`` is merged into every request body (``temperature``, provider
    options); ``headers`` are added to every request.

    Use it as an async context manager, or call :meth:`aclose`, to release the
    connection pool.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model_id: str,
        api_key: str = "",
        provider: str = "openai",
        context_window: int | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 120.0,
        reasoning_efforts: Mapping[str, str] = REASONING_EFFORTS,
        return_reasoning: bool = True,
        extra_body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._model = ModelRef(provider=provider, model_id=model_id)
        self._context_window = context_window
        self._base_url = base_url.rstrip("/")
        self._url = self._base_url + "/chat/completions"
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._reasoning_efforts = reasoning_efforts
        self._return_reasoning = return_reasoning
        self._extra_body = dict(extra_body) if extra_body else None
        request_headers = {
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",
            "Content-Type": "application/json",
            **(headers or {}),
        }
        if api_key:
            request_headers["Authorization"] = f"Bearer {api_key}"
        origin = lean_origin(self._base_url)
        self._lean: LeanLease | None = None
        self._client: httpx.AsyncClient | None = None
        self._proxied: dict[str, Any] | None = None
        timeout = httpx.Timeout(
            connect=connect_timeout, read=read_timeout, write=connect_timeout, pool=connect_timeout
        )
        if origin is not None:  # plain http, no proxy: h11 on the run's lean pool
            self._lean = LeanLease(origin, list(request_headers.items()))
            self._lean_path = origin.path + "/chat/completions"
        elif environment_proxies():  # httpx's own pool, which mounts them: made at first use
            self._proxied = {"headers": request_headers, "timeout": timeout}
        else:
            self._client = httpx.AsyncClient(
                headers=request_headers, transport=shared_transport(), timeout=timeout
            )
        self._issued_ids: set[str] = set()
        self._tools_json = Kept[tuple[om.ToolDefinition, ...], bytes](_encoded_tools, _KEPT_TOOLS)
        self._prompts_json = Kept[str, bytes](_encode, _KEPT_PROMPTS, hashable=True)

    @property
    def model(self) -> ModelRef:
        """The provider name and model id."""
        return self._model

    @property
    def context_window(self) -> int | None:
        """The context window given at construction, if any."""
        return self._context_window

    async def aclose(self) -> None:
        """Close the connection pool; the client cannot be used afterwards."""
        if self._client is not None:
            await self._client.aclose()
        if self._lean is not None:
            self._lean.aclose()
            await trio.lowlevel.checkpoint()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @asynccontextmanager
    async def stream(self, request: LLMRequest) -> AsyncIterator[LLMResponse]:
        """Send ``request`` and stream the answer; see the module doc for the outcomes.

        The answer is read by the consumer's own task, one network read per step of its
        iteration (:class:`~._response.PulledResponse`): no producing task and no channel between
        the two, which saved a task, a channel and two scheduling rounds per request.
        Leaving the block closes the exchange where it stands.
        """
        response = PulledResponse()
        batches = self._produce(self._body(request), response)
        response.batches = batches
        try:
            yield response
        finally:
            await batches.aclose()

    def _body(self, request: LLMRequest) -> bytes:
        """The request body's bytes; the tools and a long system prompt encoded once each.

        The ``tools`` array and the system prompt are the same for every request of a
        session (the tools for sessions alike too), and the bulk of a short
        conversation's body: each is encoded once, kept, and put where a placeholder
        stands, so the bytes are exactly those of one encoding of the whole.
        """
        options: dict[str, Any] = {
            "model_id": self._model.model_id,
            "reasoning_efforts": self._reasoning_efforts,
            "return_reasoning": self._return_reasoning,
            "extra_body": self._extra_body,
        }
        extra = self._extra_body or {}
        prompt = request.system_prompt
        keep_prompt = len(prompt) >= _PROMPT_KEPT_FROM and "messages" not in extra
        keep_tools = bool(request.tools) and "tools" not in extra
        if not keep_prompt and not keep_tools:
            return _encode(chat_completions_body(request, **options))
        body = chat_completions_body(
            attrs.evolve(
                request,
                system_prompt=_PROMPT_PLACEHOLDER if keep_prompt else prompt,
                tools=() if keep_tools else request.tools,
            ),
            **options,
        )
        if keep_tools:
            ordered: dict[str, Any] = {}
            for key, value in body.items():  # "tools" where chat_completions_body puts it
                ordered[key] = value
                if key == "stream_options":
                    ordered["tools"] = _TOOLS_PLACEHOLDER
            body = ordered
        encoded = _encode(body)
        if keep_tools:  # after the messages: the last occurrence
            at = encoded.rfind(_TOOLS_PLACEHOLDER_JSON)
            tools = self._tools_json.get(request.tools)
            encoded = encoded[:at] + tools + encoded[at + len(_TOOLS_PLACEHOLDER_JSON) :]
        if keep_prompt:  # the first message's content: the first occurrence
            at = encoded.find(_PROMPT_PLACEHOLDER_JSON)
            text = self._prompts_json.get(prompt)
            encoded = encoded[:at] + text + encoded[at + len(_PROMPT_PLACEHOLDER_JSON) :]
        return encoded

    def _tool_call_id(self, server_id: str | None) -> str:
        call_id = server_id
        while not call_id or call_id in self._issued_ids:
            call_id = f"call_{token_hex(12)}"
        self._issued_ids.add(call_id)
        return call_id

    async def _produce(
        self, content: bytes, response: PulledResponse
    ) -> AsyncGenerator[list[Message], None]:
        """The answer's batches (one per network read); its outcome is set at the end."""
        assembler = StreamAssembler(self._tool_call_id)
        decoder = ChatStreamDecoder(assembler)
        status: LLMOutcome
        try:
            async with contextlib.aclosing(self._exchange(content, decoder, assembler)) as batches:
                async for batch in batches:
                    yield batch
        except LLMStreamError as error:
            assembler.close(error.status)
            status = LLMOutcome(
                error.status,
                error.message,
                decoder.usage,
                unreachable=error.unreachable,
                retry_after=error.retry_after,
                rate_limited=error.rate_limited,
            )
        else:
            assembler.close("completed")
            status = LLMOutcome("completed", None, decoder.usage)
        tail = assembler.take()
        if tail:
            yield tail
        response.settle(status)

    async def _exchange(
        self,
        content: bytes,
        decoder: ChatStreamDecoder,
        assembler: StreamAssembler,
    ) -> AsyncGenerator[list[Message], None]:
        """The POST and the answer's batches; failures raised as :class:`LLMStreamError`."""
        in_body = False
        try:
            async with self._post(content) as response:
                if not response.is_success:
                    raise LLMStreamError(
                        status_stop_reason(response.status_code),
                        http_error_message(
                            response.status_code,
                            response.reason_phrase,
                            await _read_capped(response),
                        ),
                        retry_after=retry_after_seconds(response.headers.get("retry-after")),
                        rate_limited=response.status_code == 429,
                    )
                in_body = True
                parser = SSEParser()
                chunks = response.aiter_bytes()
                try:
                    async for chunk in chunks:
                        decoder.feed(parser.feed(chunk))
                        batch = assembler.take()
                        if batch:
                            yield batch
                        if decoder.done:
                            break
                    else:
                        decoder.feed(parser.close())
                        decoder.end_of_stream()
                        return
                    # [DONE]: the body's end follows at once; reading it keeps the
                    # connection reusable. A server that lingers is not waited for.
                    with trio.move_on_after(_DRAIN_GRACE), contextlib.suppress(httpx.HTTPError):
                        async for _ in chunks:
                            pass
                finally:
                    await _unwind(chunks)
        except httpx.ReadTimeout:
            if in_body:
                message = f"the response stream stalled: no data for {self._read_timeout:g} s"
            else:
                message = f"no response within {self._read_timeout:g} s"
            raise LLMStreamError("timeout", f"{message} (read timeout)") from None
        except httpx.ConnectTimeout:
            message = f"cannot connect to {self._base_url} (no answer within"
            raise LLMStreamError("timeout", f"{message} {self._connect_timeout:g} s)") from None
        except httpx.ConnectError as error:
            raise LLMStreamError(
                "timeout",
                f"cannot connect to {self._base_url} ({_os_reason(error)})",
                unreachable=True,
            ) from None
        except httpx.TransportError as error:
            detail = f"{type(error).__name__}: {error}".rstrip(": ")
            if in_body:
                raise LLMStreamError("malformed", f"the response stream broke: {detail}") from None
            raise LLMStreamError("timeout", detail) from None
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            raise LLMStreamError("failed", f"{type(error).__name__}: {error}") from None

    @asynccontextmanager
    async def _post(self, content: bytes) -> AsyncIterator[_Response]:
        """The response to a POST of ``content``, its body not read yet."""
        if self._lean is not None:
            response = await self._lean.post(
                self._lean_path,
                content,
                connect_timeout=self._connect_timeout,
                read_timeout=self._read_timeout,
                write_timeout=self._connect_timeout,
            )
            try:
                yield response
            finally:
                response.aclose()
        else:
            client = self._client or await self._proxied_client()
            async with client.stream("POST", self._url, content=content) as streamed:
                yield streamed

    async def _proxied_client(self) -> httpx.AsyncClient:
        """The client of a model reached through the environment's proxies, made once.

        Made at the first request, not with this object: it is given the process's TLS
        context, which may have to be made (from files) in a worker thread first; httpx
        would otherwise make one of its own for each proxy, on the caller's thread.
        """
        assert self._proxied is not None
        tls = await shared_tls_context()
        if self._client is None:  # another request of this client may have made it meanwhile
            self._client = httpx.AsyncClient(verify=tls, **self._proxied)
        return self._client


class _Response(Protocol):
    """What the exchange reads of a response: httpx's or the lean exchange's."""

    @property
    def status_code(self) -> int: ...
    @property
    def reason_phrase(self) -> str: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def is_success(self) -> bool: ...
    def aiter_bytes(self) -> AsyncIterator[bytes]: ...


def _os_reason(error: BaseException) -> str:
    """The system's words for why a connection failed: ``Connection refused``, ...

    httpx wraps the OS error (and trio's "all attempts to connect" wraps one per
    address); the first one that carries an error number is what the system said.
    Without one, the error's own text.
    """
    pending: list[BaseException] = [error]
    seen: set[int] = set()
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, socket.gaierror) and current.strerror:
            return current.strerror  # "Name or service not known"
        if isinstance(current, OSError) and current.errno:
            return os.strerror(current.errno)  # "Connection refused", without trio's prefix
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return str(error) or type(error).__name__


def _encode(body: object) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def _encoded_tools(tools: tuple[om.ToolDefinition, ...]) -> bytes:
    return _encode(chat_completions_body(LLMRequest("", (), tools), model_id="")["tools"])


async def _unwind(chunks: AsyncIterator[bytes]) -> None:
    """End httpx's body iterator so that none of its layers is left suspended.

    httpx reads a body through async generators nested in each other, and closing the
    outer one abandons the inner ones (Trio then warns about each at garbage
    collection). Resuming the chain inside a cancelled scope ends it from the bottom
    instead: the next network read raises ``Cancelled`` through every layer, or the
    body turns out to be finished already. Under an outer cancellation the
    ``Cancelled`` keeps propagating, as it should.
    """
    with trio.CancelScope() as scope, contextlib.suppress(Exception):
        scope.cancel()
        async for _ in chunks:
            pass


async def _read_capped(response: _Response) -> bytes:
    """The start of an error body; what arrived before a read failed is enough."""
    parts: list[bytes] = []
    size = 0
    chunks = response.aiter_bytes()
    try:
        async for chunk in chunks:
            parts.append(chunk)
            size += len(chunk)
            if size >= _MAX_ERROR_BODY:
                break
    except httpx.HTTPError:
        pass  # the status already says what happened
    finally:
        await _unwind(chunks)
    return b"".join(parts)[:_MAX_ERROR_BODY]
