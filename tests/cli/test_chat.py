"""``penguin chat`` (spec chat.md C1–C4), driven in a real pseudo-terminal.

Each test starts ``python -m penguin chat`` on a pty with pexpect (:mod:`.chat_pty`),
against a scripted OpenAI-compatible model on a local port, types into it and waits
on what it prints. When a test's chat ends, nothing it started may be alive (psutil).
The sans-IO pieces — the Ctrl-C rule, the history file, the session lock — are also
tested directly.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import trio
import trio.testing

from penguin import PenguinError
from penguin.cli._chat import COMMANDS, STOP_WINDOW, TaskControl
from penguin.cli._terminal import ChatHistory
from penguin.llm import testing as t
from penguin.trace import SessionLock, SessionLockedError, read_trace

from .chat_pty import (
    CONTEXT_WINDOW,
    Body,
    ChatPty,
    Model,
    call_reply,
    chat_env,
    configure,
    open_chat,
    serve,
    text_reply,
)
from .test_startup import loaded_after, top_level

SESSION_ID = re.compile(r"session-\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d-[0-9a-f]{8}")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def root_of(tmp_path: Path) -> Path:
    return tmp_path / "root"


async def penguin_chat(
    tmp_path: Path, *args: str, stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    """``penguin chat`` with stdin and stdout not terminals (the scriptable mode)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return await trio.run_process(
        [sys.executable, "-m", "penguin", "chat", "--root", str(root_of(tmp_path)), *args],
        cwd=tmp_path,
        stdin=stdin,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=chat_env(home, "scripted"),
    )


def background(cmd: str, description: str = "Serve") -> t.Reply:
    """A call of ``cmd`` that moves to the background after a 250 ms window."""
    return call_reply(
        "exec_command", {"description": description, "cmd": cmd, "yield_time_ms": 250}
    )


def command(cmd: str, description: str = "Run it", **more: object) -> t.Reply:
    """A call of ``cmd`` that waits for it (up to a minute)."""
    return call_reply("exec_command", {"description": description, "cmd": cmd, **more})


def resume_hint(output: str) -> str:
    found = re.search(r"resume with: penguin chat --resume (" + SESSION_ID.pattern + ")", output)
    assert found is not None, output
    return found.group(1)


# ---------------------------------------------------------------------- C1 starting and leaving


async def test_c1_2_header_line(tmp_path: Path) -> None:
    workspace = tmp_path / ("workspace-" + "x" * 40)  # too long for one 120-column line
    workspace.mkdir()
    async with (
        serve(Model(), root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace)) as chat,
    ):
        # The header's parts, broken between parts when 120 columns cannot hold them
        # (issue 18: the terminal used to wrap it mid-word).
        await chat.expect("/help for commands")
        await chat.prompt()
        rows = chat.screen_lines()
        top = rows.index(next(row for row in rows if row.startswith("penguin chat")))
        end = next(i for i in range(top, len(rows)) if rows[i].endswith("/help for commands"))
        header = " ".join(row.strip() for row in rows[top : end + 1])
        assert header == (
            f"penguin chat · local/scripted-model · {workspace} · approve allow-all · "
            "sandbox workspace-write, network on · /help for commands"
        )
        assert end > top  # it did not fit: broken between parts, each row within 120
        assert all(
            len(row) < 120 and (row.endswith(" ·") or row is rows[end])
            for row in rows[top : end + 1]
        )
        await chat.line("/exit")
        assert await chat.exit_status() == 0


@pytest.mark.parametrize("ending", ["/exit", "/quit", "ctrl-d"])
async def test_c1_3_exit_quit_and_ctrl_d_end_with_the_resume_hint(
    tmp_path: Path, workspace: Path, ending: str
) -> None:
    model = Model([background("sleep 300")])
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace)) as chat,
    ):
        await chat.prompt()
        await chat.line("start something in the background")
        await chat.expect("⎿ completed:")  # the command now runs in the background
        await chat.expect("tokens ")
        await chat.prompt()
        await chat.send("\x04" if ending == "ctrl-d" else ending + "\r")
        await chat.expect("resume with: penguin chat --resume session-")
        assert await chat.exit_status() == 0
    # (open_chat checked that the background `sleep 300` is gone)


async def test_c1_1_scriptable_mode_runs_one_task_per_line(tmp_path: Path, workspace: Path) -> None:
    model = Model([text_reply("First answer."), text_reply("Second answer.")])
    async with serve(model, root_of(tmp_path)):
        done = await penguin_chat(
            tmp_path,
            "--workspace",
            str(workspace),
            stdin=b"first task\n\n/nope\nsecond task\n",
        )
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "\x1b" not in out  # not a terminal: no colour, no cursor movement
    lines = out.splitlines()
    assert lines[0].startswith("penguin chat · local/scripted-model · ")
    assert "› first task" in lines
    assert "First answer." in lines
    assert "unknown command /nope; /help lists them" in lines
    assert "Second answer." in lines
    assert len(model.bodies) == 2  # the unknown command reached no model
    assert model.user_texts(0)[-1] == "first task"
    assert model.user_texts(1)[-2:] == ["first task", "second task"]  # one session
    session_id = resume_hint(out)
    assert session_id in out.splitlines()[-1]


async def test_c1_1_scriptable_mode_reads_approval_answers_from_stdin(
    tmp_path: Path, workspace: Path
) -> None:
    model = Model(
        [
            call_reply(
                "write_file",
                {"description": "Create notes", "file_path": "notes.txt", "content": "hi\n"},
            ),
            text_reply("Written."),
        ]
    )
    async with serve(model, root_of(tmp_path)):
        done = await penguin_chat(
            tmp_path,
            "--workspace",
            str(workspace),
            "--approve",
            "always-ask",
            stdin=b"write the notes\ny\n/exit\n",
        )
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "? Approve this tool call? [Y/a/n] y\n  ✓ [approved]" in out
    assert (workspace / "notes.txt").read_text() == "hi\n"


async def test_c1_1_bad_usage_exits_1(tmp_path: Path, workspace: Path) -> None:
    done = await penguin_chat(tmp_path, "--approve", "sometimes")
    assert done.returncode == 1
    assert b"Invalid approval mode" in done.stderr
    done = await penguin_chat(tmp_path, "--workspace", str(workspace))  # no model configured
    assert done.returncode == 1
    assert b"penguin config model add" in done.stderr
    assert b"Traceback" not in done.stderr


async def test_c1_4_resume_with_an_id_shows_the_history_and_continues(
    tmp_path: Path, workspace: Path
) -> None:
    model = Model(
        [
            call_reply(
                "write_file",
                {"description": "Note it", "file_path": "word.txt", "content": "apple\n"},
            ),
            text_reply("Noted: apple.\nAnything else?"),
            text_reply("The word was apple."),
        ]
    )
    async with serve(model, root_of(tmp_path)):
        first = await penguin_chat(
            tmp_path, "--workspace", str(workspace), stdin=b"remember the word apple\n"
        )
        session_id = resume_hint(first.stdout.decode())
        async with open_chat(tmp_path, "--resume", session_id) as chat:
            await chat.expect(f"penguin chat · local/scripted-model · {workspace} ·")
            await chat.expect("› remember the word apple")
            await chat.expect("● write_file: Note it (word.txt)")
            await chat.expect("Noted: apple.")
            await chat.expect(f"[resumed session {session_id}]")
            await chat.prompt()
            await chat.line("what was the word?")
            await chat.expect("The word was apple.")
            await chat.expect("tokens ")
            await chat.prompt()
            await chat.line("/exit")
            await chat.expect(f"resume with: penguin chat --resume {session_id}")
            assert await chat.exit_status() == 0
    assert "Anything else?" not in str(chat.child.before)  # one line per answer
    assert model.user_texts(-1) == ["remember the word apple", "what was the word?"]
    traces = list(root_of(tmp_path).rglob(f"{session_id}_*.jsonl"))
    assert len(traces) == 1  # the same file goes on
    texts = [getattr(r.payload, "text", None) for r in read_trace(traces[0])]
    assert "what was the word?" in texts
    assert not list(root_of(tmp_path).rglob("*.lock"))  # released


async def test_c1_4_resume_without_an_id_takes_the_newest_session(
    tmp_path: Path, workspace: Path
) -> None:
    async with serve(Model(), root_of(tmp_path)):
        older = resume_hint(
            (
                await penguin_chat(tmp_path, "--workspace", str(workspace), stdin=b"one\n")
            ).stdout.decode()
        )
        newer = resume_hint(
            (
                await penguin_chat(tmp_path, "--workspace", str(workspace), stdin=b"two\n")
            ).stdout.decode()
        )
        assert older != newer
        async with open_chat(tmp_path, "--resume") as chat:
            await chat.expect("› two")
            await chat.expect(f"[resumed session {newer}]")
            await chat.prompt()
            await chat.send("\x04")
            await chat.expect(f"resume with: penguin chat --resume {newer}")
            assert await chat.exit_status() == 0


async def test_c1_4_resume_refuses_what_it_cannot_continue(tmp_path: Path, workspace: Path) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    async with serve(Model(), root_of(tmp_path)) as server:
        configure(root_of(tmp_path), server.base_url, "other", "second-model", default=False)
        done = await penguin_chat(tmp_path, "--resume", "session-2026-01-01-00-00-00-0000abcd")
        assert done.returncode == 1
        assert b"no session session-2026-01-01-00-00-00-0000abcd under " in done.stderr
        done = await penguin_chat(tmp_path, "--resume")
        assert done.returncode == 1
        assert b"no session to resume" in done.stderr
        made = await penguin_chat(tmp_path, "--workspace", str(workspace), stdin=b"hi\n")
        session_id = resume_hint(made.stdout.decode())
        done = await penguin_chat(tmp_path, "--resume", session_id, "--workspace", str(other))
        assert done.returncode == 1
        assert f"works in {workspace}".encode() in done.stderr
        done = await penguin_chat(
            tmp_path, "--resume", session_id, "--provider", "other", "--model-id", "second-model"
        )
        assert done.returncode == 1
        assert b"uses the model local/scripted-model" in done.stderr
        same = await penguin_chat(tmp_path, "--resume", session_id, "--workspace", str(workspace))
        assert same.returncode == 0, same.stderr.decode()
    for done in (made, same):
        assert b"Traceback" not in done.stderr


async def test_c1_4_a_second_chat_on_one_session_is_refused_naming_the_first(
    tmp_path: Path, workspace: Path
) -> None:
    async with serve(Model(), root_of(tmp_path)):
        made = await penguin_chat(tmp_path, "--workspace", str(workspace), stdin=b"hi\n")
        session_id = resume_hint(made.stdout.decode())
        async with open_chat(tmp_path, "--resume", session_id) as chat:
            await chat.expect(f"[resumed session {session_id}]")
            await chat.prompt()
            second = await penguin_chat(tmp_path, "--resume", session_id, stdin=b"x\n")
            assert second.returncode == 1
            assert (
                f"session {session_id} is open in penguin chat (pid {chat.pid})".encode()  # C5.6
                in second.stderr
            )
            await chat.line("/exit")
            assert await chat.exit_status() == 0
        again = await penguin_chat(tmp_path, "--resume", session_id, stdin=b"")
        assert again.returncode == 0, again.stderr.decode()


async def test_c1_4_a_stale_lock_and_a_torn_trace_do_not_stop_a_resume(
    tmp_path: Path, workspace: Path
) -> None:
    async with serve(Model(), root_of(tmp_path)) as server:
        made = await penguin_chat(tmp_path, "--workspace", str(workspace), stdin=b"hi\n")
        session_id = resume_hint(made.stdout.decode())
        (trace,) = root_of(tmp_path).rglob(f"{session_id}_*.jsonl")
        with trace.open("a") as file:
            file.write('{"timestamp": "2026-01-01T00:00:00.000Z", "type": "te')  # torn
        lock = trace.parent / f"{session_id}.lock"
        lock.write_text("999999\n")  # left by a chat that died: nobody holds its flock
        done = await penguin_chat(tmp_path, "--resume", session_id, stdin=b"again\n")
        assert done.returncode == 0, done.stderr.decode()
        assert b"Traceback" not in done.stderr
        assert "› hi" in done.stdout.decode()
        assert len(server.requests) == 2


# ---------------------------------------------------------------------- C2 input


async def test_c2_1_history_recalls_earlier_lines_and_is_kept_private(
    tmp_path: Path, workspace: Path
) -> None:
    model = Model()
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace)) as chat,
    ):
        await chat.prompt()
        await chat.line("the first line")
        await chat.expect("tokens ")
        await chat.prompt()
        await chat.send("\x1b[A")  # up: the last entry
        await chat.line("")
        await chat.expect("tokens ")
        await chat.prompt()
        await chat.line("/exit")
        assert await chat.exit_status() == 0
    assert [body["messages"][-1]["content"] for body in model.bodies] == ["the first line"] * 2
    history = root_of(tmp_path) / "chat_history"
    assert history.stat().st_mode & 0o777 == 0o600
    assert [json.loads(line) for line in history.read_text().splitlines()] == [
        "the first line",  # once: a line recalled and sent again is not stored twice
        "/exit",
    ]


def test_c2_1_the_history_file_keeps_the_last_1000_entries(tmp_path: Path) -> None:
    path = tmp_path / "chat_history"
    history = ChatHistory(path)
    assert list(history.load_history_strings()) == []
    for index in range(1005):
        history.store_string(f"entry {index}\nsecond line")
    assert path.stat().st_mode & 0o777 == 0o600
    lines = path.read_text().splitlines()
    assert len(lines) == 1000
    assert json.loads(lines[0]) == "entry 5\nsecond line"
    again = list(ChatHistory(path).load_history_strings())
    assert len(again) == 1000
    assert again[0] == "entry 1004\nsecond line"  # newest first
    path.write_text("\n".join(json.dumps(f"x{i}") for i in range(1200)) + "\n{torn")
    assert len(list(ChatHistory(path).load_history_strings())) == 1000
    assert len(path.read_text().splitlines()) == 1000  # cut down on load


async def test_c2_1_backslash_continues_and_a_paste_is_one_message(
    tmp_path: Path, workspace: Path
) -> None:
    model = Model()
    pasted = [f"pasted line {index}" for index in range(10_000)]
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace)) as chat,
    ):
        await chat.prompt()
        await chat.line("first part \\")
        await chat.line("second part")
        await chat.expect("tokens ")
        await chat.prompt()
        await chat.send("\x1b[200~" + "\r".join(pasted) + "\x1b[201~")
        await chat.line("")
        await chat.expect("… (+9988 lines)")
        await chat.expect("tokens ")
        await chat.prompt()
        await chat.line("/exit")
        assert await chat.exit_status() == 0
    assert model.bodies[0]["messages"][-1]["content"] == "first part \nsecond part"
    assert model.bodies[1]["messages"][-1]["content"] == "\n".join(pasted)
    assert len(model.bodies) == 2


async def test_c2_2_steering_is_queued_and_reaches_the_next_request(
    tmp_path: Path, workspace: Path
) -> None:
    model = Model([command("while [ ! -e go ]; do sleep 0.05; done; echo went", "Wait for go")])
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace)) as chat,
    ):
        await chat.prompt()
        await chat.line("wait for the file")
        await chat.expect("● exec_command: Wait for go")
        await chat.prompt()  # the input line while the task runs
        await chat.line("also check the logs")
        await chat.expect("[steering queued] also check the logs")
        (workspace / "go").touch()
        await chat.expect("[steering] also check the logs")
        await chat.expect("tokens ")
        await chat.prompt()
        await chat.line("/exit")
        assert await chat.exit_status() == 0
    last = model.bodies[-1]["messages"]
    assert last[-2]["role"] == "tool"
    assert last[-1] == {
        "role": "user",
        "content": "[user_steering]\nalso check the logs\n[/user_steering]",
    }


# ---------------------------------------------------------------------- C2.3 slash commands


async def test_c2_3_help_lists_every_command_and_unknown_ones_reach_no_model(
    tmp_path: Path, workspace: Path
) -> None:
    async with (
        serve(Model(), root_of(tmp_path)) as server,
        open_chat(tmp_path, "--workspace", str(workspace)) as chat,
    ):
        await chat.prompt()
        await chat.line("/help")
        listing = await chat.expect("end a background command")
        await chat.prompt()
        await chat.line("/frobnicate now")
        await chat.expect("unknown command /frobnicate; /help lists them")
        await chat.prompt()
        await chat.line("/exit")
        assert await chat.exit_status() == 0
        assert server.requests == []
    for name, (arguments, summary) in COMMANDS.items():
        assert f"  {name}{arguments}" in listing
        assert summary in listing or name == "/kill"


async def test_c2_3_tab_completes_a_command_name(tmp_path: Path, workspace: Path) -> None:
    async with (
        serve(Model(), root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace)) as chat,
    ):
        await chat.prompt()
        await chat.send("/proc\t")
        await chat.expect("cesses")  # completed on the line
        await chat.line("")
        await chat.expect("[no background commands]")
        await chat.prompt()
        await chat.line("/exit")
        assert await chat.exit_status() == 0


async def test_c2_3_clear_starts_a_new_session_and_the_old_one_stays_resumable(
    tmp_path: Path, workspace: Path
) -> None:
    model = Model()
    async with serve(model, root_of(tmp_path)):
        async with open_chat(tmp_path, "--workspace", str(workspace)) as chat:
            await chat.prompt()
            await chat.line("in the old session")
            await chat.expect("tokens ")
            await chat.prompt()
            await chat.line("/clear")
            cleared = await chat.expect_re(
                r"\[new session (session-\S+); the last one stays resumable: "
                r"penguin chat --resume (session-\S+)\]"
            )
            await chat.prompt()
            await chat.line("in the new session")
            await chat.expect("tokens ")
            await chat.prompt()
            await chat.line("/exit")
            await chat.expect("resume with:")
            hint = await chat.expect_re(SESSION_ID.pattern)
            assert await chat.exit_status() == 0
        found = re.search(r"new session (\S+); .* --resume (\S+)\]", cleared)
        assert found is not None
        new, old = found.groups()
        assert hint == new
        assert model.user_texts(-1) == ["in the new session"]  # a fresh context
        old_trace = read_trace(next(root_of(tmp_path).rglob(f"{old}_001.jsonl")))
        assert "in the old session" in [getattr(r.payload, "text", None) for r in old_trace]
        again = await penguin_chat(tmp_path, "--resume", old, stdin=b"")
        assert again.returncode == 0, again.stderr.decode()
        assert "› in the old session" in again.stdout.decode()


async def test_c2_3_compact_says_why_when_there_is_nothing_and_compacts_otherwise(
    tmp_path: Path, workspace: Path
) -> None:
    model = Model(
        [text_reply("Hello."), text_reply("[summary]They said hi.[/summary]"), text_reply("Ok.")]
    )
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace)) as chat,
    ):
        await chat.prompt()
        await chat.line("/compact")
        await chat.expect("[nothing to compact: the context has no model turns since it began]")
        await chat.prompt()
        await chat.line("hi")
        await chat.expect("tokens ")
        await chat.prompt()
        await chat.line("/compact")
        await chat.expect("[compacting the context (manual, summarize)…]")
        await chat.expect("[compaction completed]")
        await chat.prompt()
        await chat.line("and now?")
        await chat.expect("tokens ")
        await chat.prompt()
        await chat.line("/exit")
        assert await chat.exit_status() == 0
    assert len(model.bodies) == 3
    assert "[summary]" in model.user_texts(1)[-1]  # the compaction prompt
    after = json.dumps(model.bodies[2]["messages"][1:])  # after the system prompt
    assert "They said hi." in after
    assert "and now?" in after
    assert '"hi"' not in after  # the old context is gone


async def test_c2_3_approve_shows_and_changes_the_mode(tmp_path: Path, workspace: Path) -> None:
    model = Model([command("echo hi", "Say hi"), text_reply("Denied, fine.")])
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace)) as chat,
    ):
        await chat.prompt()
        await chat.line("/approve")
        await chat.expect("[approval mode: allow-all (one of allow-all, deny-all, read-only, ")
        await chat.prompt()
        await chat.line("/approve sometimes")
        await chat.expect('Invalid approval mode "sometimes".')
        await chat.prompt()
        await chat.line("/approve Deny-All")
        await chat.expect("[approval mode for the next calls: deny-all]")
        await chat.prompt()
        await chat.line("say hi")
        await chat.expect("× [denied]")
        await chat.expect("tokens ")
        await chat.prompt()
        await chat.line("/exit")
        assert await chat.exit_status() == 0
    assert model.bodies[1]["messages"][-1]["content"] == "Tool call denied by user."


async def test_c2_3_verbose_streams_tool_output_whole(tmp_path: Path, workspace: Path) -> None:
    model = Model(
        [
            command("printf 'one\\ntwo\\nthree\\n'", "Count"),
            text_reply("Counted."),
            command("printf 'four\\nfive\\nsix\\n'", "Count on"),
            text_reply("Counted on."),
        ]
    )
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace)) as chat,
    ):
        await chat.prompt()
        await chat.line("count")
        quiet = await chat.expect("⎿ completed: one (+2 lines)")
        await chat.expect("tokens ")
        await chat.prompt()
        await chat.line("/verbose")
        await chat.expect("[verbose on: thinking and tool output stream in full]")
        await chat.prompt()
        await chat.line("count on")
        loud = await chat.expect("⎿ completed: four (+2 lines)")
        await chat.expect("tokens ")
        await chat.prompt()
        await chat.line("/verbose")
        await chat.expect("[verbose off]")
        await chat.prompt()
        await chat.line("/exit")
        assert await chat.exit_status() == 0
    assert "three\r\n" not in quiet  # the call line shows the printf, not its output
    assert "five\r\n" in loud
    assert "six\r\n" in loud


async def test_c2_3_model_shows_and_switches_the_model_for_the_next_task(
    tmp_path: Path, workspace: Path
) -> None:
    model = Model()
    async with serve(model, root_of(tmp_path)) as server:
        configure(root_of(tmp_path), server.base_url, "other", "second-model", default=False)
        async with open_chat(tmp_path, "--workspace", str(workspace)) as chat:
            await chat.prompt()
            await chat.line("/model")
            await chat.expect("[model: local/scripted-model (context window 128,000 tokens)]")
            await chat.prompt()
            await chat.line("/model nowhere nothing")
            await chat.expect("no model nowhere/nothing is configured")
            await chat.prompt()
            await chat.line("/model other second-model")
            await chat.expect("[model for the next task: other/second-model]")
            await chat.prompt()
            await chat.line("which model are you?")
            await chat.expect("tokens ")
            await chat.prompt()
            await chat.line("/model")
            await chat.expect("[model: other/second-model")
            await chat.prompt()
            await chat.line("/exit")
            assert await chat.exit_status() == 0
    assert [body["model"] for body in model.bodies] == ["second-model"]


async def test_c2_3_processes_lists_background_commands_and_kill_ends_one(
    tmp_path: Path, workspace: Path
) -> None:
    model = Model([background("echo serving on http://127.0.0.1:8765/; exec sleep 300")])
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace)) as chat,
    ):
        await chat.prompt()
        await chat.line("/processes")
        await chat.expect("[no background commands]")
        await chat.prompt()
        await chat.line("start the server")
        await chat.expect("tokens ")
        await chat.prompt()
        await chat.line("/processes")
        listed = await chat.expect_re(r"(proc-[0-9a-f]{8})  running  http://127\.0\.0\.1:8765/  ")
        process_id = listed.split()[0]
        sleeping = await sleeping_300(chat)
        assert sleeping
        await chat.prompt()
        await chat.line(f"/kill {process_id}")
        await chat.expect(f"[killed {process_id}]")
        await chat.prompt()
        await chat.line("/kill proc-00000000")
        await chat.expect("[no background command proc-00000000; /processes lists them]")
        await chat.prompt()
        await chat.line("/processes")
        await chat.expect("[no background commands]")  # a killed command leaves the list
        assert not any(p.is_running() and p.status() != "zombie" for p in sleeping)
        await chat.prompt()
        await chat.line("/exit")
        assert await chat.exit_status() == 0


# ---------------------------------------------------------------------- C3 rendering


MARKDOWN = (
    "# Plan\n\n- first step\n- second step\n\n```python\ndef add(a, b):\n    return a + b\n```\n"
)


@pytest.mark.parametrize("color", [True, False], ids=["color", "NO_COLOR"])
async def test_c3_1_a_finished_answer_is_rendered_as_markdown(
    tmp_path: Path, workspace: Path, color: bool
) -> None:
    async with (
        serve(Model([text_reply(MARKDOWN)]), root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace), color=color) as chat,
    ):
        await chat.prompt()
        await chat.line("plan it")
        await chat.expect("Plan")
        answer = await chat.expect("tokens ")
        await chat.prompt()
        await chat.line("/exit")
        assert await chat.exit_status() == 0
    plain = re.sub(r"\x1b\[[0-9;]*m", "", answer)
    assert "```" not in plain
    assert "- first step" not in plain
    assert "• first step" in plain
    assert "return a + b" in plain
    coloured = re.search(r"\x1b\[(?:38|48);[25];", answer) is not None  # 256 or true colour
    assert coloured == color


async def test_c3_1_off_a_terminal_the_answer_stays_plain_markdown(
    tmp_path: Path, workspace: Path
) -> None:
    async with serve(Model([text_reply(MARKDOWN)]), root_of(tmp_path)):
        done = await penguin_chat(tmp_path, "--workspace", str(workspace), stdin=b"plan it\n")
    assert done.returncode == 0
    assert MARKDOWN.rstrip("\n") in done.stdout.decode()


async def test_c3_2_a_call_line_a_live_timer_and_a_collapsed_result(
    tmp_path: Path, workspace: Path
) -> None:
    model = Model(
        [
            command(
                "printf '\\377\\376 bytes \\033[2J cleared?\\n'; printf 'two\\nthree\\n';"
                " while [ ! -e go ]; do sleep 0.05; done",
                "Count",
            )
        ]
    )
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace)) as chat,
    ):
        await chat.prompt()
        await chat.line("count")
        await chat.expect("● exec_command: Count (printf ")
        timer = r"^. exec_command: Count \(printf .* · (\d+\.\d)s$"
        await chat.screen_shows(timer)
        await chat.screen_shows(r"^. exec_command: Count \(printf .* · 0\.[5-9]s$")  # it runs
        screen = chat.screen_lines()
        while screen and not screen[-1]:
            screen.pop()
        assert screen[-1] == "›"  # the prompt stays the last line, the timer right above it
        assert re.match(timer, screen[-2])
        assert screen[-3].startswith("● exec_command: Count (printf")
        chat.resize(rows=30, cols=70)  # a narrower terminal: the timer is cut to fit
        narrow = await chat.screen_shows(r"^. exec_command: Count \(printf .*… · \d+\.\ds$")
        assert len(narrow.string) < 70
        (workspace / "go").touch()
        result = await chat.expect("tokens ")
        await chat.prompt()
        assert not any(re.match(timer, line) for line in chat.screen_lines())  # gone
        await chat.line("/exit")
        assert await chat.exit_status() == 0
    # Invalid UTF-8 shows as replacement characters, an escape sequence is defused.
    assert "⎿ completed: \ufffd\ufffd bytes \ufffd[2J cleared? (+2 lines)" in result
    assert "\x1b[2J" not in result


async def test_c3_3_approvals_answered_y_and_n(tmp_path: Path, workspace: Path) -> None:
    model = Model(
        [
            call_reply(
                "write_file",
                {"description": "Create notes", "file_path": "notes.txt", "content": "hi\n"},
            ),
            call_reply(
                "write_file",
                {"description": "Create more", "file_path": "more.txt", "content": "no\n"},
                call_id="call_2",
            ),
            text_reply("One of two."),
        ]
    )
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace), "--approve", "always-ask") as chat,
    ):
        await chat.prompt()
        await chat.line("write two files")
        await chat.expect("● write_file: Create notes (notes.txt)")
        await chat.question()
        await chat.line("y")
        await chat.expect("? Approve this tool call? [Y/a/n] y")
        await chat.expect("✓ [approved]")
        await chat.expect("● write_file: Create more (more.txt)")
        await chat.question()
        await chat.line("n")
        await chat.expect("? Approve this tool call? [Y/a/n] n")
        await chat.expect("× [denied]")
        await chat.expect("One of two.")
        await chat.expect("tokens ")
        await chat.prompt()
        await chat.line("/exit")
        assert await chat.exit_status() == 0
    assert (workspace / "notes.txt").read_text() == "hi\n"
    assert not (workspace / "more.txt").exists()
    assert model.bodies[2]["messages"][-1]["content"] == "Tool call denied by user."


async def test_c3_4_a_stats_line_after_each_task(tmp_path: Path, workspace: Path) -> None:
    async with (
        serve(
            Model([text_reply("Hi.", prompt_tokens=1000, completion_tokens=280)]), root_of(tmp_path)
        ),
        open_chat(tmp_path, "--workspace", str(workspace)) as chat,
    ):
        await chat.prompt()
        await chat.line("hello")
        await chat.expect_re(
            r"tokens 1,000 in · 280 out · 0 cached · context 1,280 of 128,000 \(1%\) · \d+\.\ds"
        )
        await chat.prompt()
        await chat.line("/exit")
        assert await chat.exit_status() == 0
    assert CONTEXT_WINDOW == 128_000


# ---------------------------------------------------------------------- C4 Ctrl-C


async def test_c4_1_ctrl_c_at_a_question_denies_that_call(tmp_path: Path, workspace: Path) -> None:
    model = Model([command("echo hi", "Say hi"), text_reply("Fine.")])
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace), "--approve", "always-ask") as chat,
    ):
        await chat.prompt()
        await chat.line("say hi")
        await chat.question()
        await chat.send("\x03")
        await chat.expect("× [denied]")
        await chat.expect("Fine.")
        await chat.expect("tokens ")
        await chat.prompt()
        await chat.line("/exit")
        assert await chat.exit_status() == 0
    assert model.bodies[1]["messages"][-1]["content"] == "Tool call denied by user."


async def test_c4_1_ctrl_c_while_a_task_runs_interrupts_it(tmp_path: Path, workspace: Path) -> None:
    model = Model([command("echo started; exec sleep 300", "Sleep")])
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace)) as chat,
    ):
        await chat.prompt()
        await chat.line("sleep")
        await chat.screen_shows(r"exec_command: Sleep .* · \d+\.\ds$")
        sleeping = await sleeping_300(chat)
        await chat.send("\x03")
        await chat.expect("⎿ aborted: started")
        await chat.expect("[interrupted]")
        await chat.expect("tokens ")
        await chat.prompt()
        for process in sleeping:  # the interrupt ended the command, not just the chat's view
            assert not process.is_running() or process.status() == "zombie"
        await chat.line("/exit")
        assert await chat.exit_status() == 0
    assert sleeping


async def test_c4_1_ctrl_c_stops_a_compaction_at_once(tmp_path: Path, workspace: Path) -> None:
    stalled = t.sse_reply([t.content_chunk("[summary]Half")], done=False, end="stall")
    model = Model([text_reply("Hello."), stalled, text_reply("Still here.")])
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace)) as chat,
    ):
        await chat.prompt()
        await chat.line("hi")
        await chat.expect("tokens ")
        await chat.prompt()
        await chat.line("/compact")
        await chat.expect("[compacting the context (manual, summarize)…]")
        await model_asked(model, 2)  # the summary request hangs
        await chat.send("\x03")  # a compaction has no graceful end: it stops at once
        await chat.expect("[compaction stopped; the context is unchanged]")
        await chat.prompt()
        await chat.line("are you there?")
        await chat.expect("Still here.")
        await chat.expect("tokens ")
        await chat.prompt()
        await chat.line("/exit")
        assert await chat.exit_status() == 0
    assert "hi" in model.user_texts(-1)  # the old context stands


async def model_asked(model: Model, count: int) -> None:
    """Wait until the model has received ``count`` requests."""
    with trio.fail_after(30):
        while len(model.bodies) < count:
            await model.received.wait()


async def test_c4_1_ctrl_c_clears_a_line_and_on_an_empty_one_asks_before_exiting(
    tmp_path: Path, workspace: Path
) -> None:
    model = Model()
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace)) as chat,
    ):
        await chat.prompt()
        await chat.send("some text to drop")
        await chat.expect("drop")
        await chat.send("\x03")
        await chat.line("kept")
        await chat.expect("› kept")
        await chat.expect("tokens ")
        await chat.prompt()
        await chat.send("\x03")
        await chat.expect("Exit? [y/N]")
        await chat.line("n")
        await chat.expect("Exit? [y/N] n")
        await chat.prompt()
        await chat.send("\x03")
        await chat.expect("Exit? [y/N]")
        await chat.line("y")
        await chat.expect("resume with: penguin chat --resume ")
        assert await chat.exit_status() == 0
    assert [body["messages"][-1]["content"] for body in model.bodies] == ["kept"]


async def test_c4_1_ctrl_c_interrupts_a_model_that_keeps_failing(
    tmp_path: Path, workspace: Path
) -> None:
    model = Model([t.ErrorReply(503, "overloaded")] * 6)
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace)) as chat,
    ):
        await chat.prompt()
        await chat.line("hello")
        await chat.expect("[model request timeout: server error 503: overloaded; retry 1")
        await chat.send("\x03")
        await chat.expect("[interrupted]")
        await chat.expect("tokens ")
        await chat.prompt()
        await chat.line("/exit")
        assert await chat.exit_status() == 0


async def test_c4_1_ctrl_c_interrupts_a_model_that_hangs(tmp_path: Path, workspace: Path) -> None:
    hanging = t.sse_reply([t.content_chunk("I am thinking ab")], done=False, end="stall")
    model = Model([hanging, text_reply("Back again.")])
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace)) as chat,
    ):
        await chat.prompt()
        await chat.line("hello")
        await chat.screen_shows(r"^I am thinking ab$")  # the answer streams in the live region
        await chat.send("\x03")
        await chat.expect("[interrupted]")
        await chat.expect("tokens ")
        await chat.prompt()
        screen = chat.screen_lines()
        cut = screen.index("I am thinking ab")  # what came is kept on the screen
        assert screen[cut + 1 :].index("[interrupted]") >= 0
        await chat.line("still there?")
        await chat.expect("Back again.")
        await chat.expect("tokens ")
        await chat.prompt()
        await chat.line("/exit")
        assert await chat.exit_status() == 0
    assert "I am thinking ab" in json.dumps(model.bodies[-1]["messages"])  # the carry-over


def test_c4_1_the_second_ctrl_c_counts_only_within_2_s() -> None:
    async def main() -> list[str]:
        control = TaskControl()
        seen: list[str] = [control.press()]
        await trio.sleep(STOP_WINDOW + 0.5)
        seen.append(control.press())  # too late: it waits for another
        await trio.sleep(STOP_WINDOW - 0.5)
        seen.append(control.press())
        assert control.interrupt.is_set()
        assert control.stop_scope.cancel_called
        once = TaskControl(graceful=False)
        seen.append(once.press())
        return seen

    clock = trio.testing.MockClock(autojump_threshold=0)
    assert trio.run(main, clock=clock) == ["interrupting", "waiting", "stopping", "stopping"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
async def test_c4_2_sigterm_and_sighup_end_at_once_restoring_the_terminal(
    tmp_path: Path, workspace: Path, signum: int
) -> None:
    model = Model([command("echo started; exec sleep 300", "Sleep")])
    script = (
        f"{sys.executable} -m penguin chat --root {root_of(tmp_path)} --workspace {workspace}; "
        "echo status=$?; stty -a"
    )
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, command=["bash", "--norc", "-c", script]) as chat,
    ):
        await chat.prompt()
        await chat.line("sleep")
        await chat.screen_shows(r"exec_command: Sleep .* · \d+\.\ds$")
        (python,) = [p for p in psutil.Process(chat.pid).children() if "penguin" in p.cmdline()]
        sleeping = await sleeping_300(chat)
        assert sleeping
        python.send_signal(signum)
        await chat.expect("status=130")
        modes = await chat.expect_re(r"\s-?icanon\s.*?-?echo\s")
        assert await chat.exit_status() == 0
    assert "-icanon" not in modes
    assert "-echo " not in modes
    assert all(not p.is_running() or p.status() == "zombie" for p in sleeping)


async def sleeping_300(chat: ChatPty) -> list[psutil.Process]:
    """The chat's ``sleep 300`` commands, once one has been exec'd (10 s at most).

    Matched on the whole command line: a looser match (``"300"`` anywhere) also caught
    the host watchdog whenever the chat's pid held those digits (its argv names it),
    and the call's line can be on the screen before its process has exec'd.
    """
    with trio.move_on_after(10):
        while True:
            found = []
            for process in chat_processes(chat):
                try:
                    if process.cmdline() == ["sleep", "300"]:
                        found.append(process)
                except psutil.Error:
                    continue
            if found:
                return found
            await trio.sleep(0.02)
    return []


def chat_processes(chat: ChatPty) -> list[psutil.Process]:
    """Every process below the chat now."""
    try:
        return psutil.Process(chat.pid).children(recursive=True)
    except psutil.Error:
        return []


# ---------------------------------------------------------------------- the session lock


def test_the_session_lock_refuses_a_second_holder_and_takes_over_a_stale_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "traces" / "s.lock"
    with SessionLock.acquire(path, "s"):
        assert path.read_text() == f"{os.getpid()}\n"
        probe = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from pathlib import Path\n"
                "from penguin.trace import SessionLock, SessionLockedError\n"
                "try:\n    SessionLock.acquire(Path(sys.argv[1]), 's')\n"
                "except SessionLockedError as e:\n    print(e.pid)",
                str(path),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        assert probe.stdout.strip() == str(os.getpid())
    assert not path.exists()
    path.write_text("12345\n")  # left behind by a holder that died: no flock on it
    with SessionLock.acquire(path, "s") as lock:
        assert lock.path == path
    with SessionLock.acquire(path, "s"), pytest.raises(SessionLockedError) as refused:
        SessionLock.acquire(path, "s")  # flock is per open file: a second take is refused
    assert refused.value.pid == os.getpid()
    assert isinstance(refused.value, PenguinError)


def first_user_text(body: Body) -> str:
    first = next(m for m in body["messages"] if m["role"] == "user")
    content = first["content"]
    return content if isinstance(content, str) else json.dumps(content)


async def test_c3_3_a_subagents_call_is_asked_the_same_way_and_shown_indented(
    tmp_path: Path, workspace: Path
) -> None:
    prompt = "Caller agent: default_agent\nCreate report.txt saying done."

    def child_or_parent(body: Body) -> t.Reply:
        answered = any(m["role"] == "tool" for m in body["messages"])
        if first_user_text(body).startswith("Caller agent:"):  # the child's conversation
            if not answered:
                args = {"description": "Write it", "file_path": "report.txt", "content": "done\n"}
                return call_reply("write_file", args, call_id="child_1", text="Writing.\n")
            return text_reply("I wrote report.txt.")
        if not answered:
            delegate = {"description": "Delegate", "prompt": prompt}
            return call_reply("run_subagent", delegate, call_id="parent_1")
        return text_reply("The subagent finished.")

    model = Model([child_or_parent] * 4)
    async with serve(model, root_of(tmp_path)):
        async with open_chat(
            tmp_path, "--workspace", str(workspace), "--approve", "always-ask"
        ) as chat:
            await chat.prompt()
            await chat.line("get report.txt written by a subagent")
            await chat.expect("● run_subagent: Delegate")
            await chat.question()
            await chat.line("y")
            await chat.expect("  │ ● write_file: Write it (report.txt)")
            await chat.question()
            await chat.line("y")
            await chat.expect("  │   ✓ [approved]")
            await chat.expect("  │ I wrote report.txt.")
            await chat.expect("The subagent finished.")
            await chat.expect("tokens ")
            await chat.prompt()
            await chat.line("/exit")
            await chat.expect("resume with:")
            parent = await chat.expect_re(SESSION_ID.pattern)
            assert await chat.exit_status() == 0
        assert (workspace / "report.txt").read_text() == "done\n"
        traces = sorted(root_of(tmp_path).rglob("session-*.jsonl"))
        assert len(traces) == 2
        (child,) = [path for path in traces if not path.name.startswith(parent)]
        os.utime(child)  # the child's trace is the newest file: --resume still takes the parent
        done = await penguin_chat(tmp_path, "--resume", stdin=b"")
    assert done.returncode == 0, done.stderr.decode()
    assert f"[resumed session {parent}]" in done.stdout.decode()


def test_c1_only_chat_loads_the_terminal_libraries(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    for argv in (["--version"], ["tool", "read_file", '{"file_path": "a.txt"}'], ["run", "-h"]):
        loaded = top_level(loaded_after(*argv, cwd=tmp_path))
        assert "rich" not in loaded, argv
        assert "prompt_toolkit" not in loaded, argv
    helped = loaded_after("chat", "--help", cwd=tmp_path)
    assert "penguin.cli._chat" in helped
    assert "penguin.cli._terminal" not in helped  # not even chat loads them to parse options
    assert "rich" not in top_level(helped)
