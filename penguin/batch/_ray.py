"""The Ray backend (spec B2.4–B2.6): the local runner inside each of a pool of Ray actors.

No scheduler of our own: the driver (this process, in Trio) splits the tasks into one
share per worker, and each worker is a Ray actor (:class:`BatchWorker`) that calls
``trio.run`` on the very :func:`~._runner.run_tasks` the local backend uses, with up
to ``concurrency`` sessions. Ray places the actors and carries the calls.

How results come back: the driver long-polls each actor (``take``, which returns as
soon as anything finished, with everything finished since the last call). We chose
that over a shared ``ray.util.queue.Queue`` because a queue is one more actor that
can die, and a reader of it cannot tell *whose* tasks were lost when a worker dies;
a poll of the worker itself fails exactly when that worker is gone, which is the
signal the retry needs. Under load one poll carries many results, so the transport
cost per result falls as the batch gets busier.

Faults: a worker that dies (actor killed, node lost, a call that fails or hangs
past :data:`POLL_TIMEOUT_S`) has its unfinished tasks retried once on a new worker;
a task lost twice gets ``error``. The driver writes a result only for an id it has
not had yet, so nothing comes out twice.

Clusters: with an address, the driver connects to that cluster (or uses the Ray
connection the process already has) and leaves it running. Without one it starts
a local cluster for the batch and shuts it down after: bound to 127.0.0.1 only, no
dashboard, no usage statistics, token authentication with a fresh token held in
the environment (nothing written under ``~/.ray``), and every file under a short
temporary directory (Ray's socket paths have a length limit) that is removed after.

The agent's configuration (models, command policy, system config, vault) is sent to
the workers and written under their data root where it differs, so every node runs
the batch with the driver's model and policy. Traces stay where the
sessions wrote them; ``gather_traces`` sends each one back and the driver writes
it under its own agent, as if the task had run here.

Every blocking Ray call of the driver goes through ``trio.to_thread.run_sync``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import logging
import math
import os
import secrets
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import attrs
import trio

from penguin import config as cfg
from penguin._concurrency import collapse_single
from penguin.trace import DIR_MODE, FILE_MODE

from ._errors import BackendUnavailableError
from ._files import write_atomically
from ._results import BatchResult
from ._runner import BatchSettings, error_result, run_tasks
from ._tasks import BatchTask

__all__ = [
    "INSTALL_COMMAND",
    "NAMESPACE",
    "POLL_TIMEOUT_S",
    "BatchWorker",
    "RayDriver",
    "check_ray",
]

INSTALL_COMMAND: Final = "pip install 'penguin[ray]'"
NAMESPACE: Final = "penguin"
"""The Ray namespace of the workers; each is named ``batch-<run>-w<n>[-retry]``."""
POLL_WAIT_S: Final = 1.0
"""How long one ``take`` waits for something to finish before answering empty."""
POLL_TIMEOUT_S: Final = 60.0
"""A ``take`` unanswered for this long means the worker is lost."""
_STOP_GRACE_S: Final = 20.0
"""How long a hard stop waits for the workers to end their sessions before killing them."""
_SHORT_PATH: Final = 40
"""Longest temporary directory Ray's socket paths (under 108 bytes) leave room for."""
_LOCAL_ENV: Final = {
    "RAY_USAGE_STATS_ENABLED": "0",
    # Ray turns a 127.0.0.1 node address into the machine's public one unless clusters
    # are off, as they are by default on macOS and Windows; this keeps every process
    # of the local cluster on the loopback interface.
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
}
_AGENT_FILES: Final = ("project_config", "system_config", "vault")
"""The agent's files a worker needs (attributes of AgentPaths)."""


def check_ray() -> None:
    """:class:`BackendUnavailableError`, with the install command, when ray is not installed.

    Only looks: ray is imported when the batch connects, after the environment a
    local cluster needs is in place (Ray reads some of it once, at import).
    """
    if "ray" in sys.modules:
        if sys.modules["ray"] is not None:
            return
    elif importlib.util.find_spec("ray") is not None:
        return
    raise BackendUnavailableError(
        "ray", f"--backend ray needs Ray, which is not installed here: {INSTALL_COMMAND}"
    )


# ----------------------------------------------------------------------------- the worker


class BatchWorker:
    """One Ray actor: a Trio loop running its share of the batch (a threaded actor).

    ``run_share`` runs the share to the end; ``take`` (called concurrently, in
    another of the actor's threads) hands over what started and finished since the
    last call; ``interrupt`` and ``stop`` reach into the Trio loop from outside.

    Every method is synchronous, on purpose: Ray makes an actor with any ``async
    def`` method an asyncio actor, whose methods all share one event loop, and then
    ``take`` would wait behind ``run_share``. The Trio side is :class:`_ShareLoop`.
    """

    def __init__(
        self, settings: Mapping[str, Any], agent_files: Mapping[str, bytes], gather: bool
    ) -> None:
        """A worker for the batch ``settings``; makes the node's agent files the driver's."""
        self._loop = _ShareLoop(_settings_from_wire(settings), gather)
        _write_agent_files(self._loop.settings, agent_files)

    def run_share(self, tasks: list[dict[str, Any]]) -> int:
        """Run ``tasks`` (task objects) to the end; the number of tasks."""
        loop = self._loop
        # Ray starts its processes with SIGINT blocked, and a blocked signal stays
        # blocked in every process started from this thread: the tools' commands would
        # not stop on Ctrl-C (input_command's \x03, a tty's interrupt key) as they do
        # elsewhere. Ray runs each worker in a process group of its own, so a terminal's
        # Ctrl-C still does not reach the worker itself.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        try:
            trio.run(loop.main, [BatchTask.from_json(task) for task in tasks])
        except BaseException as exc:
            with loop.ready:
                loop.failure = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            with loop.ready:
                loop.finished = True
                loop.ready.notify_all()
        return len(tasks)

    def take(self, wait_s: float) -> dict[str, Any]:
        """What started and finished since the last call, waiting up to ``wait_s`` for any.

        ``{"started": [id...], "results": [{"result": obj, "traces": [[rel, bytes]...]}],
        "finished": bool, "failure": str | None}``; ``finished`` once ``run_share`` is
        done (and then this call holds everything it produced).
        """
        loop = self._loop
        with loop.ready:
            loop.ready.wait_for(lambda: loop.started or loop.results or loop.finished, wait_s)
            started, loop.started = loop.started, []
            results, loop.results = loop.results, []
            return {
                "started": started,
                "results": results,
                "finished": loop.finished,
                "failure": loop.failure,
            }

    def interrupt(self) -> None:
        """Interrupt the running tasks gracefully; waiting ones will not start."""
        loop = self._loop
        with loop.ready:
            loop.interrupted = True
            token, event = loop.token, loop.interrupt
        if token is not None and event is not None:
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(event.set, trio_token=token)

    def stop(self) -> None:
        """Stop everything at once (each session still ends its processes)."""
        loop = self._loop
        with loop.ready:
            loop.stopped = True
            token, scope = loop.token, loop.scope
        if token is not None and scope is not None:
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(scope.cancel, trio_token=token)


class _ShareLoop:
    """A worker's Trio side, and what it shares with the actor's other threads."""

    def __init__(self, settings: BatchSettings, gather: bool) -> None:
        self.settings = settings
        self.gather = gather
        self.ready = threading.Condition()
        """Guards everything below; notified when something started or finished."""
        self.started: list[str] = []
        self.results: list[dict[str, Any]] = []
        self.finished = False
        self.failure: str | None = None
        self.token: trio.lowlevel.TrioToken | None = None
        self.interrupt: trio.Event | None = None
        self.scope: trio.CancelScope | None = None
        self.interrupted = False
        self.stopped = False

    async def main(self, share: list[BatchTask]) -> None:
        interrupt = trio.Event()
        with trio.CancelScope() as scope:
            with self.ready:
                self.token = trio.lowlevel.current_trio_token()
                self.interrupt, self.scope = interrupt, scope
                if self.interrupted:
                    interrupt.set()
                if self.stopped:
                    scope.cancel()
            await run_tasks(
                share, self.settings, emit=self.emit, interrupt=interrupt, on_start=self.start
            )

    def start(self, task: BatchTask) -> None:
        with self.ready:
            self.started.append(task.id)
            self.ready.notify_all()

    async def emit(self, result: BatchResult) -> None:
        traces: list[list[Any]] = []
        if self.gather and result.trace_path is not None:
            traces = await trio.to_thread.run_sync(_read_traces, result)
        with self.ready:
            self.results.append({"result": result.to_json(), "traces": traces})
            self.ready.notify_all()


def _read_traces(result: BatchResult) -> list[list[Any]]:
    """The session's trace files as ``[date_dir/name, contents]`` pairs."""
    trace = Path(str(result.trace_path))
    found: list[list[Any]] = []
    for path in sorted(trace.parent.glob(f"{result.session_id}_*.jsonl")):
        with contextlib.suppress(OSError):
            found.append([f"{trace.parent.name}/{path.name}", path.read_bytes()])
    return found


def _write_agent_files(settings: BatchSettings, files: Mapping[str, bytes]) -> None:
    """Make this node's copies of the agent's files the driver's (0600, atomically)."""
    paths = cfg.AgentPaths(settings.root, settings.project_id, settings.agent_id)
    for name in _AGENT_FILES:
        data = files.get(name)
        target: Path = getattr(paths, name)
        if data is None:
            continue
        with contextlib.suppress(OSError):
            if target.read_bytes() == data:
                continue  # the same file (the driver's own machine, or done before)
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomically(target, data, 0o600)


def _settings_to_wire(settings: BatchSettings) -> dict[str, Any]:
    wire = attrs.asdict(settings)
    wire["root"] = None if settings.root is None else str(settings.root)
    return wire


def _settings_from_wire(wire: Mapping[str, Any]) -> BatchSettings:
    fields = dict(wire)
    fields["root"] = None if fields.get("root") is None else Path(fields["root"])
    return BatchSettings(**fields)


def _read_agent_files(settings: BatchSettings) -> dict[str, bytes]:
    paths = cfg.AgentPaths(settings.root, settings.project_id, settings.agent_id)
    files: dict[str, bytes] = {}
    for name in _AGENT_FILES:
        with contextlib.suppress(FileNotFoundError):
            files[name] = getattr(paths, name).read_bytes()
    return files


# ----------------------------------------------------------------------------- the driver


@attrs.define
class _Share:
    """The tasks one worker runs, and what the driver has heard of them."""

    tasks: list[BatchTask]
    attempt: int = 1
    started: set[str] = attrs.field(factory=set)
    done: set[str] = attrs.field(factory=set)

    def unfinished(self) -> list[BatchTask]:
        return [task for task in self.tasks if task.id not in self.done]


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
        workers: int | None = None,
        gather_traces: bool = False,
    ) -> None:
        """Run ``tasks`` on ``workers`` actors, ``emit``-ting each result as it arrives."""
        if not tasks:
            return
        paths = cfg.AgentPaths(settings.root, settings.project_id, settings.agent_id)
        agent_files = await trio.to_thread.run_sync(_read_agent_files, settings)
        async with self._connected():
            count = workers or await self._default_workers(len(tasks), settings.concurrency)
            count = min(count, len(tasks))
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
            try:
                with collapse_single():
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._forward_interrupt, interrupt)
                        async with trio.open_nursery() as drivers:
                            for number, share in enumerate(shares):
                                drivers.start_soon(self._drive, context, share, f"w{number}")
                        nursery.cancel_scope.cancel()
            finally:
                with trio.CancelScope(shield=True):
                    await self._stop_all()

    @asynccontextmanager
    async def _connected(self) -> AsyncIterator[None]:
        """Connected to the cluster for the block: an existing one, or a local one."""
        if self._address is not None or _ray_connected():
            ray = self._ray = importlib.import_module("ray")
            if ray.is_initialized():
                yield  # the process's own connection: leave it as it is
                return
            await self._init(
                address=self._address,
                namespace=NAMESPACE,
                log_to_driver=False,
                logging_level="warning",
            )
            try:
                yield
            finally:
                with trio.CancelScope(shield=True):
                    await self._call(ray.shutdown)
            return
        temp_dir = Path(tempfile.mkdtemp(prefix="penguin-ray-"))
        if len(str(temp_dir)) > _SHORT_PATH:
            shutil.rmtree(temp_dir, ignore_errors=True)
            temp_dir = Path(tempfile.mkdtemp(prefix="penguin-ray-", dir="/tmp"))
        try:
            with _local_cluster_environment():
                ray = self._ray = importlib.import_module("ray")
                _keep_loopback(ray)
                context = await self._init(
                    address="local",
                    namespace=NAMESPACE,
                    _node_ip_address="127.0.0.1",
                    _temp_dir=str(temp_dir),
                    include_dashboard=False,
                    log_to_driver=False,
                    logging_level="warning",
                    object_store_memory=128 * 1024 * 1024,
                )
                try:
                    node_ip = context.address_info.get("node_ip_address")
                    if node_ip != "127.0.0.1":
                        raise BackendUnavailableError(
                            "ray",
                            f"the local Ray cluster bound to {node_ip}, not 127.0.0.1; not "
                            "running on it (start one with `ray start --head "
                            "--node-ip-address 127.0.0.1` and pass --ray-address)",
                        )
                    yield
                finally:
                    with trio.CancelScope(shield=True):
                        await self._call(ray.shutdown)
        finally:
            await trio.to_thread.run_sync(
                functools.partial(shutil.rmtree, temp_dir, ignore_errors=True)
            )

    async def _default_workers(self, tasks: int, concurrency: int) -> int:
        cpus = await self._call(self._cluster_cpus)
        return max(1, min(int(cpus) or 1, math.ceil(tasks / concurrency)))

    def _cluster_cpus(self) -> float:
        return float(self._ray.cluster_resources().get("CPU", 0.0))

    async def _call(self, fn: Callable[[], Any]) -> Any:
        return await trio.to_thread.run_sync(fn, limiter=self._threads)

    async def _init(self, **options: Any) -> Any:
        with _quiet_init():
            return await self._call(functools.partial(self._ray.init, **options))

    async def _drive(self, context: _RunContext, share: _Share, name: str) -> None:
        """Run one share on one new worker; on its loss, the unfinished tasks once more."""
        lost = await self._run_share(context, share, name)
        if not lost:
            return
        if context.interrupt.is_set():
            return  # interrupted: tasks lost now simply have no result (``--resume``)
        if share.attempt == 1:
            retry = _Share(lost, attempt=2)
            await self._drive(context, retry, f"{name}-retry")
            return
        for task in lost:
            await self._deliver(
                context,
                error_result(task, "its Ray worker was lost twice (killed, or its node died)"),
                traces=[],
            )

    async def _run_share(self, context: _RunContext, share: _Share, name: str) -> list[BatchTask]:
        """Drive ``share`` on a worker named ``name``; the tasks it lost (none if it ended)."""
        ray = self._ray
        full_name = f"batch-{self._run_id}-{name}"
        actor = await self._call(
            lambda: context.worker_class.options(name=full_name, **context.worker_options).remote(
                _settings_to_wire(context.settings), context.agent_files, context.gather
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
                if report["finished"]:
                    break
            await self._call(lambda: ray.get(run_ref, timeout=POLL_TIMEOUT_S))
        except lost_error:
            lost = share.unfinished()
            for task in lost:
                if task.id in share.started and context.on_lost is not None:
                    context.on_lost(task)
            with trio.CancelScope(shield=True):
                await self._kill(full_name)
            return lost
        with trio.CancelScope(shield=True):
            await self._kill(full_name)
        return []

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
        for actor in list(self._live.values()):
            with contextlib.suppress(Exception):
                await self._call(actor.interrupt.remote)

    async def _kill(self, name: str) -> None:
        actor = self._live.pop(name, None)
        if actor is not None:
            with contextlib.suppress(Exception):
                await self._call(lambda: self._ray.kill(actor, no_restart=True))

    async def _stop_all(self) -> None:
        """End every worker still live: stop its sessions, give them time, then kill it."""
        if not self._live:
            return
        ray = self._ray
        actors = dict(self._live)
        with trio.move_on_after(_STOP_GRACE_S):
            refs = []
            for actor in actors.values():
                with contextlib.suppress(Exception):
                    refs.append(await self._call(actor.stop.remote))
            # stop() returns once the cancellation is delivered; the sessions then
            # unwind and run_share returns, after which take() reports finished.
            for actor in actors.values():
                with contextlib.suppress(Exception):
                    while True:
                        report = await self._call(functools.partial(_take, ray, actor))
                        if report["finished"]:
                            break
        for name in list(actors):
            await self._kill(name)


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
            write_atomically(target, data, FILE_MODE)
        if name == remote_name:
            local = str(target)
    return local


class _OffMainThreadNotice(logging.Filter):
    """Drops Ray's notice that ``ray.init`` off the main thread sets no SIGTERM handler.

    The driver calls ``ray.init`` in a worker thread on purpose, and the signals of
    the process belong to the command line, not to Ray.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("SIGTERM handler is not set")


@contextlib.contextmanager
def _quiet_init() -> Iterator[None]:
    # Ray's own logger (the one that says it), taken from the module that logs it.
    ray_logger: logging.Logger | None = getattr(
        importlib.import_module("ray._private.worker"), "logger", None
    )
    if ray_logger is None:
        yield
        return
    notice = _OffMainThreadNotice()
    ray_logger.addFilter(notice)
    try:
        yield
    finally:
        ray_logger.removeFilter(notice)


def _ray_connected() -> bool:
    """Whether this process already has a Ray connection (then the batch uses it)."""
    ray = sys.modules.get("ray")
    return ray is not None and bool(ray.is_initialized())


@contextlib.contextmanager
def _local_cluster_environment() -> Iterator[None]:
    """The environment a local cluster starts in (and lives in): loopback, no statistics.

    Set for the cluster's whole life, restored after: the processes Ray starts
    inherit it, and this process keeps the authentication token it needs. A Ray
    imported before reads its configuration again (it reads it once, at import).
    """
    values = dict(_LOCAL_ENV)
    if not any(os.environ.get(name) for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")):
        values["RAY_AUTH_MODE"] = "token"
        values["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    saved = {name: os.environ.get(name) for name in values}
    imported = sys.modules.get("ray") is not None
    os.environ.update(values)
    if imported:
        _reread_ray_config()
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        _restore_cluster_flag()
        if sys.modules.get("ray") is not None:
            _reread_ray_config()


def _reread_ray_config() -> None:
    raylet: Any = importlib.import_module("ray._raylet")
    raylet.Config.initialize("")


def _keep_loopback(ray: Any) -> None:
    """Make this process's Ray keep a node address of 127.0.0.1.

    Ray turns 127.0.0.1 into the machine's public address unless multi-node
    clusters are off; it reads that flag at import, so it is set on the module (and
    read again from the environment when the local cluster's environment goes).
    """
    constants: Any = importlib.import_module("ray._private.ray_constants")
    constants.ENABLE_RAY_CLUSTER = False


def _restore_cluster_flag() -> None:
    constants: Any = sys.modules.get("ray._private.ray_constants")
    if constants is not None:
        constants.ENABLE_RAY_CLUSTER = constants.env_bool(
            constants.ENABLE_RAY_CLUSTERS_ENV_VAR, not constants.IS_WINDOWS_OR_OSX
        )
