"""The Environment: tool registry, the execution contract, the output archive.

Users import ``Environment``, ``EnvironmentConfig`` and the tool contract from
``penguin`` directly; this package is where they live.
"""

from __future__ import annotations

from ._contract import SubagentChild as SubagentChild
from ._contract import SubagentRequest as SubagentRequest
from ._contract import SubagentRound as SubagentRound
from ._contract import SubagentRoundResult as SubagentRoundResult
from ._contract import SubagentRunner as SubagentRunner
from ._contract import Tool as Tool
from ._contract import ToolContext as ToolContext
from ._contract import ToolResult as ToolResult
from ._contract import VisionOutcome as VisionOutcome
from ._contract import VisionResponse as VisionResponse
from ._contract import VisionService as VisionService
from ._environment import Environment as Environment
from ._environment import EnvironmentConfig as EnvironmentConfig
from ._errors import EnvironmentClosedError as EnvironmentClosedError
from ._errors import SubagentSpawnError as SubagentSpawnError
from ._errors import SubagentStartError as SubagentStartError
from ._errors import WorkspaceError as WorkspaceError
from ._services import ToolServices as ToolServices
from .supervisor import BackgroundCommand as BackgroundCommand
from .supervisor import BackgroundReport as BackgroundReport
from .supervisor import ProxyInject as ProxyInject
from .supervisor import ProxyPolicy as ProxyPolicy
from .supervisor import SharedLogin as SharedLogin
from .tools.registry import ToolFactory as ToolFactory

__all__ = [
    "BackgroundCommand",
    "BackgroundReport",
    "Environment",
    "EnvironmentClosedError",
    "EnvironmentConfig",
    "ProxyInject",
    "ProxyPolicy",
    "SharedLogin",
    "SubagentChild",
    "SubagentRequest",
    "SubagentRound",
    "SubagentRoundResult",
    "SubagentRunner",
    "SubagentSpawnError",
    "SubagentStartError",
    "Tool",
    "ToolContext",
    "ToolFactory",
    "ToolResult",
    "ToolServices",
    "VisionOutcome",
    "VisionResponse",
    "VisionService",
    "WorkspaceError",
]
