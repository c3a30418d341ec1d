"""``penguin server``: sessions, tasks and approvals over HTTP + SSE (spec/server.md).

One Trio process: hypercorn's Trio worker serves an ASGI app; the session index is
SQLite (``<root>/server.sqlite3``) reached through worker threads; the traces stay
the source of truth. Embedding it::

    from penguin.server import ServerOptions, open_server

    async with open_server(ServerOptions(port=0)) as server:
        print(server.login_url)          # http://127.0.0.1:PORT/?token=...
        ...                              # leaving the block is the clean shutdown

The pieces, each plain and tested without a socket: the request checks and the ids of
paths (``_requests``, ``_routes``), the approval registry (``_approvals``), the
per-session event channel with its replay buffer and bounded subscribers
(``_channel``), the approver that reads the mode from the index on every decision
(``_approver``), the index (``_index``). The shell: the security guard and the SSE
writer (``_asgi``), the starlette routes (``_app``), the sessions and their tasks
(``_sessions``), and serving (``_serve``).
"""

from __future__ import annotations

from ._approvals import ApprovalRegistry as ApprovalRegistry
from ._approvals import PendingApproval as PendingApproval
from ._channel import EventChannel as EventChannel
from ._channel import Subscriber as Subscriber
from ._compat import check_ui_folder as check_ui_folder
from ._errors import ApiError as ApiError
from ._errors import UiFolderError as UiFolderError
from ._serve import DEFAULT_HOST as DEFAULT_HOST
from ._serve import DEFAULT_PORT as DEFAULT_PORT
from ._serve import TOKEN_VARIABLE as TOKEN_VARIABLE
from ._serve import RunningServer as RunningServer
from ._serve import ServerOptions as ServerOptions
from ._serve import open_server as open_server
from ._serve import run_server as run_server
from ._sessions import ServerSessions as ServerSessions

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "TOKEN_VARIABLE",
    "ApiError",
    "ApprovalRegistry",
    "EventChannel",
    "PendingApproval",
    "RunningServer",
    "ServerOptions",
    "ServerSessions",
    "Subscriber",
    "UiFolderError",
    "check_ui_folder",
    "open_server",
    "run_server",
]
