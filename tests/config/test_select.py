"""Reference 6.3 (call_description) and 6.4 (forModel and depth selection)."""

from __future__ import annotations

import copy
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from penguin.config import (
    ToolDefinitionConfig,
    apply_call_description,
    default_tools,
    select_tools,
)


def exec_entry(*, call_description: bool) -> ToolDefinitionConfig:
    entry = next(entry for entry in default_tools() if entry.name == "exec_command")
    return attrs.evolve(entry, call_description=call_description)


def test_6_3_call_description_false_drops_property() -> None:
    entry = exec_entry(call_description=False)
    shown = apply_call_description(entry)
    assert shown.parameters is not None
    assert list(shown.parameters["properties"]) == [
        "cmd",
        "workdir",
        "yield_time_ms",
        "run_in_background",
        "tty",
    ]
    assert shown.parameters["required"] == ["cmd"]
    assert shown.parameters["type"] == "object"
    # Everything else of the entry is kept.
    assert attrs.evolve(shown, parameters=entry.parameters) == entry


def test_6_3_call_description_false_never_mutates_the_input() -> None:
    entry = exec_entry(call_description=False)
    before = copy.deepcopy(entry.parameters)
    shown = apply_call_description(entry)
    assert entry.parameters == before
    assert entry.parameters is not None
    assert "description" in entry.parameters["properties"]
    assert shown.parameters is not None
    # The result shares no mutable state with the input.
    shown.parameters["properties"]["cmd"]["type"] = "changed"
    assert entry.parameters["properties"]["cmd"]["type"] == "string"


def test_6_3_noop_when_flag_is_true() -> None:
    entry = exec_entry(call_description=True)
    assert apply_call_description(entry) is entry


def test_6_3_noop_without_parameters() -> None:
    entry = ToolDefinitionConfig(name="x", description="d", call_description=False)
    assert apply_call_description(entry) is entry


@pytest.mark.parametrize(
    "parameters",
    [
        {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
        {"type": "object"},
        {"type": "object", "properties": ["description"]},
    ],
)
def test_6_3_noop_without_a_description_property(parameters: dict[str, Any]) -> None:
    entry = ToolDefinitionConfig(
        name="x", description="d", parameters=parameters, call_description=False
    )
    assert apply_call_description(entry) is entry


def test_6_3_description_property_without_required_list() -> None:
    entry = ToolDefinitionConfig(
        name="x",
        description="d",
        parameters={"type": "object", "properties": {"description": {}, "a": {}}},
        call_description=False,
    )
    shown = apply_call_description(entry)
    assert shown.parameters == {"type": "object", "properties": {"a": {}}}


def test_6_3_default_toolset_keeps_every_description_argument() -> None:
    for entry in default_tools():
        assert apply_call_description(entry) == entry


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5))
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
property_names = st.sampled_from(["description", "cmd", "path", "x"])
parameters_strategy = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "type": st.just("object"),
            "properties": st.dictionaries(property_names, json_value, max_size=4),
        },
        optional={"required": st.lists(property_names, max_size=4), "extra": json_value},
    ),
)


@given(parameters=parameters_strategy, flag=st.booleans())
def test_6_3_property_idempotent_and_pure(parameters: dict[str, Any] | None, flag: bool) -> None:
    entry = ToolDefinitionConfig(
        name="t", description="d", parameters=parameters, call_description=flag
    )
    before = copy.deepcopy(parameters)
    once = apply_call_description(entry)
    assert entry.parameters == before  # the input is never mutated
    assert apply_call_description(once) == once  # idempotent
    if flag or parameters is None or "description" not in parameters["properties"]:
        assert once is entry  # reference 6.3: no-op cases
        return
    assert once.parameters is not None
    assert "description" not in once.parameters["properties"]
    assert "description" not in once.parameters.get("required", [])
    kept = [key for key in parameters["properties"] if key != "description"]
    assert list(once.parameters["properties"]) == kept
    assert once.parameters.get("extra") == parameters.get("extra")


def names(entries: list[ToolDefinitionConfig]) -> list[str]:
    return [entry.name for entry in entries]


def test_6_4_for_model_selection() -> None:
    vision = names(select_tools(default_tools(), vision=True))
    text_only = names(select_tools(default_tools(), vision=False))
    assert "read_image" in vision
    assert "describe_image" not in vision
    assert "describe_image" in text_only
    assert "read_image" not in text_only
    assert len(vision) == len(text_only) == 10
    # Order is the configured order.
    everything = names(default_tools())
    assert vision == [name for name in everything if name != "describe_image"]
    assert text_only == [name for name in everything if name != "read_image"]


def test_6_4_entries_without_for_model_are_always_kept() -> None:
    custom = ToolDefinitionConfig(name="custom", description="d")
    seeing = ToolDefinitionConfig(name="eyes", description="d", for_model="vision")
    blind = ToolDefinitionConfig(name="words", description="d", for_model="text-only")
    entries = [blind, custom, seeing]
    assert select_tools(entries, vision=True) == [custom, seeing]
    assert select_tools(entries, vision=False) == [blind, custom]


@pytest.mark.parametrize("depth", [1, 2])
def test_6_4_child_sessions_get_no_subagent_tools(depth: int) -> None:
    selected = names(select_tools(default_tools(), vision=True, depth=depth))
    assert not {"run_subagent", "input_subagent", "kill_subagent"} & set(selected)
    assert selected == [
        "read_file",
        "edit_file",
        "write_file",
        "exec_command",
        "input_command",
        "kill_command",
        "read_image",
    ]


def test_6_4_top_level_session_keeps_subagent_tools() -> None:
    selected = names(select_tools(default_tools(), vision=False, depth=0))
    assert {"run_subagent", "input_subagent", "kill_subagent"} <= set(selected)


def test_6_4_selection_does_not_mutate_its_input() -> None:
    entries = default_tools()
    snapshot = list(entries)
    select_tools(entries, vision=False, depth=1)
    assert entries == snapshot
