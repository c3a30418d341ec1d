"""Shaping a configured toolset for one model and one session (reference 6.3, 6.4).

Owns two pure functions over :class:`ToolDefinitionConfig` lists:
:func:`apply_call_description` (hide the ``description`` argument of an entry
whose ``call_description`` is false) and :func:`select_tools` (keep the entries
meant for this model's vision ability and this session's depth). Neither does
I/O, neither mutates its input, and neither knows which names are executable:
that is the Environment's registry.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping

import attrs

from ._defaults import SUBAGENT_TOOL_NAMES
from ._tools import ToolDefinitionConfig

__all__ = ["apply_call_description", "select_tools"]


def apply_call_description(entry: ToolDefinitionConfig) -> ToolDefinitionConfig:
    """The entry as the model should see it under its ``call_description`` flag.

    With ``call_description=False`` the result's schema lacks the ``description``
    property and the ``"description"`` item of ``required``; everything else is
    kept. The entry itself is returned unchanged when the flag is true, when it
    has no parameters, or when its properties have no ``description``. The input
    is never modified: the result owns a deep copy of the parameters.
    """
    parameters = entry.parameters
    if entry.call_description or parameters is None:
        return entry
    properties = parameters.get("properties")
    if not isinstance(properties, Mapping) or "description" not in properties:
        return entry
    trimmed = copy.deepcopy(dict(parameters))
    trimmed["properties"] = {
        key: value for key, value in trimmed["properties"].items() if key != "description"
    }
    required = trimmed.get("required")
    if isinstance(required, list):
        trimmed["required"] = [name for name in required if name != "description"]
    return attrs.evolve(entry, parameters=trimmed)


def select_tools(
    entries: Iterable[ToolDefinitionConfig], *, vision: bool, depth: int = 0
) -> list[ToolDefinitionConfig]:
    """The entries offered to a model, in their configured order.

    An entry with ``for_model="vision"`` is kept only when ``vision`` is true, one
    with ``"text-only"`` only when it is false; entries without ``for_model`` are
    always kept. A child session (``depth >= 1``) gets none of the subagent tools
    (run_subagent, input_subagent, kill_subagent): subagents cannot nest.
    """
    wanted = "vision" if vision else "text-only"
    return [
        entry
        for entry in entries
        if (entry.for_model is None or entry.for_model == wanted)
        and not (depth >= 1 and entry.name in SUBAGENT_TOOL_NAMES)
    ]
