"""The routes: a starlette ``Router`` whose endpoints call :class:`ServerSessions` (S2.2, S3-S7).

Each endpoint checks the ids of its path (:func:`~._routes.validate_ids`), reads and
checks its body (:mod:`._requests`), calls the sessions object and returns a
starlette response; it holds no state and makes no decision of its own. Errors are
raised (an :class:`~._errors.ApiError`, or starlette's ``HTTPException`` for an
unknown route or method) and turned into the error body by the
:class:`~._asgi.Guard` around the router.

The page (``GET /``): ``/?token=TOKEN`` with the right token sets the
``penguin_token`` cookie (HttpOnly, SameSite=Strict, Path=/) and redirects (303) to
``/``; a wrong one is 401. ``/`` with a valid cookie serves ``static/index.html``;
without, a short page that says to open the URL the server printed. The page's
other files are served from ``/static/``. With ``--ui DIR`` (a
:class:`~._compat.UiFolder`) that folder's ``index.html`` is the page instead, and
every path no route takes is one of its files, else that page (a single-page app's
own routes). The routes the reference's web app needs beyond the spec are in
:mod:`._compat`.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Final

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route, Router

from penguin._version import __version__
from penguin.approval import APPROVAL_MODES

from . import _compat
from ._asgi import TOKEN_COOKIE, EventStreamResponse, request_token
from ._asgi import token_matches as token_matches
from ._errors import ApiError
from ._requests import (
    create_session_request,
    decision_request,
    start_task_request,
    steer_request,
    update_session_request,
)
from ._routes import validate_ids
from ._sessions import ServerSessions

__all__ = ["STATIC_TYPES", "EventStreamResponse", "build_router"]

STATIC_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
}

_SIGN_IN: Final = b"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>penguin server</title></head>
<body><h1>penguin server</h1>
<p>This page needs the server's token. Open the URL that <code>penguin server</code>
printed when it started (it ends in <code>/?token=...</code>).</p></body></html>
"""

Endpoint = Callable[[Request], Awaitable[Response]]


def _static_files() -> dict[str, bytes]:
    folder = importlib.resources.files("penguin.server") / "static"
    found: dict[str, bytes] = {}
    for entry in folder.iterdir():
        name = entry.name
        if entry.is_file() and not name.startswith(".") and _suffix(name) in STATIC_TYPES:
            found[name] = entry.read_bytes()
    return found


def _suffix(name: str) -> str:
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def _json(value: object, status: int = 200) -> Response:
    return JSONResponse(value, status_code=status)


def _ids(request: Request) -> dict[str, str]:
    return validate_ids(request.path_params)


def _by_method(**endpoints: Endpoint) -> Endpoint:
    """One endpoint for a path that several methods share (so a 405 lists them all)."""

    async def dispatch(request: Request) -> Response:
        method = "GET" if request.method == "HEAD" else request.method
        return await endpoints[method](request)

    return dispatch


def build_router(
    sessions: ServerSessions, *, token: str, project_id: str, ui: _compat.UiFolder | None = None
) -> Router:
    """The server's routes over ``sessions``; ``ui`` serves another front end (``--ui``)."""
    static = _static_files()
    compat = _compat.Compat(sessions, token, project_id)

    async def page(request: Request) -> Response:
        given = request.query_params.getlist("token")
        if given:
            if not token_matches(given[-1], token):
                raise ApiError(
                    401, "unauthorized", "The token in the URL is wrong; use the one printed."
                )
            response = RedirectResponse("/", status_code=303)
            response.set_cookie(
                TOKEN_COOKIE, token, path="/", httponly=True, samesite="strict", secure=False
            )
            return response
        if token_matches(request_token(request.scope), token) and ui is not None:
            return Response(await ui.index(), media_type=STATIC_TYPES[".html"])
        if token_matches(request_token(request.scope), token) and "index.html" in static:
            return Response(static["index.html"], media_type=STATIC_TYPES[".html"])
        return Response(_SIGN_IN, status_code=401, media_type=STATIC_TYPES[".html"])

    async def asset(request: Request) -> Response:
        name = str(request.path_params["asset"])
        body = static.get(name)
        if body is None:
            raise ApiError(404, "not_found", f"There is no file {name!r}.")
        return Response(body, media_type=STATIC_TYPES[_suffix(name)])

    async def health(request: Request) -> Response:
        return _json({"status": "ok"})

    async def server_info(request: Request) -> Response:
        return _json(
            {
                "version": __version__,
                "projectId": project_id,
                "agentId": "default_agent",
                "approvalModes": list(APPROVAL_MODES),
            }
        )

    async def create_session(request: Request) -> Response:
        ids = _ids(request)
        body = create_session_request(await request.body())
        info = await sessions.create(ids["project"], ids["agent"], body)
        return _json({"session": info}, 201)

    async def get_session(request: Request) -> Response:
        ids = _ids(request)
        return _json({"session": await sessions.get(ids["session"])})

    async def update_session(request: Request) -> Response:
        ids = _ids(request)
        body = update_session_request(await request.body())
        return _json({"session": await sessions.update(ids["session"], body)})

    async def delete_session(request: Request) -> Response:
        ids = _ids(request)
        await sessions.delete(ids["session"])
        return Response(status_code=204)

    async def messages(request: Request) -> Response:
        ids = _ids(request)
        return _json({"messages": await sessions.messages(ids["session"])})

    async def start_task(request: Request) -> Response:
        ids = _ids(request)
        body = start_task_request(await request.body())
        queued = await sessions.start_task(
            ids["session"], body.texts, queue_if_busy=body.queue_if_busy
        )
        return _json({"sessionId": ids["session"], **({"queued": True} if queued else {})}, 202)

    async def steer(request: Request) -> Response:
        ids = _ids(request)
        body = steer_request(await request.body())
        await sessions.steer(ids["session"], body.text)
        return _json({"sessionId": ids["session"]}, 202)

    async def abort(request: Request) -> Response:
        ids = _ids(request)
        if await sessions.abort(ids["session"]):
            return _json({"sessionId": ids["session"]}, 202)
        return Response(status_code=204)

    async def list_approvals(request: Request) -> Response:
        ids = _ids(request)
        return _json({"approvals": await sessions.approvals(ids["session"])})

    async def decide(request: Request) -> Response:
        ids = _ids(request)
        body = decision_request(await request.body())
        await sessions.decide(ids["session"], ids["call"], body)
        return Response(status_code=204)

    async def stream(request: Request) -> Response:
        ids = _ids(request)
        last = request.headers.get("last-event-id") or request.query_params.get("lastEventId")
        return EventStreamResponse(await sessions.subscribe(ids["session"], last))

    async def list_processes(request: Request) -> Response:
        ids = _ids(request)
        return _json({"processes": await sessions.processes(ids["session"])})

    async def kill_process(request: Request) -> Response:
        ids = _ids(request)
        await sessions.kill_process(ids["session"], ids["process"])
        return Response(status_code=204)

    session = "/api/sessions/{session}"
    agents = "/api/projects/{project}/agents"
    routes: list[BaseRoute] = [
        Route("/", page, methods=["GET"]),
        *([Route("/static/{asset}", asset, methods=["GET"])] if ui is None else []),
        Route("/api/health", health, methods=["GET"]),
        Route("/api/server", server_info, methods=["GET"]),
        Route(agents, partial(_compat.agents, compat), methods=["GET"]),
        Route("/api/projects/{project}/models", partial(_compat.models, compat), methods=["GET"]),
        Route(
            f"{agents}/{{agent}}/sessions",
            _by_method(GET=partial(_compat.list_sessions, sessions), POST=create_session),
            methods=["GET", "POST"],
        ),
        Route(
            session,
            _by_method(GET=get_session, PATCH=update_session, DELETE=delete_session),
            methods=["GET", "PATCH", "DELETE"],
        ),
        Route(f"{session}/messages", messages, methods=["GET"]),
        Route(f"{session}/tasks", start_task, methods=["POST"]),
        Route(f"{session}/steer", steer, methods=["POST"]),
        Route(f"{session}/abort", abort, methods=["POST"]),
        Route(f"{session}/approvals", list_approvals, methods=["GET"]),
        Route(f"{session}/approvals/{{call}}", decide, methods=["POST"]),
        Route(f"{session}/stream", stream, methods=["GET"]),
        Route(f"{session}/processes", list_processes, methods=["GET"]),
        Route(f"{session}/processes/{{process}}/kill", kill_process, methods=["POST"]),
        *_compat.compat_routes(compat),
    ]
    if ui is not None:
        ui.page = page
    return Router(routes=routes, redirect_slashes=False, default=ui)
