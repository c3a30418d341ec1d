r"""Shared plumbing of the three file tools (read_file, edit_file, write_file).

Owns what more than one file tool needs and what is easy to get subtly wrong:

- path resolution (reference 3.0.4): relative to the workspace, absolute anywhere, no ``~``;
  ``..`` is folded lexically (the reference resolves paths the same way);
- the "file not found" path hint (reference 3.5.5), split into a blocking walk
  (:func:`path_hint`) and a pure composer (:func:`compose_hint`);
- the atomic write of reference 3.6.3 (:func:`write_atomically`);
- small text helpers: ``cat -n`` line counting, lossy decoding, the 2000-char
  display cut, splitting on ``\n`` only, lone-surrogate cleanup;
- how an ``OSError`` is worded inside ``Failed to ...: ${message}`` texts;
- the preamble every file tool's blocking part begins with (:func:`locate`): resolve
  the path, refuse a secret store (reference 3.5.3), ``stat`` it and word the failure.
  A refusal is raised (:func:`refuse`) and becomes the tool's :class:`FileReport` at
  the one place that catches it, :func:`reports_refusals` around each blocking part.

It does not own any tool's messages or check order (each tool module does) and never
touches the event loop: everything here is plain synchronous code, run where
``_mounts.run_file_work`` puts a tool's blocking part (a worker thread, or the loop's
own on a machine of local disks) or, for the pure helpers, anywhere.

Decisions where the spec is silent:

- ``${message}`` of an ``OSError`` is ``"<ERRNO CODE>: <strerror>, '<path>'"``
  (e.g. ``ENOTDIR: Not a directory, '/w/a.txt/b'``), close to the reference's Node
  wording; other exceptions use ``str(exc)``.
- The hint is empty when the deepest existing ancestor is the filesystem root (a
  listing of ``/`` helps nobody); this is how "walking to filesystem root" is read.
- "Locale alphabetical order" for hint ties is a fixed approximation of the ICU root
  collation that the reference's ``localeCompare`` uses, independent of the process
  locale: base letters first (accents and case ignored; punctuation < digits <
  letters), then accents, then lower case before upper case, then code points.
- Directory entries that are symlinks to directories are listed with ``/`` (the
  model can walk into them).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import stat
import unicodedata
from collections.abc import Callable, Sequence
from typing import Final, NoReturn, ParamSpec, final

import attrs

from penguin._errors import PenguinError
from penguin._mounts import FileCheck
from penguin.config import SECRET_FILE_NAMES, secret_store_name

__all__ = [
    "CELL_WEIGHT",
    "LINE_DISPLAY_LIMIT",
    "LINE_WEIGHT",
    "ROW_WEIGHT",
    "SECRET_FILE_NAMES",
    "SITE_WEIGHT",
    "FileReport",
    "compose_hint",
    "count_cat_lines",
    "decode_lossy",
    "describe_error",
    "is_missing_error",
    "locate",
    "make_parent_dirs",
    "model_visible_path",
    "non_regular_kind",
    "path_hint",
    "plural",
    "refuse",
    "refuse_secret_store",
    "reports_refusals",
    "resolve_path",
    "sanitize_text",
    "secret_store_name",
    "split_lines_keepends",
    "temp_path_for",
    "truncate_line",
    "write_atomically",
]

LINE_DISPLAY_LIMIT: Final = 2000
"""Characters of one line shown before ``… [line truncated]`` (reference 3.5.11, 3.6.5)."""

LINE_TRUNCATED_MARK: Final = "… [line truncated]"
HINT_MAX_ENTRIES: Final = 8

# What a call's work weighs (``_mounts.FileCheck``): bytes, and for the work that costs
# per line, per row, per replacement or per cell of a diff's table rather than per
# byte, that many bytes' worth each. Past ``_mounts.INLINE_BYTES`` a call runs in a
# worker thread, not on the loop's. Measured here: a byte ~3 ns, a line split or
# diffed ~0.6 µs, a row rendered ~3 µs, a replacement rendered ~8 µs, a cell of the
# diff's table ~110 ns; so a call weighed under the bound holds the loop's thread for a
# few milliseconds at most (``python /tmp/work/calib.py`` in stop 57's note).
LINE_WEIGHT: Final = 64
"""A line edit_file splits or write_file diffs, in bytes' worth."""
ROW_WEIGHT: Final = 128
"""A row read_file may render, in bytes' worth."""
SITE_WEIGHT: Final = 2048
"""One replacement edit_file makes and renders, in bytes' worth."""
CELL_WEIGHT: Final = 16
"""One cell of write_file's diff table (old lines × new lines), in bytes' worth."""

_BASE36: Final = "0123456789abcdefghijklmnopqrstuvwxyz"
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


@final
@attrs.frozen
class FileReport:
    """What a file tool's blocking part decided: the one text delta and whether it failed."""

    text: str
    failed: bool = False


@final
class _Refused(PenguinError):
    """A file tool's blocking part stops with a failed report (see :func:`refuse`)."""

    def __init__(self, report: FileReport) -> None:
        super().__init__(report.text)
        self.report = report


def refuse(text: str) -> NoReturn:
    """Stop a blocking part with the failed report ``text`` (:func:`reports_refusals`)."""
    raise _Refused(FileReport(text, failed=True))


_P = ParamSpec("_P")


def reports_refusals(work: Callable[_P, FileReport]) -> Callable[_P, FileReport]:
    """Make :func:`refuse` inside ``work`` end it with its report (the one catch)."""

    @functools.wraps(work)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> FileReport:
        try:
            return work(*args, **kwargs)
        except _Refused as refused:
            return refused.report

    return run


# --- paths --------------------------------------------------------------------------------


def resolve_path(workspace: str | os.PathLike[str], file_path: str) -> str:
    """The absolute, lexically normalized path ``file_path`` names (reference 3.0.4)."""
    return os.path.abspath(os.path.join(os.fspath(workspace), file_path))


def model_visible_path(path: str) -> str:
    """The spelling of ``path`` shown to the model (reference 0.5): unchanged on POSIX."""
    return path.replace("\\", "/") if os.name == "nt" else path


def is_missing_error(exc: OSError) -> bool:
    """Whether ``exc`` means "no such file" (ENOENT, or a parent that is not a directory)."""
    return exc.errno in (errno.ENOENT, errno.ENOTDIR)


def non_regular_kind(mode: int) -> str | None:
    """A phrase for a file that is neither a regular file nor a directory, else ``None``."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def describe_error(exc: BaseException) -> str:
    """The ``${message}`` of an error inside the tools' ``Failed to ...`` texts."""
    if isinstance(exc, OSError) and exc.errno is not None:
        code = errno.errorcode.get(exc.errno, "UNKNOWN")
        text = f"{code}: {exc.strerror or os.strerror(exc.errno)}"
        if exc.filename is not None:
            text += f", '{os.fsdecode(exc.filename)}'"
        if exc.filename2 is not None:
            text += f" -> '{os.fsdecode(exc.filename2)}'"
        return text
    if isinstance(exc, ValueError) and "null" in str(exc):
        # os.stat's words for a NUL in a path changed in Python 3.13 ("stat: embedded
        # null character in path"); the model sees the same text on every version.
        return "embedded null byte"
    return str(exc) or type(exc).__name__


# --- the path hint (reference 3.5.5) -----------------------------------------------------------


def path_hint(resolved: str, weigh: FileCheck | None = None) -> str:
    """The hint appended to a "File not found" text for the missing path ``resolved``.

    Walks up from the parent of ``resolved`` to the deepest ancestor that ``stat()``s
    and describes it. Blocking. ``weigh`` is given the size and device of a directory
    before it is listed (``_mounts.FileCheck``): a large one is listed in a worker.
    """
    missing = os.path.basename(resolved)
    current = os.path.dirname(resolved)
    while True:
        try:
            info = os.stat(current)
        except (OSError, ValueError):
            parent = os.path.dirname(current)
            if parent == current:
                return ""
            missing = os.path.basename(current)
            current = parent
            continue
        break
    if os.path.dirname(current) == current:
        return ""
    if not stat.S_ISDIR(info.st_mode):
        return compose_hint(current, missing, is_dir=False, entries=None)
    if weigh is not None:
        weigh(info.st_size, info.st_dev)
    try:
        entries = _list_directory(current)
    except OSError:
        return compose_hint(current, missing, is_dir=True, entries=None)
    return compose_hint(current, missing, is_dir=True, entries=entries)


def _list_directory(path: str) -> list[tuple[str, bool]]:
    entries = []
    with os.scandir(path) as listing:
        for entry in listing:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            entries.append((entry.name, is_dir))
    return entries


def compose_hint(
    ancestor: str,
    missing: str,
    *,
    is_dir: bool,
    entries: Sequence[tuple[str, bool]] | None,
) -> str:
    """The hint text for an existing ``ancestor`` lacking ``missing`` (pure).

    ``entries`` are ``(name, is_directory)`` pairs, or ``None`` when the directory
    could not be listed (then only the head sentence is given).
    """
    shown_path = model_visible_path(ancestor)
    if not is_dir:
        return f' Note: "{shown_path}" exists but is a file, not a directory.'
    head = f' The directory "{shown_path}" exists but has no entry "{missing}".'
    if entries is None:
        return head
    if not entries:
        return head + " It is empty."
    target = missing.lower()
    ranked = sorted(
        entries,
        key=lambda e: (-_common_prefix_length(e[0].lower(), target), collation_key(e[0])),
    )
    names = [name + "/" if is_directory else name for name, is_directory in ranked]
    listed = ", ".join(names[:HINT_MAX_ENTRIES])
    extra = len(names) - HINT_MAX_ENTRIES
    more = f" (+{extra} more)" if extra > 0 else ""
    return f"{head} It contains: {listed}{more}."


def _common_prefix_length(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _char_class(char: str) -> int:
    if char.isdigit():
        return 1
    if char.isalpha():
        return 2
    return 0


def collation_key(name: str) -> tuple[object, ...]:
    """A sort key approximating ICU root collation (``localeCompare``), locale-free."""
    decomposed = unicodedata.normalize("NFD", name)
    bare = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
    primary = tuple((_char_class(c), c) for c in bare)
    secondary = decomposed.casefold()
    tertiary = tuple(1 if c.isupper() else 0 for c in name)
    return (primary, secondary, tertiary, name)


# --- text helpers -------------------------------------------------------------------------


def plural(n: int, word: str) -> str:
    """``"1 line"``, ``"2 lines"``: the spec's ``${n} ${word}${n==1?"":"s"}``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def count_cat_lines(text: str) -> int:
    r"""Lines as ``cat -n`` numbers them: ``""`` has 0; a trailing ``\n`` adds none."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def split_lines_keepends(text: str) -> list[str]:
    r"""Split on ``\n`` only, keeping each terminator; no empty line after a final ``\n``."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def decode_lossy(data: bytes) -> str:
    """UTF-8 with U+FFFD for every malformed sequence (the reference's TextDecoder)."""
    return data.decode("utf-8", errors="replace")


def sanitize_text(text: str) -> str:
    """Replace lone surrogates (possible in JSON-parsed text) by U+FFFD."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def truncate_line(text: str, *, force: bool = False) -> str:
    """Cut a display line to 2000 chars plus the marker (``force``: it was cut already)."""
    if force or len(text) > LINE_DISPLAY_LIMIT:
        return text[:LINE_DISPLAY_LIMIT] + LINE_TRUNCATED_MARK
    return text


def make_parent_dirs(path: str) -> None:
    """Create the missing ancestors of ``path`` (default mode).

    An existing ancestor that is not a directory raises ``NotADirectoryError`` naming
    that ancestor (``os.makedirs`` would say "File exists", which misleads).
    """
    parent = os.path.dirname(path)
    probe = parent
    while True:
        try:
            info = os.stat(probe)
        except FileNotFoundError:
            upper = os.path.dirname(probe)
            if upper == probe:
                break
            probe = upper
            continue
        except NotADirectoryError:
            probe = os.path.dirname(probe)
            continue
        if not stat.S_ISDIR(info.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), probe)
        if probe == parent:
            return  # nothing is missing
        break
    os.makedirs(parent, exist_ok=True)


# --- atomic write (reference 3.6.3) ------------------------------------------------------------


def temp_path_for(path: str) -> str:
    """``.${basename}.tmp-${pid}-${6 random base36}`` beside ``path``."""
    directory, base = os.path.split(path)
    # One draw from the system's random source (one system call; a choice per letter
    # took ten): 64 bits folded into 36**6, a bias below one in a billion.
    number = int.from_bytes(os.urandom(8), "big") % 36**6
    letters = []
    for _ in range(6):
        number, digit = divmod(number, 36)
        letters.append(_BASE36[digit])
    suffix = "".join(letters)
    return os.path.join(directory, f".{base}.tmp-{os.getpid()}-{suffix}")


def write_atomically(
    path: str,
    data: bytes,
    *,
    mode: int | None,
    before_commit: Callable[[], None] | None = None,
) -> None:
    """Replace ``path`` by ``data`` at once: a temp file beside it, then ``rename``.

    ``mode`` is applied to the temp file (the permission bits of the file being
    replaced); ``None`` leaves the default of a new file (0666 minus the umask).
    ``before_commit`` runs just before the rename and may raise (a cancellation) to
    abandon the write. On any failure the temp file is removed and ``path`` is
    untouched. The data is not fsynced: the promise is atomic visibility, not
    durability across a power cut.
    """
    temp = temp_path_for(path)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if mode is not None:
                os.fchmod(fd, mode)
        finally:
            os.close(fd)
        if before_commit is not None:
            before_commit()
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def refuse_secret_store(verb: str, file_path: str, resolved: str) -> None:
    """:func:`refuse` as reference 3.5.3 says, for ``verb`` (read; also edit and write).

    The spec guards read_file only; edit_file and write_file are guarded too,
    because their diffs would show the store's content to the model just the same.
    """
    store = secret_store_name(resolved)
    if store is not None:
        refuse(
            f'Refusing to {verb} "{file_path}": {store} holds the user\'s secrets and must '
            "never enter the conversation."
        )


def locate(
    workspace: str, file_path: str, *, verb: str, failure_verb: str
) -> tuple[str, os.stat_result | None]:
    """The preamble of a file tool's blocking part: ``(resolved path, its stat)``.

    Refuses (:func:`refuse`) a secret store (``Refusing to {verb} …``) and a path that
    cannot be ``stat``-ed (``Failed to {failure_verb} "…": …``). The stat is ``None``
    when nothing is there: each tool words that (or, write_file, creates the file).
    """
    resolved = resolve_path(workspace, file_path)
    refuse_secret_store(verb, file_path, resolved)
    try:
        return resolved, os.stat(resolved)
    except OSError as exc:
        if is_missing_error(exc):
            return resolved, None
        refuse(f'Failed to {failure_verb} "{file_path}": {describe_error(exc)}')
    except ValueError as exc:
        refuse(f'Failed to {failure_verb} "{file_path}": {describe_error(exc)}')
