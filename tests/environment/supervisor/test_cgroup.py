"""A supervisor's cgroup: what leaves group, tree and marker still ends with its Environment.

Real processes in real cgroups (version 2, where this machine lets the test process make
one: root in a container or a VM; skipped elsewhere, with the reason). The escapee in
every test is ``env -i setsid -f``: a new session, out of the command's tree, with no
``PENGUIN_OWNER`` in its environment, which no sweep of the process table can find.

Cgroups are made only with ``PENGUIN_CGROUPS=1`` (the ``cgroups`` fixture sets it).
Without a sandbox each command is placed after it started (``_cgroup``'s limits), so
these tests start their escapee once the command's shell is a member: what they prove
is that a member's escapee is ended. A sandboxed command is a member from its first
instruction (its spawner was placed before it started anything): that test, which starts
its escapee at once, is ``sandbox/test_x4_1_spawner.py``'s.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import penguin
from penguin.environment.supervisor import _cgroup, cgroup_base
from penguin.environment.supervisor._cgroup import CommandCgroup
from penguin.environment.supervisor._watchdog import host_watchdog

from ..processes import alive, wait_gone
from ..sandbox.test_enforcement import call

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="cgroups")

ESCAPE = (
    "env -i setsid -f sh -c 'echo $$ > escapee.pid; exec sleep 1000' </dev/null >/dev/null 2>&1; "
    "while [ ! -s escapee.pid ]; do sleep 0.01; done; cat escapee.pid"
)
AS_A_MEMBER = (
    "i=0; until grep -q '^0::.*/penguin-' /proc/$$/cgroup || [ $i -ge 1000 ]; do"
    " sleep 0.01; i=$((i + 1)); done; "
)
"""Wait until the command's shell is in the supervisor's cgroup (placed after its start)."""


def cgroup_of(pid: int) -> str:
    with open(f"/proc/{pid}/cgroup", encoding="utf-8") as f:
        return next(line[3:] for line in f.read().splitlines() if line.startswith("0::"))


def penguin_cgroups(base: Path, tag: str = "") -> set[str]:
    """The cgroups penguin made in ``base``: of the host ``tag``, or (empty) of any host.

    Another penguin on the machine (a CI run beside this one) makes and removes its
    own meanwhile: a test compares only this process's (:func:`own_cgroups`).
    """
    prefix = f"penguin-{tag}-" if tag else "penguin-"
    return {entry.name for entry in base.iterdir() if entry.name.startswith(prefix)}


def own_cgroups(base: Path) -> set[str]:
    """The cgroups this test process's supervisors made in ``base``."""
    return penguin_cgroups(base, host_watchdog().tag())


@pytest.mark.parametrize("when", ["at-once", "once-a-member"])
async def test_with_penguin_cgroups_1_an_unsandboxed_escapee_ends_with_its_environment(
    tmp_path: Path, cgroups: Path, escapees: list[int], when: str
) -> None:
    # Commands start from the supervisor's spawner, placed before its first start: an
    # escape at once is inside too (placing each command after its start let most out).
    before = own_cgroups(cgroups)
    config = penguin.EnvironmentConfig(workspace_dir=tmp_path)
    async with penguin.Environment.open(config) as env:
        wait = "" if when == "at-once" else AS_A_MEMBER
        out = await call(env, "exec_command", cmd=wait + ESCAPE)
        assert out.stop_reason == "completed", out.output
        escapees.append(pid := int(out.output))
        assert alive(pid)  # the command's end did not find it: no group, tree nor marker
        placed = cgroup_of(pid)
        assert placed.rsplit("/", 1)[-1].startswith("penguin-host-"), placed
        assert env.list_background_commands() == []
    await wait_gone([pid])
    assert own_cgroups(cgroups) == before  # and the cgroup is removed


async def test_by_default_an_environment_makes_none(
    tmp_path: Path, cgroups: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each move into a cgroup makes every fork on the machine wait (_cgroup.enabled).
    monkeypatch.delenv("PENGUIN_CGROUPS")
    before = own_cgroups(cgroups)
    config = penguin.EnvironmentConfig(workspace_dir=tmp_path)
    async with penguin.Environment.open(config) as env:
        out = await call(env, "exec_command", cmd="sleep 0.05; cat /proc/$$/cgroup")
        assert own_cgroups(cgroups) == before
    assert f"0::{cgroup_of(os.getpid())}" in out.output.splitlines()


async def test_penguin_cgroups_0_makes_none(
    tmp_path: Path, cgroups: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PENGUIN_CGROUPS", "0")
    assert cgroup_base() is None
    config = penguin.EnvironmentConfig(workspace_dir=tmp_path)
    async with penguin.Environment.open(config) as env:
        out = await call(env, "exec_command", cmd="sleep 0.05; cat /proc/$$/cgroup")
    assert f"0::{cgroup_of(os.getpid())}" in out.output.splitlines()


def test_a_cgroup_made_beneath_is_killed_and_removed_with_it(cgroups: Path) -> None:
    # A penguin run as a command makes its own supervisors' cgroups inside this one.
    cgroup = CommandCgroup.make("host-000000000000")
    assert cgroup is not None
    inner = cgroup.path / "penguin-host-111111111111-1"
    inner.mkdir()
    sleeper = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    try:
        (inner / "cgroup.procs").write_text(str(sleeper.pid))
        assert cgroup.populated()
        gone = cgroup.close()
        assert sleeper.wait(timeout=10) == -9  # killed by the kernel, with the outer cgroup
        deadline = time.monotonic() + 10
        while not gone and time.monotonic() < deadline:
            gone = cgroup.remove()  # the inner one first, then the outer
        assert gone
        assert not cgroup.path.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_placing_a_process_that_has_exited_is_refused_quietly(cgroups: Path) -> None:
    cgroup = CommandCgroup.make("host-000000000000")
    assert cgroup is not None
    try:
        done = subprocess.Popen(["true"])
        done.wait()
        assert cgroup.place(done.pid) is False
        assert not cgroup.populated()
    finally:
        assert cgroup.close()


@pytest.mark.parametrize(
    ("proc_cgroup", "mountinfo", "expected"),
    [
        pytest.param(  # systemd's unified hierarchy
            "0::/user.slice/user-1000.slice/app.slice/x.scope\n",
            "35 24 0:30 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
            "/sys/fs/cgroup/user.slice/user-1000.slice/app.slice/x.scope",
            id="unified",
        ),
        pytest.param(  # a hybrid: v1 controllers, v2 beside them
            "4:memory:/a\n0::/\n",
            "31 24 0:26 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
            "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
            "/sys/fs/cgroup/unified",
            id="hybrid",
        ),
        pytest.param(  # a container's view of the host's subtree, bind-mounted
            "0::/docker/abc/sub\n",
            "50 40 0:30 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
            "/sys/fs/cgroup/sub",
            id="subtree",
        ),
        pytest.param(
            "0::/elsewhere\n",
            "50 40 0:30 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
            None,
            id="outside-the-mount",
        ),
        pytest.param(
            "4:memory:/a\n",
            "31 24 0:26 / /sys/fs/cgroup/memory rw - cgroup cgroup rw\n",
            None,
            id="v1-only",
        ),
        pytest.param(
            "0::/gone (deleted)\n",
            "35 24 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
            None,
            id="deleted",
        ),
        pytest.param(  # mountinfo's octal escapes
            "0::/\n",
            "35 24 0:30 / /mnt/with\\040space rw - cgroup2 cgroup2 rw\n",
            "/mnt/with space",
            id="escaped-mount-point",
        ),
    ],
)
def test_this_process_s_cgroup_is_read_from_proc(
    proc_cgroup: str, mountinfo: str, expected: str | None
) -> None:
    found = _cgroup._own_cgroup(proc_cgroup, mountinfo)
    assert (None if found is None else str(found)) == expected
