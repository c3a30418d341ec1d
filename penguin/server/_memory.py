"""Freed heap memory handed back to the system after sessions close (issue 21 item 5).

A long-lived server builds and drops each session's state (its conversation, its
channel's replay buffer, its Environment's buffers) from the loop and from many worker
threads. glibc's malloc keeps what is freed inside its heaps, fragmented among what
still lives, so the resident size creeps up although nothing outlives its session:
measured under ``benchmarks/soak.py``, Python's allocated blocks and malloc's bytes in
use stay flat while the free space inside malloc's heaps grows about 1 MB a minute.

:class:`MemoryTrim` asks malloc to return those free pages (``malloc_trim(0)``, in a
worker thread: it takes the heaps' locks, not the loop) at most once per
:data:`TRIM_INTERVAL` seconds, and only when a session was closed since the last time
(:attr:`~._live.LiveSessions.released` moved), so an idle server does nothing. It
changes no behaviour and frees nothing that is in use; on a C library without
``malloc_trim`` (musl, macOS) it is a no-op.
"""

from __future__ import annotations

import ctypes
from collections.abc import Awaitable, Callable
from typing import Final, final

import trio

__all__ = ["TRIM_INTERVAL", "MemoryTrim", "malloc_trim", "trim_in_thread"]

TRIM_INTERVAL: Final = 10.0
"""Seconds between two trims at most."""


def _find_malloc_trim() -> Callable[[], None] | None:
    try:
        function = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_size_t]
    function.restype = ctypes.c_int

    def trim() -> None:
        function(0)

    return trim


malloc_trim: Final = _find_malloc_trim()
"""glibc's ``malloc_trim(0)``, or None where the C library has none."""


async def trim_in_thread() -> None:
    """``malloc_trim(0)`` in a worker thread; nothing where there is none."""
    if malloc_trim is not None:
        await trio.to_thread.run_sync(malloc_trim)


@final
class MemoryTrim:
    """Trims malloc's heaps after sessions closed; :meth:`run` is the nursery's task.

    ``released`` counts the Sessions closed so far; ``trim`` is the trim itself.
    """

    def __init__(
        self,
        released: Callable[[], int],
        interval: float = TRIM_INTERVAL,
        trim: Callable[[], Awaitable[None]] = trim_in_thread,
    ) -> None:
        self._released = released
        self._interval = interval
        self._trim = trim
        self._seen = released()
        self.trims = 0
        """How many trims have run (tests read it)."""

    async def run(self) -> None:
        """Every ``interval`` seconds: trim, if a session was closed since the last trim."""
        if malloc_trim is None and self._trim is trim_in_thread:
            return
        while True:
            await trio.sleep(self._interval)
            released = self._released()
            if released != self._seen:
                self._seen = released
                await self._trim()
                self.trims += 1
