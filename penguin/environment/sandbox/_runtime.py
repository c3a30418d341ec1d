"""One Environment's sandbox: the policy resolved at each command start, and its namespaces.

Owns :class:`CommandSandbox`, which the command supervisor asks to turn a command line
into one that runs under the policy (:meth:`CommandSandbox.wrap`), the file tools ask
whether a write is allowed (:meth:`CommandSandbox.write_denial`), and the Environment
closes. It also owns the session's private temporary folder (X1.2), made under the
scratchpad (or, without one, under the system's temporary folder, and then removed at
close) and given to commands as ``TMPDIR``.

Its file-system work (the folders, the layout's real paths, ``bwrap``'s end at close)
runs in worker threads: the event loop never waits on a file or a process here.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final, final

import trio

from penguin._concurrency import run_in_worker
from penguin._errors import SandboxUnavailableError
from penguin._fdlimit import out_of_resources

from ._linux import Namespaces, SandboxedChild, _SpawnerGone, build_namespaces, probed
from ._policy import Layout, SandboxPolicy, resolve_layout, write_denial

__all__ = ["TMP_DIR_NAME", "CommandSandbox", "close_sandbox", "open_sandbox"]

_HAS_PIDFD: Final = hasattr(os, "pidfd_open")
"""Commands start through a spawner only where they can be watched without being
penguin's children."""

TMP_DIR_NAME: Final = "tmp"
"""The private temporary folder's name under the scratchpad."""


@final
class CommandSandbox:
    """The sandbox of one Environment (spec/sandbox.md X1.2, X2.1, X2.2)."""

    def __init__(
        self,
        policy: SandboxPolicy,
        *,
        workspace: Path,
        scratchpad: Path | None,
        data_root: Path | None,
    ) -> None:
        self.policy = policy
        self._workspace = str(workspace)
        self._scratchpad = None if scratchpad is None else str(scratchpad)
        self._data_root = None if data_root is None else str(data_root)
        self._home = os.environ.get("HOME") or os.path.expanduser("~")
        self._owned_tmp = scratchpad is None
        if scratchpad is None:
            self.tmpdir = tempfile.mkdtemp(prefix="penguin-sandbox-")
        else:
            tmp = scratchpad / TMP_DIR_NAME
            tmp.mkdir(parents=True, exist_ok=True)
            self.tmpdir = str(tmp)
        self._lock = trio.Lock()
        self._current: Namespaces | None = None
        self._retired: list[Namespaces] = []
        self._place: Callable[[int], object] | None = None
        self._after: list[Callable[[], object]] | None = []
        """Run in :meth:`_finish`, once every spawner has ended; ``None`` once closing."""

    def contain(self, place: Callable[[int], object]) -> list[int]:
        """Have ``place`` given each spawner made from now on; the pids of those there are.

        The command supervisor's cgroup (``supervisor/_cgroup``): a spawner placed before
        its first start makes every command it starts a member from its first
        instruction, which a placement after the start cannot promise. A new spawner is
        placed in the worker thread that makes it, before any command is sent to it;
        the caller places those returned, before its first command. ``place`` blocks
        (it may wait milliseconds for the kernel), so it is never called here, on the
        loop's thread. A spawner's ``bwrap`` stays out: killed together, ``bwrap``
        would leave the spawner to be reaped by PID 1, which in some containers reaps
        nothing.
        """
        self._place = place
        return self.spawners()

    def spawners(self) -> list[int]:
        """The pids of the spawners that run now (the current layout's and retired ones)."""
        every = (*self._retired, *([self._current] if self._current else []))
        return [n.spawner.pid for n in every if n.spawner is not None]

    def on_close(self, then: Callable[[], object]) -> bool:
        """Have ``then`` run when the sandbox closes, after every spawner has ended.

        It runs in the worker thread that closes the sandbox (so it may block), and an
        ``OSError`` from it is ignored. ``False`` (and ``then`` not kept) when the
        sandbox is closing or closed already. The command supervisor's cgroup is removed
        this way once its only members, the spawners, are gone (``supervisor/_cgroup``).
        """
        if self._after is None:
            return False
        self._after.append(then)
        return True

    def _build(self, layout: Layout, env: Mapping[str, str]) -> Namespaces:
        """:func:`build_namespaces`, its spawner placed (blocking: a worker thread's)."""
        fresh = build_namespaces(layout, env, spawner=_HAS_PIDFD)
        place = self._place
        if place is not None and fresh.spawner is not None:
            place(fresh.spawner.pid)
        return fresh

    def layout(self) -> Layout:
        """The policy resolved now (X1.2: at each command start and file-tool call)."""
        return resolve_layout(
            self.policy,
            workspace=self._workspace,
            scratchpad=self._scratchpad,
            tmpdir=self.tmpdir,
            home=self._home,
            data_root=self._data_root,
        )

    def environment(self) -> dict[str, str]:
        """What the sandbox sets in every command's environment (after the vault's)."""
        if self.policy.mode == "workspace-write":
            return {"TMPDIR": self.tmpdir}
        return {}

    async def wrap(
        self, argv: Sequence[str], executable: str | None, cwd: Path, path: str | None = None
    ) -> tuple[tuple[str, ...], str | None]:
        """``argv`` made to run under the policy; raise ``OSError`` when it cannot be.

        ``path`` is the command's ``PATH``: when it finds ``executable`` under the name
        ``argv[0]``, the name is kept (so ``$0`` and the shell's messages read as
        unsandboxed).
        """
        if not self.policy.enforced:
            await trio.lowlevel.checkpoint()
            return tuple(argv), executable
        current = await self.prepare()
        if executable is not None:  # a search of PATH: the file system, in a worker
            found = await run_in_worker(functools.partial(shutil.which, argv[0], path=path))
            executable = None if found == executable else executable
        return current.command(argv, executable, str(cwd)), None

    async def start(
        self,
        argv: Sequence[str],
        executable: str | None,
        cwd: Path,
        env: Mapping[str, str],
        stdio: tuple[int, int, int],
        tty: bool,
    ) -> SandboxedChild | None:
        """Start ``argv`` under the policy through the layout's spawner; raise ``OSError``.

        The policy is resolved first, as for :meth:`wrap`. ``stdio`` are the command's
        stdin, stdout and stderr (the caller keeps and closes its copies). ``None``
        when this command must enter with ``nsenter`` instead (:meth:`wrap`): the
        sandbox enforces nothing, or the command is too large for the spawner.
        """
        if not self.policy.enforced:
            await trio.lowlevel.checkpoint()
            return None
        for attempt in (1, 2):
            current = await self.prepare()
            if current.spawner is None:
                return None
            try:
                return await current.spawner.start(argv, executable, str(cwd), env, stdio, tty)
            except _SpawnerGone:  # nothing started: new namespaces, once
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def prepare(self) -> Namespaces:
        """The namespaces of the layout right now, made if it changed; raise ``OSError``.

        The Environment calls it as it opens, so the first command does not wait for
        ``bwrap`` (nor count that wait against its timeout).
        """
        layout = await run_in_worker(self.layout)
        async with self._lock:
            current = self._current
            if current is None or current.key != layout.key or not current.usable:
                env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
                fresh = await trio.to_thread.run_sync(self._build, layout, env)
                if current is not None:
                    self._retired.append(current)
                self._current = current = fresh
        return current

    def wrap_blocking(self, argv: Sequence[str], cwd: Path) -> tuple[str, ...]:
        """:meth:`wrap` outside Trio (``penguin sandbox``); raise ``OSError``."""
        if not self.policy.enforced:
            return tuple(argv)
        layout = self.layout()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        namespaces = build_namespaces(layout, env)
        if self._current is not None:
            self._retired.append(self._current)
        self._current = namespaces
        return namespaces.command(argv, None, str(cwd))

    def write_denial(self, file_path: str, resolved: str) -> str | None:
        """X2.2's text when a file tool may not write ``resolved``, else ``None``."""
        return write_denial(file_path, resolved, self.layout())

    async def aclose(self) -> None:
        """:meth:`close` from the event loop: the waits and the removal in a worker thread.

        Shielded: it always runs to its end. The descriptors and the spawners' sockets
        (Trio's) are closed here; waiting for each ``bwrap`` to end (bounded) and removing
        the temporary folder are blocking, and run in a worker.
        """
        every, after = self._hang_up()
        with trio.CancelScope(shield=True):
            await run_in_worker(self._finish, every, after)

    def _hang_up(self) -> tuple[list[Namespaces], list[Callable[[], object]]]:
        every = [*self._retired, *([self._current] if self._current else [])]
        self._retired.clear()
        self._current = None
        after, self._after = self._after or [], None
        for namespaces in every:
            namespaces.hang_up()
        return every, after

    def _finish(self, every: Sequence[Namespaces], after: Sequence[Callable[[], object]]) -> None:
        for namespaces in every:
            namespaces.reap()
        for then in after:
            with contextlib.suppress(OSError):
                then()
        if self._owned_tmp:
            with contextlib.suppress(OSError):
                shutil.rmtree(self.tmpdir)

    def close(self) -> None:
        """Close every namespace descriptor; remove a temporary folder penguin made.

        Blocking (it waits, bounded, for each spawner's ``bwrap`` to end): the event loop
        calls :meth:`aclose` instead.
        """
        self._finish(*self._hang_up())


async def open_sandbox(
    policy: SandboxPolicy | None, *, workspace: Path, scratchpad: Path | None
) -> CommandSandbox | None:
    """An Environment's sandbox, ``None`` when there is nothing to enforce.

    Raises :class:`~penguin.SandboxUnavailableError` when this machine cannot enforce
    ``policy`` (X3.1: a mode someone chose is never dropped silently).
    """
    if policy is None or not policy.enforced:
        await trio.lowlevel.checkpoint()
        return None
    support = await probed()
    if support.reason is not None:
        raise SandboxUnavailableError(support.reason)
    if policy.data_root is not None:
        root: Path | None = Path(policy.data_root)
    else:
        from penguin.config import data_root

        root = data_root()
    sandbox = await run_in_worker(  # its private temporary folder is made here
        functools.partial(
            CommandSandbox, policy, workspace=workspace, scratchpad=scratchpad, data_root=root
        )
    )
    try:
        await sandbox.prepare()
    except OSError as error:
        await sandbox.aclose()
        if out_of_resources(error):
            raise  # out of files or processes for now; the sandbox is fine: say that
        raise SandboxUnavailableError(str(error) or "bwrap failed") from error
    except BaseException:
        await sandbox.aclose()
        raise
    return sandbox


@asynccontextmanager
async def close_sandbox(sandbox: CommandSandbox | None) -> AsyncIterator[None]:
    """Close ``sandbox`` (if any) when the block ends (in a worker thread, shielded)."""
    try:
        yield
    finally:
        if sandbox is not None:
            await sandbox.aclose()
