"""``penguin sandbox``: one command under a sandbox policy, or what this machine supports.

Also the sandbox options the other subcommands share (``--sandbox MODE``,
``--network/--no-network``) and how a surface turns them, the project file's
``[sandbox]`` and its default into the session's policy (spec/sandbox.md X1.3, X3.1):
a mode someone chose that cannot be enforced refuses (exit 1); a default that cannot
falls back to ``off`` with one warning on stderr.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["add_sandbox_options", "configure", "policy_for", "sandbox_line"]

_MODES = ("off", "read-only", "workspace-write")


def add_sandbox_options(parser: argparse.ArgumentParser, *, default: str) -> None:
    """``--sandbox MODE`` and ``--network/--no-network`` (``default``: the mode unsaid)."""
    group = parser.add_argument_group("sandbox (docs/sandbox.md)")
    group.add_argument(
        "--sandbox",
        choices=_MODES,
        default=None,
        metavar="MODE",
        help=f"off, read-only or workspace-write (default: {default}, or the project "
        "file's [sandbox])",
    )
    group.add_argument(
        "--network",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="let commands reach the network (default: on)",
    )


def policy_for(
    args: argparse.Namespace,
    project: Mapping[str, Any] | None,
    *,
    default: str,
    prog: str,
    task: Mapping[str, Any] | None = None,
) -> Any:
    """The session's policy: ``task`` over the flags over ``project`` over ``default``.

    Returns a :class:`penguin.SandboxPolicy`, or ``None`` after printing X3.1's
    refusal (the caller exits 1). ``project`` is the ``[sandbox]`` table (or ``None``).
    """
    from penguin.environment.sandbox import SandboxPolicy, policy_from_mapping, probe
    from penguin.environment.sandbox import refusal as refusal_text
    from penguin.environment.sandbox import warning as warning_text

    chosen = project is not None
    try:
        base = (
            policy_from_mapping(dict(project), where="[sandbox]")
            if project is not None
            else SandboxPolicy(mode=default)
        )
    except ValueError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return None
    mode, network = base.mode, base.network
    if args.sandbox is not None:
        mode, chosen = args.sandbox, True
    if args.network is not None:
        network, chosen = args.network, True
    if task:
        mode = task.get("mode", mode)
        network = task.get("network", network)
        chosen = True
    policy = SandboxPolicy(
        mode=mode,
        network=network,
        writable_roots=base.writable_roots,
        writable_tmp=base.writable_tmp,
        protected=base.protected,
    )
    if policy.enforced:
        support = probe()
        if support.reason is not None:
            if chosen:
                print(refusal_text(support.reason), file=sys.stderr)
                return None
            print(warning_text(support.reason), file=sys.stderr)
            return SandboxPolicy(mode="off")
    return policy


def sandbox_line(policy: Any) -> str:
    """``[sandbox: workspace-write, network on]``: what run prints before the task."""
    return f"[sandbox: {policy.describe()}]"


def configure(parser: argparse.ArgumentParser) -> None:
    """Fill in the ``sandbox`` subcommand's parser (``penguin sandbox --help``)."""
    parser.description = (
        "Run one command under a sandbox policy, with the workspace as its working "
        "folder, and exit with its status; or --check what this machine supports."
    )
    parser.epilog = (
        "examples:\n"
        "  penguin sandbox -- touch inside.txt\n"
        "  penguin sandbox --no-network -- curl -sI https://example.org\n"
        "  penguin sandbox --mode read-only --workspace ~/src/app -- make test\n"
        "  penguin sandbox --check\n"
        "\nexit status: the command's (128+N when killed by signal N); 1 when the sandbox "
        "is unavailable or the command cannot start; --check: 0 when both sandboxed modes work"
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "--mode",
        choices=_MODES,
        default="workspace-write",
        metavar="M",
        help="off, read-only or workspace-write (default: workspace-write)",
    )
    parser.add_argument(
        "--network",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="let the command reach the network (default: on)",
    )
    parser.add_argument(
        "--workspace",
        type=Path,
        default=None,
        metavar="DIR",
        help="the workspace and working folder (default: the current folder)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="print what this machine supports; exit 0 when both modes work",
    )
    parser.add_argument("command_line", nargs=argparse.REMAINDER, metavar="-- CMD ARGS...")
    parser.set_defaults(handler=_main)


def _main(args: argparse.Namespace) -> int:
    from penguin.config import data_root
    from penguin.environment.sandbox import CommandSandbox, SandboxPolicy, probe, refusal

    if args.check:
        support = probe()
        for line in support.lines():
            print(line)
        return 0 if support.reason is None else 1
    argv = list(args.command_line)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        print("penguin sandbox: give a command after -- (or --check)", file=sys.stderr)
        return 1
    workspace = (args.workspace or Path.cwd()).resolve()
    if not workspace.is_dir():
        print(f"penguin sandbox: workspace {str(workspace)!r} is not a directory", file=sys.stderr)
        return 1
    policy = SandboxPolicy(mode=args.mode, network=args.network)
    if policy.enforced:
        reason = probe().reason
        if reason is not None:
            print(refusal(reason), file=sys.stderr)
            return 1
    sandbox = CommandSandbox(policy, workspace=workspace, scratchpad=None, data_root=data_root())
    try:
        command = sandbox.wrap_blocking(argv, workspace)
        env = {**os.environ, **sandbox.environment()}
        try:
            status = subprocess.run(command, cwd=workspace, env=env, check=False).returncode
        except OSError as exc:
            print(f"penguin sandbox: {argv[0]}: {exc.strerror or exc}", file=sys.stderr)
            return 1
    except OSError as exc:
        print(f"penguin sandbox: {exc}", file=sys.stderr)
        return 1
    finally:
        sandbox.close()
    return 128 - status if status < 0 else status


def resumed_policy(
    args: argparse.Namespace, recorded: Any, project: Mapping[str, Any] | None, *, prog: str
) -> Any:
    """A resumed session's policy (chat.md C5.5): the trace's, unless a flag changes it.

    ``recorded`` is the trace's ``session_meta.sandbox`` (``None``: it records none,
    which is off). With ``--sandbox``/``--network`` the flags win and one line on
    stderr names the change. ``None`` after a printed refusal.
    """
    from penguin.environment.sandbox import SandboxPolicy, policy_from_mapping, recorded_policy

    try:
        base = None if project is None else policy_from_mapping(dict(project), where="[sandbox]")
    except ValueError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return None
    kept = recorded_policy(recorded if isinstance(recorded, dict) else None, base)
    if kept is None:
        kept = SandboxPolicy(mode="off")
    if args.sandbox is None and args.network is None:
        return kept
    table = {"mode": kept.mode, "network": kept.network_on}
    changed = policy_for(args, table, default=kept.mode, prog=prog)
    if changed is None:
        return None
    if changed.summary() != kept.summary():
        print(f"sandbox: {kept.describe()} -> {changed.describe()}", file=sys.stderr)
    return changed
