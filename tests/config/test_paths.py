"""Reference D4: where an agent's files live, and the names penguin makes up there."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from penguin.config import (
    DEFAULT_AGENT_ID,
    DEFAULT_PROJECT_ID,
    AgentPaths,
    data_root,
    new_session_id,
    new_temp_workspace,
    validate_id,
)

SESSION_ID = re.compile(r"session-\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d-[0-9a-f]{8}")


def test_data_root_prefers_the_argument(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PENGUIN_HOME", str(tmp_path / "home"))
    assert data_root(tmp_path / "explicit") == tmp_path / "explicit"
    assert data_root(str(tmp_path)) == tmp_path


def test_data_root_falls_back_to_penguin_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PENGUIN_HOME", str(tmp_path / "home"))
    assert data_root() == tmp_path / "home"


def test_data_root_defaults_to_the_home_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PENGUIN_HOME", "  ")  # blank counts as unset
    assert data_root() == Path.home() / ".penguin" / "data"
    monkeypatch.delenv("PENGUIN_HOME")
    assert data_root() == Path.home() / ".penguin" / "data"


def test_data_root_expands_a_tilde(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PENGUIN_HOME", "~/elsewhere")
    assert data_root() == Path.home() / "elsewhere"
    assert data_root("~/x") == Path.home() / "x"


def test_agent_paths_layout(tmp_path: Path) -> None:
    paths = AgentPaths(tmp_path, "proj", "bot")
    project = tmp_path / "proj"
    agent = project / "agents" / "bot"
    assert paths.project_dir == project
    assert paths.project_config == project / ".project_config.toml"
    assert paths.agent_dir == agent
    assert paths.agent_state == agent / "agent_state"
    assert paths.system_config == agent / "agent_state" / "system_config.yaml"
    assert paths.vault == agent / "agent_state" / ".vault.toml"
    assert paths.traces_dir == agent / "traces"
    assert paths.scratchpad("session-1") == agent / "scratchpad" / "session-1"
    assert paths.workspaces_dir == agent / "workspaces"


def test_agent_paths_defaults_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PENGUIN_HOME", str(tmp_path / "data"))
    paths = AgentPaths(None)
    assert paths.root == tmp_path / "data"
    assert paths.project_id == DEFAULT_PROJECT_ID == "default_project"
    assert paths.agent_id == DEFAULT_AGENT_ID == "default_agent"
    assert paths.agent_dir == tmp_path / "data" / "default_project" / "agents" / "default_agent"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("bad", ["", "..", "a/b", "../x", ".hidden", "-flag", "a..b", "a b", "é"])
def test_bad_ids_are_refused_with_a_clear_message(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="invalid project id") as project:
        AgentPaths(tmp_path, bad)
    assert "letters, digits" in str(project.value)
    with pytest.raises(ValueError, match="invalid agent id"):
        AgentPaths(tmp_path, "ok", bad)
    with pytest.raises(ValueError, match="invalid session id"):
        AgentPaths(tmp_path).scratchpad(bad)


@pytest.mark.parametrize("good", ["a", "A1", "my_project", "v1.2-beta", "9lives"])
def test_good_ids_are_accepted(good: str) -> None:
    assert validate_id(good) == good


def test_session_id_shape_in_local_time() -> None:
    moment = dt.datetime(2025, 3, 4, 5, 6, 7)
    session = new_session_id(moment)
    assert SESSION_ID.fullmatch(session)
    assert session.startswith("session-2025-03-04-05-06-07-")
    assert SESSION_ID.fullmatch(new_session_id())
    assert new_session_id(moment) != session  # the suffix is random


def test_session_id_of_an_aware_time_uses_local_time() -> None:
    aware = dt.datetime(2025, 3, 4, 12, 0, 0, tzinfo=dt.UTC)
    local = aware.astimezone()
    assert new_session_id(aware).startswith(f"session-{local:%Y-%m-%d-%H-%M-%S}-")


def test_session_ids_are_valid_path_components(tmp_path: Path) -> None:
    session = new_session_id()
    assert AgentPaths(tmp_path).scratchpad(session).name == session


def test_new_temp_workspace_creates_distinct_directories(tmp_path: Path) -> None:
    paths = AgentPaths(tmp_path, "p", "a")
    first = new_temp_workspace(paths)
    second = new_temp_workspace(paths)
    assert first != second
    for made in (first, second):
        assert made.is_dir()
        assert made.parent == paths.workspaces_dir
        assert re.fullmatch(r"tmp-[0-9a-f]{8}", made.name)
        assert list(made.iterdir()) == []
