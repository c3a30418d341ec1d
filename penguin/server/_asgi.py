"""The ASGI shell: the security guard around every request, and the SSE response (S2, S7).

:class:`Guard` is the outermost ASGI app. Before anything else sees a request it
checks, in this order, and answers with the spec's error body when a check fails:

1. the ``Host`` header names this server (``localhost``, ``127.0.0.1``, ``[::1]``, the
   ``--host`` value, and with a wildcard host the ``--allow-host`` names; any port) —
   else 403 ``forbidden_host``, the DNS-rebinding defence;
2. an ``Origin`` header, when there is one, is ``http://`` + that ``Host`` — else 403
   ``forbidden_origin``;
3. under ``/api/`` (``GET /api/health`` excepted, and ``POST /api/auth/login``, which
   checks the token it is sent itself) the token, as ``Authorization:
   Bearer`` or the ``penguin_token`` cookie, compared in constant time — else 401
   ``unauthorized``;
4. a POST, PATCH, PUT or DELETE with a body is ``application/json`` — else 415
   ``unsupported_media_type`` (with 2 this is the CSRF defence: a cross-site form
   cannot send JSON, and a cross-site script cannot hide its Origin);
5. the body is at most 1 MiB, by ``Content-Length`` and as it is read (chunked
   bodies included) — else 413 ``payload_too_large``.

Every response gets ``X-Content-Type-Options: nosniff``; ``/api/`` responses
``Cache-Control: no-store``; everything else (the page and its files) the
``Content-Security-Policy`` (penguin's own, or the one given for a ``--ui`` front
end). No CORS header is ever sent. An :class:`~._errors.ApiError`
raised by the checks or anywhere below becomes its error response (below, by the
exception handlers of :func:`application`); any other exception is logged with its
traceback on stderr and answered 500 ``internal_error`` with a generic message, so no
traceback ever reaches a client.

Responses are starlette's; hand-written are only what starlette has no part for: the
checks above, and :func:`send_event_stream` (the body of :class:`EventStreamResponse`),
which writes a :class:`~._channel.Subscriber` as ``text/event-stream``: each write
carries everything queued since the last one, a client that goes away ends the
response at once, and the subscriber is closed whatever happens.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from http.cookies import CookieError, SimpleCookie
from typing import Any, Final, final

import trio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Router

from penguin import _log
from penguin._concurrency import collapse_single

from ._channel import Subscriber
from ._errors import MAX_BODY_BYTES, ApiError, BodyTooLarge
from ._routes import segment_safe_path

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "TOKEN_COOKIE",
    "ASGIApp",
    "EventStreamResponse",
    "Guard",
    "Receive",
    "Scope",
    "Send",
    "application",
    "host_name",
    "send_event_stream",
]

logger: Final = _log.child("server")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOKEN_COOKIE: Final = "penguin_token"
CONTENT_SECURITY_POLICY: Final = "default-src 'self'; frame-ancestors 'none'"
_BODY_METHODS: Final = frozenset({"POST", "PATCH", "PUT", "DELETE"})
_HEALTH: Final = "/api/health"
_LOGIN: Final = "/api/auth/login"


def _headers(scope: Scope) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name, value in scope.get("headers", ()):
        found.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    return found


def host_name(host_header: str) -> str | None:
    """The name part of a ``Host`` header (lower case, IPv6 in brackets); None if malformed."""
    host = host_header.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return None
        name, rest = host[: end + 1], host[end + 1 :]
    else:
        name, _, port = host.partition(":")
        rest = f":{port}" if _ else ""
    if rest and (not rest.startswith(":") or not rest[1:].isdigit() or not rest[1:].isascii()):
        return None
    return name or None


def _bearer(values: list[str]) -> str | None:
    for value in values:
        scheme, _, credentials = value.strip().partition(" ")
        if scheme.lower() == "bearer" and credentials.strip():
            return credentials.strip()
    return None


def _cookie(values: list[str], name: str) -> str | None:
    for value in values:
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(value)
        except CookieError:
            continue
        if name in jar:
            return jar[name].value
    return None


def token_matches(candidate: str | None, token: str) -> bool:
    """Constant-time comparison of a presented token with the server's."""
    if candidate is None:
        return False
    return secrets.compare_digest(candidate.encode("utf-8"), token.encode("utf-8"))


def request_token(scope: Scope) -> str | None:
    """The token a request presents: the Bearer credentials, else the cookie."""
    headers = _headers(scope)
    bearer = _bearer(headers.get("authorization", []))
    if bearer is not None:
        return bearer
    return _cookie(headers.get("cookie", []), TOKEN_COOKIE)


@final
class Guard:
    """The checks and headers of S2 around ``app``; see the module docstring."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str,
        allowed_hosts: Collection[str],
        content_security_policy: str = CONTENT_SECURITY_POLICY,
    ) -> None:
        if not token:
            raise ValueError("the server needs a non-empty token")
        self._app = app
        self._csp = content_security_policy.encode("latin-1")
        self._token = token
        self._allowed = frozenset(name.lower() for name in allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection scope."""
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1008})
            return
        path: str = scope.get("path", "")
        api = path.startswith("/api/")
        started = False

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                extra = [(b"x-content-type-options", b"nosniff")]
                if api:
                    extra.append((b"cache-control", b"no-store"))
                else:
                    extra.append((b"content-security-policy", self._csp))
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            await send(message)

        try:
            self._check(scope, api=api, path=path)
            scope = dict(scope)
            raw = scope.get("raw_path")
            if isinstance(raw, bytes) and b"%2f" in raw.lower():
                scope["path"] = segment_safe_path(raw)
            try:
                await self._app(scope, _capped(receive), guarded_send)
            except Exception:
                if not started:
                    raise
                return  # answered and logged by the application's handlers (re-raised after)
        except ApiError as error:
            if started:
                logger.warning("penguin server: %s after the response began", error.code)
                return
            if isinstance(error, BodyTooLarge):
                await _discard_body(receive)
            await _error_response(error)(scope, receive, guarded_send)
        except Exception:
            logger.exception("penguin server: internal error on %s %s", scope.get("method"), path)
            if not started:
                internal = ApiError(500, "internal_error", _INTERNAL)
                await _error_response(internal)(scope, receive, guarded_send)

    def _check(self, scope: Scope, *, api: bool, path: str) -> None:
        headers = _headers(scope)
        hosts = headers.get("host", [])
        name = host_name(hosts[0]) if len(hosts) == 1 else None
        if name is None or name not in self._allowed:
            raise ApiError(
                403,
                "forbidden_host",
                "The Host header does not name this server; open the URL the server printed.",
            )
        for origin in headers.get("origin", []):
            if origin.strip().lower() != f"http://{hosts[0].strip().lower()}":
                raise ApiError(
                    403,
                    "forbidden_origin",
                    f"Requests from the origin {origin!r} are not accepted by this server.",
                )
        method = scope.get("method", "GET")
        public = (path == _HEALTH and method in ("GET", "HEAD")) or (
            path == _LOGIN and method == "POST"
        )
        if api and not public and not token_matches(request_token(scope), self._token):
            raise ApiError(
                401,
                "unauthorized",
                "A valid token is required: send 'Authorization: Bearer TOKEN' or open "
                "the URL the server printed.",
            )
        length = headers.get("content-length", [])
        has_body = bool(headers.get("transfer-encoding")) or any(
            value.strip() not in ("", "0") for value in length
        )
        if method in _BODY_METHODS and has_body:
            media = headers.get("content-type", [""])[0].split(";", 1)[0].strip().lower()
            if media != "application/json":
                raise ApiError(
                    415,
                    "unsupported_media_type",
                    "The request body must be sent with 'Content-Type: application/json'.",
                )
        for value in length:
            if value.strip().isdigit() and int(value) > MAX_BODY_BYTES:
                raise BodyTooLarge()


def application(router: Router) -> Starlette:
    """``router`` in a starlette application whose exception handlers answer errors (S2.5).

    These are starlette's documented ``exception_handlers``: an unknown route or method
    (starlette's ``HTTPException``) becomes the spec's 404 ``not_found`` or 405
    ``method_not_allowed`` (with ``Allow``), an :class:`~._errors.ApiError` its error
    body (a refused body read to its end first, see :func:`_discard_body`), anything
    else is logged with its traceback and answered 500 ``internal_error`` (starlette
    then re-raises it; the :class:`Guard` lets it end there).
    The router is mounted whole, so its own options (``redirect_slashes``, ``default``)
    stay as they are.
    """
    return Starlette(
        routes=[Mount("", app=router)],
        exception_handlers={
            HTTPException: _http_error,
            ApiError: _api_error,
            Exception: _internal_error,
        },
    )


def _error_response(error: ApiError) -> Response:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error_response(_from_http_exception(exc, request.scope))


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    if isinstance(exc, BodyTooLarge):
        await _discard_body(request.receive)
    return _error_response(exc)


_INTERNAL: Final = "The server failed on this request; see its log."


async def _internal_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, RuntimeError) and isinstance(exc.__cause__, ApiError):
        # starlette's handlers refuse an error once the response has begun
        logger.warning("penguin server: %s after the response began", exc.__cause__.code)
    else:
        scope = request.scope
        logger.error(
            "penguin server: internal error on %s %s",
            scope.get("method"),
            scope.get("path", ""),
            exc_info=exc,
        )
    return _error_response(ApiError(500, "internal_error", _INTERNAL))


def _from_http_exception(exc: HTTPException, scope: Scope) -> ApiError:
    path = scope.get("path", "")
    if exc.status_code == 405:
        allowed = dict(exc.headers or {}).get("Allow", "")
        return ApiError(
            405,
            "method_not_allowed",
            f"{scope.get('method')} is not allowed on {path}; use {allowed}.",
            headers={"Allow": allowed} if allowed else None,
        )
    if exc.status_code == 404:
        return ApiError(404, "not_found", f"There is no route {path!r}.")
    return ApiError(exc.status_code, "invalid_request", str(exc.detail))


_DISCARD_BYTES: Final = 16 * MAX_BODY_BYTES
_DISCARD_SECONDS: Final = 5.0


async def _discard_body(receive: Receive) -> None:
    """Read (and drop) the rest of a refused body, so the client gets to read the 413.

    A server that answers and closes while the client is still sending makes the
    client's kernel see a reset, and the answer is lost. The rest is read for a
    bounded time and size only; past that the connection is simply closed.
    """
    received = 0
    with trio.move_on_after(_DISCARD_SECONDS):
        while received < _DISCARD_BYTES:
            message = await receive()
            if message["type"] != "http.request":
                return
            received += len(message.get("body", b""))
            if not message.get("more_body", False):
                return


def _capped(receive: Receive) -> Receive:
    """``receive`` that raises :class:`BodyTooLarge` once, when the body passes the cap.

    Once refused, the rest of the body passes through, to be discarded.
    """
    received = 0
    refused = False

    async def capped_receive() -> Message:
        nonlocal received, refused
        message = await receive()
        if message["type"] == "http.request" and not refused:
            received += len(message.get("body", b""))
            if received > MAX_BODY_BYTES:
                refused = True
                raise BodyTooLarge()
        return message

    return capped_receive


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def send_event_stream(subscriber: Subscriber, receive: Receive, send: Send) -> None:
    """Write ``subscriber`` as a ``text/event-stream`` until it ends or the client leaves."""
    gone = False
    try:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream; charset=utf-8"),
                    (b"x-accel-buffering", b"no"),
                ],
            }
        )
        with collapse_single():
            async with trio.open_nursery() as nursery:

                async def watch_disconnect() -> None:
                    nonlocal gone
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    gone = True
                    nursery.cancel_scope.cancel()

                nursery.start_soon(watch_disconnect)
                while True:
                    chunk = await subscriber.next_batch()
                    if chunk is None:
                        break
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                nursery.cancel_scope.cancel()
        if not gone:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        subscriber.close()


@final
class EventStreamResponse(Response):
    """``text/event-stream`` fed by a channel subscriber (see :func:`~._asgi.send_event_stream`)."""

    def __init__(self, subscriber: Subscriber) -> None:
        super().__init__(media_type="text/event-stream")
        self.subscriber = subscriber

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Write the stream until the subscriber ends or the client goes away."""
        await send_event_stream(self.subscriber, receive, send)
