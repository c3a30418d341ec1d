"""Reference 6.1/6.2 and D3/D4: reading and writing ``system_config.yaml``."""

from __future__ import annotations

import os
import pickle
import re
import stat
import textwrap
from pathlib import Path

import pytest

from penguin.config import (
    DEFAULT_MAX_OUTPUT_LENGTH,
    DEFAULT_TIMEOUT_MS,
    AgentConfig,
    ConfigError,
    ToolDefinitionConfig,
    default_tools,
    dump_default_system_config,
    load_system_config,
    write_system_config,
)

CONFIG = "system_config.yaml"


def write(tmp_path: Path, text: str, name: str = CONFIG) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


ONE_TOOL = """\
# my agent
tools:
  builtin:
    - name: read_file
      description: Read a file.
      parameters:
        type: object
        properties:
          file_path: {type: string, description: Where.}
        required: [file_path]
      permission: r
      timeoutMs: 1000
      maxOutputLength: 500
"""


# ------------------------------------------------------------------ 6.2 semantics


def test_6_2_empty_file_is_all_defaults(tmp_path: Path) -> None:
    config = load_system_config(write(tmp_path, ""))
    assert config.builtin_tools is None
    assert config.mcp_servers == ()
    assert config.effective_builtin_tools() == default_tools()


def test_6_2_comment_only_file_is_all_defaults(tmp_path: Path) -> None:
    config = load_system_config(write(tmp_path, "# nothing configured yet\n"))
    assert config.builtin_tools is None
    assert config.effective_builtin_tools() == default_tools()


def test_6_2_absent_builtin_means_defaults(tmp_path: Path) -> None:
    config = load_system_config(write(tmp_path, "tools:\n  mcpServers: []\n"))
    assert config.builtin_tools is None
    assert [entry.name for entry in config.effective_builtin_tools()] == [
        entry.name for entry in default_tools()
    ]


def test_6_2_null_tools_means_defaults(tmp_path: Path) -> None:
    config = load_system_config(write(tmp_path, "tools:\n"))
    assert config.builtin_tools is None


def test_6_2_builtin_replaces_wholesale(tmp_path: Path) -> None:
    config = load_system_config(write(tmp_path, ONE_TOOL))
    assert config.builtin_tools == (
        ToolDefinitionConfig(
            name="read_file",
            description="Read a file.",
            parameters={
                "type": "object",
                "properties": {"file_path": {"type": "string", "description": "Where."}},
                "required": ["file_path"],
            },
            permission="r",
            timeout_ms=1000,
            max_output_length=500,
        ),
    )
    assert [entry.name for entry in config.effective_builtin_tools()] == ["read_file"]


def test_6_2_empty_builtin_list_means_no_builtin_tools(tmp_path: Path) -> None:
    config = load_system_config(write(tmp_path, "tools:\n  builtin: []\n"))
    assert config.builtin_tools == ()
    assert config.effective_builtin_tools() == []


def test_6_2_unknown_names_are_kept_in_the_config(tmp_path: Path) -> None:
    config = load_system_config(
        write(
            tmp_path,
            """\
            tools:
              builtin:
                - {name: teleport, description: Not a penguin tool.}
                - {name: read_file, description: Read.}
            """,
        )
    )
    assert [entry.name for entry in config.effective_builtin_tools()] == ["teleport", "read_file"]


def test_6_1_entry_defaults_when_keys_are_omitted(tmp_path: Path) -> None:
    config = load_system_config(
        write(tmp_path, "tools:\n  builtin:\n    - name: x\n      description: d\n")
    )
    assert config.builtin_tools == (ToolDefinitionConfig(name="x", description="d"),)
    (entry,) = config.builtin_tools
    assert entry.parameters is None
    assert entry.permission is None
    assert entry.for_model is None
    assert entry.timeout_ms == DEFAULT_TIMEOUT_MS == 120000
    assert entry.max_output_length == DEFAULT_MAX_OUTPUT_LENGTH == 16000
    assert entry.call_description is True


def test_6_1_every_key_with_reference_spelling(tmp_path: Path) -> None:
    config = load_system_config(
        write(
            tmp_path,
            """\
            tools:
              builtin:
                - name: describe_image
                  description: "Describe."
                  parameters:
                    type: object
                    properties:
                      description: {type: string}
                      source: {type: string, minLength: 1, maximum: 2.5}
                    required: [description, source]
                  permission: rw
                  forModel: text-only
                  timeoutMs: 0
                  maxOutputLength: -1
                  call_description: false
            """,
        )
    )
    assert config.builtin_tools is not None
    (entry,) = config.builtin_tools
    assert entry.permission == "rw"
    assert entry.for_model == "text-only"
    assert entry.timeout_ms == 0
    assert entry.max_output_length == -1
    assert entry.call_description is False
    assert entry.parameters is not None
    # Round-trip YAML types are converted to plain JSON types.
    assert type(entry.parameters) is dict
    assert type(entry.parameters["properties"]) is dict
    assert type(entry.parameters["required"]) is list
    source = entry.parameters["properties"]["source"]
    assert type(source["maximum"]) is float
    assert source["maximum"] == 2.5
    assert type(source["minLength"]) is int
    assert type(entry.description) is str


def test_6_2_null_optional_keys_take_defaults(tmp_path: Path) -> None:
    config = load_system_config(
        write(
            tmp_path,
            """\
            tools:
              builtin:
                - name: x
                  description: d
                  parameters:
                  permission:
                  forModel:
                  timeoutMs:
                  maxOutputLength:
                  call_description:
            """,
        )
    )
    assert config.builtin_tools == (ToolDefinitionConfig(name="x", description="d"),)


def test_6_2_unknown_top_level_keys_are_tolerated_and_kept(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        system_prompt: You are careful.  # a future key
        tools:
          builtin: []
          futureToolsKey: 1
        """,
    )
    config = load_system_config(path)
    assert config.builtin_tools == ()
    assert config.document["system_prompt"] == "You are careful."
    write_system_config(path, config.document)
    text = path.read_text(encoding="utf-8")
    assert "system_prompt: You are careful.  # a future key" in text
    assert "futureToolsKey: 1" in text


def test_6_2_document_edits_keep_comments(tmp_path: Path) -> None:
    path = write(tmp_path, ONE_TOOL)
    config = load_system_config(path)
    config.document["tools"]["builtin"][0]["timeoutMs"] = 2000
    write_system_config(path, config.document)
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# my agent\n")
    assert "timeoutMs: 2000" in text
    reloaded = load_system_config(path)
    assert reloaded.builtin_tools is not None
    assert reloaded.builtin_tools[0].timeout_ms == 2000


def test_6_2_agent_config_equality_ignores_the_document(tmp_path: Path) -> None:
    first = load_system_config(write(tmp_path, "tools:\n  builtin: []  # none\n", "a.yaml"))
    second = load_system_config(write(tmp_path, "tools: {builtin: []}\n", "a.yaml"))
    assert first == second
    assert isinstance(first, AgentConfig)


# ------------------------------------------------------------------ default file


def test_6_2_default_file_round_trips_to_default_tools(tmp_path: Path) -> None:
    path = tmp_path / "agent_state" / CONFIG
    dump_default_system_config(path)
    config = load_system_config(path)
    assert config.builtin_tools is not None
    assert list(config.builtin_tools) == default_tools()
    for loaded, default in zip(config.builtin_tools, default_tools(), strict=True):
        assert loaded.parameters is not None
        assert default.parameters is not None
        assert list(loaded.parameters) == list(default.parameters)
        assert list(loaded.parameters["properties"]) == list(default.parameters["properties"])
    assert config.mcp_servers == ()


def test_6_2_default_file_uses_reference_key_spellings_and_comments(tmp_path: Path) -> None:
    path = tmp_path / CONFIG
    dump_default_system_config(path)
    text = path.read_text(encoding="utf-8")
    assert text.startswith("#")
    for key in ("timeoutMs:", "maxOutputLength:", "forModel: vision", "call_description: true"):
        assert key in text
    for python_spelling in ("timeout_ms", "max_output_length", "for_model:"):
        assert python_spelling not in text
    assert "mcpServers: []" in text
    assert len(re.findall(r"^    - name: ", text, flags=re.MULTILINE)) == 11
    # Every line is valid as an edit target: no trailing whitespace.
    assert all(line == line.rstrip() for line in text.splitlines())


def test_6_2_default_file_is_written_atomically(tmp_path: Path) -> None:
    path = tmp_path / CONFIG
    path.write_text("old content\n", encoding="utf-8")
    path.chmod(0o640)
    dump_default_system_config(path)
    assert os.listdir(tmp_path) == [CONFIG]  # no temporary file left behind
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # an existing file keeps its mode
    assert load_system_config(path).builtin_tools is not None


def test_6_2_new_default_file_is_readable(tmp_path: Path) -> None:
    path = tmp_path / CONFIG
    dump_default_system_config(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_6_2_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "is_a_directory"
    target.mkdir()
    (target / "keep").write_text("x", encoding="utf-8")
    with pytest.raises(OSError):  # noqa: PT011 - the OS decides the exact subclass
        dump_default_system_config(target)
    assert sorted(os.listdir(tmp_path)) == ["is_a_directory"]
    assert (target / "keep").read_text(encoding="utf-8") == "x"


def test_6_2_edited_default_file_keeps_user_changes(tmp_path: Path) -> None:
    path = tmp_path / CONFIG
    dump_default_system_config(path)
    text = path.read_text(encoding="utf-8").replace("timeoutMs: 120000", "timeoutMs: 5000")
    path.write_text(text, encoding="utf-8")
    config = load_system_config(path)
    assert config.builtin_tools is not None
    exec_command = next(entry for entry in config.builtin_tools if entry.name == "exec_command")
    assert exec_command.timeout_ms == 5000


# ------------------------------------------------------------------ errors


def assert_error(
    error: ConfigError, path: Path, line: int | None, field: str | None, fragment: str
) -> None:
    message = str(error)
    assert error.path == str(path)
    assert error.line == line
    assert error.field == field
    assert path.name in message
    prefix = str(path) if line is None else f"{path}:{line}"
    if field is not None:
        prefix = f"{prefix}: {field}"
    assert message.startswith(prefix + ": "), message
    assert fragment in message, message


def test_6_2_error_message_shape(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        tools:
          builtin:
            - {name: a, description: d}
            - {name: b, description: d}
            - {name: c, description: d}
            - name: d
              description: d

              permission: r
              # the next line is wrong
              timeoutMs: fast
        """,
    )
    with pytest.raises(ConfigError) as caught:
        load_system_config(path)
    assert str(caught.value) == (
        f'{path}:11: tools.builtin[3].timeoutMs: expected an integer, got "fast"'
    )
    assert isinstance(caught.value, ValueError)


BAD_ENTRIES: list[tuple[str, str, int, str, str]] = [
    # (id, entry lines under "- ", line, field, fragment)
    ("missing-name", "description: d", 3, "tools.builtin[0]", 'missing "name"'),
    ("blank-name", "name: '  '\n      description: d", 3, "tools.builtin[0].name", "empty"),
    ("name-not-string", "name: [x]\n      description: d", 3, "tools.builtin[0].name", "a list"),
    ("missing-description", "name: x", 3, "tools.builtin[0]", 'missing "description"'),
    (
        "blank-description",
        "name: x\n      description: ''",
        4,
        "tools.builtin[0].description",
        "empty",
    ),
    (
        "permission",
        "name: x\n      description: d\n      permission: x",
        5,
        "tools.builtin[0].permission",
        'expected "r" or "rw", got "x"',
    ),
    (
        "for-model",
        "name: x\n      description: d\n      forModel: both",
        5,
        "tools.builtin[0].forModel",
        'expected "vision" or "text-only", got "both"',
    ),
    (
        "timeout-float",
        "name: x\n      description: d\n      timeoutMs: 1.5",
        5,
        "tools.builtin[0].timeoutMs",
        "expected an integer, got 1.5",
    ),
    (
        "timeout-bool",
        "name: x\n      description: d\n      timeoutMs: true",
        5,
        "tools.builtin[0].timeoutMs",
        "expected an integer, got true",
    ),
    (
        "max-output-string",
        "name: x\n      description: d\n      maxOutputLength: '100'",
        5,
        "tools.builtin[0].maxOutputLength",
        'expected an integer, got "100"',
    ),
    (
        "call-description",
        "name: x\n      description: d\n      call_description: 'no'",
        5,
        "tools.builtin[0].call_description",
        'expected true or false, got "no"',
    ),
    (
        "parameters-list",
        "name: x\n      description: d\n      parameters: [a]",
        5,
        "tools.builtin[0].parameters",
        "expected a mapping",
    ),
    (
        "properties-list",
        "name: x\n      description: d\n      parameters:\n        properties: [a]",
        6,
        "tools.builtin[0].parameters.properties",
        "expected a mapping, got a list",
    ),
    (
        "required-not-strings",
        "name: x\n      description: d\n      parameters:\n        required: [a, 1]",
        6,
        "tools.builtin[0].parameters.required[1]",
        "expected a string, got 1",
    ),
    (
        "parameters-non-string-key",
        "name: x\n      description: d\n      parameters:\n        1: a",
        6,
        "tools.builtin[0].parameters.1",
        "keys must be strings, got 1",
    ),
    (
        "parameters-timestamp",
        "name: x\n      description: d\n      parameters:\n        since: 2024-01-01",
        6,
        "tools.builtin[0].parameters.since",
        "expected a JSON value",
    ),
    (
        "custom-tag",
        "name: x\n      description: d\n      timeoutMs: !seconds 5",
        5,
        "tools.builtin[0].timeoutMs",
        "expected an integer, got a value tagged !seconds",
    ),
    (
        "unknown-key-hint",
        "name: x\n      description: d\n      timeout_ms: 5",
        5,
        "tools.builtin[0].timeout_ms",
        "unknown key (allowed keys: name, description, parameters, permission, forModel, "
        'timeoutMs, maxOutputLength, call_description); did you mean "timeoutMs"?',
    ),
    (
        "unknown-key",
        "name: x\n      description: d\n      colour: blue",
        5,
        "tools.builtin[0].colour",
        "unknown key",
    ),
]


@pytest.mark.parametrize(
    ("entry", "line", "field", "fragment"),
    [row[1:] for row in BAD_ENTRIES],
    ids=[row[0] for row in BAD_ENTRIES],
)
def test_6_2_bad_entry_is_an_error(
    tmp_path: Path, entry: str, line: int, field: str, fragment: str
) -> None:
    path = write(tmp_path, f"tools:\n  builtin:\n    - {entry}\n")
    with pytest.raises(ConfigError) as caught:
        load_system_config(path)
    assert_error(caught.value, path, line, field, fragment)


def test_6_2_entry_index_counts_from_zero_and_names_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        tools:
          builtin:
            - name: ok
              description: fine
            - 42
        """,
    )
    with pytest.raises(ConfigError) as caught:
        load_system_config(path)
    assert_error(caught.value, path, 5, "tools.builtin[1]", "expected a mapping (one tool entry)")


def test_6_2_duplicate_tool_names_are_an_error(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        tools:
          builtin:
            - {name: read_file, description: a}
            - {name: read_file, description: b}
        """,
    )
    with pytest.raises(ConfigError) as caught:
        load_system_config(path)
    assert_error(caught.value, path, 4, "tools.builtin[1].name", "duplicate tool name")
    assert "tools.builtin[0]" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "line", "field", "fragment"),
    [
        ("tools: [a]\n", 1, "tools", "expected a mapping with builtin and/or mcpServers"),
        ("tools:\n  builtin: {a: 1}\n", 2, "tools.builtin", "expected a list of tool entries"),
        ("tools:\n  builtin:\n", 2, "tools.builtin", "write [] for no builtin tools"),
    ],
    ids=["tools-not-mapping", "builtin-not-list", "builtin-null"],
)
def test_6_2_bad_structure_is_an_error(
    tmp_path: Path, text: str, line: int, field: str, fragment: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_system_config(path)
    assert_error(caught.value, path, line, field, fragment)


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("tools:\n  builtin: [a, b\nother: 1\n", 3, "invalid YAML"),
        ("a: 1\nb: 2\na: 3\n", 3, "duplicate key"),
        ("tools:\n\tbuiltin: []\n", 2, "invalid YAML"),
        ("a: 1\n---\nb: 2\n", 2, "invalid YAML"),
    ],
    ids=["unclosed-flow", "duplicate-key", "tab-indent", "two-documents"],
)
def test_6_2_broken_yaml_reports_file_and_line(
    tmp_path: Path, text: str, line: int, fragment: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_system_config(path)
    assert_error(caught.value, path, line, None, fragment)


@pytest.mark.parametrize(
    ("text", "line", "got"),
    [
        ("- a\n- b\n", 1, "a list"),
        ("# comment\n\njust a string\n", 3, '"just a string"'),
        ("42\n", 1, "42"),
    ],
)
def test_6_2_non_mapping_root_is_an_error(tmp_path: Path, text: str, line: int, got: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_system_config(path)
    assert_error(
        caught.value,
        path,
        line,
        None,
        f"expected a mapping (key: value lines) at the top level, got {got}",
    )


def test_6_2_missing_file_says_it_does_not_exist(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / CONFIG
    with pytest.raises(ConfigError) as caught:
        load_system_config(path)
    assert_error(caught.value, path, None, None, "does not exist")


def test_6_2_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_system_config(tmp_path)
    assert_error(caught.value, tmp_path, None, None, "is a directory")


def test_6_2_non_utf8_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / CONFIG
    path.write_bytes(b"tools:\n  builtin: []\n# caf\xe9\n")
    with pytest.raises(ConfigError) as caught:
        load_system_config(path)
    assert_error(caught.value, path, 3, None, "not valid UTF-8")


def test_config_error_carries_data_and_pickles() -> None:
    error = ConfigError("expected an integer", "a/system_config.yaml", 3, "tools.builtin[0].x")
    assert (error.path, error.line, error.field, error.reason) == (
        "a/system_config.yaml",
        3,
        "tools.builtin[0].x",
        "expected an integer",
    )
    assert str(error) == "a/system_config.yaml:3: tools.builtin[0].x: expected an integer"
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy, ConfigError)
    assert (copy.path, copy.line, copy.field, str(copy)) == (
        error.path,
        error.line,
        error.field,
        str(error),
    )


def test_config_error_accepts_path_objects() -> None:
    error = ConfigError("gone", Path("x") / CONFIG)
    assert str(error) == f"{Path('x') / CONFIG}: gone"


def test_6_2_anchored_values_are_read_like_plain_ones(tmp_path: Path) -> None:
    config = load_system_config(
        write(
            tmp_path,
            """\
            tools:
              builtin:
                - name: a
                  description: d
                  call_description: &off false
                  timeoutMs: &limit 500
                  parameters: &schema
                    type: object
                    properties: {flag: {type: boolean, default: &yes true}}
                - name: b
                  description: d
                  call_description: *off
                  timeoutMs: *limit
                  parameters: *schema
            """,
        )
    )
    assert config.builtin_tools is not None
    first, second = config.builtin_tools
    assert first.call_description is False
    assert second.call_description is False
    assert second.timeout_ms == 500
    assert type(second.timeout_ms) is int
    assert first.parameters == second.parameters
    assert first.parameters is not second.parameters
    assert first.parameters is not None
    assert first.parameters["properties"]["flag"]["default"] is True


def test_6_2_misspelled_tools_key_is_pointed_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "system_config.yaml"
    path.write_text("tools:\n  buitin: []\n")
    config = load_system_config(path)
    assert config.builtin_tools is None
    [line] = [r.getMessage() for r in caplog.records if r.name == "penguin"]
    assert line == (
        f"{path}:2: tools.buitin: unknown key (allowed keys: builtin, mcpServers); "
        'did you mean "builtin"?; ignored'
    )
