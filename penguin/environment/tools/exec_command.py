"""The exec_command tool (reference 3.2): run a shell command, in the foreground first.

The command starts in the foreground and its output streams as it arrives. If it is
still running when its window (``yield_time_ms``) ends, it moves to the background:
it is registered under a ``process_id`` and the call returns; ``input_command`` and
``kill_command`` drive it later. With ``run_in_background: true`` it is registered at
once, before its process exists, and its completion arrives later as a harness message
(3.13) — a command that cannot be started included (``spawn error: …``).

The Environment's one-time login environment is waited for outside the call's
timeout (``ctx.untimed``); the window starts once the process runs.

Beyond the reference, ``tty: true`` runs the command on a pseudo-terminal that is its
controlling terminal, for programs that need one (a REPL, password prompts).

An interrupt or a timeout during the foreground window ends the whole process group.
Everything about processes is the supervisor's; this module only speaks the tool's
language.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final, final

import trio

from .._contract import ToolContext, ToolResult
from ..supervisor import Exited, SpawnError, report_label
from ._args import clamp_yield_time_ms, fail, required_string
from ._command_tool import CommandTool

__all__ = ["DEFAULT_YIELD_MS", "ExecCommandTool"]

DEFAULT_YIELD_MS: Final = 60_000


@final
class ExecCommandTool(CommandTool):
    """exec_command: run ``cmd`` with bash in the workspace (or ``workdir``)."""

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """Run one command for one window; see the module docstring."""
        commands = self._supervisor(self.name)
        cmd = required_string(args, "cmd")
        if cmd is None:
            fail(f'Missing required argument "cmd" for {self.name}.')
        workdir = args.get("workdir")
        cwd = (
            Path(os.path.join(ctx.workspace_dir, workdir))
            if workdir and isinstance(workdir, str)
            else ctx.workspace_dir
        )
        tty = args.get("tty") is True
        window = clamp_yield_time_ms(
            args.get("yield_time_ms"), DEFAULT_YIELD_MS, ctx.definition.timeout_ms
        )
        await trio.lowlevel.checkpoint_if_cancelled()  # an interrupted call starts nothing
        try:
            if args.get("run_in_background") is True:
                session = commands.launch(cmd, cwd, label=report_label(cmd), tty=tty)
                return ToolResult(
                    note=(
                        f"[command running in background with process_id {session.process_id}; "
                        "its completion will arrive as a user message — no need to poll. "
                        "Use input_command to interact or kill_command to stop it]"
                    )
                )
            ended = await commands.run_window(
                cmd, cwd, window=window / 1000, emit=ctx.emit, tty=tty, untimed=ctx.untimed
            )
        except SpawnError as exc:  # it cannot start, or the supervisor is closed
            fail(f"[spawn error: {exc}]")
        if isinstance(ended, Exited):
            note = ended.status.note()
            return None if note is None else ToolResult(stop_reason="failed", note=note)
        return ToolResult(
            note=(
                f"[process running with process_id {ended.process_id}; "
                "use input_command to send input or poll for output]"
            )
        )
