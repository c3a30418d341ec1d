"""What the PenguinHarness web app needs beyond spec/server.md: its routes, and ``--ui`` (issue 22).

The reference's own web app (``penguin server --ui DIR``) calls routes that penguin's
spec does not have. This module owns them, as plain endpoint functions that take a
:class:`Compat` (what they answer from) and the request; :func:`compat_routes` binds
them. Each is under ``/api/``, so the guard's token, Host and Origin checks (S2)
apply to every one of them, and ids in paths are checked as everywhere (S2.6).

What they answer, honestly and minimally — penguin has one token and no users:

- ``GET /api/me``: one local user, an admin; ``POST /api/auth/login`` takes the
  server's token as the password and sets the same cookie as ``/?token=``
  (:data:`LOGIN_PATH` is the one ``/api/`` route the guard lets through without a
  token: it checks the token itself); ``POST /api/auth/logout`` clears the cookie;
- ``GET``/``PUT /api/me/prefs``: the app's preferences, kept in memory until the
  server stops;
- ``GET /api/projects``: the server's project, then the other projects on disk;
  ``GET /api/projects/{p}/agents``: ``AgentSummary`` objects, ``default_agent``
  first even before it exists on disk;
- ``GET /api/projects/{p}/agents/{a}/sessions`` with the reference's paging:
  ``limit``, ``offset``, ``category`` (``active``, ``archived``; ``subagent`` and
  ``schedule`` are always empty here) and ``counts=1`` (``counts`` and
  ``workspaceCounts``);
- ``GET /api/events``: the server-wide stream (``session_state``,
  ``session_title``);
- ``DELETE /api/sessions/{id}/processes/{processId}``: as the kill route;
- ``…/agents/{a}/config``, ``…/usage``, ``…/chat-defaults``, ``/api/version``
  (and its update check): empty or fixed answers that say nothing is configured.

:class:`UiFolder` serves another single-page front end in place of penguin's page:
its ``index.html`` at ``/`` and for every unknown path outside ``/api/`` (answered by
the page route, so with the same token and cookie check as penguin's page, S2.2),
its other files as static files with their types. It is served with
:data:`UI_CONTENT_SECURITY_POLICY`.
"""

from __future__ import annotations

import mimetypes
import os
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, Final, final

import attrs
import trio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from penguin._version import __version__

from ._asgi import TOKEN_COOKIE, EventStreamResponse, Receive, Scope, Send, token_matches
from ._errors import ApiError, UiFolderError
from ._index import Page
from ._requests import decode_json
from ._routes import valid_id, validate_ids
from ._sessions import ServerSessions

__all__ = [
    "LOGIN_PATH",
    "UI_CONTENT_SECURITY_POLICY",
    "Compat",
    "UiFolder",
    "UiFolderError",
    "agent_summaries",
    "compat_routes",
    "list_sessions",
]

LOGIN_PATH: Final = "/api/auth/login"
UI_CONTENT_SECURITY_POLICY: Final = (
    "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "frame-ancestors 'none'"
)
"""The reference's app sets inline styles (blocked otherwise: checked in Chromium), and
shows tool results' images, which are ``data:`` URLs; scripts, connections, fonts and
frames stay same-origin only (docs/server.md)."""

_DEFAULT_AGENT: Final = "default_agent"
_CATEGORIES: Final = ("active", "subagent", "schedule", "archived")
_MAX_LIMIT: Final = 1000
_MAX_OFFSET: Final = 1_000_000
_MAX_PREFS: Final = 256
_LOCAL_USER: Final = {"userId": "local", "isAdmin": True}
_UPLOAD_LIMITS: Final = {
    "attachmentMaxMb": 1,
    "attachmentTotalMb": 1,
    "attachmentMaxCount": 1,
    "imageMaxMb": 1,
    "attachmentLimitMinMb": 1,
    "attachmentLimitMaxMb": 1,
}
"""Request bodies are capped at 1 MiB (S2.5); attachments are not taken anyway."""
_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".map": "application/json",
    ".svg": "image/svg+xml",
    ".wasm": "application/wasm",
    ".woff2": "font/woff2",
    ".woff": "font/woff",
    ".txt": "text/plain; charset=utf-8",
    ".webmanifest": "application/manifest+json",
}


@final
@attrs.define(eq=False)
class Compat:
    """What the compatibility endpoints answer from."""

    sessions: ServerSessions
    token: str = attrs.field(repr=False)
    project_id: str
    prefs: dict[str, Any] = attrs.field(factory=dict)
    """The app's preferences (``/api/me/prefs``), in memory only."""


def _json(value: object, status: int = 200) -> Response:
    return JSONResponse(value, status_code=status)


def _invalid(message: str) -> ApiError:
    return ApiError(400, "invalid_request", message)


# --------------------------------------------------------------------------- the user


async def me(ctx: Compat, request: Request) -> Response:
    """``GET /api/me``: the one local user (an admin) and the app's settings."""
    return _json(
        {
            "user": _LOCAL_USER,
            "previewIsolated": True,
            "desktopMode": False,
            "sessionVia": "token",
            "uploadLimits": _UPLOAD_LIMITS,
        }
    )


async def login(ctx: Compat, request: Request) -> Response:
    """``POST /api/auth/login`` ``{userId?, password}``: the password is the server's token."""
    body = decode_json(await request.body())
    if not isinstance(body, dict):
        raise _invalid("The request body must be a JSON object with 'password'.")
    for name in body:
        if name not in ("userId", "password"):
            raise _invalid(f"Unknown field {name!r}; this request takes userId and password.")
    password = body.get("password")
    if not isinstance(password, str) or not token_matches(password, ctx.token):
        raise ApiError(
            401,
            "unauthorized",
            "The password is the server's token: the part after '?token=' in the URL it printed.",
        )
    response = _json({"user": _LOCAL_USER})
    response.set_cookie(
        TOKEN_COOKIE, ctx.token, path="/", httponly=True, samesite="strict", secure=False
    )
    return response


async def logout(ctx: Compat, request: Request) -> Response:
    """``POST /api/auth/logout``: the cookie is cleared (the token stays valid)."""
    response = _json({})
    response.delete_cookie(TOKEN_COOKIE, path="/", httponly=True, samesite="strict")
    return response


async def prefs(ctx: Compat, request: Request) -> Response:
    """``GET /api/me/prefs``; ``PUT`` merges an object into them (kept in memory)."""
    if request.method == "PUT":
        body = decode_json(await request.body())
        if not isinstance(body, dict):
            raise _invalid("The preferences must be a JSON object.")
        merged = {**ctx.prefs, **body}
        if len(merged) > _MAX_PREFS:
            raise _invalid(f"The preferences hold at most {_MAX_PREFS} keys.")
        ctx.prefs = merged
    return _json({"prefs": ctx.prefs})


# --------------------------------------------------------------------------- projects, agents


def agent_summaries(names: list[str]) -> list[dict[str, str]]:
    """The reference's ``AgentSummary`` objects; ``default_agent`` first, always there."""
    ordered = [_DEFAULT_AGENT, *(name for name in names if name != _DEFAULT_AGENT)]
    return [{"agentId": name} for name in ordered]


async def projects(ctx: Compat, request: Request) -> Response:
    """``GET /api/projects``: the server's project first, then those found on disk."""
    root = ctx.sessions.root

    def scan() -> list[str]:
        try:
            entries = [entry for entry in os.scandir(root) if entry.is_dir()]
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(
            entry.name
            for entry in entries
            if valid_id(entry.name) and os.path.isdir(Path(entry.path) / "agents")
        )

    found = await trio.to_thread.run_sync(scan)
    ids = [ctx.project_id, *(name for name in found if name != ctx.project_id)]
    return _json({"projects": [{"projectId": p, "name": p, "role": "owner"} for p in ids]})


async def agents(ctx: Compat, request: Request) -> Response:
    """``GET /api/projects/{p}/agents``: ``{"agents": [AgentSummary…]}``."""
    ids = validate_ids(request.path_params)
    return _json({"agents": agent_summaries(await ctx.sessions.agents(ids["project"]))})


async def models(ctx: Compat, request: Request) -> Response:
    """``GET /api/projects/{p}/models``: the configured models, and ``defaultModel``."""
    ids = validate_ids(request.path_params)
    found = await ctx.sessions.models(ids["project"])
    default = next((m for m in found if m["isDefault"]), None)
    chosen = None if default is None else {k: default[k] for k in ("provider", "modelId")}
    return _json({"models": found, "defaultModel": chosen})


async def agent_config(ctx: Compat, request: Request) -> Response:
    """``GET …/agents/{a}/config``: nothing the app can edit here (``{"config": {}}``)."""
    validate_ids(request.path_params)
    return _json({"config": {}})


async def usage(ctx: Compat, request: Request) -> Response:
    """``GET /api/projects/{p}/usage``: penguin keeps no usage ledger (``{"groups": []}``)."""
    validate_ids(request.path_params)
    return _json({"groups": []})


async def chat_defaults(ctx: Compat, request: Request) -> Response:
    """``GET /api/projects/{p}/chat-defaults``: none are set (``{}``)."""
    validate_ids(request.path_params)
    return _json({})


async def version(ctx: Compat, request: Request) -> Response:
    """``GET /api/version``."""
    return _json({"version": __version__, "buildDate": None})


async def update_check(ctx: Compat, request: Request) -> Response:
    """``GET /api/version/update-check``: penguin does not update itself."""
    return _json(
        {"disabled": True, "updateAvailable": False, "latestVersion": None, "releaseUrl": None}
    )


# --------------------------------------------------------------------------- sessions


def _number(query: Mapping[str, str], name: str, *, low: int, high: int) -> int | None:
    text = query.get(name)
    if text is None:
        return None
    if not text.isascii() or not text.isdigit() or len(text) > 12 or not low <= int(text) <= high:
        raise _invalid(f"The parameter {name!r} must be a whole number from {low} to {high}.")
    return int(text)


def _flag(query: Mapping[str, str], name: str) -> bool:
    value = query.get(name, "0").strip().lower()
    if value not in ("0", "1", "true", "false", ""):
        raise _invalid(f"The parameter {name!r} must be 0 or 1.")
    return value in ("1", "true")


async def list_sessions(sessions: ServerSessions, request: Request) -> Response:
    """``GET …/agents/{a}/sessions`` (S4.3), with the reference's paging and counts.

    ``category`` (when given) chooses instead of ``archived``; ``offset`` and ``limit``
    cut the list; ``counts=1`` adds ``counts`` and ``workspaceCounts``. Without these
    parameters the answer is exactly S4.3's.
    """
    ids = validate_ids(request.path_params)
    query = request.query_params
    category = query.get("category")
    if category is not None and category not in _CATEGORIES:
        raise _invalid(f"The parameter 'category' must be one of {', '.join(_CATEGORIES)}.")
    archived = _flag(query, "archived") if category is None else category == "archived"
    offset = _number(query, "offset", low=0, high=_MAX_OFFSET) or 0
    limit = _number(query, "limit", low=1, high=_MAX_LIMIT)
    _flag(query, "cli")  # the reference's "CLI sessions too": penguin always lists them
    with_counts = _flag(query, "counts")

    none_here = category in ("subagent", "schedule")  # penguin has neither kind of session
    rows = (
        []
        if none_here
        else await sessions.session_rows(
            ids["project"], ids["agent"], archived=archived, page=Page(offset, limit)
        )
    )
    page = await sessions.describe(ids["project"], ids["agent"], rows)
    answer: dict[str, object] = {"sessions": page}
    if with_counts:  # counted from the index alone: no session's files are read
        counted = await sessions.workspace_counts(ids["project"], ids["agent"])
        answer["counts"] = _counts(counted)
        answer["workspaceCounts"] = _workspace_counts(counted)
    return _json(answer)


def _counts(counted: Mapping[tuple[bool, str | None], int]) -> dict[str, int]:
    def total(archived: bool) -> int:
        return sum(count for (stored, _), count in counted.items() if stored is archived)

    return {"active": total(False), "subagent": 0, "schedule": 0, "archived": total(True)}


def _workspace_counts(
    counted: Mapping[tuple[bool, str | None], int],
) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}  # by workspace name (S4.3 sets no order)
    for (archived, workspace), count in sorted(counted.items(), key=lambda i: str(i[0][1])):
        into = counts.setdefault(str(workspace), dict.fromkeys(_CATEGORIES, 0))
        into["archived" if archived else "active"] += count
    return counts


async def delete_process(ctx: Compat, request: Request) -> Response:
    """``DELETE /api/sessions/{id}/processes/{processId}``: ends it and drops it (204)."""
    ids = validate_ids(request.path_params)
    await ctx.sessions.kill_process(ids["session"], ids["process"])
    return Response(status_code=204)


async def events(ctx: Compat, request: Request) -> Response:
    """``GET /api/events``: ``session_state`` and ``session_title`` of every session."""
    last = request.headers.get("last-event-id") or request.query_params.get("lastEventId")
    return EventStreamResponse(ctx.sessions.events.subscribe(last))


def compat_routes(ctx: Compat) -> list[BaseRoute]:
    """The compatibility routes, bound to ``ctx``."""
    project = "/api/projects/{project}"
    return [
        Route("/api/me", partial(me, ctx), methods=["GET"]),
        Route(LOGIN_PATH, partial(login, ctx), methods=["POST"]),
        Route("/api/auth/logout", partial(logout, ctx), methods=["POST"]),
        Route("/api/me/prefs", partial(prefs, ctx), methods=["GET", "PUT"]),
        Route("/api/projects", partial(projects, ctx), methods=["GET"]),
        Route(f"{project}/agents/{{agent}}/config", partial(agent_config, ctx), methods=["GET"]),
        Route(f"{project}/usage", partial(usage, ctx), methods=["GET"]),
        Route(f"{project}/chat-defaults", partial(chat_defaults, ctx), methods=["GET"]),
        Route("/api/version", partial(version, ctx), methods=["GET"]),
        Route("/api/version/update-check", partial(update_check, ctx), methods=["GET"]),
        Route("/api/events", partial(events, ctx), methods=["GET"]),
        Route(
            "/api/sessions/{session}/processes/{process}",
            partial(delete_process, ctx),
            methods=["DELETE"],
        ),
    ]


# --------------------------------------------------------------------------- --ui DIR


@final
class UiFolder:
    """A built single-page front end served in place of penguin's page (``--ui DIR``)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.root = check_ui_folder(folder)
        self.page: Callable[[Request], Awaitable[Response]] | None = None
        """What answers a path that is no file: the server's page route (S2.2's checks)."""

    async def index(self) -> bytes:
        """The front end's ``index.html``, as it is on disk now."""
        return await trio.Path(self.root / "index.html").read_bytes()

    def _file(self, path: str) -> Path | None:
        parts = [part for part in path.split("/") if part]
        if not parts or any(part.startswith(".") or "\\" in part for part in parts):
            return None
        candidate = self.root.joinpath(*parts)
        try:
            resolved = candidate.resolve(strict=True)
        except (OSError, RuntimeError, ValueError):  # ValueError: a NUL in the path
            return None
        if not resolved.is_relative_to(self.root) or not resolved.is_file():
            return None
        return resolved

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Every request no route took: a file of the folder, else ``index.html``."""
        path: str = scope.get("path", "")
        method = scope.get("method", "GET")
        if path.startswith("/api/") or path == "/api" or method not in ("GET", "HEAD"):
            raise ApiError(404, "not_found", f"There is no route {path!r}.")
        found = await trio.to_thread.run_sync(self._file, path)
        if found is not None:
            body = await trio.Path(found).read_bytes()
            response = Response(body, media_type=content_type(found.name))
        elif self.page is not None:
            response = await self.page(Request(scope, receive))
        else:
            raise ApiError(404, "not_found", f"There is no route {path!r}.")
        await response(scope, receive, send)


def content_type(name: str) -> str:
    """The ``Content-Type`` of a served file, by its suffix."""
    suffix = Path(name).suffix.lower()
    known = _TYPES.get(suffix)
    if known is not None:
        return known
    guessed, _ = mimetypes.guess_type(name)
    return guessed or "application/octet-stream"


def check_ui_folder(folder: str | os.PathLike[str]) -> Path:
    """The folder, resolved; :class:`UiFolderError` naming it when it cannot be served."""
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise UiFolderError(f"--ui {str(folder)!r}: there is no folder {str(path.absolute())!r}")
    if not (path / "index.html").is_file():
        raise UiFolderError(
            f"--ui {str(folder)!r}: the folder {str(path.resolve())!r} has no index.html"
        )
    return path.resolve()
