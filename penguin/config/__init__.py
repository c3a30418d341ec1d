"""Configuration: tool definitions, the default toolset, the files of an agent on disk.

Users import from here; the private modules may move::

    from penguin import config

    tools = config.default_tools()                       # the eleven builtins, spec order
    tools = config.select_tools(tools, vision=False)     # describe_image instead of read_image
    agent = config.load_system_config("system_config.yaml")   # ConfigError on a bad file
    agent.effective_builtin_tools()                      # tools.builtin, or the defaults
    agent.system_prompt                                  # the template, or the built-in one
    agent.images                                         # ImageSettings(downscale, max_edge)
    agent.subagents.max_spawned                          # subagents a session may spawn (32)
    agent.mcp_servers                                    # the valid tools.mcpServers entries
    config.add_mcp_server(path, server)                  # append one (comments kept)

    paths = config.AgentPaths(None, "default_project", "default_agent")  # $PENGUIN_HOME
    project = config.load_project_config(paths.project_config)   # .project_config.toml
    model = config.resolve_model(project)                # the default model's ModelEntry
    project.policy_rules()                               # the command policy's rules, as written
    vault = config.load_vault(paths.vault)               # {"GITHUB_TOKEN": "..."}
    prompt = config.render_system_prompt(agent.system_prompt, values)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._defaults import SUBAGENT_TOOL_NAMES as SUBAGENT_TOOL_NAMES
from ._defaults import default_tools as default_tools
from ._errors import ConfigError as ConfigError
from ._files import editing as editing
from ._mcp import DEFAULT_MCP_CONNECT_TIMEOUT_MS as DEFAULT_MCP_CONNECT_TIMEOUT_MS
from ._mcp import McpPermission as McpPermission
from ._mcp import McpRemoteTransport as McpRemoteTransport
from ._mcp import McpServerConfig as McpServerConfig
from ._mcp import McpStdioTransport as McpStdioTransport
from ._mcp import parse_mcp_server as parse_mcp_server
from ._mcp_edits import add_mcp_server as add_mcp_server
from ._mcp_edits import mcp_server_entry as mcp_server_entry
from ._mcp_edits import remove_mcp_server as remove_mcp_server
from ._paths import DEFAULT_AGENT_ID as DEFAULT_AGENT_ID
from ._paths import DEFAULT_PROJECT_ID as DEFAULT_PROJECT_ID
from ._paths import PENGUIN_HOME_VAR as PENGUIN_HOME_VAR
from ._paths import SECRET_FILE_NAMES as SECRET_FILE_NAMES
from ._paths import AgentPaths as AgentPaths
from ._paths import data_root as data_root
from ._paths import new_session_id as new_session_id
from ._paths import new_temp_workspace as new_temp_workspace
from ._paths import secret_store_name as secret_store_name
from ._paths import validate_id as validate_id
from ._prompt import DEFAULT_SYSTEM_PROMPT as DEFAULT_SYSTEM_PROMPT
from ._prompt import agents_md_block as agents_md_block
from ._prompt import render_system_prompt as render_system_prompt
from ._prompt import system_prompt_values as system_prompt_values
from ._select import apply_call_description as apply_call_description
from ._select import select_tools as select_tools
from ._system import DEFAULT_MAX_SPAWNED as DEFAULT_MAX_SPAWNED
from ._system import AgentConfig as AgentConfig
from ._system import ImageSettings as ImageSettings
from ._system import SubagentSettings as SubagentSettings
from ._system import dump_default_system_config as dump_default_system_config
from ._system import load_system_config as load_system_config
from ._system import write_system_config as write_system_config
from ._tools import DEFAULT_MAX_OUTPUT_LENGTH as DEFAULT_MAX_OUTPUT_LENGTH
from ._tools import DEFAULT_TIMEOUT_MS as DEFAULT_TIMEOUT_MS
from ._tools import ForModel as ForModel
from ._tools import Permission as Permission
from ._tools import ToolDefinitionConfig as ToolDefinitionConfig

if TYPE_CHECKING:
    from ._command_policy import PolicyRuleConfig as PolicyRuleConfig
    from ._project import KNOWN_BASE_URLS as KNOWN_BASE_URLS
    from ._project import ModelEntry as ModelEntry
    from ._project import ModelKey as ModelKey
    from ._project import ProjectConfig as ProjectConfig
    from ._project import load_project_config as load_project_config
    from ._project import resolve_model as resolve_model
    from ._project_edits import add_model as add_model
    from ._project_edits import add_policy_rule as add_policy_rule
    from ._project_edits import clear_vision_model as clear_vision_model
    from ._project_edits import remove_model as remove_model
    from ._project_edits import remove_policy_rule as remove_policy_rule
    from ._project_edits import save_project_config as save_project_config
    from ._project_edits import set_default_model as set_default_model
    from ._project_edits import set_policy_rule_enabled as set_policy_rule_enabled
    from ._project_edits import set_vision_model as set_vision_model
    from ._vault import list_vault_keys as list_vault_keys
    from ._vault import load_vault as load_vault
    from ._vault import remove_vault as remove_vault
    from ._vault import set_vault as set_vault
    from ._vault import validate_env_name as validate_env_name

__all__ = [
    "DEFAULT_AGENT_ID",
    "DEFAULT_MAX_OUTPUT_LENGTH",
    "DEFAULT_MAX_SPAWNED",
    "DEFAULT_MCP_CONNECT_TIMEOUT_MS",
    "DEFAULT_PROJECT_ID",
    "DEFAULT_SYSTEM_PROMPT",
    "DEFAULT_TIMEOUT_MS",
    "KNOWN_BASE_URLS",
    "PENGUIN_HOME_VAR",
    "SECRET_FILE_NAMES",
    "SUBAGENT_TOOL_NAMES",
    "AgentConfig",
    "AgentPaths",
    "ConfigError",
    "ForModel",
    "ImageSettings",
    "McpPermission",
    "McpRemoteTransport",
    "McpServerConfig",
    "McpStdioTransport",
    "ModelEntry",
    "ModelKey",
    "Permission",
    "PolicyRuleConfig",
    "ProjectConfig",
    "SubagentSettings",
    "ToolDefinitionConfig",
    "add_mcp_server",
    "add_model",
    "add_policy_rule",
    "agents_md_block",
    "apply_call_description",
    "clear_vision_model",
    "data_root",
    "default_tools",
    "dump_default_system_config",
    "editing",
    "list_vault_keys",
    "load_project_config",
    "load_system_config",
    "load_vault",
    "mcp_server_entry",
    "new_session_id",
    "new_temp_workspace",
    "parse_mcp_server",
    "remove_mcp_server",
    "remove_model",
    "remove_policy_rule",
    "remove_vault",
    "render_system_prompt",
    "resolve_model",
    "save_project_config",
    "secret_store_name",
    "select_tools",
    "set_default_model",
    "set_policy_rule_enabled",
    "set_vault",
    "set_vision_model",
    "system_prompt_values",
    "validate_env_name",
    "validate_id",
    "write_system_config",
]

if not TYPE_CHECKING:
    from penguin import _lazy

    # A project's and an agent's files are edited with tomlkit, which costs more to
    # import than the rest of this package; running a tool needs neither, so these
    # names load their module on first use.
    __getattr__, __dir__ = _lazy.lazy_attributes(
        __name__,
        {
            "PolicyRuleConfig": "._command_policy",
            "KNOWN_BASE_URLS": "._project",
            "ModelEntry": "._project",
            "ModelKey": "._project",
            "ProjectConfig": "._project",
            "load_project_config": "._project",
            "resolve_model": "._project",
            "add_model": "._project_edits",
            "add_policy_rule": "._project_edits",
            "clear_vision_model": "._project_edits",
            "remove_model": "._project_edits",
            "remove_policy_rule": "._project_edits",
            "save_project_config": "._project_edits",
            "set_default_model": "._project_edits",
            "set_policy_rule_enabled": "._project_edits",
            "set_vision_model": "._project_edits",
            "list_vault_keys": "._vault",
            "load_vault": "._vault",
            "remove_vault": "._vault",
            "set_vault": "._vault",
            "validate_env_name": "._vault",
        },
    )
