"""Reference 4.7, 4.9, 4.10: a command's environment, its shell, the resolved login environment."""

from __future__ import annotations

import logging
import os
import shutil
import stat
import uuid
from pathlib import Path

import psutil
import pytest
import trio

from penguin.environment.supervisor._environ import (
    HARDENED,
    STRIPPED_KEYS,
    ProxyInject,
    Shell,
    child_environment,
    parse_env_dump,
    resolve_login_environment,
    resolve_shell,
)

BASH = shutil.which("bash")
needs_bash = pytest.mark.skipif(BASH is None, reason="needs bash on PATH")

# ---- 4.9 stripping, vault, hardened set -------------------------------------------------


def test_4_9_stripped_keys_are_the_spec_list() -> None:
    assert (
        frozenset(
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
        == STRIPPED_KEYS
    )
    assert dict(HARDENED) == {
        "GIT_EDITOR": "true",
        "GIT_TERMINAL_PROMPT": "0",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "PAGER": "cat",
        "GIT_PAGER": "cat",
    }


def test_4_9_stripped_keys_case_insensitive() -> None:
    base = {
        "PORT": "3000",
        "port": "3001",
        "Host": "example",
        "force_color": "1",
        "Penguin_Desktop_Token": "secret",
        "PENGUIN_SEED_ADMIN_PASSWORD": "pw",
        "PATH": "/usr/bin",
        "PORTABLE": "kept",
        "HOSTNAME": "kept",
    }
    env = child_environment(base, proxy=None, vault={})
    assert env == {"PATH": "/usr/bin", "PORTABLE": "kept", "HOSTNAME": "kept", **HARDENED}


def test_4_9_base_is_not_modified() -> None:
    base = {"PORT": "1", "TERM": "xterm"}
    child_environment(base, proxy="strip", vault={"X": "1"})
    assert base == {"PORT": "1", "TERM": "xterm"}


def test_4_9_other_host_variables_pass_through() -> None:
    base = {"HOME": "/home/u", "LANG": "C.UTF-8", "odd key": "v=w"}
    env = child_environment(base, proxy=None, vault={})
    assert {k: env[k] for k in base} == base


def test_4_9_vault_overrides_and_readds_port() -> None:
    base = {"PORT": "3000", "API_URL": "host", "HTTP_PROXY": "http://host-proxy"}
    vault = {"PORT": "8080", "API_URL": "vault", "HTTP_PROXY": "http://vault-proxy", "TOKEN": "t"}
    env = child_environment(base, proxy=ProxyInject("http://policy", "localhost"), vault=vault)
    assert env["PORT"] == "8080"
    assert env["API_URL"] == "vault"
    assert env["TOKEN"] == "t"
    # The vault outranks the proxy policy as well.
    assert env["HTTP_PROXY"] == "http://vault-proxy"
    assert env["http_proxy"] == "http://policy"


def test_4_9_hardened_cannot_be_overridden() -> None:
    base = {"TERM": "xterm-256color", "PAGER": "less", "GIT_EDITOR": "vim"}
    vault = {"TERM": "xterm", "NO_COLOR": "0", "GIT_TERMINAL_PROMPT": "1", "GIT_PAGER": "less"}
    env = child_environment(base, proxy=None, vault=vault)
    for key, value in HARDENED.items():
        assert env[key] == value


def test_4_9_owner_markers_come_last() -> None:
    owner = {"PENGUIN_SUPERVISOR_OWNER": "env-1/proc-0000abcd"}
    vault = {"PENGUIN_SUPERVISOR_OWNER": "forged"}
    env = child_environment(
        {"PENGUIN_SUPERVISOR_OWNER": "host"}, proxy=None, vault=vault, owner=owner
    )
    assert env["PENGUIN_SUPERVISOR_OWNER"] == "env-1/proc-0000abcd"


# ---- 4.10 proxy policy ------------------------------------------------------------------

PROXIED = {
    "HTTP_PROXY": "a",
    "http_proxy": "b",
    "Https_Proxy": "c",
    "ALL_PROXY": "d",
    "all_proxy": "e",
    "NO_PROXY": "internal",
    "no_proxy": "internal2",
    "OTHER": "kept",
}


def test_4_10_proxy_pass_through() -> None:
    env = child_environment(PROXIED, proxy=None, vault={})
    assert {k: env[k] for k in PROXIED} == PROXIED


def test_4_10_proxy_strip_keeps_no_proxy() -> None:
    env = child_environment(PROXIED, proxy="strip", vault={})
    assert env == {"NO_PROXY": "internal", "no_proxy": "internal2", "OTHER": "kept", **HARDENED}


def test_4_10_proxy_inject() -> None:
    policy = ProxyInject(url="http://127.0.0.1:9000", no_proxy="localhost,127.0.0.1")
    env = child_environment(PROXIED, proxy=policy, vault={})
    assert env == {
        "HTTP_PROXY": "http://127.0.0.1:9000",
        "http_proxy": "http://127.0.0.1:9000",
        "HTTPS_PROXY": "http://127.0.0.1:9000",
        "https_proxy": "http://127.0.0.1:9000",
        "NO_PROXY": "localhost,127.0.0.1",
        "no_proxy": "localhost,127.0.0.1",
        "OTHER": "kept",
        **HARDENED,
    }
    assert "ALL_PROXY" not in env
    assert "all_proxy" not in env


# ---- 4.7 shell --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "args"),
    [
        ("pwsh", ("-NoLogo", "-NoProfile", "-Command")),
        ("/opt/microsoft/powershell/7/PWSH", ("-NoLogo", "-NoProfile", "-Command")),
        ("powershell.exe", ("-NoLogo", "-NoProfile", "-Command")),
        (
            "C:\\Windows\\System32\\WindowsPowerShell\\v1.0\\PowerShell.EXE",
            ("-NoLogo", "-NoProfile", "-Command"),
        ),
        ("pwsh.ps1", ("-NoLogo", "-NoProfile", "-Command")),
        ("cmd", ("/d", "/s", "/c")),
        ("CMD.EXE", ("/d", "/s", "/c")),
        ("cmd.bat", ("/d", "/s", "/c")),
        ("/bin/zsh", ("-lc",)),
        ("fish", ("-lc",)),
        ("/usr/bin/bash", ("-lc",)),
        ("cmdx", ("-lc",)),
        ("pwsh.sh", ("-lc",)),
    ],
)
def test_4_7_penguin_shell_args_by_basename(value: str, args: tuple[str, ...]) -> None:
    shell = resolve_shell({"PENGUIN_SHELL": value, "PATH": "/usr/bin"})
    assert shell == Shell(argv=(value, *args), login_resolved=False)


def test_4_7_penguin_shell_is_trimmed() -> None:
    shell = resolve_shell({"PENGUIN_SHELL": "  /bin/zsh \n"})
    assert shell.argv == ("/bin/zsh", "-lc")
    assert shell.command("echo hi") == ["/bin/zsh", "-lc", "echo hi"]


def test_4_7_blank_penguin_shell_means_default(tmp_path: Path) -> None:
    fake = tmp_path / "bash"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    shell = resolve_shell({"PENGUIN_SHELL": "   ", "PATH": f"{tmp_path}{os.pathsep}/usr/bin"})
    assert shell == Shell(argv=("bash", "--norc", "-c"), login_resolved=True, executable=str(fake))


def test_4_7_default_bash_falls_back_to_bin_bash(tmp_path: Path) -> None:
    shell = resolve_shell({"PATH": str(tmp_path)})
    assert shell == Shell(
        argv=("bash", "--norc", "-c"), login_resolved=True, executable="/bin/bash"
    )


@needs_bash
def test_4_7_default_bash_from_host_path() -> None:
    shell = resolve_shell({"PATH": os.environ["PATH"]})
    assert shell.argv == ("bash", "--norc", "-c")  # messages read "bash: line 1: …" (9.6)
    assert (shell.executable, shell.program) == (BASH, BASH)
    assert shell.login_resolved


# ---- login environment: the env -0 parser -----------------------------------------------


def test_4_7_parse_env_dump() -> None:
    data = (
        b"PATH=/usr/bin\0"
        b"MULTI=line1\nline2\0"
        b"EQ=a=b=c\0"
        b"EMPTY=\0"
        b"PWD=/tmp\0OLDPWD=/\0SHLVL=2\0_=/usr/bin/env\0"
        b"BASH_FUNC_greet%%=() {  echo hi\n}\0"
        b"noequals\0"
        b"=nameless\0"
        b"LATIN=\xff\xfe\0"
    )
    env = parse_env_dump(data)
    assert env == {
        "PATH": "/usr/bin",
        "MULTI": "line1\nline2",
        "EQ": "a=b=c",
        "EMPTY": "",
        "BASH_FUNC_greet%%": "() {  echo hi\n}",
        "LATIN": os.fsdecode(b"\xff\xfe"),
    }
    # Undecodable bytes survive the round trip to a child's environment.
    assert os.fsencode(env["LATIN"]) == b"\xff\xfe"
    assert parse_env_dump(b"") == {}


# ---- login environment: a real bash with a temporary HOME -------------------------------


def marked_processes(mark: str) -> list[psutil.Process]:
    """Live (non-zombie) processes whose environment carries our test mark."""
    found: list[psutil.Process] = []
    for proc in psutil.process_iter():
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("PENGUIN_TEST_MARK") == mark:
                found.append(proc)
        except psutil.Error:
            continue
    return found


async def wait_until_no_marked_process(mark: str, deadline: float = 10.0) -> None:
    """Wait, with a deadline, until SIGKILLed processes have really gone."""
    with trio.fail_after(deadline):
        # They are not our children (the probe shell reaped them or init did), so
        # there is no event to wait on: poll the process table until the deadline.
        while await trio.to_thread.run_sync(marked_processes, mark):  # noqa: ASYNC110
            await trio.sleep(0.02)


def login_base(home: Path, profile: str) -> tuple[dict[str, str], str]:
    (home / ".bash_profile").write_text(profile)
    mark = uuid.uuid4().hex
    base = {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", os.defpath),
        "PENGUIN_TEST_MARK": mark,
    }
    return base, mark


@needs_bash
async def test_4_7_login_environment_sees_the_profile(tmp_path: Path) -> None:
    assert BASH is not None
    base, mark = login_base(
        tmp_path,
        'echo "welcome, this goes to stdout"\n'
        "export PENGUIN_FROM_PROFILE=from-profile\n"
        "export MULTI=$'line1\\nline2'\n",
    )
    base["PWD"] = "/somewhere/stale"
    env = await resolve_login_environment(BASH, base)
    assert env is not None
    assert env["PENGUIN_FROM_PROFILE"] == "from-profile"
    assert env["MULTI"] == "line1\nline2"
    assert env["HOME"] == str(tmp_path)
    assert env["PENGUIN_TEST_MARK"] == mark
    for managed in ("PWD", "OLDPWD", "SHLVL", "_"):
        assert managed not in env
    await wait_until_no_marked_process(mark)


@needs_bash
async def test_4_7_login_environment_hanging_profile(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert BASH is not None
    base, mark = login_base(tmp_path, "sleep 100\nexport NEVER=1\n")
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    with caplog.at_level(logging.WARNING, logger="penguin"):
        with trio.fail_after(10):
            env = await resolve_login_environment(BASH, base, timeout=0.5)
    assert env is None
    assert "did not finish within 0.5s" in caplog.text
    after = {child.pid for child in psutil.Process().children(recursive=True)}
    assert after <= before
    # The profile's sleep ran in the probe's group: it was killed too, not orphaned.
    await wait_until_no_marked_process(mark)


@needs_bash
async def test_4_7_login_environment_profile_exits_1(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert BASH is not None
    base, mark = login_base(tmp_path, 'echo "PATH=/evil"\nprintf "X=1\\0"\nexit 1\n')
    with caplog.at_level(logging.WARNING, logger="penguin"):
        env = await resolve_login_environment(BASH, base)
    assert env is None
    assert "exited with status 1 before printing its environment" in caplog.text
    await wait_until_no_marked_process(mark)


@needs_bash
async def test_4_7_login_environment_kills_profile_background_jobs(tmp_path: Path) -> None:
    assert BASH is not None
    # A job that keeps the probe's stdout open must neither stall the probe nor survive it.
    base, mark = login_base(tmp_path, "sleep 100 &\nexport WITH_JOB=1\n")
    with trio.fail_after(10):
        env = await resolve_login_environment(BASH, base)
    assert env is not None
    assert env["WITH_JOB"] == "1"
    await wait_until_no_marked_process(mark)


LOCK_HOLDER = (
    # A profile tool that holds a lock file and removes it when it ends (as pyenv's
    # rehash does), taking a moment to: SIGKILL right after SIGTERM leaves it behind.
    'bash -c \'echo > "$HOME/lock"; trap "sleep 0.1; rm -f \\"$HOME/lock\\"" EXIT; sleep 100\'\n'
)


@needs_bash
@pytest.mark.parametrize("end", ["cancelled", "timed out"])
async def test_9_6_a_probe_ended_early_lets_the_profile_clean_up(tmp_path: Path, end: str) -> None:
    # The Environment now starts the probe when it opens, so a short-lived one ends it
    # early (cancelled at close); a timeout ends it the same way.
    assert BASH is not None
    base, mark = login_base(tmp_path, LOCK_HOLDER)
    lock = tmp_path / "lock"

    async def lock_taken() -> None:
        while not lock.exists():  # noqa: ASYNC110 - a file has no event to wait on
            await trio.sleep(0.01)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            timeout = 0.5 if end == "timed out" else 10.0

            async def probe() -> None:
                await resolve_login_environment(BASH, base, timeout=timeout)
                nursery.cancel_scope.cancel()

            nursery.start_soon(probe)
            await lock_taken()
            if end == "cancelled":
                nursery.cancel_scope.cancel()
    assert not lock.exists()  # its exit handler ran
    await wait_until_no_marked_process(mark)


async def test_4_7_login_environment_missing_bash(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="penguin"):
        env = await resolve_login_environment(str(tmp_path / "no-such-bash"), {"PATH": "/usr/bin"})
    assert env is None
    assert "cannot run" in caplog.text


async def test_marked_process_detection_is_not_vacuous() -> None:
    # The leak checks above rely on finding a process by its environment mark.
    mark = uuid.uuid4().hex
    sleeper = await trio.lowlevel.open_process(
        ["sleep", "100"], env={**os.environ, "PENGUIN_TEST_MARK": mark}, start_new_session=True
    )
    try:
        # A process just spawned (vfork) may read an empty environ for a moment: the
        # parent resumes before the kernel has laid out the new program's environment.
        with trio.move_on_after(10):
            while not marked_processes(mark):  # noqa: ASYNC110
                await trio.sleep(0.01)
        assert [p.pid for p in marked_processes(mark)] == [sleeper.pid]
    finally:
        sleeper.kill()
        await sleeper.wait()
    await wait_until_no_marked_process(mark)
