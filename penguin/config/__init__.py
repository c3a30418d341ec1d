"""Configuration: tool definitions, the default toolset, ``system_config.yaml``.

Users import from here; the private modules may move::

    from penguin import config

    tools = config.default_tools()                       # the eleven builtins, spec order
    tools = config.select_tools(tools, vision=False)     # describe_image instead of read_image
    agent = config.load_system_config("system_config.yaml")   # ConfigError on a bad file
    agent.effective_builtin_tools()                      # tools.builtin, or the defaults
"""

from __future__ import annotations

from ._defaults import SUBAGENT_TOOL_NAMES as SUBAGENT_TOOL_NAMES
from ._defaults import default_tools as default_tools
from ._errors import ConfigError as ConfigError
from ._mcp import DEFAULT_MCP_CONNECT_TIMEOUT_MS as DEFAULT_MCP_CONNECT_TIMEOUT_MS
from ._mcp import McpPermission as McpPermission
from ._mcp import McpRemoteTransport as McpRemoteTransport
from ._mcp import McpServerConfig as McpServerConfig
from ._mcp import McpStdioTransport as McpStdioTransport
from ._select import apply_call_description as apply_call_description
from ._select import select_tools as select_tools
from ._system import AgentConfig as AgentConfig
from ._system import dump_default_system_config as dump_default_system_config
from ._system import load_system_config as load_system_config
from ._system import write_system_config as write_system_config
from ._tools import DEFAULT_MAX_OUTPUT_LENGTH as DEFAULT_MAX_OUTPUT_LENGTH
from ._tools import DEFAULT_TIMEOUT_MS as DEFAULT_TIMEOUT_MS
from ._tools import ForModel as ForModel
from ._tools import Permission as Permission
from ._tools import ToolDefinitionConfig as ToolDefinitionConfig

__all__ = [
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
]
