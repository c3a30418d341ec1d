"""The process table: reading it, and reaching one of its entries by identity.

What this module owns:

- **Reads** of every process the host lets us see (:func:`read_process_table`): pid,
  parent, group, start time, zombie or not, and the owner marker (:data:`OWNER_VARIABLE`)
  from the environment — through ``/proc`` on Linux, psutil elsewhere. Blocking: run in a
  worker thread. On Linux a read leaves out the processes that started before this one
  (none of them can be one of ours) and remembers their pids, so the next read opens
  ``stat`` only for the processes started since (:class:`_OlderCache`): with 130
  processes on the machine a read took 1.5 ms of CPU, and takes 0.2 ms. A live process
  whose environment reads empty (mid-``exec``, or ending) is read again until it shows
  one or is gone, within :data:`EMPTY_ENVIRON_WAIT` per read; one that stays empty
  through the whole wait was started without one, and is not waited for again.
  :class:`ProcessTable` answers the questions asked of a read (a process's
  descendants, a group's live members, the processes carrying a marker); pure.
- **Shared reads** (:func:`shared_scan`): every caller waiting while one read is being
  made gets the next one, one read at a time per Trio run, so an Environment closing 64
  sessions walks ``/proc`` a handful of times, not 64 times three; a caller in no hurry
  may also wait a moment for company (:meth:`_SharedScan.read_gathered`).
- **Reads of what started since a mark** (:func:`pid_mark`): the kernel gives pids
  upward from a cursor, so what started after a mark has a pid given since, and a read
  for one command's leftovers opens ``stat`` only for those pids: with 250 processes
  started since this one, 0.25 ms of CPU against 3.7 ms for a read of them all. In
  ``benchmarks/server.py`` (64 sandboxed sessions, 130 of the server's own processes)
  that was 0.18 s of reads instead of 0.76 s.
- **Identity**: a table entry names a process by ``(pid, start time)``, so
  :func:`is_alive` and :func:`send_signal` never mistake a process that reused the pid
  for the one that was read; on Linux the signal goes through a pidfd opened and then
  checked against that start time. A zombie is dead: never alive, never signalled.

What it does not own: starting processes or deciding what to kill (``_process``).
Start times are compared only with each other (clock ticks since boot on Linux), never
with the wall clock, which steps and has a one-second resolution at boot.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import Final, final

import attrs
import psutil
import trio

from penguin._concurrency import run_in_worker

__all__ = [
    "OWNER_VARIABLE",
    "PidMark",
    "ProcessEntry",
    "ProcessTable",
    "is_alive",
    "pid_mark",
    "read_process_table",
    "send_signal",
    "shared_scan",
    "start_of",
    "started_from_now",
]

OWNER_VARIABLE: Final = "PENGUIN_OWNER"
"""The environment variable naming ``<environment tag>/<process_id>`` in every child."""

_PROCFS: Final = sys.platform.startswith("linux") and os.path.isdir("/proc/self")
_HAS_PIDFD: Final = hasattr(os, "pidfd_open") and hasattr(signal, "pidfd_send_signal")
_OWNER_KEY: Final = b"\0" + OWNER_VARIABLE.encode() + b"="


# --------------------------------------------------------------------------- the table


@final
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


@final
@attrs.frozen
class ProcessTable:
    """A read of the processes; the questions ``_process.end_process_tree`` asks of it. Pure."""

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


_DEAD_STATES: Final = (b"Z", b"X", b"x")
"""``stat`` states of a process that has exited: a zombie, or one being reaped."""


def _stat_of(pid: int | str) -> tuple[bytes, int, int, int] | None:
    """``(state, ppid, pgid, starttime)`` of ``/proc/<pid>``; ``None`` when gone or unreadable."""
    try:
        return _parse_stat(_read_stat(pid))
    except (OSError, ValueError, IndexError):
        return None


_KERNEL_PARENTS: Final = (0, 2)
"""The parent pids of kernel threads (``kthreadd`` is 2), whose environment is empty."""
EMPTY_ENVIRON_WAIT: Final = 0.05
"""Seconds one table read waits, at most and in all, for environments that read empty."""
BETWEEN_PROGRAMS_WAIT: Final = 1.0
"""Seconds it waits, at most and in all, for a process plainly between two programs.

Its command line reads empty too (:func:`_between_programs`), so it is in ``exec`` or
ending, and needs only to be run: a machine whose cores are all busy may not run it
within :data:`EMPTY_ENVIRON_WAIT`."""
_ENVLESS_KEPT: Final = 1024
"""Processes remembered as started without an environment (not waited for again)."""
_envless: dict[tuple[int, int], None] = {}
"""``(pid, start time)`` of processes whose environment stayed empty through a wait."""


def _remember_envless(identity: tuple[int, int]) -> None:
    if len(_envless) >= _ENVLESS_KEPT:
        with contextlib.suppress(StopIteration, KeyError, RuntimeError):
            del _envless[next(iter(_envless))]  # the oldest; reads in threads may race
    _envless[identity] = None


def _environ_of(name: str) -> bytes | None:
    """``/proc/<name>/environ``: ``b""`` also when the process is ending; None: not ours to read."""
    try:
        return _read_file(f"/proc/{name}/environ")
    except (ProcessLookupError, FileNotFoundError):
        return b""  # exiting (its memory is gone), or gone: the caller looks again
    except OSError:
        return None


def _between_programs(name: str) -> bool:
    """Whether ``/proc/<name>``, whose environment read empty, is plainly between programs.

    Its command line is set up with its environment and released with it: one that
    reads empty as well means ``execve`` has not set up the new program yet, or the
    process is ending. A process started without an environment has a command line; so
    has one caught in the short moment of ``execve`` that sets up the environment after
    the command line, which is why an empty environment alone is waited for too.
    """
    try:
        return not _read_file(f"/proc/{name}/cmdline")
    except (ProcessLookupError, FileNotFoundError):
        return True  # ending, or gone: the next look sees which
    except OSError:
        return False


def _entry(
    name: str, stat: tuple[bytes, int, int, int], newer_than: float
) -> tuple[ProcessEntry, bool]:
    """The entry of ``/proc/<name>`` as one look sees it; whether to look again.

    Its marker is read only when it started at ``newer_than`` or later. A live process
    whose environment reads empty is to be looked at again (:func:`_await_environments`)
    unless it is a kernel thread or is remembered as having none.
    """
    state, ppid, pgid, started = stat
    zombie = state in _DEAD_STATES
    owner = None
    again = False
    if not zombie and started >= newer_than:
        environ = _environ_of(name)
        if environ:
            owner = _owner_in(environ)
        elif environ == b"":
            again = ppid not in _KERNEL_PARENTS and (int(name), started) not in _envless
    return ProcessEntry(int(name), ppid, pgid, started, zombie, owner), again


def _await_environments(entries: list[ProcessEntry], awaiting: list[int]) -> None:
    """Look again at ``entries[i]`` for each ``i`` in ``awaiting``, all together.

    The kernel shows no environment between ``execve`` installing a new memory map and
    setting it up, and from an exit's release of the memory until the zombie, so a
    command's process caught in ``exec`` would read as unmarked, and a read that ends a
    session would leave it running. 275 of 9,834 reads of the environment of a live
    child that ran ``execve`` then exited read empty here. Every 0.2 ms each is read
    again, until it shows an environment (its entry gets its owner) or has ended (its
    entry is not alive), within :data:`EMPTY_ENVIRON_WAIT` for the whole read. Waiting
    for them together, a process started with no environment at all cannot use up the
    wait of one caught in ``exec``; one still empty at the end of the whole wait has
    none, and is remembered so that no later read waits for it. One seen plainly between
    programs (:func:`_between_programs`) at any look is waited for longer, every 2 ms
    up to :data:`BETWEEN_PROGRAMS_WAIT`: with the short wait alone, three CPU burners
    on two cores made 114 of 2,640 reads of a live child of a marked shell see no
    marker. Seen so once, it keeps the long wait when its command line comes back
    before its environment (``execve`` sets them up in that order, slowly on a busy
    machine); one that then runs with no environment costs that read the long wait,
    once. The short wait's verdict follows a look made after it ended, never one from
    before a spell in which the thread was not run.
    """
    begun = time.monotonic()
    short_until, long_until = begun + EMPTY_ENVIRON_WAIT, begun + BETWEEN_PROGRAMS_WAIT
    # Seen plainly between programs at some look: past the short wait, only these.
    between = {index: _between_programs(str(entries[index].pid)) for index in awaiting}
    while awaiting:
        time.sleep(0.0002 if time.monotonic() < short_until else 0.002)
        still: list[int] = []
        for index in awaiting:
            entry = entries[index]
            state = _stat_of(entry.pid)
            if state is None or state[3] != entry.started or state[0] in _DEAD_STATES:
                entries[index] = attrs.evolve(entry, zombie=True)  # ended (may be reaped)
                continue
            name = str(entry.pid)
            environ = _environ_of(name)
            if environ == b"":
                still.append(index)
                between[index] = between[index] or _between_programs(name)
            elif environ is not None:
                entries[index] = attrs.evolve(entry, owner=_owner_in(environ))
        awaiting = still
        now = time.monotonic()
        if now >= long_until:
            break
        if now >= short_until:
            for index in [i for i in awaiting if not between[i]]:  # it has none
                _remember_envless((entries[index].pid, int(entries[index].started)))
            awaiting = [i for i in awaiting if between[i]]
    for index in awaiting:  # empty through the whole wait: it has none
        _remember_envless((entries[index].pid, int(entries[index].started)))


def _read_procfs(newer_than: float, since: Sequence[PidMark]) -> ProcessTable:
    names = os.listdir("/proc")
    if since:
        # Read after the listing: every pid listed was given by then.
        window = _window_since(since)
        if not window.everything:
            return _read_given(names, window, newer_than)
    return _read_all(names, newer_than)


def _read_given(names: list[str], window: _Window, newer_than: float) -> ProcessTable:
    """The processes whose pids ``window`` says were given since its mark, and no other."""
    me = os.getpid()
    entries: list[ProcessEntry] = []
    awaiting: list[int] = []
    for name in names:
        if not name.isdigit():
            continue
        pid = int(name)
        if pid == me or not window.covers(pid):
            continue
        stat = _stat_of(name)
        if stat is not None:
            entry, again = _entry(name, stat, newer_than)
            if again:
                awaiting.append(len(entries))
            entries.append(entry)
    _await_environments(entries, awaiting)
    return ProcessTable(tuple(entries))


def _read_all(names: list[str], newer_than: float) -> ProcessTable:
    me = os.getpid()
    older = _OLDER.current(me)
    mine = older.mine
    entries: list[ProcessEntry] = []
    awaiting: list[int] = []
    seen_older: list[int] = []
    # Every pid listed was allocated by now: the window says which of the pids known to
    # be older than this process could have been given to a new one since the last read.
    window = _allocation_window(older.cursor, older.forks)
    for name in names:
        if not name.isdigit():
            continue
        pid = int(name)
        if pid == me:
            continue
        if pid in older.pids and not window.covers(pid):
            seen_older.append(pid)
            continue
        stat = _stat_of(name)
        if stat is None:
            continue  # gone, or not a process we can read
        if stat[3] < mine:
            seen_older.append(pid)  # started before this process: never one of ours
            continue
        entry, again = _entry(name, stat, newer_than)
        if again:
            awaiting.append(len(entries))
        entries.append(entry)
    _await_environments(entries, awaiting)
    _OLDER.keep(older, seen_older, window)
    return ProcessTable(tuple(entries))


# --------------------------------------------------------------------------- older processes


_RESERVED_PIDS: Final = 300
"""Linux gives pids below this only to processes started before the first wrap-around."""


@final
@attrs.frozen
class _Window:
    """The pids the kernel may have given to new processes since the last table read.

    New pids go up from the last one given (the *cursor*) and wrap around at
    ``pid_max`` to :data:`_RESERVED_PIDS`; a pid freed below the cursor is given again
    only after a wrap. So between a read that saw the cursor at ``after`` and one that
    sees it at ``cursor``, the pids given lie in ``(after, cursor]`` (wrapping), unless
    a whole turn of forks went by, or either cursor is unknown: then every pid counts.
    """

    after: int | None
    cursor: int | None
    forks: int | None
    everything: bool

    def covers(self, pid: int) -> bool:
        if self.everything or self.after is None or self.cursor is None:
            return True
        if self.after <= self.cursor:
            return self.after < pid <= self.cursor
        return pid > self.after or pid <= self.cursor  # wrapped


@final
@attrs.frozen
class _Older:
    """Pids of processes that started before this one, as of one table read."""

    owner: int
    """The process (``os.getpid()``) these are older than: a forked child starts over."""
    mine: int
    """This process's start time (clock ticks since boot); -1 when unknown (no filter)."""
    pids: frozenset[int]
    cursor: int | None
    forks: int | None


@final
class _OlderCache:
    """Which processes started before this one, kept from one table read to the next.

    A process that started before this one cannot be its descendant, be in one of its
    process groups (each command starts a session of its own) or carry one of its
    markers, so the table leaves it out. Knowing which pids those are spares reading
    ``stat`` for most of the machine's processes on every read; a pid is trusted only
    while the kernel cannot have given it to a new process (:class:`_Window`): the
    cursor is read after the listing and before any ``stat``, so a pid given after the
    cursor was read falls in the next read's window. Safe across threads: table reads
    run in worker threads.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._older: _Older | None = None

    def current(self, me: int) -> _Older:
        with self._lock:
            older = self._older
        if older is None or older.owner != me:
            older = _Older(me, _own_start(me), frozenset(), None, None)
        return older

    def forget(self) -> None:
        """Start over: the next read opens every process's ``stat``."""
        with self._lock:
            self._older = None

    def keep(self, older: _Older, pids: list[int], window: _Window) -> None:
        with self._lock:
            self._older = attrs.evolve(
                older, pids=frozenset(pids), cursor=window.cursor, forks=window.forks
            )


def _allocation_window(after: int | None, forks_then: int | None) -> _Window:
    """The pids that may have been given since the cursor stood at ``after``.

    ``forks_then`` is the fork count then (see :class:`_Window`). Call it after the
    listing it judges.
    """
    cursor, forks = _last_pid(), _forks()
    turn = min(_pid_max(), 32768) - _RESERVED_PIDS  # a namespace may have a lower pid_max
    everything = (
        forks is None or forks_then is None or forks - forks_then >= turn // 2
    ) or not _proc_is_ours()
    return _Window(after, cursor, forks, everything)


def _window_since(marks: Sequence[PidMark]) -> _Window:
    """The pids that may have been given since any of ``marks``: the union of their windows.

    Each window ends at the cursor now, so their union is the window of the mark that
    lies farthest behind it. Every mark's cursor is on the stretch of pids given since
    the first of them, which is less than a turn (or the window is everything, judged
    by the lowest fork count): the one farthest behind is where the first mark stood.
    Fork counts cannot order the marks themselves: marks taken within
    :data:`_FORKS_FRESH` of each other may share one count and still stand apart (the
    chaos matrix's survivors, when twelve sessions ended together under load).
    """
    window = _allocation_window(marks[0].cursor, min(mark.forks for mark in marks))
    cursor = window.cursor
    if window.everything or cursor is None or len(marks) == 1:
        return window
    first = max((mark.cursor for mark in marks), key=lambda after: _behind(after, cursor))
    return attrs.evolve(window, after=first)


def _behind(after: int, cursor: int) -> int:
    """How many pids the kernel gives from just after ``after`` up to ``cursor``, wrapping."""
    if after <= cursor:
        return cursor - after
    return (_pid_max() - after) + (cursor - _RESERVED_PIDS)


def _own_start(me: int) -> int:
    try:
        return _parse_stat(_read_stat(me))[3]
    except (OSError, ValueError, IndexError):
        return -1


def _last_pid() -> int | None:
    """The last pid the kernel gave in this pid namespace (``/proc/loadavg``'s 5th field)."""
    try:
        return int(_read_file("/proc/loadavg").split()[4])
    except (OSError, ValueError, IndexError):
        return None


def _forks() -> int | None:
    """How many processes and threads were created since boot (``/proc/stat``)."""
    global _recent_forks
    begun = time.monotonic()
    try:
        data = _read_file("/proc/stat")
        at = data.index(b"\nprocesses ") + len(b"\nprocesses ")
        count = int(data[at : data.index(b"\n", at)])
    except (OSError, ValueError):
        return None
    _recent_forks = (begun, count)
    return count


_FORKS_FRESH: Final = 0.5
"""Seconds a fork count read serves :func:`pid_mark` before it reads ``/proc/stat`` again."""

_recent_forks: tuple[float, int] | None = None
"""The last fork count read, and ``time.monotonic()`` from before it was read."""


def _forks_so_far() -> int | None:
    """A fork count no greater than the count now: the last one read, if recent.

    ``/proc/stat`` holds a line per CPU and every interrupt's count, which the kernel
    sums over the CPUs at each read: 6 µs on 2 cores, more on a large machine. A mark
    needs only a count that is not *above* the true one (the counter only grows), so
    one read serves the marks of :data:`_FORKS_FRESH` seconds; a staler count only
    makes a read of every process come sooner.
    """
    recent = _recent_forks
    if recent is not None and time.monotonic() - recent[0] < _FORKS_FRESH:
        return recent[1]
    return _forks()


@functools.cache
def _pid_max() -> int:
    try:
        return int(_read_file("/proc/sys/kernel/pid_max"))
    except (OSError, ValueError):
        return _RESERVED_PIDS  # unknown: every read counts as a whole turn


def _proc_is_ours() -> bool:
    """Whether ``/proc`` shows this pid namespace (the cursor read is of this namespace)."""
    try:
        return os.readlink("/proc/self") == str(os.getpid())
    except OSError:
        return False


_OLDER: Final = _OlderCache()


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


def read_process_table(
    newer_than: float = 0.0, since: PidMark | Sequence[PidMark] | None = None
) -> ProcessTable:
    """Every process of the machine that we can see (blocking: run it in a thread).

    Owner markers are read only for processes that started at ``newer_than`` or later
    (a start time as entries give it); older entries have ``owner=None``. On Linux the
    processes that started before this one are left out: they cannot descend from it,
    share one of its process groups or carry one of its markers.

    With ``since`` (a :func:`pid_mark`, or several), only the processes started after
    the mark (the first of them) are read, by the pids the kernel gave since, when it
    can tell which those are (else every process is): a read for what one command left
    behind opens ``stat`` for the few processes started while it ran, not for the
    machine's.
    """
    if not _PROCFS:
        return _read_psutil(newer_than)
    marks = (since,) if isinstance(since, PidMark) else tuple(since or ())
    return _read_procfs(newer_than, marks)


@final
@attrs.frozen(order=False)
class PidMark:
    """Where the kernel's pid allocation stood at one moment (:func:`pid_mark`).

    A process started after it has a pid given after ``cursor`` (wrapping at
    ``pid_max``), unless a whole turn of pids went by since, which ``forks`` (processes
    and threads created since boot, counted before the cursor was read) tells.
    """

    cursor: int
    forks: int


def pid_mark() -> PidMark | None:
    """The pid allocation's state now (5 µs here).

    ``None`` where it cannot be read: not Linux, or a ``/proc`` of another pid namespace.
    """
    if not _PROCFS or not _proc_is_ours():
        return None
    forks = _forks_so_far()  # first: a count taken earlier only widens the turn check
    cursor = _last_pid()
    if forks is None or cursor is None:
        return None
    return PidMark(cursor, forks)


def start_of(pid: int) -> float:
    """``pid``'s start time as table entries give it; 0 (no filter) when unknown."""
    if _PROCFS:
        now = _procfs_started(pid)
        return 0.0 if now is None else now[0]
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return 0.0


def started_from_now() -> float:
    """A start time below that of every process started from now on (0: no filter known).

    On Linux, the boot-time clock in clock ticks, less two: a table entry's start time is
    that clock at the process's start, truncated to ticks. A marker sweep reads the
    environment only of processes at or above it (see :func:`read_process_table`).
    """
    if _PROCFS and hasattr(time, "CLOCK_BOOTTIME"):
        ticks = os.sysconf("SC_CLK_TCK")
        return float(max(0, math.floor(time.clock_gettime(time.CLOCK_BOOTTIME) * ticks) - 2))
    return 0.0


# --------------------------------------------------------------------------- identity


def _procfs_started(pid: int) -> tuple[int, bool] | None:
    """``(starttime, zombie)`` of whatever process has ``pid`` now, or None."""
    stat = _stat_of(pid)
    if stat is None:
        return None
    state, _, _, started = stat
    return started, state in _DEAD_STATES


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


@final
class _SharedScan:
    """One table read serves every caller that asked while it was pending.

    One per Trio run: get it with :func:`shared_scan`.

    A caller needs a read that *began* after it asked (its own signals must show);
    callers that arrive while a read runs all get the next one, made by the first of
    them. At most one read runs at a time. :meth:`read_gathered` also waits a moment
    for company, for callers in no hurry. A read is what all its callers need: markers
    from the least filter asked for, and every pid, unless each caller asked only about
    processes started after a mark (then the pids given since the first of them, found
    when the read is made: :func:`_window_since`).
    """

    def __init__(self) -> None:
        self._lock = trio.Lock()
        self._begun = 0
        self._finished = 0
        self._table = ProcessTable(())
        self._wants = _Wants()  # what the next read's callers need of it
        self._gathering: _Gathering | None = None

    async def read(
        self, newer_than: float = 0.0, since: PidMark | Sequence[PidMark] | None = None
    ) -> ProcessTable:
        """A table read that began after this call did, with markers from ``newer_than``.

        ``since``: this caller asks only about processes started after that mark, or
        after any of those marks (see :func:`read_process_table`); ``None``: about any
        process.
        """
        self._wants.add(newer_than, since)
        wanted = self._begun + 1
        async with self._lock:
            if self._finished < wanted:
                self._begun += 1
                number = self._begun
                wants, self._wants = self._wants, _Wants()
                try:
                    table = await run_in_worker(read_process_table, wants.newer_than, wants.since)
                except BaseException:
                    # The callers queued behind this one still need what it took.
                    self._wants.merge(wants)
                    raise
                self._table, self._finished = table, number
        return self._table

    async def read_gathered(
        self, window: float, newer_than: float = 0.0, since: PidMark | None = None
    ) -> ProcessTable:
        """Like :meth:`read`, but first gather the callers of the next ``window`` seconds.

        The first caller waits ``window``, then reads once for everyone who joined
        meanwhile: sessions that end one after another share one walk of the table.
        """
        gathering = self._gathering
        if gathering is not None:
            gathering.wants.add(newer_than, since)
            await gathering.done.wait()
            if gathering.table is not None:
                return gathering.table
            return await self.read(newer_than, since)
        gathering = self._gathering = _Gathering()
        gathering.wants.add(newer_than, since)
        try:
            await trio.sleep(window)
            self._gathering = None  # who asks from now on needs a read that begins later
            wants = gathering.wants
            gathering.table = await self.read(wants.newer_than, wants.since)
        finally:
            if self._gathering is gathering:
                self._gathering = None
            gathering.done.set()
        return gathering.table


@final
@attrs.define
class _Wants:
    """What every caller of one read needs of it: the least marker filter, and the pids."""

    newer_than: float = math.inf
    """The least marker filter asked for."""
    whole: bool = False
    """A caller asked about any process: the read is of every pid."""
    marks: set[PidMark] = attrs.Factory(set)
    """The marks asked for: the read covers the pids given since each of them."""

    @property
    def since(self) -> tuple[PidMark, ...] | None:
        """The marks the read goes by: ``None`` (every pid) when someone asked for all."""
        if self.whole or not self.marks:
            return None
        return tuple(sorted(self.marks, key=lambda mark: (mark.forks, mark.cursor)))

    def add(self, newer_than: float, since: PidMark | Sequence[PidMark] | None) -> None:
        self.newer_than = min(self.newer_than, newer_than)
        if since is None:
            self.whole = True
        elif isinstance(since, PidMark):
            self.marks.add(since)
        else:
            self.marks.update(since)

    def merge(self, other: _Wants) -> None:
        self.newer_than = min(self.newer_than, other.newer_than)
        self.whole = self.whole or other.whole
        self.marks |= other.marks


@final
@attrs.define(eq=False)
class _Gathering:
    wants: _Wants = attrs.Factory(_Wants)
    """What everyone gathered needs of the read."""
    done: trio.Event = attrs.Factory(trio.Event)
    table: ProcessTable | None = None


_SHARED_SCAN: Final = trio.lowlevel.RunVar[_SharedScan]("penguin_process_scan")


def shared_scan() -> _SharedScan:
    try:
        return _SHARED_SCAN.get()
    except LookupError:
        scan = _SharedScan()
        _SHARED_SCAN.set(scan)
        return scan
