"""The builtin tool registry: tool name -> factory.

A configured entry is executable only when its name is in :data:`BUILTIN_TOOLS`;
other names are skipped silently (reference 1.10). A factory receives the entry, the
:class:`~penguin.environment.ToolServices` the user supplied and the Environment's own
:class:`~._base.Supervisors`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from penguin.config import ToolDefinitionConfig

from .._contract import Tool
from .._services import ToolServices
from ._base import Supervisors
from .describe_image import DescribeImageTool
from .edit_file import EditFileTool
from .exec_command import ExecCommandTool
from .input_command import InputCommandTool
from .input_subagent import InputSubagentTool
from .kill_command import KillCommandTool
from .kill_subagent import KillSubagentTool
from .read_file import ReadFileTool
from .read_image import ReadImageTool
from .run_subagent import RunSubagentTool
from .write_file import WriteFileTool

__all__ = ["BUILTIN_TOOLS", "ToolFactory"]

ToolFactory = Callable[[ToolDefinitionConfig, ToolServices, Supervisors], Tool]
"""Builds a builtin tool from its configured entry, the user's services, the supervisors."""

BUILTIN_TOOLS: Final[dict[str, ToolFactory]] = {
    "read_file": ReadFileTool,
    "edit_file": EditFileTool,
    "write_file": WriteFileTool,
    "exec_command": ExecCommandTool,
    "input_command": InputCommandTool,
    "kill_command": KillCommandTool,
    "run_subagent": RunSubagentTool,
    "input_subagent": InputSubagentTool,
    "kill_subagent": KillSubagentTool,
    "read_image": ReadImageTool,
    "describe_image": DescribeImageTool,
}
