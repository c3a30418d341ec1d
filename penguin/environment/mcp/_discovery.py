"""What a server's ``tools/list`` becomes: penguin tool entries (spec/mcp.md M2.1-M2.3), sans I/O.

Owns the model-facing name ``mcp__<server>__<tool>`` and its check, the schema
pass-through (a missing or non-object ``inputSchema`` becomes the empty object
schema), the permission rule (the entry's ``r``/``rw``, else ``readOnlyHint``) and
the per-call limits an entry gives its tools. It reads the listing as plain JSON
values, not as the SDK's models, so a tool the SDK would reject (no schema) is still
offered, and one this module rejects (a bad name) is skipped alone, with a warning,
while the server's other tools are kept.

What it does not do: talk to a server (``_connection``) or run a call (``_tools``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, final

import attrs

from penguin.config import (
    DEFAULT_MAX_OUTPUT_LENGTH,
    DEFAULT_TIMEOUT_MS,
    McpServerConfig,
    Permission,
    ToolDefinitionConfig,
)

__all__ = [
    "EMPTY_SCHEMA",
    "TOOL_NAME",
    "DiscoveredTool",
    "discover_tools",
    "mcp_tool_name",
    "tool_permission",
]

TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")
"""A name the model may call (``^[A-Za-z0-9_-]{1,128}$``)."""

EMPTY_SCHEMA: Final[Mapping[str, Any]] = {"type": "object", "properties": {}}
"""The schema of a tool that gave none."""


def mcp_tool_name(server: str, tool: str) -> str:
    """The name the model calls a server's tool by."""
    return f"mcp__{server}__{tool}"


def tool_permission(server: McpServerConfig, annotations: object) -> Permission:
    """M2.2: the entry's ``r``/``rw``; for ``auto``, ``r`` only when ``readOnlyHint`` is true."""
    if server.permission in ("r", "rw"):
        return server.permission
    read_only = isinstance(annotations, Mapping) and annotations.get("readOnlyHint") is True
    return "r" if read_only else "rw"


@final
@attrs.frozen(kw_only=True)
class DiscoveredTool:
    """One tool of a server as penguin offers it: the server's name for it and its entry."""

    remote_name: str
    definition: ToolDefinitionConfig


def _definition(server: McpServerConfig, name: str, raw: Mapping[str, Any]) -> ToolDefinitionConfig:
    description = raw.get("description")
    schema = raw.get("inputSchema")
    return ToolDefinitionConfig(
        name=mcp_tool_name(server.name, name),
        description=description if isinstance(description, str) else "",
        parameters=schema if isinstance(schema, Mapping) else EMPTY_SCHEMA,
        permission=tool_permission(server, raw.get("annotations")),
        timeout_ms=DEFAULT_TIMEOUT_MS if server.timeout_ms is None else server.timeout_ms,
        max_output_length=(
            DEFAULT_MAX_OUTPUT_LENGTH
            if server.max_output_length is None
            else server.max_output_length
        ),
    )


def discover_tools(
    server: McpServerConfig, listing: Sequence[object]
) -> tuple[tuple[DiscoveredTool, ...], tuple[str, ...]]:
    """The tools kept from a server's listing, in its order, and one warning per tool skipped.

    A tool is skipped when its ``name`` is not a string, when the resulting name does
    not match :data:`TOOL_NAME`, or when an earlier tool of the listing had the same name.
    """
    kept: list[DiscoveredTool] = []
    warnings: list[str] = []
    seen: set[str] = set()
    for raw in listing:
        name = raw.get("name") if isinstance(raw, Mapping) else None
        if not isinstance(raw, Mapping) or not isinstance(name, str):
            warnings.append(
                f'[penguin] MCP server "{server.name}" listed a tool without a name; skipped'
            )
            continue
        full = mcp_tool_name(server.name, name)
        if not TOOL_NAME.fullmatch(full):
            warnings.append(
                f'[penguin] MCP server "{server.name}": tool {name!r} skipped, its name '
                f"{full!r} is not a valid tool name (letters, digits, _ and -, at most 128)"
            )
            continue
        if full in seen:
            warnings.append(
                f'[penguin] MCP server "{server.name}" listed the tool {name!r} twice; '
                "the first is kept"
            )
            continue
        seen.add(full)
        kept.append(DiscoveredTool(remote_name=name, definition=_definition(server, name, raw)))
    return tuple(kept), tuple(warnings)
