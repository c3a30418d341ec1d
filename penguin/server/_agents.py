"""The projects and agents on disk, as the server reads them: Agents, agent and model lists.

Owns the server's :class:`~penguin.Agent` objects (opened once per project and agent,
then shared by its sessions), the checks a new session's workspace and model pass
(400 ``workspace_not_found``, ``model_not_found``, ``model_not_configured``), and the
lists of a project's agents and configured models (never their keys or endpoints).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import final

import trio

from penguin import config as cfg
from penguin.agent import Agent

from ._errors import ApiError
from ._routes import valid_id
from ._shapes import model_row

__all__ = ["Agents", "check_model", "check_workspace"]


@final
class Agents:
    """The projects and agents under ``root``; each Agent opened once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._agents: dict[tuple[str, str], Agent] = {}

    def paths(self, project_id: str, agent_id: str) -> cfg.AgentPaths:
        """Where the agent's files are."""
        return cfg.AgentPaths(self.root, project_id, agent_id)

    async def agent(self, project_id: str, agent_id: str) -> Agent:
        """The agent, opened once; 400 ``agent_config_invalid`` when its config is broken."""
        key = (project_id, agent_id)
        agent = self._agents.get(key)
        if agent is None:
            try:
                agent = await trio.to_thread.run_sync(Agent.open, self.root, project_id, agent_id)
            except cfg.ConfigError as exc:
                raise ApiError(
                    400, "agent_config_invalid", f"The agent's configuration is broken: {exc}"
                ) from exc
            agent = self._agents.setdefault(key, agent)
        return agent

    async def agents(self, project_id: str) -> list[str]:
        """The project's agents that exist on disk."""
        agents_dir = self.root / project_id / "agents"

        def scan() -> list[str]:
            try:
                names = [entry.name for entry in os.scandir(agents_dir) if entry.is_dir()]
            except (FileNotFoundError, NotADirectoryError):
                return []
            return sorted(name for name in names if valid_id(name))

        return await trio.to_thread.run_sync(scan)

    async def models(self, project_id: str) -> list[dict[str, object]]:
        """The project's configured models (never their keys or endpoints)."""
        paths = self.paths(project_id, cfg.DEFAULT_AGENT_ID)
        try:
            project = await trio.to_thread.run_sync(cfg.load_project_config, paths.project_config)
        except cfg.ConfigError as exc:
            raise ApiError(
                400, "model_not_configured", f"The project's configuration is broken: {exc}"
            ) from exc
        default = project.default_entry()
        if default is None and len(project.models) == 1:
            default = project.models[0]
        return [model_row(entry, default=entry is default) for entry in project.models]


async def check_workspace(workspace: str) -> None:
    """400 ``workspace_not_found`` unless ``workspace`` is an absolute directory to work in."""
    try:
        usable = os.path.isabs(workspace) and await trio.Path(workspace).is_dir()
    except OSError as exc:  # no permission, a network file system's server that refuses
        raise ApiError(
            400,
            "workspace_not_found",
            f"The workspace {workspace!r} cannot be read: {exc.strerror or exc}.",
        ) from exc
    if not usable:
        raise ApiError(
            400,
            "workspace_not_found",
            f"The workspace {workspace!r} is not an existing absolute directory.",
        )


async def check_model(agent: Agent, provider: str | None, model_id: str | None) -> None:
    try:
        project = await trio.to_thread.run_sync(agent.project_config)
    except cfg.ConfigError as exc:
        raise ApiError(
            400, "model_not_configured", f"The project's configuration is broken: {exc}"
        ) from exc
    if provider is not None and model_id is not None:
        if project.find_model(provider, model_id) is None:
            raise ApiError(
                400,
                "model_not_found",
                f"No model {provider}/{model_id} is configured for this project; add it with "
                "`penguin config model add`.",
            )
        return
    try:
        cfg.resolve_model(project)
    except cfg.ConfigError as exc:
        raise ApiError(400, "model_not_configured", exc.reason) from exc
