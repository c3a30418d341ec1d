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
        "SECRET_FILE_NAMES",
        "secret_store_name",
        "SUBAGENT_TOOL_NAMES",
        "AgentConfig",
        "ConfigError",
        "ForModel",
        "ImageSettings",
        "DEFAULT_MAX_SPAWNED",
        "SubagentSettings",
        "McpPermission",
        "McpRemoteTransport",
        "McpServerConfig",
        "McpStdioTransport",
        "add_mcp_server",
        "mcp_server_entry",
        "parse_mcp_server",
        "remove_mcp_server",
        "Permission",
        "ToolDefinitionConfig",
        "apply_call_description",
        "default_tools",
        "dump_default_system_config",
        "editing",
        "load_system_config",
        "select_tools",
        "write_system_config",
        # agent state on disk: paths, project config, vault, system prompt
        "DEFAULT_AGENT_ID",
        "DEFAULT_PROJECT_ID",
        "DEFAULT_SYSTEM_PROMPT",
        "KNOWN_BASE_URLS",
        "PENGUIN_HOME_VAR",
        "AgentPaths",
        "ModelEntry",
        "ModelKey",
        "ProjectConfig",
        "PolicyRuleConfig",
        "add_model",
        "add_policy_rule",
        "remove_policy_rule",
        "set_policy_rule_enabled",
        "agents_md_block",
        "clear_vision_model",
        "data_root",
        "list_vault_keys",
        "load_project_config",
        "load_vault",
        "new_session_id",
        "new_temp_workspace",
        "remove_model",
        "remove_vault",
        "render_system_prompt",
        "resolve_model",
        "save_project_config",
        "set_default_model",
        "set_vault",
        "set_vision_model",
        "system_prompt_values",
        "validate_env_name",
        "validate_id",
    }


def test_config_error_is_a_value_error() -> None:
    assert issubclass(config.ConfigError, ValueError)
