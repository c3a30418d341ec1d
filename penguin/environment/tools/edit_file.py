"""The edit_file tool (reference 3.6): exact string replacement with an atomic write.

Owns the argument checks and their texts, the exact non-overlapping matching, the
atomic replacement of the file and the report (first line plus hunks, rendered by
:mod:`._diff`). It does not own framing, truncation or interrupt handling (the
Environment's). All file work runs in one go (on the loop's thread for a small file
on a machine of local disks, in a worker thread otherwise); an interrupt or timeout
that arrives before the rename abandons the edit (the file stays untouched), one
that arrives after it cannot undo it.

Decisions where the spec is silent:

- The file is decoded as UTF-8 with ``surrogateescape``: bytes that are not valid
  UTF-8 are matched as opaque characters and written back unchanged, so an edit
  never corrupts the rest of a file that is not clean UTF-8 (the displayed hunks
  show them as U+FFFD). Lone surrogates in the arguments become U+FFFD.
- A symlink is edited through: the file it points to is replaced (atomically, in
  its own directory) and the link stays a link.
- A path that is neither a regular file nor a directory (FIFO, device, socket) is
  refused as a read error: ``Failed to read "${file_path}": it is not a regular
  file (a FIFO).`` (opening a FIFO could block forever).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import Any, Final, final

from penguin._errors import PenguinError
from penguin._mounts import FileCheck
from penguin._realpath import realpath

from .._contract import ToolContext, ToolResult
from ._args import fail
from ._base import FileTool
from ._diff import build_edit_hunks, render_edit_report
from ._files import (
    LINE_WEIGHT,
    SITE_WEIGHT,
    FileReport,
    describe_error,
    locate,
    non_regular_kind,
    path_hint,
    plural,
    refuse,
    reports_refusals,
    sanitize_text,
    write_atomically,
)

__all__ = [
    "DEFAULT_BUDGET",
    "EditFileTool",
    "check_arguments",
    "edit_file_blocking",
    "find_occurrences",
]

DEFAULT_BUDGET: Final = 16000


def check_arguments(args: dict[str, Any], name: str) -> tuple[str, str, str] | str:
    """``(file_path, old_string, new_string)``, or the first error text (reference 3.6.1).

    Lone surrogates in the strings become U+FFFD before they are compared.
    """
    file_path = args.get("file_path")
    old = args.get("old_string")
    new = args.get("new_string")
    if not isinstance(file_path, str) or not file_path:
        return f'Missing required argument "file_path" for {name}.'
    if not isinstance(old, str):
        return f'Missing required argument "old_string" for {name}.'
    if not isinstance(new, str):
        return f'Missing required argument "new_string" for {name}.'
    old, new = sanitize_text(old), sanitize_text(new)
    if not old:
        return (
            "old_string must not be empty — edit_file replaces existing text. To create "
            "a file or rewrite it wholesale, use write_file."
        )
    if old == new:
        return (
            "old_string and new_string are identical — nothing to change. Make "
            "new_string the desired replacement text."
        )
    return file_path, old, new


def find_occurrences(content: str, old: str) -> list[int]:
    """Start offsets of the non-overlapping occurrences of ``old``, left to right."""
    sites = []
    index = content.find(old)
    while index != -1:
        sites.append(index)
        index = content.find(old, index + len(old))
    return sites


def _read_regular(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        kind = non_regular_kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise _NotRegularError(kind)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


@final
class _NotRegularError(PenguinError):
    def __init__(self, kind: str) -> None:
        super().__init__(f"it is not a regular file ({kind}).")


@reports_refusals
def edit_file_blocking(
    *,
    workspace: str,
    file_path: str,
    old: str,
    new: str,
    replace_all: bool,
    budget: int,
    before_commit: Callable[[], None] | None = None,
    sandbox: Callable[[str, str], str | None] | None = None,
    weigh: FileCheck | None = None,
) -> FileReport:
    """Everything of an edit_file call after the argument checks; blocking.

    ``old`` and ``new`` must be free of lone surrogates (see :func:`sanitize_text`).
    ``weigh`` is given the size and device of the file before it is read, and of a
    directory before a hint lists it (``_mounts.FileCheck``); it may raise to stop.
    """
    resolved, info = locate(workspace, file_path, verb="edit", failure_verb="read")
    denial = None if sandbox is None else sandbox(file_path, resolved)
    if denial is not None:
        return FileReport(denial, failed=True)
    if info is None:
        refuse(
            f'File not found: "{file_path}". edit_file only edits existing files — check '
            "the path (absolute paths are supported), or use write_file to create it."
            f"{path_hint(resolved, weigh)}"
        )
    if stat.S_ISDIR(info.st_mode):
        return FileReport(f'Cannot edit "{file_path}": it is a directory.', failed=True)
    target = realpath(resolved)
    try:
        kind = non_regular_kind(info.st_mode)
        if kind is not None:
            raise _NotRegularError(kind)
        if weigh is not None:
            weigh(info.st_size, info.st_dev)  # it is read whole, and written whole
        data = _read_regular(target)
    except (OSError, _NotRegularError) as exc:
        return FileReport(f'Failed to read "{file_path}": {describe_error(exc)}', failed=True)
    content = data.decode("utf-8", errors="surrogateescape")
    if weigh is not None:  # each line is split, each replacement rendered
        lines, replacements = content.count("\n"), content.count(old)
        weigh(len(data) + LINE_WEIGHT * lines + SITE_WEIGHT * replacements, info.st_dev)
    sites = find_occurrences(content, old)
    if not sites:
        text = (
            f'old_string not found in "{file_path}". Make sure it matches the file content '
            "exactly, including whitespace and indentation."
        )
        if "\r\n" in content:
            text += (
                r" Note: the file uses CRLF (\r\n) line endings — a multi-line old_string "
                r"must include the \r characters."
            )
        return FileReport(text, failed=True)
    if len(sites) > 1 and not replace_all:
        return FileReport(
            f'old_string occurs {len(sites)} times in "{file_path}". Add surrounding context '
            "to make it unique, or set replace_all to true to replace every occurrence.",
            failed=True,
        )
    updated = content.replace(old, new)
    try:
        write_atomically(
            target,
            updated.encode("utf-8", errors="surrogateescape"),
            mode=stat.S_IMODE(info.st_mode),
            before_commit=before_commit,
        )
    except OSError as exc:
        return FileReport(f'Failed to write "{file_path}": {describe_error(exc)}', failed=True)
    first_line = f'Replaced {plural(len(sites), "occurrence")} in "{file_path}".'
    hunks = build_edit_hunks(content, sites, old, new)
    return FileReport(render_edit_report(first_line, hunks, len(sites), budget))


@final
class EditFileTool(FileTool):
    """edit_file: replace an exact string in an existing file."""

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """Run one call; the output is always exactly one delta."""
        checked = check_arguments(args, self.name)
        if isinstance(checked, str):
            fail(checked)
        file_path, old, new = checked
        configured = ctx.definition.max_output_length
        return await self.report(
            ctx,
            lambda check: edit_file_blocking(
                workspace=os.path.abspath(ctx.workspace_dir),
                file_path=file_path,
                old=old,
                new=new,
                replace_all=args.get("replace_all") is True,
                budget=configured if configured > 0 else DEFAULT_BUDGET,
                before_commit=check,
                sandbox=self.write_check(),
                weigh=check,
            ),
        )
