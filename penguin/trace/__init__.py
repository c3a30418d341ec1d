"""Traces: the append-only JSONL record of a session, written and read back (reference 7).

One file per model context, one OmniMessage per line::

    <traces_dir>/<yyyy-mm-dd>/<session_id>_<NNN>.jsonl

Writing (async, safe to share between tasks)::

    trace = TraceWriter(traces_dir, session_id)
    await trace.append(message)     # False for a skipped message; raises on failure
    await trace.record(message)     # the engine's call: logs "[trace] write failed: …"
    await trace.rotate()            # the next context's file (..._002.jsonl)

Reading and finding (blocking: wrap in ``trio.to_thread.run_sync`` in async code)::

    messages = read_trace(path)                 # tolerant of a torn tail
    paths = trace_files(traces_dir, session_id)
    loc = find_session(traces_dir, session_id)  # the newest file, to resume:
    TraceWriter(traces_dir, session_id, start_index=loc.index, date_dir=loc.date_dir)

One writer per session (chat.md C5.6)::

    with SessionLock.acquire(lock_path(trace_path, session_id), session_id, "penguin chat"):
        ...                                      # SessionLockedError names the holder

This package owns the file format and its crash safety. It does not decide what a run
records beyond reference 7.2's filter, when to rotate, or how a resumed session rebuilds its
context from the messages read back: that is the engine's job.
"""

from __future__ import annotations

from ._errors import MalformedTraceError as MalformedTraceError
from ._errors import TraceAppendError as TraceAppendError
from ._errors import TraceError as TraceError
from ._errors import TraceWriteError as TraceWriteError
from ._files import TraceLocation as TraceLocation
from ._files import find_session as find_session
from ._files import latest_session as latest_session
from ._files import trace_file_name as trace_file_name
from ._files import trace_files as trace_files
from ._files import trace_locations as trace_locations
from ._lock import SessionLock as SessionLock
from ._lock import SessionLockedError as SessionLockedError
from ._lock import lock_path as lock_path
from ._reader import iter_trace as iter_trace
from ._reader import read_trace as read_trace
from ._writer import DIR_MODE as DIR_MODE
from ._writer import FILE_MODE as FILE_MODE
from ._writer import TraceWriter as TraceWriter
from ._writer import is_recordable as is_recordable

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "MalformedTraceError",
    "SessionLock",
    "SessionLockedError",
    "TraceAppendError",
    "TraceError",
    "TraceLocation",
    "TraceWriteError",
    "TraceWriter",
    "find_session",
    "is_recordable",
    "iter_trace",
    "latest_session",
    "lock_path",
    "read_trace",
    "trace_file_name",
    "trace_files",
    "trace_locations",
]
