"""The agent loop: turns, approvals, concurrent tool execution, carry-over, reconnect, compaction.

:class:`Engine` runs Tasks for one session; :class:`Ledger` is its sans-IO memory of
the model context, rebuilt from a trace to resume a session; :class:`TraceRecorder`
writes the trace off the hot path; :class:`ToolRunner` is what the engine asks of
the side that runs the tools (``penguin.Environment`` is one), and :class:`ToolCatalog`
where MCP servers' tools come from (the Environment again). Users reach all of
this through ``penguin.Session``; embedders who bring their own composition may use
it directly.
"""

from __future__ import annotations

from ._compaction import DEFAULT_COMPACTION_PROMPT as DEFAULT_COMPACTION_PROMPT
from ._compaction import CompactionSettings as CompactionSettings
from ._engine import Engine as Engine
from ._errors import EngineBusyError as EngineBusyError
from ._ledger import INTERRUPTED_OUTPUT as INTERRUPTED_OUTPUT
from ._ledger import Ledger as Ledger
from ._reconnect import ReconnectPolicy as ReconnectPolicy
from ._recorder import TraceRecorder as TraceRecorder
from ._runner import ToolCatalog as ToolCatalog
from ._runner import ToolRunner as ToolRunner
from ._stream import RunResult as RunResult
from ._stream import RunStatus as RunStatus
from ._stream import RunStream as RunStream

__all__ = [
    "DEFAULT_COMPACTION_PROMPT",
    "INTERRUPTED_OUTPUT",
    "CompactionSettings",
    "Engine",
    "EngineBusyError",
    "Ledger",
    "ReconnectPolicy",
    "RunResult",
    "RunStatus",
    "RunStream",
    "ToolCatalog",
    "ToolRunner",
    "TraceRecorder",
]
