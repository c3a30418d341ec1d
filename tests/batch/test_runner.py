"""B2.2 and B3.1: the local runner and the Python API, on a real local model server.

Every task is a real Session: real processes for its commands, real files in its
workspace, a real trace. The model is scripted per task (tests/batch/scripted.py).
"""

from __future__ import annotations

import errno
import json
import pickle
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import psutil
import pytest
import trio
import trio.testing

from penguin import batch
from penguin.batch import BatchResult, BatchTask, run_batch
from penguin.batch._errors import BatchStop, stop_from_wire, stop_to_wire
from penguin.batch._runner import run_until_stopped, storage_full, workers_to_start
from penguin.llm import testing as t
from penguin.trace import TraceWriteError, read_trace

from .scripted import (
    TaskScripts,
    configure_model,
    exec_reply,
    logged_exec,
    most_at_once,
    prompt,
    read_log,
    text_reply,
)


@pytest.fixture
async def model(tmp_path: Path) -> AsyncIterator[tuple[TaskScripts, Path]]:
    scripts = TaskScripts()
    async with t.serve_openai_compatible(scripts) as server:
        root = tmp_path / "root"
        configure_model(root, server.base_url)
        yield scripts, root


def task(task_id: str, **fields: Any) -> BatchTask:
    return BatchTask(id=task_id, prompt=prompt(task_id), **fields)


async def run_all(tasks: Sequence[BatchTask], root: Path, **options: Any) -> list[BatchResult]:
    async with run_batch(tasks, root=root, **options) as stream:
        return [result async for result in stream]


def processes_with(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter():
        try:
            if marker in " ".join(process.cmdline()):
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


async def wait_until(condition: Callable[[], bool], within: float = 30.0) -> None:
    with trio.fail_after(within):
        while not condition():  # noqa: ASYNC110 - the condition is a file or a process
            await trio.sleep(0.02)


# ---------------------------------------------------------------------- stopping (sans model)


async def test_b2_2_a_task_over_its_timeout_is_interrupted_then_stopped_hard(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    seen: list[float] = []

    async def deaf(task_interrupt: trio.Event) -> None:  # ignores its interrupt
        await task_interrupt.wait()
        seen.append(trio.current_time())
        await trio.sleep_forever()

    start = trio.current_time()
    stop = await run_until_stopped(deaf, interrupt=trio.Event(), timeout_s=5.0)
    assert stop == batch._runner.TaskStop(cause="timeout", hard=True)
    assert seen == [start + 5.0]
    assert trio.current_time() == start + 5.0 + batch.HARD_STOP_GRACE_S


async def test_b2_2_an_interrupted_task_that_listens_ends_without_a_hard_stop(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    interrupt = trio.Event()

    async def listens(task_interrupt: trio.Event) -> None:
        await task_interrupt.wait()
        await trio.sleep(1.0)  # a graceful close-out

    async with trio.open_nursery() as nursery:
        stops: list[batch._runner.TaskStop] = []

        async def run() -> None:
            stops.append(await run_until_stopped(listens, interrupt=interrupt, timeout_s=None))

        nursery.start_soon(run)
        await trio.sleep(2.0)
        interrupt.set()
    assert stops == [batch._runner.TaskStop(cause="aborted", hard=False)]

    async def quick(task_interrupt: trio.Event) -> None:
        await trio.sleep(1.0)

    assert await run_until_stopped(quick, interrupt=trio.Event(), timeout_s=5.0) == (
        batch._runner.TaskStop()
    )


# ---------------------------------------------------------------------- the Python API


async def test_b3_1_results_stream_in_completion_order_with_the_spec_fields(
    model: tuple[TaskScripts, Path],
) -> None:
    scripts, root = model
    scripts.scripts = {
        "slow": [exec_reply("sleep 1; echo slept"), text_reply("slept well")],
    }
    tasks = [task("slow", metadata={"split": "dev"}), task("fast")]
    results = await run_all(tasks, root, concurrency=2)
    assert [r.id for r in results] == ["fast", "slow"]
    fast, slow = results
    assert fast.status == "completed"
    assert (fast.turns, fast.tool_calls, fast.final_text) == (1, 0, "done fast")
    assert fast.tokens == batch.TokenTotals(input=50, output=10, cached=0)
    assert fast.metadata == {}
    assert slow.status == "completed"
    assert (slow.turns, slow.tool_calls, slow.final_text) == (2, 1, "slept well")
    assert slow.tokens == batch.TokenTotals(input=150, output=30, cached=0)
    assert slow.metadata == {"split": "dev"}
    assert slow.wall_s >= 1.0
    assert slow.error is None
    for result in results:
        assert result.session_id is not None
        assert result.session_id.startswith("session-")
        assert result.workspace is not None
        assert (
            Path(result.workspace).parent
            == root / "default_project/agents/default_agent/workspaces"
        )
        records = read_trace(Path(str(result.trace_path)))
        assert records[0].type == "session_meta"
        assert records[0].payload.session_id == result.session_id  # type: ignore[union-attr]
    assert fast.workspace != slow.workspace


async def test_b1_1_per_task_workspaces_never_share_files(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    scripts, root = model
    template = tmp_path / "template"
    (template / "src").mkdir(parents=True)
    (template / "src" / "seed.txt").write_text("seed\n")
    given = tmp_path / "given"
    given.mkdir()
    for task_id in ("a", "b", "given", "fresh"):
        scripts.scripts[task_id] = [
            exec_reply(f"echo {task_id} > mine.txt; ls -A > ../{task_id}.ls || true")
        ]
    tasks = [
        task("a", template=template),
        task("b", template=template),
        task("given", workspace=given),
        task("fresh"),
    ]
    results = {r.id: r for r in await run_all(tasks, root, concurrency=4)}
    assert {r.status for r in results.values()} == {"completed"}
    spaces = {task_id: Path(str(r.workspace)) for task_id, r in results.items()}
    assert len(set(spaces.values())) == 4
    for task_id in ("a", "b"):
        assert (spaces[task_id] / "src" / "seed.txt").read_text() == "seed\n"
        assert (spaces[task_id] / "mine.txt").read_text() == f"{task_id}\n"
        assert spaces[task_id] != template
    assert sorted(p.name for p in template.rglob("*")) == ["seed.txt", "src"]  # untouched
    assert spaces["given"] == given
    assert (given / "mine.txt").read_text() == "given\n"
    assert sorted(p.name for p in spaces["fresh"].iterdir()) == ["mine.txt"]


async def test_b2_2_concurrency_never_goes_above_n(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    scripts, root = model
    log = tmp_path / "times.log"
    ids = [f"t{n}" for n in range(8)]
    for task_id in ids:
        scripts.scripts[task_id] = [logged_exec(log, task_id, "sleep 0.4")]
    results = await run_all([task(i) for i in ids], root, concurrency=3)
    assert sorted(r.id for r in results) == ids
    assert {r.status for r in results} == {"completed"}
    assert sorted(read_log(log)) == ids
    peak = most_at_once(log)
    assert 2 <= peak <= 3, peak


async def test_b2_2_a_task_over_its_timeout_says_timeout_and_leaves_no_process(
    model: tuple[TaskScripts, Path],
) -> None:
    scripts, root = model
    scripts.scripts = {"hang": [exec_reply("sleep 60.731")]}
    results = {
        r.id: r for r in await run_all([task("hang", timeout_s=1), task("ok")], root, timeout_s=30)
    }
    hang = results["hang"]
    assert hang.status == "timeout"
    assert hang.error == "timed out after 1 s"
    assert 1.0 <= hang.wall_s < 1.0 + batch.HARD_STOP_GRACE_S
    assert results["ok"].status == "completed"
    assert processes_with("sleep 60.731") == []
    records = read_trace(Path(str(hang.trace_path)))
    outputs = [r.payload for r in records if getattr(r.payload, "type", "") == "tool_call_output"]
    assert "[interrupted: tool aborted by user]" in outputs[0].output  # type: ignore[union-attr]


async def test_b2_2_a_forked_daemon_dies_with_its_task(model: tuple[TaskScripts, Path]) -> None:
    scripts, root = model
    scripts.scripts = {
        "daemon": [exec_reply("(setsid sleep 300.417 > /dev/null 2>&1 &); echo forked")]
    }
    (result,) = await run_all([task("daemon")], root)
    assert result.status == "completed"
    assert processes_with("sleep 300.417") == []


async def test_b1_2_each_task_ends_with_its_own_status_and_the_batch_goes_on(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    scripts, root = model
    scripts.scripts = {
        "auth": [t.ErrorReply(401, "bad key")],
        "turns": [exec_reply("echo one"), exec_reply("echo two")],
    }
    tasks = [
        task("auth"),
        task("turns", max_turns=1),
        task("no-template", template=tmp_path / "missing"),
        task("no-workspace", workspace=tmp_path / "nowhere"),
        task("no-model", provider="nope", model_id="none"),
        task("fine"),
    ]
    results = {r.id: r for r in await run_all(tasks, root)}
    assert results["auth"].status == "auth"
    assert results["turns"].status == "max_turns"
    assert results["turns"].turns == 1
    assert results["no-template"].status == "error"
    assert results["no-template"].error == f'template "{tmp_path / "missing"}" does not exist'
    assert results["no-template"].session_id is None
    assert results["no-workspace"].status == "error"
    assert "does not exist" in str(results["no-workspace"].error)
    assert results["no-model"].status == "error"
    assert "nope" in str(results["no-model"].error)
    assert results["fine"].status == "completed"


async def test_b2_1_deny_all_denies_and_the_command_policy_still_forbids(
    model: tuple[TaskScripts, Path],
) -> None:
    scripts, root = model
    scripts.scripts = {
        "denied": [exec_reply("touch made.txt")],
        "forbidden": [exec_reply("rm -rf /")],
    }
    tasks = [task("denied", approve="deny-all"), task("forbidden")]
    results = {r.id: r for r in await run_all(tasks, root)}
    assert {r.status for r in results.values()} == {"completed"}
    assert not (Path(str(results["denied"].workspace)) / "made.txt").exists()

    def decisions(result: BatchResult) -> list[tuple[str, str | None]]:
        records = read_trace(Path(str(result.trace_path)))
        return [
            (r.payload.decision, r.payload.policy_rule)  # type: ignore[union-attr]
            for r in records
            if getattr(r.payload, "type", "") == "approval_decision"
        ]

    assert decisions(results["denied"]) == [("deny", None)]
    assert decisions(results["forbidden"]) == [("forbidden", "rm-recursive-force")]


async def test_b3_1_the_asking_modes_and_bad_options_are_refused(tmp_path: Path) -> None:
    for options in ({"approve": "always-ask"}, {"approve": "read-only"}):
        with pytest.raises(batch.BatchOptionError, match="nobody is there to answer"):
            await run_all([task("a")], tmp_path, **options)
    with pytest.raises(batch.BatchOptionError, match="at least 1"):
        await run_all([task("a")], tmp_path, concurrency=0)
    with pytest.raises(batch.TaskFileError, match="duplicate id"):
        await run_all([task("a"), task("a")], tmp_path)


async def test_b3_1_an_interrupt_aborts_what_runs_and_starts_nothing_more(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    scripts, root = model
    log = tmp_path / "times.log"
    ids = ["r1", "r2", "w1", "w2"]
    for task_id in ids:
        scripts.scripts[task_id] = [logged_exec(log, task_id, "sleep 30.562")]
    interrupt = trio.Event()
    progress = batch.BatchProgress(total=4)
    results: list[BatchResult] = []
    async with trio.open_nursery() as nursery:

        async def consume() -> None:
            async with run_batch(
                [task(i) for i in ids],
                root=root,
                concurrency=2,
                interrupt=interrupt,
                progress=progress,
            ) as stream:
                async for result in stream:
                    results.append(result)

        nursery.start_soon(consume)
        await wait_until(lambda: len(read_log(log)) == 2)
        assert progress.running == 2
        interrupt.set()
    assert sorted(r.id for r in results) == ["r1", "r2"]
    assert {r.status for r in results} == {"aborted"}
    assert {r.error for r in results} == {"interrupted"}
    assert sorted(scripts.asked()) == ["r1", "r2"]  # two ran at once: either asks first
    assert processes_with("sleep 30.562") == []
    assert (progress.done, progress.running) == (2, 0)


async def test_b3_1_leaving_the_block_early_stops_what_still_runs(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    scripts, root = model
    log = tmp_path / "times.log"
    scripts.scripts = {
        "first": [
            exec_reply(
                f"while [ $(wc -l < {log} 2>/dev/null || echo 0) -lt 2 ]; do sleep 0.05; done"
            )
        ],
        "s1": [logged_exec(log, "s1", "sleep 30.883")],
        "s2": [logged_exec(log, "s2", "sleep 30.883")],
    }
    tasks = [task("s1"), task("s2"), task("first")]
    async with run_batch(tasks, root=root, concurrency=3) as stream:
        async for result in stream:
            assert result.id == "first"
            sleeping = [p for p in processes_with("sleep 30.883") if p.name() == "sleep"]
            assert len(sleeping) == 2
            break
    assert processes_with("sleep 30.883") == []
    for task_id in ("s1", "s2"):
        assert [what for what, _ in read_log(log)[task_id]] == ["start"]


def test_b3_1_the_package_is_reachable_from_penguin() -> None:
    import penguin

    assert penguin.batch.run_batch is run_batch
    assert json.loads(BatchResult(id="x", status="error").line())["status"] == "error"
    assert {"load_tasks", "BatchTask", "BatchResult", "run_batch"} <= set(batch.__all__)


def test_21_4_a_full_disk_is_told_from_other_write_failures() -> None:
    where = Path("/data")
    named = OSError(errno.ENOSPC, "No space left on device", "/data/x.lock")
    full = storage_full(named, where)
    assert full is not None
    assert str(full) == "cannot write to /data/x.lock: No space left on device"
    assert full.errno == errno.ENOSPC
    unnamed = storage_full(OSError(errno.EDQUOT, "Disk quota exceeded"), where)
    assert unnamed is not None
    assert str(unnamed) == "cannot write to /data: Disk quota exceeded"
    trace = TraceWriteError("/data/t.jsonl", "No space left on device", errno.ENOSPC)
    assert str(storage_full(trace, where)) == (
        "cannot write to /data/t.jsonl: No space left on device"
    )
    outer = RuntimeError("opening the session failed")
    outer.__cause__ = named  # found behind what it caused, too
    assert str(storage_full(outer, where)) == str(full)
    later = RuntimeError("closing")
    later.__context__ = outer
    assert str(storage_full(later, where)) == str(full)
    assert storage_full(full, where) is full
    assert storage_full(OSError(errno.EFBIG, "File too large", "/data/t"), where) is None
    assert storage_full(OSError(errno.EMFILE, "Too many open files"), where) is None
    assert storage_full(ValueError("no"), where) is None


async def test_20_a_model_server_gone_mid_batch_stops_it_with_model_unreachable(
    tmp_path: Path,
) -> None:
    scripts = TaskScripts()
    root = tmp_path / "root"
    stop, closed = trio.Event(), trio.Event()

    async def serve(*, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        async with t.serve_openai_compatible(scripts) as server:
            task_status.started(server.base_url)
            await stop.wait()
        closed.set()  # the listener and every connection are closed

    got: list[BatchResult] = []
    async with trio.open_nursery() as nursery:
        configure_model(root, await nursery.start(serve))

        async def consume() -> None:
            async with run_batch([task(f"t{n}") for n in range(6)], root=root, concurrency=1) as s:
                async for result in s:
                    got.append(result)
                    if len(got) == 2:
                        stop.set()
                        await closed.wait()

        with pytest.raises(batch.ModelUnreachableError) as raised:
            await consume()
    assert [(r.id, r.status) for r in got] == [("t0", "completed"), ("t1", "completed")]
    assert str(raised.value).startswith("the model cannot be reached: cannot connect to http")
    assert str(raised.value).endswith("(Connection refused)")


def test_20_2_no_more_workers_start_than_the_tasks_fill(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert workers_to_start(2, 40, 16, "worker process") == 2  # 40 tasks fill 3
    assert caplog.text == ""
    assert workers_to_start(64, 40, 16, "worker process") == 3
    assert workers_to_start(8, 5, 4, "Ray worker") == 2
    assert workers_to_start(4, 1, 16, "Ray worker") == 1
    assert [r.getMessage() for r in caplog.records] == [
        "penguin batch: starting 3 worker processes, not 64: 40 tasks at 16 at a time fill them",
        "penguin batch: starting 2 Ray workers, not 8: 5 tasks at 4 at a time fill them",
        "penguin batch: starting 1 Ray worker, not 4: 1 task at 16 at a time fill it",
    ]


def test_20_every_batch_stop_crosses_from_a_worker_to_the_driver_as_itself() -> None:
    stops: list[BatchStop] = [
        batch.StorageFullError("/data/t.jsonl", "No space left on device", errno.ENOSPC),
        batch.ModelUnreachableError("cannot connect to http://127.0.0.1:9/v1 (Connection refused)"),
        batch.ModelRateLimitedError("rate limited (429): Rate limit reached for requests"),
    ]
    for stop in stops:
        over_a_pipe = stop_from_wire(json.loads(json.dumps(stop_to_wire(stop))))
        through_ray = pickle.loads(pickle.dumps(stop))
        for back in (over_a_pipe, through_ray):
            assert type(back) is type(stop)
            assert str(back) == str(stop)
    assert str(stops[2]) == (
        "the model kept refusing for its rate limit: rate limited (429): Rate limit reached"
        " for requests"
    )


@pytest.mark.parametrize("workers", [None, 2], ids=["one-process", "workers"])
async def test_20_results_finished_before_a_stop_are_still_given_and_counted_once(
    model: tuple[TaskScripts, Path], workers: int | None
) -> None:
    # The consumer is slow: results wait in the stream when t5's limit stops the batch.
    # They used to be dropped there after the progress had counted them (the command
    # said "19 completed" beside "Tasks without a result: 182" of 200, with 18 written).
    scripts, root = model
    limited = t.ErrorReply(429, "slow down", headers=(("retry-after", "0"),))
    scripts.scripts["t5"] = [limited]
    progress = batch.BatchProgress(total=8)
    got: list[BatchResult] = []

    def t5_gave_up() -> bool:
        return [task_id for task_id, _, _ in scripts.requests].count("t5") == 6

    async def consume() -> None:
        tasks = [task(f"t{n}") for n in range(8)]
        options: dict[str, Any] = {"concurrency": 4, "workers": workers, "progress": progress}
        async with run_batch(tasks, root=root, **options) as stream:
            async for result in stream:
                if not got:
                    await wait_until(t5_gave_up)
                got.append(result)

    with pytest.raises(batch.ModelRateLimitedError):
        await consume()
    assert "t5" not in [r.id for r in got]
    assert len(got) == progress.done == progress.statuses["completed"]
    assert len(got) > 1  # what finished while the consumer waited came through


async def test_b1_1_discard_workspaces_removes_the_temporary_ones_as_their_tasks_end(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    scripts, root = model
    template = tmp_path / "template"
    template.mkdir()
    (template / "seed.txt").write_text("seed\n")
    given = tmp_path / "given"
    given.mkdir()
    for task_id in ("copy", "given", "fresh"):
        scripts.scripts[task_id] = [exec_reply(f"mkdir -p deep/er; echo {task_id} > deep/er/f")]
    scripts.scripts["hang"] = [exec_reply("echo started > f; sleep 60.913")]
    tasks = [
        task("copy", template=template),
        task("given", workspace=given),
        task("fresh"),
        task("hang", timeout_s=1),
    ]
    seen: dict[str, bool] = {}
    async with run_batch(tasks, root=root, concurrency=4, discard_workspaces=True) as stream:
        async for result in stream:  # each is gone before its result is given
            seen[result.id] = await trio.Path(str(result.workspace)).exists()
            assert await trio.Path(str(result.trace_path)).is_file()  # not in the workspace
    assert seen == {"copy": False, "given": True, "fresh": False, "hang": False}
    assert (given / "deep" / "er" / "f").read_text() == "given\n"  # never a given one
    assert (template / "seed.txt").read_text() == "seed\n"
    assert processes_with("sleep 60.913") == []
    workspaces = root / "default_project" / "agents" / "default_agent" / "workspaces"
    assert not [p.name for p in workspaces.glob("tmp-*")]
