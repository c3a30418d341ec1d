"""The terminal view of a run, fed messages directly (the renderer is sans-IO)."""

from __future__ import annotations

import io

import trio
import trio.testing

from penguin import protocol as om
from penguin.approval import PROMPT
from penguin.cli._render import Renderer, call_summary
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
        f"● write_file: Write it (report.txt)\n{PROMPT}n\n"
        f"  │ ● write_file: Write it (report.txt)\n{PROMPT}y\n"
    )
