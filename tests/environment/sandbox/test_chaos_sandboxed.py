"""The chaos matrix with a sandbox on: no stubborn kind of process escapes (X2.1).

Every case of ``tests/environment/test_chaos.py`` (each kind of stubborn process, each
route that ends it) runs again with the Environment under ``workspace-write`` and the
network off: the sandbox must change nothing about how everything is found and ended.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio

import penguin
from penguin.environment.supervisor._registry import SessionRegistry

from .. import test_chaos as chaos

pytestmark = [
    pytest.mark.usefixtures("kernel_sandbox"),
    pytest.mark.skipif(not hasattr(os, "killpg"), reason="POSIX process groups"),
]

POLICY = penguin.SandboxPolicy(mode="workspace-write", network=False)
OPENED: list[Path] = []


@asynccontextmanager
async def sandboxed_env(workdir: Path, route: str) -> AsyncIterator[penguin.Environment]:
    """``test_chaos.open_env`` with the sandbox on."""
    tools = penguin.config.default_tools()
    if route == "timeout":
        tools = [
            attrs.evolve(t, timeout_ms=chaos.TIMEOUT_MS) if t.name == "exec_command" else t
            for t in tools
        ]
    config = penguin.EnvironmentConfig(workspace_dir=workdir, tools=tools, sandbox=POLICY)
    async with penguin.Environment.open(config) as env:
        assert env._commands.sandbox is not None
        OPENED.append(workdir)
        if route == "eviction":
            env._commands._registry = SessionRegistry(1)
        yield env


def test_x2_1_the_chaos_matrix_under_a_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chaos, "open_env", sandboxed_env)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # no slow login profile (as test_chaos does)
    results: dict[tuple[str, str], chaos.CaseResult] = {}

    async def run_all() -> None:
        limiter = trio.CapacityLimiter(chaos.CONCURRENT_CASES)

        async def one(kind: chaos.Kind, route: str) -> None:
            async with limiter:
                workdir = tmp_path / f"{kind.name}-{route}"
                workdir.mkdir()
                results[kind.name, route] = await chaos.run_case(kind, route, workdir)

        async with trio.open_nursery() as nursery:
            for kind in chaos.KINDS:
                for route in chaos.ROUTES:
                    nursery.start_soon(one, kind, route)

    trio.run(run_all)
    assert len(results) == len(chaos.KINDS) * len(chaos.ROUTES)
    assert len(set(OPENED)) == len(results)  # every case ran sandboxed
    problems = {
        case: (result.error, result.survivors)
        for case, result in results.items()
        if result.error is not None or result.survivors or not result.ready_pids
    }
    assert problems == {}
