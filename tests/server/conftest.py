"""Fixtures of the server tests: a scripted model, a data root, a server under hypercorn.

The server runs in the test's own Trio loop (``open_server`` with port 0), reached over
real sockets on 127.0.0.1 with httpx. HOME is an empty directory, so the login shell
reads no profile, and every process a session starts is checked to be gone after the
test (``no_stray_processes``).
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from penguin.llm import testing as t
from penguin.server import RunningServer, ServerOptions, open_server
from tests.environment.processes import RUN_VARIABLE, marked_processes

from .support import AUTH, TOKEN, ScriptedModel, configure_model


@pytest.fixture(autouse=True)
def hermetic_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("PENGUIN_SERVER_TOKEN", raising=False)
    monkeypatch.delenv("PENGUIN_HOME", raising=False)
    return home


@pytest.fixture(autouse=True)
def no_stray_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Fail the test if a process a session started outlives it."""
    run = uuid.uuid4().hex
    monkeypatch.setenv(RUN_VARIABLE, run)
    yield run
    deadline = time.monotonic() + 3.0
    while (survivors := marked_processes(run=run)) and time.monotonic() < deadline:
        time.sleep(0.01)
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
def model() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture
async def model_server(model: ScriptedModel) -> AsyncIterator[t.LocalServer]:
    async with t.serve_openai_compatible(model) as server:
        yield server


@pytest.fixture
def root(tmp_path: Path, model_server: t.LocalServer) -> Path:
    root = tmp_path / "root"
    configure_model(root, model_server.base_url)
    return root


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
async def server(root: Path) -> AsyncIterator[RunningServer]:
    async with open_server(ServerOptions(port=0, root=root, token=TOKEN, grace=5.0)) as server:
        yield server


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.base_url, headers=AUTH, timeout=30) as client:
        yield client


@pytest.fixture
async def anonymous(server: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    """A client without the token."""
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as client:
        yield client
