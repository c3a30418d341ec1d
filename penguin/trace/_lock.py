"""One writer per session: a lock file beside the session's trace (chat.md C5.6).

Two processes writing one session would interleave their records in one trace and
disagree about the context, so whoever opens a session for writing — ``Agent.session``
and ``Agent.resume_session``, for ``penguin chat``, ``penguin run``, ``penguin server``
or any library caller, and a subagent's child session for its parent — holds
``<date dir>/<session_id>.lock`` beside its trace for as long as the session is open,
and any other process is refused at once with
:class:`SessionLockedError`: ``session SESSION_ID is open in <surface> (pid N)``.
Reading a trace (listing, a resumed chat's history, the server's page) never looks at
the lock and is never blocked.

The lock is an advisory ``flock`` on that file, and the file says who holds it (one
line: the pid, a space, the surface). A holder that died without cleaning up (SIGKILL, a
crash, a lost machine) leaves the file but not the ``flock``, which the kernel drops
with the process: such a stale lock is taken over silently. A lock is removed when
released, and a taker checks that the file it locked is still the one at the path, so
a release racing a take cannot leave two holders. ``flock`` belongs to the open file,
so a second take in the *same* process is refused too.

Exceptions::

    PenguinError
     └── SessionLockedError   (RuntimeError) another process has the session open
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Final, final

from penguin._errors import PenguinError

from ._writer import _prepare_dirs

__all__ = ["DEFAULT_SURFACE", "SessionLock", "SessionLockedError", "lock_path"]

_SUFFIX: Final = ".lock"


DEFAULT_SURFACE: Final = "a penguin program"
"""Who holds a lock whose holder did not say (a library caller, an older penguin)."""


@final
class SessionLockedError(PenguinError, RuntimeError):
    """The session is open for writing in another live process.

    ``pid`` and ``surface`` are the holder's as its lock file says (``None`` and
    :data:`DEFAULT_SURFACE` when it says nothing); ``path`` is the lock file. The
    message is the spec's: ``session SESSION_ID is open in <surface> (pid N)``.
    """

    def __init__(self, session_id: str, pid: int | None, surface: str | None, path: Path) -> None:
        self.session_id = session_id
        self.pid = pid
        self.surface = surface or DEFAULT_SURFACE
        self.path = path
        pid_note = f" (pid {pid})" if pid is not None else ""
        super().__init__(f"session {session_id} is open in {self.surface}{pid_note}")


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
    def acquire(cls, path: Path, session_id: str, surface: str | None = None) -> SessionLock:
        """Take the lock at ``path`` for this process, or raise :class:`SessionLockedError`.

        ``surface`` names this holder in a refusal another process gets (``penguin
        chat``...; a line break in it is replaced by a space). Blocking (a few system
        calls): call it through ``trio.to_thread.run_sync`` where that matters.
        """
        _prepare_dirs(path.parent.parent, path.parent)  # as the trace's own: 0700
        for _ in range(8):  # each retry follows a holder's release racing this take
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid, holder = _read_holder(fd)
                os.close(fd)
                raise SessionLockedError(session_id, pid, holder, path) from None
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
            name = " ".join((surface or "").split())
            try:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()} {name}".rstrip().encode() + b"\n")
            except OSError as exc:  # a full disk, say: the lock is not kept, and says where
                _discard(path, fd)
                raise OSError(exc.errno, exc.strerror, os.fspath(path)) from exc
            except BaseException:
                _discard(path, fd)
                raise
            return cls(path, fd)
        raise SessionLockedError(session_id, None, None, path)

    @staticmethod
    def probe(path: Path, session_id: str) -> None:
        """Raise :class:`SessionLockedError` if another open file holds the lock at ``path``.

        Takes nothing and leaves the file as it is (a stale one included): for a
        front end that wants to refuse before it draws anything, and then opens the
        session, which takes the lock for real. Blocking (a few system calls).
        """
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                pid, holder = _read_holder(fd)
                raise SessionLockedError(session_id, pid, holder, path) from None
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

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


def _discard(path: Path, fd: int) -> None:
    """Let go of a lock taken but not kept: its file goes (as at a release), then the lock."""
    with contextlib.suppress(OSError):
        os.unlink(path)
    os.close(fd)


def _read_holder(fd: int) -> tuple[int | None, str | None]:
    """The pid and the surface a lock file names (an older one names only the pid)."""
    try:
        text = os.pread(fd, 256, 0).decode("utf-8", "replace").strip()
    except OSError:
        return None, None
    pid_text, _, surface = text.partition(" ")
    try:
        pid = int(pid_text)
    except ValueError:
        return None, None
    return pid, surface.strip() or None
