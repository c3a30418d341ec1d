"""Reference 3.0.1 and 3.1: the default toolset, exactly."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from penguin.config import SUBAGENT_TOOL_NAMES, ToolDefinitionConfig, default_tools

DESCRIPTION_TEXT = (
    "Required, and emit it first, before the other arguments: it is shown to the user while "
    "the call runs. One short sentence describing what this call is doing and why, written "
    "in the user's language."
)

# The table of reference 3.1: name, properties (in order, with types), required, permission,
# timeoutMs, maxOutputLength.
SPEC_TABLE: list[tuple[str, list[tuple[str, str]], list[str], str, int, int]] = [
    (
        "read_file",
        [("file_path", "string"), ("offset", "number"), ("limit", "number")],
        ["file_path"],
        "r",
        30000,
        64000,
    ),
    (
        "edit_file",
        [
            ("file_path", "string"),
            ("old_string", "string"),
            ("new_string", "string"),
            ("replace_all", "boolean"),
        ],
        ["file_path", "old_string", "new_string"],
        "rw",
        30000,
        16000,
    ),
    (
        "write_file",
        [("file_path", "string"), ("content", "string")],
        ["file_path", "content"],
        "rw",
        30000,
        16000,
    ),
    (
        "exec_command",
        [
            ("description", "string"),
            ("cmd", "string"),
            ("workdir", "string"),
            ("yield_time_ms", "number"),
            ("run_in_background", "boolean"),
            ("tty", "boolean"),  # beyond the reference: issue 3
        ],
        ["description", "cmd"],
        "rw",
        120000,
        16000,
    ),
    (
        "input_command",
        [
            ("description", "string"),
            ("process_id", "string"),
            ("chars", "string"),
            ("yield_time_ms", "number"),
        ],
        ["description", "process_id"],
        "rw",
        130000,
        16000,
    ),
    (
        "kill_command",
        [("description", "string"), ("process_id", "string")],
        ["description", "process_id"],
        "rw",
        30000,
        16000,
    ),
    (
        "run_subagent",
        [
            ("description", "string"),
            ("prompt", "string"),
            ("agent_id", "string"),
            ("model_id", "string"),
            ("provider", "string"),
            ("thinking_level", "string"),
            ("yield_time_ms", "number"),
            ("run_in_background", "boolean"),
        ],
        ["description", "prompt"],
        "rw",
        600000,
        16000,
    ),
    (
        "input_subagent",
        [
            ("description", "string"),
            ("subagent_id", "string"),
            ("prompt", "string"),
            ("yield_time_ms", "number"),
        ],
        ["description", "subagent_id"],
        "rw",
        600000,
        16000,
    ),
    (
        "kill_subagent",
        [("description", "string"), ("subagent_id", "string")],
        ["description", "subagent_id"],
        "rw",
        30000,
        16000,
    ),
    ("read_image", [("source", "string")], ["source"], "r", 60000, 16000),
    (
        "describe_image",
        [("source", "string"), ("prompt", "string")],
        ["source"],
        "r",
        90000,
        16000,
    ),
]


def by_name() -> dict[str, ToolDefinitionConfig]:
    return {entry.name: entry for entry in default_tools()}


def properties_of(entry: ToolDefinitionConfig) -> dict[str, Any]:
    assert entry.parameters is not None
    properties = entry.parameters["properties"]
    assert isinstance(properties, dict)
    return properties


def walk_keys(value: object) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from walk_keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk_keys(item)


def test_3_0_1_eleven_builtin_tools_in_spec_order() -> None:
    assert [entry.name for entry in default_tools()] == [
        "read_file",
        "edit_file",
        "write_file",
        "exec_command",
        "input_command",
        "kill_command",
        "run_subagent",
        "input_subagent",
        "kill_subagent",
        "read_image",
        "describe_image",
    ]


@pytest.mark.parametrize(
    ("name", "properties", "required", "permission", "timeout_ms", "max_output_length"),
    SPEC_TABLE,
    ids=[row[0] for row in SPEC_TABLE],
)
def test_3_1_default_order_and_limits(
    name: str,
    properties: list[tuple[str, str]],
    required: list[str],
    permission: str,
    timeout_ms: int,
    max_output_length: int,
) -> None:
    entry = by_name()[name]
    assert entry.parameters is not None
    assert list(entry.parameters) == ["type", "properties", "required"]
    assert entry.parameters["type"] == "object"
    assert [(key, spec["type"]) for key, spec in properties_of(entry).items()] == properties
    assert entry.parameters["required"] == required
    assert entry.permission == permission
    assert entry.timeout_ms == timeout_ms
    assert entry.max_output_length == max_output_length


def test_3_1_order_matches_the_spec_table() -> None:
    assert [entry.name for entry in default_tools()] == [row[0] for row in SPEC_TABLE]


def test_3_1_no_json_schema_default_keys() -> None:
    for entry in default_tools():
        assert "default" not in set(walk_keys(entry.parameters)), entry.name


def test_3_1_parameters_are_plain_json() -> None:
    for entry in default_tools():
        assert json.loads(json.dumps(entry.parameters)) == entry.parameters


def test_3_1_thinking_level_is_an_enum() -> None:
    thinking = properties_of(by_name()["run_subagent"])["thinking_level"]
    assert thinking["type"] == "string"
    assert thinking["enum"] == ["low", "medium", "high", "xhigh", "max"]


def test_3_1_1_for_model() -> None:
    assert {entry.name: entry.for_model for entry in default_tools() if entry.for_model} == {
        "read_image": "vision",
        "describe_image": "text-only",
    }


def test_3_1_1_call_description_on_the_six_description_entries() -> None:
    with_description = [
        entry.name for entry in default_tools() if "description" in properties_of(entry)
    ]
    assert with_description == [
        "exec_command",
        "input_command",
        "kill_command",
        "run_subagent",
        "input_subagent",
        "kill_subagent",
    ]
    assert all(by_name()[name].call_description is True for name in with_description)


def test_3_1_1_description_argument_text_is_exact_and_first() -> None:
    for entry in default_tools():
        properties = properties_of(entry)
        if "description" in properties:
            assert properties["description"] == {
                "type": "string",
                "description": DESCRIPTION_TEXT,
            }
            assert next(iter(properties)) == "description"
            assert entry.parameters is not None
            assert entry.parameters["required"][0] == "description"


def test_3_1_every_tool_and_argument_is_described() -> None:
    for entry in default_tools():
        assert len(entry.description) > 80, entry.name
        assert entry.description == entry.description.strip()
        for key, spec in properties_of(entry).items():
            text = spec["description"]
            assert isinstance(text, str)
            assert text.strip(), f"{entry.name}.{key}"
            assert text.endswith("."), f"{entry.name}.{key}"


def test_3_1_descriptions_are_penguins_own_prose_without_trailing_spaces() -> None:
    for entry in default_tools():
        assert not re.search(r"[ \t]$", entry.description, flags=re.MULTILINE), entry.name


def prose(name: str, argument: str | None = None) -> str:
    entry = by_name()[name]
    if argument is None:
        return entry.description
    text = properties_of(entry)[argument]["description"]
    assert isinstance(text, str)
    return text


@pytest.mark.parametrize(
    ("name", "argument", "fragment"),
    [
        ("read_file", "offset", "Defaults to 1"),
        ("read_file", "limit", "Defaults to 2000"),
        ("edit_file", "replace_all", "Defaults to false"),
        ("exec_command", "workdir", "current working directory"),
        ("exec_command", "yield_time_ms", "Defaults to 60000"),
        ("exec_command", "run_in_background", "Defaults to false"),
        ("input_command", "yield_time_ms", "250 when chars are written"),
        ("input_command", "yield_time_ms", "120000 when only polling"),
        ("run_subagent", "yield_time_ms", "Defaults to 300000"),
        ("run_subagent", "run_in_background", "Defaults to false"),
        ("input_subagent", "yield_time_ms", "300000 with a prompt"),
        ("input_subagent", "yield_time_ms", "10000 when only polling"),
        ("run_subagent", "prompt", "Caller agent: <id>"),
        ("run_subagent", None, "`Caller agent: <id>`"),
        ("exec_command", None, "`&`"),
        ("exec_command", None, "process group is killed"),
        ("exec_command", None, "run_in_background"),
        ("exec_command", None, "yield_time_ms"),
        ("exec_command", None, "process_id"),
        ("input_command", None, '"\\u0003"'),
        ("edit_file", None, "unified diff"),
    ],
)
def test_3_1_2_prose_states_the_defaults(name: str, argument: str | None, fragment: str) -> None:
    assert fragment in prose(name, argument)


def test_3_1_2_prose_never_contradicts_the_limits() -> None:
    # A stale number in prose misleads the model: every number ending in 000 that the
    # prose mentions must be one of the spec's defaults or limits.
    allowed = {"1000", "2000", "10000", "60000", "120000", "300000"}
    for entry in default_tools():
        texts = [entry.description] + [p["description"] for p in properties_of(entry).values()]
        for text in texts:
            for number in re.findall(r"\b\d+000\b", text):
                assert number in allowed, (entry.name, number)


def test_3_1_default_tools_returns_fresh_objects() -> None:
    first = default_tools()
    assert first[0].parameters is not None
    first[0].parameters["properties"]["file_path"]["type"] = "mutated"
    first[0].parameters["required"].append("mutated")
    first.clear()
    second = default_tools()
    assert len(second) == 11
    assert second[0].parameters is not None
    assert second[0].parameters["properties"]["file_path"]["type"] == "string"
    assert second[0].parameters["required"] == ["file_path"]
    assert default_tools() == default_tools()
    assert default_tools()[3].parameters is not default_tools()[3].parameters


def test_3_8_9_subagent_tool_names() -> None:
    assert frozenset({"run_subagent", "input_subagent", "kill_subagent"}) == SUBAGENT_TOOL_NAMES


def test_1_10_to_definition_leaks_no_harness_settings() -> None:
    for entry in default_tools():
        definition = entry.to_definition()
        assert (definition.name, definition.description, definition.parameters) == (
            entry.name,
            entry.description,
            entry.parameters,
        )
