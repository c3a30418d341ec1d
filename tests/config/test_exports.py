"""The public surface of ``penguin.config`` is deliberate."""

from __future__ import annotations

import penguin.config as config


def test_all_names_resolve_and_nothing_private_is_exported() -> None:
    assert sorted(config.__all__) == sorted(set(config.__all__))
    for name in config.__all__:
        assert hasattr(config, name), name
        assert not name.startswith("_")


def test_public_surface() -> None:
    assert set(config.__all__) == {
        "DEFAULT_MAX_OUTPUT_LENGTH",
        "DEFAULT_MCP_CONNECT_TIMEOUT_MS",
        "DEFAULT_TIMEOUT_MS",
        "SUBAGENT_TOOL_NAMES",
        "AgentConfig",
        "ConfigError",
        "ForModel",
        "McpPermission",
        "McpRemoteTransport",
        "McpServerConfig",
        "McpStdioTransport",
        "Permission",
        "ToolDefinitionConfig",
        "apply_call_description",
        "default_tools",
        "dump_default_system_config",
        "load_system_config",
        "select_tools",
        "write_system_config",
    }


def test_config_error_is_a_value_error() -> None:
    assert issubclass(config.ConfigError, ValueError)
