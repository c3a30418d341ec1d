"""The local backend on every core: the tasks split over worker processes of this machine.

One Trio loop drives one core. With ``workers`` above 1, :func:`run_in_processes`
splits the tasks into one share per worker (every ``workers``-th task, as the Ray
backend does) and starts one ``python -m penguin.batch._processes`` per share, each
running :func:`~._runner.run_tasks` on its share with up to ``concurrency`` sessions.
Nothing but pipes between them: the driver writes the settings and the share to the
worker's stdin as JSON lines, and the worker writes one JSON line to stdout per task
that starts (``{"started": id}``) and per result (``{"result": {...}}``).

Stopping: when the batch's interrupt is set the driver writes ``interrupt`` to every
worker (its tasks close out gracefully, waiting ones never start, as locally); when
the driver itself is cancelled it writes ``stop`` (every session is cancelled and
still ends its processes), waits up to :data:`STOP_GRACE_S`, then kills the worker.
A worker whose stdin ends (the driver died) stops the same way.

A worker that exits before it reported every task of its share — it crashed, or was
killed — has those tasks run again once, in a new worker process (as a lost Ray worker's
are); a second loss leaves them an ``error`` result saying so. Tasks with a result keep
it, and the other workers carry on. A
worker whose task met what stops a batch (a full disk, a model that cannot be reached)
says so (``{"stopped": {...}}``) and ends; the driver then stops every worker and
raises it (:data:`~._errors.BatchStop`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, final

import attrs
import trio

from penguin._concurrency import collapse_single
from penguin._log import warn

from ._errors import BATCH_STOPS, stop_from_wire, stop_to_wire
from ._results import BatchResult
from ._runner import (
    BatchSettings,
    FirstStop,
    error_result,
    run_tasks,
    settings_from_wire,
    settings_to_wire,
    within_open_files,
    workers_to_start,
)
from ._tasks import BatchTask

__all__ = ["STOP_GRACE_S", "run_in_processes"]

STOP_GRACE_S: Final = 20.0
"""How long a stopped worker gets to end its sessions before it is killed."""


async def run_in_processes(
    tasks: Sequence[BatchTask],
    settings: BatchSettings,
    *,
    workers: int,
    emit: Callable[[BatchResult], Awaitable[None]],
    interrupt: trio.Event,
    on_start: Callable[[BatchTask], None] | None = None,
    on_lost: Callable[[BatchTask], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> None:
    """Run ``tasks`` on ``workers`` processes, ``emit``-ting each result as it arrives.

    ``on_lost`` is told of each started task whose worker died before its result (it
    starts again in a new worker, or gets an ``error``). ``on_phase`` is told that the
    processes are starting (until a task starts). Raises the first
    :data:`~._errors.BatchStop` a worker reports, once every worker has stopped.
    """
    count = max(1, min(workers, len(tasks)))
    # The workers inherit this process's open-file limit: say once, here, if it is short.
    settings = await within_open_files(settings, workers=count)
    count = min(
        count, workers_to_start(workers, len(tasks), settings.concurrency, "worker process")
    )
    if on_phase is not None and tasks:
        on_phase(f"starting {count} worker process{'' if count == 1 else 'es'}")
    shares = [list(tasks[index::count]) for index in range(count)]
    stops = FirstStop()

    async def drive(share: list[BatchTask], number: int) -> None:
        try:
            await _drive(share, _Worker(number, settings, emit, interrupt, on_start, on_lost))
        except BATCH_STOPS as exc:
            stops.met(exc, nursery)  # every other worker is told to stop

    with collapse_single():
        async with trio.open_nursery() as nursery:
            for number, share in enumerate(shares, start=1):
                if share:
                    nursery.start_soon(drive, share, number)
    stops.raise_it()


@final
@attrs.frozen
class _Worker:
    """What every run of one share's worker process shares: its number, the batch's ends."""

    number: int
    settings: BatchSettings
    emit: Callable[[BatchResult], Awaitable[None]]
    interrupt: trio.Event
    on_start: Callable[[BatchTask], None] | None
    on_lost: Callable[[BatchTask], None] | None


async def _drive(share: list[BatchTask], worker: _Worker, *, attempt: int = 1) -> None:
    """Run ``share`` in a new worker process; what it leaves unfinished, once more."""
    code, started, unfinished = await _run_share(share, worker)
    if not unfinished or worker.interrupt.is_set():
        return  # interrupted: tasks that did not run have no result (``--resume``)
    for task in unfinished:
        if task.id in started and worker.on_lost is not None:
            worker.on_lost(task)
    one = len(unfinished) == 1
    tasks = "its unfinished task" if one else f"its {len(unfinished)} unfinished tasks"
    said = f"[penguin] batch worker process {worker.number} exited with status {code}; {tasks}"
    if attempt == 1:
        warn(f"{said} {'runs' if one else 'run'} again in a new worker process")
        await _drive(unfinished, worker, attempt=2)
        return
    warn(f"{said} {'ends' if one else 'end'} in error (its worker died twice)")
    for task in unfinished:
        reason = f"its worker process exited with status {code}, twice"
        await worker.emit(error_result(task, reason))


async def _run_share(
    share: list[BatchTask], worker: _Worker
) -> tuple[int, set[str], list[BatchTask]]:
    """Run ``share`` in one worker process until it exits.

    Its exit status, the tasks it started, and those it gave no result (in share order).
    """
    interrupt, on_start = worker.interrupt, worker.on_start
    by_id = {task.id: task for task in share}
    reported: set[str] = set()
    started_ids: set[str] = set()
    lines = [json.dumps(settings_to_wire(worker.settings))]
    lines += [json.dumps(task.to_json()) for task in share]
    lines.append("run")
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "penguin.batch._processes"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdin is not None
    assert process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    said: set[str] = set()

    async def say(word: str) -> None:
        if word in said:
            return
        said.add(word)
        # A worker that is gone cannot be told; its exit says what happened.
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await stdin.send_all(f"{word}\n".encode())

    try:
        await stdin.send_all(("\n".join(lines) + "\n").encode())
        async with trio.open_nursery() as nursery:

            async def forward_interrupt() -> None:
                await interrupt.wait()
                await say("interrupt")

            nursery.start_soon(forward_interrupt)
            buffer = b""
            while True:
                chunk = await stdout.receive_some(65536)
                if not chunk:
                    break
                buffer += chunk
                *complete, buffer = buffer.split(b"\n")
                for line in complete:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if "started" in event:
                        task = by_id.get(event["started"])
                        if task is not None:
                            started_ids.add(task.id)
                            if on_start is not None:
                                on_start(task)
                    elif "stopped" in event:
                        raise stop_from_wire(event["stopped"])
                    elif "result" in event:
                        result = BatchResult.from_json(event["result"])
                        if result.id in by_id and result.id not in reported:
                            reported.add(result.id)
                            await worker.emit(result)
            nursery.cancel_scope.cancel()
        code = await process.wait()
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                await say("stop")
                with trio.move_on_after(STOP_GRACE_S):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            await stdin.aclose()
            await stdout.aclose()
    return code, started_ids, [task for task in share if task.id not in reported]


# --------------------------------------------------------------------------- the worker


async def _worker_main() -> None:
    stdin = trio.lowlevel.FdStream(os.dup(0))
    out = trio.lowlevel.FdStream(os.dup(1))
    buffer = b""
    lines: list[bytes] = []
    while b"run" not in lines:
        chunk = await stdin.receive_some(65536)
        if not chunk:
            return  # the driver went away before sending the share
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        lines += [line.strip() for line in complete]
    header, *rest = lines
    share_lines = rest[: rest.index(b"run")]
    settings = settings_from_wire(json.loads(header))
    share = [BatchTask.from_json(json.loads(line)) for line in share_lines]
    interrupt = trio.Event()
    # One writer, in order: a task's "started" line always comes before its result.
    send, receive = trio.open_memory_channel[dict[str, Any]](math.inf)

    async def emit(result: BatchResult) -> None:
        await send.send({"result": result.to_json()})

    def on_start(task: BatchTask) -> None:
        send.send_nowait({"started": task.id})

    async def writer() -> None:
        async for event in receive:
            await out.send_all((json.dumps(event, ensure_ascii=False) + "\n").encode())

    work = trio.CancelScope()

    async def listen() -> None:
        pending = buffer
        while True:
            for line in pending.split(b"\n"):
                word = line.strip()
                if word == b"interrupt":
                    interrupt.set()
                elif word == b"stop":
                    interrupt.set()
                    work.cancel()
            pending = await stdin.receive_some(4096)
            if not pending:  # the driver is gone: stop, as on "stop"
                interrupt.set()
                work.cancel()
                return

    async with trio.open_nursery() as outer:
        outer.start_soon(writer)  # ends once ``send`` is closed and everything is written
        async with trio.open_nursery() as nursery:
            nursery.start_soon(listen)
            with work:
                try:
                    await run_tasks(
                        share, settings, emit=emit, interrupt=interrupt, on_start=on_start
                    )
                except BATCH_STOPS as exc:  # the driver stops the batch
                    send.send_nowait({"stopped": stop_to_wire(exc)})
            nursery.cancel_scope.cancel()
        send.close()
    with trio.CancelScope(shield=True):
        await out.aclose()


def _main() -> None:
    try:
        trio.run(_worker_main)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # a crash: the driver gives the share's other tasks an error
        warn(f"[penguin] batch worker process failed: {type(exc).__name__}: {exc}")
        sys.exit(1)


if __name__ == "__main__":
    _main()
    sys.exit(0)
