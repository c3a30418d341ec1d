"""``penguin chat``'s approvals a person can trust, and one writer per session (chat.md C5).

Driven in a real pseudo-terminal (:mod:`.chat_pty`: pexpect, and pyte for what the
screen shows), against a scripted model on a local port; ``penguin server`` and
``penguin run`` are real processes too.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio

from penguin import config as cfg
from penguin.llm import testing as t

from ..server.test_cli import penguin_server
from .chat_pty import QUESTION, ChatPty, Model, call_reply, open_chat, serve, text_reply
from .test_chat import command, penguin_chat, resume_hint, root_of
from .test_mcp import with_server

REASK = "answer y, a or n"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def calls_reply(*calls: tuple[str, Mapping[str, Any]]) -> t.Reply:
    """Several tool calls in one turn (parallel calls)."""
    chunks = [t.content_chunk("Both.\n")]
    for index, (name, arguments) in enumerate(calls):
        encoded = json.dumps(arguments)
        chunks.append(
            t.tool_call_chunk(index, id=f"call_{index + 1}", name=name, arguments=encoded)
        )
    return t.sse_reply(
        [
            *chunks,
            t.finish_chunk("tool_calls"),
            t.usage_chunk(prompt_tokens=200, completion_tokens=30),
        ]
    )


def last_tool_output(model: Model, index: int = -1) -> str:
    tools = [m for m in model.bodies[index]["messages"] if m["role"] == "tool"]
    content = tools[-1]["content"]
    return content if isinstance(content, str) else json.dumps(content)


async def finish(chat: ChatPty) -> None:
    await chat.expect("tokens ")
    await chat.prompt()
    await chat.line("/exit")
    assert await chat.exit_status() == 0


# ---------------------------------------------------------------------- C5.1 type-ahead


async def test_c5_1_typing_across_the_question_never_answers_it(
    tmp_path: Path, workspace: Path
) -> None:
    model = Model(
        [
            command("sleep 0.3", "Wait a little"),
            command("touch ran.txt", "Make a mark"),
            text_reply("Stopped."),
        ]
    )
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace), "--approve", "always-ask") as chat,
    ):
        await chat.prompt()
        await chat.line("two steps")
        await chat.question()
        await chat.line("y")  # the first call runs; the person types on meanwhile
        await chat.expect("✓ [approved]")
        asked = trio.Event()
        typed: list[str] = []

        async def type_on() -> None:
            # One key every 50 ms (pexpect's delay before each send) until the second
            # question is up, and 25 keys more (over a second: past its 300 ms), then Enter.
            more = 25
            while more:
                await chat.send("w")
                typed.append("w")
                if asked.is_set():
                    more -= 1
            await chat.send("\r")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(type_on)
            await chat.expect(QUESTION)
            asked.set()
        await chat.expect(REASK)  # the keys after the guard made a line; it is no answer
        assert not (workspace / "ran.txt").exists()
        await chat.question()
        await chat.line("n")
        await chat.expect("× [denied]")
        await chat.expect("tokens ")
        await chat.screen_shows(r"› w+$")  # what was typed before the question: kept
        await chat.send("\x15")  # Ctrl-U: clear it
        await chat.line("/exit")
        assert await chat.exit_status() == 0
    assert not (workspace / "ran.txt").exists()
    assert "✓ [approved]" not in (tmp_path / "chat-output.log").read_text().split(QUESTION)[-1]
    assert len(typed) > 25


async def test_c5_1_enter_right_after_the_question_appears_is_not_an_answer(
    tmp_path: Path, workspace: Path
) -> None:
    model = Model([command("touch ran.txt", "Make a mark"), text_reply("Stopped.")])
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace), "--approve", "always-ask") as chat,
    ):
        await chat.prompt()
        await chat.line("mark it")
        await chat.expect(QUESTION)
        await chat.send("\r")  # at once: nobody has read the question yet
        await chat.question(seen=True)
        assert not (workspace / "ran.txt").exists()
        await chat.send("\r")  # the Enter that ended the dropped typing: still not an answer
        await chat.line("n")
        await chat.expect("× [denied]")
        await finish(chat)
    assert not (workspace / "ran.txt").exists()
    assert model.bodies[1]["messages"][-1]["content"] == "Tool call denied by user."


async def test_c5_1_text_typed_before_the_question_stays_on_the_input_line(
    tmp_path: Path, workspace: Path
) -> None:
    model = Model(
        [command("sleep 1", "Wait"), command("echo second", "Echo"), text_reply("Done both.")]
    )
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace), "--approve", "always-ask") as chat,
    ):
        await chat.prompt()
        await chat.line("two steps")
        await chat.question()
        await chat.line("y")
        await chat.expect("✓ [approved]")
        await chat.send("keep this")  # while the first call runs; the question comes later
        await chat.question()
        await chat.line("y")
        await chat.screen_shows(r"› keep this$")  # back on the input line, not sent
        await chat.expect("Done both.")
        await chat.expect("tokens ")
        await chat.screen_shows(r"› keep this$")  # offered again on the next prompt
        await chat.send("\x15")  # Ctrl-U: clear it
        await chat.line("/exit")
        assert await chat.exit_status() == 0
    assert all(
        "keep this" not in text for body in model.bodies for text in map(str, body["messages"])
    )


# ---------------------------------------------------------------------- C5.2 which call


async def test_c5_2_each_question_sits_under_its_own_call_and_results_are_named(
    tmp_path: Path, workspace: Path
) -> None:
    model = Model(
        [
            calls_reply(
                ("exec_command", {"description": "First", "cmd": "echo one"}),
                ("exec_command", {"description": "Second", "cmd": "echo two"}),
            ),
            text_reply("Both ran."),
        ]
    )
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace), "--approve", "always-ask") as chat,
    ):
        await chat.prompt()
        await chat.line("run both")
        for name, cmd in (("First", "echo one"), ("Second", "echo two")):
            await chat.question()
            rows = chat.screen_lines()
            at = max(i for i, row in enumerate(rows) if row.startswith(QUESTION))
            assert rows[at - 1] == f"  $ {cmd}", rows
            assert rows[at - 2] == f"● exec_command: {name} ({cmd})", rows
            await chat.line("y")
        await chat.expect("Both ran.")
        await chat.expect("tokens ")
        rows = chat.screen_lines()
        results = [row for row in rows if "⎿" in row]
        assert len(results) == 2
        # The first result comes after the second call's decision: it names its call.
        assert any("[exec_command: First (echo one)] completed: one" in row for row in results)
        # Each answer's label sits right under it, before the result that came while the
        # second question waited: a label under that result would seem to be about it.
        answers = [i for i, row in enumerate(rows) if row.startswith(QUESTION)]
        assert [rows[i + 1] for i in answers] == ["  ✓ [approved]"] * 2, rows
        await chat.prompt()
        await chat.line("/exit")
        assert await chat.exit_status() == 0


# ---------------------------------------------------------------------- C5.3 what it does


async def test_c5_3_an_edit_shows_its_diff_in_colour_cut_at_40_lines(
    tmp_path: Path, workspace: Path
) -> None:
    old = "".join(f"old line {n}\n" for n in range(30))
    new = "".join(f"new line {n}\n" for n in range(30))
    (workspace / "notes.txt").write_text(old)
    edit = {
        "description": "Rewrite",
        "file_path": "notes.txt",
        "old_string": old,
        "new_string": new,
    }
    model = Model([call_reply("edit_file", edit), text_reply("Rewritten.")])
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(
            tmp_path, "--workspace", str(workspace), "--approve", "always-ask", color=True
        ) as chat,
    ):
        await chat.prompt()
        await chat.line("rewrite the notes")
        shown = await chat.expect(QUESTION)
        await chat.question(seen=True)
        assert "\x1b[31m    -old line 0\x1b[0m" in shown  # red
        assert "    (+21 lines)" in shown  # 30 removed, 30 added, 1 context: 40 shown
        assert "\x1b[32m    +new line 9\x1b[0m" in shown  # green
        assert "+new line 10" not in shown  # past the 40 lines
        await chat.line("y")
        await chat.expect("✓ [approved]")
        await finish(chat)
    assert (workspace / "notes.txt").read_text() == new


async def test_c5_3_a_short_edit_shows_the_whole_diff_red_and_green(
    tmp_path: Path, workspace: Path
) -> None:
    (workspace / "app.py").write_text("print('hello')\n")
    edit = {
        "description": "Greet the world",
        "file_path": "app.py",
        "old_string": "print('hello')",
        "new_string": "print('hello, world')",
    }
    model = Model([call_reply("edit_file", edit), text_reply("Edited.")])
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(
            tmp_path, "--workspace", str(workspace), "--approve", "always-ask", color=True
        ) as chat,
    ):
        await chat.prompt()
        await chat.line("greet the world")
        shown = await chat.expect(QUESTION)
        assert "\x1b[31m    -print('hello')\x1b[0m" in shown
        assert "\x1b[32m    +print('hello, world')\x1b[0m" in shown
        await chat.question(seen=True)
        await chat.line("n")
        await chat.expect("× [denied]")
        await finish(chat)
    assert (workspace / "app.py").read_text() == "print('hello')\n"


async def test_c5_3_a_write_says_it_overwrites_and_a_command_is_shown_whole(
    tmp_path: Path, workspace: Path
) -> None:
    (workspace / "notes.txt").write_text("before\n")
    long = "echo " + " ".join(f"word{n}" for n in range(60))  # over two 120-column lines
    model = Model(
        [
            call_reply(
                "write_file",
                {"description": "Replace", "file_path": "notes.txt", "content": "after\nmore\n"},
            ),
            command(long, "Say many words"),
            text_reply("Done."),
        ]
    )
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace), "--approve", "always-ask") as chat,
    ):
        await chat.prompt()
        await chat.line("replace and say")
        shown = await chat.expect(QUESTION)
        assert "overwrites notes.txt (7 bytes now)" in shown
        assert "+ after" in shown
        assert "+ more" in shown
        await chat.question(seen=True)
        await chat.line("y")
        await chat.question()
        rows = chat.screen_lines()
        at = max(i for i, row in enumerate(rows) if row.startswith(QUESTION))
        start = max(i for i in range(at) if rows[i].startswith("  $ "))
        pieces = [rows[start].removeprefix("  $ ")] + [
            r.removeprefix("    ") for r in rows[start + 1 : at]
        ]
        assert " ".join(pieces).split() == long.split()  # wrapped, never cut
        assert at - start >= 2
        await chat.line("y")
        await finish(chat)


# ---------------------------------------------------------------------- C5.4 the answers


async def test_c5_4_a_allows_pytest_then_pytest_q_is_not_asked_and_another_segment_is(
    tmp_path: Path, workspace: Path
) -> None:
    model = Model(
        [
            command("pytest -x", "Run the tests"),
            command("pytest -q", "Run them quietly"),
            command("pytest; echo x > y", "Run and write"),
            text_reply("Done."),
        ]
    )
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace), "--approve", "always-ask") as chat,
    ):
        await chat.prompt()
        await chat.line("test it")
        await chat.question()
        await chat.line("a")
        await chat.expect("[allowed for this session: exec_command pytest;")
        await chat.expect("● exec_command: Run them quietly (pytest -q)")
        await chat.expect("● exec_command: Run and write (pytest; echo x > y)")
        before = await chat.expect(QUESTION)  # asked: a segment starts with echo
        assert QUESTION not in before  # pytest -q was not asked
        await chat.question(seen=True)
        await chat.line("n")
        await chat.expect("× [denied]")
        await chat.expect("tokens ")
        await chat.prompt()
        await chat.line("/approve")
        await chat.expect("[allowed for this session: exec_command pytest]")
        await chat.prompt()
        await chat.line("/exit")
        assert await chat.exit_status() == 0
    assert not (workspace / "y").exists()
    assert len(model.bodies) == 4


async def test_c5_4_unknown_answers_ask_again_and_a_reason_reaches_the_model(
    tmp_path: Path, workspace: Path
) -> None:
    model = Model(
        [
            command("touch one", "First"),
            command("touch two", "Second"),
            command("touch three", "Third"),
            text_reply("Done."),
        ]
    )
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace), "--approve", "always-ask") as chat,
    ):
        await chat.prompt()
        await chat.line("three marks")
        for answer in ("no!", "nah", "stop", "nope"):
            await chat.question()
            await chat.line(answer)
            await chat.expect(REASK)
        await chat.question()
        await chat.line("n use a temporary directory")
        await chat.expect("× [denied]")
        await chat.question()
        await chat.line("d")
        await chat.expect("? Why")
        await chat.line("not in the workspace")
        await chat.expect("× [denied]")
        await chat.question()
        await chat.send("\r")  # Enter: the default, Y
        await chat.expect("✓ [approved]")
        await finish(chat)
    assert not (workspace / "one").exists()
    assert not (workspace / "two").exists()
    assert (workspace / "three").exists()
    assert (
        last_tool_output(model, 1) == "Tool call denied by user. Reason: use a temporary directory"
    )
    assert last_tool_output(model, 2) == "Tool call denied by user. Reason: not in the workspace"


async def test_c5_4_a_policy_denial_names_its_rule(tmp_path: Path, workspace: Path) -> None:
    model = Model([command("rm -rf build", "Clean"), text_reply("Not allowed.")])
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace)) as chat,
    ):
        await chat.prompt()
        await chat.line("clean")
        await chat.expect("× [forbidden by policy] rule: rm-recursive-force")
        await finish(chat)


async def test_c5_4_verbose_shows_an_edits_diff_in_colour(tmp_path: Path, workspace: Path) -> None:
    (workspace / "app.py").write_text("a = 1\n")
    edit = {
        "description": "Bump",
        "file_path": "app.py",
        "old_string": "a = 1",
        "new_string": "a = 2",
    }
    model = Model([call_reply("edit_file", edit), text_reply("Bumped.")])
    async with (
        serve(model, root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace), "--verbose", color=True) as chat,
    ):
        await chat.prompt()
        await chat.line("bump it")
        await chat.expect("\x1b[31m-a = 1")
        await chat.expect("\x1b[32m+a = 2")
        await finish(chat)


# ---------------------------------------------------------------------- C5.5 resume


async def test_c5_5_resume_keeps_the_approval_mode_unless_approve_changes_it(
    tmp_path: Path, workspace: Path
) -> None:
    model = Model(
        [
            text_reply("Hello."),
            command("touch asked", "Mark"),
            text_reply("Not marked."),
            command("touch unasked", "Mark"),
        ]
    )
    async with serve(model, root_of(tmp_path)):
        made = await penguin_chat(
            tmp_path, "--workspace", str(workspace), "--approve", "always-ask", stdin=b"hi\n"
        )
        session_id = resume_hint(made.stdout.decode())
        kept = await penguin_chat(tmp_path, "--resume", session_id, stdin=b"mark\nn\n")
        changed = await penguin_chat(
            tmp_path, "--resume", session_id, "--approve", "allow-all", stdin=b"mark\n"
        )
    out = kept.stdout.decode()
    assert kept.returncode == 0, kept.stderr.decode()
    assert "approve always-ask" in out.splitlines()[0]
    assert QUESTION in out
    assert not (workspace / "asked").exists()
    out = changed.stdout.decode()
    assert changed.returncode == 0, changed.stderr.decode()
    assert "[approval mode: allow-all (the session had always-ask; --approve changed it)]" in out
    assert QUESTION not in out
    assert (workspace / "unasked").exists()


# ---------------------------------------------------------------------- C5.6 one writer


async def test_c5_6_a_session_the_server_holds_is_refused_to_chat_naming_the_server(
    tmp_path: Path, workspace: Path
) -> None:
    async with serve(Model(), root_of(tmp_path)):
        async with penguin_server(root_of(tmp_path)) as server, server.client() as client:
            created = await client.post(
                "/api/projects/default_project/agents/default_agent/sessions",
                json={"workspace": str(workspace)},
            )
            assert created.status_code == 201, created.text
            session_id = created.json()["session"]["sessionId"]
            refused = await penguin_chat(tmp_path, "--resume", session_id, stdin=b"hi\n")
            assert refused.returncode == 1
            pid = server.process.pid
            said = f"session {session_id} is open in penguin server (pid {pid})"
            assert said in refused.stderr.decode()
            assert b"penguin chat \xc2\xb7" not in refused.stdout  # refused before the header
            listed = await client.get(f"/api/sessions/{session_id}/messages")
            assert listed.status_code == 200  # the server reads it still
            await server.stop(signal.SIGINT)
        allowed = await penguin_chat(tmp_path, "--resume", session_id, stdin=b"hi\n")
    assert allowed.returncode == 0, allowed.stderr.decode()


async def test_c5_6_a_session_a_chat_holds_is_busy_for_the_server(
    tmp_path: Path, workspace: Path
) -> None:
    async with serve(Model(), root_of(tmp_path)):
        made = await penguin_chat(tmp_path, "--workspace", str(workspace), stdin=b"hi\n")
        session_id = resume_hint(made.stdout.decode())
        async with (
            penguin_server(root_of(tmp_path)) as server,
            server.client() as client,
            open_chat(tmp_path, "--resume", session_id) as chat,
        ):
            await chat.expect(f"[resumed session {session_id}]")
            await chat.prompt()
            await chat.line("hello")  # the session is open once the first task starts
            await chat.expect("tokens ")
            busy = await client.post(
                f"/api/sessions/{session_id}/tasks",
                json={"input": [{"type": "text", "text": "from the page"}]},
            )
            assert busy.status_code == 409, busy.text
            error = busy.json()["error"]
            assert error["code"] == "session_busy"
            assert (
                error["message"] == f"session {session_id} is open in penguin chat (pid {chat.pid})"
            )
            readable = await client.get(f"/api/sessions/{session_id}/messages")
            assert readable.status_code == 200
            await chat.prompt()
            await chat.line("/exit")
            assert await chat.exit_status() == 0
            await server.stop(signal.SIGINT)


async def test_c5_6_a_killed_holders_lock_is_taken_over(tmp_path: Path, workspace: Path) -> None:
    async with serve(Model(), root_of(tmp_path)):
        made = await penguin_chat(tmp_path, "--workspace", str(workspace), stdin=b"hi\n")
        session_id = resume_hint(made.stdout.decode())
        async with open_chat(tmp_path, "--resume", session_id) as chat:
            await chat.expect(f"[resumed session {session_id}]")
            await chat.prompt()
            await chat.line("hello")
            await chat.expect("tokens ")
            (lock,) = root_of(tmp_path).rglob(f"{session_id}.lock")
            assert lock.read_text() == f"{chat.pid} penguin chat\n"
            chat.signal(signal.SIGKILL)  # no cleanup: the file stays, the flock goes
            assert await chat.exit_status() == 128 + signal.SIGKILL
            assert lock.exists()
        again = await penguin_chat(tmp_path, "--resume", session_id, stdin=b"once more\n")
    assert again.returncode == 0, again.stderr.decode()
    assert "once more" in again.stdout.decode()


async def test_c5_6_a_session_penguin_run_holds_is_refused_naming_run(
    tmp_path: Path, workspace: Path
) -> None:
    model = Model([command("sleep 30", "Wait"), text_reply("Done.")])
    async with serve(model, root_of(tmp_path)):
        asked = model.received  # set by run's first request: its session is open by then
        run = await trio.lowlevel.open_process(
            [
                sys.executable,
                "-m",
                "penguin",
                "run",
                "-m",
                "wait",
                "--workspace",
                str(workspace),
                "--root",
                str(root_of(tmp_path)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            with trio.fail_after(60):
                await asked.wait()
            (lock,) = root_of(tmp_path).rglob("session-*.lock")
            session_id = lock.name.removesuffix(".lock")
            refused = await penguin_chat(tmp_path, "--resume", session_id, stdin=b"hi\n")
            assert refused.returncode == 1
            said = f"session {session_id} is open in penguin run (pid {run.pid})"
            assert said in refused.stderr.decode()
        finally:
            run.send_signal(signal.SIGTERM)
            with trio.fail_after(30):
                await run.wait()


# ---------------------------------------------------------------------- smaller items


async def test_18_a_failed_mcp_server_is_reported_once_in_chat(
    tmp_path: Path, workspace: Path
) -> None:
    with_server(
        root_of(tmp_path),
        cfg.McpServerConfig(
            name="gone", transport=cfg.McpStdioTransport(command="/nonexistent/server")
        ),
    )
    async with (
        serve(Model(), root_of(tmp_path)),
        open_chat(tmp_path, "--workspace", str(workspace)) as chat,
    ):
        await chat.prompt()
        await chat.line("hello")
        await chat.expect(
            "[mcp] connected: gone failed: cannot start '/nonexistent/server': "
            "No such file or directory"
        )
        await finish(chat)
    log = (tmp_path / "chat-output.log").read_text()
    assert log.count("No such file or directory") == 1
    assert 'MCP server "gone" unavailable' not in log
