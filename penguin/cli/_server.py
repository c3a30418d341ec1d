"""``penguin server``: sessions, tasks and approvals over HTTP + SSE, and a page (spec/server.md).

A thin shell: it parses the options, sets up logging on stderr and hands over to
:func:`penguin.server.run_server` (imported only when the command runs, so the rest
of the command line does not pay for the HTTP stack).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import trio

from penguin import _log

__all__ = ["configure"]

_DESCRIPTION = """\
Serve penguin's sessions over HTTP and Server-Sent Events, with a page for the browser.
Once it listens it prints one line on stdout, the URL to open:

  penguin server: http://127.0.0.1:7364/?token=TOKEN

Every /api/ route needs that token (header 'Authorization: Bearer TOKEN', or the cookie
the URL sets). The token is $PENGUIN_SERVER_TOKEN when that is set, else new at every
start. Sessions, their approval modes and titles are indexed in ROOT/server.sqlite3;
their traces stay the source of truth, and sessions made by `penguin run` are listed
too. SIGINT or SIGTERM stops it cleanly: pending approvals are denied, running tasks
are interrupted (at most 10 s), and every process a session started is ended; a second
Ctrl-C stops at once.
"""

_EPILOG = """\
examples:
  penguin server
  penguin server --port 0                       (any free port)
  PENGUIN_SERVER_TOKEN=secret penguin server --root ~/agents
  penguin server --host 0.0.0.0 --allow-host devbox.lan
  penguin server --ui ../penguin-web/dist        (the PenguinHarness web app instead)

exit status: 0 after a clean stop, 1 when it cannot start (bad option, --ui folder
without index.html, port in use)
"""


def configure(parser: argparse.ArgumentParser) -> None:
    """Fill in the ``server`` subcommand's parser (``penguin server --help``)."""
    parser.description = _DESCRIPTION
    parser.epilog = _EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="H",
        help="address to listen on (default 127.0.0.1; anything else is reachable from "
        "other machines and gets a warning)",
    )
    parser.add_argument(
        "--port", type=int, default=7364, metavar="N", help="port (default 7364; 0 = any free one)"
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        metavar="DIR",
        help="data root (default: $PENGUIN_HOME or ~/.penguin/data)",
    )
    parser.add_argument(
        "--project-id",
        default="default_project",
        metavar="ID",
        help="the project the page opens on (default default_project)",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="with a wildcard --host (0.0.0.0 or ::), also accept requests whose Host header "
        "is NAME (repeatable); protects against DNS rebinding",
    )
    parser.add_argument(
        "--idle-close",
        type=float,
        default=1800.0,
        metavar="SECONDS",
        help="close a session's environment (its MCP servers and everything it started) "
        "after SECONDS with no task running and no background command alive; its next "
        "task reopens it from its trace (default 1800; 0 = never)",
    )
    parser.add_argument(
        "--ui",
        type=Path,
        default=None,
        metavar="DIR",
        help="serve the single-page front end built in DIR (its index.html and files) "
        "instead of penguin's page, e.g. the PenguinHarness web app",
    )
    parser.set_defaults(handler=_main)


def _main(args: argparse.Namespace) -> int:
    from penguin import config as cfg
    from penguin.server import ServerOptions, UiFolderError, check_ui_folder, run_server

    if not 0 <= args.port <= 65535:
        print(f"penguin server: --port must be 0..65535, not {args.port}", file=sys.stderr)
        return 1
    try:
        cfg.validate_id(args.project_id, "project id")
    except cfg.ConfigError as exc:
        print(f"penguin server: --project-id: {exc}", file=sys.stderr)
        return 1
    if not args.idle_close >= 0:  # also refuses nan
        print(
            f"penguin server: --idle-close must be 0 or more seconds, not {args.idle_close}",
            file=sys.stderr,
        )
        return 1
    if args.ui is not None:
        try:
            check_ui_folder(args.ui)
        except UiFolderError as exc:
            print(f"penguin server: {exc}", file=sys.stderr)
            return 1
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    server_log = _log.child("server")
    server_log.addHandler(handler)
    server_log.setLevel(logging.INFO)
    server_log.propagate = False
    options = ServerOptions(
        host=args.host,
        port=args.port,
        root=args.root,
        project_id=args.project_id,
        allow_hosts=tuple(args.allow_host),
        idle_close=args.idle_close or None,
        ui=args.ui,
    )
    return trio.run(run_server, options)
