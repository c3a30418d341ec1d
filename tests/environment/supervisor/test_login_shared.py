"""Issue 20.1: Environments given one SharedLogin run one login shell between them.

Each profile here appends a line to ``$HOME/probes`` every time a login shell reads it,
so the file counts the login shells that really ran, whatever penguin thinks it did.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path

import pytest
import trio
import trio.testing

import penguin
from penguin.environment import SharedLogin
from penguin.llm import ScriptedLLM, text, turn

from ..processes import exec_command

PROFILE = 'echo x >> "$HOME/probes"\nexport FROM_PROFILE={value}\n'


def _profile(home: Path, value: str, *, before: str = "") -> None:
    (home / ".bash_profile").write_text(before + PROFILE.format(value=value))


def _probes(home: Path) -> int:
    path = home / "probes"
    return len(path.read_text().splitlines()) if path.exists() else 0


async def _echo(env: penguin.Environment, variable: str) -> str:
    out = await exec_command(env, f"printf '<%s>' \"${variable}\"")
    assert out.stop_reason == "completed", out.output
    found = re.search(r"<(.*)>", out.output)
    assert found is not None, out.output
    return found.group(1)


async def _from_profile(env: penguin.Environment) -> str:
    return await _echo(env, "FROM_PROFILE")


def _config(workspace: Path, shared: SharedLogin | None) -> penguin.EnvironmentConfig:
    return penguin.EnvironmentConfig(workspace_dir=workspace, shared_login=shared)


async def test_20_1_environments_given_one_shared_login_run_one_login_shell(
    hermetic_home: Path, workspace: Path, no_stray_processes: str
) -> None:
    _profile(hermetic_home, "one")
    shared = SharedLogin()
    seen: list[str] = []

    async def one() -> None:
        async with penguin.Environment.open(_config(workspace, shared)) as env:
            seen.append(await _from_profile(env))

    async with trio.open_nursery() as nursery:  # three at once: they wait for one probe
        for _ in range(3):
            nursery.start_soon(one)
    for _ in range(2):  # and two after them: the kept one
        await one()
    assert seen == ["one"] * 5
    assert _probes(hermetic_home) == 1
    assert shared.probes == 1


class _Probes(trio.abc.Instrument):
    """Counts the login probe tasks started."""

    def __init__(self) -> None:
        self.started = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.started += task.coro.__qualname__.endswith("_resolve_login")


async def test_20_1_an_environment_given_a_kept_login_starts_no_probe_task(
    hermetic_home: Path, workspace: Path, no_stray_processes: str
) -> None:
    _profile(hermetic_home, "kept")
    shared = SharedLogin()
    probes = _Probes()
    trio.lowlevel.add_instrument(probes)
    try:
        for expected_tasks in (1, 1, 1):  # the first resolves it; the others take it as kept
            async with penguin.Environment.open(_config(workspace, shared)) as env:
                assert await _from_profile(env) == "kept"
            assert probes.started == expected_tasks
        _profile(hermetic_home, "changed")  # a changed profile: a probe task again
        async with penguin.Environment.open(_config(workspace, shared)) as env:
            assert await _from_profile(env) == "changed"
        assert probes.started == 2
    finally:
        trio.lowlevel.remove_instrument(probes)
    assert _probes(hermetic_home) == 2


async def test_20_1_without_a_shared_login_each_environment_runs_its_own(
    hermetic_home: Path, workspace: Path
) -> None:
    _profile(hermetic_home, "own")
    for _ in range(2):
        async with penguin.Environment.open(_config(workspace, None)) as env:
            assert await _from_profile(env) == "own"
    assert _probes(hermetic_home) == 2


async def test_20_1_a_changed_profile_is_read_again(hermetic_home: Path, workspace: Path) -> None:
    shared = SharedLogin()
    for value in ("first", "second"):
        _profile(hermetic_home, value)
        async with penguin.Environment.open(_config(workspace, shared)) as env:
            assert await _from_profile(env) == value
    assert _probes(hermetic_home) == 2


async def test_20_1_a_login_environment_older_than_max_age_is_resolved_again(
    hermetic_home: Path, workspace: Path
) -> None:
    _profile(hermetic_home, "aged")
    shared = SharedLogin(max_age=0.05)
    async with penguin.Environment.open(_config(workspace, shared)) as env:
        assert await _from_profile(env) == "aged"
    await trio.sleep(0.1)  # past max_age: whatever the machine's load, it is older now
    async with penguin.Environment.open(_config(workspace, shared)) as env:
        assert await _from_profile(env) == "aged"
    assert _probes(hermetic_home) == 2
    never = SharedLogin(max_age=0)
    for _ in range(2):
        async with penguin.Environment.open(_config(workspace, never)) as env:
            assert await _from_profile(env) == "aged"
    assert never.probes == 2
    with pytest.raises(ValueError, match="max_age must be at least 0"):
        SharedLogin(max_age=-1)


async def test_20_1_another_host_environment_gets_its_own_login_environment(
    hermetic_home: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _profile(hermetic_home, "x")
    shared = SharedLogin()
    for flavour in ("vanilla", "chocolate"):
        monkeypatch.setenv("PENGUIN_TEST_FLAVOUR", flavour)
        async with penguin.Environment.open(_config(workspace, shared)) as env:
            assert await _echo(env, "PENGUIN_TEST_FLAVOUR") == flavour
    assert shared.probes == 2


async def test_20_1_a_probe_cancelled_with_its_environment_is_not_shared(
    hermetic_home: Path, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The first Environment starts the probe and closes while the profile still runs;
    # the second, which was waiting for that probe, runs its own and gets the profile's
    # environment, not the host's.
    _profile(hermetic_home, "late", before="sleep 1\n")
    shared = SharedLogin()
    caplog.set_level(logging.WARNING, logger="penguin")
    seen: list[str] = []

    async def second(task_status: trio.TaskStatus[None]) -> None:
        async with penguin.Environment.open(_config(workspace, shared)) as env:
            task_status.started()
            seen.append(await _from_profile(env))

    async with (
        trio.open_nursery() as nursery,
        penguin.Environment.open(_config(workspace, shared)),
    ):
        await trio.testing.wait_all_tasks_blocked()  # its probe is running
        assert shared.probes == 1
        await nursery.start(second)
        await trio.testing.wait_all_tasks_blocked()  # the second waits for it
        assert shared.probes == 1
        # leaving the block closes the first Environment (and cancels its probe) first
    assert seen == ["late"]
    assert shared.probes == 2
    assert not [r for r in caplog.records if "login environment" in r.getMessage()]


async def test_20_1_sessions_of_one_agent_share_its_login_environment(
    hermetic_home: Path, tmp_path: Path
) -> None:
    _profile(hermetic_home, "agent")
    agent = penguin.Agent.open(tmp_path / "root")
    for n in range(3):
        workspace = tmp_path / f"ws{n}"
        workspace.mkdir()
        llm = ScriptedLLM([turn(text("done"))])
        async with agent.session(workspace, llm=llm) as session:
            assert await _from_profile(session.environment) == "agent"
    assert _probes(hermetic_home) == 1


async def test_20_1_at_most_sixteen_login_environments_are_kept(hermetic_home: Path) -> None:
    _profile(hermetic_home, "kept")
    bash = shutil.which("bash")
    assert bash is not None
    shared = SharedLogin()
    bases = [{**os.environ, "PENGUIN_TEST_FLAVOUR": str(n)} for n in range(17)]
    for base in bases:
        resolved = await shared.resolve(bash, base)
        assert resolved is not None
        assert resolved["FROM_PROFILE"] == "kept"
    assert shared.probes == 17
    await shared.resolve(bash, bases[-1])  # the newest is kept
    assert shared.probes == 17
    await shared.resolve(bash, bases[0])  # the oldest made room for the seventeenth
    assert shared.probes == 18
