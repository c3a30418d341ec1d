"""A configuration file's text on disk: read with located errors, replaced atomically.

Every file penguin reads and rewrites — ``system_config.yaml`` (``_yaml``,
``_system``), ``.project_config.toml`` and the vault (``_toml``) — is read and
written the same way, and this module is that one way:

- :func:`read_config_text` reads the bytes and decodes them as UTF-8; a directory,
  an unreadable file or bytes that are not UTF-8 are a :class:`ConfigError` naming
  the file (and the line of the first bad byte);
- :func:`replace_text` replaces the file so that a reader sees the old file or the
  new one, never a mix: the text goes to a temporary file in the same directory
  (created 0600 by ``mkstemp``), is flushed to disk, gets its final mode and is
  renamed over the file; a failure leaves the old file and no temporary;
- :func:`editing` makes a read-change-replace of a file one step against other
  processes doing the same, so that two edits at once (two ``penguin config model
  add``) both land instead of the later one dropping the earlier one's change.

It does not decide what a missing file means (an empty vault, or an error saying
how to create ``system_config.yaml``), which mode a file gets (0600 for the TOML
files, the existing mode for YAML) or how the text is parsed: those are the
callers'. It imports nothing heavy, so both the YAML and the TOML side can use it.
Blocking functions; async callers run them in a worker thread.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from ._errors import ConfigError

__all__ = ["EDIT_WAIT_S", "editing", "read_config_text", "replace_text"]

EDIT_WAIT_S: Final = 10.0
"""How long :func:`editing` waits for another process's edit to end (seconds)."""
_EDIT_POLL_S: Final = 0.02


def read_config_text(path: Path, kind: str) -> str:
    """The UTF-8 text of the configuration file at ``path``.

    :class:`FileNotFoundError` propagates as it is: what a missing file means is the
    caller's. Raises :class:`ConfigError` for a directory (``is a directory, not a
    {kind} file``), a file that cannot be read, and bytes that are not UTF-8 (with the
    line of the first bad byte).
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise
    except IsADirectoryError:
        raise ConfigError(f"is a directory, not a {kind} file", path) from None
    except OSError as error:
        raise ConfigError(f"cannot be read: {error.strerror or error}", path) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ConfigError("is not valid UTF-8 text", path, line) from None


def replace_text(path: Path, text: str, mode: int) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically, as a file of permission ``mode``.

    Missing parent directories are created. The temporary file is private until it
    is complete; its mode is set just before the rename. On failure the temporary is
    removed and the :class:`OSError` propagates.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
            os.fchmod(stream.fileno(), mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


@contextlib.contextmanager
def editing(path: str | os.PathLike[str], *, wait_s: float = EDIT_WAIT_S) -> Iterator[None]:
    """Hold the right to edit the file at ``path`` (read it, change it, replace it).

    Another process (or thread) editing a file in the same directory waits until the
    block ends, so each read sees the other's change. The lock is an ``flock`` of the
    directory: replacing the file renames over it, which a lock on the file itself
    would not survive, and no lock file is left behind. The directory is created when
    missing. Readers need no lock (a replacement is atomic). Not re-entrant: a block
    must not open another for the same directory.

    Raises :class:`ConfigError` when another edit has held it for ``wait_s`` seconds.
    Blocking; async callers run it in a worker thread.
    """
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(file.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ConfigError(
                        f"another process has been changing it for {wait_s:g} s;"
                        " nothing was changed, try again",
                        file,
                    ) from None
                time.sleep(_EDIT_POLL_S)
        yield
    finally:
        os.close(fd)  # drops the lock
