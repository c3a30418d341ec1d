"""Composition: an :class:`Agent` (its state on disk) and a :class:`Session` (one conversation).

This is where the layers meet and nothing else happens: the agent's files (reference
D4) are read — ``system_config.yaml`` (written with defaults on first use), the
project's ``.project_config.toml`` (models, command policy) and the vault — and a
session is assembled from them: a model client, an Environment in the workspace,
a trace writer with its recorder, the system prompt, and the engine that runs
Tasks. Every piece is owned by the session's ``async with`` block; leaving it ends
the Environment (no process survives) and flushes the trace.

::

    agent = penguin.Agent.open()                      # ~/.penguin/data/default_project/...
    async with agent.session(workspace_dir=".") as session:
        async with session.run([om.user_text("Fix the failing test")], approve=ask) as stream:
            async for message in stream:
                ...
        stream.result.status                           # "completed", "aborted", "auth"...

A session can be resumed from its trace (:meth:`Agent.resume_session`): the latest
trace file is replayed into the engine's ledger, so the model sees exactly the
context (and carry-over) it had, and new records continue in the same file.

Subagents: every session's Environment gets a :class:`ChildSessionRunner`, through
which run_subagent opens child sessions — real Sessions of this agent (or of the
agent the model names), in the parent's workspace, with the parent's model and
thinking level unless told otherwise, each with its own trace (``source:
"subagent"``). A child is a depth-1 session: it has no subagent tools, and its own
runner refuses to spawn. Its tool calls are approved by the parent's approver.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, Final, Self, TypeAlias, TypeVar, final

import attrs
import trio

from penguin import _log
from penguin import config as cfg
from penguin import protocol as om
from penguin._concurrency import (
    EnterFirst,
    collapse_single,
    require_trio,
    run_in_worker,
    run_leavable_in_worker,
)
from penguin._errors import SessionNotFoundError
from penguin._mounts import run_on_disk, stays_local
from penguin.approval import CommandPolicy
from penguin.engine import (
    CompactionSettings,
    Engine,
    EngineBusyError,
    Ledger,
    ReconnectPolicy,
    RunStream,
    TraceRecorder,
)
from penguin.environment import (
    Environment,
    EnvironmentConfig,
    SharedLogin,
    SubagentRequest,
    SubagentSpawnError,
    ToolServices,
)
from penguin.environment.sandbox import SandboxPolicy, policy_from_mapping, recorded_policy
from penguin.llm import LLM, LLMRequest, LLMResponse, OpenAIChatLLM
from penguin.trace import (
    SessionLock,
    TraceLocation,
    TraceWriter,
    find_session,
    lock_path,
    read_trace,
)

__all__ = [
    "FROM_PROJECT",
    "FROM_TRACE",
    "MAX_SUBAGENT_DEPTH",
    "Agent",
    "ChildSessionRunner",
    "Session",
    "SessionHolder",
    "SessionNotFoundError",
    "SessionUsage",
    "WorkspaceMaker",
]

_T = TypeVar("_T")
_U = TypeVar("_U")

WorkspaceMaker: TypeAlias = Callable[[], "str | os.PathLike[str]"]
"""A function that makes a new session's workspace and returns its path (blocking).

:meth:`Agent.session` calls it in the worker thread that opens the session.
"""

_logger: Final = _log.logger

_COMPACTION_SHARE: Final = 0.8
"""Compact when a request used this share of the model's context window."""
_RELEASE_BOUND: Final = 10.0
"""Seconds a closing session waits for its lock's release (a hung file system)."""
MAX_SUBAGENT_DEPTH: Final = 1
"""Sessions below a top-level one: a child (depth 1) spawns no subagent of its own."""
FROM_PROJECT: Final = object()
"""``Agent.session(sandbox=...)``'s default: the project file's ``[sandbox]``, else none."""
FROM_TRACE: Final = object()
"""``Agent.resume_session(sandbox=...)``'s default: the policy the trace records."""


@final
@attrs.define(eq=False)
class Agent:
    """One agent of one project: its configuration and state on disk.

    Open it with :meth:`open`; nothing runs until :meth:`session`.
    """

    paths: cfg.AgentPaths
    config: cfg.AgentConfig
    _files: _FileCache = attrs.field(init=False, factory=lambda: _FileCache(), repr=False)
    _login: SharedLogin = attrs.field(init=False, factory=lambda: SharedLogin(), repr=False)
    """The login environment its sessions' commands share (one login shell a minute)."""

    @classmethod
    def open(
        cls,
        root: str | os.PathLike[str] | None = None,
        project_id: str = cfg.DEFAULT_PROJECT_ID,
        agent_id: str = cfg.DEFAULT_AGENT_ID,
    ) -> Self:
        """Open (creating on first use) the agent ``agent_id`` of ``project_id``.

        ``root`` defaults to ``$PENGUIN_HOME`` or ``~/.penguin/data``. The agent's
        ``system_config.yaml`` is written with the defaults when it does not exist
        yet; a broken one raises :class:`penguin.config.ConfigError`.
        """
        paths = cfg.AgentPaths(root, project_id, agent_id)
        if not paths.system_config.exists():
            cfg.dump_default_system_config(paths.system_config)
        return cls(paths=paths, config=cfg.load_system_config(paths.system_config))

    def project_config(self) -> cfg.ProjectConfig:
        """The project's ``.project_config.toml`` (models, command policy), as it is now.

        Parsed again only when the file changed (its modification time, size or inode):
        every session of the agent reuses one parse.
        """
        return self._files.get(self.paths.project_config, cfg.load_project_config)

    def _vault(self) -> dict[str, str]:
        """The vault as it is now (parsed again only when the file changed)."""
        return dict(self._files.get(self.paths.vault, cfg.load_vault))

    def _tools(self, *, vision: bool, depth: int) -> list[cfg.ToolDefinitionConfig]:
        """The tool entries a session offers (the system config is read once, at open)."""
        key = (vision, depth)
        tools = self._files.tools.get(key)
        if tools is None:
            builtin = self.config.effective_builtin_tools()
            tools = self._files.tools[key] = cfg.select_tools(builtin, vision=vision, depth=depth)
        return list(tools)

    def sandbox_policy(
        self, chosen: SandboxPolicy | object | None = FROM_PROJECT
    ) -> SandboxPolicy | None:
        """The sandbox a session of this agent runs under (spec/sandbox.md X1.3).

        ``chosen`` wins; :data:`FROM_PROJECT` reads the project file's ``[sandbox]``
        (none when absent; a broken one raises :class:`penguin.config.ConfigError`).
        The policy keeps this agent's data root read-only.
        """
        return self._policy(chosen, self.project_config() if chosen is FROM_PROJECT else None)

    def _policy(
        self, chosen: SandboxPolicy | object | None, project: cfg.ProjectConfig | None
    ) -> SandboxPolicy | None:
        """:meth:`sandbox_policy` with the project file as read (used for FROM_PROJECT)."""
        if chosen is FROM_PROJECT:
            assert project is not None
            if project.sandbox is None:
                return None
            try:
                chosen = policy_from_mapping(project.sandbox, where="sandbox")
            except ValueError as exc:
                raise cfg.ConfigError(str(exc), project.path, field="sandbox") from exc
        if chosen is None:
            return None
        if not isinstance(chosen, SandboxPolicy):
            raise TypeError(f"sandbox must be a penguin.SandboxPolicy or None, got {chosen!r}")
        if chosen.data_root is None:
            chosen = attrs.evolve(chosen, data_root=str(self.paths.root))
        return chosen

    def model_client(
        self, *, provider: str | None = None, model_id: str | None = None
    ) -> OpenAIChatLLM:
        """A client for the given model, or the project's default one.

        Raises :class:`penguin.config.ConfigError` naming the command that
        configures a model when none is.
        """
        return self._client_for(self.project_config(), provider=provider, model_id=model_id)

    def _files_now(self) -> _AgentFiles:
        """The project file and the vault as they are now (blocking: for a worker thread)."""
        return _AgentFiles(project=self.project_config(), vault=self._vault())

    @staticmethod
    def _client_for(
        project: cfg.ProjectConfig, *, provider: str | None, model_id: str | None
    ) -> OpenAIChatLLM:
        """:meth:`model_client` from the project file as read."""
        return Agent._client_from(cfg.resolve_model(project, provider=provider, model_id=model_id))

    @staticmethod
    def _client_from(entry: cfg.ModelEntry) -> OpenAIChatLLM:
        """A client for the project's model ``entry``."""
        return OpenAIChatLLM(
            base_url=entry.base_url,
            model_id=entry.model_id,
            api_key=entry.resolved_api_key() or "",
            provider=entry.provider,
            context_window=entry.context_window,
        )

    @asynccontextmanager
    async def session(
        self,
        workspace_dir: str | os.PathLike[str] | WorkspaceMaker | None = None,
        llm: LLM | None = None,
        *,
        provider: str | None = None,
        model_id: str | None = None,
        vision: bool | None = None,
        sandbox: SandboxPolicy | object | None = FROM_PROJECT,
        surface: str | None = None,
        approval_mode: str | None = None,
    ) -> AsyncIterator[Session]:
        """Start a new session; leaving the block ends it (and everything it started).

        ``workspace_dir`` defaults to a new temporary workspace under the agent. It may
        also be a function that makes the workspace and returns its path (a fresh copy
        of a repository, say): it is called in the worker thread that opens the session,
        once the model and the project file are known to be good, so a session that
        cannot start leaves nothing behind and making it never blocks the event loop.
        ``llm`` defaults to the project's default model (or ``provider`` +
        ``model_id``). ``vision`` says whether the model takes images (default: what
        the project's catalog says, else true); it picks read_image or
        describe_image. ``sandbox`` is the session's policy (spec/sandbox.md): by
        default the project file's ``[sandbox]``, else none; ``None`` is none. While
        the block runs this process holds the session's lock (chat.md C5.6),
        ``surface`` naming it to anyone refused (``"penguin chat"``). ``approval_mode``
        is recorded in the ``session_meta`` (C5.5), for a resume to keep.
        """
        require_trio("Agent.session")
        session_id = cfg.new_session_id()
        writer = TraceWriter(self.paths.traces_dir, session_id)
        make = _workspace_maker(workspace_dir, self.paths)
        chosen_llm = llm

        def read_files() -> tuple[_AgentFiles, SandboxPolicy | None, cfg.ModelEntry | None]:
            files = self._files_now()
            policy = self._policy(sandbox, files.project)
            # The model first: a missing one must not leave a new workspace behind.
            entry = None
            if chosen_llm is None:
                entry = cfg.resolve_model(files.project, provider=provider, model_id=model_id)
            return files, policy, entry

        def locked_then(
            read: tuple[_AgentFiles, SandboxPolicy | None, cfg.ModelEntry | None],
        ) -> _Opened:
            files, policy, entry = read
            workspace = Path(make())
            model = chosen_llm.model.model_id if chosen_llm is not None else _entry_id(entry)
            values = _prompt_values(self, workspace, model, session_id)
            return _Opened(files, policy, entry, workspace, values)

        async with _locked(writer.path, session_id, surface, read_files, locked_then) as opened:
            owned_llm: OpenAIChatLLM | None = None
            if llm is None:
                assert opened.entry is not None
                owned_llm = self._client_from(opened.entry)
                llm = owned_llm
            if vision is None:
                vision = _has_vision(opened.files.project, llm)
            async with (
                _closed_after(owned_llm),
                _assemble(
                    self,
                    session_id,
                    opened.workspace,
                    llm,
                    writer,
                    opened.files,
                    vision=vision,
                    ledger=None,
                    values=opened.values,
                    sandbox=opened.policy,
                    approval_mode=approval_mode,
                    surface=surface,
                ) as session,
            ):
                yield session

    @asynccontextmanager
    async def resume_session(
        self,
        session_id: str,
        llm: LLM | None = None,
        *,
        vision: bool | None = None,
        sandbox: SandboxPolicy | object | None = FROM_TRACE,
        surface: str | None = None,
    ) -> AsyncIterator[Session]:
        """Reopen a session from its trace, continuing in the same file.

        The workspace and the model come from the trace's ``session_meta`` (pass
        ``llm`` to override the client). The replayed context, carry-over and
        counters are exactly what the session had when it stopped. ``sandbox``
        defaults to the policy the trace records (its mode and network, with the
        project file's roots and protected paths; none when it records none).
        Another process holding the session open raises
        :class:`~penguin.SessionLockedError` naming it, before anything is read;
        ``surface`` names this one while it holds the lock.
        """
        require_trio("Agent.resume_session")
        location = await run_in_worker(find_session, self.paths.traces_dir, session_id)
        if location is None:
            raise SessionNotFoundError(
                f"no trace of session {session_id!r} under {self.paths.traces_dir}"
            )

        def read(_: None) -> tuple[list[om.OmniMessage[om.Payload]], _AgentFiles]:
            return read_trace(location.path), self._files_now()

        # The lock first (same trip): a locked session says so before anything is read.
        async with (
            _locked(location.path, session_id, surface, _nothing, read) as (records, files),
            self._resumed(location, records, files, llm, vision, sandbox, surface) as session,
        ):
            yield session

    @asynccontextmanager
    async def _resumed(
        self,
        location: TraceLocation,
        records: Sequence[om.OmniMessage[om.Payload]],
        files: _AgentFiles,
        llm: LLM | None,
        vision: bool | None,
        sandbox: SandboxPolicy | object | None,
        surface: str | None,
    ) -> AsyncIterator[Session]:
        session_id = location.session_id
        meta = next((m for m in records if om.is_session_meta(m)), None)
        if meta is None:
            raise SessionNotFoundError(f"{location.path} has no session_meta record")
        ledger = Ledger()
        for record in records:
            ledger.observe(record)
        owned_llm: OpenAIChatLLM | None = None
        if llm is None:
            owned_llm = self._client_for(
                files.project, provider=meta.payload.provider, model_id=meta.payload.model_id
            )
            llm = owned_llm
        if vision is None:
            vision = _has_vision(files.project, llm)
        if sandbox is FROM_TRACE:
            from_project = self._policy(FROM_PROJECT, files.project)
            sandbox = recorded_policy(meta.payload.sandbox, from_project)
        policy = self._policy(sandbox, files.project)
        writer = TraceWriter(
            self.paths.traces_dir,
            session_id,
            start_index=location.index,
            date_dir=location.date_dir,
        )
        async with (
            _closed_after(owned_llm),
            _assemble(
                self,
                session_id,
                Path(meta.payload.workspace),
                llm,
                writer,
                files,
                vision=vision,
                ledger=ledger,
                meta=meta,
                depth=1 if meta.payload.source == "subagent" else 0,
                sandbox=policy,
                surface=surface,
            ) as session,
        ):
            yield session


@asynccontextmanager
async def _locked(
    trace_path: Path,
    session_id: str,
    surface: str | None,
    before: Callable[[], _T],
    after: Callable[[_T], _U],
) -> AsyncIterator[_U]:
    """Hold the session's writer lock, beside its trace; SessionLockedError when it is held.

    One worker thread runs ``before()``, takes the lock, and runs ``after`` on what
    ``before`` returned; what ``after`` returns is yielded. One trip for all three: a
    session's opening work is file-system work, and each trip to a worker costs far
    more than its few system calls on a busy loop. When ``before`` raises no lock is
    taken; when ``after`` raises the lock is let go, in the same thread. A cancel
    leaves a trip that waits on a file server that stopped answering (the workspace's
    ``AGENTS.md``, say): the thread goes on, and lets go of the lock once it is done.
    Releasing is file-system work in the traces' folder too: on a local disk it is
    done on the loop's thread (``penguin._mounts``), elsewhere in a worker.
    The release is shielded (a cancelled session still lets go of its lock) and bounded
    by :data:`_RELEASE_BOUND`; a release still stuck then (a hung file system) is left to
    its thread, which ends it when the file system answers: the lock is held until then,
    never half-released.
    """
    path = lock_path(trace_path, session_id)

    def open_locked(check: Callable[[], None]) -> tuple[_U, SessionLock]:
        value = before()
        check()  # a cancelled opening takes no lock
        lock = SessionLock.acquire(path, session_id, surface)
        try:
            check()
            return after(value), lock
        except BaseException:
            lock.release()
            raise

    value, lock = await run_leavable_in_worker(open_locked, left=_release_left)
    try:
        yield value
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(_RELEASE_BOUND):
            if await stays_local(path.parent.parent):  # an unlink and a close: no hop
                await run_on_disk(path.parent.parent, lock.release)
            else:
                await trio.to_thread.run_sync(lock.release, abandon_on_cancel=True)


def _nothing() -> None:
    """Nothing to do before taking a lock."""


def _same(value: _T) -> _T:
    """Nothing to do after taking a lock: what was read before it."""
    return value


def _release_left(opened: tuple[object, SessionLock]) -> None:
    """Let go of the lock an opening trip took after its caller left (in its thread)."""
    opened[1].release()


def _workspace_maker(
    workspace_dir: str | os.PathLike[str] | WorkspaceMaker | None, paths: cfg.AgentPaths
) -> WorkspaceMaker:
    """What makes a new session's workspace (blocking: called in a worker thread)."""
    if workspace_dir is None:
        return lambda: cfg.new_temp_workspace(paths)
    if callable(workspace_dir):
        return workspace_dir
    given = workspace_dir
    return lambda: given  # the Environment checks it is a directory


def _entry_id(entry: cfg.ModelEntry | None) -> str:
    assert entry is not None  # resolved when no model object was given
    return entry.model_id


def _prompt_values(agent: Agent, workspace: Path, model_id: str, session_id: str) -> dict[str, str]:
    """The system prompt's values, read in the session's opening trip (blocking).

    ``CWD`` and ``SHELL`` are the Environment's to settle (it resolves the workspace
    and the shell): :func:`_assemble` sets them once it is open.
    """
    return cfg.system_prompt_values(
        workspace_dir=workspace,
        model_id=model_id,
        session_id=session_id,
        agent_id=agent.paths.agent_id,
    )


@final
@attrs.frozen
class _Opened:
    """What a new session's opening trip to a worker read and made, under its lock."""

    files: _AgentFiles
    policy: SandboxPolicy | None
    entry: cfg.ModelEntry | None  # the model to open a client for (no model object given)
    workspace: Path
    values: dict[str, str]  # the system prompt's (see _prompt_values)


def _has_vision(project: cfg.ProjectConfig, llm: LLM) -> bool:
    """What the project's catalog says of ``llm`` taking images (default: it does)."""
    for entry in project.models:
        if (entry.provider, entry.model_id) == (llm.model.provider, llm.model.model_id):
            return entry.vision
    return True


@final
@attrs.frozen
class _AgentFiles:
    """The agent's files a session opens with, read together in one worker thread."""

    project: cfg.ProjectConfig
    vault: dict[str, str]


@asynccontextmanager
async def _vision_model(
    agent: Agent, project: cfg.ProjectConfig, tools: Sequence[cfg.ToolDefinitionConfig]
) -> AsyncIterator[_VisionModel | None]:
    """describe_image's vision model (reference 6.4), for as long as the session lasts.

    ``None`` when describe_image is not offered; a model with ``model_id`` None
    when the project's ``vision_model`` is unset, names no entry, or names one
    configured with ``vision = false``.
    """
    if not any(entry.name == "describe_image" for entry in tools):
        yield None
        return
    entry = project.vision_entry()
    if entry is None or not entry.vision:
        yield _VisionModel(None)
        return
    client = agent.model_client(provider=entry.provider, model_id=entry.model_id)
    async with _closed_after(client):
        yield _VisionModel(client)


@asynccontextmanager
async def _assemble(
    agent: Agent,
    session_id: str,
    workspace: Path,
    llm: LLM,
    writer: TraceWriter,
    files: _AgentFiles,
    *,
    vision: bool,
    ledger: Ledger | None,
    values: Mapping[str, str] | None = None,
    meta: om.OmniMessage[om.SessionMetaPayload] | None = None,
    depth: int = 0,
    sandbox: SandboxPolicy | None = None,
    approval_mode: str | None = None,
    surface: str | None = None,
) -> AsyncIterator[Session]:
    paths = agent.paths
    tools = agent._tools(vision=vision, depth=depth)
    subagents = ChildSessionRunner(agent, workspace=workspace, llm=llm, vision=vision, depth=depth)
    subagents.sandbox = sandbox  # children run under exactly this policy (X2.3)
    subagents.surface = surface
    environment_config = EnvironmentConfig(
        workspace_dir=workspace,
        scratchpad_dir=paths.scratchpad(session_id),
        tools=tools,
        vault=files.vault,
        subagent_spawn_limit=agent.config.subagents.max_spawned,
        mcp_servers=agent.config.mcp_servers,
        sandbox=sandbox,
        shared_login=agent._login,
    )
    project = files.project
    with collapse_single():
        async with (
            _vision_model(agent, project, tools) as vision_model,
            Environment.open(
                attrs.evolve(
                    environment_config,
                    services=ToolServices(
                        vision=vision_model,
                        images=agent.config.images,
                        subagent_runner=subagents,
                    ),
                )
            ) as environment,
            TraceRecorder.open(writer) as recorder,
        ):
            if meta is None:  # a new session: its prompt's values were read on its way in
                assert values is not None
                settled = {  # the workspace resolved and the shell, as the Environment has them
                    **values,
                    "CWD": os.fspath(environment.workspace_dir.absolute()),
                    "SHELL": environment.shell_name,
                }
                system_prompt = cfg.render_system_prompt(agent.config.system_prompt, settled)
                window = llm.context_window
                meta = om.session_meta(
                    session_id=session_id,
                    provider=llm.model.provider,
                    model_id=llm.model.model_id,
                    model_context_window=window if window is not None else "unknown",
                    system_prompt=system_prompt,
                    agent_state=str(paths.agent_state),
                    workspace=str(environment.workspace_dir),
                    source="subagent" if depth > 0 else None,
                    sandbox=None if sandbox is None else sandbox.summary(),
                    approval_mode=approval_mode,
                )
                recorder.record(meta)
            else:
                system_prompt = meta.payload.system_prompt
            # With MCP servers the tool list waits for the first run, which connects
            # them (spec/mcp.md M1.2): opening a session never waits for a server.
            has_mcp = bool(environment.mcp_servers)
            engine = Engine(
                llm=llm,
                environment=environment,
                system_prompt=system_prompt,
                tools=() if has_mcp else await environment.list_tools(),
                mcp=environment if has_mcp else None,
                recorder=recorder,
                ledger=ledger,
                session_meta=meta,
                compaction=_compaction_for(llm),
                command_policy=CommandPolicy.from_config(project.command_policy),
            )
            yield Session(
                session_id=session_id,
                agent=agent,
                environment=environment,
                engine=engine,
                recorder=recorder,
                session_meta=meta,
                subagent_runner=subagents,
            )


@final
@attrs.frozen
class _VisionModel:
    """A model as describe_image's :class:`~penguin.environment.VisionService`.

    Each request is the tool's messages alone: no system prompt, no tools, no
    thinking level. ``llm`` None stands for "no vision model" (``model_id`` None).
    """

    llm: LLM | None

    @property
    def model_id(self) -> str | None:
        """The model's id, or None when there is no vision model."""
        return None if self.llm is None else self.llm.model.model_id

    def stream(
        self, messages: Sequence[om.OmniMessage[om.CompleteModelPayload]]
    ) -> AbstractAsyncContextManager[LLMResponse]:
        """One one-off request of ``messages``."""
        if self.llm is None:
            raise RuntimeError("the project has no vision model to ask")
        return self.llm.stream(LLMRequest(system_prompt="", messages=tuple(messages)))


@final
class _FileCache:
    """Parsed files of an :class:`Agent`, each kept until the file on disk changes.

    The key of a parse is the file's ``(st_mtime_ns, st_size, st_ino)`` (None when
    it is missing); one ``stat`` per use tells whether it still holds. A parse that
    raised is not kept: the next use reads the file again and raises again.
    """

    def __init__(self) -> None:
        self._parsed: dict[Path, tuple[tuple[int, int, int] | None, Any]] = {}
        self.tools: dict[tuple[bool, int], list[cfg.ToolDefinitionConfig]] = {}

    def get(self, path: Path, parse: Callable[[Path], _T]) -> _T:
        try:
            info = os.stat(path)
        except FileNotFoundError:
            stamp = None
        else:
            stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
        kept = self._parsed.get(path)
        if kept is not None and kept[0] == stamp and stamp is not None:
            value: _T = kept[1]
            return value
        value = parse(path)
        self._parsed[path] = (stamp, value)
        return value


@final
class ChildSessionRunner:
    """Opens child Sessions for run_subagent (a :class:`~penguin.environment.SubagentRunner`).

    Every session gets one (built by ``_assemble``). A child is a real
    Session: of the agent ``request.agent_id`` names (default: this runner's agent;
    another agent must already exist in the same project), in the parent's
    workspace, with the parent's model object unless ``model_id`` + ``provider`` name
    one of the project's models (then a client of its own, closed with the child),
    at the parent's effective thinking level unless one is given, with its own
    trace whose ``session_meta`` says ``source: "subagent"``. The child has no
    subagent tools and its own runner refuses to spawn (depth cap 1).

    :attr:`thinking_level` is the parent's effective level: ``Session.run`` keeps it
    current. Failures raise :class:`~penguin.environment.SubagentSpawnError` with the
    text run_subagent shows the model.
    """

    def __init__(
        self, agent: Agent, *, workspace: Path, llm: LLM, vision: bool, depth: int
    ) -> None:
        """A runner for the sessions of ``agent`` at ``depth`` (0 = a top-level session)."""
        self._agent = agent
        self._workspace = workspace
        self._llm = llm
        self._vision = vision
        self.depth = depth
        """How deep the session owning this runner is; children are one deeper."""
        self.thinking_level: str | None = None
        """The owning session's effective thinking level (that of its current run)."""
        self.sandbox: SandboxPolicy | None = None
        """The owning session's sandbox: every child runs under exactly it (X2.3)."""
        self.surface: str | None = None
        """Who holds the owning session (``"penguin chat"``): its children's locks say so."""

    @asynccontextmanager
    async def open_child(self, request: SubagentRequest) -> AsyncIterator[_SubagentChild]:
        """Open a child session for ``request``; it is closed when the block ends."""
        if self.depth >= MAX_SUBAGENT_DEPTH:
            raise SubagentSpawnError(
                f"subagent depth limit {MAX_SUBAGENT_DEPTH} reached; not spawning another subagent"
            )
        agent = await self._agent_for(request.agent_id)
        chosen = request.model_id is not None and request.provider is not None
        session_id = cfg.new_session_id()
        model = self._llm.model.model_id
        if chosen and request.model_id is not None:
            model = request.model_id  # what the client made below is of
        workspace = self._workspace

        def read() -> tuple[_AgentFiles, dict[str, str]]:
            return agent._files_now(), _prompt_values(agent, workspace, model, session_id)

        writer = TraceWriter(agent.paths.traces_dir, session_id)
        async with AsyncExitStack() as stack:
            try:  # one writer (C5.6): the child's lock, held by this process as the parent's
                files, values = await stack.enter_async_context(
                    _locked(writer.path, session_id, self.surface, read, _same)
                )
            except cfg.ConfigError as exc:
                # A project file that cannot be read while the caller chose a model reads
                # as that choice failing (the words run_subagent shows); else it raises.
                if chosen and exc.path == os.fspath(agent.paths.project_config):
                    raise SubagentSpawnError(f"subagent error: {exc.reason}") from exc
                raise
            async with self._assembled(
                agent, request, chosen, session_id, writer, files, values
            ) as child:
                yield child

    @asynccontextmanager
    async def _assembled(
        self,
        agent: Agent,
        request: SubagentRequest,
        chosen: bool,
        session_id: str,
        writer: TraceWriter,
        files: _AgentFiles,
        values: dict[str, str],
    ) -> AsyncIterator[_SubagentChild]:
        """The child's Session, once :meth:`open_child` holds its lock and read its files."""
        llm, vision, owned = self._llm, self._vision, None
        if chosen:
            try:
                owned = agent._client_for(
                    files.project, provider=request.provider, model_id=request.model_id
                )
            except cfg.ConfigError as exc:  # the model, not the file, is what the caller chose
                raise SubagentSpawnError(f"subagent error: {exc.reason}") from exc
            llm, vision = owned, _has_vision(files.project, owned)
        level = (
            request.thinking_level if request.thinking_level is not None else self.thinking_level
        )
        async with (
            _closed_after(owned),
            _assemble(
                agent,
                session_id,
                self._workspace,
                llm,
                writer,
                files,
                vision=vision,
                ledger=None,
                values=values,
                depth=self.depth + 1,
                sandbox=self.sandbox,
                surface=self.surface,
            ) as session,
        ):
            yield _SubagentChild(session, level)

    async def _agent_for(self, agent_id: str | None) -> Agent:
        mine = self._agent.paths
        if agent_id is None or agent_id == mine.agent_id:
            return self._agent
        missing = SubagentSpawnError(
            f'subagent error: agent "{agent_id}" does not exist or is not accessible'
        )
        try:
            paths = cfg.AgentPaths(mine.root, mine.project_id, agent_id)
        except ValueError:
            raise missing from None

        def open_agent() -> Agent | None:  # the check and the opening: one trip to a worker
            if not paths.agent_dir.is_dir():
                return None
            return Agent.open(mine.root, mine.project_id, agent_id)

        try:
            agent = await run_in_worker(open_agent)
        except (cfg.ConfigError, OSError) as exc:
            raise SubagentSpawnError(f"subagent error: {exc}") from exc
        if agent is None:
            raise missing
        return agent


@final
@attrs.frozen
class _SubagentChild:
    """An open child Session as the subagent supervisor drives it (``SubagentChild``)."""

    session: Session
    thinking_level: str | None

    @property
    def session_id(self) -> str:
        """The child's session id."""
        return self.session.session_id

    @property
    def session_meta(self) -> om.OmniMessage[om.SessionMetaPayload]:
        """The child's ``session_meta`` (``source: "subagent"``)."""
        meta = self.session.session_meta
        assert meta is not None
        return meta

    def run(
        self, prompt: str, *, approve: om.ApproveFn, interrupt: trio.Event
    ) -> AbstractAsyncContextManager[RunStream]:
        """One round: ``prompt`` as the child's user message, at the child's thinking level."""
        return self.session.run(
            [om.user_text(prompt)],
            approve=approve,
            interrupt=interrupt,
            thinking_level=self.thinking_level,
        )


def _compaction_for(llm: LLM) -> CompactionSettings | None:
    window = llm.context_window
    if not window:
        return None
    return CompactionSettings(max_context_length=int(window * _COMPACTION_SHARE))


@final
@attrs.frozen
class SessionUsage:
    """What a session has used so far (:attr:`Session.usage`), read at one moment."""

    turns: int
    """Committed model turns in the current context (compaction starts it again at 0)."""
    tokens: om.TokenCounts
    """The session's cumulative token usage, compaction requests included."""
    context_tokens: int
    """The last request's total tokens: how full the context is."""


@final
@attrs.define(eq=False)
class Session:
    """One conversation: an Environment, a model, a trace and the engine that runs Tasks.

    Get one from :meth:`Agent.session` or :meth:`Agent.resume_session`. The engine is
    the session's own: what a caller may read or change of it is a member here.
    """

    session_id: str
    agent: Agent
    environment: Environment
    _engine: Engine
    recorder: TraceRecorder
    session_meta: om.OmniMessage[om.SessionMetaPayload] | None = None
    """The ``session_meta`` this session's trace opens with."""
    subagent_runner: ChildSessionRunner | None = None
    """How run_subagent opens this session's children."""

    @property
    def workspace_dir(self) -> Path:
        """The session's workspace."""
        return self.environment.workspace_dir

    @property
    def trace_path(self) -> Path:
        """The trace file new records go to."""
        return self.recorder.writer.path

    @property
    def llm(self) -> LLM:
        """The model that answers the session's next request."""
        return self._engine.llm

    def set_llm(self, llm: LLM) -> None:
        """Answer the next runs with ``llm`` (the caller keeps owning the client).

        Raises :class:`~penguin.engine.EngineBusyError` while a run is live.
        """
        if self._engine.running:
            raise EngineBusyError("a run is live on this session; change the model after it")
        self._engine.llm = llm

    @property
    def running(self) -> bool:
        """Whether a run (or a compaction) is live."""
        return self._engine.running

    @property
    def usage(self) -> SessionUsage:
        """Turns and tokens used so far."""
        ledger = self._engine.ledger
        return SessionUsage(
            turns=ledger.turns,
            tokens=ledger.session_tokens,
            context_tokens=ledger.last_request_total,
        )

    @property
    def compaction(self) -> CompactionSettings | None:
        """When the context is compacted by itself (``None``: never); assign to change."""
        return self._engine.compaction

    @compaction.setter
    def compaction(self, settings: CompactionSettings | None) -> None:
        self._engine.compaction = settings

    @property
    def reconnect(self) -> ReconnectPolicy:
        """The waits between retries of a failed model request; assign to change."""
        return self._engine.reconnect

    @reconnect.setter
    def reconnect(self, policy: ReconnectPolicy) -> None:
        self._engine.reconnect = policy

    def run(
        self,
        messages: Sequence[om.OmniMessage[om.Payload]],
        *,
        approve: om.ApproveFn | None = None,
        interrupt: trio.Event | None = None,
        thinking_level: str | None = None,
        max_turns: int | None = None,
    ) -> AbstractAsyncContextManager[RunStream]:
        """Run one Task (``async with session.run(...) as stream``); see :meth:`Engine.run`.

        ``approve`` answers every tool call (none given = deny everything); the
        project's command policy is checked first. ``interrupt`` ends the Task
        gracefully; the carry-over is re-sent by the next run. ``thinking_level`` is
        also what subagents spawned during this run inherit. ``max_turns`` caps this
        run's model turns (``None``: no limit).
        """
        if self.subagent_runner is not None:
            self.subagent_runner.thinking_level = thinking_level
        return EnterFirst(
            self._engine.run(
                messages,
                approve=approve,
                interrupt=interrupt,
                thinking_level=thinking_level,
                max_turns=max_turns,
            ),
            "session.run(...)",
            "async with session.run(messages) as stream: async for message in stream: ...",
        )

    def steer(self, messages: Iterable[om.OmniMessage[om.Payload]]) -> bool:
        """Send user messages to the live Task (delivered between turns); False if none."""
        return self._engine.steer(messages)

    def compact(
        self, mode: om.CompactionMode | None = None
    ) -> AbstractAsyncContextManager[RunStream]:
        """Compact the context now (``async with session.compact() as stream``)."""
        return self._engine.compact(mode)

    async def flush_trace(self) -> None:
        """Wait until every record so far is in the trace file."""
        await self.recorder.flush()


_CLOSE_GRACE: Final = 10.0
"""Seconds :meth:`SessionHolder.release` lets a session (and its process kills) close."""


@final
class SessionHolder:
    """One :class:`Session` held open by a task of someone else's nursery, until released.

    A Session is an ``async with`` block. A surface that opens it in one place and closes
    it in another — the server (a request opens, DELETE or the shutdown closes), the
    chat (``/clear`` swaps it) — cannot keep that block in its own frame; the holder's
    task does. :meth:`open` starts the task in the given nursery and returns the open
    Session (an error while opening is raised there); :meth:`release` ends the block —
    every process the session started ends — and waits for it, ``grace`` seconds at
    most, then cancels the task. An error while closing a session that did open is
    logged, not raised into the nursery, whose other work goes on.

    ``while_open`` (given to :meth:`open`) runs beside the open session and is
    cancelled before it closes (the server forwards background subagents' messages so).
    """

    def __init__(self) -> None:
        self.session: Session | None = None
        """The open Session; None before it opened and once it closed."""
        self.session_id: str | None = None
        """The id of the session opened (kept once it is closed)."""
        self.closed = trio.Event()
        """Set once the holding task has ended (the session is closed or never opened)."""
        self._release = trio.Event()
        self._scope = trio.CancelScope()
        self._opened = False

    async def open(
        self,
        nursery: trio.Nursery,
        opener: Callable[[], AbstractAsyncContextManager[Session]],
        *,
        while_open: Callable[[Session], Awaitable[object]] | None = None,
    ) -> Session:
        """Open ``opener()``'s session in a task of ``nursery``; the open Session."""
        if self._opened:
            raise RuntimeError("a SessionHolder holds one session; make another for the next")
        self._opened = True
        session: Session = await nursery.start(self._hold, opener, while_open)
        return session

    async def _hold(
        self,
        opener: Callable[[], AbstractAsyncContextManager[Session]],
        while_open: Callable[[Session], Awaitable[object]] | None,
        *,
        task_status: trio.TaskStatus[Session],
    ) -> None:
        started = False
        try:
            with self._scope:
                async with opener() as session, trio.open_nursery() as beside:
                    self.session = session
                    self.session_id = session.session_id
                    if while_open is not None:
                        beside.start_soon(while_open, session)
                    task_status.started(session)
                    started = True
                    await self._release.wait()
                    beside.cancel_scope.cancel()
        except Exception:
            if not started:
                raise
            _logger.exception("penguin: closing session %s failed", self.session_id)
        finally:
            self.session = None
            self.closed.set()

    def release_soon(self) -> None:
        """Let the session close, without waiting for it (see :meth:`release`)."""
        self._release.set()

    async def release(self, grace: float = _CLOSE_GRACE) -> None:
        """Close the session and wait until it is closed: ``grace`` seconds, then cancelled."""
        self._release.set()
        if not self._opened:
            self.closed.set()
            return
        with trio.move_on_after(grace):
            await self.closed.wait()
        if not self.closed.is_set():
            self._scope.cancel()
            await self.closed.wait()


@asynccontextmanager
async def _closed_after(client: OpenAIChatLLM | None) -> AsyncIterator[None]:
    """Close ``client`` (a model client this code opened, if any) when the block ends.

    Shielded, so a cancelled session still releases its connection pool.
    """
    try:
        yield
    finally:
        if client is not None:
            with trio.CancelScope(shield=True):
                await client.aclose()
