"""The open-file limit's arithmetic and its raising (penguin._fdlimit, issue 20.3)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

from penguin._fdlimit import (
    FDS_PER_SESSION,
    SPARE_FDS,
    OpenFileRoom,
    out_of_resources,
)


def test_20_3_the_room_is_what_the_limit_leaves_after_the_open_and_the_spare() -> None:
    room = OpenFileRoom(limit=1024, open_now=20)
    assert room.sessions == (1024 - 20 - SPARE_FDS) // FDS_PER_SESSION == 58
    assert room.limit_for(room.sessions) <= 1024 < room.limit_for(room.sessions + 1)
    assert room.limit_for(256) == 20 + SPARE_FDS + 256 * FDS_PER_SESSION
    assert OpenFileRoom(limit=64, open_now=30).sessions == 1  # never none at all


def test_20_3_the_soft_limit_is_raised_to_the_hard_one_and_the_room_read_after() -> None:
    child = (
        "import resource; "
        "resource.setrlimit(resource.RLIMIT_NOFILE, (200, 400)); "
        "from penguin._fdlimit import open_file_room; "
        "room = open_file_room(); "
        "print(room.limit, resource.getrlimit(resource.RLIMIT_NOFILE)[0], room.open_now > 2)"
    )
    done = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, check=False
    )
    assert done.stdout.split() == ["400", "400", "True"], done.stderr


def test_20_3_running_out_is_told_apart_from_a_lasting_refusal() -> None:
    for code in (errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.ENOMEM):
        assert out_of_resources(OSError(code, os.strerror(code)))
    for code in (errno.ENOENT, errno.EPERM, errno.EACCES, errno.ENOSPC, errno.EINVAL):
        assert not out_of_resources(OSError(code, os.strerror(code)))
    assert not out_of_resources(OSError("no errno"))
    assert not out_of_resources(ValueError("not an OSError"))
