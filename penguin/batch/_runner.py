"""The local runner (spec B2.2): many tasks in one Trio loop, each a Session of its own.

:func:`run_tasks` is the whole local backend, and also what every Ray actor runs on
its share: one nursery, a :class:`trio.CapacityLimiter` of ``concurrency`` slots, and
per task, once it has a slot, a :class:`~penguin.Session` of the batch's agent (with
its own Environment, so the task's processes end with it) in a workspace (given, or
fresh with a template copied in: made in the worker thread that opens the session,
one trip for all of a task's opening file work), one run of the prompt, and a
:class:`~._results.BatchResult` handed to ``emit``. Approvals are the mode's
(``allow-all`` or ``deny-all``, nobody is asked) with the project's command policy
checked first, as ``penguin run`` composes them.

Stopping a task (:func:`run_until_stopped`): over its ``timeout_s``, or when the
batch's ``interrupt`` is set, the task's own interrupt event is set — the run closes
out gracefully — and if it has not ended :data:`HARD_STOP_GRACE_S` later its cancel
scope is cancelled: a hard stop, which still unwinds the Environment. The result
then says ``timeout`` or ``aborted``. Tasks that have not got a slot when the batch
is interrupted do not start and get no result (``--resume`` runs them later).

Whatever goes wrong with one task (a missing template, a workspace that is not a
directory, no such model) is that task's ``error`` result; the batch goes on. Except
what is not the task's to fail on, which stops the batch, the tasks still running
hard-stopped and none of them given a result (every task after it would fail the same
way, and a final result for each would keep ``--resume`` from running them later): a
full disk (:func:`storage_full`), where a task cannot write its trace, session lock or
workspace (:class:`~._errors.StorageFullError`), and a model server that cannot be
reached at all (:class:`~._errors.ModelUnreachableError`).

The concurrency is what the process's open-file limit holds at most
(:func:`within_open_files`): past it, tasks would fail wherever a descriptor ran out.

The batch's sessions share one model client per model (its connections are the Trio
run's pool, ``penguin.llm``'s shared transport), instead of opening a client each, and
Python's collector runs at :func:`~penguin._gc.many_sessions_gc`'s pace while they run.
"""

from __future__ import annotations

import errno
import functools
import math
import os
import shutil
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final, Literal, final

import attrs
import trio

from penguin import config as cfg
from penguin import protocol as om
from penguin._concurrency import collapse_single, run_in_worker
from penguin._fdlimit import FDS_PER_SESSION, open_file_room
from penguin._gc import many_sessions_gc
from penguin._log import warn
from penguin.agent import FROM_PROJECT, Agent
from penguin.approval import ApprovalMode, approver
from penguin.environment.sandbox import SandboxPolicy
from penguin.llm import LLM, ClosableLLM

from ._errors import (
    BATCH_STOPS,
    BatchStop,
    ModelRateLimitedError,
    ModelUnreachableError,
    StorageFullError,
)
from ._options import check_options
from ._results import BatchResult, TokenTotals, status_of_run
from ._tasks import BatchTask

__all__ = [
    "HARD_STOP_GRACE_S",
    "BatchSettings",
    "FirstStop",
    "TaskStop",
    "error_result",
    "run_tasks",
    "run_until_stopped",
    "settings_from_wire",
    "settings_to_wire",
    "storage_full",
    "within_open_files",
    "workers_to_start",
]

HARD_STOP_GRACE_S: Final = 10.0
"""Seconds between a task's graceful interrupt and its hard stop."""
_FULL_DISK: Final = frozenset({errno.ENOSPC, errno.EDQUOT})


@final
@attrs.frozen(kw_only=True)
class BatchSettings:
    """Where a batch's sessions live and the defaults its tasks do not override.

    ``root`` None is ``$PENGUIN_HOME`` (or ``~/.penguin/data``) of the machine that
    runs the task.
    """

    root: Path | None = None
    project_id: str = cfg.DEFAULT_PROJECT_ID
    agent_id: str = cfg.DEFAULT_AGENT_ID
    concurrency: int = 16
    approve: ApprovalMode = "allow-all"
    provider: str | None = None
    model_id: str | None = None
    max_turns: int | None = None
    timeout_s: float | None = None
    sandbox: dict[str, Any] | None = None
    """The batch's sandbox as plain values (``SandboxPolicy`` fields); ``None``: the
    project file's ``[sandbox]``, else none."""
    discard_workspaces: bool = False
    """Remove each task's temporary workspace once its session has ended (never a
    ``workspace`` the task line gave)."""


def settings_to_wire(settings: BatchSettings) -> dict[str, Any]:
    """``settings`` as JSON values, for a worker in another process (every field).

    The one form both the processes backend and Ray's send: a field added to
    :class:`BatchSettings` reaches every worker without a change here.
    """
    wire = attrs.asdict(settings)
    wire["root"] = None if settings.root is None else str(settings.root)
    return wire


def settings_from_wire(wire: Mapping[str, Any]) -> BatchSettings:
    """The :class:`BatchSettings` that :func:`settings_to_wire` gave ``wire`` for."""
    fields = dict(wire)
    fields["root"] = None if fields.get("root") is None else Path(fields["root"])
    return BatchSettings(**fields)


@final
@attrs.define
class TaskStop:
    """Whether a task was told to stop, why, and whether it took a hard stop."""

    cause: Literal["timeout", "aborted"] | None = None
    hard: bool = False


async def run_until_stopped(
    work: Callable[[trio.Event], Awaitable[None]],
    *,
    interrupt: trio.Event,
    timeout_s: float | None,
    grace_s: float = HARD_STOP_GRACE_S,
) -> TaskStop:
    """Run ``work(task_interrupt)`` until it returns, is interrupted, or is hard-stopped.

    ``task_interrupt`` is set when ``timeout_s`` has passed or ``interrupt`` (the
    batch's) is set, whichever comes first; ``grace_s`` later ``work`` is cancelled.
    The returned :class:`TaskStop` says which fired (``cause`` None: neither) and
    whether the cancellation did (``hard``). An exception from ``work`` propagates.
    """
    stop = TaskStop()
    task_interrupt = trio.Event()
    with trio.CancelScope() as hard:

        async def watch() -> None:
            with trio.move_on_after(math.inf if timeout_s is None else timeout_s):
                await interrupt.wait()
                stop.cause = "aborted"
            if stop.cause is None:
                stop.cause = "timeout"
            task_interrupt.set()
            await trio.sleep(grace_s)
            hard.cancel()

        with collapse_single():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch)
                await work(task_interrupt)
                nursery.cancel_scope.cancel()
    stop.hard = hard.cancelled_caught
    return stop


def storage_full(exc: BaseException, where: Path) -> StorageFullError | None:
    """The :class:`StorageFullError` that ``exc`` amounts to, if it is one of a full disk.

    ``exc`` or an exception it came from (``__cause__``, ``__context__``) is an
    :class:`OSError` whose errno is ``ENOSPC`` or ``EDQUOT`` (a trace write's
    :class:`~penguin.trace.TraceWriteError` included). It names the file the error
    names, or else ``where``.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, StorageFullError):
            return current
        if isinstance(current, OSError) and current.errno in _FULL_DISK:
            named = getattr(current, "path", None) or current.filename
            path = named if isinstance(named, str) else os.fspath(where)
            reason = getattr(current, "reason", None) or os.strerror(current.errno)
            return StorageFullError(path, str(reason), current.errno)
        current = current.__cause__ or current.__context__
    return None


@final
class FirstStop:
    """The first :data:`~._errors.BatchStop` that the tasks of one nursery meet.

    Meeting one cancels the nursery (every other task, or every other worker, stops);
    :meth:`raise_it` raises the first once the nursery is done, alone, whatever the
    others met in the meantime.
    """

    __slots__ = ("_first",)

    def __init__(self) -> None:
        self._first: BatchStop | None = None

    def met(self, stop: BatchStop, nursery: trio.Nursery) -> None:
        """``stop`` was met: keep it if it is the first, and stop ``nursery``."""
        if self._first is None:
            self._first = stop
        nursery.cancel_scope.cancel()

    def raise_it(self) -> None:
        """Raise the first stop met, if any."""
        if self._first is not None:
            raise self._first


def error_result(task: BatchTask, reason: str) -> BatchResult:
    """The result of a task penguin could not run: ``status: "error"``, ``reason`` why."""
    return BatchResult(id=task.id, status="error", error=reason, metadata=task.metadata)


async def run_tasks(
    tasks: Sequence[BatchTask],
    settings: BatchSettings,
    *,
    emit: Callable[[BatchResult], Awaitable[None]],
    interrupt: trio.Event,
    on_start: Callable[[BatchTask], None] | None = None,
) -> None:
    """Run ``tasks``, at most ``settings.concurrency`` at once, ``emit``-ting each result.

    Fewer at once when the process's open files cannot hold that many sessions
    (:func:`within_open_files`, which says so on stderr).

    Results are emitted in completion order, each as soon as its task ended.
    ``on_start`` is told when a task gets its slot. Returns once every started task
    has ended; tasks still waiting for a slot when ``interrupt`` is set never start.
    If the agent cannot be opened, every task gets an ``error`` result saying why
    (unless its disk is full: see below).

    Raises :class:`~._errors.StorageFullError` (the first, alone) once a task finds its
    disk full, and :class:`~._errors.ModelUnreachableError` once a task's model could
    not be reached at all: the other running tasks are hard-stopped first (each session
    still ends its processes), and neither they nor that task get a result.
    """
    check_options(concurrency=settings.concurrency)
    settings = await within_open_files(settings)
    try:
        agent = await trio.to_thread.run_sync(
            Agent.open, settings.root, settings.project_id, settings.agent_id
        )
    except (cfg.ConfigError, OSError) as exc:
        no_room = storage_full(exc, cfg.AgentPaths(settings.root).root)
        if no_room is not None:
            raise no_room from exc
        for task in tasks:
            await emit(error_result(task, f"cannot open the agent: {exc}"))
        return
    limiter = trio.CapacityLimiter(settings.concurrency)
    async with _ModelClients(agent) as clients:
        run = _TaskRunner(agent, settings, clients, interrupt)
        stops = FirstStop()

        async def one(task: BatchTask, slot: object) -> None:
            try:
                if on_start is not None:
                    on_start(task)
                try:
                    result = await run.attempt(task)
                except BATCH_STOPS as exc:
                    stops.met(exc, nursery)  # the batch stops: every task would fail
                    return
                except BaseException as exc:
                    if _met_on_the_way_out(exc):
                        return  # a hard-stopped task has no result to give
                    raise
            finally:
                limiter.release_on_behalf_of(slot)
            await emit(result)

        with collapse_single(), many_sessions_gc():
            async with trio.open_nursery() as nursery:
                for task in tasks:  # slots are taken in file order, one task at a time
                    slot = object()
                    await limiter.acquire_on_behalf_of(slot)
                    if interrupt.is_set():
                        limiter.release_on_behalf_of(slot)
                        break
                    nursery.start_soon(one, task, slot)
    stops.raise_it()


def _met_on_the_way_out(exc: BaseException) -> bool:
    """Whether ``exc`` is what a task being hard-stopped met as it unwound, and nothing else.

    The task is cancelled, and ``exc`` a group of :class:`trio.Cancelled` and the
    :class:`OSError` of a file write that failed on the way out (its disk full, say):
    ``Cancelled`` alone would go through, but with such an error beside it the group
    would reach the batch's nursery and end the batch in a traceback instead of the
    stop it is in.
    """

    def only_unwinding(exc: BaseException) -> bool:
        if isinstance(exc, BaseExceptionGroup):
            return all(only_unwinding(inner) for inner in exc.exceptions)
        return isinstance(exc, trio.Cancelled | OSError)

    return (
        isinstance(exc, BaseExceptionGroup)
        and trio.current_effective_deadline() == -math.inf
        and only_unwinding(exc)
    )


async def within_open_files(settings: BatchSettings, *, workers: int = 1) -> BatchSettings:
    """``settings`` with no more sessions at once than this process's open files hold.

    ``workers``: the processes that will each run that many, with this process's limit
    (the line then says so).

    Raises the soft open-file limit to the hard one first. When the limit still
    cannot hold ``settings.concurrency`` sessions (:data:`~penguin._fdlimit.FDS_PER_SESSION`
    descriptors each), the concurrency is lowered to what it holds, and a line on the
    ``penguin`` logger (stderr, by default) says so and what limit would do: tasks then
    wait for a slot instead of failing with "Too many open files" wherever a
    descriptor runs out.
    """
    room = await trio.to_thread.run_sync(open_file_room)
    if room is None or room.sessions >= settings.concurrency:
        return settings
    where = f" in each of the {workers} worker processes" if workers > 1 else ""
    warn(
        f"penguin batch: running {room.sessions} sessions at a time{where}, not "
        f"{settings.concurrency}: this process may open {room.limit:,} files (ulimit -n) "
        f"and a session needs up to {FDS_PER_SESSION}; raise the limit to "
        f"{room.limit_for(settings.concurrency):,} to run {settings.concurrency} at once"
    )
    return attrs.evolve(settings, concurrency=room.sessions)


def workers_to_start(asked: int, tasks: int, concurrency: int, kind: str) -> int:
    """``asked`` workers (``kind``: ``worker process``), or fewer if the tasks fill fewer.

    Each worker runs ``concurrency`` sessions at once, so one per ``concurrency`` tasks
    runs them all at once; another would only add its start-up (a second or so of CPU).
    A line on the ``penguin`` logger says so when the number goes down.
    """
    enough = max(1, math.ceil(tasks / concurrency))
    if asked <= enough:
        return asked
    plural = kind + ("es" if kind.endswith("s") else "s")
    warn(
        f"penguin batch: starting {enough} {kind if enough == 1 else plural}, not {asked}:"
        f" {tasks} task{'' if tasks == 1 else 's'} at {concurrency} at a time"
        f" fill {'it' if enough == 1 else 'them'}"
    )
    return enough


@final
@attrs.define
class _Tally:
    """What a task's stream has shown so far (kept when it is hard-stopped)."""

    session_id: str | None = None
    trace_path: str | None = None
    workspace: str | None = None
    requests: int = 0
    tokens: om.TokenCounts | None = None
    tool_calls: int = 0
    final_text: list[str] = attrs.field(factory=list)
    run_status: str | None = None
    run_error: str | None = None
    turns: int | None = None
    model_error: str | None = None
    """The last failed model request's message: what a timed-out task was waiting on."""
    unreachable: bool = False
    """The run failed because its model could not be reached at all."""
    rate_limited: bool = False
    """The run failed because its model kept refusing it for its rate limit."""

    def observe(self, message: om.OmniMessage[om.Payload]) -> None:
        if message.origin:
            return  # a subagent's message, forwarded: the child has its own trace
        payload = message.payload
        if isinstance(payload, om.ToolCallPayload):
            self.tool_calls += 1
        elif isinstance(payload, om.TokenUsagePayload):
            self.tokens = payload.session
        elif isinstance(payload, om.RequestEndPayload):
            self.model_error = payload.error_message if payload.status != "completed" else None
        elif isinstance(payload, om.RequestBeginPayload):
            self.requests += 1
            self.final_text = []  # the final text is the last response's
        elif (
            isinstance(payload, om.TextPayload)
            and payload.role == "assistant"
            and payload.sender is None
        ):
            self.final_text.append(payload.text)


@final
@attrs.define
class _TaskRunner:
    agent: Agent
    settings: BatchSettings
    clients: _ModelClients
    interrupt: trio.Event

    async def attempt(self, task: BatchTask) -> BatchResult:
        started = trio.current_time()
        tally = _Tally()
        timeout_s = task.timeout_s if task.timeout_s is not None else self.settings.timeout_s
        try:
            stop = await self._run(task, tally, timeout_s)
        except Exception as exc:  # penguin could not run this task; the batch goes on
            full = storage_full(exc, self.agent.paths.root)
            if full is exc:
                raise
            if full is not None:  # unless the disk is full: then it stops
                raise full from exc
            if not isinstance(exc, OSError | cfg.ConfigError | ValueError):
                warn(f"[penguin] batch task {task.id!r}: {type(exc).__name__}: {exc}")
            return attrs.evolve(
                self._result(task, tally, started),
                status="error",
                error=str(exc) or type(exc).__name__,
            )
        if stop.cause is None:  # the model's failures, not the task's
            if tally.unreachable:
                raise ModelUnreachableError(tally.run_error or "no connection")
            if tally.rate_limited:
                raise ModelRateLimitedError(tally.run_error or "rate limited (429)")
        result = self._result(task, tally, started)
        if stop.cause is not None and result.status != "completed":
            if stop.cause == "timeout":
                reason = f"timed out after {timeout_s:g} s"
                if tally.model_error:
                    reason += f"; last model error: {tally.model_error}"
            else:
                reason = "interrupted"
            if stop.hard:
                reason += f"; stopped hard {HARD_STOP_GRACE_S:g} s later"
            result = attrs.evolve(result, status=stop.cause, error=reason)
        return result

    async def _run(self, task: BatchTask, tally: _Tally, timeout_s: float | None) -> TaskStop:
        """The task's session, start to end; then its temporary workspace, if it goes."""
        try:
            return await run_until_stopped(
                functools.partial(self._work, task, tally),
                interrupt=self.interrupt,
                timeout_s=timeout_s,
            )
        finally:
            # The session has ended (its processes with it): nothing writes there now.
            if self.settings.discard_workspaces and task.workspace is None and tally.workspace:
                await run_in_worker(_discard_workspace, tally.workspace)

    def _result(self, task: BatchTask, tally: _Tally, started: float) -> BatchResult:
        counts = tally.tokens or om.TokenCounts()
        run_status = tally.run_status
        return BatchResult(
            id=task.id,
            status=status_of_run(run_status) if run_status is not None else "aborted",
            session_id=tally.session_id,
            trace_path=tally.trace_path,
            workspace=tally.workspace,
            turns=tally.turns if tally.turns is not None else tally.requests,
            tokens=TokenTotals(
                input=max(0, counts.total - counts.output),
                output=counts.output,
                cached=counts.cache_read,
            ),
            tool_calls=tally.tool_calls,
            wall_s=trio.current_time() - started,
            final_text="".join(tally.final_text) or None,
            error=tally.run_error,
            metadata=task.metadata,
        )

    async def _sandbox(self, task: BatchTask) -> SandboxPolicy | object | None:
        """The task line's sandbox over the batch's over the project file's (X1.3).

        :data:`~penguin.agent.FROM_PROJECT` when neither says anything: the session
        reads the project file in its own opening trip to a worker.
        """
        given = self.settings.sandbox
        if given is None and not task.sandbox:
            return FROM_PROJECT
        if given is None:  # the project file's, read in a worker: file-system work
            base = await run_in_worker(self.agent.sandbox_policy)
        else:
            base = SandboxPolicy(**given)
        if not task.sandbox:
            return base
        if base is None:
            base = SandboxPolicy(mode="off")
        return attrs.evolve(base, **dict(task.sandbox))

    async def _work(self, task: BatchTask, tally: _Tally, task_interrupt: trio.Event) -> None:
        sandbox = await self._sandbox(task)
        paths = self.agent.paths

        def make_workspace() -> Path:  # in the worker thread that opens the session
            made = _prepare_workspace(task, paths)
            tally.workspace = str(made)  # read on the loop's thread once the trip is back
            return made

        provider = task.provider if task.provider is not None else self.settings.provider
        model_id = task.model_id if task.model_id is not None else self.settings.model_id
        mode = task.approve if task.approve is not None else self.settings.approve
        max_turns = task.max_turns if task.max_turns is not None else self.settings.max_turns
        async with (
            self.clients.lease(provider, model_id) as (llm, vision),
            self.agent.session(make_workspace, llm, vision=vision, sandbox=sandbox) as session,
        ):
            tally.session_id = session.session_id
            tally.trace_path = str(session.trace_path)
            approve = approver(mode, session.environment.tool_permission)  # nobody to ask
            writer = session.recorder.writer
            # The run stops on the task's interrupt, or once its trace is refused (21.4).
            writer.set_on_failure(task_interrupt)
            async with session.run(
                [om.user_text(task.prompt)],
                approve=approve,
                interrupt=task_interrupt,
                max_turns=max_turns,
            ) as stream:
                async for message in stream:
                    tally.observe(message)
                result = stream.result
            tally.run_status = result.status
            tally.run_error = result.error_message
            tally.turns = result.turns
            tally.unreachable = result.unreachable
            tally.rate_limited = result.rate_limited
            await session.flush_trace()
            if writer.failure is not None:  # the task's trace is not whole: it failed
                full = storage_full(writer.failure, self.agent.paths.root)
                if full is not None:
                    raise full  # ... because the disk is full: the batch stops
                tally.run_status = "failed"
                tally.run_error = str(writer.failure)


def _prepare_workspace(task: BatchTask, paths: cfg.AgentPaths) -> Path:
    """The task's workspace: as given, or a fresh temporary one (a template copied in)."""
    if task.workspace is not None:
        return task.workspace  # the Environment checks it is a directory
    template = task.template
    if template is not None and not template.is_dir():
        state = "is not a directory" if template.exists() else "does not exist"
        raise FileNotFoundError(f'template "{template}" {state}')
    fresh = cfg.new_temp_workspace(paths)
    if template is not None:
        shutil.copytree(template, fresh, symlinks=True, dirs_exist_ok=True)
    return fresh


def _discard_workspace(path: str) -> None:
    """Remove a task's temporary workspace (``--discard-workspaces``); say what stays."""
    left: list[str] = []

    def failed(name: str, error: BaseException) -> None:
        if not left and not isinstance(error, FileNotFoundError):  # gone is what we want
            left.append(f"{name}: {error}")

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=lambda _f, name, error: failed(name, error))
    else:
        shutil.rmtree(path, onerror=lambda _f, name, info: failed(name, info[1]))
    if left:
        warn(f"[penguin] batch: the workspace {path} was not removed whole ({left[0]})")


@final
class _ModelClients:
    """The batch's model clients: one per model, shared by every session of the batch."""

    def __init__(self, agent: Agent) -> None:
        self._agent = agent
        self._clients: dict[tuple[str | None, str | None], tuple[ClosableLLM, bool]] = {}
        self._opening = trio.Lock()

    async def __aenter__(self) -> _ModelClients:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        with trio.CancelScope(shield=True):
            for client, _ in self._clients.values():
                with trio.move_on_after(5):
                    await client.aclose()
        self._clients.clear()

    @asynccontextmanager
    async def lease(
        self, provider: str | None, model_id: str | None
    ) -> AsyncIterator[tuple[LLM, bool]]:
        """The client of the model (the project's default for None, None) for one session.

        With it, whether the model takes images, read once per client rather than
        once per session.
        """
        key = (provider, model_id)
        opened = self._clients.get(key)
        if opened is None:
            async with self._opening:
                opened = self._clients.get(key)
                if opened is None:
                    opened = await trio.to_thread.run_sync(self._open_client, provider, model_id)
                    self._clients[key] = opened
        yield opened

    def _open_client(self, provider: str | None, model_id: str | None) -> tuple[ClosableLLM, bool]:
        entry = cfg.resolve_model(
            self._agent.project_config(), provider=provider, model_id=model_id
        )
        client = self._agent.model_client(provider=entry.provider, model_id=entry.model_id)
        return client, entry.vision
