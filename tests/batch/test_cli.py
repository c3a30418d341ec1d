"""B2.1, B2.3, B1.3 and B2.6 through a real ``penguin batch`` process and a local model."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pexpect
import pytest
import trio

from penguin.batch import ResultsFile
from penguin.llm import testing as t

from .scripted import (
    TaskScripts,
    configure_model,
    exec_reply,
    logged_exec,
    most_at_once,
    read_log,
    read_terminal,
    task_line,
    write_tasks,
)
from .test_results import SPEC_KEYS
from .test_runner import processes_with, wait_until

PENGUIN = (sys.executable, "-m", "penguin")


async def penguin(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        [*PENGUIN, *args],
        cwd=cwd,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )


def results_of(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
async def model(tmp_path: Path) -> AsyncIterator[tuple[TaskScripts, Path]]:
    scripts = TaskScripts()
    async with t.serve_openai_compatible(scripts) as server:
        root = tmp_path / "root"
        configure_model(root, server.base_url)
        yield scripts, root


BAD_USAGE = [
    (["--approve", "always-ask"], None, "--approve always-ask asks before tool calls"),
    (["--approve", "read-only"], None, "nobody is there to answer in a batch"),
    (["--approve", "sometimes"], None, 'Invalid approval mode "sometimes"'),
    (["--concurrency", "0"], None, "--concurrency must be more than 0"),
    (["--ray-address", "127.0.0.1:1"], None, "--ray-address needs --backend ray"),
    (["--provider", "local"], None, "give --provider and --model-id together"),
    ([], ['{"id": "a", "prompt": "x"}', "{broken"], "tasks.jsonl:2: not valid JSON"),
    (
        [],
        ['{"id": "a", "prompt": "x"}', '{"id": "a", "prompt": "y"}'],
        "tasks.jsonl:2: duplicate id 'a' (first used on line 1)",
    ),
    ([], ['{"id": "a", "prompt": "x", "template": "nope"}'], 'tasks.jsonl:1: template "'),
    ([], ['{"id": "a", "prompt": "x", "approve": "always-ask"}'], "tasks.jsonl:1: "),
    (["--provider", "other", "--model-id", "m"], None, "other"),
]


@pytest.mark.parametrize(("flags", "lines", "message"), BAD_USAGE)
async def test_b2_1_bad_usage_exits_1_before_anything_runs(
    tmp_path: Path, flags: list[str], lines: Sequence[str] | None, message: str
) -> None:
    root = tmp_path / "root"
    configure_model(root, "http://127.0.0.1:9/v1")  # never asked: nothing runs
    tasks = write_tasks(tmp_path / "tasks.jsonl", lines or [task_line("a")])
    out = tmp_path / "results.jsonl"
    done = await penguin(
        "batch", str(tasks), "-o", str(out), "--root", str(root), *flags, cwd=tmp_path
    )
    assert done.returncode == 1, done.stderr.decode()
    assert message in done.stderr.decode()
    assert not out.exists()


async def test_b2_1_no_model_and_an_existing_results_file_are_bad_usage(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line("a")])
    out = tmp_path / "results.jsonl"
    done = await penguin(
        "batch", str(tasks), "-o", str(out), "--root", str(tmp_path / "r"), cwd=tmp_path
    )
    assert done.returncode == 1
    assert "No model is configured. Add one with: penguin config model add" in done.stderr.decode()
    configure_model(tmp_path / "r", "http://127.0.0.1:9/v1")
    out.write_text('{"id": "a", "status": "completed"}\n')
    done = await penguin(
        "batch", str(tasks), "-o", str(out), "--root", str(tmp_path / "r"), cwd=tmp_path
    )
    assert done.returncode == 1
    assert "already holds results: pass --resume" in done.stderr.decode()


async def test_b2_3_without_a_terminal_each_finished_task_gets_a_line(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    scripts, root = model
    scripts.scripts = {"b": [t.ErrorReply(401, "bad key")]}
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [task_line("a", metadata={"n": 1}), task_line("b"), task_line("c")],
    )
    out = tmp_path / "results.jsonl"
    done = await penguin("batch", str(tasks), "-o", str(out), "--root", str(root), cwd=tmp_path)
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr  # every task ran, whatever its status
    assert done.stdout == b""
    lines = [line for line in stderr.splitlines() if line.startswith("[")]
    assert len(lines) == 3
    assert {re.sub(r"^\[\d/3\] ", "", line).split(" in ")[0] for line in lines} == {
        "a completed",
        "b auth",
        "c completed",
    }
    assert re.search(r"penguin batch: 3/3 tasks in \d+s: 1 auth, 2 completed; results: ", stderr)
    assert "\r" not in stderr
    results = {r["id"]: r for r in results_of(out)}
    assert {k: r["status"] for k, r in results.items()} == {
        "a": "completed",
        "b": "auth",
        "c": "completed",
    }
    assert list(results["a"]) == SPEC_KEYS
    assert results["a"]["metadata"] == {"n": 1}
    assert results["a"]["final_text"] == "done a"


async def test_b1_1_dash_reads_the_tasks_from_standard_input(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    _, root = model
    (tmp_path / "here").mkdir()
    out = tmp_path / "results.jsonl"
    piped = "".join(f"{line}\n" for line in (task_line("a"), task_line("b", workspace="here")))
    done = await trio.run_process(
        [*PENGUIN, "batch", "-", "-o", str(out), "--root", str(root)],
        cwd=tmp_path,
        stdin=piped.encode(),
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    results = {r["id"]: r for r in results_of(out)}
    assert {k: r["status"] for k, r in results.items()} == {"a": "completed", "b": "completed"}
    assert results["b"]["workspace"] == str(tmp_path / "here")  # from the working directory
    bad = await trio.run_process(
        [*PENGUIN, "batch", "-", "-o", str(tmp_path / "other.jsonl"), "--root", str(root)],
        cwd=tmp_path,
        stdin=b'{"id": "c", "prompt": "x", "template": "nope"}\n',
        capture_stderr=True,
        check=False,
    )
    assert bad.returncode == 1
    assert bad.stderr.decode() == (
        f'penguin batch: <stdin>:1: template "{tmp_path / "nope"}" does not exist\n'
    )


async def test_b1_1_dash_on_a_terminal_says_it_waits_for_the_tasks(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    _, root = model
    out = tmp_path / "results.jsonl"

    def type_them() -> tuple[str, int]:
        argv = [*PENGUIN[1:], "batch", "-", "-o", str(out), "--root", str(root)]
        child = pexpect.spawn(PENGUIN[0], argv, cwd=str(tmp_path), encoding="utf-8", timeout=60)
        try:
            child.expect_exact("reading the tasks from standard input (end with Ctrl-D)")
            child.sendline(task_line("typed"))
            child.sendeof()
            child.expect(pexpect.EOF)
            return str(child.before), child.wait()
        finally:
            child.close(force=True)

    shown, code = await trio.to_thread.run_sync(type_them)
    assert code == 0, shown
    assert "1/1 tasks in" in shown
    assert [r["id"] for r in results_of(out)] == ["typed"]


async def test_b1_1_a_task_file_that_is_not_utf_8_is_bad_usage(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(b'{"id": "a", "prompt": "na\xefve"}\n')
    done = await penguin("batch", str(tasks), "-o", "out.jsonl", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.decode() == (
        f"penguin batch: {tasks}:1: not valid UTF-8 (byte 0xef at column 26)\n"
    )
    assert not (tmp_path / "out.jsonl").exists()


async def test_b1_3_resume_runs_only_the_tasks_without_a_result(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    scripts, root = model
    out = tmp_path / "results.jsonl"
    first = write_tasks(tmp_path / "first.jsonl", [task_line("a"), task_line("b")])
    done = await penguin("batch", str(first), "-o", str(out), "--root", str(root), cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    everything = write_tasks(tmp_path / "all.jsonl", [task_line(i) for i in ("a", "b", "c", "d")])
    with out.open("ab") as torn:  # a line a crash cut short: its task has no result
        torn.write(b'{"id": "c", "stat')
    done = await penguin(
        "batch", str(everything), "-o", str(out), "--root", str(root), "--resume", cwd=tmp_path
    )
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert "2 of 4 tasks already have a result" in stderr
    assert "results.jsonl:3 holds no result; its task runs again" in stderr
    assert sorted(scripts.asked()) == ["a", "b", "c", "d"]  # each asked exactly once
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines() if line.endswith("}")]
    assert sorted(ids) == ["a", "b", "c", "d"]
    done = await penguin(
        "batch", str(everything), "-o", str(out), "--root", str(root), "--resume", cwd=tmp_path
    )
    assert done.returncode == 0
    assert "4 of 4 tasks already have a result" in done.stderr.decode()
    assert len(scripts.asked()) == 4


async def test_b1_2_results_can_go_to_a_pipe_but_resume_needs_a_file(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    _, root = model
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line("a"), task_line("b")])
    batch = ("batch", str(tasks), "-o", "/dev/stdout", "--root", str(root))
    with trio.fail_after(60):  # before: it read its own stdout back, and waited forever
        done = await penguin(*batch, cwd=tmp_path)  # stdout is a pipe here
    assert done.returncode == 0, done.stderr.decode()
    lines = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert sorted((r["id"], r["status"]) for r in lines) == [("a", "completed"), ("b", "completed")]
    with trio.fail_after(60):
        done = await penguin(*batch, "--resume", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.decode() == (
        "penguin batch: /dev/stdout is not a regular file: --resume reads the results back"
        " from the -o file, so it needs one\n"
    )
    assert done.stdout == b""


async def test_b1_3_a_second_batch_on_the_same_results_file_is_refused_at_once(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    scripts, root = model
    log = tmp_path / "times.log"
    scripts.scripts["slow"] = [logged_exec(log, "slow", "sleep 30.517")]
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line("slow"), task_line("next")])
    out = tmp_path / "results.jsonl"
    batch = ("batch", str(tasks), "-o", str(out), "--root", str(root), "--concurrency", "1")
    first = await trio.lowlevel.open_process(
        [*PENGUIN, *batch], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        await wait_until(lambda: "slow" in read_log(log), within=60)
        for again in ((), ("--resume",)):  # the same command twice, or a retry that resumes
            second = await penguin(*batch, *again, cwd=tmp_path)
            assert second.returncode == 1
            assert second.stderr.decode() == (
                f"penguin batch: {out} is being written by another batch (pid {first.pid}):"
                " wait for it to end, or choose another -o file\n"
            )
        assert scripts.asked() == ["slow"]  # the refused ones ran nothing
        first.send_signal(signal.SIGINT)
        with trio.fail_after(60):
            assert await first.wait() == 130
    finally:
        if first.returncode is None:
            first.kill()
    assert [(r["id"], r["status"]) for r in results_of(out)] == [("slow", "aborted")]
    with ResultsFile.open(out, resume=True) as after:  # the holder is gone: free again
        assert after.aborted == {"slow"}


UNDER_A_LIMIT = (
    "import resource, runpy, sys; "
    "limit = int(sys.argv.pop(1)); "
    "resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)); "
    "sys.argv[0] = 'penguin'; "
    "runpy.run_module('penguin', run_name='__main__', alter_sys=True)"
)
"""``python -c UNDER_A_LIMIT LIMIT ARGS...``: ``penguin ARGS...`` with a hard open-file limit."""


async def penguin_under_a_limit(
    limit: int, *args: str, cwd: Path
) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        [sys.executable, "-c", UNDER_A_LIMIT, str(limit), *args],
        cwd=cwd,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )


async def test_20_3_a_batch_runs_no_more_sessions_than_its_open_files_hold(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    scripts, root = model
    log = tmp_path / "times.log"
    ids = [f"f{n}" for n in range(16)]
    for task_id in ids:
        scripts.scripts[task_id] = [logged_exec(log, task_id, "sleep 0.3")]
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line(i) for i in ids])
    out = tmp_path / "results.jsonl"
    batch = ("batch", str(tasks), "-o", str(out), "--root", str(root), "--concurrency", "64")
    done = await penguin_under_a_limit(160, *batch, cwd=tmp_path)
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    said = re.match(
        r"penguin batch: running (\d+) sessions at a time, not 64: this process may open 160"
        r" files \(ulimit -n\) and a session needs up to 16; raise the limit to ([\d,]+) to"
        r" run 64 at once\n",
        stderr,
    )
    assert said is not None, stderr
    room, needed = int(said[1]), int(said[2].replace(",", ""))
    assert 1 <= room <= (160 - 64) // 16
    assert needed >= 64 * 16 + 64
    assert {str(r["id"]): r["status"] for r in results_of(out)} == dict.fromkeys(ids, "completed")
    assert most_at_once(log) <= room


async def test_20_3_with_workers_each_process_runs_what_its_open_files_hold(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    scripts, root = model
    ids = [f"w{n}" for n in range(60)]
    for task_id in ids:
        scripts.scripts[task_id] = [exec_reply("sleep 0.2")]
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line(i) for i in ids])
    out = tmp_path / "results.jsonl"
    batch = ("batch", str(tasks), "-o", str(out), "--root", str(root), "--concurrency", "64")
    done = await penguin_under_a_limit(256, *batch, "--workers", "2", cwd=tmp_path)
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert re.match(
        r"penguin batch: running \d+ sessions at a time in each of the 2 worker processes,"
        r" not 64: this process may open 256 files \(ulimit -n\)",
        stderr,
    ), stderr
    assert stderr.count("sessions at a time") == 1  # said once, not by each worker
    assert {str(r["id"]): r["status"] for r in results_of(out)} == dict.fromkeys(ids, "completed")


async def test_b2_3_ctrl_c_aborts_the_running_tasks_exits_130_and_leaves_nothing(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    scripts, root = model
    log = tmp_path / "times.log"
    ids = ["r1", "r2", "w1", "w2"]
    for task_id in ids:
        body = "(setsid sleep 300.642 > /dev/null 2>&1 &); sleep 30.642"
        scripts.scripts[task_id] = [logged_exec(log, task_id, body)]
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line(i) for i in ids])
    out = tmp_path / "results.jsonl"
    with (tmp_path / "stderr").open("wb") as err:
        process = await trio.lowlevel.open_process(
            [
                *PENGUIN,
                "batch",
                str(tasks),
                "-o",
                str(out),
                "--root",
                str(root),
                "--concurrency",
                "2",
            ],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        try:
            await wait_until(lambda: len(read_log(log)) == 2, within=60)
            await wait_until(lambda: len(processes_with("sleep 300.642")) >= 2)
            process.send_signal(signal.SIGINT)
            with trio.fail_after(60):
                code = await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
    stderr = (tmp_path / "stderr").read_text()
    assert code == 130, stderr
    assert "interrupting the running tasks" in stderr
    results = results_of(out)
    assert sorted(str(r["id"]) for r in results) == ["r1", "r2"]
    assert {r["status"] for r in results} == {"aborted"}
    assert out.read_bytes().endswith(b"\n")
    assert processes_with("sleep 30.642") == []
    assert processes_with("sleep 300.642") == []
    assert sorted(scripts.asked()) == ["r1", "r2"]


async def test_b2_3_on_a_terminal_the_progress_is_one_live_line(
    model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    _, root = model
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line(i) for i in ("a", "b", "c")])
    out = tmp_path / "results.jsonl"
    leader, follower = os.openpty()
    shown: list[str] = []
    try:
        async with trio.lowlevel.FdStream(leader) as terminal, trio.open_nursery() as nursery:

            async def drain() -> None:
                shown.append(await read_terminal(terminal))

            nursery.start_soon(drain)
            done = await trio.run_process(
                [*PENGUIN, "batch", str(tasks), "-o", str(out), "--root", str(root)],
                cwd=tmp_path,
                stdout=subprocess.DEVNULL,
                stderr=follower,
                check=False,
            )
            os.close(follower)  # the last writer gone: the reader sees the end
            follower = -1
    finally:
        if follower >= 0:
            os.close(follower)
    (shown_text,) = shown
    assert done.returncode == 0
    assert "\r\x1b[K" in shown_text
    assert re.search(r"\d/3 done, \d running, 0 failed, (--|[\d.]+) tasks/min, ETA ", shown_text)
    assert "[1/3]" not in shown_text  # no per-task lines on a terminal
    assert re.search(r"penguin batch: 3/3 tasks in \d+s: 3 completed", shown_text)
    assert len(results_of(out)) == 3


async def test_b2_6_without_ray_the_ray_backend_exits_1_with_the_install_command(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    configure_model(root, "http://127.0.0.1:9/v1")
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line("a")])
    program = (
        "import sys; sys.modules['ray'] = None\n"  # as if ray were not installed
        "from penguin.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    done = await trio.run_process(
        [
            sys.executable,
            "-c",
            program,
            "batch",
            str(tasks),
            "-o",
            str(tmp_path / "o.jsonl"),
            "--root",
            str(root),
            "--backend",
            "ray",
        ],
        cwd=tmp_path,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert done.returncode == 1
    assert "pip install 'penguin[ray]'" in done.stderr.decode()
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("workers", ["1", "2"])
async def test_b1_1_discard_workspaces_leaves_no_temporary_workspace(
    model: tuple[TaskScripts, Path], tmp_path: Path, workers: str
) -> None:
    scripts, root = model
    ids = [f"t{n}" for n in range(4)]
    scripts.scripts = {i: [exec_reply(f"echo {i} > made.txt")] for i in ids}
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line(i) for i in ids])
    out = tmp_path / "results.jsonl"
    done = await penguin(
        "batch", str(tasks), "-o", str(out), "--root", str(root), "--discard-workspaces",
        "--workers", workers, "--concurrency", "2", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    results = results_of(out)
    assert sorted(str(r["id"]) for r in results) == ids
    assert {r["status"] for r in results} == {"completed"}
    for result in results:  # the path is still given, and nothing is there
        assert "/workspaces/tmp-" in str(result["workspace"])
        assert not await trio.Path(str(result["workspace"])).exists()
    workspaces = root / "default_project" / "agents" / "default_agent" / "workspaces"
    assert not list(workspaces.glob("tmp-*"))
