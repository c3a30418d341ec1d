"""The JSON the server sends for its objects: session info, task state, processes, models.

Owns the shape of every object the routes return or the channels publish that is built
from server state (S4.4, S5.5, S6.2, S7.3 and the reference's extra fields, issue 22);
it reads what it is given and decides nothing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from penguin import config as cfg
from penguin.environment import BackgroundCommand

from ._approvals import PendingApproval
from ._index import SessionRow

__all__ = [
    "approval_request",
    "model_row",
    "process_row",
    "session_info",
    "task_state",
]

_MASK: Final = "********"
"""Stands for a configured API key: the key itself is never sent."""


def task_state(state: str, failure: str | None = None) -> dict[str, object]:
    """A ``task_state`` event (S7.2), with the failure as its ``message``."""
    if failure is not None:
        return {"type": "task_state", "state": state, "message": failure}
    return {"type": "task_state", "state": state}


def approval_request(pending: PendingApproval) -> dict[str, object]:
    """An ``approval_request`` event (S6.2)."""
    return {"type": "approval_request", **pending.describe()}


def session_info(
    row: SessionRow,
    *,
    state: str,
    pending: int,
    allow_list: list[str],
    tasked: bool,
    sandbox: Mapping[str, object],
    has_trace: bool,
    path: Path | None,
    trace_path: bool,
) -> dict[str, object]:
    """A session's JSON (S4.4): its row, its live state, its sandbox fields.

    ``tasked``: a task has run since the server opened it (with a ``lastActiveAt`` past
    its creation, that makes ``hasTrace``).
    """
    tasked = row.last_active_at != row.created_at or tasked
    info: dict[str, object] = {
        "sessionId": row.session_id,
        "projectId": row.project_id,
        "agentId": row.agent_id,
        "provider": row.provider,
        "modelId": row.model_id,
        "workspace": row.workspace,
        "approvalMode": row.approval_mode,
        **sandbox,
        "title": row.title,
        "archived": row.archived,
        "state": state,
        "pendingApprovalCount": pending,
        "allowList": allow_list,
        "createdAt": row.created_at,
        "lastActiveAt": row.last_active_at,
        "hasTrace": has_trace and tasked,
    }
    info["status"] = info["state"]  # the reference's name for it (issue 22)
    if row.title is None:
        del info["title"]  # absent rather than null, as the reference sends it
    if trace_path:
        info["tracePath"] = None if path is None else str(path)
    return info


def process_row(command: BackgroundCommand) -> dict[str, object]:
    """S5.5's fields, and the reference's (``pid``, ``cmd``, ``cwd``, ``startedAt``, ``running``).

    ``serviceUrl`` is left out when there is none: the reference's web app reads any
    value present, null included, as a URL (issue 22).
    """
    row: dict[str, object] = {
        "processId": command.process_id,
        "command": command.cmd,
        "state": "running" if command.running else "exited",
        "exitCode": None,
        "pid": command.pid,
        "cmd": command.cmd,
        "cwd": command.cwd,
        "startedAt": _timestamp(command.started_at),
        "running": command.running,
    }
    if command.service_url is not None:
        row["serviceUrl"] = command.service_url
    return row


def model_row(entry: cfg.ModelEntry, *, default: bool) -> dict[str, object]:
    """One model as the API lists it; the key itself never, only that one is set (issue 22)."""
    row: dict[str, object] = {
        "provider": entry.provider,
        "modelId": entry.model_id,
        "vision": entry.vision,
        "isDefault": default,
    }
    if entry.context_window is not None:
        row["contextWindow"] = entry.context_window
    if entry.api_key:
        row["credential"] = {"apiKeyMasked": _MASK}
    elif entry.api_key_env and os.environ.get(entry.api_key_env):
        row["envKeyMasked"] = _MASK
    return row


def _timestamp(epoch_seconds: float) -> str:
    """``epoch_seconds`` as the protocol writes times (``2026-11-29T21:28:46.123Z``)."""
    millis = int(epoch_seconds * 1000)
    second = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(millis // 1000))
    return f"{second}.{millis % 1000:03d}Z"
