"""Fixtures of the command tests: a hermetic login shell and the no-survivor check."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psutil
import pytest

import penguin
from penguin.environment.supervisor import cgroup_base

from .processes import RUN_VARIABLE, alive, marked_processes

SURVIVOR_GRACE = 3.0
"""Seconds a SIGKILLed process may take to leave the process table."""


@pytest.fixture
def hermetic_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """An empty HOME: the login shell reads no user profile (fast, and the same everywhere).

    A test that wants a profile writes one here, or sets HOME itself, before it opens
    an Environment (the login environment is resolved at the first command).
    """
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def no_stray_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Fail the test if a process it started through penguin outlives it.

    Every child inherits this test's ``PENGUIN_TEST_RUN`` id from the host environment;
    after the test, no live process may carry both that id and an owner marker.
    Survivors are killed (so one failure does not cascade) and reported.
    """
    run = uuid.uuid4().hex
    monkeypatch.setenv(RUN_VARIABLE, run)
    yield run
    deadline = time.monotonic() + SURVIVOR_GRACE
    while (survivors := marked_processes(run=run)) and time.monotonic() < deadline:
        time.sleep(0.01)
    if survivors:
        described = []
        for proc in survivors:
            try:
                described.append(f"{proc.pid} {proc.cmdline()!r}")
                proc.send_signal(signal.SIGKILL)
            except psutil.Error:
                continue
        if described:
            pytest.fail("processes outlived the test: " + "; ".join(described))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
async def env(workspace: Path) -> AsyncIterator[penguin.Environment]:
    """An Environment with the default toolset in a fresh workspace."""
    async with penguin.Environment.open(penguin.EnvironmentConfig(workspace_dir=workspace)) as env:
        yield env


@pytest.fixture
def cgroups(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Cgroups on (``PENGUIN_CGROUPS=1``): this process's, where the supervisors' are made.

    Skips where none can be made. Processes the test starts inherit the setting.
    """
    monkeypatch.setenv("PENGUIN_CGROUPS", "1")
    base = cgroup_base()
    if base is None:
        pytest.skip("no cgroup (v2) this process may make one beneath (root, or delegation)")
    return base


@pytest.fixture
def escapees() -> Iterator[list[int]]:
    """The escapees' pids; any still alive at the end is killed (the test failed)."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
