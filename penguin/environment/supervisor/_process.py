"""One command's OS process: how it is started, signalled and ended for good.

What this module owns:

- **Spawning** ``argv`` as the leader of a new session and process group, with stdout
  and stderr sharing ONE pipe (so the kernel keeps their arrival order) or, in tty
  mode, a pseudo-terminal that becomes the group's controlling terminal. The pipe is
  enlarged to :data:`PIPE_SIZE`, so a flood costs fewer wake-ups. Where the kernel has
  pidfds, a pipe-mode command is started on the loop's own thread (:class:`_Child`):
  ``Popen`` is a few hundred microseconds of work, and a worker thread added two GIL
  hand-overs and a wake-up of the loop (1.5 ms of latency and 0.4 ms of CPU per
  command here). ``vfork`` suspends the loop until the child's ``exec``, and the
  child's ``chdir`` comes first, so this is done only in a directory on a local file
  system (``_mounts``); one elsewhere (NFS, a FUSE mount), and a tty-mode command
  (its child runs Python to claim the terminal before its ``exec``), is started in a worker,
  where a server that stops answering holds up that one command, not the loop, and a
  cancel leaves the start after a second (:func:`~penguin._concurrency.run_leavable_in_worker`):
  the call ends at its interrupt or time limit, and a command the server lets start
  later is killed and reaped in that worker (:meth:`_Child.discard`). A server penguin
  speaks with over its stdin and stdout (an MCP stdio server) starts the same way, with
  a pipe of its own for each of the three (:func:`spawn_piped`).
- **Signalling a group** (:func:`signal_group`), the one place a ``killpg`` is sent, and
  waiting for a leader's exit without reaping it (:func:`wait_exited`).
- **Ending** a process tree so that nothing survives (:func:`end_process_tree`).

What it does not own: reading the process table and reaching a process by identity
(``_proctable``), reading the output into buffers, deciding *when* a process is ended
(the supervisor does), or the child's environment contents (``_environ``).

The rule for signalling a group: only while its leader is unreaped. Until the leader is
reaped its pid — the group's id — belongs to it and to no other process, so ``killpg``
reaches this group and no other. After the leader is reaped the id stays this group's
only while some member lives; once the last member is gone the kernel may give the
number to a new process that leads a group of its own, and a ``killpg`` lands on a
stranger (``tests/environment/supervisor/test_process.py``, ``test_10_3_*``, shows both
halves). Whether a member still lives cannot be checked in the same step as the
``killpg``, so after the leader is reaped the members are signalled one by one, by
identity (``_proctable.send_signal``), never through the group. A caller that must
signal a group after its leader exited waits with :func:`wait_exited`, which leaves the
leader a zombie — the id reserved — until it is done.

How a tree is ended, and why in this order:

1. One read of the process table while the root is still unreaped: the root's
   descendants (they are lost from the tree once the root dies and they are
   reparented), its group, and every live process carrying this session's marker.
2. SIGTERM to the group — only while the root is unreaped (the rule above) — and to
   each other process found in 1, individually (each process gets one SIGTERM: some
   programs read a second one as "force quit now").
3. Wait up to the grace period for the root to be reaped and everything signalled to
   be gone, then read the table again: anything new (forked during the grace period,
   or an escapee the first read missed) gets SIGTERM too and is waited for.
4. Whatever is still there when the grace period ends gets SIGKILL (the group while
   the root is unreaped, then each process found by a fresh read), and after the root
   is reaped, marker sweeps repeat until one finds nothing that was not killed already
   (a killed process cannot fork any more, so this converges).
5. Then wait until every process sent SIGKILL is dead (gone or a zombie), for at most
   :data:`KILL_SETTLE`: a SIGKILL takes effect only when its target next runs, which on
   a loaded machine can be tens of milliseconds later, and "ended" means dead, not
   signalled.

Rules that keep it safe and cheap:

- Processes are signalled by identity, never by a bare pid (``_proctable``).
- A zombie is dead: it never counts as "still there". This matters where PID 1 does
  not reap orphans (some containers): a dead orphan stays a zombie member of the
  group for ever, and ``killpg(pgid, 0)`` keeps succeeding.
- Reads of the table are shared between the sessions ending at the same time
  (``_proctable.shared_scan``), and a session whose root had already exited (nothing
  to stop in a hurry) waits :data:`GATHER_WINDOW` for company, so short commands run
  one after another share walks too. Start times filter: a process that started before
  the root cannot carry its marker, so its environment is not read. That first read,
  for a root already exited, is of the pids given since the spawn only
  (``SpawnedProcess.mark``): everything the command started, marked or in its group,
  got one of them; any later read is of every process.

Limits: a process that both left the tree and the group *and* removed the marker from
its environment (``env -u PENGUIN_OWNER setsid …``) cannot be told from a stranger's,
and survives its command; where the supervisor has a cgroup (``_cgroup``) it ends with
the Environment, else it survives that too. So can a process in another user's name
(setuid), which we may not signal anyway (a cgroup's kill reaches it). A pid given out
of the kernel's order (``ns_last_pid`` written by a checkpoint/restore tool, root only)
escapes the first read of a command that already exited, as it escapes
``_proctable``'s cache of older processes; the session's closing sweep of its marker
still finds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Protocol, cast, final

import attrs
import trio

from penguin._concurrency import run_leavable_in_worker
from penguin._mounts import on_local_disk

from ._proctable import (
    OWNER_VARIABLE,
    PidMark,
    ProcessEntry,
    ProcessTable,
    is_alive,
    pid_mark,
    read_process_table,
    send_signal,
    shared_scan,
    start_of,
    started_from_now,
)

__all__ = [
    "DEFAULT_GRACE",
    "KILL_SETTLE",
    "OWNER_VARIABLE",
    "PIPE_SIZE",
    "ExitWatch",
    "Launcher",
    "PipedProcess",
    "RootProcess",
    "ServerProcess",
    "SpawnedProcess",
    "end_process_tree",
    "exit_watch",
    "kill_marked",
    "launch_process",
    "signal_group",
    "spawn_piped",
    "spawn_process",
    "sweep_marked",
    "wait_exited",
]

DEFAULT_GRACE: Final = 1.0
"""Seconds between SIGTERM and SIGKILL (reference 4.11)."""

PIPE_SIZE: Final = 256 * 1024
"""The output pipe's capacity. Larger pipes bring a flood no more throughput, and every
page counts against the user's ``pipe-user-pages-soft`` (64 MiB by default): 64
sessions of 1 MiB pipes would exhaust it, after which every new pipe the user opens,
in any program, is cut to a page or two."""

GATHER_WINDOW: Final = 0.02
"""Seconds a session whose root already exited waits for others to share a table read."""

SWEEP_ROUNDS: Final = 8
"""The most marker sweeps after a SIGKILL; each one only kills what the last missed."""

KILL_SETTLE: Final = 2.0
"""Seconds ending a tree waits for what it sent SIGKILL to be dead. A loaded machine may
not run a killed process for tens of milliseconds; one in uninterruptible sleep (a hung
NFS read) may take longer, and is left to die on its own after this."""

_F_SETPIPE_SZ: Final = getattr(fcntl, "F_SETPIPE_SZ", 1031)
_TTY_ROWS, _TTY_COLUMNS = 24, 120
_HAS_PIDFD: Final = hasattr(os, "pidfd_open")


# --------------------------------------------------------------------------- spawning


class RootProcess(Protocol):
    """What a command's root must offer.

    A :class:`trio.Process`, or one a sandbox's spawner started (not penguin's child,
    watched through a pidfd).
    """

    @property
    def pid(self) -> int: ...

    async def wait(self) -> int:
        """Wait for the exit, reap, return the status (``-N`` for signal N)."""
        ...


class ServerProcess(RootProcess, Protocol):
    """A :class:`RootProcess` whose exit status can be read without waiting."""

    @property
    def returncode(self) -> int | None:
        """The status once it exited, ``None`` while it runs (``-N`` for signal N)."""
        ...


class Launcher(Protocol):
    """Who starts a command instead of penguin (the sandbox's spawner)."""

    async def start(
        self,
        argv: Sequence[str],
        executable: str | None,
        cwd: Path,
        env: Mapping[str, str],
        stdio: tuple[int, int, int],
        tty: bool,
    ) -> RootProcess | None:
        """Start ``argv`` as a session leader on ``stdio``; ``None``: start it yourself."""
        ...


@final
@attrs.define(eq=False)
class SpawnedProcess:
    """A started command: the root process, its group and its streams."""

    process: RootProcess
    """The root (``bash -c ...``), a Trio process or a sandboxed one; ``wait()`` reaps it."""
    pgid: int
    """Its process group (equal to its pid: it leads a new session)."""
    output: trio.lowlevel.FdStream
    """Merged stdout and stderr, or the pty master in tty mode."""
    stdin: trio.lowlevel.FdStream
    """Writes reach the command's standard input (the pty in tty mode)."""
    tty: bool
    started_at: float
    """``time.time()`` when it was spawned, for listings."""
    root_started: float = 0.0
    """A start time, as process-table entries give it, no later than the root's (0 when
    unknown): every process carrying its marker started no earlier, so older ones need
    no look. Taken from the clock just before the spawn, not read from the root's
    ``/proc/<pid>/stat``: that read waits until the root's ``exec`` has finished (1-2 ms
    for ``bash`` here), and it would wait on the loop's thread."""
    mark: PidMark | None = None
    """The pid allocation just before the spawn (``None`` when unknown): everything the
    command starts has a pid given since, so a read for what it left behind opens
    ``stat`` only for those pids (``_proctable.pid_mark``)."""

    @property
    def pid(self) -> int:
        """The root process id."""
        return self.process.pid


def _claim_controlling_terminal() -> None:  # pragma: no cover - runs in the child
    # The child is already a session leader (start_new_session); make the pty on
    # fd 0 its controlling terminal so job control and isatty() behave.
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


async def spawn_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    tty: bool,
    executable: str | None = None,
    local: bool | None = None,
) -> SpawnedProcess:
    """Start ``argv`` in a new session; raise ``OSError`` when it cannot start.

    ``executable`` is the file run when ``argv[0]`` is only the name the program is
    given (``None``: ``argv[0]`` is the file). ``local`` is :func:`on_local_disk`'s
    answer for ``cwd`` when the caller already has it (``None``: asked here).
    """
    # Every start, however made: a new session (the root leads its group), this env and cwd.
    options: dict[str, Any] = {
        "executable": executable,
        "cwd": cwd,
        "env": dict(env),
        "start_new_session": True,
    }
    since, mark = started_from_now(), pid_mark()
    if local is None:
        local = await on_local_disk(cwd)
    if _HAS_PIDFD and (tty or not local):
        # In a worker: a tty's child runs Python before its exec (it claims the
        # terminal), and a chdir may wait on another machine. A cancel leaves the start
        # after a second; a command that starts later is killed (_Child.discard).
        start = _Child.start_tty if tty else _Child.start_piped
        child, output, writer = await run_leavable_in_worker(
            lambda _check: start(argv, options), left=_Child.discard
        )
        return _spawned(child, output, writer, since, mark, tty=tty)
    if tty:
        master, slave = _open_pty()
        with _handing_over(ours=(master,), theirs=(slave,)):
            process = await trio.lowlevel.open_process(list(argv), **_on_terminal(slave), **options)
        writer = os.dup(master)
        return SpawnedProcess(
            process=process,
            pgid=process.pid,
            output=trio.lowlevel.FdStream(master),
            stdin=trio.lowlevel.FdStream(writer),
            tty=True,
            started_at=time.time(),
            root_started=_root_started(since, process.pid),
            mark=mark,
        )

    root: RootProcess
    stdin: trio.lowlevel.FdStream
    read_end, write_end = _output_pipe()
    with _handing_over(ours=(read_end,), theirs=(write_end,)):
        if _HAS_PIDFD:
            await trio.lowlevel.checkpoint_if_cancelled()
            root, writer = _Child.start(argv, write_end, options)
            stdin = trio.lowlevel.FdStream(writer)
        else:
            started = await trio.lowlevel.open_process(
                list(argv), stdin=subprocess.PIPE, stdout=write_end, stderr=write_end, **options
            )
            assert isinstance(started.stdin, trio.lowlevel.FdStream)  # a pipe, on Unix
            root, stdin = started, started.stdin
    return SpawnedProcess(
        process=root,
        pgid=root.pid,
        output=trio.lowlevel.FdStream(read_end),
        stdin=stdin,
        tty=False,
        started_at=time.time(),
        root_started=_root_started(since, root.pid),
        mark=mark,
    )


def _root_started(since: float, pid: int) -> float:
    """``since``, the clock's bound taken before the spawn; without one, the root's own."""
    return since if since else start_of(pid)


@final
class _Child:
    """A command penguin started with ``Popen`` where the kernel has pidfds.

    What :class:`trio.Process` is for one started in a worker thread, as far as a
    :class:`RootProcess` goes: its pid; :meth:`wait` waits on a pidfd, then reaps.
    """

    __slots__ = ("_popen", "pid")

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self.pid = popen.pid

    @classmethod
    def start(
        cls, argv: Sequence[str], output: int, options: Mapping[str, Any]
    ) -> tuple[_Child, int]:
        """Start ``argv`` (``Popen`` ``options``) writing to ``output``; it and its stdin's writer.

        Blocks the calling thread for ``Popen`` itself: ``vfork`` returns once the child
        has changed into its directory and called ``exec``. Raises ``OSError`` as
        ``Popen`` does. Any thread may call it: it touches nothing of Trio's.
        """
        child_stdin, stdin = os.pipe()
        with _handing_over(ours=(stdin,), theirs=(child_stdin,)):
            popen = subprocess.Popen(
                list(argv), stdin=child_stdin, stdout=output, stderr=output, **options
            )
        return cls(popen), stdin

    @classmethod
    def start_piped(
        cls, argv: Sequence[str], options: Mapping[str, Any]
    ) -> tuple[_Child, int, int]:
        """:meth:`start` with an output pipe of its own: it, the pipe's reading end, its stdin's."""
        read_end, write_end = _output_pipe()
        with _handing_over(ours=(read_end,), theirs=(write_end,)):
            child, writer = cls.start(argv, write_end, options)
        return child, read_end, writer

    @classmethod
    def start_tty(cls, argv: Sequence[str], options: Mapping[str, Any]) -> tuple[_Child, int, int]:
        """Start ``argv`` on a new pseudo-terminal: it, the terminal's master, a copy to write."""
        master, slave = _open_pty()
        with _handing_over(ours=(master,), theirs=(slave,)):
            popen = subprocess.Popen(list(argv), **_on_terminal(slave), **options)
        return cls(popen), master, os.dup(master)

    @classmethod
    def start_with_pipes(
        cls, argv: Sequence[str], options: Mapping[str, Any]
    ) -> tuple[_Child, int, int, int]:
        """Start ``argv`` with a pipe of its own on each of stdin, stdout and stderr.

        Gives it and penguin's ends of the three: stdin's writing end, stdout's and
        stderr's reading ends.
        """
        ours: list[int] = []
        theirs: list[int] = []
        with _handing_over(ours, theirs):  # read at the end: a pipe may fail to open
            for child_reads in (True, False, False):
                read_end, write_end = os.pipe()
                ours.append(write_end if child_reads else read_end)
                theirs.append(read_end if child_reads else write_end)
            stdin, stdout, stderr = theirs
            popen = subprocess.Popen(
                list(argv), stdin=stdin, stdout=stdout, stderr=stderr, **options
            )
        return cls(popen), ours[0], ours[1], ours[2]

    @staticmethod
    def discard(started: tuple[_Child, *tuple[int, ...]]) -> None:
        """End what a start gave a caller that had gone: kill the group, close, reap."""
        child, *descriptors = started
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)  # unreaped: the group is still its own
        for descriptor in descriptors:
            os.close(descriptor)
        child._popen.wait()

    @property
    def returncode(self) -> int | None:
        """The status once it exited, ``None`` while it runs (``-N`` for signal N).

        Read without reaping it (``WNOWAIT``), unlike ``trio.Process.returncode``: an
        unreaped leader keeps its group's id its own, so a later ``killpg`` of the
        group reaches no one else (the rule at the top of this module).
        """
        if self._popen.returncode is not None:
            return self._popen.returncode
        try:
            peeked = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped meanwhile by its wait
            return self._popen.returncode
        if peeked is None:
            return None
        return peeked.si_status if peeked.si_code == os.CLD_EXITED else -peeked.si_status

    def exit_watch(self) -> ExitWatch:
        """A pidfd of it, and its ``Popen.poll``; raises ``OSError`` when none can be opened."""
        return _PidfdWatch(os.pidfd_open(self.pid), self._popen.poll)

    async def wait(self) -> int:
        """Wait for the exit, reap, return the status (``-N`` for signal N)."""
        if self._popen.returncode is None:
            await wait_exited(self)
            self._popen.wait()  # it has exited: reaping does not block
        else:
            await trio.lowlevel.checkpoint()
        assert self._popen.returncode is not None
        return self._popen.returncode


class ExitWatch(Protocol):
    """How a caller that waits on descriptors itself learns a root's exit.

    :attr:`fileno` becomes readable once the root exited; :meth:`poll` then reaps it
    and gives its status (as :meth:`RootProcess.wait` would), ``None`` before.
    """

    @property
    def fileno(self) -> int: ...

    def poll(self) -> int | None:
        """The status once the root exited (reaping it), ``None`` while it runs; never waits."""
        ...

    def close(self) -> None:
        """Release what the watch opened (the root itself is not touched)."""
        ...


@final
class _PidfdWatch:
    """An :class:`ExitWatch` of penguin's own child: a pidfd, and ``Popen.poll``."""

    __slots__ = ("fileno", "poll")

    def __init__(self, pidfd: int, poll: Callable[[], int | None]) -> None:
        self.fileno = pidfd
        self.poll = poll

    def close(self) -> None:
        os.close(self.fileno)


def exit_watch(process: RootProcess) -> ExitWatch | None:
    """An :class:`ExitWatch` of ``process`` when it offers one (``exit_watch()``), else ``None``.

    Penguin's own pipe-mode children and a sandbox spawner's do; a
    :class:`trio.Process` does not (only its ``wait`` may reap it). Raises ``OSError``
    when the watch's descriptor cannot be opened.
    """
    opener: Callable[[], ExitWatch] | None = getattr(process, "exit_watch", None)
    return None if opener is None else opener()


def _on_terminal(slave: int) -> dict[str, Any]:
    """``Popen`` options that start a session leader on the pseudo-terminal ``slave``."""
    return {
        "stdin": slave,
        "stdout": slave,
        "stderr": slave,
        "preexec_fn": _claim_controlling_terminal,
    }


@contextlib.contextmanager
def _handing_over(ours: Sequence[int], theirs: Sequence[int]) -> Iterator[None]:
    """Around a start that hands descriptors to a child: ``theirs`` are the child's copies.

    Closes ``theirs`` once the start is over, however it ended (the child holds its
    own now), and ``ours``, penguin's ends, as well when it failed. Both are read when
    the block ends, so a list may still grow inside it.
    """
    try:
        yield
    except BaseException:
        for descriptor in ours:
            os.close(descriptor)
        raise
    finally:
        for descriptor in theirs:
            os.close(descriptor)


def _open_pty() -> tuple[int, int]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", _TTY_ROWS, _TTY_COLUMNS, 0, 0))
    return master, slave


@final
@attrs.frozen
class PipedProcess:
    """A process with a pipe of its own on each of stdin, stdout and stderr."""

    process: ServerProcess
    stdin: trio.lowlevel.FdStream
    stdout: trio.lowlevel.FdStream
    stderr: trio.lowlevel.FdStream


async def spawn_piped(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> PipedProcess:
    """Start ``argv`` in a new session with three pipes; raise ``OSError`` when it cannot start.

    For a server penguin speaks with over stdin and stdout (an MCP stdio server), whose
    stderr is read apart. Where the kernel has pidfds it starts in a worker that a cancel
    leaves after a second, as a command off the local disks does: ``cwd`` may be on a
    file server that stopped answering, and a server that starts too late is killed.
    """
    options: dict[str, Any] = {"cwd": cwd, "env": dict(env), "start_new_session": True}
    if _HAS_PIDFD:
        child, stdin, stdout, stderr = await run_leavable_in_worker(
            lambda _check: _Child.start_with_pipes(argv, options), left=_Child.discard
        )
        return PipedProcess(
            child,
            trio.lowlevel.FdStream(stdin),
            trio.lowlevel.FdStream(stdout),
            trio.lowlevel.FdStream(stderr),
        )
    process = await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **options,
    )
    return PipedProcess(  # pipes, on Unix: trio's FdStreams
        process,
        cast(trio.lowlevel.FdStream, process.stdin),
        cast(trio.lowlevel.FdStream, process.stdout),
        cast(trio.lowlevel.FdStream, process.stderr),
    )


def _output_pipe() -> tuple[int, int]:
    read_end, write_end = os.pipe()
    with contextlib.suppress(OSError):
        fcntl.fcntl(read_end, _F_SETPIPE_SZ, PIPE_SIZE)
    return read_end, write_end


async def launch_process(
    launcher: Launcher,
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    tty: bool,
    executable: str | None = None,
) -> SpawnedProcess | None:
    """:func:`spawn_process` through ``launcher``; ``None`` when it declined to start it.

    The command gets the same streams, session and group as from :func:`spawn_process`.
    """
    since, mark = started_from_now(), pid_mark()
    if tty:
        master, slave = _open_pty()
        with _handing_over(ours=(master,), theirs=(slave,)):
            root = await launcher.start(argv, executable, cwd, env, (slave, slave, slave), True)
        if root is None:
            os.close(master)
            return None
        return _spawned(root, master, os.dup(master), since, mark, tty=True)
    read_end, write_end = _output_pipe()
    stdin_read, stdin_write = os.pipe()
    with _handing_over(ours=(read_end, stdin_write), theirs=(write_end, stdin_read)):
        root = await launcher.start(
            argv, executable, cwd, env, (stdin_read, write_end, write_end), False
        )
    if root is None:
        os.close(read_end)
        os.close(stdin_write)
        return None
    return _spawned(root, read_end, stdin_write, since, mark, tty=False)


def _spawned(
    root: RootProcess, output: int, stdin: int, since: float, mark: PidMark | None, *, tty: bool
) -> SpawnedProcess:
    return SpawnedProcess(
        process=root,
        pgid=root.pid,
        output=trio.lowlevel.FdStream(output),
        stdin=trio.lowlevel.FdStream(stdin),
        tty=tty,
        started_at=time.time(),
        root_started=_root_started(since, root.pid),
        mark=mark,
    )


def signal_group(pgid: int, signum: int) -> bool:
    """Send ``signum`` to the group ``pgid``; ``False`` when the group no longer exists.

    Call it only while the group's leader is unreaped (the rule of the module
    docstring): afterwards the id may name a stranger's group.
    """
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        # Only possible when a member changed its credentials (setuid); the members
        # we may signal still got it.
        return True
    return True


async def wait_exited(process: RootProcess) -> None:
    """Wait until ``process`` has exited, without reaping it.

    The leader of a group stays a zombie until someone reaps it (``process.wait()``),
    and until then its group id cannot name anyone else's group: a caller that still
    has a group to signal after its leader ended waits here, signals, and reaps last.
    Returns at once for a process already reaped. (Reading a ``trio.Process``'s
    ``returncode`` would reap it: it polls. A :class:`_Child`'s only looks.)
    """
    if _HAS_PIDFD:
        try:
            pidfd = os.pidfd_open(process.pid)
        except ProcessLookupError:  # reaped already
            await trio.lowlevel.checkpoint()
            return
        except OSError:
            pass  # a kernel without pidfds: poll instead
        else:
            try:
                await trio.lowlevel.wait_readable(pidfd)  # readable once it exited
            finally:
                os.close(pidfd)
            return
    interval = 0.002
    flags = os.WEXITED | os.WNOHANG | os.WNOWAIT  # WNOHANG: it never blocks
    with contextlib.suppress(ChildProcessError):  # reaped meanwhile: it exited
        while os.waitid(os.P_PID, process.pid, flags) is None:  # noqa: ASYNC222
            await trio.sleep(interval)
            interval = min(interval * 2, 0.05)
    await trio.lowlevel.checkpoint()


# --------------------------------------------------------------------------- ending


@final
class _Ending:
    """What one :func:`end_process_tree` call knows: what it signalled, what it waits on."""

    def __init__(self, root: int, pgid: int, owner: str, exited: trio.Event) -> None:
        self.root = root
        self.pgid = pgid
        self.owner = owner
        self.exited = exited
        self.signalled: dict[tuple[int, float], ProcessEntry] = {}
        """Ours, sent SIGTERM: each gets SIGKILL if still there when the grace ends."""
        self.waiting: dict[tuple[int, float], ProcessEntry] = {}
        """Everything the grace period waits for (ours, and group members after reaping)."""
        self.killed: dict[tuple[int, float], ProcessEntry] = {}
        """Sent SIGKILL: each is waited for until it is dead."""

    def ours(self, table: ProcessTable) -> list[ProcessEntry]:
        """Live processes provably ours: marked, or (root unreaped) in its tree or group."""
        found = {e.identity: e for e in table.marked(self.owner)}
        if not self.exited.is_set():
            for entry in (*table.descendants(self.root), *table.group(self.pgid)):
                found.setdefault(entry.identity, entry)
        return list(found.values())

    def remaining(self, table: ProcessTable) -> list[ProcessEntry]:
        """What still keeps the session from being over: ours, and live group members.

        After the root is reaped, an unmarked group member may be a stranger that
        reused the group id: it is waited for, never signalled.
        """
        found = {e.identity: e for e in self.ours(table)}
        for entry in table.group(self.pgid):
            found.setdefault(entry.identity, entry)
        return list(found.values())

    def already_signalled(self, entries: Iterable[ProcessEntry]) -> None:
        """Count ``entries`` as sent SIGTERM (through their group) without sending it again."""
        for entry in entries:
            self.signalled.setdefault(entry.identity, entry)

    def terminate(self, table: ProcessTable) -> bool:
        """SIGTERM whatever of ours is new in ``table`` and wait for everything left.

        Returns whether anything is left.
        """
        for entry in self.ours(table):
            if entry.identity not in self.signalled:
                self.signalled[entry.identity] = entry
                send_signal(entry, signal.SIGTERM)
        left = self.remaining(table)
        for entry in left:
            self.waiting.setdefault(entry.identity, entry)
        return bool(left)

    def kill(self, entries: Iterable[ProcessEntry]) -> int:
        """SIGKILL each entry not killed yet; return how many were still there."""
        count = 0
        for entry in entries:
            if entry.identity not in self.killed:
                self.killed[entry.identity] = entry
                count += send_signal(entry, signal.SIGKILL)
        return count

    def dead(self) -> bool:
        """Everything sent SIGKILL is gone or a zombie (no table read)."""
        return not any(is_alive(entry) for entry in self.killed.values())

    def settled(self) -> bool:
        """The root is reaped and everything waited for is gone (no table read)."""
        if not self.exited.is_set():
            return False
        for key, entry in list(self.waiting.items()):
            if is_alive(entry):
                return False
            del self.waiting[key]
        return True


async def _wait_until(condition: Callable[[], bool], *, deadline: float) -> bool:
    """Poll ``condition`` with a growing interval until it holds or the deadline passes."""
    interval = 0.002
    while not condition():
        if trio.current_time() >= deadline:
            return False
        await trio.sleep(min(interval, max(deadline - trio.current_time(), 0)))
        interval = min(interval * 2, 0.05)
    return True


async def end_process_tree(
    spawned: SpawnedProcess,
    owner: str,
    exited: trio.Event,
    *,
    grace: float = DEFAULT_GRACE,
) -> None:
    """End the command and everything it started; return once nothing is left.

    ``exited`` is set by whoever waits for the root (a Trio process has one waiter),
    right when it is reaped. The steps and their order are in the module docstring.
    """
    shared = shared_scan()
    since = spawned.root_started

    async def read() -> ProcessTable:
        return await shared.read(since)

    ending = _Ending(spawned.pid, spawned.pgid, owner, exited)
    if exited.is_set():  # nothing to stop in a hurry: share the read with others
        # Of what started since the spawn only: all of the command's own did.
        table = await shared.read_gathered(GATHER_WINDOW, since, spawned.mark)
        if not ending.remaining(table):
            return  # the common case: it ended and left nothing behind
    else:
        table = await read()
    if not exited.is_set():
        signal_group(spawned.pgid, signal.SIGTERM)
        # The group's members got their SIGTERM just now: a second one would look
        # like an impatient user to programs that force-quit on a repeated signal.
        ending.already_signalled(table.group(spawned.pgid))
    ending.terminate(table)

    deadline = trio.current_time() + grace
    while await _wait_until(ending.settled, deadline=deadline):
        # Everything seen is gone; a fresh read shows what was forked meanwhile.
        if not ending.terminate(await read()):
            return

    if not exited.is_set():
        signal_group(spawned.pgid, signal.SIGKILL)
    table = await read()
    ending.kill([*ending.ours(table), *ending.signalled.values()])
    await exited.wait()
    for _ in range(SWEEP_ROUNDS):
        table = await read()
        if not ending.kill(table.marked(owner)):
            break
    # A SIGKILL takes effect when its target next runs: wait for that, not just the send.
    await _wait_until(ending.dead, deadline=trio.current_time() + KILL_SETTLE)


def kill_marked(owner: str, *, prefix: bool) -> int:
    """SIGKILL every process carrying the marker (blocking); return how many.

    Sweeps until a read of the table finds nothing it has not killed already.
    """
    killed: set[tuple[int, float]] = set()
    total = 0
    for _ in range(SWEEP_ROUNDS):
        fresh = [
            e for e in read_process_table().marked(owner, prefix=prefix) if e.identity not in killed
        ]
        if not fresh:
            break
        for entry in fresh:
            killed.add(entry.identity)
            total += send_signal(entry, signal.SIGKILL)
    return total


async def sweep_marked(owner: str, *, prefix: bool, newer_than: float = 0.0) -> int:
    """:func:`kill_marked` through the Trio run's shared table reads; return how many.

    The first read gathers the sweeps and process-tree ends of the next
    :data:`GATHER_WINDOW` (a closing supervisor is in no hurry), so sessions that end
    together walk ``/proc`` once between them. ``newer_than`` (a start time, see
    ``_proctable.started_from_now``) spares reading the environment of older processes.
    """
    shared = shared_scan()
    killed: set[tuple[int, float]] = set()
    total = 0
    table = await shared.read_gathered(GATHER_WINDOW, newer_than)
    for _ in range(SWEEP_ROUNDS):
        fresh = [e for e in table.marked(owner, prefix=prefix) if e.identity not in killed]
        if not fresh:
            break
        for entry in fresh:
            killed.add(entry.identity)
            total += send_signal(entry, signal.SIGKILL)
        table = await shared.read(newer_than)
    return total
