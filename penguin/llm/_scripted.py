"""ScriptedLLM: a deterministic LLM for tests, demos and benchmarks.

A script is a list of turns, one per request, played in order::

    from penguin.llm import ScriptedLLM, error, pause, text, thinking, tool_call, turn, usage

    llm = ScriptedLLM([
        turn(thinking("The user wants the file."), tool_call("read_file", {"file_path": "a.txt"})),
        turn(text("It says ", "hello."), usage(output=12, total=340)),
        turn(text("Let me"), pause(30), error("timeout", "stalled")),   # cut after 30 s
        "A plain text turn.",
    ])

A turn is a sequence of *steps*, each a piece of the stream:

- :func:`text` and :func:`thinking` stream their chunks as deltas. Adjacent steps
  of the same kind are one message, as on the wire: ``text("Hel"), pause(1),
  text("lo")`` streams one text message with a pause in the middle.
- :func:`tool_call` streams one call (arguments as a dict or a verbatim string,
  optionally in ``chunks`` pieces) and completes it at the end of its step, so a
  consumer can act on it while the turn goes on. Without an ``id`` it gets
  ``call_1``, ``call_2``... (counted per ScriptedLLM).
- :func:`pause` sleeps with ``trio.sleep``, so under ``MockClock`` it costs no time.
- :func:`usage` sets the outcome's token usage.
- :func:`error` ends the turn with that status and message; a message still open
  (the text before it) is cut with that stop reason, as a real stream's would be.
  Nothing may follow it.

A turn may also be a callable ``(request) -> turn`` (a :class:`Turn`, a list of
steps, or a string), called when its request arrives, so a demo can react to the
tool outputs it is sent. Plain strings are text turns and a lone step is a one-step
turn. When the script runs out, ``fallback`` answers every further request: by
default the text ``"Done."``; a callable fallback makes an LLM that reacts forever.

Every request is recorded in :attr:`ScriptedLLM.requests`. The stream keeps the
same discipline as the real client (``_assemble`` produces both).
"""

from __future__ import annotations

import collections
import json
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeAlias, final

import attrs
import trio

from penguin import protocol as om

from ._assemble import StreamAssembler
from ._interface import LLMOutcome, LLMRequest, LLMResponse, ModelRef
from ._response import Emit, open_response

__all__ = [
    "ErrorStep",
    "PauseStep",
    "ScriptedLLM",
    "ScriptedTurn",
    "Step",
    "TextStep",
    "ThinkingStep",
    "ToolCallStep",
    "Turn",
    "UsageStep",
    "error",
    "pause",
    "text",
    "thinking",
    "tool_call",
    "turn",
    "usage",
]


# --------------------------------------------------------------------------- steps


@final
@attrs.frozen
class TextStep:
    """Assistant text, streamed as one delta per chunk."""

    chunks: tuple[str, ...]


@final
@attrs.frozen
class ThinkingStep:
    """Reasoning, streamed as one delta per chunk; ``fidelity`` goes on the complete message."""

    chunks: tuple[str, ...]
    fidelity: om.Fidelity | None = None


@final
@attrs.frozen
class ToolCallStep:
    """One tool call; ``arguments`` is the JSON text, streamed in ``chunks`` pieces."""

    name: str
    arguments: str
    id: str | None = None
    chunks: int = 1


@final
@attrs.frozen
class PauseStep:
    """A ``trio.sleep(seconds)`` inside the stream."""

    seconds: float


@final
@attrs.frozen
class UsageStep:
    """The token usage the outcome reports."""

    counts: om.TokenCounts


@final
@attrs.frozen
class ErrorStep:
    """The turn ends abnormally with ``status`` and ``message``.

    ``unreachable``, ``retry_after`` and ``rate_limited`` are the outcome's
    (:class:`~penguin.llm.LLMOutcome`).
    """

    status: om.StopReason
    message: str
    unreachable: bool = False
    retry_after: float | None = None
    rate_limited: bool = False


Step: TypeAlias = TextStep | ThinkingStep | ToolCallStep | PauseStep | UsageStep | ErrorStep


@final
@attrs.frozen
class Turn:
    """The steps of one scripted response, in stream order."""

    steps: tuple[Step, ...]

    def __attrs_post_init__(self) -> None:
        for position, step in enumerate(self.steps):
            if isinstance(step, ErrorStep) and position != len(self.steps) - 1:
                raise ValueError("error() ends a turn: put it last")


TurnLike: TypeAlias = Turn | Step | str | Iterable[Step]
ScriptedTurn: TypeAlias = TurnLike | Callable[[LLMRequest], TurnLike]
"""One entry of a script: a turn, a step, a text, or ``(request) -> any of those``."""


def text(*chunks: str) -> TextStep:
    """Assistant text; each chunk is one delta (``text("Hel", "lo")`` streams ``Hello``)."""
    return TextStep(chunks)


def thinking(*chunks: str, fidelity: om.Fidelity | None = None) -> ThinkingStep:
    """Reasoning; each chunk is one delta. ``fidelity`` is carried on the complete message."""
    return ThinkingStep(chunks, fidelity)


def tool_call(
    name: str,
    arguments: Mapping[str, Any] | str = "{}",
    id: str | None = None,
    *,
    chunks: int = 1,
) -> ToolCallStep:
    """A tool call; a mapping becomes compact JSON, a string is kept verbatim.

    ``chunks`` splits the arguments into that many deltas (as even as possible).
    """
    if chunks < 1:
        raise ValueError("chunks must be at least 1")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    return ToolCallStep(name, arguments, id, chunks)


def pause(seconds: float) -> PauseStep:
    """Sleep ``seconds`` (Trio time: instant under ``MockClock(autojump_threshold=0)``)."""
    if seconds < 0:
        raise ValueError("a pause cannot be negative")
    return PauseStep(seconds)


def usage(
    counts: om.TokenCounts | None = None,
    *,
    cache_read: int = 0,
    cache_write: int = 0,
    output: int = 0,
    total: int = 0,
) -> UsageStep:
    """The outcome's token usage: a ``TokenCounts`` or its fields."""
    if counts is None:
        counts = om.TokenCounts(
            cache_read=cache_read, cache_write=cache_write, output=output, total=total
        )
    return UsageStep(counts)


def error(
    status: om.StopReason,
    message: str,
    *,
    unreachable: bool = False,
    retry_after: float | None = None,
    rate_limited: bool = False,
) -> ErrorStep:
    """End the turn with ``status`` (not ``completed``) and ``message``.

    ``unreachable`` plays a server that could not be reached, ``retry_after`` one that
    asked to be retried after that many seconds, ``rate_limited`` one that answered 429.
    """
    if status == "completed":
        raise ValueError("error() needs a failing status, not 'completed'")
    return ErrorStep(status, message, unreachable, retry_after, rate_limited)


def turn(*steps: Step) -> Turn:
    """One scripted response: the steps in stream order."""
    return Turn(steps)


def _as_turn(value: TurnLike) -> Turn:
    if isinstance(value, Turn):
        return value
    if isinstance(value, str):
        return Turn((TextStep((value,)),))
    if isinstance(
        value, TextStep | ThinkingStep | ToolCallStep | PauseStep | UsageStep | ErrorStep
    ):
        return Turn((value,))
    return Turn(tuple(value))


def _split(arguments: str, chunks: int) -> list[str]:
    size, extra = divmod(len(arguments), chunks)
    pieces: list[str] = []
    start = 0
    for index in range(chunks):
        end = start + size + (1 if index < extra else 0)
        pieces.append(arguments[start:end])
        start = end
    return pieces


# --------------------------------------------------------------------------- the LLM


@final
class ScriptedLLM:
    """An :class:`~penguin.llm.LLM` that plays a script; see the module doc.

    ``model`` and ``context_window`` are what the engine records and budgets with.
    """

    def __init__(
        self,
        turns: Iterable[ScriptedTurn] = (),
        *,
        fallback: ScriptedTurn = "Done.",
        model: ModelRef | None = None,
        context_window: int | None = None,
    ) -> None:
        self._turns: collections.deque[ScriptedTurn] = collections.deque(turns)
        self._fallback = fallback
        self._model = model if model is not None else ModelRef("scripted", "scripted")
        self._context_window = context_window
        self._call_count = 0
        self.requests: list[LLMRequest] = []
        """Every request received, in order."""

    @property
    def model(self) -> ModelRef:
        """The model reference (``scripted/scripted`` unless given)."""
        return self._model

    @property
    def context_window(self) -> int | None:
        """The context window given at construction, if any."""
        return self._context_window

    @property
    def remaining(self) -> int:
        """How many scripted turns have not been played yet (the fallback not counted)."""
        return len(self._turns)

    @asynccontextmanager
    async def stream(self, request: LLMRequest) -> AsyncIterator[LLMResponse]:
        """Record ``request`` and play the next turn (or the fallback) as the response."""
        self.requests.append(request)
        entry = self._turns.popleft() if self._turns else self._fallback
        script = _as_turn(entry(request) if callable(entry) else entry)

        async def produce(emit: Emit) -> LLMOutcome:
            return await self._play(script, emit)

        async with open_response(produce) as response:
            yield response

    def _next_call_id(self, given: str | None) -> str:
        if given is not None:
            return given
        self._call_count += 1
        return f"call_{self._call_count}"

    async def _play(self, script: Turn, emit: Emit) -> LLMOutcome:
        assembler = StreamAssembler(self._next_call_id)
        counts: om.TokenCounts | None = None

        async def flush() -> None:
            batch = assembler.take()
            if batch:
                await emit(batch)

        for step in script.steps:
            match step:
                case TextStep(chunks=chunks):
                    for chunk in chunks:
                        assembler.text(chunk)
                        await flush()
                case ThinkingStep(chunks=chunks, fidelity=fidelity):
                    for chunk in chunks:
                        assembler.thinking(chunk, fidelity)
                        await flush()
                case ToolCallStep():
                    # Each call step is closed at its end, so key 0 is always free.
                    key = 0
                    pieces = _split(step.arguments, step.chunks)
                    assembler.tool_call(
                        key, tool_call_id=step.id, name=step.name, arguments=pieces[0]
                    )
                    await flush()
                    for piece in pieces[1:]:
                        assembler.tool_call(key, arguments=piece)
                        await flush()
                    assembler.close()
                    await flush()
                case PauseStep(seconds=seconds):
                    await trio.sleep(seconds)
                case UsageStep(counts=given):
                    counts = given
                case ErrorStep(status=status, message=message):
                    assembler.close(status)
                    await flush()
                    return LLMOutcome(
                        status,
                        message,
                        counts,
                        unreachable=step.unreachable,
                        retry_after=step.retry_after,
                        rate_limited=step.rate_limited,
                    )
        assembler.close("completed")
        await flush()
        return LLMOutcome("completed", None, counts)
