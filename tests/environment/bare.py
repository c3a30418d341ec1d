"""Run one tool object outside any Environment, to see what it does with no services.

The unit tests of "unavailable" messages need a tool's ``execute`` called directly with
a :class:`~penguin.environment.ToolContext` whose ``forward`` must never be used; this
builds that context once for all of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from penguin import protocol as om
from penguin.environment import Tool, ToolContext, ToolResult


async def run_bare(
    tool: Tool, args: dict[str, Any], workspace: Path
) -> tuple[ToolResult | None, list[str]]:
    """Execute ``tool`` with ``args``; return its result and the deltas it emitted."""
    deltas: list[str] = []

    async def emit(text: str) -> None:
        deltas.append(text)

    async def forward(message: om.OmniMessage[om.Payload]) -> None:
        raise AssertionError(f"nothing is forwarded, got {message!r}")

    ctx = ToolContext(
        workspace_dir=workspace,
        tool_call_id="call_1",
        definition=tool.definition,
        approve=None,
        emit=emit,
        forward=forward,
    )
    return await tool.execute(args, ctx), deltas
