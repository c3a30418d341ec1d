"""The input_command tool (reference 3.3): write to a running command, or poll it.

Empty ``chars`` polls (default window 120 s); non-empty ``chars`` are written to the
command's stdin verbatim (default window 250 ms) and the new output is collected.
U+0003 (Ctrl-C) alone: SIGINT to the command's process group. An interrupt
of this call never kills the command.
"""

from __future__ import annotations

from typing import Any, Final, final

import trio

from .._contract import ToolContext, ToolResult
from ._args import clamp_yield_time_ms, fail
from ._command_tool import CommandTool
from .exec_command import exit_result

__all__ = ["CTRL_C", "POLL_YIELD_MS", "WRITE_YIELD_MS", "InputCommandTool"]

CTRL_C: Final = "\u0003"
POLL_YIELD_MS: Final = 120_000
WRITE_YIELD_MS: Final = 250


@final
class InputCommandTool(CommandTool):
    """input_command: send input to a background command and collect its output."""

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """Write (or signal), then collect for one window."""
        commands = await self._supervisor(ctx, "input_command")
        if isinstance(commands, ToolResult):
            return commands
        found = await self._registered(commands, args, ctx, "input_command")
        if isinstance(found, ToolResult):
            return found
        process_id, session = found
        chars = args.get("chars")
        chars = chars if isinstance(chars, str) else ""
        if CTRL_C in chars and chars != CTRL_C:
            return await fail(
                ctx,
                "[input_command error: chars mixes U+0003 (Ctrl-C) with other content; "
                'send "\\u0003" alone to interrupt]',
            )
        await trio.lowlevel.checkpoint_if_cancelled()  # an interrupted call writes nothing
        if chars == CTRL_C:
            commands.interrupt(session)
        elif chars:
            commands.write(session, chars)
        window = clamp_yield_time_ms(
            args.get("yield_time_ms"),
            WRITE_YIELD_MS if chars else POLL_YIELD_MS,
            ctx.definition.timeout_ms,
        )
        if not await commands.collect(session, window / 1000, ctx.emit):
            return ToolResult(note=f"[process still running with process_id {process_id}]")
        commands.discard(session)
        return exit_result(session)
