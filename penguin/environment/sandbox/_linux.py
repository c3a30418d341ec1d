"""The kernel-facing part of the sandbox on Linux: namespaces made once, a spawner inside.

How a :class:`~._policy.Layout` is enforced (docs/sandbox.md says why this way):

- **Made once per layout.** ``bwrap`` (Debian's ``bubblewrap``) builds a user namespace
  with nested user namespaces disabled, a mount namespace in which ``/`` is bound
  read-only, each writable root bound read-write over it, each protected path bound
  read-only over that, and a minimal ``/dev`` (X1.2's devices, the host's ptys, and
  ``/dev/shm`` in workspace-write), plus a new network namespace when the network is
  off, whose loopback is then taken down (X1.1: no address at all). The process it runs
  there says when it is running (only then are the namespaces final), and penguin opens
  the namespace files of that process.
- **Started by the spawner.** For an Environment that process is the spawner
  (``_spawner``), run with every capability dropped (``--cap-drop ALL``: an empty
  bounding set, even as root) and kept for the layout's life; :meth:`_Spawner.start`
  asks it to start each command (one ``vfork``+``exec`` inside, the command's stdio
  passed over the socket), and :class:`SandboxedChild` is the command's root as the
  supervisor sees it: not penguin's child, its status sent by the spawner, reaped
  only on penguin's word.
- **Entered from outside** otherwise (``penguin sandbox``, the probe, a command too
  large for one message): ``nsenter --user=… --mount=… [--net=…]
  --preserve-credentials --wdns=CWD -- CMD``, and as root ``setpriv`` drops every
  capability and locks the securebits, since root entering a user namespace would
  otherwise keep full capabilities over its mounts. For :func:`probe` and ``penguin
  sandbox`` the process inside is a holder that ends once the descriptors are open.
- A layout that changes (a ``.git`` created, a writable root that appeared) gets new
  namespaces and a new spawner at the next command start; the old ones stay until the
  sandbox closes (their commands may still run, and are reaped through them).

:func:`probe` is what the machine supports (``penguin sandbox --check``, X3.1), tried
for real once per process.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import json
import marshal
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, final

import attrs
import trio

from penguin._errors import PenguinError
from penguin._fdlimit import out_of_resources

from . import _spawner
from ._policy import DEVICES, Layout

__all__ = [
    "HostSpawner",
    "Namespaces",
    "SandboxedChild",
    "Support",
    "build_namespaces",
    "probe",
    "probed",
]

_SYS_LANDLOCK_CREATE_RULESET: Final = 444
_LANDLOCK_CREATE_RULESET_VERSION: Final = 1
_BUILD_TIMEOUT: Final = 20.0
_ANSWER_TIMEOUT: Final = 10.0
"""The longest wait for the spawner's answer to a start or a reap (it never blocks
longer than one ``vfork``+``exec``, unless the machine is frozen)."""
_CLOSE_TIMEOUT: Final = 1.0
_SPAWNER_LIMIT: Final = 128 * 1024
"""A start message larger than this (a huge environment) enters with ``nsenter``
instead: a ``SOCK_SEQPACKET`` message must fit the socket's buffer."""
_SPAWNER_ARGV: Final = (
    sys.executable,
    "-I",
    "-S",
    "-B",
    "-c",
    "import sys; sys.path.append(sys.argv[1]); import _spawner; _spawner.run(sys.argv[2:])",
    os.path.dirname(_spawner.__file__),
)
"""How the spawner runs: imported, so its cached bytecode serves where there is one (a
script is compiled at every start: 4 ms, a fifth of what the spawner's start costs)."""
_SETPRIV_ARGS: Final = (
    "--no-new-privs",
    "--bounding-set=-all",
    "--inh-caps=-all",
    "--ambient-caps=-all",
    "--securebits=+noroot,+noroot_locked,+no_setuid_fixup,+no_setuid_fixup_locked,+keep_caps_locked",
    "--",
)


@final
@attrs.frozen
class Support:
    """What this machine can enforce; ``reason`` is ``None`` when both modes work."""

    reason: str | None
    landlock_abi: int | None
    user_namespaces: bool
    network_isolation: bool
    bwrap: str | None

    def lines(self) -> list[str]:
        """``penguin sandbox --check``'s report, one fact a line."""
        abi = "unavailable" if self.landlock_abi is None else f"ABI {self.landlock_abi}"
        yes = {True: "yes", False: "no"}
        out = [
            f"platform: {sys.platform}",
            f"landlock: {abi} (not used: the mount namespace enforces the policy)",
            f"user namespaces: {yes[self.user_namespaces]}",
            f"bubblewrap: {self.bwrap or 'not installed'}",
            f"network isolation: {yes[self.network_isolation]}",
        ]
        if self.reason is None:
            out.append("read-only: supported")
            out.append("workspace-write: supported")
        else:
            out.append(f"sandbox unavailable: {self.reason}")
        return out


def landlock_abi() -> int | None:
    """The kernel's Landlock ABI version, or ``None`` (not Linux, disabled, too old)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        version = libc.syscall(
            _SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), _LANDLOCK_CREATE_RULESET_VERSION
        )
    except (OSError, AttributeError):
        return None
    return int(version) if version > 0 else None


_probe_lock = threading.Lock()
_probed: Support | None = None


def probe() -> Support:
    """What this machine supports, tried for real (blocking; once per process).

    A probe that finds the process out of descriptors (``EMFILE``), processes
    (``EAGAIN``) or memory raises that ``OSError`` and is not remembered: the next one
    tries again.
    """
    global _probed
    with _probe_lock:
        if _probed is None:
            _probed = _probe()
        return _probed


async def probed() -> Support:
    """:func:`probe` from Trio: in a worker thread the first time, at once afterwards.

    Every sandboxed session asks (twice, in a server); the answer is the process's
    since the first, so only that one is worth a thread hop.
    """
    known = _probed
    if known is not None:
        await trio.lowlevel.checkpoint()
        return known
    return await trio.to_thread.run_sync(probe)


def _probe() -> Support:
    abi = landlock_abi()
    if not sys.platform.startswith("linux"):
        return Support(f"not Linux ({sys.platform})", abi, False, False, None)
    bwrap = shutil.which("bwrap")
    version = None
    if bwrap is not None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            version = subprocess.run(
                [bwrap, "--version"], capture_output=True, text=True, timeout=10, check=False
            ).stdout.strip()
    missing = [name for name in _helpers() if shutil.which(name) is None]
    if bwrap is None:
        return Support("bubblewrap (bwrap) is not installed", abi, False, False, None)
    if missing:
        return Support(f"{' and '.join(missing)} not found", abi, False, False, version)
    layout = Layout(mode="read-only", network=False, writable=(), protected=(), shm=False)
    try:
        namespaces = build_namespaces(layout, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    except OSError as error:
        if out_of_resources(error):
            raise  # this process's state, not the machine's: nothing to remember
        reason = str(error) or "user namespaces are not available"
        return Support(reason, abi, False, False, version)
    try:
        argv = namespaces.command(("/bin/sh", "-c", "exit 7"), None, "/")
        done = subprocess.run(list(argv), capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        if out_of_resources(error):
            raise
        return Support(f"entering the namespaces failed ({error})", abi, True, False, version)
    finally:
        namespaces.close()
    if done.returncode != 7:
        text = done.stderr.decode(errors="replace").strip().splitlines()
        detail = text[-1] if text else f"exit status {done.returncode}"
        return Support(f"entering the namespaces failed ({detail})", abi, True, False, version)
    return Support(None, abi, True, True, version)


def _helpers() -> tuple[str, ...]:
    return ("nsenter", "setpriv") if os.geteuid() == 0 else ("nsenter",)


def _bwrap_args(layout: Layout, *, spawner: bool) -> list[str]:
    # The spawner lives as long as its socket: bwrap's --die-with-parent would tie it
    # to the thread that started bwrap (a worker thread's end would kill it).
    args = ["--unshare-user", "--disable-userns"]
    args += ["--cap-drop", "ALL"] if spawner else ["--die-with-parent"]
    if not layout.network:
        args.append("--unshare-net")
    if layout.mode == "off":  # network isolation alone
        return [*args, "--bind", "/", "/", "--dev-bind", "/dev", "/dev"]
    args += ["--ro-bind", "/", "/", "--tmpfs", "/dev"]
    for device in (*DEVICES, "/dev/random", "/dev/urandom", "/dev/ptmx"):
        if os.path.exists(device):
            args += ["--dev-bind", device, device]
    if os.path.isdir("/dev/pts"):
        args += ["--dev-bind", "/dev/pts", "/dev/pts"]
    if os.path.isdir("/dev/shm"):
        args += ["--bind" if layout.shm else "--ro-bind", "/dev/shm", "/dev/shm"]
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0")):
        args += ["--symlink", target, f"/dev/{name}"]
    args += ["--symlink", "/proc/self/fd/1", "/dev/stdout"]
    args += ["--symlink", "/proc/self/fd/2", "/dev/stderr"]
    args += ["--remount-ro", "/dev"]
    for root in layout.writable:
        args += ["--bind", root, root]
    for path in layout.protected:
        args += ["--ro-bind", path, path]
    return args


@final
class SandboxedChild:
    """A command the spawner started (``_spawner``): its pid, and its exit status.

    It is not penguin's child: the spawner sends its status when it exits and reaps
    it only when told to, so until :meth:`wait` returns its pid and group id stay its
    own. :meth:`wait` is what :class:`trio.Process.wait` is for a child of penguin.
    """

    def __init__(self, pid: int, reply: socket.socket) -> None:
        self.pid = pid
        self._raw = reply
        self._reply = trio.socket.from_stdlib_socket(reply)
        self.returncode: int | None = None

    async def wait(self) -> int:
        """Wait until the command exits, have it reaped, and return its exit status.

        ``-N`` when signal N ended it, as :class:`trio.Process` says; ``-SIGKILL`` when
        the spawner itself is gone (killed: its commands' statuses went with it).
        """
        if self.returncode is not None:
            await trio.lowlevel.checkpoint()
            return self.returncode
        try:
            message = await self._reply.recv(4096)
        except OSError:
            message = b""
        return self._settle(message)

    def poll(self) -> int | None:
        """The exit status if the spawner sent it (the command is reaped then), else ``None``.

        Never waits: for a caller that waits for the reply socket itself (:meth:`exit_watch`).
        """
        if self.returncode is not None:
            return self.returncode
        try:
            message = self._raw.recv(4096, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return None
        except OSError:
            message = b""
        return self._settle(message)

    def exit_watch(self) -> SandboxedChild:
        """Itself as an exit watch: its reply socket becomes readable once the command exited."""
        return self

    @property
    def fileno(self) -> int:
        """The reply socket's descriptor (the spawner writes the exit status to it)."""
        return self._raw.fileno()

    def close(self) -> None:
        """Nothing to release: the reply socket is the child's own until it is reaped."""

    def _settle(self, message: bytes) -> int:
        """Take the spawner's status ``message`` (empty: it is gone) and have the command reaped."""
        try:
            answer = json.loads(message or b"{}")
        except ValueError:
            answer = {}
        status = answer.get("status") if isinstance(answer, dict) else None
        self.returncode = status if isinstance(status, int) else -int(signal.SIGKILL)
        with contextlib.suppress(OSError):  # reaped from now on: nothing signals its group
            self._raw.send(b"reap")  # non-blocking, into an empty buffer: it never waits
        self._reply.close()
        return self.returncode


@final
class _SpawnerGone(PenguinError, OSError):
    """The spawner could not be reached; the command was not started.

    Private: the sandbox then builds new namespaces and tries once more.
    """


_open_sockets: weakref.WeakSet[_Spawner] = weakref.WeakSet()


def _close_in_child() -> None:  # pragma: no cover - runs in a forked child
    # A forked child must not keep a spawner alive once penguin is gone.
    for spawner in list(_open_sockets):
        with contextlib.suppress(OSError):
            os.close(spawner.fileno)


os.register_at_fork(after_in_child=_close_in_child)


@final
class _Spawner:
    """penguin's end of one layout's spawner: its socket and the ``bwrap`` running it."""

    def __init__(self, process: subprocess.Popen[bytes], sock: socket.socket, pid: int) -> None:
        self._process = process
        self.pid = pid
        """The spawner's own pid (the host's number: there is no PID namespace), not ``bwrap``'s."""
        self._socket = trio.socket.from_stdlib_socket(sock)
        self.fileno = sock.fileno()
        self._sending = trio.Lock()
        self.broken = False
        _open_sockets.add(self)

    async def start(
        self,
        argv: Sequence[str],
        executable: str | None,
        cwd: str,
        env: Mapping[str, str],
        stdio: tuple[int, int, int],
        tty: bool,
    ) -> SandboxedChild | None:
        """Start a command; ``None`` when its message is too large.

        Raises ``OSError`` as starting it would (``ValueError`` for an embedded NUL).

        The exchange is shielded (and bounded): once the request is sent the command
        may run, so its pid must come back to be supervised whatever happens.
        """
        request = {"argv": list(argv), "executable": executable, "cwd": cwd, "env": dict(env)}
        payload = marshal.dumps({**request, "tty": tty})  # trusted, and free to read there
        if len(payload) > _SPAWNER_LIMIT:
            await trio.lowlevel.checkpoint()
            return None
        near, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        reply = trio.socket.from_stdlib_socket(near)
        answer: object = None
        try:
            fds = array.array("i", [far.fileno(), *stdio])
            with trio.CancelScope(shield=True), trio.move_on_after(_ANSWER_TIMEOUT):
                try:
                    async with self._sending:  # one waiter per fd: Trio allows no more
                        await self._socket.sendmsg(
                            [payload], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)]
                        )
                except OSError as error:  # nothing was started
                    self.broken = True
                    raise _SpawnerGone(f"the sandbox's spawner is gone ({error})") from error
                far.close()
                answer = json.loads(await reply.recv(4096) or b"null")
        except BaseException:
            reply.close()
            raise
        finally:
            far.close()
        if not isinstance(answer, dict) or not isinstance(answer.get("pid"), int):
            reply.close()
            if isinstance(answer, dict) and isinstance(answer.get("error"), str):
                code, filename = answer.get("errno"), answer.get("filename")
                if isinstance(code, int) and code:
                    raise OSError(code, answer["error"], *([filename] if filename else []))
                if answer.get("value"):  # what Popen raises for an embedded NUL
                    raise ValueError(answer["error"])
                raise OSError(answer["error"])
            self.broken = True
            raise OSError("the sandbox's spawner did not answer")
        return SandboxedChild(answer["pid"], near)

    def close(self) -> None:
        """End the spawner (end of file on its socket) and reap ``bwrap``, bounded."""
        self.hang_up()
        self.reap()

    def hang_up(self) -> None:
        """Close penguin's end of the socket: the spawner then ends (on the loop's thread)."""
        _open_sockets.discard(self)
        self._socket.close()

    def reap(self) -> None:
        """Wait for ``bwrap`` to end after :meth:`hang_up`, bounded (blocking: a worker's)."""
        try:
            self._process.wait(_CLOSE_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


@final
class HostSpawner:
    """A spawner outside any namespace: commands start from it, in the host's view.

    For the command supervisor's cgroup without a sandbox (``supervisor/_cgroup``):
    placed once, before its first start, it makes every command it starts a member
    from its first instruction, which placing each command after it started cannot
    promise (a command that forks at once leaves first). A :class:`Launcher
    <penguin.environment.supervisor._process.Launcher>`: a start it cannot make (its
    message is too large, or it is gone) is ``None``, and penguin starts the command
    itself.
    """

    def __init__(self, spawner: _Spawner) -> None:
        self._spawner = spawner
        self.pid = spawner.pid
        """The spawner's pid (to place it before its first start)."""

    @classmethod
    def start_new(cls) -> HostSpawner:
        """Start one (blocking: a worker thread's); raise ``OSError`` when it cannot start."""
        near, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            process = subprocess.Popen(
                [*_SPAWNER_ARGV, str(far.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(far.fileno(),),
                start_new_session=True,
            )
        except BaseException:
            near.close()
            raise
        finally:
            far.close()
        return cls(_Spawner(process, near, process.pid))

    async def start(
        self,
        argv: Sequence[str],
        executable: str | None,
        cwd: Path,
        env: Mapping[str, str],
        stdio: tuple[int, int, int],
        tty: bool,
    ) -> SandboxedChild | None:
        """Start ``argv`` as a session leader on ``stdio``; ``None``: start it yourself."""
        if self._spawner.broken:
            await trio.lowlevel.checkpoint()
            return None
        try:
            return await self._spawner.start(argv, executable, str(cwd), env, stdio, tty)
        except _SpawnerGone:
            return None

    def hang_up(self) -> None:
        """End the spawner (end of file on its socket); on the loop's thread."""
        self._spawner.hang_up()

    def close(self) -> None:
        """:meth:`hang_up` and :meth:`reap`, for one never used (blocking: a worker's)."""
        self._spawner.close()

    def reap(self) -> None:
        """Wait, bounded, for it to end after :meth:`hang_up` (blocking: a worker's)."""
        self._spawner.reap()


@final
class Namespaces:
    """Open descriptors of one layout's namespaces, and how a command enters them."""

    def __init__(
        self, layout: Layout, fds: Mapping[str, int], spawner: _Spawner | None = None
    ) -> None:
        self.layout = layout
        self._fds = dict(fds)
        self.spawner = spawner
        """The process inside that starts commands (``None``: enter with ``nsenter``)."""
        pid = os.getpid()
        self._prefix: tuple[str, ...] = (
            shutil.which("nsenter") or "nsenter",  # absolute: no PATH search per command
            *(f"--{kind}=/proc/{pid}/fd/{fd}" for kind, fd in self._fds.items()),
            "--preserve-credentials",
        )
        setpriv = shutil.which("setpriv") or "setpriv"
        self._setpriv: tuple[str, ...] = (setpriv, *_SETPRIV_ARGS) if os.geteuid() == 0 else ()

    @property
    def key(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The layout's key (what commands sharing these namespaces must agree on)."""
        return self.layout.key

    @property
    def usable(self) -> bool:
        """Whether commands can still start here (a spawner that failed cannot)."""
        return self.spawner is None or not self.spawner.broken

    def command(self, argv: Sequence[str], executable: str | None, cwd: str) -> tuple[str, ...]:
        """``argv`` (run as ``executable`` when given) entering these namespaces in ``cwd``."""
        program = executable if executable is not None else argv[0]
        return (*self._prefix, f"--wdns={cwd}", "--", *self._setpriv, program, *argv[1:])

    def close(self) -> None:
        """End the spawner, close the descriptors (the namespaces end with their last process)."""
        self.hang_up()
        self.reap()

    def hang_up(self) -> None:
        """Close the descriptors and the spawner's socket; :meth:`reap` waits for it to end.

        Never blocks; on the event loop's thread when a spawner runs (its socket is Trio's).
        """
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.spawner is not None:
            self.spawner.hang_up()

    def reap(self) -> None:
        """Wait, bounded, for the spawner's ``bwrap`` to end (blocking: a worker thread's)."""
        spawner, self.spawner = self.spawner, None
        if spawner is not None:
            spawner.reap()


def build_namespaces(
    layout: Layout, env: Mapping[str, str], *, spawner: bool = False
) -> Namespaces:
    """Make the namespaces of ``layout`` with one ``bwrap`` (blocking); raise ``OSError``.

    With ``spawner``, ``bwrap`` runs the spawner (``_spawner``) and stays; without, a
    holder that ends once the descriptors are open.
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise OSError("bubblewrap (bwrap) is not installed")
    info_read, info_write = os.pipe()
    hold_read, hold_write = os.pipe()
    ready_read, ready_write = os.pipe()
    near: socket.socket | None = None
    far: socket.socket | None = None
    if spawner:
        near, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        inner = [*_SPAWNER_ARGV, str(far.fileno())]
        passed: tuple[int, ...] = (info_write, far.fileno())
    else:
        inner = ["/bin/sh", "-c", "echo ready; exec >/dev/null; read _ignored"]
        passed = (info_write,)
    try:
        process = subprocess.Popen(
            [
                bwrap,
                *_bwrap_args(layout, spawner=spawner),
                "--info-fd",
                str(info_write),
                "--",
                *inner,
            ],
            stdin=hold_read,
            stdout=ready_write,  # the process inside says "ready" once bwrap is done
            stderr=subprocess.PIPE,
            pass_fds=passed,
            env=dict(env),
            start_new_session=True,
        )
    except BaseException:
        for fd in (info_read, info_write, hold_read, hold_write, ready_read, ready_write):
            os.close(fd)
        for sock in (near, far):
            if sock is not None:
                sock.close()
        raise
    os.close(info_write)
    os.close(hold_read)
    os.close(ready_write)
    if far is not None:
        far.close()
    fds: dict[str, int] = {}
    done = False
    try:
        child = _child_pid(info_read)
        if child is not None and not _ready(ready_read):
            child = None
        if child is None:
            process.wait(_BUILD_TIMEOUT)
            assert process.stderr is not None
            detail = process.stderr.read().decode(errors="replace").strip()
            raise OSError(_explain(detail))
        kinds = ["user", "mnt"] if layout.network else ["user", "mnt", "net"]
        for kind in kinds:
            fds["mount" if kind == "mnt" else kind] = os.open(
                f"/proc/{child}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC
            )
        if not layout.network:
            _loopback_down(fds["user"], fds["net"], env)
        done = True
    except BaseException:
        for fd in fds.values():
            os.close(fd)
        raise
    finally:
        os.close(info_read)
        os.close(ready_read)
        os.close(hold_write)  # the holder's read ends: it exits
        if near is None or not done:
            if near is not None:
                near.close()  # the spawner's socket ends: it exits
            try:
                process.wait(_BUILD_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stderr is not None:
                process.stderr.close()
    if near is not None:
        if process.stderr is not None:  # read only while bwrap may fail; unread later
            process.stderr.close()
        return Namespaces(layout, fds, _Spawner(process, near, child))
    return Namespaces(layout, fds)


def _ready(fd: int) -> bool:
    """Wait for the process inside to say it runs; ``False`` when bwrap failed first.

    Only then are its namespaces final: bwrap reports the child's pid before it has
    set the child up (the nested user namespace of ``--disable-userns`` comes later).
    """
    data = b""
    deadline = time.monotonic() + _BUILD_TIMEOUT
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return False
        chunk = os.read(fd, 64)
        if not chunk:
            return False
        data += chunk
    return data == b"ready\n"


def _loopback_down(user_fd: int, net_fd: int, env: Mapping[str, str]) -> None:
    """Take the new network namespace's ``lo`` down (X1.1: not even 127.0.0.1)."""
    argv = [*_SPAWNER_ARGV, "loopback-down", str(user_fd), str(net_fd)]
    try:
        done = subprocess.run(
            argv,
            pass_fds=(user_fd, net_fd),
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_BUILD_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise OSError("taking the sandbox's loopback down timed out") from error
    if done.returncode != 0:
        text = done.stderr.decode(errors="replace").strip().splitlines()
        raise OSError(
            f"taking the sandbox's loopback down failed ({text[-1] if text else done.returncode})"
        )


def _child_pid(fd: int) -> int | None:
    """The holder's pid from bwrap's ``--info-fd`` JSON; ``None`` when bwrap failed."""
    data = b""
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        try:
            info = json.loads(data)
        except ValueError:
            continue
        pid = info.get("child-pid") if isinstance(info, dict) else None
        return pid if isinstance(pid, int) and pid > 0 else None
    return None


def _explain(detail: str) -> str:
    last = detail.splitlines()[-1] if detail else "bwrap failed"
    last = last.removeprefix("bwrap: ")
    if "ermission" in last or "No space left" in last:
        return f"user namespaces are not available ({last})"
    return last
