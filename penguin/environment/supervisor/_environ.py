"""What a command runs in: its environment variables and its shell (reference 4.7, 4.9, 4.10).

Three jobs, each small:

- :func:`child_environment` builds a child's environment from a base (the host's, or the
  login environment resolved from it) in the spec's fixed order: strip the host-only keys,
  apply the proxy policy, lay the agent's vault over that, then the hardened set that
  nothing overrides, and last penguin's own marker variables (``owner``). Pure.
- :func:`resolve_shell` picks the shell argv a command line is appended to, and the
  program that runs it. Pure.
- :func:`resolve_login_environment` gives ``bash -lc`` semantics without paying for a login
  shell on every command: it runs one login ``bash`` that dumps its environment, once per
  Environment, and every command then runs ``bash --norc -c`` in that environment (reference D7).
  :func:`parse_env_dump` is its pure half.

Platform: POSIX only. The spec's Windows shell ladder (PATH ``bash`` unless it is the WSL
launcher, ``PENGUIN_BUNDLED_SHELL``, ``pwsh``, ``powershell``) is deliberately not
implemented; ``PENGUIN_SHELL`` keeps its cross-platform argument rules so a configuration
naming ``pwsh`` or ``cmd`` behaves the same everywhere.

Environment keys are case-sensitive on POSIX, so the vault, the hardened set and the owner
markers are set exactly as spelled; only stripping and the proxy policy match names in any
casing, as the spec says.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Mapping
from typing import Final, Literal, TypeAlias, final

import attrs
import trio

from penguin._errors import PenguinError
from penguin._log import logger as _logger

from ._process import signal_group, wait_exited
from ._proctable import shared_scan

__all__ = [
    "HARDENED",
    "LOGIN_PROBE_TIMEOUT",
    "SHELL_OVERRIDE_VAR",
    "STRIPPED_KEYS",
    "ProxyInject",
    "ProxyPolicy",
    "Shell",
    "child_environment",
    "parse_env_dump",
    "resolve_login_environment",
    "resolve_shell",
]

STRIPPED_KEYS: Final[frozenset[str]] = frozenset(
    {
        "PORT",
        "HOST",
        "PENGUIN_CLI_ENTRY",
        "PENGUIN_WEB_DIST",
        "FORCE_COLOR",
        "CLICOLOR_FORCE",
        "PENGUIN_DESKTOP_TOKEN",
        "PENGUIN_PORT_FILE",
        "PENGUIN_SEED_ADMIN_PASSWORD",
    }
)
"""Host variables a command never inherits (compared upper-cased: any casing is stripped)."""

HARDENED: Final[Mapping[str, str]] = {
    "GIT_EDITOR": "true",
    "GIT_TERMINAL_PROMPT": "0",
    "TERM": "dumb",
    "NO_COLOR": "1",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
}
"""Set last (before the owner markers): no editor, prompt, pager or colour can wait on a TTY."""

_PROXY_KEYS: Final = frozenset({"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"})
_NO_PROXY: Final = "NO_PROXY"

SHELL_OVERRIDE_VAR: Final = "PENGUIN_SHELL"
LOGIN_PROBE_TIMEOUT: Final = 10.0

_POWERSHELL_ARGS: Final = ("-NoLogo", "-NoProfile", "-Command")
_CMD_ARGS: Final = ("/d", "/s", "/c")
_POSIX_SHELL_ARGS: Final = ("-lc",)
_SHELL_SUFFIXES: Final = (".exe", ".cmd", ".bat", ".ps1")

_SHELL_MANAGED: Final = frozenset({"PWD", "OLDPWD", "SHLVL", "_"})
"""Variables bash sets for itself in every shell: a dump's values are stale, so they go."""

_DUMP_LIMIT: Final = 16 * 1024 * 1024
"""The most bytes a login probe may print before it is treated as broken."""


@final
@attrs.frozen
class ProxyInject:
    """Route every command through ``url``, except the hosts in ``no_proxy``."""

    url: str
    no_proxy: str


ProxyPolicy: TypeAlias = Literal["strip"] | ProxyInject | None
"""``"strip"`` removes the proxy variables, :class:`ProxyInject` sets them, None passes through."""


def _without(env: dict[str, str], upper_names: frozenset[str]) -> None:
    for key in [key for key in env if key.upper() in upper_names]:
        del env[key]


def child_environment(
    base: Mapping[str, str],
    *,
    proxy: ProxyPolicy,
    vault: Mapping[str, str],
    owner: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of one command process (reference 4.9, 4.10), as a fresh dict.

    In order: ``base`` minus :data:`STRIPPED_KEYS` (any casing); the proxy policy; the
    ``vault`` (overrides host and proxy values, may re-add a stripped key such as
    ``PORT``); :data:`HARDENED`, which the vault cannot override; then ``owner``,
    penguin's own marker variables, which come last so no configuration can forge them.
    The proxy policy is an argument because the spec re-reads it at every spawn.
    """
    env = dict(base)
    _without(env, STRIPPED_KEYS)
    if proxy == "strip":
        _without(env, _PROXY_KEYS)
    elif isinstance(proxy, ProxyInject):
        _without(env, _PROXY_KEYS | {_NO_PROXY})
        for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
            env[name] = proxy.url
        env["NO_PROXY"] = proxy.no_proxy
        env["no_proxy"] = proxy.no_proxy
    env.update(vault)
    env.update(HARDENED)
    if owner:
        env.update(owner)
    return env


@final
@attrs.frozen
class Shell:
    """How a command line is run: ``(*argv, command)``, by ``executable`` when it is set.

    ``login_resolved`` is True for the default bash: the caller runs it in the login
    environment that :func:`resolve_login_environment` resolved once, which is what makes
    it equivalent to the spec's ``bash -lc``. It is False when ``PENGUIN_SHELL`` chose the
    shell: that shell is run exactly as configured on every call.

    ``executable`` is the program the spawn runs when ``argv[0]`` is only its name: the
    default bash is started as ``bash`` (so its messages read ``bash: line 1: …``, as
    under the reference, not ``/usr/bin/bash: line 1: …``) while the file run is the one
    resolved from ``PATH``. ``None`` runs ``argv[0]`` itself.
    """

    argv: tuple[str, ...]
    login_resolved: bool
    executable: str | None = None

    @property
    def program(self) -> str:
        """The file that is run: ``executable``, or ``argv[0]``."""
        return self.executable if self.executable is not None else self.argv[0]

    def command(self, cmd: str) -> list[str]:
        """The full argv that runs ``cmd``."""
        return [*self.argv, cmd]


def _shell_args(shell: str) -> tuple[str, ...]:
    name = shell.replace("\\", "/").rsplit("/", 1)[-1].lower()
    for suffix in _SHELL_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    if name in ("pwsh", "powershell"):
        return _POWERSHELL_ARGS
    if name == "cmd":
        return _CMD_ARGS
    return _POSIX_SHELL_ARGS


def resolve_shell(env: Mapping[str, str]) -> Shell:
    r"""The shell for commands, chosen from ``env`` (the host environment) once (reference 4.7).

    ``PENGUIN_SHELL`` (trimmed, when non-empty) names the shell; its arguments follow its
    basename, case-insensitively and without a ``.exe``/``.cmd``/``.bat``/``.ps1``
    suffix: ``pwsh``/``powershell`` get ``-NoLogo -NoProfile -Command``, ``cmd`` gets
    ``/d /s /c``, anything else ``-lc``. Otherwise ``bash`` from ``env``'s ``PATH``
    (``/bin/bash`` if it is not there), run as ``bash --norc -c`` in the resolved login
    environment, with its basename as ``argv[0]``. The basename accepts ``\`` as a
    separator too, so a Windows path in the variable still picks the right arguments.

    ``--norc``: the login environment already holds what the start-up files set, so a
    command's shell runs none of them. Without it, a bash built with
    ``SSH_SOURCE_BASHRC`` (Debian's, Ubuntu's) reads ``~/.bashrc`` before every command
    whenever ``SSH_CLIENT`` is set — ``bash -lc`` never takes that path — and a Ctrl-C
    that arrives while it runs is swallowed: bash was waiting for a child of the file,
    which did not die of the signal, so bash carried on and started the command.
    """
    override = env.get(SHELL_OVERRIDE_VAR, "").strip()
    if override:
        return Shell(argv=(override, *_shell_args(override)), login_resolved=False)
    bash = shutil.which("bash", path=env.get("PATH", os.defpath)) or "/bin/bash"
    return Shell(
        argv=(os.path.basename(bash), "--norc", "-c"), login_resolved=True, executable=bash
    )


def parse_env_dump(data: bytes) -> dict[str, str]:
    """Parse ``env -0`` output: NUL-terminated ``NAME=value`` records.

    Names and values are decoded as ``os.environ`` decodes them (the file-system
    encoding with ``surrogateescape``), so any bytes round-trip to the child unchanged.
    Records without ``=`` or with an empty name are skipped; so are ``PWD``, ``OLDPWD``,
    ``SHLVL`` and ``_``, which bash maintains itself. A later duplicate wins.
    """
    env: dict[str, str] = {}
    for record in data.split(b"\0"):
        name, sep, value = record.partition(b"=")
        if not sep or not name:
            continue
        key = os.fsdecode(name)
        if key in _SHELL_MANAGED:
            continue
        env[key] = os.fsdecode(value)
    return env


_PROBE_GRACE: Final = 1.0
"""How long a probe's leftovers get to exit on SIGTERM (a profile's tool may hold a lock
file it removes on exit — pyenv's rehash does — which SIGKILL would leave stale)."""


@final
class _DumpTooLarge(PenguinError):
    """The login probe printed more than `_DUMP_LIMIT` bytes: the probe has failed."""


async def _has_live_members(pgid: int) -> bool:
    """Whether a live process is left in group ``pgid``, by a read shared with others.

    Zombies do not count: they may wait for ever for a parent that never reaps them
    (PID 1 in some containers).
    """
    return bool((await shared_scan().read(math.inf)).group(pgid))


async def _group_ended(pgid: int) -> None:
    """Wait until no live process is left in the group (the caller bounds the wait)."""
    interval = 0.005
    while await _has_live_members(pgid):
        await trio.sleep(interval)
        interval = min(interval * 2, 0.05)


async def _read_dump(stream: trio.abc.ReceiveStream, end: bytes) -> bytes:
    """Read until ``end`` has arrived or EOF, whichever is first."""
    data = bytearray()
    while True:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return bytes(data)
        searched_from = max(0, len(data) - len(end))
        data += chunk
        if data.find(end, searched_from) >= 0:
            return bytes(data)
        if len(data) > _DUMP_LIMIT:
            raise _DumpTooLarge


def _exit_description(returncode: int | None) -> str:
    if returncode is None or returncode < 0:
        return "the shell ended"
    return f"the shell exited with status {returncode}"


async def resolve_login_environment(
    bash: str,
    base: Mapping[str, str],
    *,
    # A bound of the probe's own, not the caller's deadline: on expiry it returns None.
    timeout: float = LOGIN_PROBE_TIMEOUT,  # noqa: ASYNC109
) -> dict[str, str] | None:
    """The environment a login ``bash`` ends up with, resolved by running one, once.

    Runs ``bash -lc`` with ``base`` as its environment, stdin from ``/dev/null``, stderr
    discarded, in a new session (so a profile cannot grab a terminal) and so its own
    process group. The script prints a random begin marker, ``env -0``, and an end marker
    only if ``env`` succeeded, so whatever a profile prints on stdout first is ignored and
    a truncated dump is never taken for a whole one. The exit status does not matter: the
    end marker is the proof of success.

    Returns None, with a warning on the ``penguin`` logger, when the end marker does not
    arrive within ``timeout`` seconds (the profile exits early, fails, hangs or prints
    more than 16 MiB) or the dump holds no variable; the caller then runs commands in
    ``base``. Once the end marker arrived (and the shell exited), or on any failure, the
    probe's whole process group gets SIGTERM and, once nothing in it runs any more or a
    second later, SIGKILL — the shell and anything its profile left running in the
    group — and only then is the shell reaped (until it is, the group id cannot name
    anyone else's group), so the probe leaves no process behind. (A profile
    job that made itself a new session escapes the group; that is a daemon by intent.)
    """
    nonce = uuid.uuid4().hex
    begin = f"penguin-login-env-{nonce}-begin"
    end = f"penguin-login-env-{nonce}-end"
    script = 'builtin printf "%s\\0" "$1"; command env -0 && builtin printf "%s\\0" "$2"'
    argv = [bash, "-lc", script, "penguin-login-env", begin, end]
    begin_record = begin.encode() + b"\0"
    end_record = end.encode() + b"\0"
    try:
        process = await trio.lowlevel.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(base),
            start_new_session=True,
        )
    except OSError as error:
        _logger.warning("[penguin] login environment not resolved: cannot run %s: %s", bash, error)
        return None
    data = b""
    problem: str | None = None
    try:
        assert process.stdout is not None
        with trio.move_on_after(timeout) as deadline:
            try:
                data = await _read_dump(process.stdout, end_record)
            except _DumpTooLarge:
                problem = f"it printed more than {_DUMP_LIMIT} bytes"
        if deadline.cancelled_caught:
            problem = f"it did not finish within {timeout:g}s"
    finally:
        with trio.CancelScope(shield=True):
            # The shell is reaped last: until then its pid is the group's id and no
            # one else's (``_process``'s rule), so the group signals reach only the
            # probe's own leftovers. wait_exited waits for its exit, not its reaping.
            if problem is None:
                with trio.move_on_after(_PROBE_GRACE):
                    await wait_exited(process)  # it exits by itself after the end marker
            signal_group(process.pid, signal.SIGTERM)
            with trio.move_on_after(_PROBE_GRACE):
                await wait_exited(process)
                # The leftovers get the grace too, not only the shell: SIGKILL right
                # after the shell died would cut short their exit handlers (the lock
                # file of pyenv's rehash stayed, and every later login shell waited).
                await _group_ended(process.pid)
            signal_group(process.pid, signal.SIGKILL)
            await process.wait()
            if process.stdout is not None:
                await process.stdout.aclose()
    if problem is None:
        start = data.find(begin_record)
        stop = data.rfind(end_record)
        if start < 0 or stop < start:
            problem = f"{_exit_description(process.returncode)} before printing its environment"
        else:
            env = parse_env_dump(data[start + len(begin_record) : stop])
            if env:
                return env
            problem = "it printed an empty environment"
    _logger.warning("[penguin] login environment not resolved by `%s -lc`: %s", bash, problem)
    return None
