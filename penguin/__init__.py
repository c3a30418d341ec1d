"""penguin: a Trio-based core for LLM agent harnesses.

It runs an agent's tool calls under one execution contract, asks for approval of
every call and records everything in an append-only trace, following the
PenguinHarness protocol. The main entry points::

    import penguin
    from penguin import protocol as om

    # one tool call under the execution contract
    async with penguin.Environment.open(penguin.EnvironmentConfig(workspace_dir=".")) as env:
        out = await env.call_tool(om.tool_call("read_file", {"file_path": "README.md"}, "c1"))

    # a whole agent: model, approvals, tools, trace
    agent = penguin.Agent.open()
    async with agent.session(workspace_dir=".") as session:
        async with session.run([om.user_text("...")], approve=approve) as stream:
            async for message in stream: ...

Subpackages users import: ``penguin.protocol``, ``penguin.config``, ``penguin.llm``,
``penguin.approval``, ``penguin.trace``, ``penguin.engine`` and ``penguin.batch``.
Everything else is private and may move. ``import penguin`` itself is cheap: each of
these names loads its module the first time it is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from penguin._errors import PenguinError as PenguinError
from penguin._errors import SandboxUnavailableError as SandboxUnavailableError
from penguin._version import __version__ as __version__

if TYPE_CHECKING:
    # What type checkers and IDEs see; at run time the same names load on first use
    # (``__getattr__`` below), so ``import penguin`` and ``penguin --version`` stay cheap.
    from penguin import approval as approval
    from penguin import batch as batch
    from penguin import config as config
    from penguin import engine as engine
    from penguin import llm as llm
    from penguin import protocol as protocol
    from penguin import trace as trace
    from penguin.agent import Agent as Agent
    from penguin.agent import Session as Session
    from penguin.agent import SessionNotFoundError as SessionNotFoundError
    from penguin.config import ToolDefinitionConfig as ToolDefinitionConfig
    from penguin.environment import Environment as Environment
    from penguin.environment import EnvironmentClosedError as EnvironmentClosedError
    from penguin.environment import EnvironmentConfig as EnvironmentConfig
    from penguin.environment import Tool as Tool
    from penguin.environment import ToolContext as ToolContext
    from penguin.environment import ToolResult as ToolResult
    from penguin.environment import WorkspaceError as WorkspaceError
    from penguin.environment.sandbox import SandboxPolicy as SandboxPolicy
    from penguin.trace import SessionLockedError as SessionLockedError

__all__ = [
    "Agent",
    "Environment",
    "EnvironmentClosedError",
    "EnvironmentConfig",
    "PenguinError",
    "SandboxPolicy",
    "SandboxUnavailableError",
    "Session",
    "SessionLockedError",
    "SessionNotFoundError",
    "Tool",
    "ToolContext",
    "ToolDefinitionConfig",
    "ToolResult",
    "WorkspaceError",
    "__version__",
    "approval",
    "batch",
    "config",
    "engine",
    "llm",
    "protocol",
    "trace",
]

if not TYPE_CHECKING:
    from penguin import _lazy

    __getattr__, __dir__ = _lazy.lazy_attributes(
        __name__,
        {
            "Agent": ".agent",
            "Session": ".agent",
            "SessionNotFoundError": ".agent",
            "SessionLockedError": ".trace",
            "ToolDefinitionConfig": ".config",
            "Environment": ".environment",
            "EnvironmentClosedError": ".environment",
            "EnvironmentConfig": ".environment",
            "Tool": ".environment",
            "ToolContext": ".environment",
            "ToolResult": ".environment",
            "WorkspaceError": ".environment",
            "SandboxPolicy": ".environment.sandbox",
            "approval": ".approval",
            "batch": ".batch",
            "config": ".config",
            "engine": ".engine",
            "llm": ".llm",
            "protocol": ".protocol",
            "trace": ".trace",
        },
    )
