"""What the engine asks of the side that runs the tools: the :class:`ToolRunner` protocol.

This module owns that contract and nothing else. The engine runs every approved call
through :meth:`ToolRunner.run_call` and, between turns, collects what background work
reported through :meth:`ToolRunner.take_background_reports`. ``penguin.Environment``
is the runner every session uses and satisfies the protocol as it is (structurally:
it does not name it); a test or an embedder may bring any other object with these two
methods. The model's tool list is not asked of the runner: the engine is given it —
except for a session with MCP servers, whose tools are known only once the servers are
connected: its engine is also given a :class:`ToolCatalog` (the Environment again) and
connects them at the start of the first run (spec/mcp.md M1.4).

What a runner promises, as the Environment keeps it (reference 1): ``run_call`` hands
every message of the call to ``emit`` in order, ending with exactly one complete
``tool_call_output`` without an origin (nested messages carry one), honours
``interrupt`` by closing the call out ``aborted``, and raises only for its own
failures (the engine turns those into ``[tool error]`` outputs, reference 1.12).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

import trio

from penguin import protocol as om

__all__ = ["BackgroundNotice", "ToolCatalog", "ToolRunner"]


class BackgroundNotice(Protocol):
    """A finished piece of background work; ``text()`` is what the model reads of it."""

    def text(self) -> str:
        """The harness message for the model (reference 3.13.3)."""
        ...


class ToolRunner(Protocol):
    """Runs the tool calls of a session, and tells of background work that finished."""

    async def run_call(
        self,
        call: om.OmniMessage[om.ToolCallPayload],
        emit: Callable[[om.OmniMessage[om.Payload]], Awaitable[None]],
        *,
        interrupt: trio.Event | None = None,
        approve: om.ApproveFn | None = None,
    ) -> None:
        """Run ``call`` in the caller's task, handing each of its messages to ``emit``.

        ``approve`` is for the calls that run nested sessions; ``emit`` applies
        back-pressure by taking its time, and if it raises, the call stops there.
        """
        ...

    def take_background_reports(self) -> Iterable[BackgroundNotice]:
        """Every report of finished background work waiting right now, without blocking."""
        ...


class ToolCatalog(Protocol):
    """Where the tools of MCP servers come from: connected once, then listed."""

    @property
    def mcp_servers(self) -> tuple[str, ...]:
        """The configured servers' names, in order; empty when there is nothing to connect."""
        ...

    async def connect_mcp(self) -> tuple[om.McpServerConnectResult, ...]:
        """Connect every server (once); cancelling it leaves the next call to start afresh."""
        ...

    async def list_tools(self) -> list[om.ToolDefinition]:
        """Every tool the model is offered, the servers' included."""
        ...
