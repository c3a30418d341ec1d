"""Command sessions and their supervisor: the capped registry of live shell commands.

A :class:`CommandSession` is one shell command and everything it starts. It lives as
one task in the Environment's nursery, with three helpers: a pump that reads the merged
output into a capped :class:`UnreadBuffer`, a watcher that waits for the root process,
and a feeder that writes queued input to the command's stdin (so a command that never
reads its input cannot block the call that writes to it). A foreground command's task
is started through ``nursery.start``, so a spawn failure reaches the caller; a
background launch (3.2.5) is registered before its process exists, and its task
spawns it once the login environment is ready — a failure then is the session's exit
(``spawn error: …``), reported like any other (3.13.1). The session ends when it is
*released* (removed from the registry, discarded after a foreground run, killed,
evicted, or the supervisor closes) or when its task is cancelled: its whole process
tree is ended (``_process.end_process_tree``) before the task returns. The watcher's
wait is shielded from that cancellation and only stopped by the session itself, so
ending the tree always sees the root exit and reaps it.

The :class:`CommandSupervisor` owns the registry (reference 4.1: at most 64; when full,
evict the first exited session, else the least recently used running one), the
hourly idle sweep (4.3), the collect windows of the tools (4.5: chunks as they
arrive, no lost wake-ups, a short drain after exit), background completion reports
(3.13), the host surface (4.13, 4.14), and the last resorts of 4.11: if the host
process exits while the supervisor is still open, an ``atexit`` hook SIGKILLs every
live session; if it dies without running any code (SIGKILL, the OOM killer), the
host's watchdog (``_watchdog``), started before the first spawn, kills every process
carrying the host's tag, which begins this supervisor's tag and so every marker.

Every byte of output is delivered exactly once, by a window or by the completion
report, whatever the order in which the exit, the pump, a poll and the report run: at
every checkpoint a byte the command wrote is either still in the pipe or in the
buffer, never in between. The pump hands each chunk to the buffer in the same step that
read it (trio's ``FdStream.receive_some`` yields after its read, with the chunk in no
one's hands, so it is not used here), and whoever decides after an exit that the
output is complete — a window's post-exit drain, the report — first reads what the pipe
holds right now itself (:meth:`CommandSession.pull`), so no decision depends on the
pump having been scheduled. (A loaded loop once lost one line of 64,000 that way:
the poll and the report both saw an empty pipe and an empty buffer while the pump
held the last chunk.)

Registration happens only when a command outlives its window or is launched in the
background; a foreground command that ends inside its window is never registered
and its group is ended right away (3.2.9).

A foreground command in pipe mode (no terminal: the common case) has no task of its
own while its window runs. :meth:`CommandSupervisor.run_window` starts it in the
caller's task, and the caller's :meth:`CommandSession.collect` is its pump and its
watcher: each of its waits is one wait on an epoll set holding the root's exit watch
(a pidfd, or the reply socket of the sandbox's spawner) and the output pipe, after
which it reaps an exited root and reads what the pipe holds. When the window ends,
whichever way (the command exited, it outlived the window, the caller was cancelled,
or the session was released meanwhile), the session is *handed over*: the epoll set
is closed and the session's task starts, which pumps, watches and ends the tree
exactly as for a session spawned in its own task. The hand over is one synchronous
step, so no byte is between the caller's last read and the pump's first. A command
that ends in its window thus costs its caller one wake-up instead of three tasks'
worth of scheduling (the session, its pump and its watcher), which was most of what
penguin added to a short command's latency.

A signal for a session is never lost, whatever state its process is in: before the
process exists (a background launch waiting for the login environment, or being
spawned) it is kept on the session and sent the moment the process does; while the
root is unreaped it goes to the group; after the root exited there is nothing left
to signal. The login environment is resolved once per supervisor, in its nursery,
as soon as :meth:`CommandSupervisor.start_login_probe` is called (the Environment
does at open), so no command's call pays for it on its own clock.
"""

from __future__ import annotations

import array
import atexit
import codecs
import contextlib
import fcntl
import math
import os
import select
import signal
import termios
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Final, final

import attrs
import trio

from penguin._concurrency import run_in_worker
from penguin._ids import token_hex
from penguin._log import warn
from penguin._mounts import on_local_disk

from .._errors import SpawnError, SupervisorClosedError
from ._buffer import UnreadBuffer
from ._cgroup import CommandCgroup, cgroup_base, known_unavailable
from ._environ import ProxyPolicy, Shell, child_environment, resolve_login_environment
from ._login import LoginFiles, SharedLogin
from ._process import (
    DEFAULT_GRACE,
    KILL_SETTLE,
    ExitWatch,
    Launcher,
    SpawnedProcess,
    end_process_tree,
    exit_watch,
    kill_marked,
    launch_process,
    signal_group,
    spawn_process,
    sweep_marked,
)
from ._proctable import OWNER_VARIABLE, started_from_now
from ._registry import (
    COMMAND_SESSION_CAP,
    IDLE_REAP_AFTER,
    IDLE_SWEEP_INTERVAL,
    SessionRegistry,
)
from ._reports import BackgroundReport, ExitStatus, ReportChannel
from ._reports import report_output as report_output
from ._service_url import ServiceUrlScanner, listening_ports, service_url_from_ports
from ._watchdog import host_watchdog

if TYPE_CHECKING:
    from ..sandbox import CommandSandbox
    from ..sandbox._linux import HostSpawner

__all__ = [
    "COMMAND_CAP",
    "BackgroundCommand",
    "BackgroundReport",
    "CommandSession",
    "CommandSupervisor",
    "ExitStatus",
    "Exited",
    "Running",
    "SpawnError",
    "SupervisorClosedError",
    "start_host_watchdog",
]

COMMAND_CAP: Final = COMMAND_SESSION_CAP
_HAS_PIDFD: Final = hasattr(os, "pidfd_open")
"""A spawner watches its commands through pidfds (Linux 5.3; ``cgroup.kill`` needs 5.14)."""
POST_EXIT_DRAIN: Final = 0.05
POST_EXIT_DRAIN_LIMIT: Final = 1.0
"""How long the drain after an exit goes on while output the pump has not read yet is
still in the pipe (a loaded machine may not schedule the pump within 50 ms; what the
command wrote before it exited is delivered, not dropped)."""
PUMP_CHUNK: Final = 256 * 1024
PROBE_TIMEOUT: Final = 1.5
PROBE_INTERVAL: Final = 5.0
CGROUP_POLL: Final = 0.005
"""Seconds between tries to remove a supervisor's cgroup whose killed are still dying."""
_RELEASE_MARGIN: Final = 5.0
"""How long ending a tree may take beyond its grace period before the last resort."""

Emit = Callable[[str], Awaitable[None]]


@final
@attrs.frozen
class BackgroundCommand:
    """One registered command as the host sees it (reference 4.13).

    ``pid`` is None while a background launch waits for its process to start, and for
    one that could not be started (it is listed as not running, with its report).
    """

    process_id: str
    pid: int | None
    cmd: str
    cwd: str
    started_at: float
    running: bool
    service_url: str | None


@final
@attrs.frozen
class Exited:
    """A window saw the command's foreground process end; the session is gone."""

    status: ExitStatus


@final
@attrs.frozen
class Running:
    """The command outlived its window; it stays registered under ``process_id``."""

    process_id: str


@final
class CommandSession:
    """One shell command and everything it started.

    Its task (:meth:`run`, or :meth:`adopt` for a process the caller started and
    watched itself, :meth:`watch_inline`) pumps, watches and ends it. Output arrives
    in :attr:`buffer`; :attr:`exited` is set when the foreground
    process ends (or when it could not be started: :attr:`exit_status` then carries the
    spawn error); :attr:`output_closed` when every writer of the output closed it.
    """

    def __init__(
        self,
        process_id: str,
        cmd: str,
        cwd: Path,
        owner: str,
        grace: float = DEFAULT_GRACE,
        *,
        follow_links: bool = False,
    ) -> None:
        self.process_id = process_id
        self.cmd = cmd
        self.cwd = cwd
        self.follow_links = follow_links
        """Whether :attr:`cwd` may lead through a symbolic link (``_mounts.on_local_disk``)."""
        self.grace = grace
        """Seconds between SIGTERM and SIGKILL when this session is ended."""
        self.owner = owner
        self.buffer = UnreadBuffer()
        self.exited = trio.Event()
        self.output_closed = trio.Event()
        self.ended = trio.Event()
        """Set once the process tree is gone and the streams are closed."""
        self.exit_status: ExitStatus | None = None
        self.report_label: str | None = None
        self.created_at = time.time()
        """When the session was made (its process may start later, or never)."""
        self._output_fd: int | None = None
        self._decode = _decoder()
        self.registered = False
        self.service_url: str | None = None
        self._scanner = ServiceUrlScanner()
        self._changed = trio.lowlevel.ParkingLot()
        self._release = trio.Event()
        self._spawned: SpawnedProcess | None = None
        self._pending_signals: list[int] = []
        self._unstarted = trio.CancelScope()
        """Around the wait before the spawn and the spawn: a release ends them (nothing starts)."""
        self._last_probe = -math.inf
        self._watch_scope = trio.CancelScope(shield=True)
        self._input: deque[bytes] | None = deque()
        """Input queued for stdin, in order; ``None`` once nothing more is taken."""
        self._input_arrived = trio.lowlevel.ParkingLot()
        self._helpers: tuple[trio.Nursery, trio.abc.SendStream] | None = None
        """While the process runs without a stdin writer: where one starts, and its stdin."""
        self._inline: _InlineWatch | None = None
        """While the caller's task watches the process (:meth:`watch_inline`)."""
        self._adopt: Callable[[], None] | None = None
        """Starts the session's task once the caller hands the session over."""

    @property
    def spawned(self) -> SpawnedProcess:
        """The running process (only after a successful spawn)."""
        assert self._spawned is not None
        return self._spawned

    @property
    def running(self) -> bool:
        """Whether the foreground process is still running."""
        return not self.exited.is_set()

    @property
    def started(self) -> bool:
        """Whether the process was spawned (even if the caller was cancelled meanwhile)."""
        return self._spawned is not None

    @property
    def released(self) -> bool:
        """Whether the session was asked to end (:meth:`release`)."""
        return self._release.is_set()

    def release(self) -> None:
        """Ask the session task to end the process tree (idempotent, never blocks).

        A session whose process has not started yet never starts it.
        """
        self._release.set()
        if self._spawned is None:  # nothing waits in the scope once it started
            self._unstarted.cancel()
        inline = self._inline
        if inline is not None:  # the session's task ends it: wake the caller to hand over
            if inline.waiting is not None:
                inline.waiting.cancel()
            else:
                self.hand_over()

    def send_signal(self, signum: int) -> None:
        """Signal the command's process group; never lost, never misdirected.

        Before the process exists the signal waits on the session and is sent the
        moment it does. Once the root was reaped (or never started) nothing is sent:
        its group id may already name a stranger's group.
        """
        if self.exited.is_set():
            return
        if self._spawned is None:
            self._pending_signals.append(signum)
            return
        signal_group(self._spawned.pgid, signum)

    def send_input(self, data: bytes) -> None:
        """Queue ``data`` for the command's stdin; never blocks (dropped once it closed)."""
        if self._input is None:
            return
        self._input.append(data)
        self._input_arrived.unpark_all()
        self._start_feed()

    def _start_feed(self) -> None:
        """Start the stdin writer, the first time there is input for a running process.

        Most commands are never sent input: they get no writer task at all.
        """
        if self._helpers is None or not self._input:
            return
        (nursery, stdin), self._helpers = self._helpers, None
        nursery.start_soon(self._feed, stdin)

    async def run(
        self,
        argv: tuple[str, ...],
        environment: Callable[[], Awaitable[Mapping[str, str]]],
        tty: bool,
        on_exit: Callable[[CommandSession], Awaitable[None]],
        on_end: Callable[[CommandSession], None],
        *,
        executable: str | None = None,
        background: bool = False,
        sandbox: CommandSandbox | None = None,
        place: Callable[[int], object] | None = None,
        launcher: Callable[[], Launcher | None] | None = None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """The session's task: spawn, pump, watch, and on release end everything.

        In the foreground the task reports started once the process exists, and a
        spawn failure raises :class:`SpawnError` to the ``nursery.start`` caller. A
        ``background`` task reports started at once and spawns on its own: a failure
        is then the session's exit status (``spawn error: …``), passed to ``on_exit``.
        ``environment`` gives the child's environment (it may wait for the login
        environment; a release ends that wait and nothing is started). ``place`` is
        given the root's pid as soon as it has started (the supervisor's cgroup).
        """
        try:
            if background:
                task_status.started()
            spawned = await self._spawn(
                argv, environment, tty, executable, background, sandbox, place, launcher
            )
            if spawned is None:
                if self.exit_status is not None:
                    await on_exit(self)
                return
            if not background:
                # If the caller of nursery.start was cancelled meanwhile, this task stays
                # in its cancelled scope: the helpers below are cancelled at once, and
                # the shielded watcher is what still lets _end see the root exit.
                task_status.started()
            await self._supervise(spawned, on_exit)
        finally:
            self._finish(on_end)

    async def adopt(
        self,
        on_exit: Callable[[CommandSession], Awaitable[None]],
        on_end: Callable[[CommandSession], None],
    ) -> None:
        """The session's task for a process its caller started and watched (:meth:`watch_inline`).

        It takes over from :meth:`hand_over`: pumps what is left of the output,
        watches a root that still runs, and ends the tree on release, as :meth:`run`.
        """
        try:
            await self._supervise(self.spawned, on_exit)
        finally:
            self._finish(on_end)

    def _finish(self, on_end: Callable[[CommandSession], None]) -> None:
        self._input = None
        self._changed.unpark_all()
        self.ended.set()
        on_end(self)

    def watch_inline(self, spawned: SpawnedProcess, adopt: Callable[[], None]) -> None:
        """Let the caller's task watch ``spawned`` until it calls :meth:`hand_over`.

        Until then there is no task: :meth:`wait_for_change` waits for the root's exit
        (its :class:`~._process.ExitWatch`) and the output itself, and reaps the exited
        root; ``adopt`` starts the session's task (:meth:`adopt`) at the hand over. A
        root without an exit watch (a :class:`trio.Process`), or one whose watch cannot
        be opened (the limit on open files, say), is handed over at once.
        """
        self._started(spawned)
        self.attach_output(spawned.output.fileno())
        self._adopt = adopt
        try:
            watch = exit_watch(spawned.process)
            if watch is not None:
                self._inline = _InlineWatch(watch, spawned.output.fileno())
        except OSError:
            pass
        if self._inline is None:
            self.hand_over()

    def hand_over(self) -> None:
        """Hand a session its caller watched over to the session's task (idempotent).

        Synchronous: nothing reads the output between the caller's last read and the
        task's pump. Called when the caller's window ends, whichever way, and by
        :meth:`release` when nobody waits in :meth:`wait_for_change`.
        """
        inline, self._inline = self._inline, None
        if inline is not None:
            inline.close()
        adopt, self._adopt = self._adopt, None
        if adopt is None:
            return
        try:
            adopt()
        except BaseException:  # no task can start (a closed nursery): nothing may survive
            if not self.exited.is_set():
                signal_group(self.spawned.pgid, signal.SIGKILL)
            raise

    async def _spawn(
        self,
        argv: tuple[str, ...],
        environment: Callable[[], Awaitable[Mapping[str, str]]],
        tty: bool,
        executable: str | None,
        background: bool,
        sandbox: CommandSandbox | None = None,
        place: Callable[[int], object] | None = None,
        launcher: Callable[[], Launcher | None] | None = None,
    ) -> SpawnedProcess | None:
        """Start the process; ``None`` when released first or (background) it failed.

        A release ends the wait for the environment, and the start itself where it can
        be left (``_process.spawn_process``: a directory whose file server stopped
        answering); a start that returns has no checkpoint before :meth:`_started`.
        """
        spawned = None
        with self._unstarted:
            env = await environment()
            if self._release.is_set():
                return None
            try:
                spawned = await _start_process(
                    argv,
                    self.cwd,
                    env,
                    tty,
                    executable,
                    sandbox,
                    follow_links=self.follow_links,
                    place=place,
                    launcher=None if launcher is None else launcher(),
                )
            except SpawnError as exc:
                if not background:
                    raise
                self._never_started(str(exc))
                return None
        if spawned is None:  # released during the start: nothing started, or it was ended
            return None
        self._started(spawned)
        return spawned

    def _started(self, spawned: SpawnedProcess) -> None:
        self._spawned = spawned
        # Signals sent while the process did not exist yet: now it does (no checkpoint
        # since the spawn returned, so none can have been missed in between).
        pending, self._pending_signals = self._pending_signals, []
        for signum in pending:
            signal_group(spawned.pgid, signum)

    def _never_started(self, error: str) -> None:
        self.exit_status = ExitStatus(spawn_error=error)
        self._pending_signals.clear()
        self.output_closed.set()
        self.exited.set()
        self._changed.unpark_all()

    def attach_output(self, fd: int) -> None:
        """Read the command's output from ``fd`` (non-blocking; the caller owns and closes it)."""
        self._output_fd = fd

    async def _supervise(
        self, spawned: SpawnedProcess, on_exit: Callable[[CommandSession], Awaitable[None]]
    ) -> None:
        self.attach_output(spawned.output.fileno())
        try:
            if self.exited.is_set() and self.output_closed.is_set() and not self.report_label:
                # Its caller watched it to its end (see adopt): nothing to pump or watch.
                await self._until_released(spawned)
                return
            async with trio.open_nursery() as helpers:
                # (Both are always started but for a session its caller watched.)
                if not self.output_closed.is_set():
                    helpers.start_soon(self._pump, spawned.output)
                if not self.exited.is_set():
                    helpers.start_soon(self._watch, spawned, on_exit)
                elif self.report_label is not None:  # its report is owed (3.13.1)
                    helpers.start_soon(on_exit, self)
                self._helpers = (helpers, spawned.stdin)
                self._start_feed()  # input sent before the process existed
                try:
                    await self._until_released(spawned)
                finally:
                    self._watch_scope.cancel()
                    helpers.cancel_scope.cancel()
        finally:
            self._helpers = None
            self._input = None
            self.pull()  # what is still in the pipe waits in the buffer for the report
            self._output_fd = None  # closed next: nobody may read it any more
            _close_quietly(spawned)

    async def _until_released(self, spawned: SpawnedProcess) -> None:
        """Wait for the release, then end the tree (shielded: also when cancelled)."""
        try:
            await self._release.wait()
        finally:
            with trio.CancelScope(shield=True):
                await self._end(spawned)

    async def _end(self, spawned: SpawnedProcess) -> None:
        with trio.move_on_after(self.grace + _RELEASE_MARGIN) as scope:
            await end_process_tree(spawned, self.owner, self.exited, grace=self.grace)
            if not self.output_closed.is_set():
                with trio.move_on_after(POST_EXIT_DRAIN * 4):
                    await self.output_closed.wait()
        if scope.cancelled_caught and not self.exited.is_set():
            # A root stuck beyond SIGKILL's reach; once it is reaped its group id may be
            # reused, so only an unreaped root's group is signalled.
            signal_group(spawned.pgid, signal.SIGKILL)

    async def _watch(
        self, spawned: SpawnedProcess, on_exit: Callable[[CommandSession], Awaitable[None]]
    ) -> None:
        # Shielded: a cancelled session task must still see (and reap) the root's
        # exit while _end kills it; only run() stops this wait, after _end.
        with self._watch_scope:
            returncode = await spawned.process.wait()
        if self._watch_scope.cancelled_caught:
            return
        self.exit_status = ExitStatus.from_returncode(returncode)
        self.exited.set()
        self._changed.unpark_all()
        await on_exit(self)

    async def _feed(self, stdin: trio.abc.SendStream) -> None:
        """Write queued input in order; after a failed write, discard the rest (3.3.3).

        Runs until the session's helpers are cancelled.
        """
        while (queued := self._input) is not None:
            if not queued:
                await self._input_arrived.park()
                continue
            data = queued.popleft()
            try:
                await stdin.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                self._input = None  # the rest, and whatever comes later, is dropped
                return

    async def _pump(self, stream: trio.lowlevel.FdStream) -> None:
        """Read the output into the buffer until every writer closed it.

        Each chunk goes to the buffer in the step that read it: there is no
        checkpoint between ``os.read`` and :meth:`_deliver`, so a chunk is never out of
        the pipe and out of the buffer at once while other tasks run.
        """
        fd = stream.fileno()
        try:
            while not self.output_closed.is_set():
                if not self._read_chunk(fd):
                    await trio.lowlevel.wait_readable(fd)
                elif not self.output_closed.is_set():  # the end needs no turn of its own
                    await trio.lowlevel.checkpoint()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self._close_output()

    def _read_chunk(self, fd: int) -> bool:
        """One read of at most :data:`PUMP_CHUNK` into the buffer; False if the pipe is empty.

        The end of the output (EOF, or EIO from a pty master once the terminal's last
        user is gone) closes it and counts as a read.
        """
        try:
            data = os.read(fd, PUMP_CHUNK)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if not data:
            self._close_output()
            return True
        self._deliver(self._decode(data, False))
        return True

    def pull(self, limit: int = 4 * PUMP_CHUNK) -> None:
        """Move what the pipe holds right now into the buffer, without waiting.

        For whoever is about to decide that the output after an exit is complete (a
        window's drain, the report): what the command wrote is then in the buffer, or
        still in the pipe only if more than ``limit`` bytes are (a flood: see
        :meth:`output_waiting`), however long the pump has not run.
        """
        fd = self._output_fd
        taken = 0
        while fd is not None and not self.output_closed.is_set() and taken < limit:
            if not self._read_chunk(fd):
                return
            taken += PUMP_CHUNK

    def _close_output(self) -> None:
        if self.output_closed.is_set():
            return
        self._deliver(self._decode(b"", True))
        self.output_closed.set()
        self._changed.unpark_all()

    def _deliver(self, text: str) -> None:
        if text:
            self.buffer.append(text)
            self._scanner.feed(text)
            self._changed.unpark_all()

    def output_waiting(self) -> bool:
        """Whether the pipe (or terminal) holds output the pump has not read yet."""
        if self._output_fd is None or self.output_closed.is_set():
            return False  # (the descriptor stays open until the pump has ended)
        count = array.array("i", [0])
        try:
            fcntl.ioctl(self._output_fd, termios.FIONREAD, count, True)
        except OSError:
            return False
        return count[0] > 0

    async def settle_output(self) -> None:
        """After the exit: wait until every writer closed the output, at most 50 ms (4.5).

        The 50 ms bound is for children that keep the pipe open; output that is already
        in the pipe when it passes is still waited for, up to :data:`POST_EXIT_DRAIN_LIMIT`.
        """
        with trio.move_on_after(POST_EXIT_DRAIN_LIMIT):
            while True:
                with trio.move_on_after(POST_EXIT_DRAIN):
                    await self.output_closed.wait()
                self.pull()
                if not self.output_waiting():
                    return
        self.pull()

    async def collect(self, window: float, emit: Emit) -> bool:
        """Stream new output to ``emit`` until the command exits or ``window`` ends.

        Returns whether the foreground process exited. After an exit, output is
        drained until every writer closed the pipe or for at most 50 ms (4.5).
        The deadline is checked after every chunk, so a flood cannot hold the call
        past its window; only the waits are bounded by cancel scopes, never an
        ``emit``, so a chunk taken from the buffer is always handed over whole.
        Every check before a wait is synchronous: no wake-up is lost between them.
        After the exit each check first reads what the pipe holds (:meth:`pull`), so
        the end of the drain never depends on when the pump last ran.
        """
        deadline = trio.current_time() + window
        while True:
            if self.buffer:
                await emit(self.buffer.drain())
            if self.exited.is_set():
                break
            if trio.current_time() >= deadline:
                return False
            if not self.buffer:
                with trio.move_on_at(deadline):
                    await self.wait_for_change()
        now = trio.current_time()
        drain_deadline = now + POST_EXIT_DRAIN
        drain_limit = now + POST_EXIT_DRAIN_LIMIT
        while True:
            self.pull()
            if self.buffer:
                await emit(self.buffer.drain())
            if self.output_closed.is_set() and not self.buffer:
                break
            now = trio.current_time()
            if now >= drain_deadline:
                if now >= drain_limit or not self.output_waiting():
                    break
                drain_deadline = min(now + POST_EXIT_DRAIN, drain_limit)  # unread output
            if not self.buffer:
                with trio.move_on_at(drain_deadline):
                    await self.wait_for_change()
        self.pull()
        if self.buffer:
            await emit(self.buffer.drain())
        return True

    async def wait_for_change(self) -> None:
        """Sleep until new output, the exit, the end of output or the end of the session.

        While the caller watches the process (:meth:`watch_inline`) this is where the
        output is read and the exited root reaped: one wait on the epoll set, then
        what it reports. A release meanwhile wakes it, and the session is handed over.
        """
        inline = self._inline
        if inline is not None and not self._release.is_set():
            inline.waiting = scope = trio.CancelScope()
            try:
                with scope:
                    await trio.lowlevel.wait_readable(inline.fileno)
            finally:
                inline.waiting = None
            if not self._release.is_set():
                self._take_events(inline)
                return
        if inline is not None:  # released: its task ends the tree and sees the exit
            self.hand_over()
            return
        await self._changed.park()

    def _take_events(self, inline: _InlineWatch) -> None:
        """Reap the root if it exited, read the output if it is readable (no waiting)."""
        for fd, _ in inline.epoll.poll(0):
            if fd == inline.exit_fd:
                inline.epoll.unregister(fd)  # readable for good once it exited
                status = inline.watch.poll()
                if status is not None:
                    self.exit_status = ExitStatus.from_returncode(status)
                    self.exited.set()
                    self._changed.unpark_all()
            elif self.output_closed.is_set() or (
                self._read_chunk(fd) and self.output_closed.is_set()
            ):
                inline.epoll.unregister(fd)  # at its end it is readable for good

    def printed_url(self) -> str | None:
        """The last local URL the command printed, if any (4.14)."""
        return self._scanner.url

    def probe_due(self, now: float) -> bool:
        """Whether its listening ports may be probed at ``now``; if so, the probe counts.

        At most one probe per :data:`PROBE_INTERVAL` (4.14).
        """
        if now - self._last_probe < PROBE_INTERVAL:
            return False
        self._last_probe = now
        return True


@final
class _InlineWatch:
    """A caller's watch over its foreground command: one epoll set of its exit and output.

    The set holds the root's :class:`~._process.ExitWatch` descriptor (a pidfd, or the
    sandbox spawner's reply socket) and the output; Trio waits on the set's own
    descriptor, which is readable while either is. Owns the watch: it is closed with
    the set. Raises ``OSError`` when the set cannot be made.
    """

    __slots__ = ("epoll", "exit_fd", "fileno", "waiting", "watch")

    def __init__(self, watch: ExitWatch, output: int) -> None:
        self.watch = watch
        try:
            self.epoll = select.epoll(2)
        except BaseException:
            watch.close()
            raise
        try:
            self.exit_fd = watch.fileno
            self.epoll.register(self.exit_fd, select.EPOLLIN)
            self.epoll.register(output, select.EPOLLIN)
        except BaseException:
            self.close()
            raise
        self.fileno = self.epoll.fileno()
        self.waiting: trio.CancelScope | None = None
        """Around the caller's wait, for a release to wake it."""

    def close(self) -> None:
        self.epoll.close()
        self.watch.close()


def _decoder() -> Callable[[bytes, bool], str]:
    return codecs.getincrementaldecoder("utf-8")(errors="replace").decode


async def _start_process(
    argv: tuple[str, ...],
    cwd: Path,
    env: Mapping[str, str],
    tty: bool,
    executable: str | None,
    sandbox: CommandSandbox | None,
    *,
    follow_links: bool = False,
    place: Callable[[int], object] | None = None,
    launcher: Launcher | None = None,
) -> SpawnedProcess:
    """Start a command, in ``sandbox`` if there is one; raise :class:`SpawnError` if it cannot.

    ``follow_links``: ``cwd`` is not known to be resolved (see ``_mounts``). ``place``
    is given the root's pid at once, before any checkpoint (``_cgroup``: the sooner
    the root is placed, the less it can fork outside), unless a spawner started it
    (the sandbox's, or ``launcher`` where there is no sandbox): the spawner is in the
    cgroup already, and so is everything it starts.
    """
    try:
        spawned = None
        local = await on_local_disk(cwd, follow_links=follow_links)
        # A spawner starts it: the sandbox's, in its namespaces, or the supervisor's.
        # It changes into the directory itself, and serves one start at a time: only
        # a local one.
        spawner = sandbox if sandbox is not None else launcher
        if spawner is not None and local:
            spawned = await launch_process(
                spawner, argv, cwd=cwd, env=env, tty=tty, executable=executable
            )
            if spawned is not None:
                place = None
        if spawned is None:
            if sandbox is not None:  # it enters the sandbox's namespaces itself
                argv, executable = await sandbox.wrap(argv, executable, cwd, env.get("PATH"))
            spawned = await spawn_process(
                argv, cwd=cwd, env=env, tty=tty, executable=executable, local=local
            )
    except OSError as exc:
        raise SpawnError(_os_error_text(exc)) from exc
    except ValueError as exc:  # an embedded NUL byte in the command, cwd or env
        raise SpawnError(str(exc)) from exc
    if place is not None:
        place(spawned.pid)
    return spawned


def _placed_spawner(cgroup: CommandCgroup) -> HostSpawner | None:
    """A spawner in ``cgroup`` for commands without a sandbox; ``None`` if none can be.

    Blocking (a start, and a move that may wait for the kernel): a worker thread's.
    Without it each command is placed after it started (:meth:`CommandSupervisor._place`).
    """
    from ..sandbox._linux import HostSpawner

    try:
        spawner = HostSpawner.start_new()
    except OSError:
        return None
    if not cgroup.place(spawner.pid):  # then what it starts would be outside: not used
        spawner.close()
        return None
    return spawner


def _ignored(_result: object) -> None:
    """What a placement from a thread gives back: nothing to do (``_place``)."""


async def _close_cgroup(cgroup: CommandCgroup, sandbox: CommandSandbox | None) -> None:
    """Kill what is left in ``cgroup`` and remove it, waiting up to :data:`KILL_SETTLE`.

    A cgroup whose killed are still dying then is left behind, empty once they are;
    the host's watchdog removes it when the host ends. A sandboxed supervisor's cgroup
    that holds nothing but the sandbox's spawners is left to the sandbox, which removes
    it once they have ended (as they do when it closes, after the supervisor): no kill,
    and no retries while the killed die.
    """
    if sandbox is not None:
        spawners = sandbox.spawners()
        alone = bool(spawners) and await run_in_worker(cgroup.only_holds, spawners)
        if alone and sandbox.on_close(partial(cgroup.close_within, KILL_SETTLE, CGROUP_POLL)):
            return
    # File-system work and its waits: in one worker, never on the loop's thread.
    await run_in_worker(cgroup.close_within, KILL_SETTLE, CGROUP_POLL)


def _os_error_text(exc: OSError) -> str:
    if exc.strerror and exc.filename is not None:
        filename = exc.filename
        if isinstance(filename, os.PathLike):
            filename = os.fspath(filename)
        return f"{exc.strerror}: {filename!r}"
    return exc.strerror or str(exc)


def _close_quietly(spawned: SpawnedProcess) -> None:
    """Close the command's streams now (no checkpoint: a closing session has no use for one)."""
    for stream in (spawned.stdin, spawned.output):
        with contextlib.suppress(OSError):
            stream.close()


async def start_host_watchdog() -> None:
    """Have the host's watchdog running (``OSError`` when it cannot be started).

    It starts once per host, told where the host makes its cgroups; afterwards one
    ``waitpid`` tells that it still runs. Everything that spawns (commands, MCP
    servers) calls this first.
    """
    watchdog = host_watchdog()
    if not watchdog.running():
        await trio.to_thread.run_sync(lambda: watchdog.start(str(cgroup_base() or "")))


@final
class CommandSupervisor:
    """The capped registry of command sessions of one Environment.

    Create it with the Environment's nursery; :meth:`aclose` ends every session.
    Reports of background commands arrive on :attr:`reports`. Call
    :meth:`start_login_probe` as soon as commands may come, so the login environment
    is resolved before the first one needs it (otherwise the first spawn starts it).
    With ``shared_login`` the login environment is the one it shares with other
    supervisors (``_login``) rather than one resolved for this supervisor alone.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        tag: str,
        vault: Mapping[str, str],
        proxy: Callable[[], ProxyPolicy],
        shell: Shell,
        host_env: Callable[[], Mapping[str, str]] = lambda: dict(os.environ),
        cap: int = COMMAND_CAP,
        grace: float = DEFAULT_GRACE,
        reports: ReportChannel | None = None,
        sandbox: CommandSandbox | None = None,
        shared_login: SharedLogin | None = None,
        workspace: Path | None = None,
    ) -> None:
        self._nursery = nursery
        self._workspace = workspace
        """The resolved workspace: a command started anywhere else may be in a directory
        reached through a symbolic link, resolved before it is placed (``_mounts``).
        ``None``: every directory is taken as given."""
        self._shared_login = shared_login
        self.sandbox = sandbox
        """The Environment's sandbox (spec/sandbox.md), ``None`` when there is none."""
        self.tag = f"{host_watchdog().tag()}/{tag}"
        """Every child's owner marker is ``<tag>/<process_id>``: the host's tag (which
        its watchdog sweeps for), then the one given."""
        self._vault = dict(vault)
        self._proxy = proxy
        self._shell = shell
        self._host_env = host_env
        self._registry: SessionRegistry[CommandSession] = SessionRegistry(cap)
        self.grace = grace
        """Seconds between SIGTERM and SIGKILL for sessions spawned from now on (4.11)."""
        self._login_env: dict[str, str] | None = None
        self._kept_environment: tuple[Mapping[str, str], ProxyPolicy, dict[str, str]] | None = None
        self._login_ready = trio.Event()
        self._probe_started = False
        self._closed = False
        self._spawned_any = False
        self._sweep_since = 0.0
        self._cgroup: CommandCgroup | None = None
        """Where every command is placed (``_cgroup``), made with the first spawn."""
        self._cgroup_asked = False
        self._cgroup_known = trio.Event()
        self._launcher: HostSpawner | None = None
        """Where commands start without a sandbox, while there is a cgroup: a spawner
        placed before its first start, so they are members from their first instruction."""
        self._watchdog_warned = False
        self._live: set[CommandSession] = set()
        self._owns_reports = reports is None
        self._reports = ReportChannel() if reports is None else reports
        self._sweeping = False  # the idle sweep starts with the first registration
        self._host_pid = os.getpid()
        """The process this supervisor belongs to: a forked child's exit is not its end."""
        atexit.register(self._kill_at_exit)

    @property
    def reports(self) -> trio.MemoryReceiveChannel[BackgroundReport]:
        """Where completion reports of background commands arrive (3.13), in order."""
        return self._reports.receive

    @property
    def shell(self) -> Shell:
        """The shell every command line is run with (reference 4.7)."""
        return self._shell

    # ------------------------------------------------------------------ spawning

    def start_login_probe(self, files: LoginFiles | None = None) -> None:
        """Resolve the login environment now, in the supervisor's nursery (once).

        The probe's own bounds apply (its timeout, its fallback to the host
        environment with a warning); a command that needs the result waits for it.
        Does nothing when the shell is run as configured (``PENGUIN_SHELL``), or
        once the supervisor is closed. ``files`` is what
        :meth:`SharedLogin.startup_files` found for the host environment in a worker
        thread just before: with it, a shared login environment that is kept and fresh
        is taken at once (no task); without it the task looks.
        """
        if self._probe_started or self._closed or not self._shell.login_resolved:
            return
        self._probe_started = True
        if self._shared_login is not None and files is not None:
            kept = self._shared_login.kept(self._shell.program, self._host_env(), files)
            if kept is not None:  # kept and fresh: no probe, no task
                (resolved,) = kept
                self._login_env = resolved if resolved is not None else dict(self._host_env())
                self._login_ready.set()
                return
        self._nursery.start_soon(self._resolve_login, files)

    async def _resolve_login(self, files: LoginFiles | None) -> None:
        resolved: dict[str, str] | None = None
        try:
            if self._shared_login is not None:
                resolved = await self._shared_login.resolve(
                    self._shell.program, self._host_env(), files
                )
            else:
                resolved = await resolve_login_environment(self._shell.program, self._host_env())
        finally:
            # Cancelled (the Environment closes): nobody spawns any more, but no waiter
            # may wait for ever either.
            self._login_env = resolved if resolved is not None else dict(self._host_env())
            self._login_ready.set()

    def _login_known(self) -> bool:
        """Whether :meth:`login_environment` would return at once (no wait to time)."""
        return not self._shell.login_resolved or self._login_ready.is_set()

    async def login_environment(self) -> Mapping[str, str]:
        """The base environment of every command: wait for the login probe if needed.

        The one-time wait belongs to the Environment, not to the call that happens to
        be first: exec_command waits here outside its timeout (``ctx.untimed``).

        Once the environment is known this returns at once, without a checkpoint. Three
        steps of every exec_command ask for it (the window, the spawn, the child's
        environment); each checkpoint cost a pass of the scheduler before the process
        could start, and the spawn that follows (``nursery.start``) is a schedule point
        anyway.
        """
        if self._shell.login_resolved:
            self.start_login_probe()
            if self._probe_started:  # else: closed before any probe ran, nothing spawns now
                if not self._login_ready.is_set():
                    await self._login_ready.wait()
                assert self._login_env is not None
                return self._login_env
        return self._host_env()

    async def _arm_watchdog(self) -> None:
        """Have the host's watchdog running before a process is spawned."""
        try:
            await start_host_watchdog()
        except OSError as error:
            if not self._watchdog_warned:
                self._watchdog_warned = True
                warn(
                    f"[penguin] the host's watchdog did not start ({error}): should this "
                    "process be killed, the commands it started keep running"
                )

    def _shared_environment(self, base: Mapping[str, str]) -> Mapping[str, str]:
        """:func:`child_environment` of ``base`` without an owner, kept while it holds.

        Every command of this supervisor shares it but for its owner marker, which
        comes last (as ``child_environment``'s ``owner`` does). It is made again when
        the base (the login environment, or a fresh read of the host's) or the proxy
        policy, which is asked for at every spawn (4.10), changed.
        """
        policy = self._proxy()
        kept = self._kept_environment
        if kept is None or kept[0] is not base or kept[1] != policy:
            kept = (base, policy, child_environment(base, proxy=policy, vault=self._vault))
            self._kept_environment = kept
        return kept[2]

    def _environment_for(self, owner: str) -> Callable[[], Awaitable[Mapping[str, str]]]:
        async def environment() -> Mapping[str, str]:
            base = await self.login_environment()
            await self._arm_watchdog()
            if not self._cgroup_known.is_set():
                await self._make_cgroup()
            env = {**self._shared_environment(base), OWNER_VARIABLE: owner}
            if self.sandbox is not None:  # its TMPDIR over the vault's and the login's
                env = {**env, **self.sandbox.environment()}
            return env

        return environment

    async def _make_cgroup(self) -> None:
        """Make the supervisor's cgroup (in a worker: file-system work), once; others wait."""
        if self._cgroup_asked:
            await self._cgroup_known.wait()
            return
        self._cgroup_asked = True
        if known_unavailable():  # off (the default), or none can be made: no thread hop
            self._cgroup_known.set()
            return
        try:
            # Not abandoned on a cancel: a cgroup made is always kept, to be removed.
            cgroup = self._cgroup = await run_in_worker(CommandCgroup.make, host_watchdog().tag())
            if cgroup is not None and self.sandbox is not None:
                spawners = self.sandbox.contain(cgroup.place)
                if spawners:  # before they start a command: in a worker, for it may wait
                    await run_in_worker(cgroup.place_all, spawners)
            elif cgroup is not None and _HAS_PIDFD:
                # Kept even on a cancel, as the cgroup is: aclose ends it.
                self._launcher = await run_in_worker(_placed_spawner, cgroup)
        finally:
            self._cgroup_known.set()

    def _new_process_id(self) -> str:
        while True:
            candidate = f"proc-{token_hex(4)}"
            if candidate not in self._registry:
                return candidate

    def _new_session(self, cmd: str, cwd: Path) -> CommandSession:
        process_id = self._new_process_id()
        follow_links = self._workspace is not None and cwd != self._workspace
        return CommandSession(
            process_id, cmd, cwd, f"{self.tag}/{process_id}", self.grace, follow_links=follow_links
        )

    async def spawn(self, cmd: str, cwd: Path, *, tty: bool = False) -> CommandSession:
        """Start ``cmd`` (unregistered); raise :class:`SpawnError` if it cannot start."""
        if self._closed:
            raise SupervisorClosedError
        await self.login_environment()
        if self._closed:
            raise SupervisorClosedError
        session = self._new_session(cmd, cwd)
        try:
            await self._nursery.start(self._session_task(session, tty, background=False))
        except BaseException:
            if session.started:
                # Spawned, but the caller was cancelled before start() returned: the
                # command must not outlive the call that asked for it.
                session.release()
            else:
                self._live.discard(session)
            raise
        return session

    def launch(self, cmd: str, cwd: Path, *, label: str, tty: bool = False) -> CommandSession:
        """Start ``cmd`` in the background (3.2.5): registered at once, reported when done.

        Never waits: the session's own task waits for the login environment and
        spawns. A command that cannot be started is a session that exited with
        ``spawn error: …`` and sends its report like any other (3.13.1). Raises
        :class:`SupervisorClosedError` only.
        """
        if self._closed:
            raise SupervisorClosedError
        session = self._new_session(cmd, cwd)
        self.register(session)
        self.arm_report(session, label)
        self._nursery.start_soon(self._session_task(session, tty, background=True))
        return session

    async def _spawn_watched(self, cmd: str, cwd: Path) -> CommandSession:
        """Start ``cmd`` (unregistered) for the caller to watch: see ``watch_inline``.

        Pipe mode, in the sandbox if there is one. The process is started in the
        caller's task; a caller cancelled before it starts starts nothing. Raises
        :class:`SpawnError` as :meth:`spawn` does.
        """
        if self._closed:
            raise SupervisorClosedError
        session = self._new_session(cmd, cwd)
        self._count_live(session)
        try:
            env = await self._environment_for(session.owner)()
            if self._closed:
                raise SupervisorClosedError
            spawned = await _start_process(
                (*self._shell.argv, cmd),
                cwd,
                env,
                False,
                self._shell.executable,
                self.sandbox,
                follow_links=session.follow_links,
                place=self._place,
                launcher=self._launcher,
            )
        except BaseException:
            session.ended.set()  # nothing started (aclose may be waiting for it)
            self._live.discard(session)
            raise
        adopt = partial(self._nursery.start_soon, session.adopt, self._on_exit, self._live.discard)
        session.watch_inline(spawned, adopt)
        return session

    def _count_live(self, session: CommandSession) -> None:
        """Count ``session`` live from now on: :meth:`aclose` waits for it to end."""
        self._live.add(session)
        if not self._spawned_any:
            self._sweep_since = started_from_now()  # every marked process starts later
        self._spawned_any = True

    def _session_task(
        self, session: CommandSession, tty: bool, *, background: bool
    ) -> Callable[..., Awaitable[None]]:
        """The session's task, counted live from now on (for ``nursery.start``/``start_soon``)."""
        self._count_live(session)
        return partial(
            session.run,
            (*self._shell.argv, session.cmd),
            self._environment_for(session.owner),
            tty,
            self._on_exit,
            self._live.discard,
            executable=self._shell.executable,
            background=background,
            sandbox=self.sandbox,
            place=self._place,
            launcher=self._current_launcher,
        )

    def _current_launcher(self) -> HostSpawner | None:
        """:attr:`_launcher` when a command starts (it is made with the first one)."""
        return self._launcher

    def _place(self, pid: int) -> None:
        """Put a command's root in the supervisor's cgroup, if it has one (``_cgroup``).

        From a thread of Trio's cache, not awaited: the write may wait milliseconds for
        the kernel, which the command need not wait for, nor the loop (``_cgroup``).
        """
        cgroup = self._cgroup
        if cgroup is not None:  # not started by a spawner, which is inside already
            trio.lowlevel.start_thread_soon(partial(cgroup.place, pid), _ignored)

    # ------------------------------------------------------------------ registry

    def register(self, session: CommandSession) -> str:
        """Keep a session that outlives its call; evict one first when full (4.1)."""
        if self._closed:
            session.release()
            raise SupervisorClosedError
        now = trio.current_time()
        while self._registry.full:
            victim = self._registry.eviction_candidate(
                finished=lambda s: not s.running, evict_running=True
            )
            if victim is None:  # pragma: no cover - evict_running always finds one
                break
            self._drop(victim)
        self._registry.add(session.process_id, session, now)
        if not self._sweeping:
            self._sweeping = True
            self._nursery.start_soon(self._sweep_idle, now)
        session.registered = True
        return session.process_id

    def get(self, process_id: str) -> CommandSession | None:
        """A registered session by id; refreshes its last access (4.3)."""
        return self._registry.get(process_id, trio.current_time())

    def _drop(self, process_id: str) -> CommandSession | None:
        session = self._registry.remove(process_id)
        if session is not None:
            session.registered = False
            session.release()
        return session

    def discard(self, session: CommandSession) -> None:
        """End a session without waiting: its group is killed in the background."""
        if session.registered:
            self._drop(session.process_id)
        session.release()

    async def remove(self, session: CommandSession) -> None:
        """End a session and wait until nothing it started is left."""
        self.discard(session)
        await session.ended.wait()

    async def wait_released(self) -> None:
        """Wait until every session let go of so far has ended.

        Let go of: discarded, removed, evicted or swept. Ending one runs in its own task
        after whoever let it go moved on: a foreground command that exited in its
        window, for one, is ended (its group checked, its streams closed) after the
        call returned (3.2.9). Sessions still registered are not waited for.
        """
        for session in [s for s in self._live if s.released]:
            await session.ended.wait()

    async def kill_by_id(self, process_id: str) -> bool:
        """Host surface: kill one registered command; ``False`` if unknown."""
        session = self._registry.peek(process_id)
        if session is None:
            return False
        session.report_label = None
        await self.remove(session)
        return True

    # ------------------------------------------------------------------ interaction

    def write(self, session: CommandSession, chars: str) -> None:
        """Queue ``chars`` for the command's stdin (3.3.3).

        Never blocks, so a command that does not read its input cannot stall the
        call; writes reach the command in order; a closed stdin is ignored.
        """
        self._registry.touch(session.process_id, trio.current_time())
        session.send_input(chars.encode("utf-8", "surrogatepass"))

    def interrupt(self, session: CommandSession) -> None:
        """Ctrl-C: SIGINT to the session's process group (3.3.3), never lost.

        A command whose process does not exist yet gets it the moment it does.
        """
        self._registry.touch(session.process_id, trio.current_time())
        session.send_signal(signal.SIGINT)

    async def collect(self, session: CommandSession, window: float, emit: Emit) -> bool:
        """Stream ``session``'s new output to ``emit``; see :meth:`CommandSession.collect`."""
        return await session.collect(window, emit)

    async def run_window(
        self,
        cmd: str,
        cwd: Path,
        *,
        window: float,
        emit: Emit,
        tty: bool = False,
        untimed: Callable[[], AbstractAsyncContextManager[None]] = contextlib.nullcontext,
    ) -> Exited | Running:
        """Run ``cmd`` in the foreground for one window (3.2): the whole of exec_command.

        The login environment is waited for inside ``untimed()`` (the call's clock is
        stopped meanwhile); then the command is spawned and its output streamed to
        ``emit`` for ``window`` seconds. A command that exits in the window is never
        registered and its group is ended at once (3.2.9): :class:`Exited`. One that
        is still running is registered (evicting one when full, 4.1): :class:`Running`.
        If the caller is cancelled meanwhile (interrupt, timeout), the whole process
        group is ended. Raises :class:`SpawnError` when the command cannot start
        (:class:`SupervisorClosedError` once this supervisor is closed).
        """
        if not self._login_known():
            async with untimed():
                await self.login_environment()
        if tty:
            session = await self.spawn(cmd, cwd, tty=tty)
        else:  # watched from this task while the window runs (the module's docstring)
            session = await self._spawn_watched(cmd, cwd)
        try:
            exited = await self.collect(session, window, emit)
        except BaseException:
            self.discard(session)  # interrupt or timeout: the whole group goes
            raise
        finally:
            session.hand_over()  # its task pumps, watches and ends it from now on
        if not exited:
            return Running(self.register(session))
        self.discard(session)  # an unregistered session that ended: reap its group
        return Exited(session.exit_status or ExitStatus())

    async def poll_window(
        self, session: CommandSession, window: float, emit: Emit
    ) -> Exited | Running:
        """Stream a registered command's new output for one window (3.3).

        :class:`Exited` (and the session is removed) when its foreground process
        ended; :class:`Running` otherwise. A cancelled caller leaves the command alone.
        """
        if not await self.collect(session, window, emit):
            return Running(session.process_id)
        self.discard(session)
        return Exited(session.exit_status or ExitStatus())

    # ------------------------------------------------------------------ reports

    def arm_report(self, session: CommandSession, label: str) -> None:
        """Send a completion report when the command's foreground process ends (3.13)."""
        session.report_label = label
        if session.exited.is_set():  # it ended before it was armed
            self._nursery.start_soon(self._on_exit, session)

    def disarm_report(self, session: CommandSession) -> None:
        """No report for this session (kill_command, 3.4.2)."""
        session.report_label = None

    async def _on_exit(self, session: CommandSession) -> None:
        # The report is owed from the moment the foreground process ended (3.13.1):
        # taking the label now means no later removal of the session can lose it.
        label, session.report_label = session.report_label, None
        if label is None:
            return
        await session.settle_output()
        if self._closed:
            return
        status = session.exit_status or ExitStatus()
        self._reports.post(
            BackgroundReport(
                kind="command",
                id=session.process_id,
                label=label,
                status="failed" if status.failed else "completed",
                detail=status.describe(),
                output=report_output(session.buffer.drain()),
            )
        )

    # ------------------------------------------------------------------ host surface

    def list(self) -> list[BackgroundCommand]:
        """Registered commands in registration order, exited ones included (4.13)."""
        out = []
        for process_id, session in self._registry.items():
            spawned = session.spawned if session.started else None
            out.append(
                BackgroundCommand(
                    process_id=process_id,
                    pid=None if spawned is None else spawned.pid,
                    cmd=session.cmd,
                    cwd=str(session.cwd),
                    started_at=session.created_at if spawned is None else spawned.started_at,
                    running=session.running,
                    service_url=(
                        (session.printed_url() or session.service_url) if session.running else None
                    ),
                )
            )
        return out

    async def probe_services(self) -> None:
        """Refresh the listen-port service URL of running sessions that printed none."""
        now = trio.current_time()
        for _, session in self._registry.items():
            if not session.started or not session.running or session.printed_url() is not None:
                continue
            if not session.probe_due(now):
                continue
            with trio.move_on_after(PROBE_TIMEOUT):
                ports = await trio.to_thread.run_sync(
                    listening_ports, session.spawned.pgid, abandon_on_cancel=True
                )
                if ports is not None:
                    session.service_url = service_url_from_ports(ports)

    # ------------------------------------------------------------------ lifetime

    async def _sweep_idle(self, since: float) -> None:
        """Drop the sessions idle for :data:`IDLE_REAP_AFTER`, hourly from ``since`` (4.3).

        ``since`` is the first registration: the hours count from then, not from when
        this task first runs, which may be after the clock moved on.
        """
        due = since + IDLE_SWEEP_INTERVAL
        while True:
            await trio.sleep_until(due)
            now = trio.current_time()
            for process_id in self._registry.idle_keys(now, IDLE_REAP_AFTER):
                self._drop(process_id)
            due = (
                since + (math.floor((now - since) / IDLE_SWEEP_INTERVAL) + 1) * IDLE_SWEEP_INTERVAL
            )

    def _kill_at_exit(self) -> None:
        """The host process exits with this supervisor still open: SIGKILL it all now (4.11).

        Runs from ``atexit``, possibly while the event loop's thread is still alive, so
        it only reads and signals: every live session's group, then every process that
        carries this supervisor's marker. Nothing in a forked child (``os.fork``) whose
        Python exits normally: its copy of this supervisor is not the one the commands
        belong to, and they live on with their host.
        """
        if os.getpid() != self._host_pid:
            return
        for session in list(self._live):
            if session.started and session.running:
                signal_group(session.spawned.pgid, signal.SIGKILL)
        kill_marked(f"{self.tag}/", prefix=True)
        if self._cgroup is not None:  # the watchdog removes it once the host is gone
            self._cgroup.kill()

    async def aclose(self) -> None:
        """Dispose (4.12): no new spawns, no reports, every session ended and waited for.

        Safe to call more than once. Runs shielded, so a cancelled owner still
        leaves nothing running.
        """
        self._closed = True
        atexit.unregister(self._kill_at_exit)
        if self._owns_reports:  # pending reports are dropped too (1.13)
            self._reports.close()
        with trio.CancelScope(shield=True):
            for process_id in list(self._registry):
                self._drop(process_id)
            live = [s for s in self._live if not s.ended.is_set()]
            for session in live:
                session.release()
            for session in live:
                await session.ended.wait()
            if self._spawned_any:  # only a spawn can have left a marked process behind
                await sweep_marked(f"{self.tag}/", prefix=True, newer_than=self._sweep_since)
            if self._launcher is not None:  # its commands have ended: it ends too
                launcher, self._launcher = self._launcher, None
                launcher.hang_up()
                await run_in_worker(launcher.reap)
            if self._cgroup is not None:  # what left group, tree and marker: the kernel knows
                cgroup, self._cgroup = self._cgroup, None
                await _close_cgroup(cgroup, self.sandbox)
