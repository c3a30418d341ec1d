"""The write_file tool (reference 3.7): create or overwrite a file atomically.

Owns the argument checks and their texts, the creation of missing parents, the
atomic write (mode kept on overwrite) and the report: the ``Created``/``Overwrote``
line and, on an overwrite of a small text file, the diff rendered by :mod:`._diff`.
It does not own framing, truncation or interrupt handling (the Environment's). All
file work runs in one go (on the loop's thread for a small file on a machine of local
disks, in a worker thread otherwise); an interrupt or timeout that arrives before the
rename abandons the write (a created parent directory may remain).

Decisions where the spec is silent:

- A symlink is written through: the file it points to is replaced and the link
  stays a link (a dangling link creates its target).
- An existing path that is neither a regular file nor a directory (FIFO, device,
  socket) is refused: ``Failed to write "${file_path}": it is not a regular file
  (a FIFO).``
- The previous content is read for the diff only when it is at most 1 MiB; if it
  cannot be read, the write still happens and no diff is shown. It is decoded
  lossily; if the bytes differ but the decoded texts are equal (only possible for a
  file that was not valid UTF-8), no diff line is shown.
- Lone surrogates in ``content`` are written as U+FFFD (what the reference writes)
  and counted as such in the byte count.
- The diff's "total chars" is the whole output: first line, newline, hunks.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import Any, Final, final

from penguin._mounts import FileCheck
from penguin._realpath import realpath

from .._contract import ToolContext, ToolResult
from ._args import fail
from ._base import FileTool
from ._diff import WRITE_MAX_CELLS, render_write_diff
from ._files import (
    CELL_WEIGHT,
    LINE_WEIGHT,
    FileReport,
    count_cat_lines,
    decode_lossy,
    describe_error,
    locate,
    make_parent_dirs,
    non_regular_kind,
    plural,
    reports_refusals,
    sanitize_text,
    write_atomically,
)

__all__ = ["DEFAULT_BUDGET", "DIFF_SOURCE_LIMIT", "WriteFileTool", "write_file_blocking"]

DEFAULT_BUDGET: Final = 16000
DIFF_SOURCE_LIMIT: Final = 1024 * 1024


def _read_previous(path: str) -> bytes | None:
    """The old content for the diff, or ``None`` (too large, unreadable, not regular)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks = []
        size = 0
        while size <= DIFF_SOURCE_LIMIT and (chunk := os.read(fd, 1 << 20)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks) if size <= DIFF_SOURCE_LIMIT else None


@reports_refusals
def write_file_blocking(
    *,
    workspace: str,
    file_path: str,
    content: str,
    budget: int,
    before_commit: Callable[[], None] | None = None,
    sandbox: Callable[[str, str], str | None] | None = None,
    weigh: FileCheck | None = None,
) -> FileReport:
    """Everything of a write_file call after the argument checks; blocking.

    ``weigh`` is given what will be read and written, and the device of the file
    replaced, before either is done (``_mounts.FileCheck``); it may raise to stop.
    """
    resolved, info = locate(workspace, file_path, verb="write", failure_verb="write")
    denial = None if sandbox is None else sandbox(file_path, resolved)
    if denial is not None:
        return FileReport(denial, failed=True)
    if info is not None:
        if stat.S_ISDIR(info.st_mode):
            return FileReport(f'Cannot write "{file_path}": it is a directory.', failed=True)
        kind = non_regular_kind(info.st_mode)
        if kind is not None:
            return FileReport(
                f'Failed to write "{file_path}": it is not a regular file ({kind}).',
                failed=True,
            )
    target = realpath(resolved)
    old_size = None if info is None or info.st_size > DIFF_SOURCE_LIMIT else info.st_size
    old_device = None if info is None else info.st_dev
    if weigh is not None:  # the old content is read for the diff, the new one written
        weigh(len(content) + (old_size or 0), old_device)
    previous = None if old_size is None else _read_previous(target)
    if weigh is not None and previous is not None:  # the diff: its lines and its table
        old_lines, new_lines = previous.count(b"\n") + 1, content.count("\n") + 1
        cells = min(old_lines * new_lines, WRITE_MAX_CELLS)
        lines = LINE_WEIGHT * (old_lines + new_lines)
        weigh(len(content) + len(previous) + lines + CELL_WEIGHT * cells, old_device)
    text = sanitize_text(content)
    data = text.encode("utf-8")
    try:
        make_parent_dirs(target)
        write_atomically(
            target,
            data,
            mode=None if info is None else stat.S_IMODE(info.st_mode),
            before_commit=before_commit,
        )
    except OSError as exc:
        return FileReport(f'Failed to write "{file_path}": {describe_error(exc)}', failed=True)
    verb = "Created" if info is None else "Overwrote"
    first_line = (
        f'{verb} "{file_path}" ({plural(count_cat_lines(text), "line")}, '
        f"{plural(len(data), 'byte')})."
    )
    if previous is None or b"\0" in previous:
        return FileReport(first_line)
    if previous == data:
        return FileReport(f"{first_line}\n(content unchanged)")
    old_text = decode_lossy(previous)
    if old_text == text:
        return FileReport(first_line)
    diff = render_write_diff(old_text, text, first_line=first_line, budget=budget)
    return FileReport(f"{first_line}\n{diff}" if diff else first_line)


@final
class WriteFileTool(FileTool):
    """write_file: create a file, or replace its whole content."""

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """Run one call; the output is always exactly one delta."""
        file_path = args.get("file_path")
        content = args.get("content")
        if not isinstance(file_path, str) or not file_path:
            fail(f'Missing required argument "file_path" for {self.name}.')
        if not isinstance(content, str):
            fail(f'Missing required argument "content" for {self.name}.')
        configured = ctx.definition.max_output_length
        return await self.report(
            ctx,
            lambda check: write_file_blocking(
                workspace=os.path.abspath(ctx.workspace_dir),
                file_path=file_path,
                content=content,
                budget=configured if configured > 0 else DEFAULT_BUDGET,
                before_commit=check,
                sandbox=self.write_check(),
                weigh=check,
            ),
        )
