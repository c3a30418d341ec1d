"""MCP servers as tools of the Environment (spec/mcp.md), through the official ``mcp`` SDK.

The Environment owns one :class:`McpTools` when ``EnvironmentConfig.mcp_servers`` is
not empty: it connects the servers on the first ``list_tools()`` (``_tools``), and
each discovered tool is a plain :class:`McpTool` of the tool contract, so the
Environment's close-out treats it like any builtin. The parts: ``_discovery`` (a
listing → tool entries: names, schemas, permissions, limits) and ``_results`` (a
``tools/call`` result → text and images) are sans-IO; ``_connection`` is one server's
SDK session over its transport; ``_stdio`` runs a stdio server as a marked child
process of the Environment. Only ``_connection`` and ``_stdio`` import the SDK, and
only when a server is connected.
"""

from __future__ import annotations

from ._discovery import EMPTY_SCHEMA as EMPTY_SCHEMA
from ._discovery import TOOL_NAME as TOOL_NAME
from ._discovery import DiscoveredTool as DiscoveredTool
from ._discovery import discover_tools as discover_tools
from ._discovery import mcp_tool_name as mcp_tool_name
from ._discovery import tool_permission as tool_permission
from ._results import IMAGE_LIMIT as IMAGE_LIMIT
from ._results import MappedResult as MappedResult
from ._results import map_result as map_result
from ._tools import McpTool as McpTool
from ._tools import McpTools as McpTools
from ._tools import disconnected_text as disconnected_text
from ._tools import error_text as error_text

__all__ = [
    "EMPTY_SCHEMA",
    "IMAGE_LIMIT",
    "TOOL_NAME",
    "DiscoveredTool",
    "MappedResult",
    "McpTool",
    "McpTools",
    "disconnected_text",
    "discover_tools",
    "error_text",
    "map_result",
    "mcp_tool_name",
    "tool_permission",
]
