"""Child sessions the subagent tests drive by hand: a SubagentRunner without an engine.

A :class:`FakeRunner` opens :class:`FakeChild` sessions; each round of a child runs a
*behaviour*, a coroutine function of a :class:`RoundContext` that sends the child's
messages (its own, without origin, the way a child session streams them) and may ask
for approvals, wait for the interrupt or raise. The behaviour decides how the round
ends (a :class:`FakeResult`, ``None`` for completed). This lets the supervisor and
tool tests reproduce every path — a child that writes, blocks, asks, aborts, fails —
exactly, and under ``MockClock`` (no process, no thread, no file is involved).

:func:`call_tool` runs one tool call through a real Environment and keeps all of its
messages: the origin-tagged ones and the call's own.
"""

from __future__ import annotations

import inspect
import itertools
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

import penguin
from penguin import protocol as om
from penguin.environment import SubagentRequest, SubagentSpawnError, ToolServices

Message = om.OmniMessage[om.Payload]


@attrs.frozen
class FakeResult:
    """How a fake round ended (the shape of the engine's ``RunResult``)."""

    status: str = "completed"
    error_message: str | None = None


@attrs.define(eq=False)
class RoundContext:
    """What a behaviour gets: the prompt, the child's approver, the interrupt, a sender."""

    child: FakeChild
    prompt: str
    round: int
    approve: om.ApproveFn
    interrupt: trio.Event
    _send: trio.MemorySendChannel[Message]

    async def send(self, message: Message) -> None:
        await self._send.send(message)

    async def say(self, *chunks: str) -> None:
        """Assistant text, one delta per chunk, then the complete message."""
        await self.send(om.partial_text("start"))
        for chunk in chunks:
            await self.send(om.partial_text("delta", chunk))
        await self.send(om.partial_text("stop"))
        await self.send(om.assistant_text("".join(chunks)))

    async def ask(self, name: str, args: dict[str, Any], call_id: str = "c1") -> str:
        """Stream a tool call, then ask the approver about it (as the child's engine does)."""
        call = om.tool_call(name, args, call_id)
        await self.send(call)
        answer = self.approve(call)
        verdict = await answer if inspect.isawaitable(answer) else answer
        await self.send(om.approval_decision(verdict, call_id))
        return verdict

    async def block(self) -> FakeResult:
        """Wait for the interrupt, then end the way an interrupted run does (``abort``)."""
        await self.interrupt.wait()
        await self.send(om.abort())
        return FakeResult("aborted")


Behaviour = Callable[[RoundContext], Awaitable[FakeResult | None]]


async def says(ctx: RoundContext) -> FakeResult | None:
    """The default behaviour: answer ``done: <prompt>``."""
    await ctx.say("done: ", ctx.prompt)
    return None


class FakeRound:
    """The stream of one fake round (the shape of the engine's ``RunStream``)."""

    def __init__(self, receive: trio.MemoryReceiveChannel[Message]) -> None:
        self._receive = receive
        self._result: FakeResult | None = None
        self._error: Exception | None = None

    def __aiter__(self) -> AsyncIterator[Message]:
        return self._receive.__aiter__()

    @property
    def result(self) -> FakeResult:
        """How the round ended; the behaviour's exception, if it raised one."""
        if self._error is not None:
            raise self._error
        assert self._result is not None, "the round has not finished"
        return self._result


@attrs.define(eq=False)
class FakeChild:
    """One open fake child session."""

    session_id: str
    behaviour: Behaviour
    request: SubagentRequest
    rounds: list[str] = attrs.Factory(list)
    approvers: list[om.ApproveFn] = attrs.Factory(list)
    closing: trio.Event = attrs.Factory(trio.Event)
    """Set when the child session is closed."""

    @property
    def closed(self) -> bool:
        return self.closing.is_set()

    @property
    def session_meta(self) -> om.OmniMessage[om.SessionMetaPayload]:
        return om.session_meta(
            session_id=self.session_id,
            provider="fake",
            model_id="fake",
            model_context_window="unknown",
            system_prompt="",
            agent_state="",
            workspace="",
            source="subagent",
        )

    @asynccontextmanager
    async def run(
        self, prompt: str, *, approve: om.ApproveFn, interrupt: trio.Event
    ) -> AsyncIterator[FakeRound]:
        self.rounds.append(prompt)
        self.approvers.append(approve)
        send, receive = trio.open_memory_channel[Message](math.inf)
        stream = FakeRound(receive)
        ctx = RoundContext(self, prompt, len(self.rounds), approve, interrupt, send)

        async def drive() -> None:
            with send:
                try:
                    stream._result = await self.behaviour(ctx) or FakeResult()
                except Exception as exc:  # raised where a real run raises: at the end
                    stream._error = exc

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drive)
            with receive:
                yield stream
            nursery.cancel_scope.cancel()


class FakeRunner:
    """A SubagentRunner of fake children; every spawn is recorded.

    ``behaviour`` runs each round; ``fail`` makes every spawn raise that message;
    ``ids`` gives the session ids of the children in turn (default: distinct ones);
    ``close_error`` makes closing a child raise that message.
    """

    def __init__(
        self,
        behaviour: Behaviour = says,
        *,
        fail: str | None = None,
        ids: Sequence[str] = (),
        close_error: str | None = None,
    ) -> None:
        self.behaviour = behaviour
        self.fail = fail
        self.close_error = close_error
        self.requests: list[SubagentRequest] = []
        self.children: list[FakeChild] = []
        self._ids = iter(ids)
        self._count = itertools.count(1)

    @property
    def open_children(self) -> list[FakeChild]:
        return [child for child in self.children if not child.closed]

    @asynccontextmanager
    async def open_child(self, request: SubagentRequest) -> AsyncIterator[FakeChild]:
        self.requests.append(request)
        await trio.lowlevel.checkpoint()
        if self.fail is not None:
            raise SubagentSpawnError(self.fail)
        session_id = next(self._ids, None) or f"session-2026-01-02-03-04-05-{next(self._count):08x}"
        child = FakeChild(session_id, self.behaviour, request)
        self.children.append(child)
        try:
            yield child
        finally:
            child.closing.set()
        if self.close_error is not None:
            raise RuntimeError(self.close_error)

    async def wait_all_closed(self) -> None:
        """Wait until every child opened so far is closed."""
        for child in self.children:
            await child.closing.wait()


def environment_config(
    workspace: Any, runner: FakeRunner | None, **changes: Any
) -> penguin.EnvironmentConfig:
    """An EnvironmentConfig with the default toolset and ``runner`` injected."""
    return penguin.EnvironmentConfig(
        workspace_dir=workspace, services=ToolServices(subagent_runner=runner), **changes
    )


@attrs.frozen
class Called:
    """Every message of one call, and its complete output."""

    messages: tuple[Message, ...]

    @property
    def output(self) -> om.ToolCallOutputPayload:
        finals = [m for m in self.messages if not m.origin and om.is_tool_call_output(m)]
        assert len(finals) == 1
        return finals[0].payload

    @property
    def text(self) -> str:
        return self.output.output

    @property
    def stop(self) -> str | None:
        return self.output.stop_reason

    @property
    def deltas(self) -> list[str]:
        """The call's own delta outputs, in order."""
        return [
            m.payload.output
            for m in self.messages
            if not m.origin
            and isinstance(m.payload, om.PartialToolCallOutputPayload)
            and m.payload.event_type == "delta"
        ]

    @property
    def nested(self) -> list[Message]:
        """The origin-tagged messages that passed through, in order."""
        return [m for m in self.messages if m.origin]


async def call_tool(
    env: penguin.Environment,
    name: str,
    args: dict[str, Any],
    *,
    approve: om.ApproveFn | None = None,
    interrupt: trio.Event | None = None,
    call_id: str = "call_1",
) -> Called:
    """Run one call through ``env`` and keep every message it streamed."""
    messages: list[Message] = []

    async def keep(message: Message) -> None:
        messages.append(message)

    await env.run_call(
        om.tool_call(name, args, call_id), keep, approve=approve, interrupt=interrupt
    )
    return Called(tuple(messages))


def subagent_id_in(text: str) -> str:
    """The ``subagent-…`` id a note names."""
    match = re.search(r"subagent-[0-9a-f]{8}", text)
    assert match is not None, f"no subagent_id in {text!r}"
    return match.group()
