"""Small real disks for the write-failure tests (issue 21.4): a tmpfs mounted for a test.

Mounting needs root (or CAP_SYS_ADMIN); where it is not permitted the test is skipped,
with the reason.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(where: Path, size: str = "2m") -> Iterator[Path]:
    """A ``size`` tmpfs mounted on ``where`` (created) for the block; unmounted after."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or 'not permitted'}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def remount_read_only(where: Path) -> None:
    """Make the tmpfs on ``where`` read-only."""
    subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True, capture_output=True)


def fill(disk: Path, leave: int) -> Path:
    """Fill ``disk`` until about ``leave`` bytes are free; the filler file, to free it later."""
    import os

    stats = os.statvfs(disk)
    free = stats.f_bavail * stats.f_frsize
    filler = disk / "filler"
    filler.write_bytes(b"\0" * max(0, free - leave))
    return filler
