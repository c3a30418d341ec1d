"""The read_file tool (reference 3.5): a numbered window of a text file, as one delta.

Owns the argument coercion (offset/limit, with JavaScript's ``Number`` and
``JSON.stringify`` semantics for the texts the model sees), the secret-file guard,
the bounded line scan and the rendering of rows and trailing notes. It does not own
framing, truncation or interrupt classification (the Environment's job): in a
worker thread, an interrupt or timeout reaches the scan as trio cancellation, checked
once per 256 KiB chunk.

Shape: :func:`scan_lines` is a pure state machine over a ``read(n) -> bytes``
callable; :func:`render_window` turns its result into the output; the blocking
walk (guard, stat, open, scan) runs in one go, on the loop's thread for a small file
on a machine of local disks and in ONE worker thread otherwise
(``_mounts.run_file_work``); the tool class is a thin async shell around it.

Decisions where the spec is silent:

- A path that is neither a regular file nor a directory (FIFO, device, socket) is
  refused with ``Failed to read "${file_path}": it is not a regular file (a FIFO).
  Use shell commands to inspect it.``, before it is opened (so a FIFO without a
  writer or ``/dev/zero`` can never hang or stream forever); it is opened with
  ``O_NONBLOCK`` and checked again with ``fstat`` against a swap in between.
- "CRLF seen in the scanned range" means anywhere in the bytes scanned (to EOF or
  the cap), not only inside the window.
- A line cut at 8000 bytes is always marked ``… [line truncated]``, even in the
  rare case where its first 8000 bytes decode to 2000 chars or fewer.
- The cap is hit when 8 MiB have been read, even if EOF would have come next (so a
  file of exactly 8 MiB reports "more than N lines"; reference 2.3 relies on this).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final, final

import attrs

from penguin._mounts import FileCheck

from .._contract import ToolContext, ToolResult
from ._args import fail
from ._base import FileTool
from ._files import (
    ROW_WEIGHT,
    FileReport,
    decode_lossy,
    describe_error,
    locate,
    model_visible_path,
    non_regular_kind,
    path_hint,
    plural,
    refuse,
    reports_refusals,
    truncate_line,
)

__all__ = [
    "BUDGET_RESERVE",
    "CHUNK_SIZE",
    "DEFAULT_BUDGET",
    "DEFAULT_LIMIT",
    "DEFAULT_OFFSET",
    "LINE_BYTE_LIMIT",
    "SCAN_CAP",
    "ReadFileTool",
    "ScanResult",
    "WindowLine",
    "coerce_limit",
    "coerce_offset",
    "js_json",
    "js_number_text",
    "read_file_blocking",
    "render_window",
    "scan_lines",
]

CHUNK_SIZE: Final = 256 * 1024
SCAN_CAP: Final = 8 * 1024 * 1024
LINE_BYTE_LIMIT: Final = 8000
DEFAULT_OFFSET: Final = 1
DEFAULT_LIMIT: Final = 2000
DEFAULT_BUDGET: Final = 64000
BUDGET_RESERVE: Final = 256

_NEWLINE_BLOCK: Final = 4096
_JS_WHITESPACE: Final = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_JS_DECIMAL: Final = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_JS_RADIX: Final = re.compile(r"0([xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)")
_JS_INFINITY: Final = re.compile(r"[+-]?Infinity")
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


# --- arguments ----------------------------------------------------------------------------


@final
class _Invalid:
    pass


_INVALID: Final = _Invalid()


def _js_string_number(text: str) -> float | None:
    """``Number(text)`` of JavaScript for a non-blank string; ``None`` when it is NaN."""
    trimmed = text.strip(_JS_WHITESPACE)
    if not trimmed:
        return None
    if _JS_DECIMAL.fullmatch(trimmed):
        return float(trimmed)
    radix = _JS_RADIX.fullmatch(trimmed)
    if radix:
        base = {"x": 16, "o": 8, "b": 2}[radix.group(1)[0].lower()]
        return float(int(radix.group(1)[1:], base))
    if _JS_INFINITY.fullmatch(trimmed):
        return math.inf
    return None


def _floor_number(value: object) -> int | _Invalid:
    """floor() of a finite JSON number or non-blank numeric string; else invalid."""
    number: float
    if isinstance(value, bool):
        return _INVALID
    if isinstance(value, int):
        try:
            float(value)
        except OverflowError:
            return _INVALID  # beyond a double: Infinity in the reference
        return value
    if isinstance(value, float):
        number = value
    elif isinstance(value, str):
        parsed = _js_string_number(value)
        if parsed is None:
            return _INVALID
        number = parsed
    else:
        return _INVALID
    if not math.isfinite(number):
        return _INVALID
    return math.floor(number)


def coerce_offset(value: object) -> int | str:
    """The 1-based first line (clamped to >= 1), or the error text (reference 3.5.2)."""
    if value is None:
        return DEFAULT_OFFSET
    floored = _floor_number(value)
    if isinstance(floored, _Invalid):
        return f'Invalid "offset": expected a number (got {js_json(value)}).'
    return max(1, floored)


def coerce_limit(value: object) -> int | str:
    """The positive line count, or the error text (reference 3.5.2)."""
    if value is None:
        return DEFAULT_LIMIT
    floored = _floor_number(value)
    if isinstance(floored, _Invalid) or floored <= 0:
        return f'Invalid "limit": expected a positive number (got {js_json(value)}).'
    return floored


def js_number_text(value: int | float) -> str:
    """A number as JavaScript's ``String(n)`` prints it (ints beyond 2**53 as doubles)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if abs(value) <= 2**53:
            return str(value)
        try:
            value = float(value)
        except OverflowError:
            return "Infinity" if value > 0 else "-Infinity"
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    decimal = Decimal(repr(abs(value))).normalize()
    _, digit_tuple, exponent = decimal.as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    k = len(digits)
    n = k + exponent  # value = 0.<digits> * 10**n
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mantissa = digits[0] + ("." + digits[1:] if k > 1 else "")
        body = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + body


def js_json(value: Any) -> str:
    """Compact JSON as JavaScript's ``JSON.stringify`` writes it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        try:
            float(value)
        except OverflowError:
            return "null"  # a double overflows to Infinity, which JSON spells null
        return js_number_text(value)
    if isinstance(value, float):
        return js_number_text(value) if math.isfinite(value) else "null"
    if isinstance(value, str):
        return _js_string(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(js_json(item) for item in value) + "]"
    if isinstance(value, dict):
        members = (f"{_js_string(str(k))}:{js_json(v)}" for k, v in value.items())
        return "{" + ",".join(members) + "}"
    return _js_string(str(value))


def _js_string(text: str) -> str:
    encoded = json.dumps(text, ensure_ascii=False)
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", encoded)


# --- the scan (reference 3.5.7) ----------------------------------------------------------------


@final
@attrs.frozen
class WindowLine:
    r"""One line of the requested window: its text (``\r`` stripped) and whether it was cut."""

    number: int
    text: str
    cut: bool = False


@final
@attrs.frozen
class ScanResult:
    """What one bounded pass over a file found.

    ``lines`` is the total line count when ``capped`` is false, else the number of
    complete lines seen before the cap. ``window`` holds at most ``max_rows`` lines.
    ``partial`` is whether the cap fell inside a line (some of its bytes were read).
    """

    window: tuple[WindowLine, ...]
    lines: int
    capped: bool
    binary: bool
    crlf: bool
    partial: bool = False

    @property
    def scanned(self) -> int:
        """How many lines the scan reached: the complete ones, and the one it was in."""
        return self.lines + self.partial


def _skip_newlines(buf: bytes, pos: int, wanted: int) -> tuple[int, int]:
    """Advance past up to ``wanted`` newlines from ``pos``: ``(new pos, newlines passed)``."""
    size = len(buf)
    found = 0
    while pos < size:
        end = min(size, pos + _NEWLINE_BLOCK)
        in_block = buf.count(b"\n", pos, end)
        if found + in_block < wanted:
            found += in_block
            pos = end
            continue
        while True:
            pos = buf.index(b"\n", pos, end) + 1
            found += 1
            if found == wanted:
                return pos, found
    return size, found


@final
@attrs.define
class _Scanner:
    first: int
    last: int
    max_rows: int
    line_no: int = 1
    current: bytearray = attrs.Factory(bytearray)
    current_len: int = 0
    current_last_byte: int = -1
    window: list[WindowLine] = attrs.Factory(list)

    def collecting(self) -> bool:
        return self.first <= self.line_no <= self.last and len(self.window) < self.max_rows

    def feed(self, buf: bytes) -> None:
        pos, size = 0, len(buf)
        while pos < size:
            if self.line_no < self.first:
                wanted = self.first - self.line_no
                start = pos
                pos, passed = _skip_newlines(buf, pos, wanted)
                self.line_no += passed
                if passed < wanted:  # the whole rest of the chunk was consumed
                    if passed:
                        self.current_len = size - buf.rindex(b"\n", start) - 1
                    else:
                        self.current_len += size - start
                    return
                self.current_len = 0
            elif self.collecting():
                newline = buf.find(b"\n", pos)
                end = size if newline < 0 else newline
                if end > pos:
                    room = LINE_BYTE_LIMIT - len(self.current)
                    if room > 0:
                        self.current += buf[pos : min(end, pos + room)]
                    self.current_len += end - pos
                    self.current_last_byte = buf[end - 1]
                if newline < 0:
                    return
                self.finish_window_line()
                pos = newline + 1
            else:
                count = buf.count(b"\n", pos)
                if count:
                    self.line_no += count
                    self.current_len = size - buf.rindex(b"\n") - 1
                else:
                    self.current_len += size - pos
                return

    def finish_window_line(self) -> None:
        data = bytes(self.current)
        cut = self.current_len > len(data)
        if not cut and self.current_last_byte == 0x0D:
            data = data[:-1]
        self.window.append(WindowLine(self.line_no, decode_lossy(data), cut))
        self.line_no += 1
        self.current.clear()
        self.current_len = 0
        self.current_last_byte = -1

    def finish_at_eof(self) -> int:
        if self.current_len == 0:
            return self.line_no - 1
        if self.collecting():
            self.finish_window_line()
            return self.line_no - 1
        return self.line_no


def scan_lines(
    read: Callable[[int], bytes],
    *,
    first: int,
    last: int,
    max_rows: int,
    checkpoint: Callable[[], None] = lambda: None,
    chunk_size: int = CHUNK_SIZE,
    cap: int = SCAN_CAP,
) -> ScanResult:
    """Scan a byte stream for lines ``first..last`` (1-based, inclusive).

    Reads ``chunk_size`` bytes at a time up to ``cap`` bytes, calling ``checkpoint``
    before each read (it raises to abort). Keeps at most ``max_rows`` window lines
    of at most 8000 bytes each and keeps counting lines past the window. Stops at
    the first NUL byte (the verdict is "binary" whatever else follows).
    """
    scanner = _Scanner(first=first, last=last, max_rows=max_rows)
    crlf = False
    previous_byte = -1
    total = 0
    while True:
        wanted = min(chunk_size, cap - total)
        if wanted <= 0:
            partial = scanner.current_len > 0
            lines = scanner.line_no - 1
            return ScanResult(tuple(scanner.window), lines, True, False, crlf, partial)
        checkpoint()
        buf = read(wanted)
        if not buf:
            lines = scanner.finish_at_eof()
            return ScanResult(tuple(scanner.window), lines, False, False, crlf)
        total += len(buf)
        if b"\0" in buf:
            return ScanResult((), 0, False, True, crlf)
        if not crlf:
            crlf = b"\r\n" in buf or (previous_byte == 0x0D and buf[0] == 0x0A)
        previous_byte = buf[-1]
        scanner.feed(buf)


# --- rendering (reference 3.5.8-3.5.13) --------------------------------------------------------


def render_window(
    file_path: str, *, offset: int, limit: int, scan: ScanResult, budget: int
) -> FileReport:
    """The read_file output for a finished scan (binary/cap/past-end checks, rows, notes)."""
    if scan.binary:
        return FileReport(
            f'"{file_path}" looks like a binary file (contains NUL bytes). Use shell '
            "commands to inspect it, or read_image if it is an image.",
            failed=True,
        )
    if scan.capped and not scan.window:
        last = js_number_text(offset + limit - 1)
        return FileReport(
            f'Stopped after scanning 8 MB of "{file_path}" without reaching the requested '
            f"window (scanned {plural(scan.scanned, 'line')}). The offset is too deep or the "
            "file has extremely long lines — use shell commands (e.g. sed -n "
            f"'{js_number_text(offset)},{last}p') for this file.",
            failed=True,
        )
    if not scan.capped and offset > scan.lines:
        return FileReport(
            f'Offset {js_number_text(offset)} is past the end of "{file_path}" '
            f"({plural(scan.lines, 'line')} total).",
            failed=True,
        )
    content_budget = max(1, budget - BUDGET_RESERVE)
    rows: list[str] = []
    used = 0
    trimmed = False
    for line in scan.window:
        row = f"{line.number:6d}\t{truncate_line(line.text, force=line.cut)}"
        needed = len(row) + (1 if rows else 0)
        if used + needed <= content_budget:
            rows.append(row)
            used += needed
        elif not rows:
            rows.append(row[:content_budget])
            trimmed = True
            break
        else:
            trimmed = True
            break
    last_shown = offset + len(rows) - 1
    available = min(offset + limit - 1, scan.lines) - offset + 1
    if len(rows) < available:
        trimmed = True
    out = rows
    if scan.crlf:
        out.append("(file uses CRLF line endings)")
    if trimmed or scan.capped or last_shown < scan.lines:
        trim = " (output limit reached)" if trimmed else ""
        showing = f"showing {offset}-{last_shown}{trim} — call again with offset to continue]"
        if scan.capped:
            out.append(f"[file has more than {scan.lines} lines; {showing}")
        else:
            out.append(f"[file has {scan.lines} lines total; {showing}")
    return FileReport("\n".join(out))


# --- the blocking part and the tool -------------------------------------------------------


def _not_regular(file_path: str, kind: str) -> FileReport:
    return FileReport(
        f'Failed to read "{file_path}": it is not a regular file ({kind}). '
        "Use shell commands to inspect it.",
        failed=True,
    )


@reports_refusals
def read_file_blocking(
    *,
    workspace: str,
    file_path: str,
    offset: int,
    limit: int,
    budget: int,
    checkpoint: FileCheck,
) -> FileReport:
    """Everything of a read_file call after argument checks; blocking.

    ``checkpoint`` is asked before each chunk of the scan, and first with the size
    and device of what will be read, before anything is (``_mounts.FileCheck``).
    """
    resolved, info = locate(workspace, file_path, verb="read", failure_verb="read")
    if info is None:
        refuse(
            f'File not found: "{file_path}". Absolute paths are supported; relative '
            "paths resolve against the workspace "
            f"({model_visible_path(workspace)}).{path_hint(resolved, checkpoint)}"
        )
    if stat.S_ISDIR(info.st_mode):
        return FileReport(
            f'Cannot read "{file_path}": it is a directory. Pass the path of a file inside it.',
            failed=True,
        )
    kind = non_regular_kind(info.st_mode)
    if kind is not None:
        return _not_regular(file_path, kind)
    if info.st_size == 0:
        return FileReport(f'"{file_path}" is an empty file (0 lines).')
    checkpoint(min(info.st_size, SCAN_CAP), info.st_dev)
    content_budget = max(1, budget - BUDGET_RESERVE)
    try:
        fd = os.open(resolved, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return FileReport(f'Failed to read "{file_path}": {describe_error(exc)}', failed=True)
    try:
        kind = non_regular_kind(os.fstat(fd).st_mode)
        if kind is not None:
            return _not_regular(file_path, kind)
        max_rows = content_budget // 8 + 2
        seen = [0, 0]  # bytes and lines so far: the bytes scanned, the rows to render

        def chunk(n: int) -> bytes:
            data = os.read(fd, n)
            seen[0] += len(data)
            seen[1] += data.count(b"\n")
            rows = min(seen[1] + 1, limit, max_rows)
            checkpoint(seen[0] + ROW_WEIGHT * rows, info.st_dev)  # before it is scanned
            return data

        scan = scan_lines(
            chunk,
            first=offset,
            last=offset + limit - 1,
            max_rows=max_rows,
            checkpoint=checkpoint,
        )
    except OSError as exc:
        return FileReport(f'Failed to read "{file_path}": {describe_error(exc)}', failed=True)
    finally:
        os.close(fd)
    return render_window(file_path, offset=offset, limit=limit, scan=scan, budget=budget)


@final
class ReadFileTool(FileTool):
    """read_file: show lines ``offset..offset+limit-1`` of a text file with line numbers."""

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """Run one call; the output is always exactly one delta."""
        file_path = args.get("file_path")
        if not isinstance(file_path, str) or not file_path:
            fail(f'Missing required argument "file_path" for {self.name}.')
        offset = coerce_offset(args.get("offset"))
        if isinstance(offset, str):
            fail(offset)
        limit = coerce_limit(args.get("limit"))
        if isinstance(limit, str):
            fail(limit)
        configured = ctx.definition.max_output_length
        return await self.report(
            ctx,
            lambda check: read_file_blocking(
                workspace=os.path.abspath(ctx.workspace_dir),
                file_path=file_path,
                offset=offset,
                limit=limit,
                budget=configured if configured > 0 else DEFAULT_BUDGET,
                checkpoint=check,
            ),
        )
