"""Issue 21.4 on the command line: write failures are faults, on a real 2 MiB tmpfs.

- ``penguin run`` whose trace no longer fits ends the task, says ``trace write failed:
  No space left on device`` and exits non-zero; every line of the trace is whole;
- ``penguin batch`` whose results disk fills stops, exits 3, leaves every line whole,
  and ``--resume`` finishes once there is room again (each id once); a batch task whose
  own trace no longer fits is a ``failed`` result carrying the reason;
- a read-only data root is refused at start, naming the path, by ``penguin run``,
  ``penguin chat`` and ``penguin batch``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from penguin.llm import testing as t

from ..batch.scripted import TaskScripts, configure_model, task_line, text_reply, write_tasks
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


async def test_21_4_a_batch_task_whose_trace_no_longer_fits_fails_with_the_reason(
    tmp_path: Path, server: tuple[TaskScripts, str]
) -> None:
    scripts, base_url = server
    scripts.scripts["big"] = [text_reply("x" * 3_000_000)]  # more than the disk holds
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line("big")])
    out = tmp_path / "results.jsonl"  # the results have room; the traces do not
    with tmpfs(tmp_path / "disk") as disk:
        root = disk / "root"
        configure_model(root, base_url)
        done = await penguin("batch", str(tasks), "-o", str(out), "--root", str(root), cwd=tmp_path)
        stderr = done.stderr.decode()
        assert "Traceback" not in stderr
        (result,) = whole_lines(out)
        assert result["status"] == "failed", result
        assert result["error"] == "trace write failed: No space left on device"
        for trace in root.rglob("traces/*/*.jsonl"):
            assert whole_lines(trace)[0]["type"] == "session_meta"  # whole records only


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
