"""One command's OS process: how it is started, read, signalled and ended for good.

What this module owns:

- **Spawning** ``argv`` as the leader of a new session and process group, with stdout
  and stderr sharing ONE pipe (so the kernel keeps their arrival order) or, in tty
  mode, a pseudo-terminal that becomes the group's controlling terminal. The pipe is
  enlarged to :data:`PIPE_SIZE`, so a flood costs fewer wake-ups.
- **Ending** a process tree so that nothing survives (:func:`end_process_tree`).
- **The owner marker** (:data:`OWNER_VARIABLE`): every child's environment names the
  Environment and the command session that started it, and the sweeps find by it the
  processes that escaped both the group and the tree (a double-forked daemon, a job
  that took its own group before its parent exited).

What it does not own: reading the output into buffers, deciding *when* a process is
ended (the supervisor does), or the child's environment contents (``_environ``).

How a tree is ended, and why in this order:

1. One read of the process table while the root is still unreaped: the root's
   descendants (they are lost from the tree once the root dies and they are
   reparented), its group, and every live process carrying this session's marker.
2. SIGTERM to the group — only while the root is unreaped: until then its pid, which is
   the group id, cannot be reused, so ``killpg`` cannot reach a stranger's group — and
   to each other process found in 1, individually (each process gets one SIGTERM:
   some programs read a second one as "force quit now").
3. Wait up to the grace period for the root to be reaped and everything signalled to
   be gone, then read the table again: anything new (forked during the grace period,
   or an escapee the first read missed) gets SIGTERM too and is waited for.
4. Whatever is still there when the grace period ends gets SIGKILL (the group while
   the root is unreaped, then each process found by a fresh read), and after the root
   is reaped, marker sweeps repeat until one finds nothing that was not killed already
   (a killed process cannot fork any more, so this converges).

Rules that keep it safe and cheap:

- Processes are signalled by identity, never by a bare pid: a table entry carries the
  process's start time, and on Linux the signal goes through a pidfd opened and then
  checked against that start time, so a reused pid is never hit.
- A zombie is dead: it never counts as "still there". This matters where PID 1 does
  not reap orphans (some containers): a dead orphan stays a zombie member of the
  group for ever, and ``killpg(pgid, 0)`` keeps succeeding.
- No wall-clock filter: start times are compared only with each other (clock ticks
  since boot on Linux), because a wall-clock comparison misses fresh processes after
  a clock step or through the one-second resolution of the boot time. Compared so,
  they do filter: a process that started before the root cannot carry its marker,
  so its environment is not read.
- Reads of the process table are shared: every caller waiting while one is being made
  gets the next one (:class:`_SharedScan`, one per Trio run), so an Environment
  closing 64 sessions walks ``/proc`` a handful of times, not 64 times three; and a
  session whose root had already exited (nothing to stop in a hurry) waits
  :data:`GATHER_WINDOW` for company, so short commands run one after another share
  walks too. Reads run in worker threads.

Limits: a process that both left the tree and the group *and* removed the marker from
its environment (``env -u PENGUIN_OWNER setsid …``) cannot be told from a stranger's,
and survives. So can a process in another user's name (setuid), which we may not
signal anyway.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs
import psutil
import trio

__all__ = [
    "DEFAULT_GRACE",
    "OWNER_VARIABLE",
    "PIPE_SIZE",
    "ProcessEntry",
    "ProcessTable",
    "SpawnedProcess",
    "end_process_tree",
    "kill_marked",
    "read_process_table",
    "signal_group",
    "spawn_process",
]

OWNER_VARIABLE: Final = "PENGUIN_OWNER"
"""The environment variable naming ``<environment tag>/<process_id>`` in every child."""

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

_F_SETPIPE_SZ: Final = getattr(fcntl, "F_SETPIPE_SZ", 1031)
_TTY_ROWS, _TTY_COLUMNS = 24, 120
_PROCFS: Final = sys.platform.startswith("linux") and os.path.isdir("/proc/self")
_HAS_PIDFD: Final = hasattr(os, "pidfd_open") and hasattr(signal, "pidfd_send_signal")
_OWNER_KEY: Final = b"\0" + OWNER_VARIABLE.encode() + b"="


# --------------------------------------------------------------------------- spawning


@attrs.define(eq=False)
class SpawnedProcess:
    """A started command: the root process, its group and its streams."""

    process: trio.Process
    """The root (``bash -c ...``) as a Trio process; ``wait()`` reaps it."""
    pgid: int
    """Its process group (equal to its pid: it leads a new session)."""
    output: trio.lowlevel.FdStream
    """Merged stdout and stderr, or the pty master in tty mode."""
    stdin: trio.abc.SendStream
    """Writes reach the command's standard input (the pty in tty mode)."""
    tty: bool
    started_at: float
    """``time.time()`` when it was spawned, for listings."""
    root_started: float = 0.0
    """The root's start time as process-table entries give it (0 when unknown): every
    process carrying its marker started no earlier, so older ones need no look."""

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
) -> SpawnedProcess:
    """Start ``argv`` in a new session; raise ``OSError`` when it cannot start.

    ``executable`` is the file run when ``argv[0]`` is only the name the program is
    given (``None``: ``argv[0]`` is the file).
    """
    if tty:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", _TTY_ROWS, _TTY_COLUMNS, 0, 0))
        try:
            process = await trio.lowlevel.open_process(
                list(argv),
                executable=executable,
                cwd=cwd,
                env=dict(env),
                stdin=slave,
                stdout=slave,
                stderr=slave,
                start_new_session=True,
                preexec_fn=_claim_controlling_terminal,
            )
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        writer = os.dup(master)
        return SpawnedProcess(
            process=process,
            pgid=process.pid,
            output=trio.lowlevel.FdStream(master),
            stdin=trio.lowlevel.FdStream(writer),
            tty=True,
            started_at=time.time(),
            root_started=_start_of(process.pid),
        )

    read_end, write_end = os.pipe()
    with contextlib.suppress(OSError):
        fcntl.fcntl(read_end, _F_SETPIPE_SZ, PIPE_SIZE)
    try:
        process = await trio.lowlevel.open_process(
            list(argv),
            executable=executable,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=write_end,
            stderr=write_end,
            start_new_session=True,
        )
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    assert process.stdin is not None
    return SpawnedProcess(
        process=process,
        pgid=process.pid,
        output=trio.lowlevel.FdStream(read_end),
        stdin=process.stdin,
        tty=False,
        started_at=time.time(),
        root_started=_start_of(process.pid),
    )


def signal_group(pgid: int, signum: int) -> bool:
    """Send ``signum`` to the group; ``False`` when the group no longer exists.

    Only safe while the group leader is unreaped: afterwards the id may name a
    stranger's group. :func:`end_process_tree` keeps to that rule.
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


# --------------------------------------------------------------------------- the table


@attrs.frozen
class ProcessEntry:
    """One process as a table read saw it."""

    pid: int
    ppid: int
    pgid: int
    started: float
    """When it started, in clock ticks since boot on Linux (psutil's create time
    elsewhere): with the pid, its identity. Compared only with other entries' values."""
    zombie: bool
    """Dead and waiting to be reaped: never counted as alive, never signalled."""
    owner: str | None
    """Its owner marker, or None (absent, or its environment is not ours to read)."""

    @property
    def identity(self) -> tuple[int, float]:
        """``(pid, started)``: different for a process that reused the pid."""
        return (self.pid, self.started)


@attrs.frozen
class ProcessTable:
    """A read of every process; the questions :func:`end_process_tree` asks of it. Pure."""

    entries: tuple[ProcessEntry, ...]

    def descendants(self, pid: int) -> list[ProcessEntry]:
        """The live children of ``pid``, their children, and so on (through zombies)."""
        children: dict[int, list[ProcessEntry]] = {}
        for entry in self.entries:
            children.setdefault(entry.ppid, []).append(entry)
        found: list[ProcessEntry] = []
        stack = [pid]
        seen = {pid}
        while stack:
            for child in children.get(stack.pop(), ()):
                if child.pid not in seen:
                    seen.add(child.pid)
                    stack.append(child.pid)
                    if not child.zombie:
                        found.append(child)
        return found

    def group(self, pgid: int) -> list[ProcessEntry]:
        """The live members of process group ``pgid``."""
        return [e for e in self.entries if e.pgid == pgid and not e.zombie]

    def marked(self, owner: str, *, prefix: bool = False) -> list[ProcessEntry]:
        """Live processes whose marker is ``owner`` (or starts with it, for ``prefix``)."""
        found = []
        for entry in self.entries:
            value = entry.owner
            if value is None or entry.zombie:
                continue
            if value.startswith(owner) if prefix else value == owner:
                found.append(entry)
        return found


def _read_stat(pid: int | str) -> bytes:
    fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 4096)  # one line of a few hundred bytes
    finally:
        os.close(fd)


def _read_file(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _parse_stat(data: bytes) -> tuple[bytes, int, int, int]:
    """``(state, ppid, pgid, starttime)`` from ``/proc/<pid>/stat``."""
    # The command name is in parentheses and may itself hold spaces and parentheses.
    fields = data[data.rfind(b")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[2]), int(fields[19])


def _owner_in(environ: bytes) -> str | None:
    at = (b"\0" + environ).find(_OWNER_KEY)
    if at < 0:
        return None
    start = at + len(_OWNER_KEY) - 1
    end = environ.find(b"\0", start)
    return os.fsdecode(environ[start : end if end >= 0 else len(environ)])


def _read_procfs(newer_than: float) -> ProcessTable:
    me = os.getpid()
    entries = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            state, ppid, pgid, started = _parse_stat(_read_stat(name))
        except (OSError, ValueError, IndexError):
            continue  # gone, or not a process we can read
        zombie = state in (b"Z", b"X", b"x")
        owner = None
        if not zombie and started >= newer_than:
            with contextlib.suppress(OSError):
                owner = _owner_in(_read_file(f"/proc/{name}/environ"))
        entries.append(ProcessEntry(int(name), ppid, pgid, started, zombie, owner))
    return ProcessTable(tuple(entries))


def _read_psutil(newer_than: float) -> ProcessTable:
    me = os.getpid()
    entries = []
    for proc in psutil.process_iter(["ppid", "status", "create_time"]):
        info = proc.info
        if proc.pid == me or info["create_time"] is None or info["ppid"] is None:
            continue
        try:
            pgid = os.getpgid(proc.pid)
        except OSError:
            continue
        zombie = info["status"] == psutil.STATUS_ZOMBIE
        owner = None
        if not zombie and info["create_time"] >= newer_than:
            with contextlib.suppress(psutil.Error, OSError):
                owner = proc.environ().get(OWNER_VARIABLE)
        entries.append(
            ProcessEntry(proc.pid, info["ppid"], pgid, info["create_time"], zombie, owner)
        )
    return ProcessTable(tuple(entries))


def read_process_table(newer_than: float = 0.0) -> ProcessTable:
    """Every process of the machine that we can see (blocking: run it in a thread).

    Owner markers are read only for processes that started at ``newer_than`` or later
    (a start time as entries give it); older entries have ``owner=None``.
    """
    return _read_procfs(newer_than) if _PROCFS else _read_psutil(newer_than)


def _start_of(pid: int) -> float:
    """``pid``'s start time as table entries give it; 0 (no filter) when unknown."""
    if _PROCFS:
        now = _procfs_started(pid)
        return 0.0 if now is None else now[0]
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return 0.0


# --------------------------------------------------------------------------- identity


def _procfs_started(pid: int) -> tuple[int, bool] | None:
    """``(starttime, zombie)`` of whatever process has ``pid`` now, or None."""
    try:
        state, _, _, started = _parse_stat(_read_stat(pid))
    except (OSError, ValueError, IndexError):
        return None
    return started, state in (b"Z", b"X", b"x")


def is_alive(entry: ProcessEntry) -> bool:
    """Whether the process ``entry`` names still runs (not gone, not a zombie, not reused)."""
    if _PROCFS:
        now = _procfs_started(entry.pid)
        return now is not None and now[0] == entry.started and not now[1]
    try:
        proc = psutil.Process(entry.pid)
        return proc.create_time() == entry.started and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def send_signal(entry: ProcessEntry, signum: int) -> bool:
    """Signal the process ``entry`` names, and no other; ``False`` if it is gone."""
    if not _PROCFS:
        try:
            proc = psutil.Process(entry.pid)
            if proc.create_time() != entry.started:
                return False
            proc.send_signal(signum)  # psutil checks the identity once more
        except psutil.Error:
            return False
        return True
    pidfd = -1
    if _HAS_PIDFD:
        try:
            pidfd = os.pidfd_open(entry.pid)
        except ProcessLookupError:
            return False
        except OSError:
            pidfd = -1  # a kernel without pidfds: the start-time check alone
    try:
        # Checked after the pidfd is open, the start time proves the pidfd holds the
        # process we saw, and a pidfd cannot be redirected to a newer one.
        now = _procfs_started(entry.pid)
        if now is None or now[0] != entry.started:
            return False
        if pidfd >= 0:
            signal.pidfd_send_signal(pidfd, signum)
        else:
            os.kill(entry.pid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        if pidfd >= 0:
            os.close(pidfd)
    return True


# --------------------------------------------------------------------------- shared reads


class _SharedScan:
    """One table read serves every caller that asked while it was pending.

    A caller needs a read that *began* after it asked (its own signals must show);
    callers that arrive while a read runs all get the next one, made by the first of
    them. At most one read runs at a time. :meth:`read_gathered` also waits a moment
    for company, for callers in no hurry.
    """

    def __init__(self) -> None:
        self._lock = trio.Lock()
        self._begun = 0
        self._finished = 0
        self._table = ProcessTable(())
        self._newer_than = math.inf  # the next read's marker filter: its callers' least
        self._gathering: _Gathering | None = None

    async def read(self, newer_than: float = 0.0) -> ProcessTable:
        """A table read that began after this call did, with markers from ``newer_than``."""
        self._newer_than = min(self._newer_than, newer_than)
        wanted = self._begun + 1
        async with self._lock:
            if self._finished < wanted:
                self._begun += 1
                number = self._begun
                threshold, self._newer_than = self._newer_than, math.inf
                table = await trio.to_thread.run_sync(read_process_table, threshold)
                self._table, self._finished = table, number
        return self._table

    async def read_gathered(self, window: float, newer_than: float = 0.0) -> ProcessTable:
        """Like :meth:`read`, but first gather the callers of the next ``window`` seconds.

        The first caller waits ``window``, then reads once for everyone who joined
        meanwhile: sessions that end one after another share one walk of the table.
        """
        gathering = self._gathering
        if gathering is not None:
            gathering.newer_than = min(gathering.newer_than, newer_than)
            await gathering.done.wait()
            if gathering.table is not None:
                return gathering.table
            return await self.read(newer_than)
        gathering = self._gathering = _Gathering(newer_than=newer_than)
        try:
            await trio.sleep(window)
            self._gathering = None  # who asks from now on needs a read that begins later
            gathering.table = await self.read(gathering.newer_than)
        finally:
            if self._gathering is gathering:
                self._gathering = None
            gathering.done.set()
        return gathering.table


@attrs.define(eq=False)
class _Gathering:
    newer_than: float
    """The least marker filter of everyone gathered."""
    done: trio.Event = attrs.Factory(trio.Event)
    table: ProcessTable | None = None


_SHARED_SCAN: Final = trio.lowlevel.RunVar[_SharedScan]("penguin_process_scan")


def _shared_scan() -> _SharedScan:
    try:
        return _SHARED_SCAN.get()
    except LookupError:
        scan = _SharedScan()
        _SHARED_SCAN.set(scan)
        return scan


# --------------------------------------------------------------------------- ending


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
        self.killed: set[tuple[int, float]] = set()

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
                self.killed.add(entry.identity)
                count += send_signal(entry, signal.SIGKILL)
        return count

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
    shared = _shared_scan()
    since = spawned.root_started

    async def read() -> ProcessTable:
        return await shared.read(since)

    ending = _Ending(spawned.pid, spawned.pgid, owner, exited)
    if exited.is_set():  # nothing to stop in a hurry: share the read with others
        table = await shared.read_gathered(GATHER_WINDOW, since)
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
