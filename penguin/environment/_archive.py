"""The truncated-output archive: what a truncated call wrote, kept on disk (reference 2).

When a call's output exceeds its visible cap, the model sees only the head, so the full
text is written to ``<scratchpad>/truncated-tool-output/<safeName>-<h>.log`` and the
model is told where. This module owns two things:

- :class:`OutputCapture`, the sans-IO core: it receives every delta of one call (or the
  complete output on the compat path), encodes it as UTF-8 and keeps what the file will
  hold. While the total stays within the budget ``L`` it keeps the exact bytes; once it
  would exceed ``L`` it keeps a fixed head and a rolling tail, so the memory it holds is
  about ``L`` however long the stream, and it renders ``head + GAP_MARKER + tail``.
- :func:`save_capture`, the thin Trio shell: directory and file creation with the
  spec's modes, done in a worker thread, with every OS failure folded into an
  :class:`ArchiveOutcome` whose note goes to the model (and a warning to stderr).

It does not decide *when* to capture (the close-out seeds the capture at the first
truncation and feeds it), never truncates what the model sees, and never deletes an
archive: files live as long as the session scratchpad (2.11).

Invariants:

- the rendered content is at most ``budget`` bytes and is always valid UTF-8;
- exact mode (total ≤ budget) renders exactly the received text; head/tail mode renders a
  prefix of it, the gap marker and a suffix of it, never splitting a code point;
- surrogates are settled at the UTF-8 boundary: a pair split across deltas is re-joined
  (a trailing high surrogate waits for the next delta), a lone one becomes U+FFFD, and
  ``total_bytes``/``head_tail`` already count a waiting high surrogate as the U+FFFD it
  becomes if nothing follows, so they always describe what :meth:`render` returns;
- :func:`save_capture` never raises for an OS error and writes a capture at most once.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
from collections import deque
from pathlib import Path
from typing import Final, final

import attrs
import trio

from penguin._log import logger as _logger

__all__ = [
    "ARCHIVE_BUDGET",
    "ARCHIVE_DIR_NAME",
    "GAP_MARKER",
    "ArchiveOutcome",
    "OutputCapture",
    "archive_file_name",
    "save_capture",
]

ARCHIVE_BUDGET: Final = 8 * 1024 * 1024 - 1
"""L: the most bytes one archive file holds (one below read_file's 8 MiB scan cap)."""

ARCHIVE_DIR_NAME: Final = "truncated-tool-output"
"""The archive directory's name inside the session scratchpad."""

GAP_MARKER: Final = "\n[archive middle truncated]\n"
"""What stands between head and tail in head/tail mode (28 bytes)."""

_GAP_BYTES: Final = GAP_MARKER.encode()
_MIB: Final = 1024 * 1024
_REPLACEMENT_BYTES: Final = "\ufffd".encode()
# How far the leftmost tail chunk may reach before the window before it is sliced off. Deltas
# no larger than this never cost a copy; larger ones are trimmed at once, bounding memory.
_TAIL_SLACK: Final = 64 * 1024
_UNSAFE_NAME_CHARS: Final = re.compile(r"[^A-Za-z0-9_-]")
_SAFE_NAME_MAX: Final = 48
_FILE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def _settle_surrogates(text: str) -> str:
    """Re-join surrogate pairs into code points and turn lone surrogates into U+FFFD."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _is_high_surrogate(char: str) -> bool:
    return "\ud800" <= char <= "\udbff"


def _head_cut(data: bytes) -> int:
    """The largest length ≤ len(data) at which valid UTF-8 ``data`` can be cut whole."""
    end = len(data)
    for start in range(end - 1, max(end - 4, -1), -1):
        lead = data[start]
        if lead & 0xC0 != 0x80:  # not a continuation byte: a code point starts here
            width = 1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
            return end if start + width <= end else start
    return end


def _tail_start(data: bytes, start: int) -> int:
    """The first code-point start at or after ``start`` in valid UTF-8 ``data``."""
    while start < len(data) and data[start] & 0xC0 == 0x80:
        start += 1
    return start


@final
class OutputCapture:
    """The bytes one truncated call would archive, held in memory bounded by the budget.

    Feed it with :meth:`append` (every delta, in full, in order) or :meth:`replace` (the
    compat path: a complete output replaces everything captured), then :meth:`render`.
    ``append`` costs one ``str.encode`` plus constant bookkeeping on ordinary text; the
    careful surrogate path runs only when that encode fails.

    ``saved`` is set by :func:`save_capture`, which refuses a second save.
    """

    __slots__ = (
        "_budget",
        "_exact",
        "_head",
        "_head_budget",
        "_pending",
        "_tail",
        "_tail_budget",
        "_tail_len",
        "_total",
        "saved",
    )

    def __init__(self, budget: int = ARCHIVE_BUDGET) -> None:
        """Start an empty capture that renders at most ``budget`` bytes.

        ``budget`` must leave room for the gap marker (at least 28 bytes).
        """
        if budget < len(_GAP_BYTES):
            raise ValueError(
                f"archive budget {budget} is smaller than the {len(_GAP_BYTES)}-byte gap "
                "marker; use ARCHIVE_BUDGET or a budget of at least that many bytes"
            )
        content = budget - len(_GAP_BYTES)
        self._budget: Final = budget
        self._head_budget: Final = content // 2
        self._tail_budget: Final = content - content // 2
        self.saved = False
        self._reset()

    def _reset(self) -> None:
        self._total = 0  # settled bytes received, excluding a waiting high surrogate
        self._pending = ""  # a trailing high surrogate waiting for its low half
        self._exact: list[bytes] = []  # exact mode: every chunk received
        self._head: bytes | None = None  # head/tail mode: the first head_budget bytes
        self._tail: deque[bytes] = deque()  # head/tail mode: ends with the last bytes received
        self._tail_len = 0

    @property
    def budget(self) -> int:
        """The most bytes :meth:`render` returns (L)."""
        return self._budget

    @property
    def total_bytes(self) -> int:
        """UTF-8 bytes received so far (all of them, not just the ones kept)."""
        return self._total + (len(_REPLACEMENT_BYTES) if self._pending else 0)

    @property
    def head_tail(self) -> bool:
        """True once the total exceeded the budget: the file keeps only head and tail."""
        return self.total_bytes > self._budget

    @property
    def retained_bytes(self) -> int:
        """Bytes currently held in memory for this capture (for tests and diagnostics)."""
        if self._head is None:
            return self._total
        return len(self._head) + self._tail_len

    def append(self, text: str) -> None:
        """Add one delta, in full, after everything captured so far."""
        if not text:
            return
        if self._pending:
            text = self._pending + text
            self._pending = ""
        try:
            data = text.encode()
        except UnicodeEncodeError:
            if _is_high_surrogate(text[-1]):
                self._pending = text[-1]
                text = text[:-1]
            data = _settle_surrogates(text).encode()
        self._push(data)

    def replace(self, text: str) -> None:
        """Make ``text`` (a tool's complete output) the whole capture."""
        self._reset()
        self.append(text)

    def render(self) -> list[bytes]:
        """The file's content as chunks: the exact text, or head + gap marker + tail.

        A high surrogate still waiting for its other half is rendered as U+FFFD. Rendering
        does not change the capture.
        """
        capture = self
        if self._pending:
            capture = self._copy()
            capture._push(_REPLACEMENT_BYTES)
        if capture._head is None:
            return list(capture._exact)
        head = capture._head
        tail = b"".join(capture._tail)
        tail = tail[_tail_start(tail, len(tail) - self._tail_budget) :]
        return [head[: _head_cut(head)], _GAP_BYTES, tail]

    def _copy(self) -> OutputCapture:
        twin = OutputCapture(self._budget)
        twin._total = self._total
        twin._exact = list(self._exact)
        twin._head = self._head
        twin._tail = deque(self._tail)
        twin._tail_len = self._tail_len
        return twin

    def _push(self, data: bytes) -> None:
        if not data:
            return
        self._total += len(data)
        if self._head is not None:
            self._push_tail(data)
            return
        self._exact.append(data)
        if self._total > self._budget:
            self._enter_head_tail()

    def _enter_head_tail(self) -> None:
        chunks, self._exact = self._exact, []
        parts: list[bytes] = []
        need = self._head_budget
        for chunk in chunks:
            if need <= 0:
                break
            part = chunk[:need] if len(chunk) > need else chunk
            parts.append(part)
            need -= len(part)
        self._head = b"".join(parts)
        for chunk in chunks:
            self._push_tail(chunk)

    def _push_tail(self, data: bytes) -> None:
        tail = self._tail
        window = self._tail_budget
        if len(data) >= window:
            tail.clear()
            if len(data) > window:
                data = data[len(data) - window :]
            tail.append(data)
            self._tail_len = len(data)
            return
        tail.append(data)
        self._tail_len += len(data)
        excess = self._tail_len - window
        while excess >= len(tail[0]):
            dropped = len(tail.popleft())
            excess -= dropped
            self._tail_len -= dropped
        if excess > _TAIL_SLACK:
            tail[0] = tail[0][excess:]
            self._tail_len -= excess


def archive_file_name(tool_name: str, tool_call_id: str) -> str:
    """``${safeName}-${h}.log`` for one call (reference 2.7).

    ``safeName`` keeps ``[A-Za-z0-9_-]`` and turns every other character (code point) into
    ``_``, cut to 48 characters, ``tool`` if empty. ``h`` is the first 16 hex digits of
    SHA-256 of the call id as UTF-8 (lone surrogates as U+FFFD, pairs re-joined).
    """
    safe_name = _UNSAFE_NAME_CHARS.sub("_", tool_name)[:_SAFE_NAME_MAX] or "tool"
    digest = hashlib.sha256(_settle_surrogates(tool_call_id).encode()).hexdigest()
    return f"{safe_name}-{digest[:16]}.log"


@final
@attrs.frozen
class ArchiveOutcome:
    """How one save ended: the note for the model, and the path or the failure code."""

    note: str
    """Reference 1.8d(ii): the success (2.9) or failure (2.10) text."""
    path: Path | None
    """The archive's absolute path on success, else None."""
    code: str | None
    """The failure code (``ENOTDIR``, ``EEXIST``, ..., ``UNKNOWN``, ``ALREADY_SAVED``) or None."""


def _failure(code: str, tool_name: str) -> ArchiveOutcome:
    _logger.warning(
        '[penguin] tool "%s" truncated output archive write failed (%s).', tool_name, code
    )
    return ArchiveOutcome(note=f"[output archive failed: {code}]", path=None, code=code)


def _ensure_archive_dir(root: Path) -> None:
    """Create ``root`` as 0700 if missing (ancestors with the default mode); leave it otherwise."""
    try:
        os.mkdir(root, 0o700)
    except FileExistsError:
        return  # someone's directory (or not a directory: opening the file will say ENOTDIR)
    except FileNotFoundError:
        os.makedirs(root.parent, exist_ok=True)
        try:
            os.mkdir(root, 0o700)
        except FileExistsError:
            return
    os.chmod(root, 0o700)  # ours, just made: undo whatever the umask took away


def _write_archive(root: Path, file_name: str, chunks: list[bytes]) -> Path:
    """Create ``root/file_name`` exclusively as 0600, write ``chunks``, return its absolute path.

    A file this call created is removed again if writing it fails, so no half archive stays.
    """
    root = root.absolute()
    _ensure_archive_dir(root)
    path = root / file_name
    fd = os.open(path, _FILE_FLAGS, 0o600)
    try:
        try:
            os.fchmod(fd, 0o600)  # the umask may have narrowed the mode
            for chunk in chunks:
                view = memoryview(chunk)
                while view:
                    written = os.write(fd, view)
                    if written <= 0:
                        raise OSError(errno.EIO, "archive write made no progress")
                    view = view[written:]
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    return path


async def save_capture(
    capture: OutputCapture, root: Path, tool_name: str, tool_call_id: str
) -> ArchiveOutcome:
    """Write ``capture`` to ``root`` (``<scratchpad>/truncated-tool-output``) once.

    Returns the note for the model: ``[output archived: <path>]`` (or the head/tail variant
    naming the limit in MiB) on success, ``[output archive failed: <CODE>]`` on failure,
    where CODE is the errno name or ``UNKNOWN``. A failure is also logged to the
    ``penguin`` logger without the path or the OS message. Never raises for a failed write;
    a capture saved before (whether that save worked or not) fails with ``ALREADY_SAVED``
    without touching the disk. The blocking work runs in a worker thread.
    """
    if capture.saved:
        return _failure("ALREADY_SAVED", tool_name)
    capture.saved = True
    file_name = archive_file_name(tool_name, tool_call_id)
    try:
        chunks = capture.render()
        path = await trio.to_thread.run_sync(_write_archive, Path(root), file_name, chunks)
    except OSError as exc:
        code = errno.errorcode.get(exc.errno, "UNKNOWN") if exc.errno is not None else "UNKNOWN"
        return _failure(code, tool_name)
    except Exception:
        return _failure("UNKNOWN", tool_name)
    if capture.head_tail:
        limit = -(-capture.budget // _MIB)  # ceil(L / 1 MiB), in integers
        note = f"[output archived ({limit} MiB limit; head and tail kept): {path}]"
    else:
        note = f"[output archived: {path}]"
    return ArchiveOutcome(note=note, path=path, code=None)
