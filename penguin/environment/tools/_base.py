"""What every builtin tool shares: how it is built, and where its failed checks end.

A builtin is made by its factory (``registry.BUILTIN_TOOLS``) from three things: its
configured entry, the :class:`~penguin.environment.ToolServices` the user supplied, and
the Environment's own :class:`Supervisors` — which only the Environment has, so it makes
them when it opens and hands them over; nothing the user passes is ever replaced.

:meth:`BuiltinTool.execute` runs the tool's :meth:`~BuiltinTool.run` and is the one place
where a failed check (``_args.fail``) becomes the failure shape of reference 3.0.2, so a
tool reads as its checks in order, each a plain statement. :class:`FileTool` adds what
the three file tools share: their work runs in one go, on the loop's thread or in a
worker (``_mounts.run_file_work``), and its ``_files.FileReport`` is the call's one
delta. Everything else about a call — framing, limits, timeouts, the final message —
stays the Environment's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, final

import attrs

from penguin._mounts import FileCheck, run_file_work
from penguin.config import ToolDefinitionConfig

from .._contract import ToolContext, ToolResult
from .._services import ToolServices
from ..supervisor import CommandSupervisor, SubagentSupervisor
from ._args import CallFailed, fail
from ._files import FileReport

__all__ = ["NO_SUPERVISORS", "BuiltinTool", "FileTool", "Supervisors"]


@final
@attrs.frozen(kw_only=True)
class Supervisors:
    """The Environment's supervisors, as its builtin tools are given them.

    ``None`` where a tool is built without an Environment (a test, a tool used on its
    own): the command and subagent tools then answer that no session manager is
    configured.
    """

    commands: CommandSupervisor | None = None
    subagents: SubagentSupervisor | None = None


NO_SUPERVISORS: Final = Supervisors()


class BuiltinTool:
    """Base of the builtin tools: construction, and the one catch of a failed check."""

    def __init__(
        self,
        definition: ToolDefinitionConfig,
        services: ToolServices,
        supervisors: Supervisors = NO_SUPERVISORS,
    ) -> None:
        """Build the tool from its configured entry and what it may need to run."""
        self.definition = definition
        self.name = definition.name
        self.services = services
        self.supervisors = supervisors

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """Run one call (:meth:`run`); a failed check ends it as one delta, ``failed``."""
        try:
            return await self.run(args, ctx)
        except CallFailed as failed:
            await ctx.emit(failed.text)
            return ToolResult(stop_reason="failed", note=failed.note)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """The tool's own work; raise through ``_args.fail`` to end with a failure."""
        raise NotImplementedError


class FileTool(BuiltinTool):
    """Base of read_file, edit_file and write_file: one blocking part, one delta."""

    def write_check(self) -> Callable[[str, str], str | None] | None:
        """The sandbox's check of a write (spec/sandbox.md X2.2), ``None`` without one.

        Called with the path as the call gave it and the resolved path; returns the
        refusal text, or ``None`` when the write is allowed.
        """
        commands = self.supervisors.commands
        sandbox = None if commands is None else commands.sandbox
        return None if sandbox is None else sandbox.write_denial

    async def report(
        self, ctx: ToolContext, work: Callable[[FileCheck], FileReport]
    ) -> ToolResult | None:
        """Run ``work(check)``; its report is the call's one delta.

        On the loop's thread when no path of the machine can lead to another machine,
        otherwise in a worker thread (``_mounts.run_file_work``). ``work`` calls
        ``check(size, device)`` once it knows what it will read or write, before it
        does either: a large file, or one off a local disk, sends it to a worker. In a
        worker ``check()`` raises once the call is cancelled: ``work`` calls it between
        its steps (before it commits a write, per chunk of a scan). A cancel waits for
        ``work`` a second at most: on a file server that stopped answering, the call
        ends at its interrupt or time limit, and ``work`` stops at its next check.
        """
        report = await run_file_work(work)
        if report.failed:
            fail(report.text)
        await ctx.emit(report.text)
        return None
