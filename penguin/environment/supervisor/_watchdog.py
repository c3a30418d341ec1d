"""The host's watchdog: what a host's commands started dies with the host, however it dies.

Leaving ``Environment.open`` and the command supervisor's ``atexit`` hook cover every
exit that still runs Python code. SIGKILL, the OOM killer and ``os._exit`` run none;
for those, one small process per host watches from outside. This module is both ends:
the host side (:class:`HostWatchdog`, imported by the supervisor) and the watchdog
itself (:func:`main`, run as a script by path, so it imports only the standard library
and starts in milliseconds; psutil only where there is no ``/proc``).

How it works, and what keeps it safe:

- **The link is a pipe** whose write end only the host holds: created close-on-exec
  (so no command, nor anything else the host executes, inherits it), and closed in the
  child of every ``os.fork`` (so a forked child neither keeps the host's death from
  showing nor makes its own death count). The watchdog holds the read end as its
  standard input and waits for end of file, which the kernel delivers when the host
  is gone, whatever killed it. Nothing crosses the pipe while the host lives: a
  command costs no message, and the only per-spawn cost in the host is a
  ``waitpid(WNOHANG)`` that tells whether the watchdog still runs.
- **The marker.** Every command's ``PENGUIN_OWNER`` begins with this host's tag
  (:meth:`HostWatchdog.tag`: random, new in every process, a forked child included);
  on end of file the watchdog SIGKILLs every live process whose marker begins with
  ``<host tag>/`` — another host's, an unmarked one or its own never — and sweeps
  again until a read of the process table finds nothing new (a killed process cannot
  fork any more). Each one is signalled by identity: its start time is read, a pidfd
  is opened, the start time is checked again, and the signal goes through the pidfd,
  so a reused pid is never hit. Processes that started before the host cannot carry
  its marker, so their environments are not read.
- **When.** The host starts its watchdog before its first command (so a host killed
  while spawning is covered: the command's ``exec`` closes the child's copy of the
  write end only once the marker is in place), and starts a new one if it finds the
  old one gone. It stays idle for the rest of the host's life, even when every
  Environment is closed: one idle process per host, instead of an interpreter start
  per Environment. At a normal exit it sweeps too (finding nothing), then exits.
- **Out of harm's way.** The watchdog runs in its own session (no terminal's Ctrl-C
  or hang-up, no ``killpg`` of the host's group reaches it), ignores SIGINT, SIGHUP
  and SIGTERM (it ends with its host, and only then), holds ``/dev/null`` as output
  (a reader of the host's output sees end of file when the host dies, not when the
  watchdog does) and ``/`` as its directory, carries no owner marker (an enclosing
  penguin that runs this host as a command does not kill it before its sweep), and
  exits once its sweep is done and what it killed is gone.
- **The host's cgroups.** Where the host makes its commands' cgroups (``_cgroup``), it
  names their directory on the watchdog's command line; after its sweep the watchdog
  writes ``cgroup.kill`` of each ``penguin-<host tag>-*`` there and removes them, so a
  process that dropped its marker still ends.

The state of the host side is process-wide by nature (one watchdog per process), so it
is one module-level :class:`HostWatchdog`; it resets itself in a forked child.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import resource
import signal
import stat
import sys
import threading
import time
from collections.abc import Iterable
from typing import Final, final

__all__ = [
    "HOST_TAG",
    "HostWatchdog",
    "end_cgroups",
    "host_watchdog",
    "kill_process",
    "main",
    "sweep",
]

OWNER_VARIABLE: Final = "PENGUIN_OWNER"
"""As ``_process.OWNER_VARIABLE`` (repeated: this module imports nothing of penguin)."""

HOST_TAG: Final = re.compile(r"host-[0-9a-f]{12}")
"""What a host tag looks like; the watchdog refuses to sweep for anything else."""

SWEEP_ROUNDS: Final = 64
"""The most reads of the table after end of file; each one kills only what is new."""

GONE_DEADLINE: Final = 1.0
"""Seconds the watchdog waits for what it killed to leave the table before it exits."""

_ALL_FDS: Final = 2**31 - 1
"""Past the highest descriptor number there can be (``os.closerange``'s end)."""

_PROCFS: Final = sys.platform.startswith("linux") and os.path.isdir("/proc/self")
_HAS_PIDFD: Final = hasattr(os, "pidfd_open") and hasattr(signal, "pidfd_send_signal")
_OWNER_KEY: Final = b"\0" + OWNER_VARIABLE.encode() + b"="


# --------------------------------------------------------------------------- host side


@final
class HostWatchdog:
    """The host's end of the link: its tag, the pipe's write end, its watchdog's pid."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._owner_pid = os.getpid()
        self._tag = f"host-{os.urandom(6).hex()}"
        self._write_end = -1
        self._watchdog_pid = 0

    def tag(self) -> str:
        """The host's part of every owner marker (``host-`` and 12 hex digits)."""
        self._forget_if_forked()
        return self._tag

    @property
    def pid(self) -> int:
        """The running watchdog's process id, or 0 when none was started."""
        self._forget_if_forked()
        return self._watchdog_pid

    def running(self) -> bool:
        """Whether this host's watchdog runs (cheap: no read of any table, no message)."""
        self._forget_if_forked()
        pid = self._watchdog_pid
        if not pid:
            return False
        try:
            reaped, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            reaped = pid  # someone else reaped it
        return reaped != pid

    def start(self, cgroups: str = "") -> None:
        """Make sure this host's watchdog runs (blocking; run it in a thread).

        ``cgroups`` is the directory where the host makes its commands' cgroups
        (``_cgroup.cgroup_base``; empty: none), which the watchdog kills and removes
        after its sweep. Raises ``OSError`` when it cannot be started; the commands then
        run without it.
        """
        with self._lock:
            if self.running():
                return
            self._close_link()
            argv = _watchdog_argv(self._tag, _own_start_time(), cgroups)
            env = {k: v for k, v in os.environ.items() if k != OWNER_VARIABLE}
            read_end, write_end = os.pipe()  # both close-on-exec
            read_end, write_end = _above_stdio(read_end), _above_stdio(write_end)
            try:
                actions = [
                    (os.POSIX_SPAWN_DUP2, read_end, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                    *((os.POSIX_SPAWN_CLOSE, fd) for fd in _inheritable_fds()),
                ]
                pid = os.posix_spawn(argv[0], argv, env, file_actions=actions, setsid=True)
            except NotImplementedError as error:  # no POSIX_SPAWN_SETSID on this libc
                os.close(write_end)
                raise OSError(f"cannot start a process in a new session: {error}") from error
            except BaseException:
                os.close(write_end)
                raise
            finally:
                os.close(read_end)
            self._watchdog_pid, self._write_end = pid, write_end

    def _close_link(self) -> None:
        if self._write_end >= 0:
            os.close(self._write_end)
        self._write_end, self._watchdog_pid = -1, 0

    def _forget_if_forked(self) -> None:
        if self._owner_pid != os.getpid():
            self._after_fork_in_child()

    def _after_fork_in_child(self) -> None:
        # The parent's watchdog watches the parent: this child neither holds its link
        # nor shares its tag. Not under the lock: another thread may have held it
        # when the fork happened, and that thread does not exist here.
        if self._write_end >= 0:
            with contextlib.suppress(OSError):
                os.close(self._write_end)
        self._reset()


_HOST: Final = HostWatchdog()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_HOST._after_fork_in_child)


def host_watchdog() -> HostWatchdog:
    """The :class:`HostWatchdog` of the calling process."""
    return _HOST


def _watchdog_argv(tag: str, newer_than: str, cgroups: str = "") -> list[str]:
    if not sys.executable or getattr(sys, "frozen", False):
        raise OSError("no Python interpreter to run the watchdog with (sys.executable)")
    # -I: no user site, no PYTHON* variables, no script directory on the path. -S: no
    # site at all where psutil is not needed, for the fastest start.
    flags = ["-I", "-S"] if _PROCFS else ["-I"]
    return [sys.executable, *flags, os.path.abspath(__file__), tag, newer_than, cgroups]


def _own_start_time() -> str:
    """The start time of the calling process, as the watchdog's table reads give it."""
    if _PROCFS:
        return str(_parse_stat(_read_stat("self"))[1])
    import psutil  # only where there is no /proc

    return repr(psutil.Process().create_time())


def _above_stdio(fd: int) -> int:
    """``fd``, or a close-on-exec copy of it above 2.

    A host whose standard streams are closed gets a new pipe on them, and the watchdog
    must find the link on its standard input and nothing of it on its output.
    """
    if fd > 2:
        return fd
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    finally:
        os.close(fd)


def _inheritable_fds() -> list[int]:
    """Descriptors above 2 that a spawned program would inherit, below the open-file limit.

    None of penguin's (they are close-on-exec): whoever started the host passed them.
    They are closed in the watchdog, so it holds nothing of theirs open. One at or
    above the soft ``RLIMIT_NOFILE`` (a shell that lowered ``ulimit -n`` after it got
    it) is left out: ``posix_spawn`` refuses to close it (``EBADF``: no watchdog at
    all), so the watchdog closes it itself as it starts (:func:`main`).
    """
    try:
        names = os.listdir("/proc/self/fd" if _PROCFS else "/dev/fd")
    except OSError:
        return []
    ceiling = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    found = []
    for name in names:
        fd = int(name)
        if fd > 2 and (ceiling == resource.RLIM_INFINITY or fd < ceiling):
            try:
                if os.get_inheritable(fd):
                    found.append(fd)
            except OSError:
                continue  # the descriptor listdir itself used, now closed
    return found


# --------------------------------------------------------------------------- the table


def _read_stat(pid: int | str) -> bytes:
    fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def _parse_stat(data: bytes) -> tuple[bool, int]:
    """``(zombie, starttime)`` from ``/proc/<pid>/stat``."""
    fields = data[data.rfind(b")") + 2 :].split()
    return fields[0] in (b"Z", b"X", b"x"), int(fields[19])


def _owner_in(environ: bytes) -> bytes | None:
    at = (b"\0" + environ).find(_OWNER_KEY)
    if at < 0:
        return None
    start = at + len(_OWNER_KEY) - 1
    end = environ.find(b"\0", start)
    return environ[start : end if end >= 0 else len(environ)]


Identity = tuple[int, float]
"""``(pid, start time)``: a process, never a pid alone."""


def _marked_procfs(prefix: bytes, newer_than: float) -> list[Identity]:
    me = os.getpid()
    found: list[Identity] = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            zombie, started = _parse_stat(_read_stat(name))
            if zombie or started < newer_than:
                continue
            fd = os.open(f"/proc/{name}/environ", os.O_RDONLY | os.O_CLOEXEC)
            try:
                chunks = []
                while chunk := os.read(fd, 65536):
                    chunks.append(chunk)
            finally:
                os.close(fd)
        except (OSError, ValueError, IndexError):
            continue  # gone, or not ours to read
        owner = _owner_in(b"".join(chunks))
        if owner is not None and owner.startswith(prefix):
            found.append((int(name), started))
    return found


def _marked_psutil(prefix: bytes, newer_than: float) -> list[Identity]:
    import psutil  # only where there is no /proc

    found: list[Identity] = []
    for proc in psutil.process_iter(["create_time", "status"]):
        info = proc.info
        started = info["create_time"]
        if started is None or started < newer_than or info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            owner = proc.environ().get(OWNER_VARIABLE)
        except (psutil.Error, OSError):
            continue
        if owner is not None and os.fsencode(owner).startswith(prefix):
            found.append((proc.pid, float(started)))
    return found


def _marked(prefix: bytes, newer_than: float) -> list[Identity]:
    return (_marked_procfs if _PROCFS else _marked_psutil)(prefix, newer_than)


def _alive(identity: Identity) -> bool:
    pid, started = identity
    if _PROCFS:
        try:
            zombie, now = _parse_stat(_read_stat(pid))
        except (OSError, ValueError, IndexError):
            return False
        return now == started and not zombie
    import psutil

    try:
        proc = psutil.Process(pid)
        return proc.create_time() == started and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def kill_process(identity: Identity) -> bool:
    """SIGKILL the process ``identity`` names, and no other; ``False`` if it is gone."""
    pid, started = identity
    if not _PROCFS:
        import psutil

        try:
            proc = psutil.Process(pid)
            if proc.create_time() != started:
                return False
            proc.kill()  # psutil checks the identity once more
        except psutil.Error:
            return False
        return True
    pidfd = -1
    if _HAS_PIDFD:
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            return False
        except OSError:
            pidfd = -1  # a kernel without pidfds: the start-time check alone
    try:
        # Checked after the pidfd is open, the start time proves the pidfd holds the
        # process that was seen, and a pidfd cannot be redirected to a newer one.
        try:
            zombie, now = _parse_stat(_read_stat(pid))
        except (OSError, ValueError, IndexError):
            return False
        if now != started or zombie:
            return False
        if pidfd >= 0:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        if pidfd >= 0:
            os.close(pidfd)
    return True


def sweep(tag: str, newer_than: float) -> list[Identity]:
    """SIGKILL every live process whose marker begins with ``<tag>/``; return them.

    Reads the table again after every round, until one finds nothing new.
    """
    if not HOST_TAG.fullmatch(tag):
        raise ValueError(f"not a host tag: {tag!r}")
    prefix = f"{tag}/".encode()
    killed: dict[Identity, None] = {}
    for _ in range(SWEEP_ROUNDS):
        fresh = [i for i in _marked(prefix, newer_than) if i not in killed]
        if not fresh:
            break
        for identity in fresh:
            killed[identity] = None
            kill_process(identity)
    return list(killed)


def end_cgroups(base: str, tag: str, deadline: float) -> list[str]:
    """Kill what lives in the host's cgroups (``penguin-<tag>-*`` in ``base``), remove them.

    Returns the names of those it could not remove by ``deadline`` (the killed were
    still dying). ``_cgroup`` is the host's side; this is the same, in ``os`` alone.
    """
    if not HOST_TAG.fullmatch(tag):
        raise ValueError(f"not a host tag: {tag!r}")
    prefix = f"penguin-{tag}-"
    try:
        left = [name for name in os.listdir(base) if name.startswith(prefix)]
    except OSError:
        return []
    for name in left:
        with contextlib.suppress(OSError), open(os.path.join(base, name, "cgroup.kill"), "wb") as f:
            f.write(b"1")
    while True:
        left = [name for name in left if not _rmdir_tree(os.path.join(base, name))]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.005)


def _rmdir_tree(top: str) -> bool:
    """``rmdir`` a cgroup after the ones beneath it; whether it is gone."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(top):
            if entry.is_dir(follow_symlinks=False):
                _rmdir_tree(entry.path)
    try:
        os.rmdir(top)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _wait_gone(identities: Iterable[Identity], deadline: float) -> None:
    left = list(identities)
    while left and time.monotonic() < deadline:
        left = [i for i in left if _alive(i)]
        if left:
            time.sleep(0.005)


# --------------------------------------------------------------------------- watchdog side


def _wait_for_host() -> bool:
    """Block until the host is gone; ``False`` if standard input is no pipe to watch."""
    try:
        if not stat.S_ISFIFO(os.fstat(0).st_mode):
            return False
        while os.read(0, 64):
            pass  # the host never writes; should anything arrive, keep waiting
    except OSError:
        return False
    return True


def main(argv: list[str]) -> int:
    """The watchdog: ``_watchdog.py HOST_TAG NEWER_THAN [CGROUPS]``, the link on standard input."""
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    if len(argv) not in (3, 4) or not HOST_TAG.fullmatch(argv[1]):
        return 2
    try:
        newer_than = float(argv[2])
    except ValueError:
        return 2
    os.chdir("/")
    os.closerange(3, _ALL_FDS)  # what the spawn could not close (see _inheritable_fds)
    if not _wait_for_host():
        return 2  # nothing to watch: never sweep on a guess
    killed = sweep(argv[1], newer_than)
    deadline = time.monotonic() + GONE_DEADLINE
    if len(argv) == 4 and argv[3]:  # what escaped the sweep ends with its cgroup
        end_cgroups(argv[3], argv[1], deadline)
    _wait_gone(killed, deadline)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
