"""Issue 21.4 on the command line: write failures are faults, on a real 2 MiB tmpfs.

- ``penguin run`` whose trace no longer fits ends the task, says ``trace write failed:
  No space left on device`` and exits non-zero; every line of the trace is whole;
- ``penguin batch`` whose results disk fills stops, exits 3, leaves every line whole,
  and ``--resume`` finishes once there is room again (each id once); so does one whose
  data root fills (its tasks' traces and locks), on one process and on several, with
  no task given a final result for the disk's fault; a batch task whose own trace is
  refused for another reason (a file-size limit) is a ``failed`` result carrying it;
- a read-only data root is refused at start, naming the path, by ``penguin run``,
  ``penguin chat`` and ``penguin batch``.
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from penguin.agent import Agent
from penguin.batch import BatchResult, BatchSettings, BatchTask, StorageFullError, run_tasks
from penguin.llm import testing as t
from penguin.trace import SessionLock

from ..batch.scripted import (
    TaskScripts,
    configure_model,
    prompt,
    task_line,
    text_reply,
    tool_reply,
    write_tasks,
)
from .disks import fill, remount_read_only, tmpfs

PENGUIN = (sys.executable, "-m", "penguin")


async def penguin(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(120):  # a hang is a failure, not a stuck suite
        return await trio.run_process(
            [*PENGUIN, *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


@pytest.fixture
async def server() -> AsyncIterator[tuple[TaskScripts, str]]:
    scripts = TaskScripts()
    async with t.serve_openai_compatible(scripts) as served:
        yield scripts, served.base_url


def whole_lines(path: Path) -> list[dict[str, object]]:
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), f"{path} ends mid-line"
    return [json.loads(line) for line in data.splitlines() if line.strip()]


async def test_21_4_run_whose_trace_no_longer_fits_fails_with_the_reason(
    tmp_path: Path, server: tuple[TaskScripts, str]
) -> None:
    scripts, base_url = server
    scripts.scripts["big"] = [text_reply("x" * 3_000_000)]  # more than the disk holds
    with tmpfs(tmp_path / "disk") as disk:
        root = disk / "root"
        configure_model(root, base_url)
        workspace = tmp_path / "ws"
        workspace.mkdir()
        done = await penguin(
            "run", "-m", "task big: answer", "--root", str(root), "--workspace",
            str(workspace), cwd=tmp_path,
        )  # fmt: skip
        stderr = done.stderr.decode()
        assert done.returncode == 3, stderr
        assert "penguin: failed: trace write failed: No space left on device" in stderr
        assert "Traceback" not in stderr
        traces = list(root.rglob("traces/*/*.jsonl"))
        assert traces, stderr
        for trace in traces:
            records = whole_lines(trace)  # no half-written record, whatever landed
            assert records[0]["type"] == "session_meta"


async def test_21_4_batch_whose_results_disk_fills_stops_and_resume_finishes(
    tmp_path: Path, server: tuple[TaskScripts, str]
) -> None:
    scripts, base_url = server
    ids = [f"t{n}" for n in range(12)]
    for task_id in ids:
        scripts.scripts[task_id] = [text_reply(f"done {task_id} " + "y" * 120_000)]
    root = tmp_path / "root"
    configure_model(root, base_url)
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line(i) for i in ids])
    with tmpfs(tmp_path / "disk") as disk:
        filler = fill(disk, leave=600_000)  # room for about four result lines
        out = disk / "results.jsonl"
        args = ("batch", str(tasks), "-o", str(out), "--root", str(root), "--concurrency", "2")
        done = await penguin(*args, cwd=tmp_path)
        stderr = done.stderr.decode()
        assert done.returncode == 3, stderr
        assert f"cannot write results to {out}: No space left on device" in stderr
        assert "the batch stopped" in stderr
        assert "Traceback" not in stderr
        first = whole_lines(out)
        assert 0 < len(first) < len(ids)

        filler.unlink()  # space returns
        done = await penguin(*args, "--resume", cwd=tmp_path)
        assert done.returncode == 0, done.stderr.decode()
        results = whole_lines(out)
    assert sorted(str(r["id"]) for r in results) == sorted(ids)  # each id once
    assert {r["status"] for r in results} == {"completed"}


@pytest.mark.parametrize("backend", [(), ("--workers", "2")], ids=["one-process", "workers"])
async def test_21_4_a_batch_whose_data_disk_fills_stops_and_resume_finishes(
    tmp_path: Path, server: tuple[TaskScripts, str], backend: tuple[str, ...]
) -> None:
    scripts, base_url = server
    ids = [f"t{n}" for n in range(12)]
    for task_id in ids:
        scripts.scripts[task_id] = [text_reply(f"done {task_id} " + "y" * 120_000)]
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line(i) for i in ids])
    out = tmp_path / "results.jsonl"  # the results have room; the traces do not
    # 4 MiB: once the filler goes, room for all twelve traces (143 KB each) and what the
    # first run left, with a margin; until then, room for about four.
    with tmpfs(tmp_path / "disk", size="4m") as disk:
        root = disk / "root"
        configure_model(root, base_url)
        filler = fill(disk, leave=600_000)
        args = ("batch", str(tasks), "-o", str(out), "--root", str(root), "--concurrency", "2")
        done = await penguin(*args, *backend, cwd=tmp_path)
        stderr = done.stderr.decode()
        assert done.returncode == 3, stderr
        stopped = re.search(
            rf"penguin batch: cannot write to {re.escape(str(root))}/\S+: No space left on "
            r"device; the batch stopped\. Tasks without a result: (\d+) \(--resume runs them "
            r"once there is room again\)",
            stderr,
        )
        assert stopped is not None, stderr
        assert "Traceback" not in stderr
        first = whole_lines(out)
        assert len(first) < len(ids)
        assert int(stopped[1]) == len(ids) - len(first)
        # No task got a final result for the disk's fault: --resume runs them all.
        assert {r["status"] for r in first} <= {"completed"}, first

        filler.unlink()  # space returns
        done = await penguin(*args, *backend, "--resume", cwd=tmp_path)
        assert done.returncode == 0, done.stderr.decode()
        results = whole_lines(out)
        for trace in root.rglob("traces/*/*.jsonl"):
            assert whole_lines(trace)[0]["type"] == "session_meta"  # whole records only
    assert sorted(str(r["id"]) for r in results) == sorted(ids)  # each id once
    assert {r["status"] for r in results} == {"completed"}


async def test_21_4_a_batch_task_whose_trace_is_refused_otherwise_fails_with_the_reason(
    tmp_path: Path, server: tuple[TaskScripts, str]
) -> None:
    # A file-size limit refuses the big trace (EFBIG) and nothing else: that is the
    # task's own fault, not a full disk, so it is a failed result and the batch goes on.
    scripts, base_url = server
    big = {"description": "big", "file_path": "big.txt", "content": "x" * 3_000_000}
    scripts.scripts["big"] = [tool_reply("write_file", big)]  # a big record, a short answer
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line("big"), task_line("small")])
    out = tmp_path / "results.jsonl"
    root = tmp_path / "root"
    configure_model(root, base_url)
    limited = (
        "import os, resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (1_000_000,) * 2);"
        " os.execv(sys.executable, [sys.executable, '-m', 'penguin', *sys.argv[1:]])"
    )
    with trio.fail_after(120):
        done = await trio.run_process(
            [sys.executable, "-c", limited, "batch", str(tasks), "-o", str(out), "--root",
             str(root)],
            cwd=tmp_path, stdin=subprocess.DEVNULL, capture_stdout=True, capture_stderr=True,
            check=False,
        )  # fmt: skip
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert "Traceback" not in stderr
    results = {r["id"]: r for r in whole_lines(out)}
    assert results["big"]["status"] == "failed", results
    assert results["big"]["error"] == "trace write failed: File too large"
    assert results["small"]["status"] == "completed", results
    for trace in root.rglob("traces/*/*.jsonl"):
        assert whole_lines(trace)[0]["type"] == "session_meta"  # whole records only


@pytest.mark.parametrize("agent_opened", [True, False], ids=["agent-opened", "agent-not-opened"])
async def test_21_4_run_tasks_on_a_full_disk_raises_storage_full_alone(
    tmp_path: Path, server: tuple[TaskScripts, str], agent_opened: bool
) -> None:
    # Sixteen sessions open at once on a disk with no room: the first to find it stops
    # the batch, and the others, cancelled as their own writes fail, add nothing to it.
    # An agent never opened on that root (its files not made yet) stops it the same way.
    _, base_url = server
    ids = [f"t{n}" for n in range(16)]
    emitted: list[BatchResult] = []

    async def emit(result: BatchResult) -> None:
        emitted.append(result)

    with tmpfs(tmp_path / "disk") as disk:
        root = disk / "root"
        configure_model(root, base_url)
        if agent_opened:
            Agent.open(root)  # as penguin batch does before it runs anything
        filler = fill(disk, leave=0)
        for attempt in range(3):
            with pytest.raises(StorageFullError) as raised:
                await run_tasks(
                    [BatchTask(id=i, prompt=prompt(i)) for i in ids],
                    BatchSettings(root=root, concurrency=16),
                    emit=emit,
                    interrupt=trio.Event(),
                )
            assert str(raised.value).startswith(f"cannot write to {root}"), attempt
            assert str(raised.value).endswith(": No space left on device")
            assert raised.value.errno == errno.ENOSPC
        filler.unlink()
    assert emitted == []  # no task got a result: --resume would run every one


@pytest.mark.parametrize("command", ["run", "chat", "batch"])
async def test_21_4_a_read_only_data_root_is_refused_at_start(
    tmp_path: Path, server: tuple[TaskScripts, str], command: str
) -> None:
    scripts, base_url = server
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line("a")])
    with tmpfs(tmp_path / "disk") as disk:
        root = disk / "root"
        configure_model(root, base_url)
        remount_read_only(disk)
        extra = {
            "run": ("-m", "task a: hello"),
            "chat": (),
            "batch": (str(tasks), "-o", str(tmp_path / "r.jsonl")),
        }[command]
        done = await penguin(command, *extra, "--root", str(root), cwd=tmp_path)
    stderr = done.stderr.decode()
    assert done.returncode == 1, stderr
    assert f"penguin {command}: the data root {root} is not writable" in stderr
    assert "read-only file system" in stderr
    assert scripts.requests == []  # the model was never asked


def test_21_4_a_session_lock_the_disk_refuses_is_not_kept_and_names_its_file(
    tmp_path: Path,
) -> None:
    with tmpfs(tmp_path / "disk") as disk:
        path = disk / "traces" / "2026-01-01" / "s.lock"
        path.parent.mkdir(parents=True)
        filler = fill(disk, leave=0)
        before = set(os.listdir("/proc/self/fd"))
        with pytest.raises(OSError, match="No space left on device") as raised:
            SessionLock.acquire(path, "s")
        assert raised.value.errno == errno.ENOSPC
        assert raised.value.filename == str(path)  # a batch's stop line names it
        assert set(os.listdir("/proc/self/fd")) == before  # its descriptor is closed
        assert not path.exists()  # and its empty file is not left behind
        filler.unlink()
        with SessionLock.acquire(path, "s"):  # and the lock is free: nothing held it
            assert path.read_text().split()[0] == str(os.getpid())
