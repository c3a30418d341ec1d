"""The routes: a starlette ``Router`` whose endpoints call :class:`ServerSessions` (S2.2, S3-S7).

Each endpoint is a plain function of a :class:`Site` (what it answers from) and the
request, bound by :func:`build_router`, as :mod:`._compat`'s are. It checks the ids
of its path (:func:`~._routes.validate_ids`), reads and checks its body
(:mod:`._requests`), calls the sessions object and returns a starlette response; it
holds no state and makes no decision of its own. Errors are raised (an
:class:`~._errors.ApiError`, or starlette's ``HTTPException`` for an unknown route
or method) and turned into the error body by the :class:`~._asgi.Guard` around the
router.

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
from typing import Final, final

import attrs
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


@final
@attrs.frozen
class Site:
    """What penguin's own endpoints answer from: the sessions, the token, the page's files."""

    sessions: ServerSessions
    token: str = attrs.field(repr=False)
    project_id: str
    static: dict[str, bytes]
    ui: _compat.UiFolder | None = None


async def page(site: Site, request: Request) -> Response:
    """``GET /``: the token in the URL sets the cookie; with the cookie, the page (S2.2)."""
    token = site.token
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
    if token_matches(request_token(request.scope), token) and site.ui is not None:
        return Response(await site.ui.index(), media_type=STATIC_TYPES[".html"])
    if token_matches(request_token(request.scope), token) and "index.html" in site.static:
        return Response(site.static["index.html"], media_type=STATIC_TYPES[".html"])
    return Response(_SIGN_IN, status_code=401, media_type=STATIC_TYPES[".html"])


async def asset(site: Site, request: Request) -> Response:
    """``GET /static/{asset}``: one of the page's files."""
    name = str(request.path_params["asset"])
    body = site.static.get(name)
    if body is None:
        raise ApiError(404, "not_found", f"There is no file {name!r}.")
    return Response(body, media_type=STATIC_TYPES[_suffix(name)])


async def health(site: Site, request: Request) -> Response:
    """``GET /api/health`` (S3.1)."""
    return _json({"status": "ok"})


async def server_info(site: Site, request: Request) -> Response:
    """``GET /api/server`` (S3.2)."""
    return _json(
        {
            "version": __version__,
            "projectId": site.project_id,
            "agentId": "default_agent",
            "approvalModes": list(APPROVAL_MODES),
        }
    )


async def create_session(site: Site, request: Request) -> Response:
    """``POST …/agents/{agent}/sessions`` (S4.2)."""
    ids = _ids(request)
    body = create_session_request(await request.body())
    info = await site.sessions.create(ids["project"], ids["agent"], body)
    return _json({"session": info}, 201)


async def get_session(site: Site, request: Request) -> Response:
    """``GET /api/sessions/{session}`` (S4.4)."""
    ids = _ids(request)
    return _json({"session": await site.sessions.get(ids["session"])})


async def update_session(site: Site, request: Request) -> Response:
    """``PATCH /api/sessions/{session}`` (S4.5)."""
    ids = _ids(request)
    body = update_session_request(await request.body())
    return _json({"session": await site.sessions.update(ids["session"], body)})


async def delete_session(site: Site, request: Request) -> Response:
    """``DELETE /api/sessions/{session}`` (S4.6)."""
    ids = _ids(request)
    await site.sessions.delete(ids["session"])
    return Response(status_code=204)


async def messages(site: Site, request: Request) -> Response:
    """``GET …/messages`` (S4.7)."""
    ids = _ids(request)
    return _json({"messages": await site.sessions.messages(ids["session"])})


async def start_task(site: Site, request: Request) -> Response:
    """``POST …/tasks`` (S5.1)."""
    ids = _ids(request)
    body = start_task_request(await request.body())
    queued = await site.sessions.start_task(
        ids["session"], body.texts, queue_if_busy=body.queue_if_busy
    )
    return _json({"sessionId": ids["session"], **({"queued": True} if queued else {})}, 202)


async def steer(site: Site, request: Request) -> Response:
    """``POST …/steer`` (S5.2)."""
    ids = _ids(request)
    body = steer_request(await request.body())
    await site.sessions.steer(ids["session"], body.text)
    return _json({"sessionId": ids["session"]}, 202)


async def abort(site: Site, request: Request) -> Response:
    """``POST …/abort`` (S5.3): 202 when a task was interrupted, else 204."""
    ids = _ids(request)
    if await site.sessions.abort(ids["session"]):
        return _json({"sessionId": ids["session"]}, 202)
    return Response(status_code=204)


async def list_approvals(site: Site, request: Request) -> Response:
    """``GET …/approvals`` (S6.4)."""
    ids = _ids(request)
    return _json({"approvals": await site.sessions.approvals(ids["session"])})


async def decide(site: Site, request: Request) -> Response:
    """``POST …/approvals/{call}`` (S6.3)."""
    ids = _ids(request)
    body = decision_request(await request.body())
    await site.sessions.decide(ids["session"], ids["call"], body)
    return Response(status_code=204)


async def stream(site: Site, request: Request) -> Response:
    """``GET …/stream`` (S7), from ``Last-Event-ID`` or ``?lastEventId=``."""
    ids = _ids(request)
    last = request.headers.get("last-event-id") or request.query_params.get("lastEventId")
    return EventStreamResponse(await site.sessions.subscribe(ids["session"], last))


async def list_processes(site: Site, request: Request) -> Response:
    """``GET …/processes`` (S5.5)."""
    ids = _ids(request)
    return _json({"processes": await site.sessions.processes(ids["session"])})


async def kill_process(site: Site, request: Request) -> Response:
    """``POST …/processes/{process}/kill`` (S5.5)."""
    ids = _ids(request)
    await site.sessions.kill_process(ids["session"], ids["process"])
    return Response(status_code=204)


def build_router(
    sessions: ServerSessions, *, token: str, project_id: str, ui: _compat.UiFolder | None = None
) -> Router:
    """The server's routes over ``sessions``; ``ui`` serves another front end (``--ui``)."""
    site = Site(sessions, token, project_id, _static_files(), ui)
    compat = _compat.Compat(sessions, token, project_id)

    def bind(endpoint: Callable[[Site, Request], Awaitable[Response]]) -> Endpoint:
        return partial(endpoint, site)

    session = "/api/sessions/{session}"
    agents = "/api/projects/{project}/agents"
    routes: list[BaseRoute] = [
        Route("/", bind(page), methods=["GET"]),
        *([Route("/static/{asset}", bind(asset), methods=["GET"])] if ui is None else []),
        Route("/api/health", bind(health), methods=["GET"]),
        Route("/api/server", bind(server_info), methods=["GET"]),
        Route(agents, partial(_compat.agents, compat), methods=["GET"]),
        Route("/api/projects/{project}/models", partial(_compat.models, compat), methods=["GET"]),
        Route(
            f"{agents}/{{agent}}/sessions",
            _by_method(GET=partial(_compat.list_sessions, sessions), POST=bind(create_session)),
            methods=["GET", "POST"],
        ),
        Route(
            session,
            _by_method(
                GET=bind(get_session), PATCH=bind(update_session), DELETE=bind(delete_session)
            ),
            methods=["GET", "PATCH", "DELETE"],
        ),
        Route(f"{session}/messages", bind(messages), methods=["GET"]),
        Route(f"{session}/tasks", bind(start_task), methods=["POST"]),
        Route(f"{session}/steer", bind(steer), methods=["POST"]),
        Route(f"{session}/abort", bind(abort), methods=["POST"]),
        Route(f"{session}/approvals", bind(list_approvals), methods=["GET"]),
        Route(f"{session}/approvals/{{call}}", bind(decide), methods=["POST"]),
        Route(f"{session}/stream", bind(stream), methods=["GET"]),
        Route(f"{session}/processes", bind(list_processes), methods=["GET"]),
        Route(f"{session}/processes/{{process}}/kill", bind(kill_process), methods=["POST"]),
        *_compat.compat_routes(compat),
    ]
    if ui is not None:
        ui.page = bind(page)
    return Router(routes=routes, redirect_slashes=False, default=ui)
