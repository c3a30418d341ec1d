"""The Environment's tool registry: which tools a call may name, in listing order.

A :class:`ToolRegistry` starts from the configured toolset — each entry whose name has
a builtin factory becomes a tool (reference 1.10; the others are remembered only for
:meth:`ToolRegistry.permission`) — and then plain tools *join* it: the user's custom
tools, and any other source of tools that implement the narrow contract (MCP servers'
tools are such plain tools). Joined tools list after the builtins, in the order they
joined.

What it guarantees: one tool per name, a tool's ``name`` equal to its definition's (the
model calls a tool by its definition), and no joined tool shadowing a configured
builtin. It never runs a tool and knows nothing of the supervisors beyond handing them
to the factories.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import final

from penguin import protocol as om
from penguin.config import Permission, ToolDefinitionConfig, apply_call_description

from ._contract import Tool
from ._services import ToolServices
from .tools._base import Supervisors
from .tools.registry import BUILTIN_TOOLS

__all__ = ["ToolRegistry"]


@final
class ToolRegistry:
    """Tools by name, in listing order; see the module docstring."""

    def __init__(
        self,
        entries: Iterable[ToolDefinitionConfig],
        services: ToolServices,
        supervisors: Supervisors,
    ) -> None:
        """Build the builtins of ``entries`` (the first entry of a name wins)."""
        self._entries: dict[str, ToolDefinitionConfig] = {}
        self._tools: dict[str, Tool] = {}
        for entry in entries:
            self._entries.setdefault(entry.name, entry)
            factory = BUILTIN_TOOLS.get(entry.name)
            if factory is not None and entry.name not in self._tools:
                self._tools[entry.name] = factory(entry, services, supervisors)
        self._configured = frozenset(self._entries)

    def join(self, tools: Iterable[Tool], *, kind: str = "custom tool") -> None:
        """Add plain tools after those already here; ``kind`` names them in errors.

        Raises ``ValueError`` (and adds none of them) when a tool's name differs from
        its definition's, when two of them share a name, or when one takes the name
        of a configured builtin or of a tool that joined before.
        """
        joining: dict[str, Tool] = {}
        for tool in tools:
            if tool.name != tool.definition.name:
                raise ValueError(
                    f"{kind} {tool.name!r} has definition.name "
                    f"{tool.definition.name!r}; the model calls a tool by its definition's "
                    "name, so the two must be equal"
                )
            if tool.name in joining:
                raise ValueError(f"two {kind}s are named {tool.name!r}")
            if tool.name in self._configured:
                raise ValueError(
                    f"{kind} {tool.name!r} has the name of a configured builtin tool; "
                    "rename it, or leave the builtin out of EnvironmentConfig.tools"
                )
            if tool.name in self._entries:
                raise ValueError(
                    f"{kind} {tool.name!r} has the name of a tool already in the toolset; "
                    "rename one of them"
                )
            joining[tool.name] = tool
        for name, tool in joining.items():
            self._entries[name] = tool.definition
            self._tools[name] = tool

    def get(self, name: str) -> Tool | None:
        """The tool the model calls ``name``, or ``None``."""
        return self._tools.get(name)

    def __iter__(self) -> Iterator[Tool]:
        """The tools, in listing order."""
        return iter(self._tools.values())

    def definitions(self) -> list[om.ToolDefinition]:
        """What the model is shown of each tool (``call_description`` applied)."""
        return [apply_call_description(tool.definition).to_definition() for tool in self]

    def permission(self, name: str) -> Permission | None:
        """The configured permission of ``name`` (``None`` for unknown or unset)."""
        entry = self._entries.get(name)
        return None if entry is None else entry.permission
