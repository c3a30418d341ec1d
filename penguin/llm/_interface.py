"""The LLM interface: what the agent loop asks of a model, and what it gets back.

This module owns the *contract* between the engine and any model client, and
nothing that talks to a network. A client takes one :class:`LLMRequest` (the whole
input: system prompt, complete messages, tools) and streams one response::

    async with llm.stream(request) as response:
        async for message in response:   # partial_* fragments and complete messages
            ...
        response.outcome                 # LLMOutcome(status, error_message, usage)

The promises every implementation keeps (``penguin.llm`` has two: the OpenAI Chat
Completions client and the scripted one):

- **Fragment discipline.** Every streamed fragment is ``start → delta… → stop`` and
  its complete message (``thinking``, ``text`` or ``tool_call``) follows its ``stop``
  immediately. The deltas concatenate to the complete message's content. A message
  cut by an error carries the outcome's stop reason on its ``stop`` and on itself.
- **Errors are states.** Nothing a server or the network does raises out of the
  iteration: the stream ends and :attr:`LLMResponse.outcome` says why, as a stop
  reason (``completed``, ``failed``, ``timeout``, ``malformed``, ``auth``) with a
  message. ``aborted`` is the engine's word for a user interrupt; a client never
  produces it.
- **Cancellation is a hard stop.** Cancelling the caller's scope (or leaving the
  ``async with`` early) stops the request and propagates; nothing more is emitted
  and the outcome stays unknown.

What this module does not do: retries, the backoff ladder and the ``request_begin``
/ ``request_end`` / ``token_usage`` events belong to the engine.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Final, Protocol, final

import attrs

from penguin import protocol as om

__all__ = [
    "LLM",
    "THINKING_LEVELS",
    "ClosableLLM",
    "LLMOutcome",
    "LLMRequest",
    "LLMResponse",
    "ModelRef",
]

THINKING_LEVELS: Final = ("low", "medium", "high", "xhigh", "max")
"""The thinking levels a request may ask for, weakest first (``None`` asks for none)."""


@final
@attrs.frozen
class ModelRef:
    """Which model answers: the configured provider name and the provider's model id."""

    provider: str
    model_id: str


@final
@attrs.frozen
class LLMRequest:
    """One model request: the whole input, as complete messages.

    ``messages`` is the history plus the new input, in order: user text and images,
    the assistant's earlier thinking, text and tool calls, and the tool outputs.
    Fragments (``partial_*``) and events never belong here. ``thinking_level`` is
    one of :data:`THINKING_LEVELS` or ``None``; a client maps it to what its
    provider understands and ignores a level it has no mapping for.
    """

    system_prompt: str
    messages: tuple[om.OmniMessage[om.CompleteModelPayload], ...]
    tools: tuple[om.ToolDefinition, ...] = ()
    thinking_level: str | None = None


@final
@attrs.frozen
class LLMOutcome:
    """How a response ended.

    ``usage`` is this request's token usage when the server reported it (also after
    an error, if it came before). ``error_message`` is ``None`` when ``completed``.
    ``unreachable`` says the server could not be reached at all (connection refused,
    an unknown host): waiting long will not help. ``retry_after`` is the wait in
    seconds the server asked for (HTTP ``Retry-After``), when it said one.
    ``rate_limited`` says the server refused the request for its rate limit (HTTP 429):
    a limit of the account or the server, not of the request.
    """

    status: om.StopReason
    error_message: str | None = None
    usage: om.TokenCounts | None = None
    unreachable: bool = False
    retry_after: float | None = None
    rate_limited: bool = False


class LLMResponse(Protocol):
    """A streaming response: iterate it once, then read its outcome."""

    def __aiter__(self) -> AsyncIterator[om.OmniMessage[om.Payload]]:
        """Fragments and complete messages in stream order; never raises for server errors."""
        ...

    @property
    def outcome(self) -> LLMOutcome:
        """How the response ended; ``RuntimeError`` until the iteration has ended."""
        ...


class LLM(Protocol):
    """A model the engine can stream from."""

    @property
    def model(self) -> ModelRef:
        """The provider and model id, as recorded in ``session_meta``."""
        ...

    @property
    def context_window(self) -> int | None:
        """The model's context window in tokens, when known."""
        ...

    def stream(self, request: LLMRequest) -> AbstractAsyncContextManager[LLMResponse]:
        """Send ``request``; the context manager yields the streaming response.

        Leaving the block stops the request, whether or not it finished.
        """
        ...


class ClosableLLM(LLM, Protocol):
    """A model client that holds resources (a connection pool) until it is closed.

    :class:`~penguin.llm.OpenAIChatLLM` is one; :meth:`penguin.Agent.model_client`
    builds them.
    """

    async def aclose(self) -> None:
        """Release the client's resources; the client is not used afterwards."""
        ...
