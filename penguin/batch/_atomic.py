"""Whole-file writes for the batch package: a file is either the old one or the new one.

:func:`write_atomically` writes next to the target (``.<name>.<random>.part``), then
renames into place; on any failure the ``.part`` file is removed and the error raised,
so nothing half-written is left behind under either name.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

__all__ = ["write_atomically"]


def write_atomically(target: Path, data: bytes, *, mode: int) -> None:
    """Replace ``target`` with ``data`` (file permissions ``mode``), in one rename (blocking)."""
    partial = target.with_name(f".{target.name}.{secrets.token_hex(4)}.part")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        partial.replace(target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
        raise
