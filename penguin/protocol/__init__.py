"""OmniMessage, the PenguinHarness message protocol: types, builders, guards, codec.

Import it as ``from penguin import protocol as om``::

    call = om.tool_call("exec_command", {"description": "say hi", "cmd": "echo hi"}, "call_1")
    line = om.dumps(call)          # one line of compact JSON, the wire format
    assert om.loads(line) == call  # ProtocolError on anything that is not a message

Every message is an :class:`OmniMessage` envelope (``timestamp``, ``type``,
``payload``, ``origin``) around one attrs payload class whose attribute names are
the wire names. Nothing in this package does I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._aggregate import PartialAggregator as PartialAggregator
from ._aggregate import aggregate_all as aggregate_all
from ._approve import VERDICTS as VERDICTS
from ._approve import consult as consult
from ._approve import resolve as resolve
from ._builders import abort as abort
from ._builders import approval_decision as approval_decision
from ._builders import assistant_text as assistant_text
from ._builders import compaction_begin as compaction_begin
from ._builders import compaction_end as compaction_end
from ._builders import image_url as image_url
from ._builders import inline_data as inline_data
from ._builders import inline_thinking as inline_thinking
from ._builders import mcp_connect_begin as mcp_connect_begin
from ._builders import mcp_connect_end as mcp_connect_end
from ._builders import now_iso as now_iso
from ._builders import partial_text as partial_text
from ._builders import partial_thinking as partial_thinking
from ._builders import partial_tool_call as partial_tool_call
from ._builders import partial_tool_call_output as partial_tool_call_output
from ._builders import request_begin as request_begin
from ._builders import request_end as request_end
from ._builders import session_meta as session_meta
from ._builders import subagent as subagent
from ._builders import text_message as text_message
from ._builders import thinking as thinking
from ._builders import token_usage as token_usage
from ._builders import tool_call as tool_call
from ._builders import tool_call_output as tool_call_output
from ._builders import tool_list_ready as tool_list_ready
from ._builders import user_text as user_text
from ._builders import with_origin as with_origin
from ._errors import ProtocolError as ProtocolError
from ._guards import is_complete_model_message as is_complete_model_message
from ._guards import is_event as is_event
from ._guards import is_model_message as is_model_message
from ._guards import is_partial as is_partial
from ._guards import is_partial_payload as is_partial_payload
from ._guards import is_session_meta as is_session_meta
from ._guards import is_tool_call as is_tool_call
from ._guards import is_tool_call_output as is_tool_call_output
from ._types import AbortPayload as AbortPayload
from ._types import ApprovalDecision as ApprovalDecision
from ._types import ApprovalDecisionPayload as ApprovalDecisionPayload
from ._types import ApprovalVerdict as ApprovalVerdict
from ._types import ApproveFn as ApproveFn
from ._types import CompactionBeginPayload as CompactionBeginPayload
from ._types import CompactionEndPayload as CompactionEndPayload
from ._types import CompactionMode as CompactionMode
from ._types import CompactionReason as CompactionReason
from ._types import CompleteModelPayload as CompleteModelPayload
from ._types import EventPayload as EventPayload
from ._types import Fidelity as Fidelity
from ._types import ImageUrlPayload as ImageUrlPayload
from ._types import InlineDataPayload as InlineDataPayload
from ._types import InlineThinkingPayload as InlineThinkingPayload
from ._types import McpConnectBeginPayload as McpConnectBeginPayload
from ._types import McpConnectEndPayload as McpConnectEndPayload
from ._types import McpConnectStatus as McpConnectStatus
from ._types import McpServerConnectResult as McpServerConnectResult
from ._types import MessageKind as MessageKind
from ._types import ModelPayload as ModelPayload
from ._types import OmniMessage as OmniMessage
from ._types import PartialModelPayload as PartialModelPayload
from ._types import PartialTextPayload as PartialTextPayload
from ._types import PartialThinkingPayload as PartialThinkingPayload
from ._types import PartialToolCallOutputPayload as PartialToolCallOutputPayload
from ._types import PartialToolCallPayload as PartialToolCallPayload
from ._types import Payload as Payload
from ._types import RequestBeginPayload as RequestBeginPayload
from ._types import RequestEndPayload as RequestEndPayload
from ._types import Role as Role
from ._types import Sender as Sender
from ._types import SessionMetaPayload as SessionMetaPayload
from ._types import SessionSource as SessionSource
from ._types import StopReason as StopReason
from ._types import StreamEventType as StreamEventType
from ._types import SubagentPayload as SubagentPayload
from ._types import TextPayload as TextPayload
from ._types import ThinkingPayload as ThinkingPayload
from ._types import TokenCounts as TokenCounts
from ._types import TokenUsagePayload as TokenUsagePayload
from ._types import ToolCallOutputPayload as ToolCallOutputPayload
from ._types import ToolCallPayload as ToolCallPayload
from ._types import ToolDefinition as ToolDefinition
from ._types import ToolListReadyPayload as ToolListReadyPayload

if TYPE_CHECKING:
    from ._codec import converter as converter
    from ._codec import dumps as dumps
    from ._codec import from_dict as from_dict
    from ._codec import loads as loads
    from ._codec import to_dict as to_dict

__all__ = [
    "VERDICTS",
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
    "PartialAggregator",
    "PartialModelPayload",
    "PartialTextPayload",
    "PartialThinkingPayload",
    "PartialToolCallOutputPayload",
    "PartialToolCallPayload",
    "Payload",
    "ProtocolError",
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
    "abort",
    "aggregate_all",
    "approval_decision",
    "assistant_text",
    "compaction_begin",
    "compaction_end",
    "consult",
    "converter",
    "dumps",
    "from_dict",
    "image_url",
    "inline_data",
    "inline_thinking",
    "is_complete_model_message",
    "is_event",
    "is_model_message",
    "is_partial",
    "is_partial_payload",
    "is_session_meta",
    "is_tool_call",
    "is_tool_call_output",
    "loads",
    "mcp_connect_begin",
    "mcp_connect_end",
    "now_iso",
    "partial_text",
    "partial_thinking",
    "partial_tool_call",
    "partial_tool_call_output",
    "request_begin",
    "request_end",
    "resolve",
    "session_meta",
    "subagent",
    "text_message",
    "thinking",
    "to_dict",
    "token_usage",
    "tool_call",
    "tool_call_output",
    "tool_list_ready",
    "user_text",
    "with_origin",
]

if not TYPE_CHECKING:
    from penguin import _lazy

    # The codec builds its cattrs converter when imported, the slowest step of this
    # package, and running a tool needs no JSON codec: its names load on first use.
    __getattr__, __dir__ = _lazy.lazy_attributes(
        __name__,
        dict.fromkeys(("converter", "dumps", "from_dict", "loads", "to_dict"), "._codec"),
    )
