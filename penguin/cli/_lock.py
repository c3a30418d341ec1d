"""One front end per session: a lock file next to the session's trace.

Two ``penguin chat`` processes on one session would interleave their records in one
trace and disagree about the context, so a chat holds ``<date dir>/<session_id>.lock``
beside the trace for as long as it has the session open, and a second one is refused
with :class:`SessionLockedError`, naming the holder's pid.

The lock is an advisory ``flock`` on that file, and the file says who holds it (its pid,
one line). A holder that died without cleaning up (SIGKILL, a crash, a lost machine)
leaves the file but not the ``flock``, which the kernel drops with the process: such a
stale lock is taken over silently. A lock is removed when released, and a taker checks
that the file it locked is still the one at the path, so a release racing a take cannot
leave two holders.

Exceptions::

    PenguinError
     └── SessionLockedError   (RuntimeError) another live process has the session open
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Final, final

from penguin._errors import PenguinError
from penguin.trace import DIR_MODE

__all__ = ["SessionLock", "SessionLockedError", "lock_path"]

_SUFFIX: Final = ".lock"


class SessionLockedError(PenguinError, RuntimeError):
    """The session is open in another live process (``pid``, when the file names one)."""

    def __init__(self, session_id: str, pid: int | None, path: Path) -> None:
        self.session_id = session_id
        self.pid = pid
        self.path = path
        holder = f"another penguin chat (pid {pid})" if pid is not None else "another penguin chat"
        super().__init__(
            f"session {session_id} is open in {holder} (lock {path}); "
            "end that chat first, or start a new session"
        )


def lock_path(trace_path: Path, session_id: str) -> Path:
    """The lock file of ``session_id`` whose trace is ``trace_path``: same directory."""
    return trace_path.parent / f"{session_id}{_SUFFIX}"


@final
class SessionLock:
    """A held session lock; :meth:`release` it (or leave the ``with`` block) when done."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, path: Path, session_id: str) -> SessionLock:
        """Take the lock at ``path`` for this process, or raise :class:`SessionLockedError`.

        Blocking (a few system calls): call it through ``trio.to_thread.run_sync`` where
        that matters.
        """
        path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        for _ in range(8):  # each retry follows a holder's release racing this take
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_pid(fd)
                os.close(fd)
                raise SessionLockedError(session_id, holder, path) from None
            except BaseException:
                os.close(fd)
                raise
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # released (and removed) between our open and our flock
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return cls(path, fd)
        raise SessionLockedError(session_id, None, path)

    def release(self) -> None:
        """Remove the lock file and drop the lock (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        os.close(fd)

    def __enter__(self) -> SessionLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None
