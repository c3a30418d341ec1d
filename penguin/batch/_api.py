"""The Python API of a batch (spec B3.1): :func:`run_batch`, a stream of results.

This module only checks the options and picks the backend: the local one
(:func:`~._runner.run_tasks` in this process) or Ray (:mod:`._ray`, imported only
when asked for). Both report through the same two callbacks, a task that got its
slot and a result, so progress and results read the same whichever ran them.
"""

from __future__ import annotations

import math
import os
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, get_args

import attrs
import trio

from penguin import config as cfg
from penguin._concurrency import collapse_single

from ._errors import BATCH_STOPS, BatchOptionError, BatchStop
from ._options import check_options
from ._progress import BatchProgress
from ._results import BatchResult
from ._runner import BatchSettings, run_tasks
from ._tasks import BatchTask, check_unique_ids, unattended_mode

if TYPE_CHECKING:
    from penguin.environment.sandbox import SandboxPolicy

__all__ = ["BACKENDS", "Backend", "check_backend", "check_options", "run_batch"]

Backend: TypeAlias = Literal["local", "ray"]
BACKENDS: Final[tuple[Backend, ...]] = get_args(Backend)


def check_backend(backend: str) -> None:
    """Whether ``backend`` can run here: :class:`BackendUnavailableError` says how to get it.

    ``ray`` needs the ``penguin[ray]`` extra; an unknown name is a
    :class:`BatchOptionError`.
    """
    if backend not in BACKENDS:
        raise BatchOptionError("backend", f"unknown backend {backend!r}: use local or ray")
    if backend == "ray":
        from ._ray import check_ray

        check_ray()


@trio.as_safe_channel
async def run_batch(
    tasks: Iterable[BatchTask],
    *,
    concurrency: int = 16,
    approve: str = "allow-all",
    backend: Backend = "local",
    ray_address: str | None = None,
    workers: int | None = None,
    gather_traces: bool = False,
    root: str | os.PathLike[str] | None = None,
    project_id: str = cfg.DEFAULT_PROJECT_ID,
    agent_id: str = cfg.DEFAULT_AGENT_ID,
    provider: str | None = None,
    model_id: str | None = None,
    max_turns: int | None = None,
    timeout_s: float | None = None,
    interrupt: trio.Event | None = None,
    progress: BatchProgress | None = None,
    sandbox: SandboxPolicy | None = None,
    discard_workspaces: bool = False,
) -> AsyncGenerator[BatchResult, None]:
    """Run ``tasks`` as sessions of one agent, yielding each result as its task ends.

    ::

        async with penguin.batch.run_batch(tasks, concurrency=32) as results:
            async for result in results:
                ...

    At most ``concurrency`` sessions run at once (per Ray worker, with
    ``backend="ray"``; fewer, said on stderr, when the process's open-file limit
    cannot hold that many). ``approve`` (``allow-all`` or ``deny-all``; the asking modes
    raise :class:`BatchOptionError`), ``provider`` + ``model_id``, ``max_turns`` and
    ``timeout_s`` are the defaults of tasks that do not set their own. ``root``,
    ``project_id`` and ``agent_id`` pick the agent whose model, tools, command
    policy and vault the sessions use, and under which their traces and temporary
    workspaces go.

    ``interrupt`` set: running tasks are interrupted gracefully (their results say
    ``aborted``), tasks not started yet never start, and the stream ends once the
    last result is out. Leaving the block before the stream ends stops what still
    runs at once instead: a hard stop, in which each session still ends its
    processes and closes its trace, but no further results come. ``progress`` is
    kept up to date as tasks start and end. ``sandbox`` is the sessions' policy
    (spec/sandbox.md; a task's ``sandbox`` goes over it; ``None``: the project file's
    ``[sandbox]``, else none). ``discard_workspaces`` removes each task's temporary
    workspace (a template's copy, or the empty one) once its session has ended, before
    its result is given; the result's ``workspace`` still names it. A task that finds
    the data root's disk full, or whose model cannot be reached at all or kept refusing
    it for its rate limit, stops the batch: what still runs is hard-stopped and the stream raises
    :class:`~penguin.batch.StorageFullError`, :class:`~penguin.batch.ModelUnreachableError`
    or :class:`~penguin.batch.ModelRateLimitedError` once the results of the tasks that
    had finished are given (the tasks without a result are the ones to run again).

    ``backend="local"`` with ``workers`` above 1 splits the tasks over that many worker
    processes of this machine, each with up to ``concurrency`` sessions (one Trio loop
    drives one core); the default is this process alone.
    ``backend="ray"`` spreads the tasks over ``workers`` Ray actors (default: one per
    CPU of the cluster, at most one per ``concurrency`` tasks) on the cluster at
    ``ray_address`` (default: a local one, started for this batch and stopped after
    it); ``gather_traces`` copies each trace back under this machine's agent. Raises
    :class:`~penguin.batch.BackendUnavailableError` when ``ray`` is not installed.
    """
    task_list = list(tasks)
    settings = _settings(
        concurrency=concurrency,
        approve=approve,
        root=root,
        project_id=project_id,
        agent_id=agent_id,
        provider=provider,
        model_id=model_id,
        max_turns=max_turns,
        timeout_s=timeout_s,
        sandbox=sandbox,
        discard_workspaces=discard_workspaces,
    )
    check_options(workers=workers)
    check_unique_ids(task_list)
    stop = interrupt if interrupt is not None else trio.Event()
    send, receive = trio.open_memory_channel[BatchResult](math.inf)

    running: set[str] = set()  # started and not yet finished nor lost: what progress counts

    def started(task: BatchTask) -> None:
        running.add(task.id)
        if progress is not None:
            progress.task_started(trio.current_time())

    def lost(task: BatchTask) -> None:
        running.discard(task.id)
        if progress is not None:
            progress.task_lost()

    def phase(text: str) -> None:
        if progress is not None:
            progress.phase = text

    async def finished(result: BatchResult) -> None:
        was_running = result.id in running  # a task a lost worker never started was not
        running.discard(result.id)
        if progress is not None:
            progress.task_finished(result, trio.current_time(), was_running=was_running)
        # At once, with the count: a checkpoint here could be cancelled by a stop after
        # the result was counted and before it was sent (the buffer is unbounded).
        send.send_nowait(result)
        await trio.lowlevel.checkpoint()

    if progress is not None:
        progress.start(trio.current_time())
    runner: Callable[[], Awaitable[None]]
    if backend == "local" and workers is not None and workers > 1:
        from ._processes import run_in_processes

        async def runner() -> None:
            await run_in_processes(
                task_list,
                settings,
                workers=workers,
                emit=finished,
                interrupt=stop,
                on_start=started,
                on_lost=lost,
                on_phase=phase,
            )

    elif backend == "local":

        async def runner() -> None:
            await run_tasks(task_list, settings, emit=finished, interrupt=stop, on_start=started)

    elif backend == "ray":
        from . import _ray  # ray itself is imported only here, and only if installed

        driver = _ray.RayDriver.check(address=ray_address)

        async def runner() -> None:
            await driver.run(
                task_list,
                settings,
                emit=finished,
                interrupt=stop,
                on_start=started,
                on_lost=lost,
                on_phase=phase,
                workers=workers,
                gather_traces=gather_traces,
            )

    else:
        raise BatchOptionError("backend", f"unknown backend {backend!r}: use local or ray")

    stopped: list[BatchStop] = []
    with collapse_single():  # what stops the batch comes out as itself, not in a group
        async with trio.open_nursery() as nursery:

            async def produce() -> None:
                async with send:
                    try:
                        with collapse_single():
                            await runner()
                    except BATCH_STOPS as exc:  # raised once the results before it are out
                        stopped.append(exc)

            nursery.start_soon(produce)
            async with receive:
                async for result in receive:
                    yield result
    if stopped:
        raise stopped[0]


def _plain(policy: SandboxPolicy) -> dict[str, Any]:
    """A policy as plain values (they cross to Ray workers as JSON-like data)."""
    out = attrs.asdict(policy)
    for key in ("writable_roots", "protected"):
        out[key] = list(out[key])
    return out


def _settings(
    *,
    concurrency: int,
    approve: str,
    root: str | os.PathLike[str] | None,
    project_id: str,
    agent_id: str,
    provider: str | None,
    model_id: str | None,
    max_turns: int | None,
    timeout_s: float | None,
    sandbox: SandboxPolicy | None,
    discard_workspaces: bool,
) -> BatchSettings:
    """The checked options of a batch (:class:`BatchOptionError` for a bad one)."""
    check_options(
        concurrency=concurrency,
        max_turns=max_turns,
        timeout_s=timeout_s,
        provider=provider,
        model_id=model_id,
    )
    return BatchSettings(
        root=Path(root) if root is not None else None,
        project_id=project_id,
        agent_id=agent_id,
        concurrency=concurrency,
        approve=unattended_mode(approve),
        provider=provider,
        model_id=model_id,
        max_turns=max_turns,
        timeout_s=timeout_s,
        sandbox=_plain(sandbox) if sandbox is not None else None,
        discard_workspaces=discard_workspaces,
    )
