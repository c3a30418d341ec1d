"""Checks of the streaming discipline every LLM response keeps (penguin.llm._interface)."""

from __future__ import annotations

from collections.abc import Sequence

from penguin import protocol as om

Message = om.OmniMessage[om.Payload]
Complete = om.TextPayload | om.ThinkingPayload | om.ToolCallPayload


def _content(payload: om.Payload) -> str:
    match payload:
        case om.PartialTextPayload(text=text) | om.TextPayload(text=text):
            return text
        case om.PartialThinkingPayload(thinking=text) | om.ThinkingPayload(thinking=text):
            return text
        case om.PartialToolCallPayload(arguments=text) | om.ToolCallPayload(arguments=text):
            return text
    raise AssertionError(f"not an LLM stream payload: {payload!r}")


_COMPLETE_OF = {
    om.PartialTextPayload: om.TextPayload,
    om.PartialThinkingPayload: om.ThinkingPayload,
    om.PartialToolCallPayload: om.ToolCallPayload,
}


def check_discipline(messages: Sequence[Message]) -> list[om.OmniMessage[Complete]]:
    """Assert start → delta… → stop → complete for every fragment; return the completes.

    The complete message follows its stop immediately, carries the stop's stop
    reason and equals the concatenated deltas (and, for a tool call, the same id and
    name as its fragments).
    """
    open_fragments: dict[tuple[type, str], list[str]] = {}
    names: dict[tuple[type, str], str] = {}
    awaiting: tuple[tuple[type, str], str, om.StopReason | None] | None = None
    completes: list[om.OmniMessage[Complete]] = []
    for position, message in enumerate(messages):
        payload = message.payload
        assert message.type == "model_msg", f"#{position}: {message!r}"
        if awaiting is not None:
            (kind, call_id), text, stop_reason = awaiting
            assert isinstance(payload, Complete)
            assert type(payload) is _COMPLETE_OF[kind], f"#{position} should complete {kind}"
            assert _content(payload) == text, f"#{position}: content differs from the deltas"
            assert payload.stop_reason == stop_reason, f"#{position}: stop reason differs"
            if isinstance(payload, om.ToolCallPayload):
                assert payload.tool_call_id == call_id
                assert payload.name == names[(kind, call_id)]
            completes.append(om.OmniMessage(message.timestamp, message.type, payload))
            awaiting = None
            continue
        assert isinstance(
            payload, om.PartialTextPayload | om.PartialThinkingPayload | om.PartialToolCallPayload
        ), f"#{position}: a complete message without its fragments: {message!r}"
        key = (type(payload), getattr(payload, "tool_call_id", ""))
        if isinstance(payload, om.PartialToolCallPayload):
            if payload.name:
                names[key] = payload.name
            else:
                names.setdefault(key, "")
        if payload.event_type == "start":
            assert key not in open_fragments, f"#{position}: {key} started twice"
            assert _content(payload) == ""
            open_fragments[key] = []
        elif payload.event_type == "delta":
            assert key in open_fragments, f"#{position}: delta outside a fragment"
            assert _content(payload), f"#{position}: empty delta"
            open_fragments[key].append(_content(payload))
        else:
            assert key in open_fragments, f"#{position}: stop outside a fragment"
            awaiting = (key, "".join(open_fragments.pop(key)), payload.stop_reason)
    assert awaiting is None, "the stream ended between a stop and its complete message"
    assert not open_fragments, f"fragments never stopped: {list(open_fragments)}"
    return completes


def tool_calls(completes: Sequence[om.OmniMessage[Complete]]) -> list[om.ToolCallPayload]:
    """The tool call payloads among complete messages."""
    return [m.payload for m in completes if isinstance(m.payload, om.ToolCallPayload)]


def kind(message: Message) -> str:
    """``type`` (plus ``:event_type`` for fragments) of a model message."""
    payload = message.payload
    assert not isinstance(payload, om.SessionMetaPayload)
    event_type = getattr(payload, "event_type", None)
    return payload.type if event_type is None else f"{payload.type}:{event_type}"


def texts(completes: Sequence[om.OmniMessage[Complete]]) -> list[str]:
    """The assistant texts among complete messages."""
    return [m.payload.text for m in completes if isinstance(m.payload, om.TextPayload)]
