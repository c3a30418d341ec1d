"""``penguin run`` and ``penguin demo`` end to end: real processes, a real local model server."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest
import trio

from penguin import config as cfg
from penguin import protocol as om
from penguin.cli._signals import Controls
from penguin.llm import testing as t
from penguin.trace import read_trace


async def penguin(
    *args: str, cwd: Path, stdin: bytes = b"", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        [sys.executable, "-m", "penguin", *args],
        cwd=cwd,
        stdin=stdin,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=env,
    )


def configure_model(root: Path, base_url: str, api_key: str = "sk-test") -> None:
    paths = cfg.AgentPaths(root)
    entry = cfg.ModelEntry(
        provider="local", model_id="scripted-model", base_url=base_url, api_key=api_key
    )
    project = cfg.add_model(cfg.load_project_config(paths.project_config), entry, set_default=True)
    cfg.save_project_config(paths.project_config, project)


def tool_call_reply(call_id: str, name: str, arguments: dict[str, object]) -> t.Reply:
    encoded = json.dumps(arguments)
    return t.sse_reply(
        [
            t.content_chunk("Creating it.\n"),
            t.tool_call_chunk(0, id=call_id, name=name, arguments=encoded[:10]),
            t.tool_call_chunk(0, arguments=encoded[10:]),
            t.finish_chunk("tool_calls"),
            t.usage_chunk(prompt_tokens=100, completion_tokens=20),
        ]
    )


async def test_run_with_always_ask_approves_on_stdin_and_writes_the_trace(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    await trio.Path(workspace).mkdir()
    replies = iter(
        [
            tool_call_reply(
                "call_a",
                "write_file",
                {"description": "Create notes", "file_path": "notes.txt", "content": "hi\n"},
            ),
            t.sse_reply([t.content_chunk("All done."), t.finish_chunk()]),
        ]
    )

    def handler(request: t.ReceivedRequest) -> t.Reply:
        return next(replies)

    async with t.serve_openai_compatible(handler) as server:
        configure_model(tmp_path / "root", server.base_url)
        done = await penguin(
            "run",
            "-m",
            "Create notes.txt",
            "--workspace",
            str(workspace),
            "--approve",
            "always-ask",
            "--root",
            str(tmp_path / "root"),
            cwd=tmp_path,
            stdin=b"y\n",
        )
        bodies = [request.json() for request in server.requests]
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "● write_file: Create notes (notes.txt)" in out
    assert "? Approve this tool call? [Y/n] " in out
    assert "✓ [approved]" in out
    assert '⎿ completed: Created "notes.txt" (1 line, 3 bytes).' in out
    assert out.rstrip().endswith("All done.")
    assert await trio.Path(workspace / "notes.txt").read_text() == "hi\n"
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"
    second = bodies[1]["messages"]
    assert second[-1]["role"] == "tool"
    assert second[-1]["tool_call_id"] == "call_a"
    trace_line = [line for line in done.stderr.decode().splitlines() if line.startswith("trace: ")]
    records = read_trace(Path(trace_line[0].removeprefix("trace: ")))
    types = [getattr(r.payload, "type", r.type) for r in records]
    assert records[0].type == "session_meta"
    assert "approval_decision" in types
    assert types.index("approval_decision") < types.index("tool_call_output")


async def test_run_denies_on_end_of_input_and_still_completes(tmp_path: Path) -> None:
    replies = iter(
        [
            tool_call_reply("call_b", "exec_command", {"description": "List", "cmd": "ls"}),
            t.sse_reply([t.content_chunk("Understood."), t.finish_chunk()]),
        ]
    )
    async with t.serve_openai_compatible(lambda request: next(replies)) as server:
        configure_model(tmp_path / "root", server.base_url)
        done = await penguin(
            "run",
            "-m",
            "List files",
            "--approve",
            "always-ask",
            "--root",
            str(tmp_path / "root"),
            cwd=tmp_path,
            stdin=b"",
        )
        tool_message = server.requests[1].json()["messages"][-1]
    assert done.returncode == 0, done.stderr.decode()
    assert "× [denied]" in done.stdout.decode()
    assert tool_message == {
        "role": "tool",
        "tool_call_id": "call_b",
        "content": "Tool call denied by user.",
    }


async def test_c5_3_run_shows_the_whole_command_it_asks_about(tmp_path: Path) -> None:
    """The call's line is cut at its width; what follows the cut would be approved
    unseen. As in chat, the question is preceded by the whole command, wrapped."""
    cmd = "echo " + "harmless " * 30 + "&& touch gone"
    replies = iter(
        [
            tool_call_reply("call_c", "exec_command", {"description": "Greet", "cmd": cmd}),
            t.sse_reply([t.content_chunk("Understood."), t.finish_chunk()]),
        ]
    )
    async with t.serve_openai_compatible(lambda request: next(replies)) as server:
        configure_model(tmp_path / "root", server.base_url)
        done = await penguin(
            *("run", "-m", "Greet", "--approve", "always-ask"),
            *("--root", str(tmp_path / "root"), "--workspace", str(tmp_path)),
            cwd=tmp_path,
            stdin=b"n\n",
            env={**os.environ, "COLUMNS": "80"},
        )
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.decode().splitlines()
    asked = lines.index("? Approve this tool call? [Y/n] n")
    call = next(n for n, line in enumerate(lines) if line.startswith("● exec_command: Greet"))
    assert "touch gone" not in lines[call]  # cut: the line alone hides it
    shown = lines[call + 1 : asked]
    assert shown[0].startswith("  $ echo harmless")
    assert "".join(line[4:] for line in shown) == cmd
    assert all(len(line) <= 80 for line in shown)
    assert not (tmp_path / "gone").exists()


async def test_9_1_run_labels_a_policy_hit_from_its_forbidden_decision(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    await trio.Path(workspace / "scratch").mkdir(parents=True)
    command: dict[str, object] = {"description": "Clean up", "cmd": "rm -rf ./scratch"}
    replies = iter(
        [
            tool_call_reply("call_c", "exec_command", command),
            t.sse_reply([t.content_chunk("Understood."), t.finish_chunk()]),
        ]
    )
    async with t.serve_openai_compatible(lambda request: next(replies)) as server:
        configure_model(tmp_path / "root", server.base_url)
        done = await penguin(
            "run",
            "-m",
            "Clean up",
            "--workspace",
            str(workspace),
            "--approve",
            "allow-all",
            "--root",
            str(tmp_path / "root"),
            cwd=tmp_path,
        )
        tool_message = server.requests[1].json()["messages"][-1]
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "× [forbidden by policy]" in out
    assert "[denied]" not in out
    assert await trio.Path(workspace / "scratch").is_dir()
    assert tool_message["content"] == "Tool call denied by policy."
    trace_line = [line for line in done.stderr.decode().splitlines() if line.startswith("trace: ")]
    records = read_trace(Path(trace_line[0].removeprefix("trace: ")))
    decisions = [r.payload for r in records if isinstance(r.payload, om.ApprovalDecisionPayload)]
    assert [(d.decision, d.policy_rule) for d in decisions] == [("forbidden", "rm-recursive-force")]


async def test_run_exits_4_on_auth_without_retrying(tmp_path: Path) -> None:
    async with t.serve_openai_compatible(
        lambda request: t.ErrorReply(401, "invalid api key")
    ) as server:
        configure_model(tmp_path / "root", server.base_url, api_key="sk-wrong")
        done = await penguin("run", "-m", "hi", "--root", str(tmp_path / "root"), cwd=tmp_path)
        requests = len(server.requests)
    assert done.returncode == 4
    assert requests == 1
    assert b"auth" in done.stderr


async def test_run_without_a_model_says_how_to_configure_one(tmp_path: Path) -> None:
    done = await penguin("run", "-m", "hi", "--root", str(tmp_path / "root"), cwd=tmp_path)
    assert done.returncode == 1
    assert b"Traceback" not in done.stderr
    assert b"penguin config model add --provider P --model-id M" in done.stderr
    assert not list((tmp_path / "root").rglob("tmp-*"))  # no workspace made for nothing


async def test_run_says_so_when_its_workspace_cannot_be_made(tmp_path: Path) -> None:
    root = tmp_path / "root"
    configure_model(root, "http://127.0.0.1:9/v1")  # never asked: the session cannot open
    workspaces = cfg.AgentPaths(root).workspaces_dir
    workspaces.parent.mkdir(parents=True, exist_ok=True)
    workspaces.write_text("a file where the workspaces folder belongs\n")
    done = await penguin("run", "-m", "hi", "--root", str(root), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.decode().splitlines()[-1] == (
        f"penguin run: [Errno 17] File exists: '{workspaces}'"
    )
    assert b"Traceback" not in done.stderr


async def test_run_rejects_an_invalid_approval_mode(tmp_path: Path) -> None:
    done = await penguin("run", "-m", "hi", "--approve", "Sometimes", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.decode() == (
        'Invalid approval mode "Sometimes". Use allow-all, deny-all, read-only, or always-ask.\n'
    )


async def test_demo_runs_the_whole_task_and_prints_its_trace(tmp_path: Path) -> None:
    done = await penguin("demo", "--root", str(tmp_path / "root"), cwd=tmp_path)
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    for view in (
        "● write_file: Create the script (steps.py)",
        "● edit_file: Fix the typo (steps.py)",
        "● exec_command: Run the script",
        "⎿ completed: hello from step 1",
        "● input_command: Wait for the script to finish",
    ):
        assert view in out
    trace_line = [line for line in done.stderr.decode().splitlines() if line.startswith("trace: ")]
    records = read_trace(Path(trace_line[0].removeprefix("trace: ")))
    outputs = [r for r in records if getattr(r.payload, "type", "") == "tool_call_output"]
    assert len(outputs) == 4
    assert all(r.payload.stop_reason == "completed" for r in outputs)  # type: ignore[union-attr]
    assert outputs[-1].payload.output.endswith("all steps done\n")  # type: ignore[union-attr]


async def test_demo_with_always_ask_asks_for_every_call(tmp_path: Path) -> None:
    done = await penguin(
        "demo",
        "--approve",
        "always-ask",
        "--root",
        str(tmp_path / "root"),
        cwd=tmp_path,
        stdin=b"y\ny\ny\ny\n",
    )
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert out.count("? Approve this tool call? [Y/n] ") == 4
    assert out.count("✓ [approved]") == 4


async def test_ctrl_c_at_a_prompt_interrupts_the_task(tmp_path: Path) -> None:
    # Issue 18: Ctrl-C at run's question interrupts the task (exit 130), as docs/cli.md says.
    process = await trio.lowlevel.open_process(
        [
            sys.executable,
            "-m",
            "penguin",
            "demo",
            "--approve",
            "always-ask",
            "--root",
            str(tmp_path / "root"),
        ],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    assert process.stdin is not None
    seen = b""
    with trio.fail_after(60):
        while b"[Y/n] " not in seen:
            seen += await process.stdout.receive_some()
        process.send_signal(signal.SIGINT)
        async for chunk in process.stdout:
            seen += chunk
        code = await process.wait()
    out = seen.decode()
    assert code == 130
    assert "[interrupted]" in out
    assert out.count("[Y/n] ") == 1  # no later question
    assert "✓ [approved]" not in out
    assert not list((tmp_path / "root").rglob("steps.py"))  # the call never ran


async def test_18_3_run_with_nothing_listening_ends_within_6_s_saying_cannot_connect(
    tmp_path: Path,
) -> None:
    with socket.socket() as probe:  # a real port that nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"
    configure_model(tmp_path / "root", base_url)
    done = await penguin("run", "-m", "hi", "--root", str(tmp_path / "root"), cwd=tmp_path)
    ended = time.time()
    stderr = done.stderr.decode()
    assert done.returncode == 3, stderr
    # Timed from the first model request, so a slow start (a loaded machine, imports)
    # does not count: the old ladder took 61 s from there.
    trace = read_trace(stderr.split("trace: ")[1].split()[0])
    begins = [m for m in trace if isinstance(m.payload, om.RequestBeginPayload)]
    ends = [m for m in trace if isinstance(m.payload, om.RequestEndPayload)]
    first = dt.datetime.fromisoformat(begins[0].timestamp.replace("Z", "+00:00")).timestamp()
    last = dt.datetime.fromisoformat(ends[-1].timestamp.replace("Z", "+00:00")).timestamp()
    assert len(begins) == 3
    assert last - first < 5, f"retried for {last - first:.1f} s"
    assert ended - first < 6, f"ended {ended - first:.1f} s after the first request"
    said = f"cannot connect to {base_url} (Connection refused)"
    assert f"penguin: timeout: {said}" in stderr
    assert stderr.count(said) == 1  # the last line; the retries are on stdout
    assert done.stdout.decode().count(said) == 3  # two retries, then the end
    assert "ConnectError" not in stderr + done.stdout.decode()


async def test_c5_4_run_asks_again_on_an_answer_it_does_not_know(tmp_path: Path) -> None:
    done = await penguin(
        "demo",
        "--approve",
        "always-ask",
        "--root",
        str(tmp_path / "root"),
        cwd=tmp_path,
        stdin=b"no!\nnah\nn\nstop\nn\nn\nn\n",
    )
    out = done.stdout.decode()
    assert out.count("answer y or n") >= 3
    assert "✓ [approved]" not in out
    assert out.count("× [denied]") >= 1
    assert not list((tmp_path / "root").rglob("steps.py"))


async def test_c5_1_dropping_type_ahead_drops_the_lines_read_and_survives_a_gone_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``Controls.discard_typeahead``: the lines its reader took and nobody asked for are
    dropped; a standard input that is no (longer a) terminal makes ``tcflush`` raise
    ``termios.error``, which is no ``OSError``, and that must not end the question."""
    read_end, write_end = os.pipe()
    with os.fdopen(read_end) as stdin, os.fdopen(write_end, "w") as typing:
        monkeypatch.setattr(sys, "stdin", stdin)
        async with trio.open_nursery() as nursery:
            controls = Controls(nursery)
            typing.write("first\n")
            typing.flush()
            assert await controls.read_line() == "first\n"  # the reader runs from here
            typing.write("early\nearlier\n")
            typing.flush()

            def queued() -> int:  # lines the reader thread took that nobody asked for
                lines = controls._lines
                return 0 if lines is None else lines.statistics().current_buffer_used

            with trio.fail_after(10):
                while queued() < 2:  # noqa: ASYNC110 - a thread fills it, not a task
                    await trio.sleep(0.01)
            controls.discard_typeahead()
            typing.write("answer\n")
            typing.flush()
            assert await controls.read_line() == "answer\n"
            typing.close()  # end of input: the reader ends
            assert await controls.read_line() is None


async def test_c5_1_run_on_a_terminal_takes_no_type_ahead_for_an_answer(tmp_path: Path) -> None:
    """Two Enters pressed while the model thinks approved the next two calls ([Y/n]'s
    default). On a terminal they are dropped once the question is drawn, and a line in
    its first 300 ms is no answer either: only the person's "n" to each question counts."""
    child = pexpect.spawn(
        sys.executable,
        ["-m", "penguin", "demo", "--approve", "always-ask", "--root", str(tmp_path / "root")],
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=60,
        dimensions=(30, 120),
    )
    try:
        child.send("\r\r")  # before anything is asked: type-ahead

        def answer_no_to_every_question() -> None:
            while child.expect_exact(["[Y/n] ", pexpect.EOF]) == 0:
                child.send("n\r")  # too soon, the first times: asked again until taken

        await trio.to_thread.run_sync(answer_no_to_every_question)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert not list((tmp_path / "root").rglob("steps.py"))  # the write was never allowed
    (trace,) = (tmp_path / "root").rglob("session-*.jsonl")
    decisions = [
        m.payload.decision
        for m in read_trace(trace)
        if isinstance(m.payload, om.ApprovalDecisionPayload)
    ]
    assert decisions, "no question was asked"
    assert set(decisions) == {"deny"}, decisions


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["-m", ""], "the task (-m) is empty"),
        (["-m", "  "], "the task (-m) is empty"),
        (["-m", "hi", "--max-turns", "0"], "--max-turns must be at least 1, not 0"),
        (["-m", "hi", "--max-turns", "-1"], "--max-turns must be at least 1, not -1"),
    ],
)
async def test_18_run_refuses_an_empty_task_and_a_max_turns_below_one(
    tmp_path: Path, args: list[str], said: str
) -> None:
    done = await penguin("run", *args, "--root", str(tmp_path / "root"), cwd=tmp_path)
    assert done.returncode == 1
    assert said in done.stderr.decode()
    assert not (tmp_path / "root").exists()  # refused before anything was made
