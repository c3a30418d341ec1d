"""The spawner: one small process inside a layout's namespaces that starts its commands.

``bwrap`` runs this module (``python -I -S -B -c "…import _spawner; _spawner.run(…)"
FOLDER FD``: imported, so its cached bytecode serves) as the only process of the
namespaces it builds, with every capability dropped (``--cap-drop ALL``: an empty
bounding set, so nothing it starts can regain one, not even as root) and
``no_new_privs``. A command start then costs one ``vfork``+``exec`` here instead of
the ``nsenter`` (and, as root, ``setpriv``) ``exec`` hops of entering from outside.

It runs the standard library only (``-S``: no site-packages), and of it only modules
written in C but for ``os``: its start-up is most of a sandbox's CPU, and ``json``,
``subprocess``, ``selectors``, ``socket`` and ``typing`` (through ``re`` and ``enum``)
made it 35 ms where it is 15 now. The protocol, over the ``SOCK_SEQPACKET`` socket
``FD`` (each message whole):

- a **start** message is ``{"argv", "executable", "cwd", "env", "tty"}`` in ``marshal``
  (penguin writes it; the interpreter is the same one) with
  four descriptors: a fresh reply socket, then the command's stdin, stdout and stderr.
  The command starts as the leader of a new session (and, for a tty, takes the pty on
  its stdin as its controlling terminal); the reply socket gets ``{"pid": N}`` or
  ``{"errno": E, "error": TEXT, "filename": NAME}``: what ``subprocess.Popen`` would
  have raised. Replies are JSON, which penguin reads trusting nothing in them.
- when the command exits (its pidfd, then ``waitid(WNOWAIT)``), the reply socket gets
  ``{"status": S}`` (``-N`` for signal N) and the command stays unreaped until penguin
  answers ``reap``: until then its pid and group id cannot name another process (the
  rule of ``supervisor/_process``; a zombie is never signalled nor counted as alive,
  so the moment of the reaping itself does not matter). A reply socket that closes
  first, or a pid reply that cannot be delivered, makes the command an orphan: its
  group is sent SIGKILL in the latter case, and orphans are reaped as they exit.
- end of file on ``FD`` (penguin closed the sandbox, or died) ends the spawner.

The same module, run with ``loopback-down USER_FD NET_FD`` for ``FD`` (from outside, once
per network-off layout), takes the network namespace's loopback down, so a command
there reaches no address at all, not even its own ``127.0.0.1`` (spec X1.1): it joins
the user namespace (gaining its capabilities, in this process only, until it exits)
and then the network namespace, removes ``lo``'s address and clears its ``IFF_UP``.

Without a sandbox, where the command supervisor has a cgroup (``supervisor/_cgroup``),
penguin runs this module directly, outside any namespace and with its own privileges
(``_linux.HostSpawner``): placed in the cgroup before its first start, it makes every
command a member from its first instruction.

What it does not own: which layout it serves (a new layout gets a new ``bwrap`` and a
new spawner), ending the commands' process trees (the supervisor does, by group, tree
and marker, as for any command), the policy itself.
"""

from __future__ import annotations

import _socket
import array
import errno
import fcntl
import marshal
import os
import select
import sys
import termios

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from typing import final
else:

    def final(cls: type) -> type:  # typing costs 2 ms to import; the decorator is for mypy
        return cls


MAX_MESSAGE = 1 << 20
"""The largest start message read (argv and environment); penguin sends larger ones
through ``nsenter`` instead."""
_FDS = 4
_signal = __import__("_signal")  # signal's C half: the signal module imports enum
_SIGKILL: int = _signal.SIGKILL
_DEFAULT_SIGNALS: tuple[int, int] = (_signal.SIGPIPE, _signal.SIGXFSZ)
"""What ``subprocess``'s ``restore_signals`` puts back to their default in a command
(Python ignores both in itself, and so in this process)."""
_NOT_THERE = (errno.ENOENT, errno.ENOTDIR)  # the next directory of PATH is tried


def _claim_tty() -> None:  # runs in the child, between fork and exec
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


_SHORT = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _quoted(text: str) -> str:
    """``text`` as a JSON string, as ``json.dumps`` writes it (ASCII only)."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char == '"' or char == "\\":
            out.append("\\" + char)
        elif char in _SHORT:
            out.append(_SHORT[char])
        elif 0x20 <= code < 0x7F:
            out.append(char)
        elif code > 0xFFFF:
            code -= 0x10000
            out.append(f"\\u{0xD800 | code >> 10:04x}\\u{0xDC00 | code & 0x3FF:04x}")
        else:
            out.append(f"\\u{code:04x}")
    out.append('"')
    return "".join(out)


def encoded(value: dict[str, int | str | None]) -> bytes:
    """A reply as JSON text (penguin reads replies with ``json``: it trusts no more).

    Written by hand: ``json`` (through ``re`` and ``enum``) was a fifth of this
    process's start-up, and a reply holds only ints, strings and ``null``.
    """
    items = []
    for key, item in value.items():
        if item is None:
            text = "null"
        elif isinstance(item, bool):
            text = "true" if item else "false"
        elif isinstance(item, int):
            text = str(item)
        else:
            text = _quoted(item)
        items.append(f"{_quoted(key)}: {text}")
    return ("{" + ", ".join(items) + "}").encode()


def _receive(main: _socket.socket) -> tuple[bytes, list[int]] | None:
    """One start message and its descriptors (close-on-exec); ``None`` at end of file."""
    space = _socket.CMSG_SPACE(_FDS * array.array("i").itemsize)
    data, ancillary, flags, _ = main.recvmsg(MAX_MESSAGE, space, _socket.MSG_CMSG_CLOEXEC)
    fds: list[int] = []
    for level, kind, payload in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            received = array.array("i")
            received.frombytes(payload[: len(payload) - len(payload) % received.itemsize])
            fds.extend(received)
    if not data and not fds:
        return None
    if flags & (_socket.MSG_TRUNC | _socket.MSG_CTRUNC):
        data = b""  # answered as an error below
    return data, fds


def _candidates(executable: str, env: dict[str, str]) -> list[str]:
    """Where ``subprocess`` looks for ``executable``: as given, or along the env's PATH."""
    if os.path.dirname(executable):
        return [executable]
    return [os.path.join(folder, executable) for folder in os.get_exec_path(env)]


def _spawn(request: dict[str, object], stdio: list[int]) -> int:
    """Start the command as ``subprocess.Popen`` would (the same errors); its pid.

    ``os.posix_spawn`` (a ``vfork`` and ``exec``) in a new session, the stdio given,
    ``SIGPIPE`` and ``SIGXFSZ`` at their default, the directory changed here first
    (this process is single-threaded and keeps no directory of its own). Nothing else
    is inherited: every other descriptor of this process is close-on-exec. One
    difference from ``Popen``'s child: glibc's ``posix_spawn`` leaves its two internal
    signals (32 and 33, below ``SIGRTMIN``) ignored, which a program of glibc's takes
    back when it needs them (a command sent one by number is not ended by it).
    """
    argv, env, cwd, executable = (request[key] for key in ("argv", "env", "cwd", "executable"))
    if not (
        isinstance(argv, list)
        and argv
        and all(isinstance(arg, str) for arg in argv)
        and isinstance(env, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        and isinstance(cwd, str)
        and (executable is None or isinstance(executable, str))
    ):
        raise LookupError("argv, env, cwd or executable of the wrong type")
    if executable is None:
        executable = argv[0]
    for key in env:  # the checks Popen makes before it forks, in its order
        if "=" in key:
            raise ValueError("illegal environment variable name")
    for text in (*argv, executable, cwd, *env, *env.values()):
        if "\0" in text:
            raise ValueError("embedded null byte")
    os.chdir(cwd)  # raises as Popen does for a cwd that cannot be entered (filename: cwd)
    actions = [(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(stdio)]
    first: int | None = None
    last = 0
    for path in _candidates(executable, env):
        try:
            return os.posix_spawn(
                path,
                argv,
                env,
                file_actions=actions,
                setsid=True,
                setsigdef=_DEFAULT_SIGNALS,
            )
        except OSError as error:  # as Popen's child: the first error that is not ENOENT
            last = error.errno or 0
            if first is None and last not in _NOT_THERE:
                first = last
    code = first or last
    raise OSError(code, os.strerror(code), executable)


def _start(data: bytes, stdio: list[int]) -> tuple[int, subprocess.Popen[bytes] | None]:
    """Start a command: its pid, and its ``Popen`` for a tty (``None``: reaped by pid).

    A request that cannot be read, or misses a field, raises ``LookupError`` (this
    process defines no exception class: penguin's all derive from ``PenguinError``,
    which it cannot import).
    """
    try:
        request = marshal.loads(data)
    except (EOFError, ValueError, TypeError) as error:  # cut short, or not marshal's
        raise LookupError(repr(error)) from None
    if not isinstance(request, dict):
        raise LookupError("not a mapping")
    if not request.get("tty"):
        return _spawn(request, stdio), None
    import subprocess  # only for a tty: its child claims the terminal between fork and exec

    process = subprocess.Popen(
        request["argv"],
        executable=request["executable"],
        cwd=request["cwd"],
        env=request["env"],
        stdin=stdio[0],
        stdout=stdio[1],
        stderr=stdio[2],
        start_new_session=True,
        preexec_fn=_claim_tty,
    )
    return process.pid, process


def _send(sock: _socket.socket, value: dict[str, int | str | None]) -> bool:
    try:
        sock.send(encoded(value))
    except OSError:
        return False
    return True


@final
class _Child:
    """One started command: its pid, the reply socket, and a pidfd until it exits."""

    def __init__(
        self,
        pid: int,
        process: subprocess.Popen[bytes] | None,
        reply: _socket.socket,
        pidfd: int,
    ) -> None:
        self.pid = pid
        self.process = process
        """Kept until reaped (a tty's command): a ``Popen`` dropped unreaped is reaped
        by ``subprocess`` at the next start, before penguin says ``reap``."""
        self.reply: _socket.socket | None = reply
        self.pidfd: int | None = pidfd

    def reap(self) -> None:
        _reap(self.pid, self.process)


def _reap(pid: int, process: subprocess.Popen[bytes] | None) -> None:
    if process is not None:
        process.wait()
    else:
        os.waitpid(pid, 0)


@final
class _Loop:
    """The descriptors watched: the main socket, and each child's pidfd and reply."""

    def __init__(self) -> None:
        self.poll = select.epoll()
        self.exits: dict[int, _Child] = {}
        self.replies: dict[int, _Child] = {}

    def watch_exit(self, child: _Child) -> None:
        assert child.pidfd is not None
        self.poll.register(child.pidfd, select.EPOLLIN)
        self.exits[child.pidfd] = child

    def watch_reply(self, child: _Child) -> None:
        assert child.reply is not None
        self.poll.register(child.reply.fileno(), select.EPOLLIN)
        self.replies[child.reply.fileno()] = child

    def forget(self, fd: int) -> None:
        self.poll.unregister(fd)
        self.exits.pop(fd, None)
        self.replies.pop(fd, None)


def _close_inherited(keep: int) -> None:
    """Close what ``bwrap`` left open beyond stdio and ``keep``; stdio is always open."""
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 20)
    for fd in (0, 1, 2):  # a descriptor received must never land on stdio
        try:
            fcntl.fcntl(fd, fcntl.F_GETFD)
        except OSError:
            os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: this one


def main(fd: int) -> None:
    """Serve start and reap requests on ``fd`` until it reaches end of file."""
    _close_inherited(fd)
    main_socket = _socket.socket(fileno=fd)
    os.set_inheritable(fd, False)
    os.write(1, b"ready\n")  # bwrap is done: the namespaces are final
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    loop = _Loop()
    loop.poll.register(fd, select.EPOLLIN)
    while True:
        for ready, _ in loop.poll.poll():
            if ready == fd:
                received = _receive(main_socket)
                if received is None:
                    os._exit(0)
                _serve_start(*received, loop)
            elif ready in loop.exits:
                _exited(loop.exits[ready], loop)
            elif ready in loop.replies:
                _answered(loop.replies[ready], loop)


def _exited(child: _Child, loop: _Loop) -> None:
    """The command exited (its pidfd is readable): send its status, or reap an orphan."""
    assert child.pidfd is not None
    loop.forget(child.pidfd)
    os.close(child.pidfd)
    child.pidfd = None
    if child.reply is None:  # nobody will say reap
        child.reap()
        return
    flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
    info = os.waitid(os.P_PID, child.pid, flags)
    if info is None:  # cannot be: a pidfd is readable once it exited
        status = -_SIGKILL
    else:
        status = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
    _send(child.reply, {"status": status})


def _answered(child: _Child, loop: _Loop) -> None:
    """Penguin said ``reap`` (it has the status) or closed the reply socket."""
    assert child.reply is not None
    loop.forget(child.reply.fileno())
    try:
        asked = child.reply.recv(16)
    except OSError:
        asked = b""
    if child.pidfd is None:  # it exited: reap it now (said reap, or orphaned after)
        child.reap()
    elif asked == b"reap":  # pragma: no cover - penguin says it only after the status
        pass  # reaped by _exited, as an orphan
    # else orphaned while running: reaped by _exited
    child.reply.close()
    child.reply = None


def _kill_group(pid: int) -> None:
    try:  # noqa: SIM105 - contextlib (with collections and functools) is 2 ms to import
        os.killpg(pid, _SIGKILL)
    except OSError:
        pass


def _serve_start(data: bytes, fds: list[int], loop: _Loop) -> None:
    if len(fds) != _FDS:
        for fd in fds:
            os.close(fd)
        return
    reply = _socket.socket(fileno=fds[0])
    try:
        try:
            pid, process = _start(data, fds[1:])
        except OSError as error:  # what Popen raises: errno, text, file name
            code = error.errno
            text = error.strerror or str(error)
            _send(reply, {"errno": code or 0, "error": text, "filename": error.filename})
            reply.close()
            return
        except ValueError as error:  # an embedded NUL, as Popen says it
            _send(reply, {"errno": 0, "error": str(error), "value": True})
            reply.close()
            return
        except LookupError as error:  # a field missing or of the wrong kind: raised as one
            _send(reply, {"errno": 0, "error": f"bad start request ({error})"})
            reply.close()
            return
        except Exception as error:  # a tty's preexec_fn (SubprocessError): nothing runs
            _send(reply, {"errno": 0, "error": str(error)})
            reply.close()
            return
    finally:
        for fd in fds[1:]:
            try:  # noqa: SIM105 - as in _kill_group
                os.close(fd)
            except OSError:
                pass
    try:
        pidfd = os.pidfd_open(pid)
    except OSError as error:  # it would run unwatched: it does not run
        _kill_group(pid)
        _reap(pid, process)
        _send(reply, {"errno": error.errno or 0, "error": error.strerror or str(error)})
        reply.close()
        return
    child = _Child(pid, process, reply, pidfd)
    loop.watch_exit(child)
    if not _send(reply, {"pid": pid}):
        _kill_group(pid)
        reply.close()
        child.reply = None  # an orphan: reaped once it exited
        return
    loop.watch_reply(child)


_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_NS_GET_USERNS = 0xB701
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_SIOCSIFADDR = 0x8916
_IFF_UP = 0x1


def loopback_down(user_fd: int, net_fd: int) -> None:
    """Take ``lo`` down in the network namespace ``net_fd`` (owned by ``user_fd``)."""
    import contextlib
    import ctypes
    import socket
    import struct

    libc = ctypes.CDLL(None, use_errno=True)
    # The user namespace that owns the network namespace: bwrap's --disable-userns
    # puts its processes in a nested one, with no capability over the network.
    with contextlib.suppress(OSError):
        user_fd = fcntl.ioctl(net_fd, _NS_GET_USERNS)
    for fd, kind in ((user_fd, _CLONE_NEWUSER), (net_fd, _CLONE_NEWNET)):
        if libc.setns(fd, kind) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"setns: {os.strerror(code)}")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        # Its address goes first: a down lo that keeps 127.0.0.1 makes a connect hang
        # instead of failing at once with "Network is unreachable".
        # (Setting 0.0.0.0 is how IPv4 removes an interface's address; IPv6's ::1
        # goes with the interface's going down.)
        address = struct.pack("=HH4s8x", socket.AF_INET, 0, bytes(4))
        fcntl.ioctl(sock, _SIOCSIFADDR, struct.pack("16s16s8x", b"lo", address))
        request = struct.pack("16sh", b"lo", 0)
        (flags,) = struct.unpack_from("16xh", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags & ~_IFF_UP))


def run(arguments: list[str]) -> None:
    """``FD``, or ``loopback-down USER_FD NET_FD``: see the module's docstring."""
    if arguments[0] == "loopback-down":
        loopback_down(int(arguments[1]), int(arguments[2]))
    else:
        main(int(arguments[0]))


if __name__ == "__main__":
    run(sys.argv[1:])
