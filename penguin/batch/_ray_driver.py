"""The Ray backend's driver side (spec B2.4–B2.6): this process, in Trio.

No scheduler of our own: :class:`RayDriver` splits the tasks into one share per
worker, starts one Ray actor (``_ray_worker.BatchWorker``) per share, and Ray places
them and carries the calls.

How results come back: the driver long-polls each actor (``take``, which returns as
soon as anything finished, with everything finished since the last call). We chose
that over a shared ``ray.util.queue.Queue`` because a queue is one more actor that
can die, and a reader of it cannot tell *whose* tasks were lost when a worker dies;
a poll of the worker itself fails exactly when that worker is gone, which is the
signal the retry needs. Under load one poll carries many results, so the transport
cost per result falls as the batch gets busier. Ray's streaming generators
(``num_returns="streaming"``) were weighed for ``take`` and not taken: a dead worker
does raise ``RayActorError`` from the generator's next item, but a *hung* one blocks
it with no bound of its own, so a per-item timeout would be needed on top, which is
the poll's :data:`POLL_TIMEOUT_S` again; and the generator would have to run in the
actor beside ``run_share`` (a second long call per worker), where the poll is short.

Faults: a worker that dies (actor killed, node lost, a call that fails or hangs
past :data:`POLL_TIMEOUT_S`) has its unfinished tasks retried once on a new worker;
a task lost twice gets ``error``. The driver writes a result only for an id it has
not had yet, so nothing comes out twice. A call to a worker that fails while the
batch is being interrupted or stopped is logged on the ``penguin`` logger, never
dropped silently.

The agent's files are sent to the workers (``_ray_worker`` writes them where they
differ). Traces stay where the sessions wrote them; ``gather_traces`` sends each one
back and the driver writes it under its own agent, as if the task had run here.

Every blocking Ray call of the driver goes through ``trio.to_thread.run_sync``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, final

import attrs
import trio

from penguin import config as cfg
from penguin._concurrency import collapse_single
from penguin._log import logger, warn
from penguin.trace import DIR_MODE, FILE_MODE

from ._atomic import write_atomically
from ._errors import BATCH_STOPS, stop_from_wire
from ._ray_cluster import NAMESPACE, check_ray, connected
from ._ray_patches import KEEP_WORKER_CHILDREN
from ._ray_worker import AGENT_FILES, BatchWorker
from ._results import BatchResult
from ._runner import BatchSettings, FirstStop, error_result, settings_to_wire, workers_to_start
from ._tasks import BatchTask

__all__ = ["POLL_TIMEOUT_S", "POLL_WAIT_S", "RayDriver", "read_agent_files"]

POLL_WAIT_S: Final = 1.0
"""How long one ``take`` waits for something to finish before answering empty."""
POLL_TIMEOUT_S: Final = 60.0
"""A ``take`` unanswered for this long means the worker is lost."""
_STOP_GRACE_S: Final = 20.0
"""How long a hard stop waits for the workers to end their sessions before killing them."""


def _unreachable(name: str, call: str, exc: Exception) -> None:
    logger.warning(
        "[penguin] Ray worker %s: %s failed: %s: %s", name, call, type(exc).__name__, exc
    )


@final
@attrs.define
class _Share:
    """The tasks one worker runs, and what the driver has heard of them."""

    tasks: list[BatchTask]
    attempt: int = 1
    started: set[str] = attrs.field(factory=set)
    done: set[str] = attrs.field(factory=set)

    def unfinished(self) -> list[BatchTask]:
        return [task for task in self.tasks if task.id not in self.done]


@final
class RayDriver:
    """Runs a batch on a Ray cluster from a Trio program; see the module docstring."""

    def __init__(self, address: str | None) -> None:
        """A driver for the cluster at ``address`` (None: a local one, for the batch)."""
        self._ray: Any = None
        self._address = address
        self._threads = trio.CapacityLimiter(8)
        self._run_id = secrets.token_hex(4)
        self._live: dict[str, Any] = {}
        self._seen: set[str] = set()

    @classmethod
    def check(cls, *, address: str | None) -> RayDriver:
        """A driver, or :class:`BackendUnavailableError` when Ray is not installed."""
        check_ray()
        return cls(address)

    async def run(
        self,
        tasks: Sequence[BatchTask],
        settings: BatchSettings,
        *,
        emit: Callable[[BatchResult], Awaitable[None]],
        interrupt: trio.Event,
        on_start: Callable[[BatchTask], None] | None = None,
        on_lost: Callable[[BatchTask], None] | None = None,
        on_phase: Callable[[str], None] | None = None,
        workers: int | None = None,
        gather_traces: bool = False,
    ) -> None:
        """Run ``tasks`` on ``workers`` actors, ``emit``-ting each result as it arrives.

        ``on_phase`` is told what the batch is doing while no task runs: connecting to
        (or starting) the cluster, starting the workers, stopping a local cluster.
        Raises the first :data:`~._errors.BatchStop` a worker reports, once every
        worker has stopped.
        """
        say = on_phase if on_phase is not None else _say_nothing
        if not tasks:
            return
        paths = cfg.AgentPaths(settings.root, settings.project_id, settings.agent_id)
        agent_files = await trio.to_thread.run_sync(read_agent_files, settings)
        async with connected(self._address, self._call, say) as ray:
            self._ray = ray
            if workers:
                count = workers_to_start(workers, len(tasks), settings.concurrency, "Ray worker")
            else:
                count = await self._default_workers(len(tasks), settings.concurrency)
            say(f"starting {count} Ray worker{'' if count == 1 else 's'}")
            self._threads.total_tokens = count + 4  # each worker's poll waits in a thread
            cpus = await self._call(self._cluster_cpus)
            per_worker = min(1.0, cpus / count) if cpus > 0 else 0.0
            context = _RunContext(
                worker_class=self._ray.remote(BatchWorker),
                worker_options={
                    "namespace": NAMESPACE,
                    "num_cpus": per_worker,
                    "max_concurrency": 4,
                    "max_restarts": 0,
                    "max_task_retries": 0,
                    "scheduling_strategy": "SPREAD",
                    # The worker's processes are ended by penguin's watchdog, not Ray.
                    "runtime_env": {"env_vars": dict(KEEP_WORKER_CHILDREN)},
                },
                settings=settings,
                agent_files=agent_files,
                gather=gather_traces,
                traces_dir=paths.traces_dir,
                emit=emit,
                interrupt=interrupt,
                on_start=on_start,
                on_lost=on_lost,
            )
            shares = [_Share(list(tasks[index::count])) for index in range(count)]
            stops = FirstStop()

            async def drive(share: _Share, name: str) -> None:
                try:
                    await self._drive(context, share, name)
                except BATCH_STOPS as exc:
                    stops.met(exc, nursery)  # the batch stops: _stop_all below

            try:
                with collapse_single():
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._forward_interrupt, interrupt)
                        async with trio.open_nursery() as drivers:
                            for number, share in enumerate(shares):
                                drivers.start_soon(drive, share, f"w{number}")
                        nursery.cancel_scope.cancel()
            finally:
                with trio.CancelScope(shield=True):
                    await self._stop_all()
            stops.raise_it()

    async def _default_workers(self, tasks: int, concurrency: int) -> int:
        cpus = await self._call(self._cluster_cpus)
        return max(1, min(int(cpus) or 1, math.ceil(tasks / concurrency)))

    def _cluster_cpus(self) -> float:
        return float(self._ray.cluster_resources().get("CPU", 0.0))

    async def _call(self, fn: Callable[[], Any]) -> Any:
        return await trio.to_thread.run_sync(fn, limiter=self._threads)

    async def _drive(self, context: _RunContext, share: _Share, name: str) -> None:
        """Run one share on one new worker; on its loss, the unfinished tasks once more."""
        lost, cause = await self._run_share(context, share, name)
        if not lost:
            return
        if context.interrupt.is_set():
            return  # interrupted: tasks lost now simply have no result (``--resume``)
        one = len(lost) == 1
        said = f"[penguin] Ray worker {name} was lost ({cause}); " + (
            "its unfinished task" if one else f"its {len(lost)} unfinished tasks"
        )
        if share.attempt == 1:
            warn(f"{said} {'runs' if one else 'run'} again on a new worker")
            retry = _Share(lost, attempt=2)
            await self._drive(context, retry, f"{name}-retry")
            return
        warn(f"{said} {'ends' if one else 'end'} in error (lost twice)")
        for task in lost:
            await self._deliver(
                context,
                error_result(task, "its Ray worker was lost twice (killed, or its node died)"),
                traces=[],
            )

    async def _run_share(
        self, context: _RunContext, share: _Share, name: str
    ) -> tuple[list[BatchTask], str]:
        """Drive ``share`` on a worker named ``name``: the tasks it lost, and why.

        No tasks (and no reason) when the worker ended its share.
        """
        ray = self._ray
        full_name = f"batch-{self._run_id}-{name}"
        actor = await self._call(
            lambda: context.worker_class.options(name=full_name, **context.worker_options).remote(
                settings_to_wire(context.settings), context.agent_files, context.gather
            )
        )
        self._live[full_name] = actor
        if context.interrupt.is_set():
            await self._call(actor.interrupt.remote)
        run_ref = await self._call(
            lambda: actor.run_share.remote([task.to_json() for task in share.tasks])
        )
        by_id = {task.id: task for task in share.tasks}
        lost_error = _lost_errors(ray)
        try:
            while True:
                report = await self._call(functools.partial(_take, ray, actor))
                for task_id in report["started"]:
                    share.started.add(task_id)
                    if context.on_start is not None and task_id in by_id:
                        context.on_start(by_id[task_id])
                for item in report["results"]:
                    result = BatchResult.from_json(item["result"])
                    share.done.add(result.id)
                    await self._deliver(context, result, traces=item["traces"])
                if report.get("stopped"):  # the run's _stop_all ends every worker
                    raise stop_from_wire(report["stopped"])
                if report["finished"]:
                    break
            await self._call(lambda: ray.get(run_ref, timeout=POLL_TIMEOUT_S))
        except lost_error as exc:
            lost = share.unfinished()
            for task in lost:
                if task.id in share.started and context.on_lost is not None:
                    context.on_lost(task)
            with trio.CancelScope(shield=True):
                await self._kill(full_name)
            return lost, _why_lost(ray, exc)
        with trio.CancelScope(shield=True):
            await self._kill(full_name)
        return [], ""

    async def _deliver(
        self, context: _RunContext, result: BatchResult, *, traces: Sequence[Sequence[Any]]
    ) -> None:
        if result.id in self._seen:
            return
        self._seen.add(result.id)
        if traces:
            local = await trio.to_thread.run_sync(
                _write_traces, context.traces_dir, traces, result.trace_path
            )
            result = attrs.evolve(result, trace_path=local)
        await context.emit(result)

    async def _forward_interrupt(self, interrupt: trio.Event) -> None:
        await interrupt.wait()
        for name, actor in list(self._live.items()):
            try:
                await self._call(actor.interrupt.remote)
            except Exception as exc:  # a lost worker: its share is retried or reported
                _unreachable(name, "interrupt", exc)

    async def _kill(self, name: str) -> None:
        actor = self._live.pop(name, None)
        if actor is not None:
            try:
                await self._call(lambda: self._ray.kill(actor, no_restart=True))
            except Exception as exc:  # gone already, or the cluster is: nothing to end
                _unreachable(name, "kill", exc)

    async def _stop_all(self) -> None:
        """End every worker still live: stop its sessions, give them time, then kill it."""
        if not self._live:
            return
        ray = self._ray
        actors = dict(self._live)
        with trio.move_on_after(_STOP_GRACE_S):
            for name, actor in actors.items():
                try:
                    await self._call(actor.stop.remote)
                except Exception as exc:  # a lost worker has no sessions left to stop
                    _unreachable(name, "stop", exc)
            # stop() returns once the cancellation is delivered; the sessions then
            # unwind and run_share returns, after which take() reports finished.
            for name, actor in actors.items():
                try:
                    while True:
                        report = await self._call(functools.partial(_take, ray, actor))
                        if report["finished"]:
                            break
                except Exception as exc:  # lost while stopping: killed below all the same
                    _unreachable(name, "take", exc)
        for name in list(actors):
            await self._kill(name)


@final
@attrs.frozen(kw_only=True)
class _RunContext:
    worker_class: Any
    worker_options: Mapping[str, Any]
    settings: BatchSettings
    agent_files: Mapping[str, bytes]
    gather: bool
    traces_dir: Path
    emit: Callable[[BatchResult], Awaitable[None]]
    interrupt: trio.Event
    on_start: Callable[[BatchTask], None] | None
    on_lost: Callable[[BatchTask], None] | None


def _say_nothing(text: str) -> None:
    """The phase of a run whose caller shows none."""


def _take(ray: Any, actor: Any) -> dict[str, Any]:
    """One poll of ``actor`` (blocking; run in a thread)."""
    report: dict[str, Any] = ray.get(actor.take.remote(POLL_WAIT_S), timeout=POLL_TIMEOUT_S)
    return report


def _lost_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """The exceptions of a call that mean the worker is gone (or broken past use)."""
    exceptions = ray.exceptions
    return (
        exceptions.RayActorError,
        exceptions.ActorUnavailableError,
        exceptions.GetTimeoutError,
        exceptions.RayTaskError,
        exceptions.ObjectLostError,
    )


def _why_lost(ray: Any, exc: BaseException) -> str:
    """Why a worker counts as lost, for the line that says so: a hang, or Ray's error."""
    if isinstance(exc, ray.exceptions.GetTimeoutError):
        return f"no answer in {POLL_TIMEOUT_S:.0f} s"
    return type(exc).__name__


def _write_traces(
    traces_dir: Path, traces: Sequence[Sequence[Any]], remote_path: str | None
) -> str | None:
    """Write gathered trace files under ``traces_dir``; the local path of ``remote_path``."""
    local: str | None = remote_path
    remote_name = None if remote_path is None else Path(remote_path).name
    for relative, data in traces:
        date_dir, name = str(relative).split("/", 1)
        if "/" in name or name.startswith(".") or date_dir.startswith("."):
            continue  # not a trace file name: never write outside the traces directory
        target = traces_dir / date_dir / name
        if not (target.exists() and target.read_bytes() == data):
            target.parent.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
            write_atomically(target, data, mode=FILE_MODE)
        if name == remote_name:
            local = str(target)
    return local


def read_agent_files(settings: BatchSettings) -> dict[str, bytes]:
    paths = cfg.AgentPaths(settings.root, settings.project_id, settings.agent_id)
    files: dict[str, bytes] = {}
    for name in AGENT_FILES:
        with contextlib.suppress(FileNotFoundError):
            files[name] = getattr(paths, name).read_bytes()
    return files
