"""The pace of Python's garbage collector while many sessions share one process.

A batch or a server drives tens to hundreds of sessions in one Trio loop. Each step
of each session allocates many short-lived container objects (request bodies, parsed
answers, records, Trio's own tasks and scopes), and CPython's youngest generation is
collected every 700 net allocations by default: measured on ``benchmarks.batch``
(1,000 tasks at concurrency 256) the collector took 4.8 s of 19 s of the process's
CPU, almost all of it young collections that found nothing to free.

:func:`many_sessions_gc` raises the youngest generation's threshold to
:data:`MANY_SESSIONS_THRESHOLD` for as long as it is held: collections then happen
~14 times less often, each over more objects, and the work per object surviving is
the same, so memory stays bounded (cycles are still collected). It is held by
:func:`penguin.batch.run_tasks` and :func:`penguin.server.open_server` only, never by
a single embedded :class:`~penguin.Session`: a program that embeds penguin keeps the
collector it chose. The process's own settings are respected: a threshold already at
or above ours, or 0 (the collector switched off by ``gc.set_threshold(0)``), is left
alone; the thresholds are put back when the last holder lets go, unless something
else changed them meanwhile.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

__all__ = ["MANY_SESSIONS_THRESHOLD", "many_sessions_gc"]

MANY_SESSIONS_THRESHOLD: Final = 10_000
"""The youngest generation's threshold while many sessions share the process."""

_lock = threading.Lock()
_holders = 0
_saved: tuple[int, int, int] | None = None  # the thresholds to put back, if we raised them


@contextmanager
def many_sessions_gc() -> Iterator[None]:
    """Collect the youngest generation less often while the block runs.

    Re-entrant and safe across threads and Trio runs in one process (a batch's
    worker thread and a server at once): the first holder raises the threshold, the
    last one restores it.
    """
    global _holders, _saved
    with _lock:
        _holders += 1
        if _holders == 1:
            current = gc.get_threshold()
            if 0 < current[0] < MANY_SESSIONS_THRESHOLD:
                _saved = current
                gc.set_threshold(MANY_SESSIONS_THRESHOLD, current[1], current[2])
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _saved is not None:
                saved, _saved = _saved, None
                if gc.get_threshold()[0] == MANY_SESSIONS_THRESHOLD:
                    gc.set_threshold(*saved)
