"""Writing files whole for the batch package: the one atomic-write helper (issue 17.3).

:func:`write_atomically` puts the bytes in a ``.<name>.<random>.part`` file beside the
target, then renames it over the target: a reader sees the old file or the new one,
never half of one. A write that fails (a full disk, a directory that vanished) takes
its ``.part`` file with it and raises the system's :class:`OSError`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

__all__ = ["write_atomically"]


def write_atomically(target: Path, data: bytes, mode: int) -> None:
    """Replace ``target`` with ``data`` (a new file gets ``mode``, before the umask).

    Blocking. The parent directory must exist. On failure nothing is left but what
    was there before.
    """
    partial = target.with_name(f".{target.name}.{secrets.token_hex(4)}.part")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        partial.replace(target)
    except BaseException:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise
