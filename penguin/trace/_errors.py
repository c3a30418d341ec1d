"""The trace package's exceptions.

::

    PenguinError                       the root of every penguin exception (penguin._errors)
     └── TraceError                    anything this package raises about a trace itself
          ├── MalformedTraceError      (also ValueError) a strict read met a line that is not
          │                            an OmniMessage before the end of the file
          ├── TraceAppendError         (also OSError) a record could not be appended whole:
          │                            a write(2) made no progress
          └── TraceWriteError          (also OSError) the disk refused a record: what a
                                       writer's ``failure`` holds (``trace write failed: …``)

Everything else the writer meets is the operating system's own :class:`OSError`
(``ENOSPC``, ``EACCES``, ``ENOTDIR``, ``EFBIG``...), raised unchanged to the caller of
that one append, so ``except OSError`` covers every way an append can fail on disk.
Invalid constructor arguments (a session id with a ``/``, an index below 1) are plain
:class:`ValueError`.

The engine never lets these escape a run: :meth:`TraceWriter.record` and
:meth:`TraceWriter.try_rotate` log them as ``[trace] write failed: …`` /
``[trace] rotate failed: …`` (reference 7.5). What they log is also kept: the first
record the disk refused sets :attr:`TraceWriter.failure` to a :class:`TraceWriteError`,
which a surface maps to the end of its task (the CLI exits non-zero with its text, the
server fails the task with it).
"""

from __future__ import annotations

import os
from typing import Any, final

from penguin._errors import PenguinError

__all__ = ["MalformedTraceError", "TraceAppendError", "TraceError", "TraceWriteError"]


class TraceError(PenguinError):
    """Base class of the errors this package raises about a trace file."""


@final
class MalformedTraceError(TraceError, ValueError):
    """A strict read found a line that is not an OmniMessage, and it is not the last one.

    Attributes: ``path`` (the file, as given), ``line`` (1-based physical line number)
    and ``reason`` (why it did not parse). A torn last line is never an error, not even
    in strict mode: it is what a crash leaves behind. Read without ``strict`` to skip
    malformed lines and get one warning per file instead.
    """

    path: str
    line: int
    reason: str

    def __init__(self, path: str | os.PathLike[str], line: int, reason: str) -> None:
        self.path = os.fspath(path)
        self.line = line
        self.reason = reason
        super().__init__(
            f"{self.path}:{line}: not an OmniMessage ({reason}); "
            "read with strict=False to skip malformed lines"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.line, self.reason))


@final
class TraceAppendError(TraceError, OSError):
    """A write(2) of a trace record made no progress (reference 7.3).

    The message is exactly ``Trace append made no progress at byte ${written} of
    ${total}``. ``written`` and ``total`` count bytes of the record as it was submitted
    to the file (including a leading healing newline); ``path`` is the trace file.
    When ``written`` is above zero the file now ends mid-record, and the writer starts
    its next record on a fresh line.
    """

    path: str
    written: int
    total: int

    def __init__(self, path: str | os.PathLike[str], written: int, total: int) -> None:
        self.path = os.fspath(path)
        self.written = written
        self.total = total
        super().__init__(f"Trace append made no progress at byte {written} of {total}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.written, self.total))


@final
class TraceWriteError(TraceError, OSError):
    """The disk refused a trace record; nothing of that record stays in the file.

    The message is ``trace write failed: ${reason}``, where ``reason`` is the
    system's wording (``No space left on device``, ``Permission denied``...) or, for a
    write that made no progress, :class:`TraceAppendError`'s. ``errno`` is the
    system's; ``path`` the trace file; ``__cause__`` the original :class:`OSError`.
    """

    path: str
    reason: str

    def __init__(self, path: str | os.PathLike[str], reason: str, errno: int | None = None) -> None:
        self.path = os.fspath(path)
        self.reason = reason
        super().__init__(f"trace write failed: {reason}")
        self.errno = errno

    def __str__(self) -> str:
        return f"trace write failed: {self.reason}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.reason, self.errno))

    @classmethod
    def from_os_error(cls, path: str | os.PathLike[str], exc: OSError) -> TraceWriteError:
        """The failure ``exc`` (raised writing ``path``) as one of these."""
        if isinstance(exc, TraceWriteError):
            return exc
        reason = exc.strerror if exc.strerror else (str(exc) or type(exc).__name__)
        failure = cls(path, reason, exc.errno)
        failure.__cause__ = exc
        return failure
