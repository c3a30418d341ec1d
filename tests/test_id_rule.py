"""Issue 17 item 4: one id rule, in penguin.config, and every surface follows it.

A project (or agent) id that one surface takes, every surface takes, and one that one
refuses, every one refuses: ``Agent.open``, the command line, a batch, the server's
routes (checked alone and over HTTP) and the server's scan of the data root.
Before, ``my.proj`` worked from the command line and was a 404 in the server.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path

import httpx
import pytest

import penguin
from penguin import batch
from penguin import config as cfg
from penguin.cli import main as cli_main
from penguin.server import ServerOptions, open_server
from penguin.server._errors import ApiError
from penguin.server._routes import valid_id, validate_ids

GOOD = ["a", "A1", "my.proj", "default_project", "v1.2-beta", "9lives", "p" * 64]
BAD = ["", "..", "a..b", ".hidden", "-flag", "_x", "a/b", "a b", "é", "p" * 65, "x\n", "a:b"]
TOKEN = "test-token-0123456789"


def agent_open_refusal(root: Path, value: str) -> str | None:
    """Why ``Agent.open`` refuses ``value`` (None: it opens the agent)."""
    try:
        penguin.Agent.open(root, project_id=value)
    except cfg.ConfigError as exc:
        return str(exc)
    return None


def cli_refusal(root: Path, value: str, capsys: pytest.CaptureFixture[str]) -> str | None:
    """What the command line says refusing ``value`` (None: exit 0)."""
    code = cli_main(["config", "model", "list", "--root", str(root), f"--project-id={value}"])
    err = capsys.readouterr().err
    assert code in (0, 1), err
    return err if code == 1 else None


def route_refusal(params: dict[str, str]) -> tuple[int, str] | None:
    """The server's answer to a path with ``params`` (None: the ids pass)."""
    try:
        validate_ids(params)
    except ApiError as exc:
        return exc.status, exc.code
    return None


async def batch_error(root: Path, value: str) -> str:
    tasks = [batch.BatchTask(id="t", prompt="hi")]
    async with batch.run_batch(tasks, root=root, project_id=value) as results:
        [result] = [r async for r in results]
    assert result.status == "error"  # no model is configured: nothing runs either way
    return result.error or ""


@pytest.mark.parametrize("value", GOOD + BAD, ids=repr)
async def test_17_4_every_surface_accepts_and_refuses_the_same_ids(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    good = value in GOOD
    assert valid_id(value) is good
    refused = agent_open_refusal(root, value)
    assert (refused is None) is good
    assert good or "invalid project id" in str(refused)
    said = cli_refusal(root, value, capsys)
    assert (said is None) is good
    assert good or "invalid project id" in str(said)
    project = route_refusal({"project": value, "agent": "default_agent"})
    assert project == (None if good else (404, "project_not_found"))
    agent = route_refusal({"project": "default_project", "agent": value})
    assert agent == (None if good else (404, "agent_not_found"))
    assert ("invalid project id" not in await batch_error(root, value)) is good


async def test_17_4_the_server_serves_a_project_named_my_proj(tmp_path: Path) -> None:
    root = tmp_path / "root"
    penguin.Agent.open(root, project_id="my.proj")  # made from the library (or the CLI)
    options = ServerOptions(port=0, root=root, token=TOKEN, grace=5.0)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        open_server(options) as server,
        httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=30) as client,
    ):
        statuses = {}
        for value in ["my.proj", "default_project", "a..b", ".hidden", "p" * 65, "a b"]:
            quoted = urllib.parse.quote(value, safe="")
            response = await client.get(f"/api/projects/{quoted}/agents")
            statuses[value] = response.status_code
            if response.status_code == 404:
                assert response.json()["error"]["code"] == "project_not_found"
        agents = (await client.get("/api/projects/my.proj/agents")).json()
    assert statuses == {
        "my.proj": 200,
        "default_project": 200,
        "a..b": 404,
        ".hidden": 404,
        "p" * 65: 404,
        "a b": 404,
    }
    assert "default_agent" in str(agents)
