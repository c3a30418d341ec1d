"""The results file (spec B1.2, B1.3): appended one whole line per task, never twice.

:class:`ResultsFile` owns the file descriptor. Each result is one ``write(2)`` of
one line on a descriptor opened with ``O_APPEND``, made in a worker thread that is
not abandoned on cancellation, so Ctrl-C (even a second one) waits for the line
being written and never leaves half of one. An id already in the file is not
written again: that is what makes ``--resume`` and the Ray backend's retries safe.

Opening the file without ``resume`` refuses one that already holds results, since
appending a second run's results to a first's would give some ids twice.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType
from typing import Self, final

import trio

from ._errors import BatchOptionError
from ._results import BatchResult, recorded_ids

__all__ = ["ResultsFile"]


@final
class ResultsFile:
    """An open results file; use :meth:`open`, then :meth:`append` each result."""

    def __init__(self, path: Path, fd: int, ids: set[str], unreadable: list[int]) -> None:
        self.path = path
        self._fd = fd
        self.ids = ids
        """The ids the file holds a result for (those already there, then each appended)."""
        self.unreadable_lines = unreadable
        """Lines found on opening that hold no result (their tasks run again)."""

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, resume: bool = False) -> Self:
        """Open ``path`` for appending results, creating it (and its directory) if needed.

        Blocking (call it from a thread in async code). With ``resume`` the ids
        already in the file are read into :attr:`ids`; without it, a file that holds
        results raises :class:`BatchOptionError`. A last line without its newline
        (torn by a crash) gets one, so the next result starts on a line of its own.
        """
        file = Path(path)
        ids: set[str] = set()
        unreadable: list[int] = []
        try:
            data = file.read_bytes()
        except FileNotFoundError:
            data = b""
        if data.strip():
            if not resume:
                raise BatchOptionError(
                    "resume",
                    f"{file} already holds results: pass --resume to continue that batch "
                    "(tasks with a result there are skipped), or choose another -o file",
                )
            ids, unreadable = recorded_ids(data.splitlines())
        file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        if data and not data.endswith(b"\n"):
            _write_all(fd, b"\n")
        return cls(file, fd, ids, unreadable)

    async def append(self, result: BatchResult) -> bool:
        """Append ``result`` as one line; False (and nothing written) if its id has one."""
        if result.id in self.ids:
            return False
        self.ids.add(result.id)
        await trio.to_thread.run_sync(_write_all, self._fd, result.line())
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


def _write_all(fd: int, data: bytes) -> None:
    # One write(2) per line; a short write (a full disk) is followed by the rest.
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
