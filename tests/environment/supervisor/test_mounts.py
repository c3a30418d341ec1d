"""DESIGN §2: a command whose directory is not on a local disk is not started on the loop.

``vfork`` suspends the thread that starts a command until the child has called
``exec``, and the child's ``chdir`` into its directory comes first: into a directory on
a network file system whose server stopped answering, that would hang the loop and
every session on it. These tests read the kernel's real mount table, start real
commands, and watch the loop's own thread for ``Popen``'s start of a child.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import trio

import penguin
from penguin import _mounts
from penguin._concurrency import run_leavable_in_worker
from penguin._mounts import (
    MountTable,
    on_local_disk,
    read_mount_table,
)
from penguin.environment.supervisor._process import spawn_process

from ...stopped_server import stopped_server
from ..processes import exec_command, wait_until

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfds: all in workers")

_MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 27 0:27 / /home rw,relatime shared:5 - autofs systemd-1 rw,fd=40
31 30 0:50 / /home/ada rw,relatime shared:9 master:5 - nfs4 srv:/export/ada rw
32 27 0:51 / /srv/my\\040data rw - xfs /dev/vdb rw
33 27 0:52 / /mnt/box rw,nosuid - fuse.sshfs ada@box: rw
34 27 0:53 / /mnt/box rw - tmpfs tmpfs rw
this line is not a mount
35 27 0:54 / /scratch rw -
"""


def test_design_2_the_mount_table_is_read_as_the_kernel_writes_it() -> None:
    table = MountTable.parse(_MOUNTINFO)
    assert table.types == {
        "/proc": "proc",
        "/": "ext4",
        "/home": "autofs",
        "/home/ada": "nfs4",
        "/srv/my data": "xfs",  # the kernel's octal escape of a space
        "/mnt/box": "tmpfs",  # mounted over the sshfs one: the last mount at a path
    }


@pytest.mark.parametrize(
    ("directory", "kind", "local"),
    [
        ("/", "ext4", True),
        ("/work/project", "ext4", True),
        ("/home", "autofs", False),
        ("/home/ada/project/src", "nfs4", False),
        ("/home/adam", "autofs", False),  # a prefix by components, not by characters
        ("/homework", "ext4", True),
        ("/home/ada/../bob", "autofs", False),  # placed as the path normalises
        ("/srv/my data/x", "xfs", True),
        ("/mnt/box/", "tmpfs", True),
        ("/proc/self", "proc", False),
        ("relative/path", None, False),  # never given, but never placed on a local disk
    ],
)
def test_design_2_a_directory_is_placed_by_its_longest_mount_point(
    directory: str, kind: str | None, local: bool
) -> None:
    table = MountTable.parse(_MOUNTINFO)
    assert table.file_system(directory) == kind
    assert table.is_local(directory) is local
    assert table.is_local(directory) is local  # the kept answer is the same


def test_design_2_an_unreadable_table_places_nothing_on_a_local_disk() -> None:
    assert not MountTable({}).is_local("/tmp")
    assert read_mount_table().file_system("/proc/self") == "proc"  # this machine's own


@contextmanager
def children_started_on_this_thread() -> Iterator[list[str]]:
    """The directory of every child ``Popen`` starts on this thread while the block runs."""
    seen: list[str] = []
    me = threading.get_ident()
    target = sys.modules["subprocess"].Popen._execute_child.__code__

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is target:
            assert threading.get_ident() == me
            seen.append(os.fspath(frame.f_locals["cwd"]))

    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(None)


@pytest.fixture
def table() -> Iterator[None]:
    """Each test starts without a table read, and leaves none behind."""
    _mounts._table = None
    yield
    _mounts._table = None


async def _pwd(cwd: Path) -> str:
    spawned = await spawn_process(["pwd", "-P"], cwd=cwd, env=dict(os.environ), tty=False)
    try:
        output = b""
        while chunk := await spawned.output.receive_some():
            output += chunk
        assert await spawned.process.wait() == 0
    finally:
        await spawned.output.aclose()
        await spawned.stdin.aclose()
    return output.decode().strip()


async def test_design_2_a_command_on_a_local_disk_starts_on_the_loop_thread(
    tmp_path: Path, table: None
) -> None:
    assert await on_local_disk(tmp_path)  # this machine's tmp: ext4, xfs, tmpfs or overlay
    with children_started_on_this_thread() as seen:
        assert await _pwd(tmp_path) == str(tmp_path)  # pytest gives it resolved
    assert seen == [os.fspath(tmp_path)]


async def test_design_2_a_command_elsewhere_starts_in_a_worker_thread(
    tmp_path: Path, table: None
) -> None:
    # /proc is not a disk of any kind: it stands for a network file system here
    assert not await on_local_disk(Path("/proc"))
    with children_started_on_this_thread() as seen:
        assert await _pwd(Path("/proc")) == "/proc"
    assert seen == []


async def test_design_2_a_workspace_on_a_network_file_system_starts_in_a_worker_thread(
    tmp_path: Path, table: None
) -> None:
    # The table as a machine whose every directory is on NFS would read it.
    assert await on_local_disk(tmp_path)  # the kernel's table read, and watched
    _mounts._table = MountTable({"/": "nfs4"})
    with children_started_on_this_thread() as seen:
        assert await _pwd(tmp_path) == str(tmp_path)  # pytest gives it resolved
        with pytest.raises(FileNotFoundError) as raised:  # as Popen raises it on the loop
            await _pwd(tmp_path / "gone")
    assert seen == []
    assert raised.value.filename == tmp_path / "gone"


async def test_design_2_the_mount_table_is_read_again_once_a_mount_comes_or_goes(
    tmp_path: Path, table: None
) -> None:
    remote = tmp_path / "remote"
    remote.mkdir()
    assert await on_local_disk(remote)  # read: a folder of this machine's tmp
    kept = _mounts._table
    assert await on_local_disk(tmp_path)
    assert _mounts._table is kept  # nothing changed: not read again
    with stopped_server(remote):
        assert not await on_local_disk(remote)  # the kernel said: read again
        assert _mounts._table is not kept
    assert await on_local_disk(remote)  # and again once it is gone


async def test_design_2_a_directory_whose_server_stopped_answering_holds_up_only_its_command(
    env: penguin.Environment, tmp_path: Path, table: None
) -> None:
    remote = tmp_path / "remote"
    remote.mkdir()
    outputs: dict[str, str] = {}

    async def run_there() -> None:
        outputs["there"] = (await exec_command(env, "pwd", workdir=str(remote))).output

    with stopped_server(remote) as server:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_there)
            await wait_until(server.waiting)  # its child waits in chdir, on the mount
            outputs["here"] = (await exec_command(env, "echo here")).output
            assert "there" not in outputs
            server.answer()  # from the loop, which went on: the server refuses at last
    assert not server.given_up
    assert "here" in outputs["here"]
    assert "Connection refused" in outputs["there"]
    assert str(remote) in outputs["there"]


async def test_design_2_a_directory_through_a_link_is_placed_where_the_link_leads(
    tmp_path: Path, table: None
) -> None:
    # /proc stands for a network file system, as above; the link itself is on tmp's disk.
    (tmp_path / "link").symlink_to("/proc")
    (tmp_path / "near").symlink_to(tmp_path)
    assert await on_local_disk(tmp_path / "link")  # by its path alone
    assert not await on_local_disk(tmp_path / "link", follow_links=True)
    assert await on_local_disk(tmp_path / "near", follow_links=True)
    assert await on_local_disk(tmp_path / "missing", follow_links=True)  # its start will say


async def test_design_2_only_a_workdir_is_resolved_before_its_command_starts(
    env: penguin.Environment, monkeypatch: pytest.MonkeyPatch, table: None
) -> None:
    """A command in the workspace (resolved when it opened) costs no worker trip to place."""
    workspace = env.config.workspace_dir
    (workspace / "sub").mkdir()
    (workspace / "link").symlink_to("/proc")
    resolved: list[str] = []
    leavable = run_leavable_in_worker

    async def counted(work: Any, **options: Any) -> Any:
        result = await leavable(work, **options)
        resolved.append(result)
        return result

    monkeypatch.setattr(_mounts, "run_leavable_in_worker", counted)
    with children_started_on_this_thread() as seen:
        here = await exec_command(env, "pwd")
        there = await exec_command(env, "pwd", workdir="sub")
        linked = await exec_command(env, "pwd", workdir="link")
    outputs = [o.output.strip() for o in (here, there, linked)]
    assert outputs == [str(workspace), f"{workspace}/sub", "/proc"]
    assert resolved == [f"{workspace}/sub", "/proc"]  # the two workdirs, each once
    assert seen == [str(workspace), f"{workspace}/sub"]  # the linked one: in a worker
