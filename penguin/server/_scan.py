"""Finding sessions that have a trace under the root but no row in the index (S4.8).

``penguin run`` and ``penguin chat`` write traces without a server; at start the server
walks ``<root>/<project>/agents/<agent>/traces/`` and indexes every session found there
that it does not know yet, with mode ``allow-all``. A session is known by the first
record of its first trace file (its ``session_meta``); subagent children
(``source: "subagent"``) are part of their parent's work, not sessions of their own,
and are skipped, as are directories and ids that do not have the shapes the API
accepts. Blocking: run it in a worker thread.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection
from pathlib import Path

from penguin import protocol as om
from penguin.approval import DEFAULT_APPROVAL_MODE
from penguin.trace import TraceLocation, trace_locations

from ._index import SessionRow
from ._routes import valid_id, valid_session_id

__all__ = ["iso_time", "unindexed_sessions"]


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


def _first_record(path: Path) -> om.OmniMessage[om.Payload] | None:
    try:
        with open(path, "rb") as file:
            for line in file:
                if line.strip():
                    return om.loads(line)
    except (OSError, om.ProtocolError):
        return None
    return None


def _row_for(project_id: str, agent_id: str, locations: list[TraceLocation]) -> SessionRow | None:
    first = _first_record(locations[0].path)
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
        title=None,
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
