"""Finding sessions that have a trace under the root but no row in the index (S4.8).

``penguin run`` and ``penguin chat`` write traces without a server; at start the server
walks ``<root>/<project>/agents/<agent>/traces/`` and indexes every session found there
that it does not know yet, with mode ``allow-all``. A session is known by the first
record of its first trace file (its ``session_meta``); subagent children
(``source: "subagent"``) are part of their parent's work, not sessions of their own,
and are skipped, as are directories and ids that do not have the shapes the API
accepts. A session found this way is titled after its first task (:func:`task_title`
of the trace's first user text), as a session the server runs is at its first task.
:func:`remove_session_files` removes a deleted session's traces, with those of its
subagent children, and their scratchpads (S4.6). Blocking: run them in a worker thread.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Collection
from pathlib import Path
from typing import Final

from penguin import config as cfg
from penguin import protocol as om
from penguin.approval import DEFAULT_APPROVAL_MODE
from penguin.trace import TraceLocation, read_trace, trace_files, trace_locations

from ._index import SessionRow
from ._routes import valid_id, valid_session_id

__all__ = [
    "TITLE_CHARS",
    "iso_time",
    "remove_session_files",
    "task_title",
    "unindexed_sessions",
]

TITLE_CHARS: Final = 60
"""The longest title :func:`task_title` makes (an ellipsis ends a longer one)."""
_FIRST_RECORDS: Final = 50
"""How many records of a trace are read looking for its first task."""


def task_title(text: str) -> str | None:
    """A session's title from its first task: the first non-blank line, spaces collapsed."""
    for line in text.splitlines():
        words = " ".join(line.split())
        if words:
            if len(words) > TITLE_CHARS:
                return words[: TITLE_CHARS - 1].rstrip() + "…"
            return words
    return None


def iso_time(epoch_seconds: float) -> str:
    """``epoch_seconds`` in the protocol's timestamp format (UTC, milliseconds)."""
    whole = int(epoch_seconds)
    millis = int((epoch_seconds - whole) * 1000)
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(whole))}.{millis:03d}Z"


def _directories(parent: Path) -> list[Path]:
    try:
        return sorted(Path(entry.path) for entry in os.scandir(parent) if entry.is_dir())
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []


def _first_records(path: Path) -> list[om.OmniMessage[om.Payload]]:
    """The first record, and then those up to the first user text (at most a few dozen)."""
    found: list[om.OmniMessage[om.Payload]] = []
    try:
        with open(path, "rb") as file:
            for line in file:
                if not line.strip():
                    continue
                try:
                    found.append(om.loads(line))
                except om.ProtocolError:
                    break
                payload = found[-1].payload
                if len(found) >= _FIRST_RECORDS or (
                    isinstance(payload, om.TextPayload)
                    and payload.role == "user"
                    and payload.sender is None
                ):
                    break
    except OSError:
        return found
    return found


def _title(records: list[om.OmniMessage[om.Payload]]) -> str | None:
    for record in records[1:]:
        payload = record.payload
        if isinstance(payload, om.TextPayload) and payload.role == "user" and not record.origin:
            return task_title(payload.text)
    return None


def _row_for(project_id: str, agent_id: str, locations: list[TraceLocation]) -> SessionRow | None:
    records = _first_records(locations[0].path)
    first = records[0] if records else None
    if first is None or not isinstance(first.payload, om.SessionMetaPayload):
        return None
    meta = first.payload
    if meta.source == "subagent" or meta.session_id != locations[0].session_id:
        return None
    mtimes = []
    for location in locations:
        try:
            mtimes.append(location.path.stat().st_mtime)
        except OSError:
            continue
    last_active = iso_time(max(mtimes)) if mtimes else first.timestamp
    return SessionRow(
        session_id=meta.session_id,
        project_id=project_id,
        agent_id=agent_id,
        provider=meta.provider,
        model_id=meta.model_id,
        workspace=meta.workspace,
        approval_mode=DEFAULT_APPROVAL_MODE,
        title=_title(records),
        archived=False,
        created_at=first.timestamp,
        last_active_at=max(last_active, first.timestamp),
    )


def unindexed_sessions(root: str | os.PathLike[str], known: Collection[str]) -> list[SessionRow]:
    """Rows for the top-level sessions under ``root`` whose ids are not in ``known``."""
    found: list[SessionRow] = []
    for project_dir in _directories(Path(root)):
        if not valid_id(project_dir.name):
            continue
        for agent_dir in _directories(project_dir / "agents"):
            if not valid_id(agent_dir.name):
                continue
            by_session: dict[str, list[TraceLocation]] = {}
            for location in trace_locations(agent_dir / "traces"):
                by_session.setdefault(location.session_id, []).append(location)
            for session_id, locations in by_session.items():
                if session_id in known or not valid_session_id(session_id):
                    continue
                row = _row_for(project_dir.name, agent_dir.name, locations)
                if row is not None:
                    found.append(row)
    return found


def remove_session_files(paths: cfg.AgentPaths, session_id: str) -> None:
    """The session's trace files, its subagent children's, and their scratchpads."""
    doomed = [session_id]
    for path in trace_files(paths.traces_dir, session_id):
        try:
            records = read_trace(path)
        except OSError:
            continue
        for record in records:
            if isinstance(record.payload, om.SubagentPayload):
                doomed.append(record.payload.session_id)
    for sid in doomed:
        try:
            cfg.validate_id(sid, "session id")
        except ValueError:
            continue
        for path in trace_files(paths.traces_dir, sid):
            path.unlink(missing_ok=True)
        shutil.rmtree(paths.scratchpad(sid), ignore_errors=True)
