"""The terminal view of a run, fed messages directly (the renderer is sans-IO)."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import trio
import trio.testing

from penguin import protocol as om
from penguin.approval import PROMPT
from penguin.cli._render import (
    PREVIEW_DIFF_LINES,
    PREVIEW_VALUE_CHARS,
    CallKey,
    Renderer,
    Style,
    TaskStats,
    call_preview,
    call_summary,
    decision_verdict,
    harness_note,
    history_lines,
)
from penguin.cli._run import PromptAsker

CHILD = "session-2026-11-30-00-00-00-0000c41d"


def renderer() -> tuple[Renderer, io.StringIO]:
    out = io.StringIO()
    return Renderer(out, color=False), out


def write_call(call_id: str = "c1") -> om.OmniMessage[om.ToolCallPayload]:
    args = {"description": "Write it", "file_path": "report.txt", "content": "x"}
    return om.tool_call("write_file", args, call_id)


def test_call_summary_prefers_the_description_and_names_the_target() -> None:
    assert call_summary(write_call().payload) == "write_file: Write it (report.txt)"
    assert call_summary(om.tool_call("read_file", {"file_path": "a"}, "c").payload) == (
        "read_file: a"
    )
    assert call_summary(om.tool_call("x", "{not json", "c").payload) == "x: {not json"


def test_a_call_shown_by_its_prompt_is_not_shown_again_by_the_stream() -> None:
    view, out = renderer()
    call = write_call()
    view.show(call)  # the approval prompt shows it first
    view.show(call)  # then the stream delivers it
    nested = om.with_origin(write_call(), CHILD)  # same id, another session: its own line
    view.show(nested)
    view.show(nested)
    assert out.getvalue() == (
        "● write_file: Write it (report.txt)\n  │ ● write_file: Write it (report.txt)\n"
    )


def test_output_during_a_prompt_waits_for_the_answer() -> None:
    view, out = renderer()
    view.prompt("? Approve this tool call? [Y/n] ")
    view.show(om.with_origin(om.assistant_text("Working on it."), CHILD))
    assert out.getvalue() == "? Approve this tool call? [Y/n] "
    view.answered("y\n", echo=True)
    view.verdict("allow", (CHILD,))
    assert out.getvalue() == (
        "? Approve this tool call? [Y/n] y\n  │ Working on it.\n  │   ✓ [approved]\n"
    )


def test_an_answer_typed_on_a_terminal_is_not_echoed_again() -> None:
    view, out = renderer()
    view.prompt("? Q ")
    view.answered("n\n", echo=False)  # the terminal showed "n" and the Enter
    view.verdict("deny")
    assert out.getvalue() == "? Q   × [denied]\n"


def test_end_of_input_or_ctrl_c_at_a_prompt_ends_its_line() -> None:
    for line in (None, ""):
        view, out = renderer()
        view.prompt("? Q ")
        view.answered(line, echo=True)
        view.verdict("deny")
        assert out.getvalue() == "? Q \n  × [denied]\n"


def test_text_then_a_call_starts_a_fresh_line() -> None:
    view, out = renderer()
    view.show(om.partial_text("delta", "Creating it."))
    view.show(write_call())
    view.show(om.tool_call_output('Created "report.txt".\nmore', "c1"))
    view.finish()
    assert out.getvalue() == (
        "Creating it.\n"
        "● write_file: Write it (report.txt)\n"
        '  ⎿ completed: Created "report.txt". (+1 lines)\n'
    )


async def test_two_questions_due_at_once_are_asked_one_after_the_other() -> None:
    view, out = renderer()
    send, receive = trio.open_memory_channel[str](0)

    async def read_line() -> str | None:
        return await receive.receive()

    ask = PromptAsker(view, read_line, echo=True)
    verdicts: dict[str, str] = {}

    async def asks(call: om.OmniMessage[om.ToolCallPayload]) -> None:
        verdicts[call.payload.tool_call_id] = await ask(call)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(asks, write_call("parent"))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(asks, om.with_origin(write_call("child"), CHILD))
        await trio.testing.wait_all_tasks_blocked()
        assert out.getvalue().count(PROMPT) == 1  # the child's question waits its turn
        await send.send("n\n")
        await trio.testing.wait_all_tasks_blocked()
        assert out.getvalue().count(PROMPT) == 2
        await send.send("y\n")
    assert verdicts == {"parent": "deny", "child": "allow"}
    assert ask.asked_about((), "parent")
    assert ask.asked_about((CHILD,), "child")
    assert not ask.asked_about((), "child")
    assert out.getvalue() == (
        f"● write_file: Write it (report.txt)\n{PROMPT}n\n  × [denied]\n"
        f"  │ ● write_file: Write it (report.txt)\n{PROMPT}y\n  │   ✓ [approved]\n"
    )


async def test_c5_2_the_label_sits_under_the_answer_before_what_came_meanwhile() -> None:
    """A result that arrived while ``penguin run``'s question waited is shown after the
    answer's label, and the session's own decision record shows no second label."""
    view, out = renderer()
    send, receive = trio.open_memory_channel[str](0)
    ask = PromptAsker(view, receive.receive, echo=True)
    view.show(write_call("c0"))
    verdicts: list[str] = []

    async def asks() -> None:
        verdicts.append(await ask(write_call("c1")))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(asks)
        await trio.testing.wait_all_tasks_blocked()
        view.show(om.tool_call_output("done", "c0"))  # the earlier call ends meanwhile
        assert "done" not in out.getvalue()  # held: the question stays where one types
        await send.send("y\n")
    view.show(om.approval_decision("allow", "c1"))
    assert verdicts == ["allow"]
    assert out.getvalue() == (
        "● write_file: Write it (report.txt)\n"
        f"● write_file: Write it (report.txt)\n{PROMPT}y\n"
        "  ✓ [approved]\n"
        "  ⎿ [write_file: Write it (report.txt)] completed: done\n"
    )


async def test_c5_1_run_s_question_on_a_terminal_takes_no_answer_in_its_first_300_ms(
    mock_clock: trio.testing.MockClock,
) -> None:
    """``penguin run`` on a terminal, as chat (C5.1): the type-ahead is dropped once the
    question is drawn, and a line within 300 ms of that is no answer (asked again)."""
    mock_clock.autojump_threshold = 0
    view, out = renderer()
    send, receive = trio.open_memory_channel[str](math.inf)
    discarded: list[float] = []

    async def read_line() -> str | None:
        return await receive.receive()

    def discard() -> None:  # what Controls.discard_typeahead does with its queue
        discarded.append(trio.current_time())
        while True:
            try:
                receive.receive_nowait()
            except trio.WouldBlock:
                return

    ask = PromptAsker(view, read_line, echo=False, guard=0.3, discard=discard)
    send.send_nowait("\n")  # typed while the model was thinking
    send.send_nowait("\n")
    verdicts: list[str] = []

    async def asks() -> None:
        verdicts.append(await ask(write_call()))

    async with trio.open_nursery() as nursery:
        start = trio.current_time()
        nursery.start_soon(asks)
        await trio.testing.wait_all_tasks_blocked()
        assert discarded == [start]  # the two Enters are gone
        await trio.sleep(0.29)
        await send.send("y\n")  # too soon: nobody has read it
        await trio.testing.wait_all_tasks_blocked()
        assert out.getvalue().count(PROMPT) == 2  # asked again
        assert verdicts == []
        await trio.sleep(0.02)
        await send.send("n\n")
    assert verdicts == ["deny"]
    # the terminal echoed each line the person typed; the label follows their "n"
    assert out.getvalue() == f"● write_file: Write it (report.txt)\n{PROMPT}{PROMPT}  × [denied]\n"


# ---------------------------------------------------------------------- the shared view


def test_a_policy_denial_shows_forbidden_in_either_record_form() -> None:
    old = om.approval_decision("deny", "c1", "rm-recursive-force")
    assert decision_verdict(old.payload) == "forbidden"
    new = om.approval_decision("forbidden", "c1", "rm-recursive-force")
    assert decision_verdict(new.payload) == "forbidden"
    assert decision_verdict(om.approval_decision("deny", "c1").payload) == "deny"
    view, out = renderer()
    view.show(write_call())
    view.show(old)
    assert out.getvalue().endswith(
        "  × [forbidden by policy] rule: rm-recursive-force\n"
    )  # named (issue 18)


def test_only_decisions_asked_about_or_not_allowed_are_labelled() -> None:
    view, out = renderer()
    view.show(write_call("quiet"))
    view.show(om.approval_decision("allow", "quiet"))  # allow-all: no label
    view.mark_asked((), "asked")
    view.show(write_call("asked"))
    view.show(om.approval_decision("allow", "asked"))
    assert out.getvalue().count("✓ [approved]") == 1


class Recorder:
    """A surface that records the calls a Renderer makes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def stream(self, text: str, style: Style) -> None:
        self.calls.append(("stream", text))

    def line(self, text: str, style: Style) -> None:
        self.calls.append(("line", text))

    def answer(self, text: str) -> None:
        self.calls.append(("answer", text))

    def question(self, text: str) -> None:
        self.calls.append(("question", text))

    def answered(self, line: str | None, *, echo: bool) -> None:
        self.calls.append(("answered", line))

    def call_started(self, key: CallKey, label: str) -> None:
        self.calls.append(("started", (key, label)))

    def call_ended(self, key: CallKey) -> None:
        self.calls.append(("ended", key))

    def end(self) -> None:
        self.calls.append(("end", None))


def test_a_surface_is_told_the_whole_answer_and_when_each_call_runs() -> None:
    surface = Recorder()
    view = Renderer(surface=surface)
    view.show(om.partial_text("delta", "Hel"))
    view.show(om.partial_text("delta", "lo"))
    view.show(om.assistant_text("Hello"))
    view.show(write_call())
    view.show(om.approval_decision("allow", "c1"))
    view.show(om.tool_call_output("done", "c1"))
    nested = om.with_origin(write_call("c2"), CHILD)
    view.show(nested)
    view.show(om.with_origin(om.approval_decision("allow", "c2"), CHILD))
    view.finish()
    assert surface.calls == [
        ("stream", "Hel"),
        ("stream", "lo"),
        ("answer", "Hello"),
        ("line", "● write_file: Write it (report.txt)"),
        ("started", (((), "c1"), "write_file: Write it (report.txt)")),
        ("line", "  ⎿ completed: done"),
        ("ended", ((), "c1")),
        ("line", "  │ ● write_file: Write it (report.txt)"),
        ("started", (((CHILD,), "c2"), "  │ write_file: Write it (report.txt)")),
        ("end", None),
    ]


def test_history_lines_show_each_message_call_and_answer_once() -> None:
    records: list[om.OmniMessage[om.Payload]] = [
        om.user_text("Create notes\nwith two lines"),
        om.user_text("[Background command finished]", harness=True),
        om.assistant_text("Creating it.\nMore detail."),
        write_call(),
        om.tool_call_output("Created", "c1"),
        om.with_origin(om.assistant_text("child work"), CHILD),
        om.assistant_text("All done."),
    ]
    assert history_lines(records) == [
        ("› Create notes (+1 lines)", "dim"),
        ("Creating it.", ""),
        ("● write_file: Write it (report.txt)", "call"),
        ("All done.", ""),
    ]


def test_task_stats_count_the_task_and_the_context_share() -> None:
    stats = TaskStats(context_window=10_000)
    first = om.TokenCounts(total=1200, output=200, cache_read=100)
    second = om.TokenCounts(total=2000, output=50)
    stats.observe(om.token_usage(first, first))
    stats.observe(om.with_origin(om.token_usage(second, second), CHILD))  # a subagent's
    stats.observe(om.token_usage(first + second, second))
    assert stats.line(2.34) == (
        "tokens 2,950 in · 250 out · 100 cached · context 2,000 of 10,000 (20%) · 2.3s"
    )
    assert TaskStats().line(1.0) == "tokens 0 in · 0 out · 0 cached · 1.0s"


def test_18_a_resumed_history_shows_denials_forbidden_calls_and_interrupts() -> None:
    records: list[om.OmniMessage[om.Payload]] = [
        om.user_text("Clean up"),
        write_call("c1"),
        om.approval_decision("deny", "c1"),
        write_call("c2"),
        om.approval_decision("forbidden", "c2", "rm-recursive-force"),
        write_call("c3"),
        om.approval_decision("allow", "c3"),
        om.abort(None),
    ]
    assert history_lines(records) == [
        ("› Clean up", "dim"),
        ("● write_file: Write it (report.txt)", "call"),
        ("  × [denied]", "error"),
        ("● write_file: Write it (report.txt)", "call"),
        ("  × [forbidden by policy] rule: rm-recursive-force", "error"),
        ("● write_file: Write it (report.txt)", "call"),
        ("[interrupted]", "warn"),
    ]


def test_18_a_compaction_summary_is_named_not_shown_as_its_marker() -> None:
    view, out = renderer()
    view.show(
        om.user_text("[context_summary]\nWe fixed the parser.\n[/context_summary]", harness=True)
    )
    assert out.getvalue() == "[context summary: We fixed the parser.]\n"
    assert harness_note("[notes]\n\nThe build finished.\nmore") == "The build finished."


def test_c5_3_previews_of_an_edit_a_write_and_a_command(tmp_path: Path) -> None:
    edit = om.tool_call(
        "edit_file",
        json.dumps(
            {"file_path": "a.py", "old_string": "x = 1\ny = 2", "new_string": "x = 1\ny = 3"}
        ),
        "e",
    )
    assert call_preview(edit.payload) == [
        ("     x = 1", ""),
        ("    -y = 2", "error"),
        ("    +y = 3", "ok"),
    ]
    (tmp_path / "n.txt").write_text("12345")
    write = om.tool_call("write_file", json.dumps({"file_path": "n.txt", "content": "a\nb\n"}), "w")
    assert call_preview(write.payload, tmp_path) == [
        ("    overwrites n.txt (5 bytes now)", "warn"),
        ("    + a", "ok"),
        ("    + b", "ok"),
    ]
    fresh = om.tool_call("write_file", json.dumps({"file_path": "new.txt", "content": "z"}), "f")
    assert call_preview(fresh.payload, tmp_path)[0] == ("    creates new.txt", "dim")
    cmd = "echo " + "x" * 150
    shown = call_preview(
        om.tool_call("exec_command", json.dumps({"cmd": cmd}), "c").payload, width=80
    )
    assert shown[0][0].startswith("  $ echo ")
    assert "".join(text[4:] for text, _ in shown) == cmd
    many = "\n".join(f"line {n}" for n in range(50))
    big = om.tool_call(
        "edit_file", json.dumps({"file_path": "a", "old_string": many, "new_string": "z"}), "b"
    )
    lines = call_preview(big.payload)
    assert len(lines) == PREVIEW_DIFF_LINES + 1
    assert lines[-1] == ("    (+11 lines)", "dim")


def test_c5_3_an_mcp_call_shows_every_argument_and_no_value_hides_the_next() -> None:
    """An MCP tool may take anything: its question lists every argument, a long value
    cut with the count of what is left, so a flag after a long text is still seen."""
    args = {"description": "Save", "path": "/x", "text": "a" * 1000, "force": True}
    lines = call_preview(om.tool_call("mcp__s__write", args, "m").payload, width=60)
    assert lines[0] == ("    path: /x", "")
    assert lines[1][0].startswith("    text: aaa")
    text = "".join(line.strip() for line, _ in lines[1:-1])
    assert text == f"text: {'a' * PREVIEW_VALUE_CHARS}…(+{1000 - PREVIEW_VALUE_CHARS} chars)"
    assert lines[-1] == ("    force: true", "")
    assert all(len(text) <= 60 for text, _ in lines)
    many = {f"k{n}": n for n in range(45)}
    listed = call_preview(om.tool_call("mcp__s__t", many, "n").payload)
    assert listed[0] == ("    k0: 0", "")
    assert listed[-1] == ("    (+5 more arguments)", "dim")
    assert call_preview(om.tool_call("read_file", {"file_path": "a"}, "r").payload) == []


def test_c5_2_control_characters_cannot_redraw_the_question() -> None:
    """``penguin run`` writes a call's line, a model's text and a tool's output with
    their control characters made inert: ``ESC [2K`` and ``\\r`` cannot erase the
    command and draw another in its place."""
    view, out = renderer()
    cmd = "rm -rf ~/work \x1b[2K\r  $ ls -la"
    view.show(om.partial_text("delta", "Listing \x1b[31mfiles\x1b]0;title\x07\n"))
    view.show(om.tool_call("exec_command", {"description": "list", "cmd": cmd}, "c1"))
    view.show(om.tool_call_output("done \x9b2J\x08\x08", "c1"))
    view.finish()
    shown = out.getvalue()
    assert "rm -rf ~/work" in shown
    for control in ("\x1b", "\r", "\x07", "\x08", "\x9b"):
        assert control not in shown, (control, shown)
    assert shown.splitlines()[1] == "● exec_command: list (rm -rf ~/work \ufffd[2K $ ls -la)"


def test_c5_2_a_result_names_its_call_when_another_came_between() -> None:
    view, out = renderer()
    view.show(write_call("a"))
    view.show(write_call("b"))
    view.show(om.tool_call_output("Created a", "a"))
    view.show(om.tool_call_output("Created b", "b"))
    view.show(write_call("c"))
    view.show(om.tool_call_output("Created c", "c"))
    assert out.getvalue().splitlines()[2:] == [
        "  ⎿ [write_file: Write it (report.txt)] completed: Created a",
        "  ⎿ [write_file: Write it (report.txt)] completed: Created b",
        "● write_file: Write it (report.txt)",
        "  ⎿ completed: Created c",
    ]
