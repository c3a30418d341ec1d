"""Fixtures of the sandbox's kernel tests: a workspace, a decoy tree beside it, its checksum."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from penguin.environment.sandbox import probe


@pytest.fixture(scope="session")
def kernel_sandbox() -> None:
    """Skip, with the machine's reason, where the sandbox cannot be enforced."""
    reason = probe().reason
    if reason is not None:
        pytest.skip(f"sandbox unavailable here: {reason}")


def tree_digest(root: Path) -> str:
    """A checksum of every path, mode, and file content under ``root``."""
    digest = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted([*dirs, *files]):
            path = Path(folder) / name
            info = path.lstat()
            digest.update(f"{path.relative_to(root)}:{info.st_mode}:{info.st_mtime_ns}".encode())
            if path.is_file() and not path.is_symlink():
                digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture
def decoy(tmp_path: Path) -> Path:
    """A decoy tree outside the workspace (never a real home, never ``/``)."""
    root = tmp_path / "decoy"
    (root / "deep").mkdir(parents=True)
    (root / "keep.txt").write_text("keep\n")
    (root / "deep" / "more.txt").write_text("more\n")
    return root


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    (path / ".git" / "hooks").mkdir(parents=True)
    (path / ".git" / "config").write_text("[core]\n")
    return path
