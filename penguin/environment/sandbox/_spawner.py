"""The spawner: one small process inside a layout's namespaces that starts its commands.

``bwrap`` runs this file (``python -I -S _spawner.py FD``) as the only process of the
namespaces it builds, with every capability dropped (``--cap-drop ALL``: an empty
bounding set, so nothing it starts can regain one, not even as root) and
``no_new_privs``. A command start then costs one ``vfork``+``exec`` here instead of
the ``nsenter`` (and, as root, ``setpriv``) ``exec`` hops of entering from outside.

It runs the standard library only (``-S``: no site-packages). The protocol, over the
``SOCK_SEQPACKET`` socket ``FD`` (each message whole):

- a **start** message is JSON ``{"argv", "executable", "cwd", "env", "tty"}`` with
  four descriptors: a fresh reply socket, then the command's stdin, stdout and stderr.
  The command starts as the leader of a new session (and, for a tty, takes the pty on
  its stdin as its controlling terminal); the reply socket gets ``{"pid": N}`` or
  ``{"errno": E, "error": TEXT}``.
- when the command exits (its pidfd, then ``waitid(WNOWAIT)``), the reply socket gets
  ``{"status": S}`` (``-N`` for signal N) and the command stays unreaped until penguin
  answers ``reap``: until then its pid and group id cannot name another process (the
  rule of ``supervisor/_process``; a zombie is never signalled nor counted as alive,
  so the moment of the reaping itself does not matter). A reply socket that closes
  first, or a pid reply that cannot be delivered, makes the command an orphan: its
  group is sent SIGKILL in the latter case, and orphans are reaped as they exit.
- end of file on ``FD`` (penguin closed the sandbox, or died) ends the spawner.

The same file, run as ``_spawner.py loopback-down USER_FD NET_FD`` (from outside, once
per network-off layout), takes the network namespace's loopback down, so a command
there reaches no address at all, not even its own ``127.0.0.1`` (spec X1.1): it joins
the user namespace (gaining its capabilities, in this process only, until it exits)
and then the network namespace, removes ``lo``'s address and clears its ``IFF_UP``.

What it does not own: which layout it serves (a new layout gets a new ``bwrap`` and a
new spawner), ending the commands' process trees (the supervisor does, by group, tree
and marker, as for any command), the policy itself.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import termios
from typing import final

MAX_MESSAGE = 1 << 20
"""The largest start message read (argv and environment); penguin sends larger ones
through ``nsenter`` instead."""
_FDS = 4


def _claim_tty() -> None:  # runs in the child, between fork and exec
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _receive(main: socket.socket) -> tuple[bytes, list[int]] | None:
    """One start message and its descriptors; ``None`` at end of file."""
    space = socket.CMSG_SPACE(_FDS * array.array("i").itemsize)
    data, ancillary, flags, _ = main.recvmsg(MAX_MESSAGE, space)
    fds: list[int] = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            received = array.array("i")
            received.frombytes(payload[: len(payload) - len(payload) % received.itemsize])
            fds.extend(received)
    if not data and not fds:
        return None
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
        data = b""  # answered as an error below
    return data, fds


def _start(data: bytes, stdio: list[int]) -> subprocess.Popen[bytes]:
    request = json.loads(data)
    return subprocess.Popen(
        request["argv"],
        executable=request["executable"],
        cwd=request["cwd"],
        env=request["env"],
        stdin=stdio[0],
        stdout=stdio[1],
        stderr=stdio[2],
        start_new_session=True,
        preexec_fn=_claim_tty if request["tty"] else None,
    )


def _send(sock: socket.socket, value: object) -> bool:
    try:
        sock.send(json.dumps(value).encode())
    except OSError:
        return False
    return True


@final
class _Child:
    """One started command: its process, the reply socket, and a pidfd until it exits."""

    def __init__(self, process: subprocess.Popen[bytes], reply: socket.socket, pidfd: int):
        self.process = process
        self.reply: socket.socket | None = reply
        self.pidfd: int | None = pidfd


def main(fd: int) -> None:
    """Serve start and reap requests on ``fd`` until it reaches end of file."""
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a closed reply socket is an error
    main_socket = socket.socket(fileno=fd)
    os.set_inheritable(fd, False)
    os.write(1, b"ready\n")  # bwrap is done: the namespaces are final
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    selector = selectors.DefaultSelector()
    selector.register(main_socket, selectors.EVENT_READ)
    while True:
        for key, _ in selector.select():
            if key.fileobj is main_socket:
                received = _receive(main_socket)
                if received is None:
                    os._exit(0)
                _serve_start(*received, selector)
            elif key.data[0] == "exit":
                _exited(key.data[1], selector)
            else:
                _answered(key.data[1], selector)


def _exited(child: _Child, selector: selectors.BaseSelector) -> None:
    """The command exited (its pidfd is readable): send its status, or reap an orphan."""
    assert child.pidfd is not None
    selector.unregister(child.pidfd)
    os.close(child.pidfd)
    child.pidfd = None
    if child.reply is None:  # nobody will say reap
        child.process.wait()
        return
    flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
    info = os.waitid(os.P_PID, child.process.pid, flags)
    if info is None:  # cannot be: a pidfd is readable once it exited
        status = -int(signal.SIGKILL)
    else:
        status = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
    _send(child.reply, {"status": status})


def _answered(child: _Child, selector: selectors.BaseSelector) -> None:
    """Penguin said ``reap`` (it has the status) or closed the reply socket."""
    assert child.reply is not None
    selector.unregister(child.reply)
    try:
        asked = child.reply.recv(16)
    except OSError:
        asked = b""
    if child.pidfd is None:  # it exited: reap it now (said reap, or orphaned after)
        child.process.wait()
    elif asked == b"reap":  # pragma: no cover - penguin says it only after the status
        pass  # reaped by _exited, as an orphan
    # else orphaned while running: reaped by _exited
    child.reply.close()
    child.reply = None


def _serve_start(data: bytes, fds: list[int], selector: selectors.BaseSelector) -> None:
    if len(fds) != _FDS:
        for fd in fds:
            os.close(fd)
        return
    reply = socket.socket(fileno=fds[0])
    try:
        try:
            process = _start(data, fds[1:])
        except (OSError, subprocess.SubprocessError) as error:
            code = getattr(error, "errno", None)
            text = getattr(error, "strerror", None) or str(error)
            name = getattr(error, "filename", None)
            _send(reply, {"errno": code or 0, "error": text, "filename": name})
            reply.close()
            return
        except ValueError as error:  # an embedded NUL, as Popen says it; or bad JSON
            _send(reply, {"errno": 0, "error": str(error), "value": True})
            reply.close()
            return
        except (KeyError, TypeError) as error:  # a malformed message
            _send(reply, {"errno": 0, "error": f"bad start request ({error})"})
            reply.close()
            return
    finally:
        for fd in fds[1:]:
            with contextlib.suppress(OSError):
                os.close(fd)
    try:
        pidfd = os.pidfd_open(process.pid)
    except OSError as error:  # it would run unwatched: it does not run
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        _send(reply, {"errno": error.errno or 0, "error": error.strerror or str(error)})
        reply.close()
        return
    child = _Child(process, reply, pidfd)
    selector.register(pidfd, selectors.EVENT_READ, ("exit", child))
    if not _send(reply, {"pid": process.pid}):
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        reply.close()
        child.reply = None  # an orphan: reaped once it exited
        return
    selector.register(reply, selectors.EVENT_READ, ("reply", child))


_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_NS_GET_USERNS = 0xB701
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_SIOCSIFADDR = 0x8916
_IFF_UP = 0x1


def loopback_down(user_fd: int, net_fd: int) -> None:
    """Take ``lo`` down in the network namespace ``net_fd`` (owned by ``user_fd``)."""
    import ctypes

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


if __name__ == "__main__":
    if sys.argv[1] == "loopback-down":
        loopback_down(int(sys.argv[2]), int(sys.argv[3]))
    else:
        main(int(sys.argv[1]))
