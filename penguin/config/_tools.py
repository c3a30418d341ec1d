"""Tool definitions as configured: :class:`ToolDefinitionConfig` and the default toolset.

A configured entry carries what the model sees (name, description, JSON Schema) and
what only the harness uses (permission, limits, forModel, call_description). The
model-facing part is cut out by :meth:`ToolDefinitionConfig.to_definition`; nothing
else ever leaves the process.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeAlias, final

import attrs

from penguin.protocol import ToolDefinition

__all__ = [
    "DEFAULT_MAX_OUTPUT_LENGTH",
    "DEFAULT_TIMEOUT_MS",
    "ForModel",
    "Permission",
    "ToolDefinitionConfig",
]

Permission: TypeAlias = Literal["r", "rw"]
ForModel: TypeAlias = Literal["vision", "text-only"]

DEFAULT_TIMEOUT_MS = 120_000
DEFAULT_MAX_OUTPUT_LENGTH = 16_000


@final
@attrs.frozen(kw_only=True)
class ToolDefinitionConfig:
    """One configured tool.

    ``timeout_ms`` and ``max_output_length`` of zero or less disable that limit.
    ``for_model`` keeps the entry only for vision (or only for text-only) models;
    ``call_description=False`` removes the ``description`` argument from the schema
    the model sees. In YAML the keys are spelled ``forModel``, ``timeoutMs``,
    ``maxOutputLength`` and ``call_description``.
    """

    name: str
    description: str
    parameters: Mapping[str, Any] | None = None
    permission: Permission | None = None
    for_model: ForModel | None = None
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    max_output_length: int = DEFAULT_MAX_OUTPUT_LENGTH
    call_description: bool = True

    def to_definition(self) -> ToolDefinition:
        """What the model sees of this entry: name, description, parameters."""
        return ToolDefinition(
            name=self.name, description=self.description, parameters=self.parameters
        )
