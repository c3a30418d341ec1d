"""The command supervisor: what keeps background work alive, bounded and killable.

This package owns the capped registries of command sessions (reference 4.1, cap 64) and
of subagent sessions (§4.2, cap 8); the capped unread buffers their output waits
in (§4.4); the child environment and shell of every command (§4.7, §4.9, §4.10); the
service-URL detection of long-running commands (§4.14); and process lifetime — a command
runs in its own process group and never outlives the Environment that started it.

The pure parts (``_buffer``, ``_registry``, ``_environ``, URL scanning in
``_service_url``, the report wording in ``_reports``) are sans-IO; ``_process`` starts
and ends process trees, ``_cgroup`` keeps an Environment's commands in a cgroup of their
own where the kernel allows it, and ``_commands`` is the Trio shell that ties them together;
``_subagents`` is the same shape for child sessions, which it reaches only through the
injected runner. Both supervisors post their completion reports to one
``ReportChannel`` that their owner (the Environment) makes and hands to each. This
facade serves the Environment, the command and subagent tools, and the stdio MCP
servers (``environment/mcp``, which spawn their own processes but end them the same
way); users reach it through ``Environment``.
"""

from __future__ import annotations

from ._cgroup import cgroup_base as cgroup_base
from ._commands import COMMAND_CAP as COMMAND_CAP
from ._commands import BackgroundCommand as BackgroundCommand
from ._commands import CommandSession as CommandSession
from ._commands import CommandSupervisor as CommandSupervisor
from ._commands import Exited as Exited
from ._commands import Running as Running
from ._commands import SpawnError as SpawnError
from ._commands import SupervisorClosedError as SupervisorClosedError
from ._commands import start_host_watchdog as start_host_watchdog
from ._environ import ProxyInject as ProxyInject
from ._environ import ProxyPolicy as ProxyPolicy
from ._environ import Shell as Shell
from ._environ import resolve_shell as resolve_shell
from ._login import LoginFiles as LoginFiles
from ._login import SharedLogin as SharedLogin
from ._process import ServerProcess as ServerProcess
from ._process import SpawnedProcess as SpawnedProcess
from ._process import end_process_tree as end_process_tree
from ._process import kill_marked as kill_marked
from ._process import spawn_piped as spawn_piped
from ._proctable import OWNER_VARIABLE as OWNER_VARIABLE
from ._reports import BackgroundReport as BackgroundReport
from ._reports import ExitStatus as ExitStatus
from ._reports import ReportChannel as ReportChannel
from ._reports import report_label as report_label
from ._subagents import DEFAULT_SPAWN_LIMIT as DEFAULT_SPAWN_LIMIT
from ._subagents import MESSAGE_BUFFER_CAP as MESSAGE_BUFFER_CAP
from ._subagents import SUBAGENT_CAP as SUBAGENT_CAP
from ._subagents import MessageTap as MessageTap
from ._subagents import RoundExit as RoundExit
from ._subagents import SubagentSession as SubagentSession
from ._subagents import SubagentStartError as SubagentStartError
from ._subagents import SubagentSupervisor as SubagentSupervisor
from ._subagents import SubagentSupervisorClosedError as SubagentSupervisorClosedError
from ._subagents import round_exit as round_exit
from ._watchdog import host_watchdog as host_watchdog

__all__ = [
    "COMMAND_CAP",
    "DEFAULT_SPAWN_LIMIT",
    "MESSAGE_BUFFER_CAP",
    "OWNER_VARIABLE",
    "SUBAGENT_CAP",
    "BackgroundCommand",
    "BackgroundReport",
    "CommandSession",
    "CommandSupervisor",
    "ExitStatus",
    "Exited",
    "LoginFiles",
    "MessageTap",
    "ProxyInject",
    "ProxyPolicy",
    "ReportChannel",
    "RoundExit",
    "Running",
    "ServerProcess",
    "SharedLogin",
    "Shell",
    "SpawnError",
    "SpawnedProcess",
    "SubagentSession",
    "SubagentStartError",
    "SubagentSupervisor",
    "SubagentSupervisorClosedError",
    "SupervisorClosedError",
    "cgroup_base",
    "end_process_tree",
    "host_watchdog",
    "kill_marked",
    "report_label",
    "resolve_shell",
    "round_exit",
    "spawn_piped",
    "start_host_watchdog",
]
