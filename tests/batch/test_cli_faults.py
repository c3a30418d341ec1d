"""Issues 18.4 and 21.2 through a real ``penguin batch``: resume of aborted tasks, a missing
``-o`` folder, every bad task line in order, a live progress line nothing writes into, and
a batch SIGKILLed mid-run that leaves no process and resumes each id once."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from penguin import batch
from penguin import config as cfg
from penguin.batch import BatchResult
from penguin.cli._batch import ProgressDisplay, _LinesAbove
from penguin.llm import testing as t

from .scripted import (
    TaskScripts,
    configure_model,
    exec_reply,
    logged_exec,
    read_log,
    read_terminal,
    task_line,
    write_tasks,
)
from .test_cli import PENGUIN, model, penguin, results_of
from .test_runner import processes_with, wait_until

__all__ = ["model"]  # the fixture, shared with test_cli

ONE_TURN = ("--max-turns", "1", "--concurrency", "1")


async def test_18_4_resume_runs_the_aborted_again_and_says_how_many(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    scripts, root = model
    out = tmp_path / "results.jsonl"
    out.write_bytes(
        BatchResult(id="a", status="completed").line()
        + BatchResult(id="b", status="aborted").line()
    )
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line(i) for i in ("a", "b", "c")])
    done = await penguin(
        "batch", str(tasks), "-o", str(out), "--root", str(root), "--resume", cwd=tmp_path
    )
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert (
        "1 of 3 tasks already have a result in "
        f"{out}; running the other 2 (1 of them aborted last time, run again)"
    ) in stderr
    assert sorted(scripts.asked()) == ["b", "c"]
    lines = results_of(out)
    assert [r["id"] for r in lines][:2] == ["a", "b"]
    last_b = [r for r in lines if r["id"] == "b"][-1]
    assert last_b["status"] == "completed"  # the last line for an id wins


async def test_18_4_an_output_in_a_missing_folder_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    configure_model(root, "http://127.0.0.1:9/v1")
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line("a")])
    out = tmp_path / "nonexistent" / "dir" / "r.jsonl"
    done = await penguin("batch", str(tasks), "-o", str(out), "--root", str(root), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.decode() == (
        f"penguin batch: cannot write {out}: {out.parent} does not exist\n"
    )
    assert not (tmp_path / "nonexistent").exists()


async def test_18_4_every_bad_task_line_is_reported_in_line_order(tmp_path: Path) -> None:
    root = tmp_path / "root"
    configure_model(root, "http://127.0.0.1:9/v1")
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            task_line("a"),
            task_line("a"),  # a duplicate, found after the parse
            "{broken",
            task_line("b", template="nope"),  # a path, checked after everything
            json.dumps({"id": "c"}),
        ],
    )
    done = await penguin(
        "batch", str(tasks), "-o", str(tmp_path / "r.jsonl"), "--root", str(root), cwd=tmp_path
    )
    assert done.returncode == 1
    lines = done.stderr.decode().splitlines()
    assert all(line.startswith("penguin batch: ") for line in lines), lines
    assert [re.findall(r"tasks\.jsonl:(\d+): ", line) for line in lines] == [
        ["2"],
        ["3"],
        ["4"],
        ["5"],
    ]
    assert "duplicate id 'a' (first used on line 1)" in lines[0]
    assert "not valid JSON" in lines[1]
    assert 'template "' in lines[2]
    assert '"prompt" must be a non-empty string' in lines[3]


async def test_18_4_log_lines_never_land_inside_the_live_progress_line(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    scripts, root = model
    ids = ("a", "b", "c")
    for task_id in ids:  # one tool call each, then max_turns (1): the engine says so
        scripts.scripts[task_id] = [exec_reply("true"), exec_reply("true")]
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line(i) for i in ids])
    out = tmp_path / "results.jsonl"
    leader, follower = os.openpty()
    shown: list[str] = []
    try:
        async with trio.lowlevel.FdStream(leader) as terminal, trio.open_nursery() as nursery:

            async def drain() -> None:
                shown.append(await read_terminal(terminal))

            nursery.start_soon(drain)
            done = await trio.run_process(
                [*PENGUIN, "batch", str(tasks), "-o", str(out), "--root", str(root), *ONE_TURN],
                cwd=tmp_path,
                stdout=subprocess.DEVNULL,
                stderr=follower,
                check=False,
            )
            os.close(follower)
            follower = -1
    finally:
        if follower >= 0:
            os.close(follower)
    (text,) = shown
    assert done.returncode == 0, text
    notices = [m.start() for m in re.finditer(r"\[penguin\] max_turns \(1\) reached", text)]
    assert len(notices) == 3, text
    for start in notices:  # each on a line of its own: right after an erased line
        assert text[:start].endswith("\r\x1b[K"), repr(text[max(0, start - 80) : start + 40])
    assert not re.search(r"ETA [^\r\n]*\[penguin\]", text)


async def test_18_4_a_line_from_another_thread_goes_above_the_live_line() -> None:
    """Ray's driver prints from a thread of its own, and the display draws it above the
    live line: the redraw after it must not need Trio's clock, which only the loop's
    thread may read (it raised there, and the printing thread died)."""
    out = io.StringIO()
    progress = batch.BatchProgress(total=3)
    display = ProgressDisplay(progress, out, live=True)
    progress.task_started(trio.current_time())
    display.finished(batch.BatchResult(id="a", status="completed"))
    failed: list[BaseException] = []

    with display.routing_logs():  # as the command does, on Trio's thread
        stdout = _LinesAbove(display, sys.stdout)  # what it puts in sys.stdout's place

        def print_from_a_thread() -> None:
            try:
                print("(raylet) A worker died", file=stdout)
                logging.getLogger("penguin").warning("[penguin] a warning")
            except BaseException as exc:  # what the thread would die of
                failed.append(exc)

        await trio.to_thread.run_sync(print_from_a_thread)
    assert failed == []
    live = "0/3 done, 1 running, 0 failed, -- tasks/min, ETA --"
    assert out.getvalue() == (
        f"\r\x1b[K{live}"  # drawn by finished() (a result written, none counted done)
        f"\r\x1b[K(raylet) A worker died\n\r\x1b[K{live}"
        f"\r\x1b[K[penguin] a warning\n\r\x1b[K{live}"
    )


async def test_21_2_a_sigkilled_batch_leaves_nothing_and_resume_runs_each_id_once(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    scripts, root = model
    log = tmp_path / "times.log"
    ids = ["k1", "k2", "k3", "k4"]
    for task_id in ids:  # a daemon and a long command: both must die with the batch
        body = "(setsid sleep 300.813 > /dev/null 2>&1 &); sleep 30.813"
        scripts.scripts[task_id] = [logged_exec(log, task_id, body)]
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line(i) for i in ids])
    out = tmp_path / "results.jsonl"
    args = ("batch", str(tasks), "-o", str(out), "--root", str(root), "--concurrency", "2")
    process = await trio.lowlevel.open_process(
        [*PENGUIN, *args], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        await wait_until(lambda: len(read_log(log)) == 2, within=60)
        await wait_until(lambda: len(processes_with("sleep 300.813")) >= 2)
        process.send_signal(signal.SIGKILL)
        with trio.fail_after(10):
            assert await process.wait() == -signal.SIGKILL
    finally:
        if process.returncode is None:
            process.kill()
    await wait_until(lambda: not processes_with("sleep 30.813"), within=5)
    await wait_until(lambda: not processes_with("sleep 300.813"), within=5)
    assert not out.exists() or results_of(out) == []  # the killed tasks have no result

    for task_id in ids:  # the second run: quick tasks
        scripts.scripts[task_id] = []
    done = await penguin(*args, "--resume", cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    results = results_of(out)
    assert sorted(str(r["id"]) for r in results) == ids  # each id once
    assert {r["status"] for r in results} == {"completed"}


@pytest.mark.parametrize(
    "backend",
    [(), ("--workers", "2", "--concurrency", "4")],  # two processes, four tasks each
    ids=["one-process", "workers"],
)
async def test_20_a_model_that_keeps_refusing_for_its_rate_limit_stops_the_batch(
    model: tuple[TaskScripts, Path], tmp_path: Path, backend: tuple[str, ...]
) -> None:
    # Before, each such task got a final `timeout` ("rate limited (429): ..."), which
    # --resume never runs again: 58 of 200 tasks against a model limited to 20
    # requests a second, at --concurrency 64.
    scripts, root = model
    ids = [f"t{n}" for n in range(8)]
    limited = t.ErrorReply(429, "Rate limit reached for requests", headers=(("retry-after", "0"),))
    scripts.scripts["t5"] = [limited]  # every attempt of its first request
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line(i) for i in ids])
    out = tmp_path / "results.jsonl"
    args = ("batch", str(tasks), "-o", str(out), "--root", str(root), *backend)
    done = await penguin(*args, cwd=tmp_path)
    stderr = done.stderr.decode()
    assert done.returncode == 3, stderr
    stopped = re.search(
        r"penguin batch: the model kept refusing for its rate limit: rate limited \(429\): Rate"
        r" limit reached for requests; the batch stopped\. Tasks without a result: (\d+)"
        r" \(--resume runs them once the limit allows; a lower --concurrency asks less at"
        r" once\)\n$",
        stderr,
    )
    assert stopped is not None, stderr
    assert "Traceback" not in stderr
    first = results_of(out) if out.read_bytes() else []
    assert "t5" not in {str(r["id"]) for r in first}  # no final result for the limit
    assert {r["status"] for r in first} <= {"completed"}
    assert int(stopped[1]) == len(ids) - len(first)
    assert [step for task_id, step, _ in scripts.requests if task_id == "t5"] == [0] * 6

    del scripts.scripts["t5"]  # the limit allows again
    done = await penguin(*args, "--resume", cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    results = results_of(out)
    assert sorted(str(r["id"]) for r in results) == ids  # each id once
    assert {r["status"] for r in results} == {"completed"}


@pytest.mark.parametrize(
    "backend",
    [(), ("--workers", "2", "--concurrency", "4")],  # two processes, four tasks each
    ids=["one-process", "workers"],
)
async def test_20_a_model_that_cannot_be_reached_stops_the_batch_and_resume_finishes(
    model: tuple[TaskScripts, Path], tmp_path: Path, backend: tuple[str, ...]
) -> None:
    scripts, root = model
    ids = [f"t{n}" for n in range(8)]
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line(i) for i in ids])
    out = tmp_path / "results.jsonl"
    args = ("batch", str(tasks), "-o", str(out), "--root", str(root), *backend)
    live = cfg.load_project_config(cfg.AgentPaths(root).project_config)
    configure_model(root, "http://127.0.0.1:9/v1")  # nothing listens there
    done = await penguin(*args, cwd=tmp_path)
    stderr = done.stderr.decode()
    assert done.returncode == 3, stderr
    assert stderr.endswith(
        "penguin batch: the model cannot be reached: cannot connect to http://127.0.0.1:9/v1"
        " (Connection refused); the batch stopped. Tasks without a result: 8 (--resume runs"
        " them once the model can be reached again)\n"
    ), stderr
    assert "Traceback" not in stderr
    assert out.read_bytes() == b""  # no task was given a timeout for the server's fault

    cfg.save_project_config(cfg.AgentPaths(root).project_config, live)  # the model is back
    done = await penguin(*args, "--resume", cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    results = results_of(out)
    assert sorted(str(r["id"]) for r in results) == ids  # each id once
    assert {r["status"] for r in results} == {"completed"}
    assert sorted(scripts.asked()) == ids
