"""The narrow tool contract: what a tool implements and what it is given.

A tool is any object with a ``name``, a ``definition`` and an async ``execute``.
It reports output through its :class:`ToolContext` (``emit`` for its own text,
``forward`` for messages of a nested session) and returns a :class:`ToolResult`
(or ``None`` for "completed, nothing to add"). Everything else — framing, the
output limit, the archive, timeouts, interrupts and the final message — is the
Environment's job, so tools stay small and cannot get the wire format wrong.

How a call ends, from the tool's side:

- return normally: the result's ``stop_reason`` (default ``completed``) and ``note``;
- raise an ``Exception``: the output gets ``[tool error] <message>``, stop ``failed``;
- be cancelled: the interrupt or the timeout fired; clean up in ``finally`` (shielded
  and bounded if it must await) and let ``trio.Cancelled`` propagate.

Builtin tools implement the same contract; :class:`ToolServices` carries the shared
machinery some of them need (the command supervisor, the subagent runner...).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from penguin.config import ToolDefinitionConfig
from penguin.protocol import ApproveFn, OmniMessage, Payload, StopReason

if TYPE_CHECKING:
    from .supervisor import CommandSupervisor

__all__ = ["Tool", "ToolContext", "ToolFactory", "ToolResult", "ToolServices"]


def _image_tuple(images: Iterable[str]) -> tuple[str, ...]:
    return tuple(images)


@attrs.frozen(kw_only=True)
class ToolResult:
    """How a tool says it ended.

    ``stop_reason`` is a self-report (``None`` means completed; tools only ever end
    ``completed``, ``failed`` or ``aborted``). ``note`` is appended after the output,
    outside the truncation window. ``images`` are data URLs, delivered only when the
    call ends ``completed``.
    """

    stop_reason: StopReason | None = None
    note: str | None = None
    images: tuple[str, ...] = attrs.field(default=(), converter=_image_tuple)


@runtime_checkable
class Tool(Protocol):
    """A tool the Environment can run."""

    @property
    def name(self) -> str:
        """The name the model calls it by."""
        ...

    @property
    def definition(self) -> ToolDefinitionConfig:
        """Its configured definition: schema, permission, limits."""
        ...

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """Run one call. ``args`` is the parsed JSON object (``{}`` for non-objects)."""
        ...


@attrs.frozen(kw_only=True)
class ToolServices:
    """Shared machinery handed to builtin tool factories.

    Each field is ``None`` when the Environment was opened without that service;
    a tool that needs a missing one answers with its "unavailable" message.
    """

    commands: CommandSupervisor | None = None
    subagents: Any | None = None
    subagent_runner: Any | None = None
    vision: Any | None = None


ToolFactory = Callable[[ToolDefinitionConfig, ToolServices], Tool]
"""Builds a builtin tool from its configured entry."""


class ToolContext:
    """What a running tool is given: where it runs, who it is, how to report.

    ``emit`` and ``forward`` are awaited: they may wait for the consumer of the
    stream (back-pressure) and they are checkpoints, so an interrupt or a timeout
    can arrive there.
    """

    __slots__ = ("_emit", "_forward", "approve", "definition", "tool_call_id", "workspace_dir")

    def __init__(
        self,
        *,
        workspace_dir: Path,
        tool_call_id: str,
        definition: ToolDefinitionConfig,
        approve: ApproveFn | None,
        emit: Callable[[str], Awaitable[None]],
        forward: Callable[[OmniMessage[Payload]], Awaitable[None]],
    ) -> None:
        self.workspace_dir = workspace_dir
        """The workspace; relative paths in arguments resolve against it."""
        self.tool_call_id = tool_call_id
        """The id of the call being run."""
        self.definition = definition
        """The tool's configured entry (limits, permission)."""
        self.approve = approve
        """The caller's approver, or ``None`` (used by tools that run nested sessions)."""
        self._emit = emit
        self._forward = forward

    async def emit(self, text: str) -> None:
        """Add ``text`` to this call's output (empty text is ignored)."""
        await self._emit(text)

    async def forward(self, message: OmniMessage[Payload]) -> None:
        """Pass a message through the stream.

        A message with an ``origin`` (a nested session's) goes through unchanged and
        takes no part in this call's output. A message without one is read the way the
        PenguinHarness Environment reads a tool's own stream: a non-empty
        ``partial_tool_call_output`` delta counts as output, a complete
        ``tool_call_output`` replaces the output, anything else is ignored with a
        line on stderr.
        """
        await self._forward(message)
