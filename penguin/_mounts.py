"""Which file-system work may be done on the loop's own thread, and doing it there.

What this module owns: the answer to "is this directory on a local file system?",
taken from the kernel's table of mounts (``/proc/self/mountinfo``), which is read in a
worker thread and kept until the kernel says it changed (:class:`_Watch`), and
:func:`run_on_disk`, which does a few system calls on a directory's file system on the
loop's thread when that is a local disk and in a worker thread when it is not.

Why it is asked: a pipe-mode command is started on the loop's thread
(``_process.spawn_process``), which saves each command a thread hop. ``vfork``
suspends the calling thread until the child has called ``exec``, and the child
changes into its working directory before that. On a local disk that takes
microseconds. On a network file system (NFS, SMB, Ceph, Lustre, a FUSE mount such as
sshfs) whose server has stopped answering, that ``chdir`` hangs, and with it every
session the loop serves, and a server's every answer. So only a directory known to be
on a local file system (:data:`LOCAL_TYPES`) is started in from the loop. Any other
directory, and any directory while the table cannot be read, is started in from a
worker thread: the start costs a hop, and a hung server holds up that one command.
The same answer keeps such a command away from the sandbox's spawner, which changes
into the directory itself and starts one command at a time (``_commands``).

The same reasoning holds for penguin's own bookkeeping files: a session's trace
records, its lock's release, a batch's results line. Each is a few system calls
(``open``, ``write``, ``close``, ``unlink``) that take microseconds on a local disk.
In a worker thread each costs far more than that: a hop there and back, and every
call in it that lets go of the GIL takes it back from the loop's thread (about 20-25
context switches and 100-150 µs of CPU a hop on a busy 2-core machine, measured by
``benchmarks/thread_hop.py`` and a batch's counts). So :func:`run_on_disk` does them
on the loop's thread when their directory is on a local disk, as a command is
started there, and in a worker otherwise. Unlike a command's directory, such a
directory is one penguin chose, and the same each time: :func:`stays_local` resolves
its symbolic links once per mount table, in a worker a cancel can leave, and keeps the
answer.

The file tools go further (:func:`run_file_work`). A call may name any path on the
machine, and its links may lead anywhere, so it runs on the loop's thread only when
*every* mount in the table is a local disk or one of the kernel's own tables
(:data:`KERNEL_TYPES`): then no path can lead to another machine. Even so it may meet
a large file or one of the kernel's files, which are read as the kernel writes them;
the call weighs what it found (its ``check(size, device)``) before it reads or writes
anything, and anything past :data:`INLINE_BYTES`, or on a device that is not a local
disk's, sends the whole call to a worker thread, as before. An Environment's first look
at its workspace, ``PATH`` and ``HOME`` runs the same way.

How a directory is placed: by its path, against the mount points, without a system
call. The longest mount point that is a prefix of the normalised path gives the file
system. The workspace itself is resolved when an Environment opens; any other directory
(a ``workdir``) may lead through a symbolic link onto a network file system, so it is
resolved first, in a worker thread that a cancel can leave (``follow_links``), and it
is local only when both the path and where it leads are. A mount made after the table was
read is seen at the next start: the kernel marks the open table, and a ``poll`` of it
(no wait, no disk) tells each start whether to read it again.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
from collections.abc import Callable
from pathlib import Path
from typing import Final, Protocol, TypeVar, TypeVarTuple, final

import attrs
import trio

from penguin._concurrency import run_in_worker, run_leavable_in_worker
from penguin._errors import PenguinError

__all__ = [
    "INLINE_BYTES",
    "KERNEL_TYPES",
    "LOCAL_TYPES",
    "FileCheck",
    "MountTable",
    "on_local_disk",
    "read_mount_table",
    "run_file_work",
    "run_on_disk",
    "stays_local",
]

LOCAL_TYPES: Final = frozenset(
    {
        "bcachefs",
        "btrfs",
        "devtmpfs",
        "erofs",
        "exfat",
        "ext2",
        "ext3",
        "ext4",
        "f2fs",
        "hfsplus",
        "iso9660",
        "jfs",
        "msdos",
        "nilfs2",
        "ntfs3",
        "overlay",
        "ramfs",
        "reiserfs",
        "squashfs",
        "tmpfs",
        "udf",
        "vfat",
        "xfs",
        "zfs",
    }
)
"""File systems served by this machine's own kernel from memory or a local block device:
a ``chdir`` into them does not wait on another machine or on a user-space daemon.
Everything else counts as remote: ``nfs``, ``nfs4``, ``cifs``, ``smb3``, ``ceph``,
``lustre``, ``gpfs``, ``9p``, ``virtiofs``, every ``fuse.*`` and ``fuseblk``, and
``autofs`` (a mount point that mounts on first use)."""

KERNEL_TYPES: Final = frozenset(
    {
        "binfmt_misc",
        "bpf",
        "cgroup",
        "cgroup2",
        "configfs",
        "debugfs",
        "devpts",
        "efivarfs",
        "fusectl",
        "hugetlbfs",
        "mqueue",
        "nsfs",
        "proc",
        "pstore",
        "securityfs",
        "selinuxfs",
        "sysfs",
        "tracefs",
    }
)
"""The kernel's own tables, mounted as file systems: answered from memory by the kernel
itself, never by a disk, another machine or a user-space daemon. A machine whose every
mount is of these or of :data:`LOCAL_TYPES` has no path that can wait on a server
(:func:`run_file_work`). ``fusectl`` is FUSE's control table, not a FUSE mount;
``autofs`` is not here (it waits for its daemon to mount on first use)."""

INLINE_BYTES: Final = 256 * 1024
"""The most a file tool's call may weigh on the loop's thread (:func:`run_file_work`):
bytes read or written, and the work that costs per line, row, replacement or cell of a
diff counted as so many bytes each (``tools._files.LINE_WEIGHT`` and its neighbours),
so that a call done there takes a few milliseconds at most. A heavier call goes to a
worker, where the loop gets the interpreter back between its steps."""

_MOUNTINFO: Final = "/proc/self/mountinfo"
_ESCAPE: Final = re.compile(r"\\([0-7]{3})")
_PLACES_KEPT: Final = 256

_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")


@final
@attrs.frozen
class MountTable:
    """The file system type of each mount point, as the kernel listed them."""

    types: dict[str, str]
    """Mount point (absolute, unescaped) → file system type; the last mount at a path."""
    devices: frozenset[int] = frozenset()
    """The device number (``st_dev``) of each mount of :data:`LOCAL_TYPES`."""
    all_local: bool = attrs.field()
    """Whether every mount is of :data:`LOCAL_TYPES` or :data:`KERNEL_TYPES`."""
    _places: dict[str, bool] = attrs.field(factory=dict, init=False, repr=False)
    _settled: dict[str, bool] = attrs.field(factory=dict, init=False, repr=False)
    """Directory → local once its links are followed (:func:`stays_local`), this table's."""

    @all_local.default
    def _every_mount_local(self) -> bool:
        return all(kind in LOCAL_TYPES or kind in KERNEL_TYPES for kind in self.types.values())

    @classmethod
    def parse(cls, text: str) -> MountTable:
        """The table of ``mountinfo``'s ``text`` (see proc(5)); malformed lines are skipped.

        A line that cannot be read makes the table not :attr:`all_local`: what it
        mounts is unknown.
        """
        types: dict[str, str] = {}
        devices: set[int] = set()
        whole = True
        for line in text.splitlines():
            fields = line.split(" ")
            try:
                # id parent major:minor root MOUNT_POINT options [optional...] - TYPE ...
                kind = fields[fields.index("-", 6) + 1]
                major, _, minor = fields[2].partition(":")
                device = os.makedev(int(major), int(minor))
            except (ValueError, IndexError, OverflowError):
                whole = whole and not line.strip()
                continue
            types[_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), fields[4])] = kind
            if kind in LOCAL_TYPES:
                devices.add(device)
        table = cls(types, frozenset(devices))
        return table if whole else attrs.evolve(table, all_local=False)

    def file_system(self, directory: str) -> str | None:
        """The type of the file system ``directory`` is on, by its path; ``None`` if unknown."""
        if not directory.startswith("/"):
            return None
        place = os.path.normpath(directory)
        while True:
            kind = self.types.get(place)
            if kind is not None or place == "/":
                return kind
            place = os.path.dirname(place)

    def is_local(self, directory: str) -> bool:
        """Whether ``directory`` is on a file system of :data:`LOCAL_TYPES`."""
        known = self._places.get(directory)
        if known is None:
            known = self.file_system(directory) in LOCAL_TYPES
            if len(self._places) >= _PLACES_KEPT:
                self._places.clear()
            self._places[directory] = known
        return known


def read_mount_table() -> MountTable:
    """The mount table of the process (blocking); an empty one when it cannot be read."""
    try:
        with open(_MOUNTINFO, encoding="utf-8", errors="surrogateescape") as file:
            return MountTable.parse(file.read())
    except OSError:
        return MountTable({})


@final
class _Watch:
    """The kernel's word that the mount table changed: ``mountinfo`` open, and polled.

    proc(5): a mount or unmount in the process's mount namespace marks an open
    ``mountinfo`` with a priority event, which the next ``poll`` reports (and clears).
    Polling a ``/proc`` file never waits on a disk, so the loop's thread may ask.
    """

    __slots__ = ("fd", "pid")

    def __init__(self) -> None:
        self.fd = -1
        self.pid = 0

    def ensure_open(self) -> None:
        """Open it (blocking) in this process, before the table it guards is read."""
        if self.pid == os.getpid() and self.fd >= 0:
            return
        if self.fd >= 0 and self.pid != os.getpid():  # a forked child's copy: its own to close
            with contextlib.suppress(OSError):
                os.close(self.fd)
        self.fd, self.pid = -1, os.getpid()
        with contextlib.suppress(OSError):
            self.fd = os.open(_MOUNTINFO, os.O_RDONLY | os.O_CLOEXEC)

    def changed(self) -> bool:
        """Whether a mount came or went since the last ask (a forked child: always)."""
        if self.pid != os.getpid():
            return True
        if self.fd < 0:  # no /proc to watch: the table read is as good as any
            return False
        poller = select.poll()  # one per ask: a poll object is not for two threads at once
        poller.register(self.fd, select.POLLPRI)
        events = poller.poll(0)
        if events and events[0][1] & select.POLLNVAL:  # closed under us: open another
            self.fd, self.pid = -1, 0
        return bool(events)


def _reread() -> MountTable:
    _watch.ensure_open()
    return read_mount_table()


_watch: Final = _Watch()
_table: MountTable | None = None


async def _current_table() -> MountTable:
    """The mount table: the one kept, or read again (in a worker) after the kernel's word."""
    global _table
    if _watch.changed():
        _table = None  # every caller reads it again until one has
    table = _table
    if table is None:
        table = _table = await run_in_worker(_reread)
    return table


async def on_local_disk(directory: Path, *, follow_links: bool = False) -> bool:
    """Whether a child may change into ``directory`` on the loop's thread (see the module).

    Reads the mount table in a worker the first time, and again after the kernel said
    it changed; otherwise answers at once, without a checkpoint. With ``follow_links``
    (a directory not known to be resolved) a local path is resolved too, in a worker
    that a cancel leaves after a second: a link onto a file server that stopped
    answering holds that worker, not the caller.
    """
    table = await _current_table()
    path = os.fspath(directory)
    if not table.is_local(path):
        return False
    if not follow_links:
        return True
    target = await run_leavable_in_worker(lambda _check: os.path.realpath(path))
    return target == path or table.is_local(target)


async def stays_local(directory: str | os.PathLike[str]) -> bool:
    """Whether ``directory``, its symbolic links followed, is on a local disk; remembered.

    :func:`on_local_disk` with ``follow_links``, asked once per directory and mount
    table: later asks answer at once, without a checkpoint, until a mount comes or
    goes. For a directory penguin chose (a traces folder, a results file's), whose
    links do not change under a running program.
    """
    global _table
    # A results file's "." too; getcwd asks the kernel, never a disk.
    path = os.path.abspath(directory)  # noqa: ASYNC240
    if _watch.changed():
        _table = None  # read again below, as on_local_disk does
    table = _table
    if table is not None:
        known = table._settled.get(path)
        if known is not None:
            return known
    local = await on_local_disk(Path(path), follow_links=True)
    table = _table
    if table is not None:
        if len(table._settled) >= _PLACES_KEPT:
            table._settled.clear()
        table._settled[path] = local
    return local


async def run_on_disk(
    directory: str | os.PathLike[str], fn: Callable[[*_Ts], _T], *args: *_Ts
) -> _T:
    """``fn(*args)``, a few system calls on ``directory``'s file system; its value.

    On the loop's thread when :func:`stays_local` says the directory is on a local
    disk; otherwise through :func:`~penguin._concurrency.run_in_worker`. The contract
    is ``run_in_worker``'s either way: a checkpoint before the call (``Cancelled``
    when the caller is already cancelled), never cut short once started, and a cancel
    that comes during it is delivered at the caller's next checkpoint. ``fn`` must be
    short: on a local disk it holds up every task of the loop while it runs.
    """
    if not await stays_local(directory):
        return await run_in_worker(fn, *args)
    await trio.lowlevel.checkpoint_if_cancelled()
    try:
        return fn(*args)
    finally:
        await trio.lowlevel.cancel_shielded_checkpoint()


class FileCheck(Protocol):
    """What a file tool's work is given (:func:`run_file_work`): called between its steps.

    ``check()`` raises once the call is cancelled (in a worker; on the loop's thread
    nothing can cancel it meanwhile). ``check(size, device)``, called once the work
    knows what it will read or write and before it has done either, raises when that
    is too much for the loop's thread: ``size`` bytes (a file's ``st_size``, or what a
    write will put), on the device ``device`` (its ``st_dev``; ``None`` for a file not
    made yet). The work then starts over in a worker thread.
    """

    def __call__(self, size: int = 0, device: int | None = None, /) -> None:
        """Raise to stop the work here (see the class)."""


@final
class _Elsewhere(PenguinError):
    """The work met more than the loop's thread takes: run it again in a worker."""


@final
class _OnThisThread:
    """The check of work on the loop's thread: too large or off a local disk, elsewhere."""

    __slots__ = ("devices",)

    def __init__(self, devices: frozenset[int]) -> None:
        self.devices = devices

    def __call__(self, size: int = 0, device: int | None = None, /) -> None:
        if size > INLINE_BYTES or (device is not None and device not in self.devices):
            raise _Elsewhere


@final
class _InWorker:
    """The check of work in a worker thread: the leavable call's cancel check, only."""

    __slots__ = ("check",)

    def __init__(self, check: Callable[[], None]) -> None:
        self.check = check

    def __call__(self, size: int = 0, device: int | None = None, /) -> None:
        self.check()


async def run_file_work(work: Callable[[FileCheck], _T]) -> _T:
    """``work(check)``, a file tool's blocking part, where it costs least; its value.

    On the loop's thread when every mount of the machine is a local disk or the
    kernel's own (:attr:`MountTable.all_local`): no path can then wait on another
    machine. There ``check(size, device)`` raises when the work is about to read or
    write more than :data:`INLINE_BYTES`, or a file off a local disk (one of the
    kernel's tables, say), and the work starts again in a worker thread. ``work`` must
    call it before its first side effect, so that starting again changes nothing.

    Otherwise, and then, through
    :func:`~penguin._concurrency.run_leavable_in_worker`: ``check()`` raises once the
    caller is cancelled, and a cancel waits for the work a second at most. Either way
    a cancel that comes before the call stops it from starting, and one that comes
    during it is delivered at the caller's next checkpoint.
    """
    table = await _current_table()
    if table.all_local:
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            return work(_OnThisThread(table.devices))
        except _Elsewhere:
            pass  # nothing done yet: the worker starts it over
        finally:
            await trio.lowlevel.cancel_shielded_checkpoint()
    return await run_leavable_in_worker(lambda check: work(_InWorker(check)))
