"""Issue 20.2: the local backend on every core (``workers`` above 1: worker processes)."""

from __future__ import annotations

import os
import shlex
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
import trio

from penguin import batch
from penguin.batch import BatchResult, BatchTask, run_batch
from penguin.batch._processes import run_in_processes
from penguin.batch._runner import BatchSettings
from penguin.environment.sandbox import SandboxPolicy, probe
from penguin.llm import testing as t

from .scripted import TaskScripts, configure_model, exec_reply, logged_exec, prompt, read_log
from .test_runner import processes_with, wait_until


@pytest.fixture
async def model(tmp_path: Path) -> AsyncIterator[tuple[TaskScripts, Path]]:
    scripts = TaskScripts()
    async with t.serve_openai_compatible(scripts) as server:
        root = tmp_path / "root"
        configure_model(root, server.base_url)
        yield scripts, root


async def _run(ids: list[str], root: Path, workers: int) -> dict[str, BatchResult]:
    tasks = [BatchTask(id=task_id, prompt=prompt(task_id)) for task_id in ids]
    async with run_batch(tasks, root=root, concurrency=4, workers=workers) as stream:
        return {result.id: result async for result in stream}


def _one_each(
    ids: list[str], root: Path, **options: Any
) -> AbstractAsyncContextManager[AsyncIterator[BatchResult]]:
    """``ids`` on two worker processes, one session at a time in each."""
    tasks = [BatchTask(id=task_id, prompt=prompt(task_id)) for task_id in ids]
    return run_batch(tasks, root=root, concurrency=1, workers=2, **options)


async def _one_each_results(ids: list[str], root: Path) -> dict[str, BatchResult]:
    found: dict[str, BatchResult] = {}
    async with _one_each(ids, root) as stream:
        async for result in stream:
            assert result.id not in found, f"{result.id} twice"
            found[result.id] = result
    return found


async def test_20_2_local_workers_run_the_tasks_in_that_many_processes(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    scripts, root = model
    log = tmp_path / "parents.log"
    ids = [f"t{n}" for n in range(6)]
    for task_id in ids:  # each command's parent is the process running its session
        scripts.scripts[task_id] = [
            exec_reply(f'echo "{task_id} $PPID" >> {shlex.quote(str(log))}')
        ]
    results = await _run(ids, root, workers=2)
    assert sorted(results) == ids
    assert {r.status for r in results.values()} == {"completed"}
    assert {r.final_text for r in results.values()} == {f"done {i}" for i in ids}
    parents = dict(line.split() for line in log.read_text().splitlines())
    assert sorted(parents) == ids
    assert len(set(parents.values())) == 2  # two worker processes
    assert str(os.getpid()) not in parents.values()  # and not this one
    assert parents["t0"] == parents["t2"] == parents["t4"]  # every second task: one share


async def test_20_2_no_more_worker_processes_start_than_the_tasks_fill(
    model: tuple[TaskScripts, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    scripts, root = model
    log = tmp_path / "parents.log"
    ids = [f"t{n}" for n in range(5)]
    for task_id in ids:
        scripts.scripts[task_id] = [
            exec_reply(f'echo "{task_id} $PPID" >> {shlex.quote(str(log))}')
        ]
    results = await _run(ids, root, workers=6)  # four at a time in each
    assert {r.status for r in results.values()} == {"completed"}
    parents = dict(line.split() for line in log.read_text().splitlines())
    assert sorted(parents) == ids
    assert len(set(parents.values())) == 2
    assert (
        "penguin batch: starting 2 worker processes, not 6: 5 tasks at 4 at a time fill them"
        in (caplog.text)
    )


async def test_20_2_a_worker_process_that_dies_has_its_tasks_run_again_once(
    model: tuple[TaskScripts, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    scripts, root = model
    mark = shlex.quote(str(tmp_path / "killed-once"))
    # a1 kills its worker the first time only; a2, behind it in that share, never
    # started there; b1 and b2 are the other worker's, which carries on.
    once = f"if [ ! -e {mark} ]; then touch {mark}; kill -9 $PPID; fi; echo ran"
    scripts.scripts["a1"] = [exec_reply(once)]
    results = await _one_each_results(["a1", "b1", "a2", "b2"], root)
    assert {task_id: r.status for task_id, r in results.items()} == dict.fromkeys(
        ["a1", "b1", "a2", "b2"], "completed"
    )
    assert [r.getMessage() for r in caplog.records if "worker process" in r.getMessage()] == [
        "[penguin] batch worker process 1 exited with status -9; its 2 unfinished tasks run"
        " again in a new worker process"
    ]


async def test_20_2_a_task_whose_worker_dies_twice_gets_an_error(
    model: tuple[TaskScripts, Path], caplog: pytest.LogCaptureFixture
) -> None:
    scripts, root = model
    scripts.scripts["a"] = [exec_reply("kill -9 $PPID")]
    results = await _one_each_results(["a", "b"], root)
    assert results["b"].status == "completed"
    assert results["a"].status == "error"
    assert results["a"].error == "its worker process exited with status -9, twice"
    assert [r.getMessage() for r in caplog.records if "worker process" in r.getMessage()] == [
        "[penguin] batch worker process 1 exited with status -9; its unfinished task runs"
        " again in a new worker process",
        "[penguin] batch worker process 1 exited with status -9; its unfinished task ends in"
        " error (its worker died twice)",
    ]


async def test_b2_3_a_dead_worker_s_tasks_that_never_started_leave_the_running_count(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    """Only a task that had started counts as running: a dead worker's unstarted tasks,
    given an error, took one off the running count each, so the other worker's running
    task stopped being counted. (Here a1 kills its worker each time, so a1 and a2 end in
    error once the second worker died too.)"""
    scripts, root = model
    go, gate = tmp_path / "go", tmp_path / "gate"
    scripts.scripts["a1"] = [exec_reply(f"until [ -e {go} ]; do sleep 0.05; done; kill -9 $PPID")]
    scripts.scripts["b1"] = [exec_reply(f"until [ -e {gate} ]; do sleep 0.05; done")]
    ids = ["a1", "b1", "a2", "b2"]  # shares, one session at a time: a1, a2 and b1, b2
    progress = batch.BatchProgress(total=4)
    seen: dict[str, str] = {}
    async with trio.open_nursery() as nursery:

        async def consume() -> None:
            async with _one_each(ids, root, progress=progress) as stream:
                async for result in stream:
                    seen[result.id] = result.status

        nursery.start_soon(consume)
        await wait_until(lambda: progress.running == 2, within=60)  # a1 and b1
        go.touch()  # a1's worker dies now, a2 unstarted
        await wait_until(lambda: "a1" in seen and "a2" in seen, within=60)
        running = progress.running
        gate.touch()
    assert (seen["a1"], seen["a2"]) == ("error", "error")
    assert running == 1  # b1 still runs, and is still counted
    assert (progress.done, progress.running, progress.failed) == (4, 0, 2)


async def test_20_2_an_interrupt_reaches_every_worker_process(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    scripts, root = model
    log = tmp_path / "times.log"
    ids = ["r1", "r2", "w1", "w2"]  # shares: r1, w1 and r2, w2; one session each at once
    for task_id in ids:
        scripts.scripts[task_id] = [logged_exec(log, task_id, "sleep 31.562")]
    interrupt = trio.Event()
    progress = batch.BatchProgress(total=4)
    results: list[BatchResult] = []
    async with trio.open_nursery() as nursery:

        async def consume() -> None:
            async with _one_each(ids, root, interrupt=interrupt, progress=progress) as stream:
                async for result in stream:
                    results.append(result)

        nursery.start_soon(consume)
        await wait_until(lambda: len(read_log(log)) == 2 and progress.running == 2, within=60)
        interrupt.set()
    assert sorted(r.id for r in results) == ["r1", "r2"]
    assert {r.status for r in results} == {"aborted"}
    assert {r.error for r in results} == {"interrupted"}
    assert processes_with("sleep 31.562") == []
    assert (progress.done, progress.running) == (2, 0)


@pytest.mark.parametrize("workers", [1, 2])
async def test_x1_3_the_batch_s_sandbox_reaches_every_worker_process(
    model: tuple[TaskScripts, Path], tmp_path: Path, workers: int
) -> None:
    """``run_batch(sandbox=...)`` holds in a worker process as in this one.

    The processes backend once sent its workers every setting but the sandbox, so
    ``penguin batch --workers 2 --sandbox read-only --no-network`` ran its tasks under
    the project file's sandbox, or none: they wrote and reached the network.
    """
    if (reason := probe().reason) is not None:
        pytest.skip(f"sandbox unavailable here: {reason}")
    scripts, root = model
    outside = tmp_path / "outside"
    outside.mkdir()
    reached = 0
    async with trio.open_nursery() as nursery:
        (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listener.socket.getsockname()[1]

        async def count(stream: trio.SocketStream) -> None:
            nonlocal reached
            reached += 1
            await stream.aclose()

        nursery.start_soon(trio.serve_listeners, count, [listener])
        ids = ["s0", "s1"]  # with two workers, one task each
        for task_id in ids:
            target = shlex.quote(str(outside / task_id))
            scripts.scripts[task_id] = [
                exec_reply(f"echo x > {target}; (exec 3<>/dev/tcp/127.0.0.1/{port}); true")
            ]
        tasks = [BatchTask(id=task_id, prompt=prompt(task_id)) for task_id in ids]
        policy = SandboxPolicy(mode="read-only", network=False, writable_tmp=False)
        async with run_batch(
            tasks, root=root, concurrency=2, workers=workers, sandbox=policy
        ) as stream:
            results = {result.id: result async for result in stream}
        nursery.cancel_scope.cancel()
    assert {r.status for r in results.values()} == {"completed"}
    assert sorted(p.name for p in outside.iterdir()) == []
    assert reached == 0


async def test_b2_3_worker_processes_say_they_are_starting_until_a_task_starts(
    model: tuple[TaskScripts, Path],
) -> None:
    _, root = model
    seen: list[str] = []
    tasks = [BatchTask(id=f"p{n}", prompt=prompt(f"p{n}")) for n in range(3)]

    async def emit(result: BatchResult) -> None:
        seen.append(f"result {result.id}")

    await run_in_processes(
        tasks,
        BatchSettings(root=root, concurrency=2),
        workers=2,
        emit=emit,
        interrupt=trio.Event(),
        on_start=lambda task: seen.append(f"start {task.id}"),
        on_phase=seen.append,
    )
    assert seen[0] == "starting 2 worker processes"
    assert sorted(seen[1:]) == sorted(
        [f"start p{n}" for n in range(3)] + [f"result p{n}" for n in range(3)]
    )


async def test_b2_3_no_tasks_start_no_worker_processes_and_say_nothing() -> None:
    said: list[str] = []

    async def emit(result: BatchResult) -> None:
        raise AssertionError(result)

    await run_in_processes(
        [], BatchSettings(), workers=2, emit=emit, interrupt=trio.Event(), on_phase=said.append
    )
    assert said == []
