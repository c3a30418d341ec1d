"""Spec mcp.md M2.1-M2.3 without a server: names, schemas, permissions, limits."""

from __future__ import annotations

from typing import Any

import pytest

from penguin.config import McpServerConfig, McpStdioTransport
from penguin.environment.mcp import EMPTY_SCHEMA, discover_tools, tool_permission


def entry(name: str = "files", **options: Any) -> McpServerConfig:
    return McpServerConfig(name=name, transport=McpStdioTransport(command="srv"), **options)


def test_m2_1_tools_are_named_after_their_server_and_keep_description_and_schema() -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    found, warnings = discover_tools(
        entry(), [{"name": "read", "description": "Read a file.", "inputSchema": schema}]
    )
    assert warnings == ()
    (tool,) = found
    assert tool.remote_name == "read"
    assert tool.definition.name == "mcp__files__read"
    assert tool.definition.description == "Read a file."
    assert tool.definition.parameters == schema


def test_m2_1_a_missing_schema_becomes_the_empty_object_schema() -> None:
    found, _ = discover_tools(entry(), [{"name": "bare"}, {"name": "odd", "inputSchema": 3}])
    assert [t.definition.parameters for t in found] == [EMPTY_SCHEMA, EMPTY_SCHEMA]
    assert EMPTY_SCHEMA == {"type": "object", "properties": {}}
    assert found[0].definition.description == ""


@pytest.mark.parametrize("bad", ["bad name!", "x" * 120, "dot.ted", "ünï"])
def test_m2_1_a_name_that_fails_the_check_is_skipped_with_a_warning(bad: str) -> None:
    found, warnings = discover_tools(entry(), [{"name": bad}, {"name": "ok"}])
    assert [t.definition.name for t in found] == ["mcp__files__ok"]
    (warning,) = warnings
    assert warning.startswith('[penguin] MCP server "files": tool ')
    assert "is not a valid tool name" in warning


def test_m2_1_the_128_character_limit_counts_the_whole_name() -> None:
    fits = "x" * (128 - len("mcp__files__"))
    found, warnings = discover_tools(entry(), [{"name": fits}, {"name": fits + "y"}])
    assert [len(t.definition.name) for t in found] == [128]
    assert len(warnings) == 1


def test_m2_1_nameless_and_repeated_tools_are_skipped_and_order_is_kept() -> None:
    found, warnings = discover_tools(
        entry(), [{"name": "b"}, {"description": "?"}, "junk", {"name": "a"}, {"name": "b"}]
    )
    assert [t.remote_name for t in found] == ["b", "a"]
    assert len(warnings) == 3


@pytest.mark.parametrize(
    ("permission", "annotations", "expected"),
    [
        ("auto", {"readOnlyHint": True}, "r"),
        ("auto", {"readOnlyHint": False}, "rw"),
        ("auto", None, "rw"),
        ("auto", {"readOnlyHint": "yes"}, "rw"),
        ("r", None, "r"),
        ("r", {"readOnlyHint": False}, "r"),
        ("rw", {"readOnlyHint": True}, "rw"),
    ],
)
def test_m2_2_permission_is_the_entry_s_else_the_read_only_hint(
    permission: Any, annotations: object, expected: str
) -> None:
    server = entry(permission=permission)
    assert tool_permission(server, annotations) == expected
    raw = {"name": "t"} if annotations is None else {"name": "t", "annotations": annotations}
    (tool,) = discover_tools(server, [raw])[0]
    assert tool.definition.permission == expected


def test_m2_3_limits_come_from_the_entry_with_the_per_call_defaults() -> None:
    (default,) = discover_tools(entry(), [{"name": "t"}])[0]
    assert (default.definition.timeout_ms, default.definition.max_output_length) == (
        120000,
        16000,
    )
    (limited,) = discover_tools(entry(timeout_ms=0, max_output_length=50), [{"name": "t"}])[0]
    assert (limited.definition.timeout_ms, limited.definition.max_output_length) == (0, 50)
