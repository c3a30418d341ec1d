"""The tool registry (issue 10 item 1): builtins from the configured entries, then plain tools.

Custom tools and, from other sources, MCP servers' tools are plain objects of the tool
contract; they join the registry after the builtins, each batch after the ones before,
under the same name rules. No Environment and no process is involved.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from penguin.config import ToolDefinitionConfig, default_tools
from penguin.environment import ToolContext, ToolResult, ToolServices
from penguin.environment._toolset import ToolRegistry
from penguin.environment.tools._base import Supervisors


@attrs.frozen
class Plain:
    """A plain tool: a name, a definition and an ``execute``."""

    definition: ToolDefinitionConfig
    name: str = ""

    def __attrs_post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.definition.name)

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        return None


def plain(name: str, **changes: Any) -> Plain:
    return Plain(ToolDefinitionConfig(name=name, description=f"{name} tool", **changes))


def registry(entries: list[ToolDefinitionConfig] | None = None) -> ToolRegistry:
    configured = default_tools() if entries is None else entries
    return ToolRegistry(configured, ToolServices(), Supervisors())


def test_10_1_plain_tools_join_after_the_builtins_in_the_order_they_joined() -> None:
    tools = registry()
    tools.join([plain("shout", permission="r"), plain("whisper")])
    tools.join([plain("mcp__files__list", permission="rw")], kind="MCP tool")
    names = [tool.name for tool in tools]
    assert names == [entry.name for entry in default_tools()] + [
        "shout",
        "whisper",
        "mcp__files__list",
    ]
    assert tools.permission("mcp__files__list") == "rw"
    assert tools.permission("shout") == "r"
    assert tools.permission("whisper") is None
    assert tools.get("mcp__files__list") is not None
    assert [d.name for d in tools.definitions()] == names


def test_10_1_a_configured_entry_without_a_builtin_is_no_tool_but_keeps_its_permission() -> None:
    entry = ToolDefinitionConfig(name="not_a_builtin", description="x", permission="r")
    tools = registry([entry])
    assert list(tools) == []
    assert tools.get("not_a_builtin") is None
    assert tools.permission("not_a_builtin") == "r"
    with pytest.raises(ValueError, match="name of a configured builtin tool"):
        tools.join([plain("not_a_builtin")])


def test_10_1_the_name_rules_hold_for_every_join_and_a_refused_batch_adds_nothing() -> None:
    tools = registry([])
    tools.join([plain("shout")])
    with pytest.raises(ValueError, match="two MCP tools are named 'dup'"):
        tools.join([plain("dup"), plain("dup")], kind="MCP tool")
    with pytest.raises(ValueError, match="has the name of a tool already in the toolset"):
        tools.join([plain("fresh"), plain("shout")], kind="MCP tool")
    renamed = Plain(ToolDefinitionConfig(name="b", description="x"), name="a")
    with pytest.raises(ValueError, match=r"custom tool 'a' has definition\.name 'b'"):
        tools.join([renamed])
    assert [tool.name for tool in tools] == ["shout"]  # "dup" and "fresh" were not added
