"""The sandbox of server sessions (spec/server.md S4.1/S4.2, spec/sandbox.md X1.3, X3.1).

Owns three things the session manager asks for:

- the policy of a new session from the creation request's ``sandboxMode``/``network``
  (over the project file's ``[sandbox]``, over the default ``workspace-write`` with the
  network on), refusing with 400 ``sandbox_unavailable`` when a chosen mode cannot be
  enforced and falling back to ``off`` with one warning when only the default asked;
- the ``sandboxMode``/``network`` of a session's JSON: what it was created with, or what
  its trace's ``session_meta`` records (``off`` when nothing), read once and remembered
  (a session's policy never changes);
- the refusal of a PATCH that carries either field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, final

import trio

from penguin._log import warn
from penguin.agent import Agent
from penguin.environment.sandbox import MODES, SandboxPolicy, probed, recorded_policy, refusal
from penguin.environment.sandbox import warning as fallback_warning
from penguin.trace import TraceLocation, find_session

from ._errors import ApiError

__all__ = ["SandboxInfo", "refuse_sandbox_update", "sandbox_fields", "session_policy"]

DEFAULT_MODE: Final = "workspace-write"
_OFF: Final = {"sandboxMode": "off", "network": True}


def sandbox_fields(body: Mapping[str, object]) -> tuple[str | None, bool | None]:
    """``sandboxMode`` and ``network`` of a creation body (400 ``invalid_request`` if bad)."""
    mode = body.get("sandboxMode")
    if mode is not None and mode not in MODES:
        raise ApiError(
            400,
            "invalid_request",
            f"The field 'sandboxMode' must be one of {', '.join(MODES)}, not {mode!r}.",
        )
    network = body.get("network")
    if network is not None and not isinstance(network, bool):
        raise ApiError(400, "invalid_request", "The field 'network' must be a boolean.")
    return (None if mode is None else str(mode)), network


def refuse_sandbox_update(body: object) -> None:
    """A PATCH carrying ``sandboxMode`` or ``network``: 400 ``invalid_request``."""
    if isinstance(body, dict) and ("sandboxMode" in body or "network" in body):
        raise ApiError(
            400,
            "invalid_request",
            "sandboxMode and network are set when a session is created: a running "
            "session's processes cannot change policy.",
        )


async def session_policy(agent: Agent, mode: str | None, network: bool | None) -> SandboxPolicy:
    """The policy of a new session (X1.3); 400 ``sandbox_unavailable`` per X3.1."""
    base = await trio.to_thread.run_sync(agent.sandbox_policy)
    chosen = base is not None or mode is not None or network is not None
    if base is None:
        base = SandboxPolicy(mode=DEFAULT_MODE)
    policy = SandboxPolicy(
        mode=mode if mode is not None else base.mode,
        network=network if network is not None else base.network,
        writable_roots=base.writable_roots,
        writable_tmp=base.writable_tmp,
        protected=base.protected,
        data_root=base.data_root,
    )
    if policy.enforced:
        reason = (await probed()).reason
        if reason is not None:
            if chosen:
                raise ApiError(400, "sandbox_unavailable", refusal(reason))
            warn(fallback_warning(reason))
            return SandboxPolicy(mode="off")
    return policy


def _from_trace(traces: Path, session_id: str) -> dict[str, object]:
    return _recorded(find_session(traces, session_id))


def _recorded(location: TraceLocation | None) -> dict[str, object]:
    """The two fields as the session's newest trace file (``location``) records them."""
    if location is None:
        return dict(_OFF)
    try:
        with location.path.open("rb") as handle:
            first = json.loads(handle.readline())
        recorded = first["payload"].get("sandbox")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return dict(_OFF)
    policy = recorded_policy(recorded if isinstance(recorded, dict) else None, None)
    if policy is None:
        return dict(_OFF)
    return {"sandboxMode": policy.mode, "network": policy.network_on}


@final
class SandboxInfo:
    """Each session's ``sandboxMode``/``network``, remembered once known."""

    def __init__(self) -> None:
        self._known: dict[str, dict[str, object]] = {}

    def remember(self, session_id: str, policy: SandboxPolicy) -> None:
        """What a session was created (or resumed) with."""
        self._known[session_id] = {"sandboxMode": policy.mode, "network": policy.network_on}

    def forget(self, session_id: str) -> None:
        """A deleted session's entry (a long-lived server must not keep every one)."""
        self._known.pop(session_id, None)

    async def learn(self, newest: Mapping[str, TraceLocation | None]) -> None:
        """Read at once what the sessions of ``newest`` (id: its newest trace file) record.

        For a listing: one trip to a worker thread for every session not known yet, with
        the files already found, where :meth:`fields` would search the traces directory
        once per session (a first listing of 900 sessions took 3.5 s).
        """
        unknown = {key: where for key, where in newest.items() if key not in self._known}
        if unknown:
            read = await trio.to_thread.run_sync(
                lambda: {key: _recorded(where) for key, where in unknown.items()}
            )
            for key, known in read.items():
                self._known.setdefault(key, known)  # one created meanwhile knows better

    async def fields(self, session_id: str, traces: Path) -> dict[str, Any]:
        """The two fields of the session's JSON."""
        known = self._known.get(session_id)
        if known is None:
            known = await trio.to_thread.run_sync(_from_trace, traces, session_id)
            self._known[session_id] = known
        return dict(known)
