"""A directory whose file server has stopped answering: a real FUSE mount, for DESIGN §2.

On a network file system (NFS, SMB, sshfs) whose server stops answering, every look
into a directory waits: ``stat``, ``open``, a child's ``chdir``. The thread that made
the call waits with it, which on the event loop's thread is every session of the
process. This mounts a FUSE file system (the kernel's ``/dev/fuse``, no library) and
answers nothing, so that wait is real. It needs root (or ``CAP_SYS_ADMIN``) and
``/dev/fuse``; :func:`stopped_server` skips the test where either is missing.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import select
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import psutil
import pytest

_MNT_DETACH = 2
_READ_BUFFER = 1 << 18  # the kernel refuses a read shorter than a request can be
_FUSE_ACCESS = 34


@attrs.define
class StoppedServer:
    """A FUSE mount whose server does not answer: every look into it waits, as on a hung NFS.

    The kernel holds every request until the server answers its first (``INIT``).
    :meth:`answer` refuses that one: every waiting request, and every later one, then
    fails with ``ECONNREFUSED``. A guard thread answers after ``give_up`` seconds, so a
    test whose loop is stuck behind the mount ends (and fails) instead of hanging.
    """

    device: int
    given_up: bool = False
    """Whether the guard thread answered: nothing else did within ``give_up`` seconds."""
    _answered: bool = False
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    _serving: threading.Thread | None = None
    _stop: threading.Event = attrs.field(factory=threading.Event)

    def answer(self, *, by_guard: bool = False) -> None:
        """Refuse the connection: what waits on the mount, and all that comes, fails."""
        with self._lock:
            if self._answered:
                return
            self._answered, self.given_up = True, by_guard
            unique = self._request()[1]  # INIT, queued at mount time
            os.write(self.device, struct.pack("<IiQ", 16, -errno.EIO, unique))

    def let_in(self) -> None:
        """Come back: accept the connection, and let anyone into its empty root folder.

        Answers ``INIT``, then, in a thread until the mount goes, ``ACCESS`` with yes
        and anything else with ``ENOSYS``: enough for a process to ``chdir`` there.
        """
        with self._lock:
            if self._answered:
                return
            self._answered = True
            unique = self._request()[1]
            init = struct.pack("<IIIIHHIIHHI", 7, 31, 0, 0, 0, 0, 4096, 1, 0, 0, 0)
            init += bytes(64 - len(init))
            os.write(self.device, struct.pack("<IiQ", 16 + len(init), 0, unique) + init)
        self._serving = threading.Thread(target=self._serve, daemon=True)
        self._serving.start()

    def _request(self) -> tuple[int, int]:
        """The next request's opcode and id (blocking)."""
        request = os.read(self.device, _READ_BUFFER)
        _length, opcode, unique = struct.unpack_from("<IIQ", request)
        return opcode, unique

    def _serve(self) -> None:
        while not self._stop.is_set():
            if not select.select([self.device], [], [], 0.05)[0]:
                continue
            try:
                opcode, unique = self._request()
            except BlockingIOError:  # the request went (its caller was killed) before this read
                continue
            except OSError:  # the mount is gone
                return
            error = 0 if opcode == _FUSE_ACCESS else -errno.ENOSYS
            with contextlib.suppress(OSError):  # the request was interrupted meanwhile
                os.write(self.device, struct.pack("<IiQ", 16, error, unique))

    def close(self) -> None:
        """Stop serving (refusing first what still waits)."""
        self.answer()
        self._stop.set()
        if self._serving is not None:
            self._serving.join()

    @staticmethod
    def waiting() -> bool:
        """Whether a thread or a child of this process waits on a FUSE mount."""
        me = psutil.Process()
        return _in_disk_sleep(me, threads=True) or bool(StoppedServer.waiting_children())

    @staticmethod
    def waiting_children() -> list[int]:
        """The children of this process that wait on a FUSE mount."""
        return [child.pid for child in psutil.Process().children() if _in_disk_sleep(child)]


def _in_disk_sleep(process: psutil.Process, *, threads: bool = False) -> bool:
    """Whether ``process`` (or, with ``threads``, one of its threads) waits on a FUSE mount.

    State D alone is not enough: a thread that starts a process waits in D until the
    child's ``exec``. The kernel names where a task sleeps (``wchan``): FUSE's request
    queue (``fuse_get_req`` before the server's first answer, ``request_wait_answer``
    after).
    """
    try:
        tids = [t.id for t in process.threads()] if threads else [process.pid]
    except psutil.Error:
        return False
    for tid in tids:
        task = f"/proc/{process.pid}/task/{tid}"
        try:
            with open(f"{task}/stat", "rb") as stat:
                state = stat.read().rpartition(b")")[2].split()[0]
            with open(f"{task}/wchan", "rb") as wchan:
                where = wchan.read()
        except OSError:
            continue
        if state == b"D" and (b"fuse" in where or where == b"request_wait_answer"):
            return True
    return False


@contextmanager
def stopped_server(mount_point: Path, *, give_up: float = 10.0) -> Iterator[StoppedServer]:
    """A :class:`StoppedServer` mounted at ``mount_point``; skips where none can be mounted."""
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse")
    device = os.open("/dev/fuse", os.O_RDWR | os.O_NONBLOCK)  # INIT is queued at mount time
    libc = ctypes.CDLL(None, use_errno=True)
    options = f"fd={device},rootmode=40000,user_id={os.getuid()},group_id={os.getgid()}"
    where = os.fsencode(mount_point)
    if libc.mount(b"penguin-test", where, b"fuse.penguin-test", 0, options.encode()) != 0:
        os.close(device)
        pytest.skip(f"cannot mount a FUSE file system: {os.strerror(ctypes.get_errno())}")
    server = StoppedServer(device)
    guard = threading.Timer(give_up, server.answer, kwargs={"by_guard": True})
    guard.start()
    try:
        yield server
    finally:
        guard.cancel()
        server.close()
        libc.umount2(where, _MNT_DETACH)
        os.close(device)
