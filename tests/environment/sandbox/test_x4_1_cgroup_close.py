"""A sandboxed supervisor's cgroup: its spawners end unkilled; what they did not start is placed.

The spawner of a sandboxed Environment is placed in the command supervisor's cgroup
before its first command (``supervisor/_cgroup``), so the cgroup is never empty while
the sandbox is open. When nothing but the spawners is left in it at the supervisor's
close, the cgroup is not killed: the spawners end as the sandbox closes (their socket
is hung up) and the sandbox then removes the cgroup. When anything else is left, the
kill ends it with the spawners, as before. A command the spawner does not start (its
directory is not on a local disk: it enters with ``nsenter``) is placed after its start.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from penguin.environment.sandbox import _linux
from penguin.environment.supervisor._cgroup import CommandCgroup

from ..processes import alive, wait_gone
from ..supervisor.test_cgroup import AS_A_MEMBER, ESCAPE, own_cgroups
from .test_enforcement import call, sandboxed

pytestmark = pytest.mark.usefixtures("kernel_sandbox")

KILLED: set[int] = {-9, 128 + 9}
"""``bwrap``'s status when its spawner was killed: its own death by the signal, or the
child's death passed on as 128 plus the signal's number."""


def _spawner_of(env: object) -> _linux._Spawner:
    sandbox = env._commands.sandbox  # type: ignore[attr-defined]
    assert sandbox is not None
    current = sandbox._current
    assert current is not None
    assert current.spawner is not None
    spawner: _linux._Spawner = current.spawner
    return spawner


async def test_x4_1_a_cgroup_that_holds_only_the_spawner_goes_without_a_kill(
    tmp_path: Path, cgroups: Path
) -> None:
    before = own_cgroups(cgroups)
    async with sandboxed(tmp_path) as env:
        out = await call(env, "exec_command", cmd="echo ran")
        assert out.output == "ran\n"
        spawner = _spawner_of(env)
        assert own_cgroups(cgroups) != before  # made, and the spawner in it
    assert spawner._process.returncode == 0  # it ended as the socket closed: no SIGKILL
    assert not alive(spawner.pid)
    assert own_cgroups(cgroups) == before


async def test_x4_1_a_cgroup_that_holds_an_escapee_is_killed_spawner_and_all(
    tmp_path: Path, cgroups: Path, escapees: list[int]
) -> None:
    before = own_cgroups(cgroups)
    async with sandboxed(tmp_path) as env:
        out = await call(env, "exec_command", cmd=ESCAPE)
        assert out.stop_reason == "completed", out.output
        escapees.append(pid := int(out.output))
        spawner = _spawner_of(env)
    await wait_gone([pid])
    assert spawner._process.returncode in KILLED
    assert own_cgroups(cgroups) == before


def test_only_holds_says_whether_nothing_but_the_given_pids_lives_in_the_cgroup(
    cgroups: Path,
) -> None:
    cgroup = CommandCgroup.make("host-000000000000")
    assert cgroup is not None
    first = subprocess.Popen(["sleep", "1000"])
    second = subprocess.Popen(["sleep", "1000"])
    try:
        assert cgroup.place(first.pid)
        assert cgroup.place(second.pid)
        assert not cgroup.only_holds([first.pid])
        assert cgroup.only_holds([first.pid, second.pid])
        third = subprocess.Popen(["sleep", "1000"])
        try:
            assert cgroup.place(third.pid) is False  # sealed: it takes no more
        finally:
            third.kill()
            third.wait()
        inner = cgroup.path / "penguin-host-111111111111-1"
        inner.mkdir()
        (inner / "cgroup.procs").write_text(str(second.pid))
        assert not cgroup.only_holds([first.pid, second.pid])  # someone lives beneath
    finally:
        for process in (first, second):
            process.kill()
            process.wait()
        assert cgroup.close_within(10, 0.01)
    assert not cgroup.path.exists()


async def test_x4_1_a_command_the_spawner_did_not_start_is_placed_after_its_start(
    tmp_path: Path, cgroups: Path
) -> None:
    # A directory not on a local disk (/proc stands for one) enters with nsenter: the
    # spawner did not start it, so it is placed, just after it started.
    async with sandboxed(tmp_path) as env:
        out = await call(
            env, "exec_command", cmd=AS_A_MEMBER + "grep '^0::' /proc/$$/cgroup", workdir="/proc"
        )
    assert out.stop_reason == "completed", out.output
    assert out.output.strip().rsplit("/", 1)[-1].startswith("penguin-host-"), out.output
