"""A process out of file descriptors is said as such, never as a sandbox the machine lacks.

Issue 20.3 (thousands of sessions in one process): when ``open`` fails with ``EMFILE``,
that is the process's state for a moment, not the machine's. Before, the sandbox's
probe remembered it for the rest of the process (every later sandboxed session of a
server or batch failed with "sandbox unavailable ... use --sandbox off"), and a
sandbox that could not start for want of a descriptor said the same wrong thing.
Each case runs in a real child process under a small open-file limit, filled to it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("kernel_sandbox")

CHILD = """
import errno, os, resource, sys
import trio
import penguin

workspace, probe_first = sys.argv[1], sys.argv[2] == "probe-first"
resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
config = penguin.EnvironmentConfig(
    workspace_dir=workspace,
    sandbox=penguin.SandboxPolicy("workspace-write", data_root=os.path.join(workspace, "data")),
)


async def open_one() -> None:
    async with penguin.Environment.open(config):
        print("opened", flush=True)


async def main() -> None:
    if probe_first:
        await open_one()  # the machine's probe answers here, and is kept
    held = []
    try:
        while True:
            held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError as error:
        assert error.errno == errno.EMFILE
    try:
        await open_one()
    except penguin.SandboxUnavailableError as error:
        print("unavailable:", error, flush=True)
    except OSError as error:
        print("out of files:", errno.errorcode[error.errno], flush=True)
    for fd in held:
        os.close(fd)
    await open_one()  # files again: the sandbox works, nothing was remembered


trio.run(main)
"""


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        ("probe-first", ["opened", "out of files: EMFILE", "opened"]),  # the sandbox's start
        ("no-probe", ["out of files: EMFILE", "opened"]),  # the probe itself
    ],
)
def test_20_3_a_process_out_of_files_is_not_a_sandbox_unavailable_and_is_not_remembered(
    tmp_path: Path, when: str, expected: list[str]
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(workspace), when],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout.splitlines() == expected, done.stderr
    assert done.returncode == 0, done.stderr
