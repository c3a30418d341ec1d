"""Spec mcp.md M1.5 and DESIGN §2: a killed host leaves no MCP server or child running.

The host (``host.py``) is SIGKILLed, so it runs no code of its own afterwards: only
the host's watchdog, which kills every process carrying the host's marker, can end
the server's children (the server itself also sees its stdin close).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from ..processes import alive, wait_gone
from .support import REPO


async def _first_line(stream: trio.abc.ReceiveStream) -> str:
    data = b""
    with trio.fail_after(60):
        while b"\n" not in data:
            chunk = await stream.receive_some()
            if not chunk:
                break
            data += chunk
    return data.decode().split("\n", 1)[0]


@pytest.mark.usefixtures("no_stray_processes")
async def test_m1_5_a_killed_host_leaves_no_mcp_process_running(tmp_path: Path) -> None:
    host = await trio.lowlevel.open_process(
        [sys.executable, "-m", "tests.environment.mcp.host"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert host.stdout is not None
    async with host.stdout:
        try:
            word, *numbers = (await _first_line(host.stdout)).split()
            assert word == "ready"
            pids = [int(number) for number in numbers]
            assert len(pids) == 3
            assert all(alive(pid) for pid in pids)
            host.send_signal(signal.SIGKILL)
            await host.wait()
            await wait_gone(pids, within=5.0)
        finally:
            if host.returncode is None:
                host.kill()
                await host.wait()
