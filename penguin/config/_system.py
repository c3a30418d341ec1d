"""``system_config.yaml``, an agent's own configuration (reference 6.2, 6.5, D3, D4).

Owns reading the file into an :class:`AgentConfig` (validating the
``system_prompt`` template, every ``tools.builtin`` entry, the ``images`` and
``subagents`` sections and, leniently, every ``tools.mcpServers`` entry), and
writing it: the complete, commented default file an agent starts with, and
atomic rewrites of a loaded document. It does not decide where the file lives (the
agent layer) and does not know which tool names are executable (the Environment
keeps unknown names out of the model's sight).

The file is read and written with ruamel.yaml in round-trip mode, and the loaded
document is kept on the :class:`AgentConfig`, so a later writer can change one
value and keep the user's comments, key order and unknown keys. Rendering the
``system_prompt`` template is ``_prompt``'s job. The YAML keys keep the reference
spellings (``forModel``, ``timeoutMs``, ``maxOutputLength``,
``call_description``); attributes are snake_case.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, cast, final

import attrs
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.scalarstring import LiteralScalarString

from ._defaults import default_tools
from ._errors import ConfigError, ConfigValueError
from ._files import read_config_text
from ._mcp import McpServerConfig, parse_mcp_servers
from ._prompt import DEFAULT_SYSTEM_PROMPT
from ._tools import (
    DEFAULT_MAX_OUTPUT_LENGTH,
    DEFAULT_TIMEOUT_MS,
    ForModel,
    Permission,
    ToolDefinitionConfig,
)
from ._yaml import (
    Located,
    describe_value,
    expect_bool,
    expect_choice,
    expect_int,
    expect_list,
    expect_mapping,
    expect_str,
    reject_unknown_keys,
    round_trip_yaml,
    to_json_value,
    warn_unknown_keys,
    write_text_atomically,
)

__all__ = [
    "DEFAULT_IMAGE_MAX_EDGE",
    "DEFAULT_MAX_SPAWNED",
    "AgentConfig",
    "ImageSettings",
    "SubagentSettings",
    "dump_default_system_config",
    "load_system_config",
    "write_system_config",
]

#: The keys of one ``tools.builtin`` entry, in the order penguin writes them.
_ENTRY_KEYS: Final = (
    "name",
    "description",
    "parameters",
    "permission",
    "forModel",
    "timeoutMs",
    "maxOutputLength",
    "call_description",
)

#: The keys of the ``images`` section, in the order penguin writes them.
_IMAGE_KEYS: Final = ("downscale", "maxEdge")

DEFAULT_IMAGE_MAX_EDGE: Final = 2048
"""The longest side, in pixels, of an image penguin downscales (``images.maxEdge``)."""


def _positive_edge(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigValueError(f"max_edge must be a positive number of pixels, not {value!r}")


@final
@attrs.frozen(kw_only=True)
class ImageSettings:
    """The ``images`` section of ``system_config.yaml``: what happens to big images.

    With ``downscale`` off (the default) read_image and describe_image send an
    image as it is and refuse one over 5 MiB (reference 3.11.5). With it on (and the
    optional Pillow dependency installed: ``pip install 'penguin[images]'``), an
    image larger than 5 MiB or with a side longer than ``max_edge`` pixels is
    scaled down, keeping its aspect ratio, and re-encoded before it is sent.
    ``max_edge`` must be a positive number of pixels (``ValueError`` otherwise).
    """

    downscale: bool = False
    max_edge: int = attrs.field(default=DEFAULT_IMAGE_MAX_EDGE, validator=_positive_edge)


#: The keys of the ``subagents`` section.
_SUBAGENT_KEYS: Final = ("maxSpawned",)

DEFAULT_MAX_SPAWNED: Final = 32
"""How many subagents one session may spawn in its lifetime (``subagents.maxSpawned``)."""


def _positive_count(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigValueError(f"{attribute.name} must be a positive whole number, not {value!r}")


@final
@attrs.frozen(kw_only=True)
class SubagentSettings:
    """The ``subagents`` section of ``system_config.yaml``.

    ``max_spawned`` caps the total number of subagents one session may spawn with
    run_subagent over its lifetime (running, finished and killed ones all count);
    the cap of 8 registered at a time is separate and fixed. It must be a positive
    whole number (``ValueError`` otherwise).
    """

    max_spawned: int = attrs.field(default=DEFAULT_MAX_SPAWNED, validator=_positive_count)


@final
@attrs.frozen(kw_only=True)
class AgentConfig:
    """An agent's ``system_config.yaml``, validated.

    ``builtin_tools`` is None when the file has no ``tools.builtin`` key, meaning
    "penguin's default toolset"; otherwise it is exactly the configured list (an
    empty tuple for ``builtin: []``), entries with names penguin cannot execute
    included. :meth:`effective_builtin_tools` resolves the two cases.
    ``mcp_servers`` holds the valid MCP entries. ``document`` is the round-trip
    YAML as loaded, for writers that must keep comments and unknown keys; it is
    not part of equality. ``system_prompt`` is the template under the
    ``system_prompt`` key; when the key is absent or null it is penguin's
    built-in template, :data:`~penguin.config.DEFAULT_SYSTEM_PROMPT`.
    ``images`` is the ``images`` section (all defaults when it is absent or null).
    """

    path: Path
    builtin_tools: tuple[ToolDefinitionConfig, ...] | None = None
    mcp_servers: tuple[McpServerConfig, ...] = ()
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    images: ImageSettings = attrs.field(factory=ImageSettings)
    subagents: SubagentSettings = attrs.field(factory=SubagentSettings)
    document: CommentedMap = attrs.field(factory=CommentedMap, eq=False, repr=False)

    def effective_builtin_tools(self) -> list[ToolDefinitionConfig]:
        """The builtin entries this agent offers: the configured list, or the defaults."""
        if self.builtin_tools is None:
            return default_tools()
        return list(self.builtin_tools)


def _present(node: Located, key: str) -> Located | None:
    """The child under ``key`` of a mapping node, or None when absent or null."""
    if key in node.value and node.value[key] is not None:
        return node.child(key)
    return None


def _first_content_line(text: str) -> int:
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped and not stripped.startswith(("#", "%", "---")):
            return number
    return 1


def _read_text(path: Path) -> str:
    try:
        return read_config_text(path, "YAML")
    except FileNotFoundError:
        raise ConfigError(
            "the file does not exist (dump_default_system_config writes the default one)",
            path,
        ) from None


def _parse_entry(node: Located) -> ToolDefinitionConfig:
    expect_mapping(node, "a mapping (one tool entry)")
    reject_unknown_keys(node, _ENTRY_KEYS)
    values = node.value

    for key in ("name", "description"):
        if key not in values:
            node.fail(f'missing "{key}"; every tool entry needs a name and a description')
    name = expect_str(node.child("name"))
    description = expect_str(node.child("description"))

    parameters: dict[str, Any] | None = None
    if (parameters_node := _present(node, "parameters")) is not None:
        expect_mapping(parameters_node, "a mapping (a JSON Schema object)")
        parameters = to_json_value(parameters_node)
        if (properties := _present(parameters_node, "properties")) is not None:
            expect_mapping(properties)
        if (required := _present(parameters_node, "required")) is not None:
            for item in expect_list(required).items():
                expect_str(item)

    permission = None
    if (permission_node := _present(node, "permission")) is not None:
        permission = cast(Permission, expect_choice(permission_node, ("r", "rw")))
    for_model = None
    if (for_model_node := _present(node, "forModel")) is not None:
        for_model = cast(ForModel, expect_choice(for_model_node, ("vision", "text-only")))
    timeout_node = _present(node, "timeoutMs")
    max_output_node = _present(node, "maxOutputLength")
    call_description_node = _present(node, "call_description")
    return ToolDefinitionConfig(
        name=name,
        description=description,
        parameters=parameters,
        permission=permission,
        for_model=for_model,
        timeout_ms=DEFAULT_TIMEOUT_MS if timeout_node is None else expect_int(timeout_node),
        max_output_length=(
            DEFAULT_MAX_OUTPUT_LENGTH if max_output_node is None else expect_int(max_output_node)
        ),
        call_description=(
            True if call_description_node is None else expect_bool(call_description_node)
        ),
    )


def _parse_builtin(node: Located) -> tuple[ToolDefinitionConfig, ...]:
    if node.value is None:
        node.fail(
            "expected a list of tool entries; write [] for no builtin tools, "
            "or remove the key to get the default toolset"
        )
    entries: list[ToolDefinitionConfig] = []
    seen: dict[str, str] = {}
    for item in expect_list(node, "a list of tool entries").items():
        entry = _parse_entry(item)
        if entry.name in seen:
            item.child("name").fail(
                f'duplicate tool name "{entry.name}" (first defined at {seen[entry.name]})'
            )
        seen[entry.name] = item.field
        entries.append(entry)
    return tuple(entries)


def _parse_images(node: Located) -> ImageSettings:
    expect_mapping(node, "a mapping with downscale and/or maxEdge")
    reject_unknown_keys(node, _IMAGE_KEYS)
    downscale = False
    if (downscale_node := _present(node, "downscale")) is not None:
        downscale = expect_bool(downscale_node)
    max_edge = DEFAULT_IMAGE_MAX_EDGE
    if (edge_node := _present(node, "maxEdge")) is not None:
        max_edge = expect_int(edge_node)
        if max_edge < 1:
            edge_node.fail(f"expected a positive number of pixels, got {max_edge}")
    return ImageSettings(downscale=downscale, max_edge=max_edge)


def _load_subagents(root: Located) -> SubagentSettings:
    """The ``subagents`` section: absent or null is all defaults; mistakes are errors."""
    node = _present(root, "subagents")
    if node is None:
        return SubagentSettings()
    expect_mapping(node, "a mapping with maxSpawned")
    reject_unknown_keys(node, _SUBAGENT_KEYS)
    max_spawned = DEFAULT_MAX_SPAWNED
    if (count_node := _present(node, "maxSpawned")) is not None:
        max_spawned = expect_int(count_node)
        if max_spawned < 1:
            count_node.fail(f"expected a positive number of subagents, got {max_spawned}")
    return SubagentSettings(max_spawned=max_spawned)


def load_system_config(path: str | os.PathLike[str]) -> AgentConfig:
    """Read and validate an agent's ``system_config.yaml``.

    An empty file is all defaults. Raises :class:`ConfigError` — naming the file,
    the line and the field — for a missing or unreadable file, broken YAML, a root
    that is not a mapping, a ``system_prompt`` that is not a string, any invalid
    ``tools.builtin`` entry or an invalid ``images`` or ``subagents`` section. Invalid
    ``tools.mcpServers`` entries are only logged and skipped. Blocking: call it
    from a worker thread in async code.
    """
    file = Path(path)
    text = _read_text(file)
    try:
        document = round_trip_yaml().load(text)
    except MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else None
        reason = error.problem or error.context or "not valid YAML"
        raise ConfigError(f"invalid YAML: {reason}", file, line) from None
    except YAMLError as error:
        raise ConfigError(f"invalid YAML: {error}", file) from None
    if document is None:
        return AgentConfig(path=file)
    if not isinstance(document, CommentedMap):
        raise ConfigError(
            f"expected a mapping (key: value lines) at the top level, "
            f"got {describe_value(document)}",
            file,
            _first_content_line(text),
        )

    root = Located(value=document, field="", line=1, path=os.fspath(path))
    system_prompt = DEFAULT_SYSTEM_PROMPT
    if (prompt := _present(root, "system_prompt")) is not None:
        system_prompt = expect_str(prompt, blank_ok=True)
    builtin: tuple[ToolDefinitionConfig, ...] | None = None
    mcp_servers: tuple[McpServerConfig, ...] = ()
    if (tools := _present(root, "tools")) is not None:
        expect_mapping(tools, "a mapping with builtin and/or mcpServers")
        warn_unknown_keys(tools, ("builtin", "mcpServers"))
        if "builtin" in tools.value:
            builtin = _parse_builtin(tools.child("builtin"))
        if "mcpServers" in tools.value:
            mcp_servers = parse_mcp_servers(tools.child("mcpServers"))
    images = ImageSettings()
    if (images_node := _present(root, "images")) is not None:
        images = _parse_images(images_node)
    return AgentConfig(
        path=file,
        builtin_tools=builtin,
        mcp_servers=mcp_servers,
        system_prompt=system_prompt,
        images=images,
        subagents=_load_subagents(root),
        document=document,
    )


def write_system_config(path: str | os.PathLike[str], document: Mapping[str, Any]) -> None:
    """Write a (round-trip) YAML document atomically; comments in it are kept.

    The usual edit is ``config = load_system_config(p)``, change
    ``config.document``, ``write_system_config(p, config.document)``. Raises
    :class:`OSError` when the file cannot be written; the old file then stays.
    """
    stream = io.StringIO()
    round_trip_yaml().dump(document, stream)
    write_text_atomically(Path(path), stream.getvalue())


_HEADER: Final = """\
An agent's configuration, read by penguin each time the agent starts a session.
"""

_PROMPT_COMMENT: Final = """\
system_prompt is the template of the system prompt. penguin fills in these
placeholders when a session starts: {{CWD}} (the workspace), {{DATE}},
{{PLATFORM}}, {{OS}}, {{ARCH}}, {{SHELL}}, {{MODEL_ID}}, {{AGENT_ID}},
{{SESSION_ID}} and {{AGENTS_MD}} (the workspace's AGENTS.md in a
[developer_instructions] block, or nothing). Other {{...}} text is left as it
is. Remove the key to always get the built-in prompt of the installed penguin."""

_TOOLS_COMMENT: Final = """\
tools.builtin is the complete list of builtin tools this agent offers the model, in
order. It is not merged with penguin's defaults: remove an entry to withdraw that
tool, edit a description to change what the model reads, and keep each entry's
whole schema. Remove the builtin key altogether to always get the defaults of the
installed penguin (new defaults are never added to this list automatically);
builtin: [] means no builtin tools. Entries with names penguin has no tool for are
ignored.

Keys of a tool entry:
  name              the builtin tool it configures
  description       what the model reads about the tool
  parameters        JSON Schema of the tool's arguments, as the model sees it
  permission        r (only reads) or rw (may change things); the read-only
                    approval mode approves r tools without asking
  forModel          vision: only for models that accept images;
                    text-only: only for models that do not
  timeoutMs         time limit of one call, in milliseconds (0: none; default 120000)
  maxOutputLength   characters of output shown to the model (0: no limit; default 16000)
  call_description  false hides the "description" argument from the model"""

_MCP_COMMENT: Final = """\
MCP servers whose tools join the builtin ones as mcp__<server>__<tool>, e.g.
  - name: files
    config: {command: npx, args: ["-y", "@modelcontextprotocol/server-filesystem", "."]}
  - name: search
    config: {url: "https://example.com/mcp", headers: {Authorization: "Bearer ..."}}
config keys: transport (stdio | http | sse; inferred from command or url), command,
args, env, cwd (stdio); url, headers (http, sse); connectTimeoutMs (default 10000),
timeoutMs, maxOutputLength, permission (auto | r | rw)."""


_SUBAGENTS_COMMENT: Final = """\
subagents: limits of run_subagent.
  maxSpawned  how many subagents one session may start in its lifetime
              (default 32); at most 8 are kept at a time, whatever this says."""


def _add_default_subagents(document: CommentedMap) -> None:
    section = CommentedMap()
    section["maxSpawned"] = DEFAULT_MAX_SPAWNED
    document["subagents"] = section
    document.yaml_set_comment_before_after_key("subagents", before="\n" + _SUBAGENTS_COMMENT)


_IMAGES_COMMENT: Final = """\
images: what read_image and describe_image do with big images.
  downscale   true: an image over 5 MiB, or with a side longer than maxEdge
              pixels, is scaled down (aspect ratio kept) and re-encoded before it
              is sent; needs Pillow (pip install "penguin[images]").
              false (default): images are sent as they are, and one over 5 MiB
              is refused.
  maxEdge     the longest side, in pixels, of a downscaled image (default 2048)"""


def _yaml_node(value: Any) -> Any:
    if isinstance(value, Mapping):
        mapping = CommentedMap()
        for key, item in value.items():
            mapping[key] = _yaml_node(item)
        return mapping
    if isinstance(value, list | tuple):
        sequence = CommentedSeq(_yaml_node(item) for item in value)
        if all(isinstance(item, str | int | float | bool) for item in value):
            sequence.fa.set_flow_style()
        return sequence
    if isinstance(value, str) and "\n" in value:
        return LiteralScalarString(value)
    return value


def _entry_node(entry: ToolDefinitionConfig) -> CommentedMap:
    node = CommentedMap()
    node["name"] = entry.name
    node["description"] = _yaml_node(entry.description)
    if entry.parameters is not None:
        node["parameters"] = _yaml_node(entry.parameters)
    if entry.permission is not None:
        node["permission"] = entry.permission
    if entry.for_model is not None:
        node["forModel"] = entry.for_model
    node["timeoutMs"] = entry.timeout_ms
    node["maxOutputLength"] = entry.max_output_length
    properties = (entry.parameters or {}).get("properties")
    if not entry.call_description or (
        isinstance(properties, Mapping) and "description" in properties
    ):
        # Written where it has an effect; elsewhere the default (true) is implied.
        node["call_description"] = entry.call_description
    return node


def _default_document() -> CommentedMap:
    builtin = CommentedSeq(_entry_node(entry) for entry in default_tools())
    for index in range(1, len(builtin)):
        builtin.yaml_set_comment_before_after_key(index, before="\n", indent=4)
    tools = CommentedMap()
    tools["builtin"] = builtin
    tools["mcpServers"] = CommentedSeq()
    tools.yaml_set_comment_before_after_key("mcpServers", before="\n" + _MCP_COMMENT, indent=2)
    document = CommentedMap()
    document["system_prompt"] = LiteralScalarString(DEFAULT_SYSTEM_PROMPT)
    document["tools"] = tools
    images = CommentedMap()
    images["downscale"] = ImageSettings().downscale
    images["maxEdge"] = ImageSettings().max_edge
    document["images"] = images
    document.yaml_set_comment_before_after_key("system_prompt", before="\n" + _PROMPT_COMMENT)
    document.yaml_set_comment_before_after_key("tools", before="\n" + _TOOLS_COMMENT)
    document.yaml_set_comment_before_after_key("images", before="\n" + _IMAGES_COMMENT)
    _add_default_subagents(document)
    document.yaml_set_start_comment(_HEADER)
    return document


def dump_default_system_config(path: str | os.PathLike[str]) -> None:
    """Write the complete, commented default ``system_config.yaml`` to ``path``.

    The file holds the built-in system prompt template under ``system_prompt``,
    lists the default toolset under ``tools.builtin`` with every key spelled out
    and holds the default ``images`` section, so users edit a complete file;
    :func:`load_system_config` reads it back as exactly
    :data:`DEFAULT_SYSTEM_PROMPT`, :func:`default_tools` and :class:`ImageSettings`.
    The write is atomic and replaces an existing file; missing parent
    directories are created. Raises :class:`OSError` when the file cannot be
    written.
    """
    write_system_config(path, _default_document())
