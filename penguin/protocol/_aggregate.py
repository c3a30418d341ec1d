"""The partial aggregator: streaming fragments in, complete messages out.

A stream shows ``start → delta… → stop`` for each fragment and then the complete
message; a consumer that only has the fragments (a UI that joined late, a replay of
a live stream) can rebuild the complete messages with :class:`PartialAggregator`.
Fragments are keyed by payload type and ``tool_call_id``, so the outputs of calls
running concurrently are kept apart. Non-partial messages pass through in order.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import final

import attrs

from ._builders import assistant_text, thinking, tool_call, tool_call_output
from ._types import (
    OmniMessage,
    PartialModelPayload,
    PartialTextPayload,
    PartialThinkingPayload,
    PartialToolCallOutputPayload,
    PartialToolCallPayload,
    Payload,
    StopReason,
)

__all__ = ["PartialAggregator", "aggregate_all"]


@final
@attrs.define
class _Fragment:
    kind: type[PartialModelPayload]
    origin: tuple[str, ...] | None
    parts: list[str] = attrs.Factory(list)
    name: str = ""
    tool_call_id: str = ""
    images: tuple[str, ...] | None = None
    stop_reason: StopReason = "completed"

    def add(self, payload: PartialModelPayload) -> None:
        match payload:
            case PartialTextPayload(text=text):
                self.parts.append(text)
            case PartialThinkingPayload(thinking=text):
                self.parts.append(text)
            case PartialToolCallPayload():
                self.parts.append(payload.arguments)
                self.name = payload.name or self.name
                self.tool_call_id = payload.tool_call_id
            case PartialToolCallOutputPayload():
                self.parts.append(payload.output)
                self.images = payload.images or self.images
                self.tool_call_id = payload.tool_call_id
        if payload.stop_reason is not None:
            self.stop_reason = payload.stop_reason

    def complete(self) -> OmniMessage[Payload]:
        text = "".join(self.parts)
        message: OmniMessage[Payload]
        if self.kind is PartialTextPayload:
            message = assistant_text(text, self.stop_reason)
        elif self.kind is PartialThinkingPayload:
            message = thinking(text, self.stop_reason)
        elif self.kind is PartialToolCallPayload:
            message = tool_call(self.name, text, self.tool_call_id, stop_reason=self.stop_reason)
        else:
            message = tool_call_output(text, self.tool_call_id, self.stop_reason, self.images)
        return attrs.evolve(message, origin=self.origin) if self.origin else message


@final
class PartialAggregator:
    """Joins ``partial_*`` fragments into complete messages as they arrive.

    :meth:`push` returns the messages that are complete after this one: the message
    itself when it is not a fragment, the rebuilt message when a fragment stops, and
    nothing while a fragment is open. :meth:`flush` closes fragments that never got
    their ``stop`` (in the order they were opened).
    """

    def __init__(self) -> None:
        self._open: dict[tuple[object, ...], _Fragment] = {}

    def push(self, message: OmniMessage[Payload]) -> list[OmniMessage[Payload]]:
        """Feed one message; get back what it completes."""
        payload = message.payload
        if not isinstance(
            payload,
            PartialTextPayload
            | PartialThinkingPayload
            | PartialToolCallPayload
            | PartialToolCallOutputPayload,
        ):
            return [message]
        key = (type(payload), getattr(payload, "tool_call_id", ""), message.origin)
        out: list[OmniMessage[Payload]] = []
        fragment = self._open.get(key)
        if payload.event_type == "start" and fragment is not None:
            out.append(self._open.pop(key).complete())
            fragment = None
        if fragment is None:
            fragment = _Fragment(kind=type(payload), origin=message.origin)
            self._open[key] = fragment
        fragment.add(payload)
        if payload.event_type == "stop":
            out.append(self._open.pop(key).complete())
        return out

    def flush(self) -> list[OmniMessage[Payload]]:
        """Close every open fragment, oldest first."""
        out = [fragment.complete() for fragment in self._open.values()]
        self._open.clear()
        return out


def aggregate_all(messages: Iterable[OmniMessage[Payload]]) -> list[OmniMessage[Payload]]:
    """Collapse every fragment in ``messages`` into its complete message, keeping order."""
    aggregator = PartialAggregator()
    out: list[OmniMessage[Payload]] = []
    for message in messages:
        out.extend(aggregator.push(message))
    out.extend(aggregator.flush())
    return out
