"""The process's open-file limit: raised to the hard limit, and how many sessions it holds.

Every running session holds descriptors: its trace and lock files, its model
connection, each running command's pipes and pidfd, its login shell and sandbox
while they start. The soft ``RLIMIT_NOFILE`` (1,024 on many systems) is what caps how
many sessions one process can run: past it, ``open``, ``pipe`` and ``socket`` fail with
``EMFILE`` wherever they happen to be, and tasks fail for a reason that is not theirs.

:func:`raise_open_file_limit` lifts the soft limit to the hard one (an Environment
does on opening; so does a batch before it starts any). :func:`open_file_room` says
how many sessions fit under what is then left: :func:`penguin.batch.run_tasks`
runs no more than that at once, whatever concurrency it was given, and says so.
:func:`out_of_resources` tells such a moment (and one of a process or memory limit)
apart from other errors, so that no one reports it, or remembers it, as something else
(a sandbox "unavailable", say).
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
from typing import Final, final

import attrs

__all__ = [
    "FDS_PER_SESSION",
    "SPARE_FDS",
    "OpenFileRoom",
    "open_file_room",
    "out_of_resources",
    "raise_open_file_limit",
]

FDS_PER_SESSION: Final = 16
"""Descriptors budgeted per running session. ``penguin batch`` at concurrency 22 peaked
at about 11 a session with the sandbox on (its spawner's socket and namespaces) and 6
with it off; 16 leaves room for a background command or two and a subagent's own."""

SPARE_FDS: Final = 64
"""Descriptors kept free beyond the sessions' budget: the results file, the progress
line, Trio's own, an embedding application's next few."""


def raise_open_file_limit() -> int | None:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; the soft limit now (None: none)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    return None if soft == resource.RLIM_INFINITY else soft


@final
@attrs.frozen
class OpenFileRoom:
    """The process's open-file limit, and the descriptors it had open when looked at."""

    limit: int
    open_now: int

    @property
    def sessions(self) -> int:
        """How many sessions fit: :data:`FDS_PER_SESSION` each, after the open and the spare."""
        return max(1, (self.limit - self.open_now - SPARE_FDS) // FDS_PER_SESSION)

    def limit_for(self, sessions: int) -> int:
        """The open-file limit under which ``sessions`` would fit."""
        return self.open_now + SPARE_FDS + sessions * FDS_PER_SESSION


def open_file_room() -> OpenFileRoom | None:
    """Raise the soft limit, then look at what is left under it (``None``: no limit).

    Blocking (it lists ``/proc/self/fd``): call it from a worker thread in async code.
    """
    limit = raise_open_file_limit()
    if limit is None:
        return None
    try:
        open_now = len(os.listdir("/proc/self/fd"))
    except OSError:
        open_now = 0
    return OpenFileRoom(limit, open_now)


def out_of_resources(error: BaseException) -> bool:
    """Whether ``error`` is a resource running out for a moment, not a lasting refusal.

    Out of files (``EMFILE`` for the process, ``ENFILE`` for the system), out of
    processes (``EAGAIN`` from ``fork``: ``RLIMIT_NPROC``, a container's pids limit), or
    out of memory (``ENOMEM``).
    """
    return isinstance(error, OSError) and error.errno in _TRANSIENT


_TRANSIENT: Final = frozenset((errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.ENOMEM))
