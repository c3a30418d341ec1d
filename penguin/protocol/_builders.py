"""Builders: the one way penguin makes messages.

Every builder stamps an ISO-8601 UTC timestamp with milliseconds and a ``Z``, wraps
the payload in the right envelope kind and sets ``stop_reason`` the way the
reference does (``"completed"`` unless told otherwise). Keeping construction here
means no module invents its own half-shaped protocol dicts.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import attrs

from ._types import (
    AbortPayload,
    ApprovalDecision,
    ApprovalDecisionPayload,
    CompactionBeginPayload,
    CompactionEndPayload,
    CompactionMode,
    CompactionReason,
    EventPayload,
    Fidelity,
    ImageUrlPayload,
    InlineDataPayload,
    InlineThinkingPayload,
    McpConnectBeginPayload,
    McpConnectEndPayload,
    McpConnectStatus,
    McpServerConnectResult,
    ModelPayload,
    OmniMessage,
    PartialTextPayload,
    PartialThinkingPayload,
    PartialToolCallOutputPayload,
    PartialToolCallPayload,
    Payload,
    RequestBeginPayload,
    RequestEndPayload,
    Role,
    Sender,
    SessionMetaPayload,
    SessionSource,
    StopReason,
    StreamEventType,
    SubagentPayload,
    TextPayload,
    ThinkingPayload,
    TokenCounts,
    TokenUsagePayload,
    ToolCallOutputPayload,
    ToolCallPayload,
    ToolDefinition,
    ToolListReadyPayload,
)

__all__ = [
    "abort",
    "approval_decision",
    "assistant_text",
    "compaction_begin",
    "compaction_end",
    "image_url",
    "inline_data",
    "inline_thinking",
    "mcp_connect_begin",
    "mcp_connect_end",
    "now_iso",
    "partial_text",
    "partial_thinking",
    "partial_tool_call",
    "partial_tool_call_output",
    "request_begin",
    "request_end",
    "session_meta",
    "subagent",
    "text_message",
    "thinking",
    "token_usage",
    "tool_call",
    "tool_call_output",
    "tool_list_ready",
    "user_text",
    "with_origin",
]

M = TypeVar("M", bound=OmniMessage[Payload])
MP = TypeVar("MP", bound=ModelPayload)
EP = TypeVar("EP", bound=EventPayload)


@functools.lru_cache(maxsize=1)
def _second(epoch_seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch_seconds))


def now_iso() -> str:
    """The current time as the protocol writes it: ``2026-11-29T21:28:46.123Z``.

    Messages are built in bursts, so the formatted second is memoised and only the
    milliseconds are formatted per call.
    """
    seconds, millis = divmod(time.time_ns() // 1_000_000, 1000)
    return f"{_second(seconds)}.{millis:03d}Z"


def _model(payload: MP) -> OmniMessage[MP]:
    return OmniMessage(timestamp=now_iso(), type="model_msg", payload=payload)


def _event(payload: EP) -> OmniMessage[EP]:
    return OmniMessage(timestamp=now_iso(), type="event_msg", payload=payload)


def _fidelity(fidelity: Fidelity | None) -> Fidelity | None:
    # An empty provider object is the same as none: it is not written.
    return fidelity if fidelity else None


def _images(images: Iterable[str] | None) -> tuple[str, ...] | None:
    return tuple(images) if images else None


# --------------------------------------------------------------------------- session_meta


def session_meta(
    *,
    session_id: str,
    provider: str,
    model_id: str,
    model_context_window: int | str,
    system_prompt: str,
    agent_state: str,
    workspace: str,
    source: SessionSource | None = None,
    sandbox: Mapping[str, Any] | None = None,
    approval_mode: str | None = None,
) -> OmniMessage[SessionMetaPayload]:
    """The ``session_meta`` message that opens every trace file."""
    payload = SessionMetaPayload(
        session_id=session_id,
        provider=provider,
        model_id=model_id,
        model_context_window=model_context_window,
        system_prompt=system_prompt,
        agent_state=agent_state,
        workspace=workspace,
        source=source,
        sandbox=sandbox,
        approval_mode=approval_mode,
    )
    return OmniMessage(timestamp=now_iso(), type="session_meta", payload=payload)


# --------------------------------------------------------------------------- complete model_msg


def text_message(
    role: Role,
    text: str,
    stop_reason: StopReason = "completed",
    fidelity: Fidelity | None = None,
    *,
    sender: Sender | None = None,
) -> OmniMessage[TextPayload]:
    """A complete text message from either side."""
    return _model(
        TextPayload(
            role=role,
            text=text,
            stop_reason=stop_reason,
            fidelity=_fidelity(fidelity),
            sender=sender,
        )
    )


def user_text(text: str, *, harness: bool = False) -> OmniMessage[TextPayload]:
    """A user message; ``harness=True`` marks text injected by the harness, not a human."""
    return text_message("user", text, sender="harness" if harness else None)


def assistant_text(
    text: str, stop_reason: StopReason = "completed", fidelity: Fidelity | None = None
) -> OmniMessage[TextPayload]:
    """A complete assistant text message."""
    return text_message("assistant", text, stop_reason, fidelity)


def image_url(url: str) -> OmniMessage[ImageUrlPayload]:
    """A user image, by URL or data URL."""
    return _model(ImageUrlPayload(image_url=url, stop_reason="completed"))


def inline_data(
    role: Role, data: str, mime_type: str, fidelity: Fidelity | None = None
) -> OmniMessage[InlineDataPayload]:
    """Base64-encoded binary content."""
    return _model(
        InlineDataPayload(
            role=role,
            data=data,
            mime_type=mime_type,
            stop_reason="completed",
            fidelity=_fidelity(fidelity),
        )
    )


def thinking(
    text: str, stop_reason: StopReason = "completed", fidelity: Fidelity | None = None
) -> OmniMessage[ThinkingPayload]:
    """A complete reasoning message."""
    return _model(
        ThinkingPayload(thinking=text, stop_reason=stop_reason, fidelity=_fidelity(fidelity))
    )


def inline_thinking(
    data: str, mime_type: str, fidelity: Fidelity | None = None
) -> OmniMessage[InlineThinkingPayload]:
    """Reasoning in a binary form, base64-encoded."""
    return _model(
        InlineThinkingPayload(
            data=data, mime_type=mime_type, stop_reason="completed", fidelity=_fidelity(fidelity)
        )
    )


def tool_call(
    name: str,
    arguments: str | Mapping[str, Any],
    tool_call_id: str,
    *,
    stop_reason: StopReason = "completed",
    fidelity: Fidelity | None = None,
) -> OmniMessage[ToolCallPayload]:
    """A tool call; string ``arguments`` are kept verbatim, a mapping becomes compact JSON.

    Verbatim means even empty or invalid JSON: the Environment reports those to the
    model, which is the point of keeping them.
    """
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    return _model(
        ToolCallPayload(
            name=name,
            arguments=arguments,
            tool_call_id=tool_call_id,
            stop_reason=stop_reason,
            fidelity=_fidelity(fidelity),
        )
    )


def tool_call_output(
    output: str,
    tool_call_id: str,
    stop_reason: StopReason = "completed",
    images: Iterable[str] | None = None,
) -> OmniMessage[ToolCallOutputPayload]:
    """The complete output of a tool call (``images`` omitted when empty)."""
    return _model(
        ToolCallOutputPayload(
            output=output,
            images=_images(images),
            tool_call_id=tool_call_id,
            stop_reason=stop_reason,
        )
    )


# --------------------------------------------------------------------------- partial model_msg


def partial_text(
    event_type: StreamEventType, text: str = "", stop_reason: StopReason = "completed"
) -> OmniMessage[PartialTextPayload]:
    """A fragment of assistant text."""
    return _model(PartialTextPayload(event_type=event_type, text=text, stop_reason=stop_reason))


def partial_thinking(
    event_type: StreamEventType, text: str = "", stop_reason: StopReason = "completed"
) -> OmniMessage[PartialThinkingPayload]:
    """A fragment of reasoning."""
    return _model(
        PartialThinkingPayload(event_type=event_type, thinking=text, stop_reason=stop_reason)
    )


def partial_tool_call(
    event_type: StreamEventType,
    name: str,
    tool_call_id: str,
    arguments: str = "",
    stop_reason: StopReason = "completed",
) -> OmniMessage[PartialToolCallPayload]:
    """A fragment of a tool call's JSON arguments."""
    return _model(
        PartialToolCallPayload(
            event_type=event_type,
            name=name,
            arguments=arguments,
            tool_call_id=tool_call_id,
            stop_reason=stop_reason,
        )
    )


def partial_tool_call_output(
    event_type: StreamEventType,
    output: str,
    tool_call_id: str,
    stop_reason: StopReason = "completed",
    images: Iterable[str] | None = None,
) -> OmniMessage[PartialToolCallOutputPayload]:
    """A fragment of a tool's output; ``images`` travel whole in one delta."""
    return _model(
        PartialToolCallOutputPayload(
            event_type=event_type,
            output=output,
            images=_images(images),
            tool_call_id=tool_call_id,
            stop_reason=stop_reason,
        )
    )


# --------------------------------------------------------------------------- event_msg


def approval_decision(
    decision: ApprovalDecision, tool_call_id: str, policy_rule: str | None = None
) -> OmniMessage[ApprovalDecisionPayload]:
    """The record of one approval decision."""
    return _event(
        ApprovalDecisionPayload(
            decision=decision, tool_call_id=tool_call_id, policy_rule=policy_rule
        )
    )


def abort(reason: str | None = None) -> OmniMessage[AbortPayload]:
    """The run was interrupted."""
    return _event(AbortPayload(reason=reason))


def request_begin() -> OmniMessage[RequestBeginPayload]:
    """A model request starts."""
    return _event(RequestBeginPayload())


def request_end(
    status: StopReason,
    *,
    error_message: str | None = None,
    attempt: int | None = None,
    retry_in_ms: int | None = None,
) -> OmniMessage[RequestEndPayload]:
    """A model request ended, with the retry detail when there is one."""
    return _event(
        RequestEndPayload(
            status=status, error_message=error_message, attempt=attempt, retry_in_ms=retry_in_ms
        )
    )


def token_usage(session: TokenCounts, request: TokenCounts) -> OmniMessage[TokenUsagePayload]:
    """Token usage of the session so far and of the last request."""
    return _event(TokenUsagePayload(session=session, request=request))


def compaction_begin(
    reason: CompactionReason, mode: CompactionMode, context: int, turns: int
) -> OmniMessage[CompactionBeginPayload]:
    """Compaction starts."""
    return _event(CompactionBeginPayload(reason=reason, mode=mode, context=context, turns=turns))


def compaction_end(
    reason: CompactionReason,
    mode: CompactionMode,
    status: StopReason,
    *,
    attempt: int | None = None,
    error_message: str | None = None,
) -> OmniMessage[CompactionEndPayload]:
    """Compaction ended."""
    return _event(
        CompactionEndPayload(
            reason=reason, mode=mode, status=status, attempt=attempt, error_message=error_message
        )
    )


def subagent(session_id: str) -> OmniMessage[SubagentPayload]:
    """A parent trace's pointer to a direct child session."""
    return _event(SubagentPayload(session_id=session_id))


def tool_list_ready(tools: Iterable[ToolDefinition]) -> OmniMessage[ToolListReadyPayload]:
    """The session's model-facing tool definitions."""
    return _event(ToolListReadyPayload(tools=tuple(tools)))


def mcp_connect_begin(servers: Iterable[str]) -> OmniMessage[McpConnectBeginPayload]:
    """MCP servers are being contacted."""
    return _event(McpConnectBeginPayload(servers=tuple(servers)))


def mcp_connect_end(
    status: McpConnectStatus, results: Iterable[McpServerConnectResult] = ()
) -> OmniMessage[McpConnectEndPayload]:
    """The MCP connect phase ended."""
    return _event(McpConnectEndPayload(status=status, results=tuple(results)))


# --------------------------------------------------------------------------- origin


def with_origin(message: M, session_id: str) -> M:
    """The message as forwarded one level up: ``session_id`` prepended to ``origin``."""
    return attrs.evolve(message, origin=(session_id, *(message.origin or ())))
