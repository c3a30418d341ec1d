"""The kernel-facing part of the sandbox on Linux: namespaces made once, entered per command.

How a :class:`~._policy.Layout` is enforced (docs/sandbox.md says why this way):

- **Made once per layout.** ``bwrap`` (Debian's ``bubblewrap``) builds a user namespace
  with nested user namespaces disabled, a mount namespace in which ``/`` is bound
  read-only, each writable root bound read-write over it, each protected path bound
  read-only over that, and a minimal ``/dev`` (X1.2's devices, the host's ptys, and
  ``/dev/shm`` in workspace-write), plus a new network namespace when the network is
  off. Its only process is a ``sh`` that waits on a pipe; penguin opens the three
  namespace files of that process, keeps the descriptors, and lets it end. The
  namespaces live as long as the descriptors (or any process in them).
- **Entered per command.** The command line becomes ``nsenter --user=… --mount=…
  [--net=…] --preserve-credentials --wdns=CWD -- bash -c CMD``: one small ``exec``
  more than an unsandboxed command, no fork of Python, no namespace created. A command
  of a non-root user has no capability in the namespace it entered (so it cannot
  unmount or remount the read-only binds, nor make another user namespace:
  ``--disable-userns``); when penguin runs as root, ``setpriv`` (a second small
  ``exec``) drops every capability and locks the securebits, since root entering a user
  namespace would otherwise keep full capabilities over its mounts. Every descendant
  inherits all of it.
- A layout that changes (a ``.git`` created, a writable root that appeared) gets new
  namespaces at the next command start; the old descriptors stay open until the
  sandbox closes (a command being entered may still be reading them).

:func:`probe` is what the machine supports (``penguin sandbox --check``, X3.1), tried
for real once per process.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Final, final

import attrs

from ._policy import DEVICES, Layout

__all__ = ["Namespaces", "Support", "build_namespaces", "probe"]

_SYS_LANDLOCK_CREATE_RULESET: Final = 444
_LANDLOCK_CREATE_RULESET_VERSION: Final = 1
_BUILD_TIMEOUT: Final = 20.0
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
    """What this machine supports, tried for real (blocking; once per process)."""
    global _probed
    with _probe_lock:
        if _probed is None:
            _probed = _probe()
        return _probed


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
        reason = str(error) or "user namespaces are not available"
        return Support(reason, abi, False, False, version)
    try:
        argv = namespaces.command(("/bin/sh", "-c", "exit 7"), None, "/")
        done = subprocess.run(list(argv), capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError) as error:
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


def _bwrap_args(layout: Layout) -> list[str]:
    args = ["--unshare-user", "--disable-userns", "--die-with-parent"]
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
class Namespaces:
    """Open descriptors of one layout's namespaces, and how a command enters them."""

    def __init__(self, layout: Layout, fds: Mapping[str, int]) -> None:
        self.layout = layout
        self._fds = dict(fds)
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

    def command(self, argv: Sequence[str], executable: str | None, cwd: str) -> tuple[str, ...]:
        """``argv`` (run as ``executable`` when given) entering these namespaces in ``cwd``."""
        program = executable if executable is not None else argv[0]
        return (*self._prefix, f"--wdns={cwd}", "--", *self._setpriv, program, *argv[1:])

    def close(self) -> None:
        """Close the descriptors (the namespaces end with their last process)."""
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)


def build_namespaces(layout: Layout, env: Mapping[str, str]) -> Namespaces:
    """Make the namespaces of ``layout`` with one ``bwrap`` (blocking); raise ``OSError``."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise OSError("bubblewrap (bwrap) is not installed")
    info_read, info_write = os.pipe()
    hold_read, hold_write = os.pipe()
    try:
        process = subprocess.Popen(
            [
                bwrap,
                *_bwrap_args(layout),
                "--info-fd",
                str(info_write),
                "--",
                "/bin/sh",
                "-c",
                "read _ignored",
            ],
            stdin=hold_read,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(info_write,),
            env=dict(env),
            start_new_session=True,
        )
    except BaseException:
        for fd in (info_read, info_write, hold_read, hold_write):
            os.close(fd)
        raise
    os.close(info_write)
    os.close(hold_read)
    fds: dict[str, int] = {}
    try:
        child = _child_pid(info_read)
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
    except BaseException:
        for fd in fds.values():
            os.close(fd)
        raise
    finally:
        os.close(info_read)
        os.close(hold_write)  # the holder's read ends: it exits
        try:
            process.wait(_BUILD_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()
    return Namespaces(layout, fds)


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
