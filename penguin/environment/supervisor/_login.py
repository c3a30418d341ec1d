"""One login environment for many Environments: :class:`SharedLogin`.

Every Environment gives its commands ``bash -lc`` semantics by running one login
``bash`` that dumps its environment (``_environ.resolve_login_environment``). A process
that opens many Environments — a batch's sessions, a server's, the subagents of a
session — would start one login shell per Environment, and a login shell is not cheap:
a profile that runs ``pyenv init`` or ``conda init`` costs ~200 ms of CPU, more than
the rest of a short task, and many at once contend for pyenv's lock file.

A :class:`SharedLogin` given to those Environments (``EnvironmentConfig.shared_login``;
every :class:`~penguin.Agent` holds one for its sessions) resolves it for all of them:

- **What is shared** is the resolved variables (or the failure: the host environment is
  then used, with one warning), keyed by everything the probe's result depends on that
  can be seen from here: the shell's program, the host environment it runs with, and
  this process's working directory.
- **When it is taken again** (a new login shell): once it is older than ``max_age``
  (:data:`DEFAULT_MAX_AGE`, 60 s), or when one of the start-up files a login ``bash``
  reads changed (its inode, size or modification time): ``/etc/profile``,
  ``/etc/bash.bashrc``, the ``/etc/profile.d`` folder, and ``.bash_profile``,
  ``.bash_login``, ``.profile`` and ``.bashrc`` in ``HOME``. A file that those source in
  turn is seen only through ``max_age``.
- **Concurrency**: Environments that need it at the same time wait for the one probe that
  runs, in the nursery of the Environment that asked first. If that Environment closes
  before the probe ends, the probe is cancelled, nothing is kept, and one of the waiters
  runs the next one. The object may serve several Trio runs (one after another, as a
  Ray worker's shares do, or in threads side by side): a probe is waited for only by
  callers of its own run.

It owns no process and no task: the probe is the caller's, under the caller's
cancellation, exactly as without sharing. Looking at the start-up files is blocking
file-system work (a ``HOME`` on NFS can hang): :meth:`SharedLogin.resolve` does it in a
worker thread, and :meth:`SharedLogin.kept` is given what :meth:`SharedLogin.startup_files`
found in one (``Environment.open`` looks once, with its other checks).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from typing import Final, TypeAlias, final

import attrs
import trio

from penguin._concurrency import run_in_worker

from ._environ import resolve_login_environment

__all__ = ["DEFAULT_MAX_AGE", "LoginFiles", "SharedLogin"]

DEFAULT_MAX_AGE: Final = 60.0
"""Seconds a shared login environment is used before a new login shell resolves it."""

_KEPT: Final = 16
"""The most login environments kept at once (one per distinct host environment)."""

_SYSTEM_FILES: Final = ("/etc/profile", "/etc/bash.bashrc", "/etc/profile.d")
_HOME_FILES: Final = (".bash_profile", ".bash_login", ".profile", ".bashrc")

_Key: TypeAlias = tuple[str, str, tuple[tuple[str, str], ...]]
LoginFiles: TypeAlias = tuple[tuple[int, int, int] | None, ...]
"""The start-up files of a login bash as they were seen (:meth:`SharedLogin.startup_files`)."""


def _startup_files(home: str | None) -> LoginFiles:
    """The identity of each start-up file a login bash reads (``None``: not there)."""
    paths = list(_SYSTEM_FILES)
    if home:
        paths.extend(os.path.join(home, name) for name in _HOME_FILES)
    state: list[tuple[int, int, int] | None] = []
    for path in paths:
        try:
            found = os.stat(path)
        except OSError:
            state.append(None)
        else:
            state.append((found.st_ino, found.st_size, found.st_mtime_ns))
    return tuple(state)


def _working_directory() -> str:
    try:
        return os.getcwd()
    except OSError:  # removed under us: the probe inherits it all the same
        return ""


@final
@attrs.frozen
class _Resolved:
    environment: Mapping[str, str] | None
    started: float  # time.monotonic() when its probe started
    files: LoginFiles  # the start-up files as they were then


@final
class SharedLogin:
    """Login environments resolved once and shared by the Environments given this object.

    ``max_age`` is how many seconds a resolved environment is used for (0: never kept,
    every Environment runs its own login shell). ``probes`` counts the login shells
    started through it.
    """

    def __init__(self, *, max_age: float = DEFAULT_MAX_AGE) -> None:
        if max_age < 0:
            raise ValueError(f"max_age must be at least 0, got {max_age!r}")
        self.max_age = max_age
        self.probes = 0
        self._resolved: dict[_Key, _Resolved] = {}
        self._keeping = threading.Lock()  # runs in other threads may keep results too
        self._pending: dict[tuple[_Key, trio.lowlevel.TrioToken], trio.Event] = {}

    async def resolve(
        self, program: str, base: Mapping[str, str], files: LoginFiles | None = None
    ) -> dict[str, str] | None:
        """The login environment of ``program`` run in ``base``: shared, or resolved now.

        The same result as :func:`resolve_login_environment` (``None`` when the probe
        failed), as a fresh dict the caller may keep. ``files`` is what
        :meth:`startup_files` found for ``base`` just before; without it (and after a
        wait for another caller's probe) the files are looked at in a worker thread.
        """
        key: _Key = (program, _working_directory(), tuple(sorted(base.items())))
        home = base.get("HOME")
        pending_key = (key, trio.lowlevel.current_trio_token())
        while True:
            if files is None:
                files = await run_in_worker(_startup_files, home)
            kept = self._fresh(key, files)
            if kept is not None:
                await trio.lowlevel.checkpoint()
                return None if kept.environment is None else dict(kept.environment)
            running = self._pending.get(pending_key)
            if running is None:
                break
            await running.wait()  # then look again: it may have been cancelled
            files = None
        done = self._pending[pending_key] = trio.Event()
        started = time.monotonic()
        try:
            self.probes += 1
            environment = await resolve_login_environment(program, base)
            if self.max_age > 0:
                kept_copy = None if environment is None else dict(environment)
                self._keep(key, _Resolved(kept_copy, started, files))
            return environment
        finally:
            del self._pending[pending_key]
            done.set()

    @staticmethod
    def startup_files(base: Mapping[str, str]) -> LoginFiles:
        """The start-up files a login bash run in ``base`` reads, as they are now.

        Blocking (one ``stat`` each): call it in a worker thread, and give the result to
        :meth:`kept` or :meth:`resolve`.
        """
        return _startup_files(base.get("HOME"))

    def kept(
        self, program: str, base: Mapping[str, str], files: LoginFiles
    ) -> tuple[dict[str, str] | None] | None:
        """What :meth:`resolve` would answer at once without a login shell, or None.

        ``(environment,)`` when a fresh result is kept (``environment`` is None when that
        probe failed), so that a caller can skip waiting for :meth:`resolve`. ``files``
        is what :meth:`startup_files` found for ``base``: this looks at no file.
        """
        key: _Key = (program, _working_directory(), tuple(sorted(base.items())))
        kept = self._fresh(key, files)
        if kept is None:
            return None
        return (None if kept.environment is None else dict(kept.environment),)

    def _fresh(self, key: _Key, files: LoginFiles) -> _Resolved | None:
        kept = self._resolved.get(key)
        if kept is None or time.monotonic() - kept.started >= self.max_age:
            return None
        return kept if kept.files == files else None

    def _keep(self, key: _Key, resolved: _Resolved) -> None:
        with self._keeping:
            self._resolved.pop(key, None)
            self._resolved[key] = resolved
            while len(self._resolved) > _KEPT:  # the oldest first (insertion order)
                del self._resolved[next(iter(self._resolved))]
