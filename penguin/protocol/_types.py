"""The OmniMessage data model: one envelope, three kinds of message, every payload.

This module owns the *shape* of the protocol and nothing else: attrs classes whose
attribute names and declaration order are the wire names and the wire key order.
It does no I/O and no validation beyond what the types say; turning these objects
into JSON (and back) is ``_codec``'s job, building them with a timestamp is
``_builders``'s job.

Conventions kept here:

- Every payload class except :class:`SessionMetaPayload` starts with a ``type``
  field whose only value is the payload's wire tag, so the tag is always the first
  key on the wire.
- An optional field is ``None`` when absent and is then omitted on the wire. The one
  exception is :attr:`AbortPayload.reason`, which the protocol writes as ``null``.
- Sequences are tuples, so messages stay immutable and can be shared between the
  stream, the trace and the model input without copies.
- ``fidelity`` is an opaque provider object: it is never inspected, only carried.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, Literal, TypeAlias, TypeVar, final

import attrs

__all__ = [
    "AbortPayload",
    "ApprovalDecision",
    "ApprovalDecisionPayload",
    "ApprovalVerdict",
    "ApproveFn",
    "CompactionBeginPayload",
    "CompactionEndPayload",
    "CompactionMode",
    "CompactionReason",
    "CompleteModelPayload",
    "EventPayload",
    "Fidelity",
    "ImageUrlPayload",
    "InlineDataPayload",
    "InlineThinkingPayload",
    "McpConnectBeginPayload",
    "McpConnectEndPayload",
    "McpConnectStatus",
    "McpServerConnectResult",
    "MessageKind",
    "ModelPayload",
    "OmniMessage",
    "PartialModelPayload",
    "PartialTextPayload",
    "PartialThinkingPayload",
    "PartialToolCallOutputPayload",
    "PartialToolCallPayload",
    "Payload",
    "RequestBeginPayload",
    "RequestEndPayload",
    "Role",
    "Sender",
    "SessionMetaPayload",
    "SessionSource",
    "StopReason",
    "StreamEventType",
    "SubagentPayload",
    "TextPayload",
    "ThinkingPayload",
    "TokenCounts",
    "TokenUsagePayload",
    "ToolCallOutputPayload",
    "ToolCallPayload",
    "ToolDefinition",
    "ToolListReadyPayload",
]

MessageKind: TypeAlias = Literal["session_meta", "model_msg", "event_msg"]
Role: TypeAlias = Literal["user", "assistant"]
StopReason: TypeAlias = Literal["completed", "failed", "aborted", "timeout", "malformed", "auth"]
StreamEventType: TypeAlias = Literal["start", "delta", "stop"]
ApprovalDecision: TypeAlias = Literal["allow", "deny", "forbidden"]
CompactionReason: TypeAlias = Literal["context", "turns", "manual"]
CompactionMode: TypeAlias = Literal["summarize", "discard"]
McpConnectStatus: TypeAlias = Literal["completed", "failed", "aborted"]
SessionSource: TypeAlias = Literal["subagent", "schedule"]
Sender: TypeAlias = Literal["harness"]
Fidelity: TypeAlias = Mapping[str, Any]
"""An opaque provider object (thinking signatures, reasoning field names...)."""


# --------------------------------------------------------------------------- shared


@final
@attrs.frozen(kw_only=True)
class ToolDefinition:
    """A tool as the model sees it: name, description and a JSON Schema."""

    name: str
    description: str
    parameters: Mapping[str, Any] | None = None


@final
@attrs.frozen(kw_only=True)
class TokenCounts:
    """Token counts of one request or of a whole session."""

    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    total: int = 0

    def __add__(self, other: TokenCounts) -> TokenCounts:
        return TokenCounts(
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
            output=self.output + other.output,
            total=self.total + other.total,
        )


@final
@attrs.frozen(kw_only=True)
class McpServerConnectResult:
    """One MCP server's outcome inside ``mcp_connect_end``."""

    server: str
    transport: Literal["stdio", "http", "sse"]
    status: McpConnectStatus
    duration_ms: int
    tools: int | None = None
    error: str | None = None


# --------------------------------------------------------------------------- session_meta


@final
@attrs.frozen(kw_only=True)
class SessionMetaPayload:
    """The invariants of one model context: model, system prompt, paths."""

    session_id: str
    provider: str
    model_id: str
    model_context_window: int | str
    system_prompt: str
    agent_state: str
    workspace: str
    source: SessionSource | None = None
    sandbox: Mapping[str, Any] | None = None
    """The session's sandbox, ``{"mode": M, "network": B}`` (spec/sandbox.md X1.4)."""
    approval_mode: str | None = None
    """The approval mode the session was started with (chat.md C5.5); absent: not said."""


# --------------------------------------------------------------------------- complete model_msg


@final
@attrs.frozen(kw_only=True)
class TextPayload:
    """Text from the user or the assistant (``sender="harness"`` marks injected text)."""

    type: Literal["text"] = "text"
    role: Role
    text: str
    stop_reason: StopReason | None = None
    fidelity: Fidelity | None = None
    sender: Sender | None = None


@final
@attrs.frozen(kw_only=True)
class ImageUrlPayload:
    """An image given to the model by URL or as a data URL."""

    type: Literal["image_url"] = "image_url"
    role: Literal["user"] = "user"
    image_url: str
    stop_reason: StopReason | None = None


@final
@attrs.frozen(kw_only=True)
class InlineDataPayload:
    """Other binary content, base64-encoded."""

    type: Literal["inline_data"] = "inline_data"
    role: Role
    data: str
    mime_type: str
    stop_reason: StopReason | None = None
    fidelity: Fidelity | None = None


@final
@attrs.frozen(kw_only=True)
class ThinkingPayload:
    """The model's reasoning as text."""

    type: Literal["thinking"] = "thinking"
    role: Literal["assistant"] = "assistant"
    thinking: str
    stop_reason: StopReason | None = None
    fidelity: Fidelity | None = None


@final
@attrs.frozen(kw_only=True)
class InlineThinkingPayload:
    """The model's reasoning in a binary form, base64-encoded."""

    type: Literal["inline_thinking"] = "inline_thinking"
    role: Literal["assistant"] = "assistant"
    data: str
    mime_type: str
    stop_reason: StopReason | None = None
    fidelity: Fidelity | None = None


@final
@attrs.frozen(kw_only=True)
class ToolCallPayload:
    """A tool call; ``arguments`` is JSON text, kept verbatim even when it is not valid."""

    type: Literal["tool_call"] = "tool_call"
    role: Literal["assistant"] = "assistant"
    name: str
    arguments: str
    tool_call_id: str
    stop_reason: StopReason | None = None
    fidelity: Fidelity | None = None


@final
@attrs.frozen(kw_only=True)
class ToolCallOutputPayload:
    """The complete result of one tool call, paired with its call by ``tool_call_id``."""

    type: Literal["tool_call_output"] = "tool_call_output"
    role: Literal["user"] = "user"
    output: str
    images: tuple[str, ...] | None = None
    tool_call_id: str
    stop_reason: StopReason | None = None


# --------------------------------------------------------------------------- partial model_msg


@final
@attrs.frozen(kw_only=True)
class PartialTextPayload:
    """A fragment of assistant text."""

    type: Literal["partial_text"] = "partial_text"
    role: Literal["assistant"] = "assistant"
    event_type: StreamEventType
    text: str = ""
    stop_reason: StopReason | None = None


@final
@attrs.frozen(kw_only=True)
class PartialThinkingPayload:
    """A fragment of assistant reasoning."""

    type: Literal["partial_thinking"] = "partial_thinking"
    role: Literal["assistant"] = "assistant"
    event_type: StreamEventType
    thinking: str = ""
    stop_reason: StopReason | None = None


@final
@attrs.frozen(kw_only=True)
class PartialToolCallPayload:
    """A fragment of a tool call's arguments."""

    type: Literal["partial_tool_call"] = "partial_tool_call"
    role: Literal["assistant"] = "assistant"
    event_type: StreamEventType
    name: str
    arguments: str = ""
    tool_call_id: str
    stop_reason: StopReason | None = None


@final
@attrs.frozen(kw_only=True)
class PartialToolCallOutputPayload:
    """A fragment of a tool's output; images travel whole, in a single delta."""

    type: Literal["partial_tool_call_output"] = "partial_tool_call_output"
    role: Literal["user"] = "user"
    event_type: StreamEventType
    output: str = ""
    images: tuple[str, ...] | None = None
    tool_call_id: str
    stop_reason: StopReason | None = None


# --------------------------------------------------------------------------- event_msg


@final
@attrs.frozen(kw_only=True)
class ApprovalDecisionPayload:
    """The audit record of one approval: the approver's verdict, unchanged (reference 5.3).

    ``decision`` is ``forbidden`` whenever the verdict was, whoever gave it;
    ``policy_rule`` also names the rule when the command policy forbade the call.
    """

    type: Literal["approval_decision"] = "approval_decision"
    decision: ApprovalDecision
    tool_call_id: str
    policy_rule: str | None = None


@final
@attrs.frozen(kw_only=True)
class AbortPayload:
    """The run was interrupted; ``reason`` is written even when it is null."""

    type: Literal["abort"] = "abort"
    reason: str | None = None


@final
@attrs.frozen(kw_only=True)
class RequestBeginPayload:
    """One model request starts."""

    type: Literal["request_begin"] = "request_begin"


@final
@attrs.frozen(kw_only=True)
class RequestEndPayload:
    """One model request ended; ``completed`` marks the turn as committed."""

    type: Literal["request_end"] = "request_end"
    status: StopReason
    error_message: str | None = None
    attempt: int | None = None
    retry_in_ms: int | None = None


@final
@attrs.frozen(kw_only=True)
class TokenUsagePayload:
    """Token usage of the last request and of the session so far."""

    type: Literal["token_usage"] = "token_usage"
    session: TokenCounts
    request: TokenCounts


@final
@attrs.frozen(kw_only=True)
class CompactionBeginPayload:
    """Context compaction starts."""

    type: Literal["compaction_begin"] = "compaction_begin"
    reason: CompactionReason
    mode: CompactionMode
    context: int
    turns: int


@final
@attrs.frozen(kw_only=True)
class CompactionEndPayload:
    """Context compaction ended; anything but ``completed`` kept the old context."""

    type: Literal["compaction_end"] = "compaction_end"
    reason: CompactionReason
    mode: CompactionMode
    status: StopReason
    attempt: int | None = None
    error_message: str | None = None


@final
@attrs.frozen(kw_only=True)
class SubagentPayload:
    """A pointer from a parent trace to a direct child session."""

    type: Literal["subagent"] = "subagent"
    session_id: str


@final
@attrs.frozen(kw_only=True)
class ToolListReadyPayload:
    """The session's model-facing tool definitions, once the toolset is known."""

    type: Literal["tool_list_ready"] = "tool_list_ready"
    tools: tuple[ToolDefinition, ...]


@final
@attrs.frozen(kw_only=True)
class McpConnectBeginPayload:
    """MCP servers are being contacted."""

    type: Literal["mcp_connect_begin"] = "mcp_connect_begin"
    servers: tuple[str, ...]


@final
@attrs.frozen(kw_only=True)
class McpConnectEndPayload:
    """The MCP connect phase ended, with one result per server."""

    type: Literal["mcp_connect_end"] = "mcp_connect_end"
    status: McpConnectStatus
    results: tuple[McpServerConnectResult, ...] = ()


CompleteModelPayload: TypeAlias = (
    TextPayload
    | ImageUrlPayload
    | InlineDataPayload
    | ThinkingPayload
    | InlineThinkingPayload
    | ToolCallPayload
    | ToolCallOutputPayload
)
PartialModelPayload: TypeAlias = (
    PartialTextPayload
    | PartialThinkingPayload
    | PartialToolCallPayload
    | PartialToolCallOutputPayload
)
ModelPayload: TypeAlias = CompleteModelPayload | PartialModelPayload
EventPayload: TypeAlias = (
    ApprovalDecisionPayload
    | AbortPayload
    | RequestBeginPayload
    | RequestEndPayload
    | TokenUsagePayload
    | CompactionBeginPayload
    | CompactionEndPayload
    | SubagentPayload
    | ToolListReadyPayload
    | McpConnectBeginPayload
    | McpConnectEndPayload
)
Payload: TypeAlias = SessionMetaPayload | ModelPayload | EventPayload

P_co = TypeVar("P_co", bound=Payload, covariant=True)


@final
@attrs.frozen
class OmniMessage(Generic[P_co]):
    """The envelope every message travels in.

    ``origin`` is the chain of child-session ids, outer to inner, of a message that
    was forwarded from a subagent; ``None`` means the message is this session's own.
    """

    timestamp: str
    type: MessageKind
    payload: P_co
    origin: tuple[str, ...] | None = None


ApprovalVerdict: TypeAlias = Literal["allow", "deny", "forbidden"]
"""What an approver answers; ``forbidden`` is a command-policy denial."""

ApproveFn: TypeAlias = Callable[
    [OmniMessage[ToolCallPayload]], Awaitable[ApprovalVerdict] | ApprovalVerdict
]
"""An approver: called once per complete tool call, sync or async."""
