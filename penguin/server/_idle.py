"""The idle sweep: open sessions idle for ``idle_close`` seconds are closed (S1.1).

A session whose Session is open with no task running and no background command or
background subagent alive for ``idle_close`` seconds (``penguin server --idle-close``)
is closed — its Environment ends its MCP servers and everything else it started — and
stays listed; its next task reopens it from its trace, as after a restart. The sweep
runs every :func:`sweep_interval` seconds and takes the session's ``opening`` lock,
so it never races a task that is starting.
"""

from __future__ import annotations

from typing import Final, final

import trio

from penguin import _log
from penguin.agent import Session

from ._live import Live, LiveSessions

__all__ = ["IdleSweep", "sweep_interval"]

logger: Final = _log.child("server")

_SWEEP_MAX: Final = 30.0


def sweep_interval(idle_close: float) -> float:
    """How often idleness is checked: a quarter of ``idle_close``, within 0.05-30 s."""
    return min(max(idle_close / 4, 0.05), _SWEEP_MAX)


@final
class IdleSweep:
    """Closes ``live``'s idle sessions; :meth:`run` is the nursery's task."""

    def __init__(self, live: LiveSessions) -> None:
        self._live = live
        self.sweeps = 0
        """How many idle sweeps have run (tests wait on it)."""

    async def run(self, idle_close: float) -> None:
        """Close every session idle for ``idle_close`` seconds, forever."""
        interval = sweep_interval(idle_close)
        while True:
            await trio.sleep(interval)
            for live in self._live:
                await self._close_if_idle(live, idle_close)
            self.sweeps += 1

    async def _close_if_idle(self, live: Live, idle_close: float) -> None:
        retiring = self._live.retiring
        if live.holder is None or self._live.closing or live.session_id in retiring:
            return
        now = trio.current_time()
        session = live.session
        if live.busy or (session is not None and _keeps_open(session)):
            live.idle_since = now
            return
        if now - live.idle_since < idle_close:
            return
        async with live.opening:  # a task being started waits until this one is closed
            if live.busy or live.holder is None or live.session_id in retiring:
                return
            logger.info(
                "penguin server: closing session %s after %.0f s idle",
                live.session_id,
                now - live.idle_since,
            )
            await self._live.release(live)
            live.holder = None


def _keeps_open(session: Session) -> bool:
    """Whether a background command or background subagent of ``session`` is alive."""
    environment = session.environment
    if environment.has_running_background_subagents():
        return True
    return any(command.running for command in environment.list_background_commands())
