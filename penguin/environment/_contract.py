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

Builtin tools implement the same contract. What some of them need beyond it comes
from elsewhere: the services the user supplies (``_services.ToolServices``) and the
Environment's own supervisors (``tools._base.Supervisors``), both handed to their
factories. This module names neither, so every layer may import it.

The subagent protocols (:class:`SubagentRunner`, :class:`SubagentChild`,
:class:`SubagentRound`) are how run_subagent reaches a child session without
importing the engine (reference D1): the composition layer implements them
(``penguin.agent``), the subagent supervisor drives them. :class:`VisionService`
is how describe_image reaches the project's vision model the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Protocol, final, runtime_checkable

import attrs
import trio

from penguin.config import ToolDefinitionConfig
from penguin.protocol import (
    ApproveFn,
    CompleteModelPayload,
    OmniMessage,
    Payload,
    SessionMetaPayload,
    StopReason,
)

__all__ = [
    "SubagentChild",
    "SubagentRequest",
    "SubagentRound",
    "SubagentRoundResult",
    "SubagentRunner",
    "Tool",
    "ToolContext",
    "ToolResult",
    "VisionOutcome",
    "VisionResponse",
    "VisionService",
]


def _image_tuple(images: Iterable[str]) -> tuple[str, ...]:
    return tuple(images)


@final
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


@final
@attrs.frozen(kw_only=True)
class SubagentRequest:
    """What run_subagent asks of a runner: only the fields the model gave (reference 3.8.2).

    ``None`` means "inherit": the current agent, the parent session's model, the
    parent session's effective thinking level. ``model_id`` and ``provider`` are
    both set or both ``None``.
    """

    agent_id: str | None = None
    model_id: str | None = None
    provider: str | None = None
    thinking_level: str | None = None


@runtime_checkable
class SubagentRoundResult(Protocol):
    """How one round of a child session ended (the engine's ``RunResult`` fits)."""

    @property
    def status(self) -> str:
        """``completed``, ``aborted``, ``failed``, ``timeout``, ``auth``, ``max_turns``..."""
        ...

    @property
    def error_message(self) -> str | None:
        """Why the round failed, when the model side said so."""
        ...


@runtime_checkable
class SubagentRound(Protocol):
    """The messages of one round of a child session (the engine's ``RunStream`` fits).

    Messages are the child's own view: its own messages carry no ``origin``. The
    supervisor tags them on the way up. :attr:`result` is read once iteration ended.
    """

    def __aiter__(self) -> AsyncIterator[OmniMessage[Payload]]:
        """Iterate the round's messages, in order."""
        ...

    @property
    def result(self) -> SubagentRoundResult:
        """How the round ended; only after the iteration ended."""
        ...


@runtime_checkable
class SubagentChild(Protocol):
    """One open child session, as the subagent supervisor drives it."""

    @property
    def session_id(self) -> str:
        """The child's session id (``session-YYYY-MM-DD-HH-mm-ss-<8hex>``): its origin hop."""
        ...

    @property
    def session_meta(self) -> OmniMessage[SessionMetaPayload]:
        """The child's ``session_meta`` (``source: "subagent"``), without an origin."""
        ...

    def run(
        self, prompt: str, *, approve: ApproveFn, interrupt: trio.Event
    ) -> AbstractAsyncContextManager[SubagentRound]:
        """Run one round (a Task) on the child: ``prompt`` as its user message.

        ``approve`` answers the child's tool calls (the child may wrap it with its
        own policy); ``interrupt`` ends the round gracefully.
        """
        ...


@runtime_checkable
class SubagentRunner(Protocol):
    """Opens child sessions for run_subagent; injected by the composition layer.

    The Environment never builds a session itself: an agent loop, a model and a
    trace are layers above it. The child stays open for as long as the returned
    context manager's block, which the subagent supervisor holds inside the
    Environment's nursery.
    """

    def open_child(self, request: SubagentRequest) -> AbstractAsyncContextManager[SubagentChild]:
        """Open a child session for ``request``.

        Entering the context raises (best a
        :class:`~penguin.environment.SubagentSpawnError`) when no child can be
        opened; run_subagent shows the message to the model.
        """
        ...


class VisionOutcome(Protocol):
    """How a vision request ended (``penguin.llm.LLMOutcome`` fits)."""

    @property
    def status(self) -> StopReason:
        """``completed``, or why not (``failed``, ``timeout``, ``auth``...)."""
        ...

    @property
    def error_message(self) -> str | None:
        """The model side's message when it did not complete."""
        ...


class VisionResponse(Protocol):
    """A streaming answer of the vision model (``penguin.llm.LLMResponse`` fits)."""

    def __aiter__(self) -> AsyncIterator[OmniMessage[Payload]]:
        """Fragments and complete messages, in stream order; never raises for errors."""
        ...

    @property
    def outcome(self) -> VisionOutcome:
        """How the response ended; read it once the iteration has ended."""
        ...


@runtime_checkable
class VisionService(Protocol):
    """The vision model describe_image asks (reference 3.12, 6.4); injected, never built here.

    The composition layer wraps the project's ``vision_model`` (a
    :class:`penguin.llm.LLM`) in one, so this package needs no model client.
    ``model_id`` is ``None`` when the project has no usable vision model: describe_image
    then answers that none is configured and never calls :meth:`stream`.
    """

    @property
    def model_id(self) -> str | None:
        """The vision model's id, shown in describe_image's output; ``None``: there is none."""
        ...

    def stream(
        self, messages: Sequence[OmniMessage[CompleteModelPayload]]
    ) -> AbstractAsyncContextManager[VisionResponse]:
        """Send one one-off request made of ``messages`` (no system prompt, no tools).

        Leaving the block stops the request, whether or not it finished.
        """
        ...


@final
class ToolContext:
    """What a running tool is given: where it runs, who it is, how to report.

    ``emit`` and ``forward`` are awaited: they may wait for the consumer of the
    stream (back-pressure) and they are checkpoints, so an interrupt or a timeout
    can arrive there.
    """

    __slots__ = (
        "_emit",
        "_forward",
        "_untimed",
        "approve",
        "definition",
        "tool_call_id",
        "workspace_dir",
    )

    def __init__(
        self,
        *,
        workspace_dir: Path,
        tool_call_id: str,
        definition: ToolDefinitionConfig,
        approve: ApproveFn | None,
        emit: Callable[[str], Awaitable[None]],
        forward: Callable[[OmniMessage[Payload]], Awaitable[None]],
        untimed: Callable[[], AbstractAsyncContextManager[None]] | None = None,
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
        self._untimed = untimed

    def untimed(self) -> AbstractAsyncContextManager[None]:
        """A block whose time does not count against this call's timeout.

        For waiting on the Environment's own one-time set-up (exec_command waits for
        the login environment here), never for the tool's work. An interrupt still
        ends the block; a timeout that already fired still ends it too. Without an
        Environment (a context built by hand) it is a plain block.
        """
        if self._untimed is None:
            return contextlib.nullcontext()
        return self._untimed()

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
