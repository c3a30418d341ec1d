"""Guards: predicates that tell what kind of message this is.

Small predicates that narrow an ``OmniMessage`` for the type checker, so callers can
write ``if om.is_tool_call(msg): msg.payload.arguments`` without casts.
"""

from __future__ import annotations

from typing import Final, TypeGuard

from ._types import (
    CompleteModelPayload,
    EventPayload,
    ModelPayload,
    OmniMessage,
    PartialModelPayload,
    PartialTextPayload,
    PartialThinkingPayload,
    PartialToolCallOutputPayload,
    PartialToolCallPayload,
    Payload,
    SessionMetaPayload,
    ToolCallOutputPayload,
    ToolCallPayload,
)

__all__ = [
    "is_complete_model_message",
    "is_event",
    "is_model_message",
    "is_partial",
    "is_partial_payload",
    "is_session_meta",
    "is_tool_call",
    "is_tool_call_output",
]

_PARTIALS: Final = (
    PartialTextPayload,
    PartialThinkingPayload,
    PartialToolCallPayload,
    PartialToolCallOutputPayload,
)


def is_partial_payload(payload: Payload) -> TypeGuard[PartialModelPayload]:
    """A streaming ``partial_*`` payload."""
    return isinstance(payload, _PARTIALS)


def is_partial(message: OmniMessage[Payload]) -> TypeGuard[OmniMessage[PartialModelPayload]]:
    """A streaming fragment (``partial_text``, ``partial_tool_call_output``...)."""
    return isinstance(message.payload, _PARTIALS)


def is_model_message(message: OmniMessage[Payload]) -> TypeGuard[OmniMessage[ModelPayload]]:
    """Any ``model_msg``, complete or partial."""
    return message.type == "model_msg"


def is_complete_model_message(
    message: OmniMessage[Payload],
) -> TypeGuard[OmniMessage[CompleteModelPayload]]:
    """A complete ``model_msg``: what the model sees and the trace records."""
    return message.type == "model_msg" and not isinstance(message.payload, _PARTIALS)


def is_event(message: OmniMessage[Payload]) -> TypeGuard[OmniMessage[EventPayload]]:
    """An ``event_msg``."""
    return message.type == "event_msg"


def is_session_meta(message: OmniMessage[Payload]) -> TypeGuard[OmniMessage[SessionMetaPayload]]:
    """The ``session_meta`` message."""
    return message.type == "session_meta"


def is_tool_call(message: OmniMessage[Payload]) -> TypeGuard[OmniMessage[ToolCallPayload]]:
    """A complete ``tool_call``."""
    return isinstance(message.payload, ToolCallPayload)


def is_tool_call_output(
    message: OmniMessage[Payload],
) -> TypeGuard[OmniMessage[ToolCallOutputPayload]]:
    """A complete ``tool_call_output``."""
    return isinstance(message.payload, ToolCallOutputPayload)
