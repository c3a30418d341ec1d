"""The results file (spec B1.2, B1.3): appended one whole line per task, never twice.

:class:`ResultsFile` owns the file descriptor. Each result is one ``write(2)`` of
one line on a descriptor opened with ``O_APPEND``, made on the loop's thread when
the file is on a local disk and in a worker thread otherwise
(``penguin._mounts.run_on_disk``), and never abandoned on cancellation, so Ctrl-C
(even a second one) waits for the line being written and never leaves half of one.
A line is written whole or not at all: when the disk refuses part of it (full, say),
what did land is truncated away and :class:`ResultsWriteError` says why; the batch
stops there and ``--resume`` runs the tasks that have no line yet. An id already in
the file is not written again: that is what makes ``--resume`` and the Ray backend's
retries safe — except an id whose last line says ``aborted``: ``--resume`` runs it
again and appends its new line (the last line for an id wins).

Opening the file without ``resume`` refuses one that already holds results, since
appending a second run's results to a first's would give some ids twice. The file's
folder must exist: a typo in the path is refused, not turned into new folders.

The results can go to something other than a regular file (``-o /dev/stdout``,
a pipe to ``jq``): they are written there as they come, and nothing is read back,
so ``--resume`` needs a regular file.

A results file has one writer. The open descriptor holds an exclusive ``flock`` on it
until it is closed, and the ids are read only once the lock is held, so a second
batch on the same file (the same command started twice, a scheduler's retry while the
first still runs) is refused at once, naming the holder's pid, instead of running the
same tasks again beside the first and interleaving its lines (and a failed write's
truncation could cut the other writer's line). The kernel lets go of the lock when
its process dies, however it dies: nothing stale is left to clear.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from pathlib import Path
from types import TracebackType
from typing import Self, final

from penguin._mounts import run_on_disk

from ._errors import BatchOptionError, ResultsWriteError
from ._results import BatchResult, recorded_statuses

__all__ = ["ResultsFile"]


@final
class ResultsFile:
    """An open results file; use :meth:`open`, then :meth:`append` each result."""

    def __init__(
        self,
        path: Path,
        fd: int,
        ids: set[str],
        unreadable: list[int],
        aborted: set[str] | None = None,
    ) -> None:
        self.path = path
        self._fd = fd
        self.ids = ids
        """The ids the file holds a final result for (those already there, then each
        appended); a resumed batch skips them."""
        self.unreadable_lines = unreadable
        """Lines found on opening that hold no result (their tasks run again)."""
        self.aborted = set() if aborted is None else aborted
        """Ids whose last line on opening said ``aborted``: a resumed batch runs them again."""

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, resume: bool = False) -> Self:
        """Open ``path`` for appending results, creating the file if needed.

        Blocking (call it from a thread in async code). With ``resume`` the ids
        already in the file are read into :attr:`ids` (those whose last result is
        ``aborted`` into :attr:`aborted` instead); without it, a file that holds
        results raises :class:`BatchOptionError`, and so does a folder that does not
        exist or a file that cannot be written. A last line without its newline (torn
        by a crash) gets one, so the next result starts on a line of its own. A
        regular file is locked until :meth:`close` (another opener gets
        :class:`BatchOptionError`); anything else (``/dev/stdout``, a pipe) is only
        written to, and refused with ``resume``.
        """
        file = Path(path)
        ids: set[str] = set()
        aborted: set[str] = set()
        unreadable: list[int] = []
        if not file.parent.is_dir():
            state = "is not a folder" if file.parent.exists() else "does not exist"
            raise BatchOptionError("output", f"cannot write {file}: {file.parent} {state}")
        try:
            fd = os.open(file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise BatchOptionError("output", f"cannot write {file}: {_reason(exc)}") from exc
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # /dev/stdout, a pipe: write only
                if resume:
                    raise BatchOptionError(
                        "resume",
                        f"{file} is not a regular file: --resume reads the results back "
                        "from the -o file, so it needs one",
                    )
                return cls(file, fd, ids, unreadable, aborted)
            _take_lock(fd, file)
            data = file.read_bytes()  # after the lock: no other writer adds to it now
            if data.strip():
                if not resume:
                    raise BatchOptionError(
                        "resume",
                        f"{file} already holds results: pass --resume to continue that "
                        "batch (tasks with a result there are skipped), or choose another "
                        "-o file",
                    )
                statuses, unreadable = recorded_statuses(data.splitlines())
                aborted = {task for task, status in statuses.items() if status == "aborted"}
                ids = set(statuses) - aborted
            if data and not data.endswith(b"\n"):
                try:
                    _write_whole(fd, b"\n")
                except OSError as exc:
                    raise ResultsWriteError(file, _reason(exc)) from exc
        except BaseException:
            os.close(fd)
            raise
        return cls(file, fd, ids, unreadable, aborted)

    async def append(self, result: BatchResult) -> bool:
        """Append ``result`` as one line; False (and nothing written) if its id has one.

        Raises :class:`ResultsWriteError` when the line could not be written whole;
        then nothing of it is in the file and its id counts as having no result.
        """
        if result.id in self.ids:
            return False
        self.ids.add(result.id)
        try:
            await run_on_disk(self.path.parent, _write_whole, self._fd, result.line())
        except OSError as exc:
            self.ids.discard(result.id)
            raise ResultsWriteError(self.path, _reason(exc)) from exc
        return True

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _write_whole(fd: int, data: bytes) -> None:
    """One write(2) per line; a short write is followed by the rest; whole or nothing.

    When a write fails after part of ``data`` landed, the file is truncated back to
    where ``data`` began (the descriptor appends, so those are its last bytes).
    """
    view = memoryview(data)
    written = 0
    try:
        while written < len(view):
            count = os.write(fd, view[written:])
            if count <= 0:
                raise OSError(f"a write made no progress at byte {written} of {len(view)}")
            written += count
    except BaseException:
        if written:
            with contextlib.suppress(OSError):  # then the next open heals the torn line
                os.ftruncate(fd, max(0, os.fstat(fd).st_size - written))
        raise


def _take_lock(fd: int, file: Path) -> None:
    """Hold ``file``'s exclusive lock on ``fd``, or raise naming the process that holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _lock_holder(fd)
        if holder == os.getpid():
            reason = "is already open for results in this process: close that one first"
        else:
            pid = "" if holder is None else f" (pid {holder})"
            reason = f"is being written by another batch{pid}: wait for it to end"
        raise BatchOptionError("output", f"{file} {reason}, or choose another -o file") from None
    except OSError:
        pass  # a file system without locks (some network mounts): as before, unguarded


def _lock_holder(fd: int) -> int | None:
    """The pid holding a ``flock`` on ``fd``'s file, from ``/proc/locks`` (Linux), if known."""
    try:
        info = os.fstat(fd)
        with open("/proc/locks", encoding="ascii", errors="replace") as locks:
            lines = locks.read().splitlines()
    except OSError:
        return None
    device = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1836 0 EOF"; a waiter's line has "->" too
        if "->" in fields or len(fields) < 6 or fields[1] != "FLOCK" or fields[5] != device:
            continue
        with contextlib.suppress(ValueError):
            return int(fields[4])
    return None


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__
