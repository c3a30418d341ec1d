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
from ..supervisor import Exited
from ._args import clamp_yield_time_ms, fail
from ._command_tool import CommandTool

__all__ = ["CTRL_C", "POLL_YIELD_MS", "WRITE_YIELD_MS", "InputCommandTool"]

CTRL_C: Final = "\u0003"
POLL_YIELD_MS: Final = 120_000
WRITE_YIELD_MS: Final = 250


@final
class InputCommandTool(CommandTool):
    """input_command: send input to a background command and collect its output."""

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """Write (or signal), then collect for one window."""
        commands = self._supervisor("input_command")
        process_id, session = self._registered(commands, args, "input_command")
        chars = args.get("chars")
        chars = chars if isinstance(chars, str) else ""
        if CTRL_C in chars and chars != CTRL_C:
            fail(
                "[input_command error: chars mixes U+0003 (Ctrl-C) with other content; "
                'send "\\u0003" alone to interrupt]'
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
        ended = await commands.poll_window(session, window / 1000, ctx.emit)
        if isinstance(ended, Exited):
            note = ended.status.note()
            return None if note is None else ToolResult(stop_reason="failed", note=note)
        return ToolResult(note=f"[process still running with process_id {process_id}]")
