"""The ``penguin`` command.

A thin shell over the library: it parses arguments, opens what the library offers and
prints what it streams. Each subcommand lives in its own module and registers itself
with :func:`build_parser`; exit codes are the subcommand's (0 success, 1 bad usage or
a call that did not complete, 2 for argparse's own usage errors).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from penguin import __version__

from . import _config, _demo, _run, _server, _tool

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``penguin`` command."""
    parser = argparse.ArgumentParser(
        prog="penguin",
        description=(
            "penguin: a Trio-based core for LLM agent harnesses. Try `penguin demo` (no "
            "model needed), run a task with `penguin run -m TEXT`, or make one tool call "
            "with `penguin tool`."
        ),
    )
    parser.add_argument("--version", action="version", version=f"penguin {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _run.register(commands)
    _demo.register(commands)
    _tool.register(commands)
    _config.register(commands)
    _server.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 1
    code: int = args.handler(args)
    return code
