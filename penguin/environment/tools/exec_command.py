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
from ..supervisor import CommandSession, SpawnError, report_label
from ._args import clamp_yield_time_ms, fail, required_string
from ._command_tool import CommandTool

__all__ = ["DEFAULT_YIELD_MS", "ExecCommandTool", "exit_result"]

DEFAULT_YIELD_MS: Final = 60_000


def exit_result(session: CommandSession) -> ToolResult | None:
    """How an exited command's call ends (3.2.8): a note and ``failed``, or completed."""
    status = session.exit_status
    assert status is not None
    if status.spawn_error is not None:
        return ToolResult(stop_reason="failed", note=f"[spawn error: {status.spawn_error}]")
    if status.signal_name is not None:
        return ToolResult(stop_reason="failed", note=f"[terminated by signal {status.signal_name}]")
    if status.code != 0:
        code = "unknown" if status.code is None else status.code
        return ToolResult(stop_reason="failed", note=f"[exit code: {code}]")
    return None


@final
class ExecCommandTool(CommandTool):
    """exec_command: run ``cmd`` with bash in the workspace (or ``workdir``)."""

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """Run one command for one window; see the module docstring."""
        commands = await self._supervisor(ctx, self.name)
        if isinstance(commands, ToolResult):
            return commands
        cmd = required_string(args, "cmd")
        if cmd is None:
            return await fail(ctx, f'Missing required argument "cmd" for {self.name}.')
        workdir = args.get("workdir")
        cwd = (
            Path(os.path.join(ctx.workspace_dir, workdir))
            if workdir and isinstance(workdir, str)
            else ctx.workspace_dir
        )
        background = args.get("run_in_background") is True
        tty = args.get("tty") is True
        window = clamp_yield_time_ms(
            args.get("yield_time_ms"), DEFAULT_YIELD_MS, ctx.definition.timeout_ms
        )
        await trio.lowlevel.checkpoint_if_cancelled()  # an interrupted call starts nothing
        if background:
            try:
                session = commands.launch(cmd, cwd, label=report_label(cmd), tty=tty)
            except SpawnError as exc:  # the supervisor is closed
                return await fail(ctx, f"[spawn error: {exc}]")
            process_id = session.process_id
            return ToolResult(
                note=(
                    f"[command running in background with process_id {process_id}; "
                    "its completion will arrive as a user message — no need to poll. "
                    "Use input_command to interact or kill_command to stop it]"
                )
            )
        async with ctx.untimed():
            await commands.login_environment()
        try:
            session = await commands.spawn(cmd, cwd, tty=tty)
        except SpawnError as exc:
            return await fail(ctx, f"[spawn error: {exc}]")
        try:
            exited = await commands.collect(session, window / 1000, ctx.emit)
        except BaseException:
            commands.discard(session)  # interrupt or timeout: the whole group goes
            raise
        if not exited:
            process_id = commands.register(session)
            return ToolResult(
                note=(
                    f"[process running with process_id {process_id}; "
                    "use input_command to send input or poll for output]"
                )
            )
        commands.discard(session)  # an unregistered session that ended: reap its group
        return exit_result(session)
