"""The kernel's own net under a supervisor's commands: a cgroup of its own, where one may be made.

What this module owns: finding this process's cgroup (version 2) and whether a cgroup
may be made beneath it; making a supervisor's cgroup (``penguin-<host tag>-<n>``),
placing in it the spawner that starts the commands (or a command's root process, as
soon as it has started, for one penguin starts itself), and, when the supervisor
closes, killing whatever is still in it (``cgroup.kill``) and removing it. A sandboxed
supervisor's cgroup that then holds nothing but the sandbox's spawners is not killed:
they end as the sandbox closes, and the sandbox removes it.

Why: the supervisor finds a command's processes by group, by tree and by the owner
marker in their environment (``_process``). A process that leaves all three
(``env -i setsid daemon &``: a new session, a double fork, an empty environment)
cannot be told from a stranger's. Membership of a cgroup is different: every child
inherits it, ``setsid``, a double fork and an empty environment keep it, and only a
process with write access to the cgroup files can leave. So such a process still ends
when its Environment does.

When it applies: when ``PENGUIN_CGROUPS=1`` asks for it (:func:`enabled` says why it is
not the default), where a cgroup v2 hierarchy is mounted, the kernel has ``cgroup.kill``
(Linux 5.14), this process may make a directory in its own cgroup, and the cgroup is
not one that systemd manages without having delegated it (systemd marks the cgroups it
delegates with a ``trusted.delegate`` or ``user.delegate`` attribute; making cgroups
inside another of its units would go behind its back). Root in a container or a VM,
and a ``systemd-run --user -p Delegate=yes`` unit, get it; anywhere else (most desktops
as an ordinary user, containers with a read-only ``/sys/fs/cgroup``) nothing is made
and the sweeps are the whole net.

How commands join: a spawner starts them, which joined the cgroup before its first
start, so each is a member from its first instruction. Under a sandbox it is the
sandbox's (``sandbox/_spawner``); without one, the supervisor starts the same program
outside any namespace (``sandbox/_linux.HostSpawner``), one per Environment. A command
penguin starts itself (its directory is not on a local disk, its start message is over
128 KiB, or no spawner could be started) is placed after it started: ``vfork`` leaves
no step between the fork and the ``exec`` to place it in the child for free, so a
process it forks before that write stays outside, and for it the sweeps are the net,
as everywhere no cgroup can be made. A move is not quick: it waits for the kernel's
fork lock to change hands (an RCU grace period, 10-20 ms on the development VM when
the process is busy forking), so the supervisor makes each from a worker thread, never
on the event loop's. A process that was placed stays inside; a process with the
rights to write ``cgroup.procs`` (root outside the sandbox) could move itself out.

It uses the standard library only, and never raises for a cgroup it cannot make,
place into or remove: the cgroup is an extra net, and a command runs without it. Every
function here blocks (file-system work): callers on the event loop run them in a worker.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import threading
import time
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Final, final

__all__ = [
    "CGROUP_PREFIX",
    "CommandCgroup",
    "cgroup_base",
    "enabled",
    "kill_cgroup",
    "known_unavailable",
    "remove_cgroup",
]

CGROUP_PREFIX: Final = "penguin-"
"""Every cgroup penguin makes is named ``penguin-<host tag>-<n>``."""

SWITCH_VARIABLE: Final = "PENGUIN_CGROUPS"
"""``1`` (or ``on``, ``yes``, ``true``) turns the cgroups on; anything else (unset, ``0``)
leaves them off and the sweeps the whole net (:func:`enabled` says why that is the
default)."""

_counter = itertools.count(1)
_probed: tuple[int, Path | None] | None = None
"""(pid, base): the probe's answer, made again in a forked child (another process)."""


def _setting() -> str:
    return os.environ.get(SWITCH_VARIABLE, "").strip().lower()


def enabled() -> bool:
    """Whether ``PENGUIN_CGROUPS=1`` turned the cgroups on (they are off by default).

    Each move of a process into a cgroup makes every ``fork`` on the machine wait for
    an RCU grace period (the kernel's fork lock changes hands; 10-20 ms on the
    development VM), and without a sandbox each supervisor starts a spawner of its own
    (the module's docstring). Measured on batches of 300 tasks at concurrency 64,
    alternated (load 3-15): sandboxed, penguin's CPU per task went 30.4 -> 32.7 and
    33.8 -> 35.3 ms; unsandboxed 26.1 -> 30.0 ms, and the throughput from 33-38 to
    23-29 tasks/s. So the net is for those who ask.
    """
    return _setting() in {"1", "on", "yes", "true"}


def _own_cgroup(proc_cgroup: str, mountinfo: str) -> Path | None:
    """The directory of this process's v2 cgroup, from ``/proc/self/{cgroup,mountinfo}``."""
    relative = next(
        (line[3:] for line in proc_cgroup.splitlines() if line.startswith("0::/")), None
    )
    if relative is None or relative.endswith(" (deleted)"):
        return None
    for line in mountinfo.splitlines():
        before, separator, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if not separator or len(fields) < 5 or not tail or tail[0] != "cgroup2":
            continue
        root, mount_point = fields[3], fields[4]
        if root != "/" and relative != root and not relative.startswith(root + "/"):
            continue  # this mount shows another part of the hierarchy
        inside = relative[len(root) :] if root != "/" else relative
        # mountinfo escapes spaces and the like as octal (\040); so may the cgroup path
        path = Path(mount_point.encode().decode("unicode_escape")) / inside.lstrip("/")
        return path
    return None


def _managed_by_systemd_elsewhere(path: Path) -> bool:
    """Whether systemd manages ``path`` and did not delegate it (so it is not ours to split)."""
    if not os.path.isdir("/run/systemd/system"):
        return False
    for name in ("trusted.delegate", "user.delegate"):
        with contextlib.suppress(OSError):
            if os.getxattr(path, name).strip() in {b"1", b"yes", b"true"}:
                return False
    return True


def cgroup_base() -> Path | None:
    """The cgroup beneath which this process may make its commands' cgroups, or ``None``.

    Probed once per process (a forked child probes again); ``None`` without a probe
    while cgroups are off (:func:`enabled`, read at every call).
    """
    global _probed
    if not enabled():
        return None
    pid = os.getpid()
    if _probed is None or _probed[0] != pid:
        base: Path | None = None
        try:
            with open("/proc/self/cgroup", encoding="utf-8", errors="surrogateescape") as f:
                own = f.read()
            with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
                mounts = f.read()
            base = _own_cgroup(own, mounts)
            if base is not None and (
                not os.access(base, os.W_OK | os.X_OK) or _managed_by_systemd_elsewhere(base)
            ):
                base = None
        except OSError:
            base = None
        _probed = (pid, base)
    return _probed[1]


def known_unavailable() -> bool:
    """Whether this process is known to get no cgroup, without touching a file.

    Lets a supervisor skip the worker thread that :meth:`CommandCgroup.make` needs:
    once the probe found nothing (or a ``mkdir`` was refused), every later one would too.
    """
    if not enabled():
        return True
    probed = _probed
    return probed is not None and probed[0] == os.getpid() and probed[1] is None


def _refused() -> None:
    """Remember that no cgroup can be made here (a ``mkdir`` beneath the base was refused)."""
    global _probed
    _probed = (os.getpid(), None)


@final
class CommandCgroup:
    """One supervisor's cgroup: where its commands are placed, and killed when it closes.

    Make it with :meth:`make`; :meth:`place` each command's root; :meth:`close` at the
    end. Holds one descriptor (``cgroup.procs``, open for writing) while it lives.
    """

    __slots__ = ("_lock", "_procs", "path")

    def __init__(self, path: Path, procs: int) -> None:
        self.path = path
        """The cgroup's directory."""
        self._procs = procs
        self._lock = threading.Lock()
        """Held around every use of ``_procs``: a placement from a worker thread never
        writes to a descriptor number that :meth:`close` gave back (and another file took)."""

    @classmethod
    def make(cls, host_tag: str) -> CommandCgroup | None:
        """A new cgroup for one supervisor of the host ``host_tag``; ``None`` where none can be."""
        base = cgroup_base()
        if base is None:
            return None
        for _ in range(8):
            path = base / f"{CGROUP_PREFIX}{host_tag}-{next(_counter)}"
            try:
                path.mkdir()
            except FileExistsError:
                continue  # left by a host of the same tag? Never shared: take the next
            except OSError as error:
                if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                    _refused()  # and so will every later one be
                return None
            break
        else:
            return None
        try:
            if not (path / "cgroup.kill").exists():  # before Linux 5.14: no kill at once
                _refused()
                raise OSError(errno.ENOTSUP, "no cgroup.kill")
            procs = os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path, procs)

    def place(self, pid: int) -> bool:
        """Move the process ``pid`` (and the children it forks from now on) into the cgroup.

        ``False`` when it could not be (it had already exited, the kernel refused, or
        the cgroup is closed). Blocking, for milliseconds at times (the module's
        limits); any thread may call it.
        """
        with self._lock:
            if self._procs < 0:
                return False
            try:
                os.write(self._procs, b"%d" % pid)
            except OSError:
                return False
        return True

    def place_all(self, pids: Iterable[int]) -> None:
        """:meth:`place` each of ``pids``."""
        for pid in pids:
            self.place(pid)

    def populated(self) -> bool:
        """Whether a live process is still in the cgroup (a zombie does not count)."""
        return populated(self.path)

    def kill(self) -> None:
        """SIGKILL everything in the cgroup now (no wait: the kernel delivers them)."""
        kill_cgroup(self.path)

    def close(self) -> bool:
        """Kill what is left if anything is, and try to remove the cgroup once; no wait.

        ``True`` once the cgroup is gone; ``False`` means the killed are still dying:
        call :meth:`remove` until it is ``True`` (or leave the empty directory behind).
        """
        self._seal()
        if self.populated():
            self.kill()
        return self.remove()

    def close_within(self, settle: float, poll: float) -> bool:
        """:meth:`close`, then :meth:`remove` every ``poll`` seconds for up to ``settle``."""
        deadline = time.monotonic() + settle
        gone = self.close()
        while not gone and time.monotonic() < deadline:
            time.sleep(poll)
            gone = self.remove()
        return gone

    def only_holds(self, pids: Collection[int]) -> bool:
        """Take no more placements; whether nothing but ``pids`` lives in the cgroup now.

        A cgroup beneath with anyone in it counts as someone else. Lets a sandboxed
        supervisor leave its spawners to end with their sandbox, which they do without
        a kill, and remove the cgroup after them: a kill here would cost the spawners'
        ends a signal and the removal its retries while they die.
        """
        self._seal()
        try:
            members = {int(pid) for pid in (self.path / "cgroup.procs").read_bytes().split()}
        except (OSError, ValueError):
            return False
        if not members <= set(pids):
            return False
        with contextlib.suppress(OSError), os.scandir(self.path) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False) and populated(Path(entry.path)):
                    return False
        return True

    def _seal(self) -> None:
        """Close ``cgroup.procs``: :meth:`place` refuses from now on."""
        with self._lock:
            if self._procs >= 0:
                os.close(self._procs)
                self._procs = -1

    def remove(self) -> bool:
        """Remove the cgroup if nothing lives in it any more; ``True`` once it is gone."""
        return remove_cgroup(self.path)


def populated(path: Path) -> bool:
    """Whether the cgroup at ``path`` has a live process in it or in a cgroup beneath it."""
    try:
        events = (path / "cgroup.events").read_bytes()
    except OSError:
        return False
    return b"populated 1" in events


def kill_cgroup(path: Path) -> bool:
    """Write ``cgroup.kill``: SIGKILL every process in the cgroup and beneath it."""
    try:
        (path / "cgroup.kill").write_bytes(b"1")
    except OSError:
        return False
    return True


def remove_cgroup(path: Path) -> bool:
    """``rmdir`` the cgroup, and the cgroups made beneath it first; ``True`` once it is gone."""
    with contextlib.suppress(OSError), os.scandir(path) as entries:
        for entry in entries:  # the kernel gives each entry's type: no stat of the files
            if entry.is_dir(follow_symlinks=False):
                remove_cgroup(Path(entry.path))
    try:
        path.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True
