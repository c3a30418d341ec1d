"""The ``penguin`` command.

A thin shell over the library: it parses arguments, opens what the library offers and
prints what it streams. Each subcommand lives in its own module, which fills in the
subcommand's parser (``configure(parser)``) and sets its handler; exit codes are the
subcommand's (0 success, 1 bad usage or a call that did not complete, 2 for argparse's
own usage errors).

Start-up is part of the interface: ``penguin --version`` must not wait for Trio or the
Environment to load. So the top-level parser knows each subcommand only by name and
one-line help (:data:`COMMANDS`), and :func:`main` imports the one module of the
subcommand on the command line; ``penguin --help`` lists every subcommand without
importing any, and ``penguin X --help`` loads X and shows all of its options.
:func:`build_parser` with no argument completes every subcommand.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Collection, Sequence

from penguin._version import __version__

__all__ = ["COMMANDS", "build_parser", "main"]

# name -> (module under penguin.cli, the line `penguin --help` shows), in listing order.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("_run", "run one task with the configured model"),
    "chat": ("_chat", "talk with the agent in the terminal: many tasks in one session"),
    "demo": ("_demo", "run a scripted task end to end (no model, no network needed)"),
    "tool": ("_tool", "run one tool call through the Environment (no model needed)"),
    "batch": ("_batch", "run a file of tasks, many sessions at a time, one result each"),
    "config": ("_config", "configure models, the command policy and the vault"),
    "server": ("_server", "serve sessions over HTTP + SSE, with a page for the browser"),
    "sandbox": ("_sandbox", "run one command under a sandbox policy, or --check what works"),
}


def build_parser(complete: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser of the ``penguin`` command.

    ``complete`` names the subcommands whose modules are imported to fill in their
    options (``None``: all of them); the others are listed by name and help only, and
    cannot parse a command line.
    """
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
    for name, (module_name, summary) in COMMANDS.items():
        sub = commands.add_parser(name, help=summary)
        if complete is None or name in complete:
            module = importlib.import_module(f"{__name__}.{module_name}")
            module.configure(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    args_list = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(complete=_named_command(args_list))
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 1
    code: int = args.handler(args)
    return code


def _named_command(argv: Sequence[str]) -> set[str]:
    """The subcommand ``argv`` runs (a set of at most one name).

    The top-level options (``-h``, ``--version``) take no value, so the first argument
    that is not an option is the subcommand, as argparse reads it.
    """
    for arg in argv:
        if not arg.startswith("-"):
            return {arg} if arg in COMMANDS else set()
    return set()
