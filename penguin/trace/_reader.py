r"""Reading a trace file back, tolerantly (reference 7.6).

A trace is appended to by a process that may die at any byte, and resumed by a writer
that heals a torn tail by starting on a fresh line. So a reader meets three kinds of
line, and this module owns what happens to each:

- blank (empty or whitespace only): ignored; a healed tail or a spurious heal leaves one;
- not an OmniMessage (bad JSON, bad UTF-8, unknown type, a bad field): *malformed*. The
  last non-empty line of a file being malformed is what a crash leaves behind: it is
  dropped silently, in strict mode too. A malformed line anywhere else is skipped and
  counted (or, with ``strict=True``, raised as
  :class:`~penguin.trace.MalformedTraceError`), and after the file the count is
  reported once on the ``penguin`` logger::

      [trace] skipped 2 malformed line(s) [3, 7] in /…/session-…_001.jsonl

  listing at most the first 20 line numbers (1-based, blank lines counted), followed
  by ``, …`` when there are more;
- an OmniMessage: returned, whatever its kind. A reader does not filter: partials or
  child messages in a foreign trace come back as they are.

Files are streamed line by line in binary (only ``\n`` ends a line; ``\r`` and U+2028
inside JSON text are not line breaks), so a multi-gigabyte trace is never held as one
string. Reading is blocking: call it through ``trio.to_thread.run_sync`` from async code.
It does not locate files (``_files``) or resume sessions.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Final, final

from penguin._log import logger as _logger

from .. import protocol as om
from ._errors import MalformedTraceError

__all__ = ["REPORTED_LINE_NUMBERS", "MalformedLines", "iter_trace", "read_trace"]

REPORTED_LINE_NUMBERS: Final = 20
"""How many malformed line numbers the report lists before ``, …``."""


@final
class MalformedLines:
    """The malformed middle lines of one file: their count and the first line numbers.

    Memory stays bounded however many lines are bad: only the first
    :data:`REPORTED_LINE_NUMBERS` numbers are kept.
    """

    __slots__ = ("count", "first")

    def __init__(self) -> None:
        self.count = 0
        self.first: list[int] = []

    def add(self, line: int) -> None:
        """Count one malformed line (1-based number)."""
        self.count += 1
        if len(self.first) < REPORTED_LINE_NUMBERS:
            self.first.append(line)

    def report(self, path: str | os.PathLike[str]) -> str | None:
        """The spec's one-line report for ``path``, or None when no line was malformed."""
        if not self.count:
            return None
        numbers = ", ".join(str(n) for n in self.first)
        more = ", …" if self.count > len(self.first) else ""
        return (
            f"[trace] skipped {self.count} malformed line(s) [{numbers}{more}] in {os.fspath(path)}"
        )


def iter_trace(
    path: str | os.PathLike[str], *, strict: bool = False
) -> Iterator[om.OmniMessage[om.Payload]]:
    """Yield the messages of one trace file in order, streaming it line by line.

    The rules are the module's: blank lines ignored, a malformed last non-empty line
    dropped silently, other malformed lines skipped and reported once when the file has
    been read to its end (or, with ``strict``, :class:`MalformedTraceError` raised as
    soon as a later non-empty line shows that the bad one was not the last). A
    generator closed early reports nothing. Raises :class:`OSError` if the file cannot
    be opened or read.
    """
    malformed = MalformedLines()
    pending: tuple[int, str] | None = None  # a malformed line not yet known to be the last
    with open(path, "rb") as file:
        for number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            if pending is not None:
                if strict:
                    raise MalformedTraceError(path, *pending)
                malformed.add(pending[0])
                pending = None
            try:
                message = om.loads(line)
            except om.ProtocolError as exc:
                pending = (number, str(exc))
                continue
            yield message
    report = malformed.report(path)
    if report is not None:
        _logger.warning("%s", report)


def read_trace(
    path: str | os.PathLike[str], *, strict: bool = False
) -> list[om.OmniMessage[om.Payload]]:
    """Every message of one trace file, in order (reference 7.6); see :func:`iter_trace`.

    A torn last line (a crash mid-record) is silently ignored; malformed lines before it
    are skipped with one ``[trace] skipped …`` warning for the file, or raise
    :class:`MalformedTraceError` in strict mode. Blocking.
    """
    return list(iter_trace(path, strict=strict))
