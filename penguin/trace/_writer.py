r"""The append-only trace writer (reference 7.1–7.5).

A session's trace is a JSON Lines file per model context,
``<traces_dir>/<yyyy-mm-dd>/<session_id>_<NNN>.jsonl`` (see ``_files``), holding one
OmniMessage per line. This module owns *appending* to it: which messages are recorded,
how one record reaches the disk, the order of concurrent appends, and healing a tail
left torn by a crash. It does not read traces back (``_reader``), decide when to
rotate (the engine does, when compaction starts a new context), or resume a session.

How one record is written, and why:

- The record is the message's compact JSON (``om.dumps``) plus ``\n``, encoded as
  UTF-8; a lone surrogate, which UTF-8 cannot carry, is written as its JSON escape
  (``\udc80``) so the line stays valid UTF-8 and reads back as the same string.
- The file is opened ``O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC`` for that one record
  (:meth:`TraceWriter.append`), or for one burst of records (:meth:`TraceWriter.record_many`,
  the trace recorder's path), and closed again: no descriptor outlives its call, no
  seek, so existing bytes are never overwritten and whatever else appended to the file
  in between is respected. A burst keeps to one file (a rotation ends it), so rotation
  and resume see exactly what they would see with a descriptor per record; sharing
  it saves two system calls per record (in a worker thread, each is a GIL hand-over).
- The whole record goes to ONE ``os.write``. A record is never chunked, so a process
  killed between two records never leaves half of one; only the OS can cut a write
  short (a full disk, a file size limit, a fatal signal during a huge write). The loop
  around ``os.write`` exists only for that case: it continues after a short write and
  fails on a write that makes no progress (:class:`TraceAppendError`).
- A record is written whole or not at all: when a write fails after part of the record
  reached the file, the file is truncated back to where the record began (the writer
  knows how many bytes of it landed). Only if that truncation fails too is the tail
  left torn, and then healed by the next record (below).
- The disk refusing a record (any :class:`OSError`) is a fault, not only a log line:
  the first one is kept as :attr:`TraceWriter.failure`, a :class:`TraceWriteError`
  (``trace write failed: No space left on device``), and :meth:`TraceWriter.wait_failure`
  wakes whoever waits for it, so a surface ends its task with that text. The writer
  itself goes on trying the records that follow (the disk may have room again).
- Files are created with mode ``0o600`` and the directories this writer creates
  (``traces_dir`` and the date directory) with ``0o700``: traces hold whole
  conversations and tool outputs, which is user data that may include secrets. The
  umask can only narrow these modes; pre-existing files and directories keep theirs.
- The system calls of an append or a burst (``open``, ``write``, ``close``) run on the
  loop's thread when the traces folder is on a local disk, where they take
  microseconds, and in a worker thread otherwise (a file server may stop answering):
  ``penguin._mounts.run_on_disk``, which saves each burst a thread hop. Either way
  the call is not abandoned on cancellation: once a record has started, it lands (or
  fails) whole before the caller sees the cancellation.

Invariants:

- Appends and rotations on one writer run one at a time in submission order (the order
  in which :meth:`TraceWriter.append` / :meth:`TraceWriter.rotate` were called),
  through a :class:`trio.StrictFIFOLock`; an append submitted after a rotation lands in
  the new file.
- A failed append raises to its own caller only; the appends queued behind it still run.
- The first append to an index creates the date directory and probes a pre-existing
  file once: non-empty and not ending in ``\n`` means torn. While the tail is torn
  (from that probe, or because an append of this writer failed after writing some
  bytes and could not cut them back), the next record starts with an extra ``\n``;
  a record that lands whole clears it. A spurious heal costs one blank line, which
  readers ignore. A probe that fails (the date path is not a directory, say) fails
  that append and is retried by the next.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, final

import attrs
import trio

from penguin._kept import Kept
from penguin._log import logger as _logger
from penguin._mounts import run_on_disk

from .. import protocol as om
from ._errors import TraceAppendError, TraceWriteError
from ._files import check_path_component, local_date_dir, trace_file_name

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "AppendProgress",
    "TraceWriter",
    "encode_record",
    "is_recordable",
    "write_record",
]

FILE_MODE: Final = 0o600
"""Mode of a trace file this writer creates (before the umask)."""
DIR_MODE: Final = 0o700
"""Mode of ``traces_dir`` and of a date directory this writer creates (before the umask)."""

_O_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
_APPEND_FLAGS: Final = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _O_CLOEXEC


def is_recordable(message: om.OmniMessage[om.Payload]) -> bool:
    """Whether the trace records ``message`` (reference 7.2).

    Recorded: messages of this session (no ``origin``) that are a complete
    ``model_msg``, any ``event_msg`` or ``session_meta``. Skipped: every ``partial_*``
    (the producer appends the complete message when the stream ends) and every
    origin-tagged message, a child's ``session_meta`` included (the child has its own
    trace; the parent records a ``subagent`` pointer event instead).
    """
    if message.origin:
        return False
    return (
        om.is_complete_model_message(message) or om.is_event(message) or om.is_session_meta(message)
    )


def encode_record(message: om.OmniMessage[om.Payload]) -> bytes:
    r"""The bytes of one record: compact JSON, ``\n``, UTF-8 (lone surrogates escaped).

    A ``tool_list_ready`` record (15 KB for the built-in tools, in every session) takes
    its tool list's JSON from the last few lists encoded, spliced in where the empty
    list is: the same text as encoding it whole, at a tenth of the CPU.
    """
    payload = message.payload
    if isinstance(payload, om.ToolListReadyPayload) and payload.tools:
        text = _tool_list_record(message, payload)
    else:
        text = om.dumps(message)
    return (text + "\n").encode("utf-8", "backslashreplace")


_EMPTY_LIST_END: Final = '"tools":[]}}'
_LIST_PREFIX: Final = '{"type":"tool_list_ready","tools":'


def _tool_list_json(tools: tuple[om.ToolDefinition, ...]) -> str:
    """The JSON text of ``tools`` as a record holds it."""
    payload = om.dumps(
        om.OmniMessage(timestamp="", type="event_msg", payload=om.ToolListReadyPayload(tools=tools))
    )
    start = payload.index(_LIST_PREFIX) + len(_LIST_PREFIX)
    return payload[start:-2]


_TOOL_LISTS: Final = Kept[tuple[om.ToolDefinition, ...], str](_tool_list_json, 8)
_TOOL_LISTS_LOCK: Final = threading.Lock()  # Trio runs in several threads may record at once


def _tool_list_record(message: om.OmniMessage[om.Payload], payload: om.ToolListReadyPayload) -> str:
    bare = om.dumps(attrs.evolve(message, payload=attrs.evolve(payload, tools=())))
    if not bare.endswith(_EMPTY_LIST_END):  # a shape this splice does not know: whole
        return om.dumps(message)
    with _TOOL_LISTS_LOCK:
        tools = _TOOL_LISTS.get(payload.tools)
    return f'{bare[: -len(_EMPTY_LIST_END)]}"tools":{tools}}}}}'


@final
@attrs.define
class AppendProgress:
    """How many bytes of the current record have reached the file so far."""

    written: int = 0


def write_record(
    write: Callable[[memoryview], int],
    record: bytes,
    progress: AppendProgress,
    path: str | os.PathLike[str],
) -> None:
    """Hand ``record`` to ``write`` (one ``os.write`` on an open descriptor) until it is all out.

    The first call normally takes everything; a short write is continued from where it
    stopped, and a write that reports no progress raises :class:`TraceAppendError`
    (``Trace append made no progress at byte ${written} of ${total}``) instead of
    looping forever. ``progress.written`` is kept current, so after any exception the
    caller knows whether part of the record is already in the file. ``path`` only names
    the file in the error.
    """
    view = memoryview(record)
    total = len(view)
    while progress.written < total:
        count = write(view[progress.written :])
        if count <= 0:
            raise TraceAppendError(path, progress.written, total)
        progress.written += count


def _make_dir(directory: Path) -> None:
    # An existing entry is ours from before or someone's; if it is no directory,
    # opening the trace file will say so.
    with contextlib.suppress(FileExistsError):
        os.mkdir(directory, DIR_MODE)


def _prepare_dirs(traces_dir: Path, date_path: Path) -> None:
    """Create ``traces_dir`` and the date directory (0700) and ancestors (default mode)."""
    if date_path.is_dir():
        return
    if not traces_dir.is_dir():
        os.makedirs(traces_dir.parent, exist_ok=True)
        _make_dir(traces_dir)
    _make_dir(date_path)


def _probe_torn(path: Path) -> bool:
    r"""Whether a pre-existing ``path`` ends mid-record: non-empty, last byte not ``\n``."""
    try:
        fd = os.open(path, os.O_RDONLY | _O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        size = os.fstat(fd).st_size
        return size > 0 and os.pread(fd, 1, size - 1) != b"\n"
    finally:
        os.close(fd)


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


@final
class TraceWriter:
    """Appends a session's recordable messages to its current trace file.

    ``TraceWriter(traces_dir, session_id)`` writes ``<traces_dir>/<today>/<session_id>_001.jsonl``;
    a resumed session passes ``start_index`` and ``date_dir`` of the file it continues
    (see :class:`~penguin.trace.TraceLocation`). Nothing touches the disk before the
    first append; the writer holds no open descriptor between calls, so there is
    nothing to close.

    :meth:`append` and :meth:`rotate` raise on failure, to that caller only.
    :meth:`record` and :meth:`try_rotate` are what the engine uses: they log the
    failure as ``[trace] write failed: …`` / ``[trace] rotate failed: …`` on the
    ``penguin`` logger and never raise (reference 7.5). Cancellation still propagates.

    One writer per session and trio run; concurrent tasks may share it freely.
    """

    __slots__ = (
        "_also_set",
        "_date_dir",
        "_failed",
        "_failure",
        "_index",
        "_lock",
        "_prepared_index",
        "_session_id",
        "_torn",
        "_traces_dir",
    )

    def __init__(
        self,
        traces_dir: str | os.PathLike[str],
        session_id: str,
        *,
        start_index: int = 1,
        date_dir: str | None = None,
    ) -> None:
        trace_file_name(session_id, start_index)  # validates the index
        self._traces_dir = Path(traces_dir)
        self._session_id = check_path_component(session_id, "session_id")
        self._date_dir = check_path_component(
            local_date_dir() if date_dir is None else date_dir, "date_dir"
        )
        self._index = start_index
        self._lock = trio.StrictFIFOLock()
        self._prepared_index = 0  # no index is prepared yet (indices start at 1)
        self._torn = False
        self._failure: TraceWriteError | None = None
        self._failed = trio.Event()
        self._also_set: list[trio.Event] = []

    def __repr__(self) -> str:
        return f"TraceWriter({str(self.path)!r})"

    @property
    def traces_dir(self) -> Path:
        """The traces root, as given: ``<agent>/traces``."""
        return self._traces_dir

    @property
    def session_id(self) -> str:
        """The session whose trace this is."""
        return self._session_id

    @property
    def date_dir(self) -> str:
        """The date directory's name, fixed for the writer's life (``yyyy-mm-dd``)."""
        return self._date_dir

    @property
    def index(self) -> int:
        """The current context index (1-based); :meth:`rotate` increments it."""
        return self._index

    @property
    def path(self) -> Path:
        """The current trace file (it may not exist until the first append)."""
        return self._traces_dir / self._date_dir / trace_file_name(self._session_id, self._index)

    @property
    def failure(self) -> TraceWriteError | None:
        """The first record the disk refused (``trace write failed: …``), or None.

        Set by :meth:`append`, :meth:`record` and :meth:`record_many` alike, for
        failures of the file system (an :class:`OSError`), not for a message that cannot
        be encoded. It stays set once set: the trace has a gap from then on.
        """
        return self._failure

    async def wait_failure(self) -> TraceWriteError:
        """Wait until a record is refused by the disk; return :attr:`failure`."""
        await self._failed.wait()
        assert self._failure is not None
        return self._failure

    def set_on_failure(self, event: trio.Event) -> None:
        """Set ``event`` once a record is refused by the disk (at once if one was).

        :meth:`wait_failure` without a task of its own: a batch task's run stops on
        it, as on its interrupt.
        """
        if self._failed.is_set():
            event.set()
        else:
            self._also_set.append(event)

    def _note_failure(self, path: Path, exc: OSError) -> None:
        """Keep the first disk failure (any thread); the event is set on the Trio side."""
        if self._failure is None:
            self._failure = TraceWriteError.from_os_error(path, exc)

    def _publish_failure(self) -> None:
        if self._failure is not None and not self._failed.is_set():
            self._failed.set()
            for event in self._also_set:
                event.set()
            self._also_set.clear()

    @staticmethod
    def recordable(message: om.OmniMessage[om.Payload]) -> bool:
        """Whether the trace records ``message`` (reference 7.2); see :func:`is_recordable`."""
        return is_recordable(message)

    async def append(self, message: om.OmniMessage[om.Payload]) -> bool:
        """Append ``message`` if it is recordable; return whether it was.

        Returns False at once for a skipped message (a partial, a child's message).
        Otherwise the record is queued behind every append and rotation submitted
        before it and returns True once it is entirely in the file. Raises
        :class:`OSError` (the system's, or :class:`~penguin.trace.TraceAppendError`)
        if it could not be appended, and the encoder's ``ValueError`` for a message
        that is not JSON-serializable; either way only this call fails.
        """
        if not is_recordable(message):
            await trio.lowlevel.checkpoint()
            return False
        data = encode_record(message)
        # No checkpoint before the lock: joining its queue is what fixes the order.
        async with self._lock:
            try:
                await run_on_disk(
                    self._traces_dir, self._append_locked, self.path, self._index, data
                )
            finally:
                self._publish_failure()
        return True

    async def rotate(self) -> Path:
        """Start the next context's file: increment the index, return the new path.

        Serialized with the appends: those submitted before land in the old file, those
        submitted after in the new one. Nothing is written until the next append (the
        engine then re-records ``session_meta`` and the tool list, reference 7.5).
        """
        async with self._lock:
            self._index += 1
            return self.path

    async def record(self, message: om.OmniMessage[om.Payload]) -> bool:
        """:meth:`append` that never raises: a failure is logged, and False returned.

        The log line is ``[trace] write failed: <error>``; a trace that cannot be
        written never breaks the run (reference 7.5). Cancellation still propagates.
        """
        try:
            return await self.append(message)
        except Exception as exc:
            _logger.warning("[trace] write failed: %s", _describe(exc))
            return False

    async def record_many(self, messages: Sequence[om.OmniMessage[om.Payload]]) -> int:
        """:meth:`record` for a burst, in one trip to the disk; return how many landed.

        Each record is still its own ``write(2)``, in order, on one descriptor opened
        for the burst and closed at its end (reference 7.3); a failure is logged for
        that record only and the others are written (after a failed write the next
        record opens the file again). Encoding happens here, on the Trio thread, before
        the trip. This is the trace recorder's path: it hands over what it has queued.
        """
        encoded: list[bytes] = []
        for message in messages:
            if not is_recordable(message):
                continue
            try:
                encoded.append(encode_record(message))
            except Exception as exc:
                _logger.warning("[trace] write failed: %s", _describe(exc))
        if not encoded:
            await trio.lowlevel.checkpoint()
            return 0
        async with self._lock:
            try:
                return await run_on_disk(
                    self._traces_dir, self._append_burst_locked, self.path, self._index, encoded
                )
            finally:
                self._publish_failure()

    def _append_burst_locked(self, path: Path, index: int, records: list[bytes]) -> int:
        """The blocking part of a burst: one descriptor for all, one ``write(2)`` per record.

        A failure is logged for its own record; the descriptor is then closed and the
        next record opens the file again, as a lone append would. Nothing here raises.
        """
        landed = 0
        fd: int | None = None
        try:
            for data in records:
                try:
                    if fd is None:
                        fd = self._open_locked(path, index)
                    self._write_locked(fd, path, data)
                except Exception as exc:
                    _logger.warning("[trace] write failed: %s", _describe(exc))
                    if isinstance(exc, OSError):
                        self._note_failure(path, exc)
                    if fd is not None:
                        with contextlib.suppress(OSError):
                            os.close(fd)
                        fd = None
                else:
                    landed += 1
        finally:
            if fd is not None:
                try:
                    os.close(fd)
                except OSError as exc:  # the records are written; say so, never raise
                    _logger.warning("[trace] write failed: %s", _describe(exc))
                    self._note_failure(path, exc)
        return landed

    async def try_rotate(self) -> Path | None:
        """:meth:`rotate` that never raises: a failure is logged, and None returned.

        The log line is ``[trace] rotate failed: <error>`` (reference 7.5).
        """
        try:
            return await self.rotate()
        except Exception as exc:
            _logger.warning("[trace] rotate failed: %s", _describe(exc))
            return None

    def _append_locked(self, path: Path, index: int, data: bytes) -> None:
        """The blocking part of one append; runs with the lock held (run_on_disk)."""
        try:
            fd = self._open_locked(path, index)
            try:
                self._write_locked(fd, path, data)
            finally:
                os.close(fd)
        except OSError as exc:
            self._note_failure(path, exc)
            raise

    def _open_locked(self, path: Path, index: int) -> int:
        """Open ``path`` to append; the first time for ``index``, create its dirs and probe it."""
        if self._prepared_index != index:
            _prepare_dirs(self._traces_dir, path.parent)
            self._torn = _probe_torn(path)
            self._prepared_index = index
        return os.open(path, _APPEND_FLAGS, FILE_MODE)

    def _write_locked(self, fd: int, path: Path, data: bytes) -> None:
        """One record on ``fd``: a healing newline first if the tail is torn, then ONE write.

        Whole or nothing: a failure after part of the record landed truncates the file
        back to where the record began.
        """
        record = b"\n" + data if self._torn else data
        progress = AppendProgress()
        try:
            # The usual case, kept cheap: the one write takes the whole record.
            progress.written = written = os.write(fd, record)
            if written < len(record):
                write_record(functools.partial(os.write, fd), record, progress, path)
        except BaseException:
            if progress.written > 0 and not _cut_back(fd, progress.written):
                self._torn = True  # part of this record stays in the file: heal next time
            raise
        self._torn = False


def _cut_back(fd: int, written: int) -> bool:
    """Remove the last ``written`` bytes of the file (a record that failed midway).

    The descriptor appends, so the record's bytes are the file's last ones. Returns
    whether the file now ends where the record began.
    """
    try:
        os.ftruncate(fd, max(0, os.fstat(fd).st_size - written))
    except OSError:
        return False
    return True
