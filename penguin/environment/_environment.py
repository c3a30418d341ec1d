"""The Environment: the tool registry and the one execution contract every call obeys.

``Environment.open(config)`` is an async context manager that owns a nursery for the
Environment's background work; leaving the block ends all of it. Inside,
:meth:`Environment.execute_tool` runs one call and streams its messages:

    ``start`` → zero or more ``delta`` → ``stop`` → one complete ``tool_call_output``

plus, in between, any origin-tagged messages of nested sessions, unchanged. It never
raises into its caller for anything the tool or its arguments did: an unknown tool,
bad JSON, a tool that raised, timed out or was interrupted all end with the same
shape and a ``stop_reason``. Only the caller's own cancellation stops it without a
final message (a hard stop, not an interrupt).

One call is one task with two nested cancel scopes, outermost highest priority: the
user interrupt, then the deadline. After the tool returns, the scope that fired is
read once and the outcome is frozen (``_closeout.classify``) before any archive I/O,
so a late interrupt cannot change a finished call's result. A tool may stop the
deadline's clock while it waits for the Environment's own one-time set-up
(``ToolContext.untimed``: exec_command and the login environment).

MCP servers (``EnvironmentConfig.mcp_servers``) are one :class:`~.mcp.McpTools`: the
first ``list_tools()`` connects them all (the snapshot of their tools lasts the
Environment's life), their tools are listed after the builtins and looked up after
them, and their connections and stdio processes live in this nursery and end with it.

Background work lives in the Environment's nursery under two supervisors: command
sessions (``CommandSupervisor``) and subagent sessions (``SubagentSupervisor``, which
reaches child sessions only through the injected ``ToolServices.subagent_runner``).
The Environment makes both when it opens and hands them to the builtin tools'
factories (``tools._base.Supervisors``); the tools are kept in a
:class:`~._toolset.ToolRegistry`, builtins first, then the plain tools that join it.
Both supervisors report through one channel the Environment owns
(``supervisor.ReportChannel``, read as :attr:`Environment.background_reports`); leaving
the block closes it, then disposes the subagents, then the commands. When the toolset
has exec_command, the login environment is resolved from the moment the Environment
opens.

What this module does not do: decide the text of the final output (``_closeout``),
hold archived bytes (``_archive``), or know any tool's behaviour (``tools/``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Final, Self, final

import attrs
import trio

from penguin import protocol as om
from penguin._concurrency import (
    EnterFirst,
    collapse_single,
    error_text,
    require_trio,
)
from penguin._fdlimit import raise_open_file_limit
from penguin._log import warn
from penguin._mounts import run_file_work
from penguin._realpath import realpath
from penguin.config import (
    McpServerConfig,
    Permission,
    ToolDefinitionConfig,
    apply_call_description,
    default_tools,
)

from ._archive import ARCHIVE_DIR_NAME, save_capture
from ._closeout import CallOutput, Outcome, classify
from ._contract import Tool, ToolContext, ToolResult
from ._errors import EnvironmentClosedError, WorkspaceError
from ._services import ToolServices
from ._toolset import ToolRegistry
from .mcp import McpTools
from .sandbox import SandboxPolicy, close_sandbox, open_sandbox
from .supervisor import (
    DEFAULT_SPAWN_LIMIT,
    BackgroundCommand,
    BackgroundReport,
    CommandSupervisor,
    LoginFiles,
    ProxyPolicy,
    ReportChannel,
    SharedLogin,
    Shell,
    SubagentSupervisor,
    resolve_shell,
)
from .tools._base import Supervisors
from .tools.exec_command import ExecCommandTool

__all__ = ["Environment", "EnvironmentConfig", "parse_arguments"]

_STREAM_BUFFER: Final = 32
"""Messages a call may run ahead of its consumer; bounds memory, keeps handoffs cheap."""

Message = om.OmniMessage[om.Payload]
Sink = Callable[[Message], Awaitable[None]]
"""Where a call's messages go: the stream's channel, or call_tool's collector."""


def _to_path(value: str | os.PathLike[str]) -> Path:
    return Path(value)


def _to_optional_path(value: str | os.PathLike[str] | None) -> Path | None:
    return None if value is None else Path(value)


def _to_optional_tools(
    value: Iterable[ToolDefinitionConfig] | None,
) -> tuple[ToolDefinitionConfig, ...] | None:
    return None if value is None else tuple(value)


def _to_vault(value: Mapping[str, str]) -> Mapping[str, str]:
    return dict(value)


def _to_tools(value: Iterable[Tool]) -> tuple[Tool, ...]:
    return tuple(value)


def _to_servers(value: Iterable[McpServerConfig]) -> tuple[McpServerConfig, ...]:
    return tuple(value)


@final
@attrs.frozen(kw_only=True)
class EnvironmentConfig:
    """How to open an Environment.

    ``workspace_dir`` is where relative paths resolve and commands start.
    ``scratchpad_dir`` enables the truncated-output archive (files go to
    ``<scratchpad_dir>/truncated-tool-output/``). ``tools`` is the configured toolset:
    ``None`` means the default toolset, ``[]`` no builtin tools. ``vault`` holds
    variables for command subprocesses (they override the host's, never the
    hardened ones). ``proxy_policy`` is ``None`` (pass the host's proxy variables
    through), ``"strip"``, a :class:`~penguin.environment.ProxyInject`, or a
    callable returning one of those, re-read at every spawn. ``custom_tools`` join
    after the builtins. ``services`` hands the builtin tools what the layers above
    provide (``ToolServices(vision=..., images=...)``: describe_image's vision model,
    the image settings; ``subagent_runner``: how run_subagent opens child sessions).
    ``None`` is ``ToolServices()``. ``subagent_spawn_limit`` caps how many
    subagents this Environment's session may spawn in its lifetime (default 32, at
    least 1; ``subagents.maxSpawned`` in ``system_config.yaml``). ``mcp_servers`` are
    the MCP servers whose tools join the toolset (``AgentConfig.mcp_servers``); none
    connects before the first ``list_tools()``. ``sandbox`` is the policy the kernel
    enforces on every process a tool starts (``None``: none); opening raises
    :class:`~penguin.SandboxUnavailableError` when this machine cannot enforce it.
    ``shared_login`` is a :class:`~penguin.environment.SharedLogin` whose login
    environment the commands run in, shared with every Environment given the same
    object (re-resolved after a minute or when a start-up file changes); ``None``: this
    Environment resolves its own, once.
    """

    workspace_dir: Path = attrs.field(converter=_to_path)
    scratchpad_dir: Path | None = attrs.field(default=None, converter=_to_optional_path)
    tools: tuple[ToolDefinitionConfig, ...] | None = attrs.field(
        default=None, converter=_to_optional_tools
    )
    vault: Mapping[str, str] = attrs.field(factory=dict, converter=_to_vault)
    custom_tools: tuple[Tool, ...] = attrs.field(default=(), converter=_to_tools)
    proxy_policy: ProxyPolicy | Callable[[], ProxyPolicy] = None
    services: ToolServices | None = None
    subagent_spawn_limit: int = DEFAULT_SPAWN_LIMIT
    mcp_servers: tuple[McpServerConfig, ...] = attrs.field(default=(), converter=_to_servers)
    sandbox: SandboxPolicy | None = None
    """What every command and file tool may reach (spec/sandbox.md); ``None`` is off."""
    shared_login: SharedLogin | None = None


@final
@attrs.frozen
class _Looked:
    """What :meth:`Environment.open` found on the file system, in one worker thread."""

    workspace: Path  # resolved
    shell: Shell
    login_files: LoginFiles | None  # the shared login's start-up files, when it has one


def _look_around(workspace: Path, login: SharedLogin | None) -> _Looked:
    """The file-system checks of opening an Environment (blocking).

    A workspace, a ``PATH`` or a ``HOME`` on a network file system can hang a ``stat``;
    in a worker that holds up the Environment opening, not every session of the loop.
    On a machine with no such file system they are run on the loop's thread, where they
    cost a few system calls instead of a thread's round trip (``_mounts.run_file_work``).
    Raises :class:`WorkspaceError` when the workspace is not an existing directory, or
    cannot be looked at (no permission, a network file system's server that refuses).
    """
    try:
        if not workspace.is_dir():
            what = "does not exist" if not workspace.exists() else "is not a directory"
            raise WorkspaceError(f"workspace {str(workspace)!r} {what}", path=workspace)
    except OSError as exc:  # what is_dir does not answer False to
        why = exc.strerror or str(exc)
        raise WorkspaceError(
            f"workspace {str(workspace)!r} cannot be read: {why}", path=workspace
        ) from exc
    return _Looked(
        workspace=Path(realpath(os.fspath(workspace))),
        shell=resolve_shell(os.environ),
        login_files=None if login is None else login.startup_files(os.environ),
    )


def parse_arguments(name: str, raw: str) -> dict[str, Any] | str:
    """The call's arguments as a dict, or the model-facing failure text (reference 1.4).

    A parsed value that is not an object behaves as ``{}``.
    """
    if not raw.strip():
        return (
            f'Tool call "{name}" failed: the arguments field is empty. '
            "Re-issue the call with a complete JSON object."
        )
    try:
        value = _DECODER.decode(raw)
    except (ValueError, RecursionError) as exc:
        reason = exc if isinstance(exc, ValueError) else "nested too deeply"
        return (
            f'Tool call "{name}" failed: the arguments are not valid JSON ({reason}). '
            "Re-issue the call with one complete, valid JSON object."
        )
    return value if isinstance(value, dict) else {}


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not valid JSON")


_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)


@final
@attrs.define(eq=False)
class _Watch:
    scopes: set[trio.CancelScope]
    stop: trio.CancelScope


@final
class _InterruptWatcher:
    """Cancels the scopes of every call that shares an interrupt event, with one task.

    An engine passes the same event to every call of a run; one waiting task per
    event (instead of one per call) keeps a turn of eight calls cheap. A watch whose
    calls have all finished is kept, since the run's next call usually brings the same
    event: it ends when its event is set, when a call brings another event (so at most
    one idle watch is kept), or with the Environment.
    """

    def __init__(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        self._watches: dict[trio.Event, _Watch] = {}
        self._idle: trio.Event | None = None  # the event of the watch kept without calls

    def watch(self, event: trio.Event, scope: trio.CancelScope) -> Callable[[], None]:
        """Cancel ``scope`` when ``event`` is set; call the result once the call is over."""
        if event.is_set():
            scope.cancel()
            return lambda: None
        idle = self._idle
        if idle is not None and idle is not event:
            self._idle = None
            kept = self._watches.get(idle)
            if kept is not None and not kept.scopes:
                del self._watches[idle]
                kept.stop.cancel()
        watch = self._watches.get(event)
        if watch is None:
            watch = self._watches[event] = _Watch(set(), trio.CancelScope())
            self._nursery.start_soon(self._wait, event, watch)
        watch.scopes.add(scope)

        def done() -> None:
            watch.scopes.discard(scope)
            if not watch.scopes and self._watches.get(event) is watch:
                self._idle = event

        return done

    async def _wait(self, event: trio.Event, watch: _Watch) -> None:
        with watch.stop:
            await event.wait()
            for scope in watch.scopes:
                scope.cancel()
        if self._watches.get(event) is watch:
            del self._watches[event]
        if self._idle is event:
            self._idle = None


@final
class Environment:
    """Runs tool calls under one contract; open it with :meth:`open`."""

    def __init__(
        self,
        config: EnvironmentConfig,
        nursery: trio.Nursery,
        commands: CommandSupervisor,
        subagents: SubagentSupervisor,
        reports: ReportChannel,
        *,
        _private: object,
    ) -> None:
        if _private is not _OPEN_TOKEN:
            raise TypeError("use `async with Environment.open(config) as env`")
        self._config = config
        self._nursery = nursery
        self._commands = commands
        self._subagents = subagents
        self._reports = reports
        self._closed = False
        self._tools = ToolRegistry(
            default_tools() if config.tools is None else config.tools,
            config.services or ToolServices(),
            Supervisors(commands=commands, subagents=subagents),
        )
        self._tools.join(config.custom_tools)
        self._custom_names = frozenset(tool.name for tool in config.custom_tools)
        self._interrupts = _InterruptWatcher(nursery)
        self._mcp: McpTools | None = None
        if config.mcp_servers:
            self._mcp = McpTools(
                config.mcp_servers,
                nursery=nursery,
                workspace=config.workspace_dir,
                owner=commands.tag,
                reserved=frozenset(tool.name for tool in self._tools),
                sandbox=commands.sandbox,
            )
        self._archive_root = (
            None if config.scratchpad_dir is None else config.scratchpad_dir / ARCHIVE_DIR_NAME
        )

    @classmethod
    @asynccontextmanager
    async def open(cls, config: EnvironmentConfig) -> AsyncIterator[Self]:
        """Open an Environment for ``config``; leaving the block ends its background work.

        Raises :class:`WorkspaceError` when the workspace is not an existing directory,
        and ``TypeError`` for anything but an :class:`EnvironmentConfig`.
        """
        require_trio("Environment.open")
        if not isinstance(config, EnvironmentConfig):  # a path, most likely: say what to pass
            raise TypeError(
                "Environment.open() takes an EnvironmentConfig, such as"
                f" EnvironmentConfig(workspace_dir=...), not a {type(config).__name__}"
            )
        login = config.shared_login
        entries = default_tools() if config.tools is None else config.tools
        if login is None or not any(entry.name == "exec_command" for entry in entries):
            login = None  # nothing to look at for it: no shared login, or no command
        looked = await run_file_work(  # in a worker a cancel need not wait for a hung server
            lambda _check: _look_around(config.workspace_dir, login)
        )
        config = attrs.evolve(config, workspace_dir=looked.workspace)
        raise_open_file_limit()  # many sessions hold many pipes
        policy = config.proxy_policy
        reports = ReportChannel()
        tag = f"env-{secrets.token_hex(6)}"
        sandbox = await open_sandbox(
            config.sandbox, workspace=config.workspace_dir, scratchpad=config.scratchpad_dir
        )
        with collapse_single():
            async with close_sandbox(sandbox), trio.open_nursery() as nursery:
                commands = CommandSupervisor(
                    nursery,
                    tag=tag,
                    vault=config.vault,
                    proxy=policy if callable(policy) else lambda: policy,
                    shell=looked.shell,
                    reports=reports,
                    sandbox=sandbox,
                    shared_login=config.shared_login,
                    workspace=config.workspace_dir,
                )
                subagents = SubagentSupervisor(
                    nursery,
                    post_report=reports.post,
                    spawn_limit=config.subagent_spawn_limit,
                )
                env = cls(config, nursery, commands, subagents, reports, _private=_OPEN_TOKEN)
                if any(isinstance(tool, ExecCommandTool) for tool in env._tools):
                    # ready before the first command needs it
                    commands.start_login_probe(looked.login_files)
                try:
                    yield env
                finally:
                    env._closed = True
                    reports.close()  # none arrive after the Environment closed (1.13)
                    try:
                        await subagents.aclose()
                    finally:
                        try:
                            if env._mcp is not None:
                                await env._mcp.aclose()
                        finally:
                            await commands.aclose()
                            nursery.cancel_scope.cancel()

    # ------------------------------------------------------------------ inspection

    @property
    def config(self) -> EnvironmentConfig:
        """The configuration this Environment was opened with (workspace resolved)."""
        return self._config

    @property
    def workspace_dir(self) -> Path:
        """The absolute workspace directory."""
        return self._config.workspace_dir

    async def list_tools(self) -> list[om.ToolDefinition]:
        """Model-facing definitions, in configured order, of every executable tool.

        The builtins, then the MCP tools (the first call connects the servers, see
        :meth:`connect_mcp`), then the custom tools. Configured names without an
        implementation are skipped; ``call_description: false`` entries lose their
        ``description`` argument; permission, limits and forModel never appear.
        """
        await self.connect_mcp()
        listed = self._tools.definitions()
        mcp = [] if self._mcp is None else self._mcp.tools()
        return [
            *(d for d in listed if d.name not in self._custom_names),
            *(apply_call_description(tool.definition).to_definition() for tool in mcp),
            *(d for d in listed if d.name in self._custom_names),
        ]

    @property
    def mcp_servers(self) -> tuple[str, ...]:
        """The names of the configured MCP servers, in order (empty: no MCP)."""
        return () if self._mcp is None else self._mcp.server_names

    async def connect_mcp(self) -> tuple[om.McpServerConnectResult, ...]:
        """Connect every MCP server in parallel, once (spec/mcp.md M1.2-M1.3).

        Each server has its ``connectTimeoutMs`` for connect, handshake and
        discovery; one that fails is skipped with a line on stderr. Later calls
        return the first call's results without reconnecting. Cancelled midway, it
        leaves nothing connected and the next call starts afresh. Without MCP
        servers it returns ``()`` at once.
        """
        if self._mcp is None:
            await trio.lowlevel.checkpoint()
            return ()
        self._check_open()
        return await self._mcp.connect()

    # ------------------------------------------------------------------ background work

    @property
    def background_reports(self) -> trio.MemoryReceiveChannel[BackgroundReport]:
        """Completion reports of background commands and subagents (reference 3.13), in order.

        Reports wait here until read (a listener may attach late); none arrive after
        the Environment closed. ``report.text()`` is the harness message for the model.
        """
        return self._reports.receive

    def take_background_reports(self) -> list[BackgroundReport]:
        """Every report waiting right now, without blocking."""
        return self._reports.take()

    def list_background_commands(self) -> list[BackgroundCommand]:
        """Registered command sessions, in registration order, exited ones included."""
        return self._commands.list()

    async def kill_background_command(self, process_id: str) -> bool:
        """End one registered command (no report); ``False`` if the id is unknown."""
        return await self._commands.kill_by_id(process_id)

    async def probe_background_command_services(self) -> None:
        """Refresh the service URLs of running commands that printed none (4.14)."""
        await self._commands.probe_services()

    @property
    def subagent_messages(self) -> trio.MemoryReceiveChannel[om.OmniMessage[om.Payload]]:
        """The live tap of background subagents (reference 3.8.7): their messages, origin-tagged.

        A subagent launched with ``run_in_background`` has no tool call to stream
        through, so its messages come here as they happen, for the host to show. The
        channel holds at most 4096; when full the oldest are dropped, so a host that
        never reads costs nothing (each child's own trace keeps everything). These
        messages are never part of this session's trace.
        """
        return self._subagents.tap.receive

    def has_running_background_subagents(self) -> bool:
        """Whether a registered subagent is in the middle of a round (4.13)."""
        return self._subagents.has_running_background()

    def tool_permission(self, name: str) -> Permission | None:
        """The configured permission of ``name`` (``None`` for unknown or unset).

        For an MCP tool, its server entry's permission or the tool's ``readOnlyHint``
        (known once the servers are connected).
        """
        permission = self._tools.permission(name)
        if permission is None and self._mcp is not None:
            return self._mcp.permission(name)
        return permission

    @property
    def shell_name(self) -> str:
        """The shell exec_command runs commands with, as the system prompt names it.

        ``PENGUIN_SHELL`` when set (trimmed), else ``bash`` (reference 4.7).
        """
        return self._commands.shell.argv[0]

    # ------------------------------------------------------------------ execution

    def execute_tool(
        self,
        call: om.OmniMessage[om.ToolCallPayload],
        *,
        interrupt: trio.Event | None = None,
        approve: om.ApproveFn | None = None,
    ) -> AbstractAsyncContextManager[trio.MemoryReceiveChannel[Message]]:
        """Run one tool call (``async with env.execute_tool(call) as stream``).

        Iterate the stream for the call's messages. ``interrupt`` ends the call
        gracefully (``[interrupted: tool aborted by user]``, stop ``aborted``), even
        when already set: the tool then starts inside an already-cancelled scope.
        ``approve`` is passed to tools that run nested sessions. Leaving the block
        before the complete message is a hard stop: the tool is cancelled and nothing
        more is emitted.
        """
        return EnterFirst(
            self._execute_tool(call, interrupt=interrupt, approve=approve),
            "Environment.execute_tool(...)",
            "async with env.execute_tool(call) as stream: async for message in stream: ...",
        )

    @asynccontextmanager
    async def _execute_tool(
        self,
        call: om.OmniMessage[om.ToolCallPayload],
        *,
        interrupt: trio.Event | None,
        approve: om.ApproveFn | None,
    ) -> AsyncIterator[trio.MemoryReceiveChannel[Message]]:
        self._check_open()
        send, receive = trio.open_memory_channel[Message](_STREAM_BUFFER)

        async def sink(message: Message) -> None:
            try:
                send.send_nowait(message)
            except trio.WouldBlock:
                await send.send(message)

        async def drive() -> None:
            # The consumer may leave the block early: a hard stop, nothing more to say.
            with send, contextlib.suppress(trio.BrokenResourceError):
                await self._run_call(call, interrupt, approve, sink)

        with collapse_single():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(drive)
                with receive:
                    yield receive
                nursery.cancel_scope.cancel()

    async def call_tool(
        self,
        call: om.OmniMessage[om.ToolCallPayload],
        *,
        interrupt: trio.Event | None = None,
        approve: om.ApproveFn | None = None,
    ) -> om.OmniMessage[om.ToolCallOutputPayload]:
        """Run one call to the end and return its complete ``tool_call_output``.

        The same contract as :meth:`execute_tool`, without the stream: the call runs
        in the caller's task and only its final message is made (the same message as
        the stream's last; the partial ones are not built at all).
        """
        self._check_open()
        final: om.OmniMessage[om.ToolCallOutputPayload] | None = None

        async def keep_final(message: Message) -> None:
            nonlocal final
            if message.origin is None and om.is_tool_call_output(message):
                final = message

        await trio.lowlevel.checkpoint()
        # Only the final message is kept: the partial ones are never built.
        await self._run_call(call, interrupt, approve, keep_final, partials=False)
        assert final is not None, "every call ends with a complete tool_call_output"
        return final

    async def run_call(
        self,
        call: om.OmniMessage[om.ToolCallPayload],
        emit: Callable[[Message], Awaitable[None]],
        *,
        interrupt: trio.Event | None = None,
        approve: om.ApproveFn | None = None,
    ) -> None:
        """Run one call in the caller's task, handing each message to ``emit`` in order.

        The same contract and the same messages as :meth:`execute_tool`, without a
        channel and a task of its own: for an owner that already merges many streams
        (the agent loop runs a turn's calls this way). ``emit`` applies back-pressure
        by taking its time; if it raises, the call stops there (a hard stop).
        """
        self._check_open()
        await self._run_call(call, interrupt, approve, emit)

    def _check_open(self) -> None:
        if self._closed:
            raise EnvironmentClosedError("this Environment is closed; open a new one")

    async def _run_call(
        self,
        call: om.OmniMessage[om.ToolCallPayload],
        interrupt: trio.Event | None,
        approve: om.ApproveFn | None,
        sink: Sink,
        *,
        partials: bool = True,
    ) -> None:
        """Run ``call``, handing its messages to ``sink`` (without ``partials``: the final only)."""
        payload = call.payload
        call_id = payload.tool_call_id
        if partials:
            await sink(om.partial_tool_call_output("start", "", call_id))
        tool: Tool | None = self._tools.get(payload.name)
        if tool is None and self._mcp is not None:
            if self._mcp.results is None and payload.name.startswith("mcp__"):
                await self._mcp.connect()  # called before any list_tools(): connect now
            tool = self._mcp.get(payload.name)
        if tool is None:
            await _fail_fast(sink, call_id, f"Unknown tool: {payload.name}", partials)
            return
        args = parse_arguments(payload.name, payload.arguments)
        if isinstance(args, str):
            await _fail_fast(sink, call_id, args, partials)
            return
        run = _CallRun(
            tool,
            call_id,
            interrupt,
            approve,
            sink,
            workspace=self.workspace_dir,
            archive_root=self._archive_root,
            interrupts=self._interrupts,
            partials=partials,
        )
        await run.run(args)


async def _fail_fast(sink: Sink, call_id: str, text: str, partials: bool) -> None:
    """The four-message failure shape: start (already sent), delta, stop, complete."""
    if partials:
        await sink(om.partial_tool_call_output("delta", text, call_id))
        await sink(om.partial_tool_call_output("stop", "", call_id, "failed"))
    await sink(om.tool_call_output(text, call_id, "failed"))


@final
class _CallRun:
    """One call in flight: its output account, its context and its cancel scopes."""

    def __init__(
        self,
        tool: Tool,
        call_id: str,
        interrupt: trio.Event | None,
        approve: om.ApproveFn | None,
        sink: Sink,
        *,
        workspace: Path,
        archive_root: Path | None,
        interrupts: _InterruptWatcher,
        partials: bool = True,
    ) -> None:
        self.tool = tool
        self.partials = partials
        self.definition = tool.definition
        self.call_id = call_id
        self.interrupt = interrupt
        self.sink = sink
        self.output = CallOutput(
            self.definition.max_output_length, archive=archive_root is not None
        )
        self.archive_root = archive_root
        self.interrupts = interrupts
        self.lock = trio.StrictFIFOLock()
        self.compat_stop: om.StopReason | None = None
        self.timeout_scope: trio.CancelScope | None = None
        self.ctx = ToolContext(
            workspace_dir=workspace,
            tool_call_id=call_id,
            definition=self.definition,
            approve=approve,
            emit=self.emit,
            forward=self.forward,
            untimed=self.untimed,
        )

    @asynccontextmanager
    async def untimed(self) -> AsyncIterator[None]:
        """Stop this call's timeout clock for the block (``ToolContext.untimed``).

        The deadline moves out by the time the block took; the interrupt scope is not
        touched, so a user interrupt still ends the wait.
        """
        scope = self.timeout_scope
        if scope is None or scope.cancel_called or math.isinf(scope.deadline):
            yield
            return
        began = trio.current_time()
        deadline, scope.deadline = scope.deadline, math.inf
        try:
            yield
        finally:
            scope.deadline = deadline + (trio.current_time() - began)

    async def emit(self, text: str) -> None:
        async with self.lock:
            visible = self.output.accept(text)
            if visible:
                if self.partials:
                    await self.sink(om.partial_tool_call_output("delta", visible, self.call_id))
                self.output.sent(visible)

    async def forward(self, message: Message) -> None:
        if message.origin:
            async with self.lock:
                await self.sink(message)
            return
        payload = message.payload
        if isinstance(payload, om.PartialToolCallOutputPayload):
            if payload.event_type == "delta" and payload.output:
                await self.emit(payload.output)
            else:
                await trio.lowlevel.checkpoint()
            return
        if isinstance(payload, om.ToolCallOutputPayload):
            async with self.lock:
                if not self.output.replace(payload.output):
                    warn(
                        f'[penguin] tool "{self.tool.name}" sent a complete output that does '
                        "not extend the output it already streamed; ignored."
                    )
                if self.compat_stop is None:
                    self.compat_stop = payload.stop_reason
            return
        kind = getattr(payload, "type", message.type)
        warn(
            f'[penguin] tool "{self.tool.name}" yielded unexpected message type "{kind}"; ignored.'
        )
        await trio.lowlevel.checkpoint()

    async def run(self, args: dict[str, Any]) -> None:
        timeout_ms = self.definition.timeout_ms
        deadline = trio.current_time() + timeout_ms / 1000 if timeout_ms > 0 else math.inf
        timeout_scope = self.timeout_scope = trio.CancelScope(deadline=deadline)
        interrupt = self.interrupt
        if interrupt is None:  # nothing can interrupt it: one scope less to enter
            returned, error = await self._execute(args, None, timeout_scope)
        else:
            interrupt_scope = trio.CancelScope()
            done = self.interrupts.watch(interrupt, interrupt_scope)
            try:
                returned, error = await self._execute(args, interrupt_scope, timeout_scope)
            finally:
                done()
        result = returned if isinstance(returned, ToolResult) else None
        if returned is not None and result is None:
            error = TypeError(
                f"tool returned {type(returned).__name__}, expected a ToolResult or None"
            )
        outcome = Outcome(
            interrupted=self.interrupt is not None and self.interrupt.is_set(),
            timed_out=timeout_scope.cancel_called,
            error=None if error is None else error_text(error),
            self_report=(result.stop_reason if result else None) or self.compat_stop,
        )
        stop_reason, _ = classify(outcome, timeout_ms)  # frozen before any archive I/O
        archive_note = None
        capture = self.output.capture
        if capture is not None and self.archive_root is not None:
            saved = await save_capture(capture, self.archive_root, self.tool.name, self.call_id)
            archive_note = saved.note
        closing = self.output.close(
            outcome,
            timeout_ms=timeout_ms,
            archive_note=archive_note,
            note=result.note if result else None,
            images=result.images if result else (),
        )
        assert closing.stop_reason == stop_reason
        sink, call_id = self.sink, self.call_id
        if self.partials:
            for delta in closing.deltas:
                await sink(om.partial_tool_call_output("delta", delta, call_id))
            if closing.images:
                await sink(om.partial_tool_call_output("delta", "", call_id, images=closing.images))
            await sink(om.partial_tool_call_output("stop", "", call_id, closing.stop_reason))
        await sink(
            om.tool_call_output(closing.output, call_id, closing.stop_reason, closing.images)
        )

    async def _execute(
        self,
        args: dict[str, Any],
        interrupt_scope: trio.CancelScope | None,
        timeout_scope: trio.CancelScope,
    ) -> tuple[object, BaseException | None]:
        """Run the tool inside the scopes; return what it returned or raised."""
        try:
            with interrupt_scope or _NO_SCOPE, timeout_scope:
                return await self.tool.execute(args, self.ctx), None
        except Exception as exc:
            return None, exc
        return None, None  # a scope caught its own cancellation


_NO_SCOPE: Final = contextlib.nullcontext()
"""In place of an interrupt scope for a call that nothing can interrupt (reusable)."""

_OPEN_TOKEN: Final = object()
