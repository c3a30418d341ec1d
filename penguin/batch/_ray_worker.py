"""The Ray backend's worker side: what runs inside each Ray actor's process.

:class:`BatchWorker` is the actor: a threaded one whose ``run_share`` calls
``trio.run`` on the local backend's :func:`~._runner.run_tasks` for its share, while
``take`` (another of the actor's threads) hands the driver what started and finished
since its last call. Before the first task the node's copies of the agent's files
(models, command policy, system config, vault) are made the driver's.

What it does not own: placing actors, retries and writing results (``_ray_driver``),
the cluster (``_ray_cluster``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, final

import trio

from penguin import config as cfg
from penguin._log import warn

from ._atomic import write_atomically
from ._errors import BATCH_STOPS, stop_to_wire
from ._ray_patches import KEEP_WORKER_CHILDREN
from ._results import BatchResult
from ._runner import BatchSettings, run_tasks, settings_from_wire
from ._tasks import BatchTask

__all__ = ["AGENT_FILES", "GATHER_S", "BatchWorker"]

AGENT_FILES: Final = ("project_config", "system_config", "vault")
"""The agent's files a worker needs (attributes of AgentPaths)."""
GATHER_S: Final = 0.1
"""How long :meth:`BatchWorker.take` keeps gathering once it has something to return.

A poll costs the driver and the actor about a millisecond of CPU each (a Ray call,
a thread hop, pickling). Answering at the first event made one poll per task start
and per task end: 1,167 polls for 1,000 tasks at 80 tasks/s on 2 cores, 1.9 s of
the driver's CPU. With the window a poll carries every event of the next 0.1 s
(165 polls, 1.1 s), and a result still reaches the driver within 0.1 s of its
task's end (B2.4: results stream back as each task ends).
"""


@final
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
        # Read by Ray as this process started; the tasks' commands do not inherit it.
        for name in KEEP_WORKER_CHILDREN:
            os.environ.pop(name, None)
        self._loop = _ShareLoop(settings_from_wire(settings), gather)
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

    def take(self, wait_s: float, gather_s: float = GATHER_S) -> dict[str, Any]:
        """What started and finished since the last call, waiting up to ``wait_s`` for any.

        ``{"started": [id...], "results": [{"result": obj, "traces": [[rel, bytes]...]}],
        "finished": bool, "failure": str | None, "stopped": {...} | None}``; ``finished``
        once ``run_share`` is done (and then this call holds everything it produced);
        ``stopped`` once a task met what stops a batch (:func:`~._errors.stop_to_wire`).
        Once there is something to return it gathers for ``gather_s`` more (see
        :data:`GATHER_S`), unless the share finishes first.
        """
        loop = self._loop
        with loop.ready:
            if (
                loop.ready.wait_for(lambda: loop.started or loop.results or loop.finished, wait_s)
                and not loop.finished
            ):
                loop.ready.wait_for(lambda: loop.finished, gather_s)
            started, loop.started = loop.started, []
            results, loop.results = loop.results, []
            return {
                "started": started,
                "results": results,
                "finished": loop.finished,
                "failure": loop.failure,
                "stopped": loop.stopped_by,
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


@final
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
        self.stopped_by: dict[str, Any] | None = None
        """What stopped the share, once a task met it (:func:`~._errors.stop_to_wire`)."""
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
            try:
                await run_tasks(
                    share, self.settings, emit=self.emit, interrupt=interrupt, on_start=self.start
                )
            except BATCH_STOPS as exc:  # the driver stops the batch
                with self.ready:
                    self.stopped_by = stop_to_wire(exc)

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
        try:
            found.append([f"{trace.parent.name}/{path.name}", path.read_bytes()])
        except OSError as exc:  # the result still comes back, without this file
            warn(f"[penguin] batch task {result.id!r}: trace {path} not gathered: {exc}")
    return found


def _write_agent_files(settings: BatchSettings, files: Mapping[str, bytes]) -> None:
    """Make this node's copies of the agent's files the driver's (0600, atomically)."""
    paths = cfg.AgentPaths(settings.root, settings.project_id, settings.agent_id)
    for name in AGENT_FILES:
        data = files.get(name)
        target: Path = getattr(paths, name)
        if data is None:
            continue
        with contextlib.suppress(OSError):
            if target.read_bytes() == data:
                continue  # the same file (the driver's own machine, or done before)
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomically(target, data, mode=0o600)
