"""Resolving a path's symlinks and ``..`` in a few system calls: :func:`realpath`.

What this module owns: :func:`resolved` (the real path of what exists) and
:func:`realpath` (``os.path.realpath``'s answer, not strict). ``os.path.realpath``
``lstat``-s every component in Python, nine system calls for a file in a batch task's
workspace, each of which hands the GIL over when another thread waits for it (the file
tools run in worker threads beside the event loop). On Linux the kernel resolves the
whole path once: a descriptor of it (``O_PATH``), then the name the kernel keeps for
that descriptor. Anything else, or any doubt, takes ``os.path.realpath`` itself.
Blocking: call from a worker thread where a file system may be slow.
"""

from __future__ import annotations

import os
from typing import Final

__all__ = ["realpath", "resolved"]

_BY_DESCRIPTOR: Final = hasattr(os, "O_PATH") and os.path.isdir("/proc/self/fd")


def resolved(path: str) -> str | None:
    """``path`` with its symlinks and ``..`` resolved, or ``None`` when that does not exist.

    What ``os.path.realpath`` then ``os.path.lexists`` give, in three system calls on
    Linux (a descriptor of the path itself, ``O_PATH``, and the name the kernel keeps for
    it) instead of one ``lstat`` per component in Python: a server session's layout,
    resolved at every command start, took 262 µs and takes 112.
    """
    if _BY_DESCRIPTOR:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError:
            fd = -1  # a symlink loop, say: realpath's own answer, below
        if fd >= 0:
            try:
                real: str | None = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                real = None
            finally:
                os.close(fd)
            if real is not None and real.startswith("/") and not real.endswith(" (deleted)"):
                return real
    real = os.path.realpath(path)
    return real if os.path.lexists(real) else None


def realpath(path: str) -> str:
    """``os.path.realpath(path)``: the same answer, in fewer system calls on Linux.

    A path that exists resolves through :func:`resolved`. One that does not, named
    absolutely and without ``..`` (a file about to be created), is its resolved parent
    joined with its name, when nothing at all is there (a dangling symlink is followed
    by ``os.path.realpath``) and the parent exists.
    """
    if _BY_DESCRIPTOR:
        found = resolved(path)
        if found is not None:
            return found
        parent, name = os.path.split(path)
        if name and os.path.isabs(path) and os.path.normpath(path) == path:
            try:
                os.lstat(path)
            except FileNotFoundError:
                upper = resolved(parent)
                if upper is not None:
                    return os.path.join(upper, name)
            except (OSError, ValueError):
                pass
    return os.path.realpath(path)
