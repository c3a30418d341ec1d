"""The agent loop: turns, approvals, concurrent tool execution, carry-over, reconnect, compaction.

:class:`Engine` runs Tasks for one session; :class:`Ledger` is its sans-IO memory of
the model context, rebuilt from a trace to resume a session; :class:`TraceRecorder`
writes the trace off the hot path. Users reach all of this through
``penguin.Session``; embedders who bring their own composition may use it directly.
"""

from __future__ import annotations

from ._engine import DEFAULT_COMPACTION_PROMPT as DEFAULT_COMPACTION_PROMPT
from ._engine import CompactionSettings as CompactionSettings
from ._engine import Engine as Engine
from ._engine import ReconnectPolicy as ReconnectPolicy
from ._engine import RunResult as RunResult
from ._engine import RunStatus as RunStatus
from ._engine import RunStream as RunStream
from ._errors import EngineBusyError as EngineBusyError
from ._ledger import INTERRUPTED_OUTPUT as INTERRUPTED_OUTPUT
from ._ledger import Ledger as Ledger
from ._recorder import TraceRecorder as TraceRecorder

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
    "TraceRecorder",
]
