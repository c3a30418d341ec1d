"""The Environment: tool registry, the execution contract, the output archive.

Users import ``Environment``, ``EnvironmentConfig`` and the tool contract from
``penguin`` directly; this package is where they live.
"""

from __future__ import annotations

from ._contract import Tool as Tool
from ._contract import ToolContext as ToolContext
from ._contract import ToolFactory as ToolFactory
from ._contract import ToolResult as ToolResult
from ._contract import ToolServices as ToolServices
from ._environment import Environment as Environment
from ._environment import EnvironmentConfig as EnvironmentConfig
from ._errors import EnvironmentClosedError as EnvironmentClosedError
from ._errors import WorkspaceError as WorkspaceError
from .supervisor import BackgroundCommand as BackgroundCommand
from .supervisor import BackgroundReport as BackgroundReport
from .supervisor import ProxyInject as ProxyInject
from .supervisor import ProxyPolicy as ProxyPolicy

__all__ = [
    "BackgroundCommand",
    "BackgroundReport",
    "Environment",
    "EnvironmentClosedError",
    "EnvironmentConfig",
    "ProxyInject",
    "ProxyPolicy",
    "Tool",
    "ToolContext",
    "ToolFactory",
    "ToolResult",
    "ToolServices",
    "WorkspaceError",
]
