"""Approval in the loop (reference 5.1-5.5): denials, command policy, absent or broken approvers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
import trio.testing

from penguin import protocol as om
from penguin.approval import CommandPolicy
from penguin.config import ToolDefinitionConfig, default_tools
from penguin.llm import ScriptedLLM, pause, tool_call, turn

from .support import Message, allow_all, kind, open_harness, run_task, texts


def of_call(messages: list[Message], call_id: str) -> list[Message]:
    """The complete messages and events about one call."""
    return [
        m
        for m in messages
        if not om.is_partial(m) and getattr(m.payload, "tool_call_id", None) == call_id
    ]


def exec_entry() -> list[ToolDefinitionConfig]:
    return [entry for entry in default_tools() if entry.name == "exec_command"]


async def test_a_denied_call_gets_one_complete_aborted_output_and_no_partials(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM([turn(tool_call("probe", {}, "c1")), "understood"])

    def deny(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        return "deny"

    async with open_harness(tmp_path, llm) as h:
        seen, result = await run_task(h.engine, "go", approve=deny)
        records = await h.trace()
    assert result.status == "completed"
    assert h.probe.runs == []
    about = of_call(seen, "c1")[1:]
    assert [om.to_dict(m)["payload"] for m in about] == [
        {"type": "approval_decision", "decision": "deny", "tool_call_id": "c1"},
        {
            "type": "tool_call_output",
            "role": "user",
            "output": "Tool call denied by user.",
            "tool_call_id": "c1",
            "stop_reason": "aborted",
        },
    ]
    assert not any(kind(m).startswith("partial_tool_call_output") for m in seen)
    # Traced, and fed back to the model.
    assert [kind(m) for m in of_call(records, "c1")] == [
        "tool_call",
        "approval_decision",
        "tool_call_output",
    ]
    assert om.to_dict(llm.requests[1].messages[-1]) == om.to_dict(about[1])


async def test_the_command_policy_forbids_rm_rf_even_with_an_allow_all_approver(
    tmp_path: Path,
) -> None:
    arguments = {"description": "wipe", "cmd": "rm -rf /"}
    llm = ScriptedLLM([turn(tool_call("exec_command", arguments, "c1")), "ok"])
    asked: list[str] = []

    def approver(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        asked.append(call.payload.tool_call_id)
        return "allow"

    async with open_harness(tmp_path, llm, tools=exec_entry(), command_policy=CommandPolicy()) as h:
        seen, result = await run_task(h.engine, "go", approve=approver)
    assert result.status == "completed"
    assert asked == []  # the policy answers without consulting the approver
    decision, output = [m.payload for m in of_call(seen, "c1")][1:]
    assert decision == om.ApprovalDecisionPayload(
        decision="forbidden", tool_call_id="c1", policy_rule="rm-recursive-force"
    )
    assert isinstance(output, om.ToolCallOutputPayload)
    assert (output.output, output.stop_reason) == ("Tool call denied by policy.", "aborted")


async def test_the_command_policy_lets_other_calls_through_to_the_approver(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM([turn(tool_call("probe", {"text": "rm -rf /"}, "c1")), "ok"])
    async with open_harness(tmp_path, llm, command_policy=CommandPolicy()) as h:
        seen, _ = await run_task(h.engine, "go", approve=allow_all)
    decision = of_call(seen, "c1")[-1].payload
    assert isinstance(decision, om.ToolCallOutputPayload)
    assert decision.output == "rm -rf /"


async def test_no_approver_denies_every_call(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM([turn(tool_call("probe", {}, "a"), tool_call("probe", {}, "b")), "ok"])
    async with open_harness(tmp_path, llm) as h:
        seen, result = await run_task(h.engine, "go")
    assert result.status == "completed"
    assert h.probe.runs == []
    outputs = [m.payload for m in seen if isinstance(m.payload, om.ToolCallOutputPayload)]
    assert [(o.tool_call_id, o.output) for o in outputs] == [
        ("a", "Tool call denied by user."),
        ("b", "Tool call denied by user."),
    ]


async def test_a_raising_approver_denies_with_a_stderr_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock
) -> None:
    def broken(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        raise RuntimeError("approver exploded")

    llm = ScriptedLLM([turn(tool_call("probe", {}, "c1")), "ok"])
    async with open_harness(tmp_path, llm) as h:
        seen, result = await run_task(h.engine, "go", approve=broken)
    assert result.status == "completed"
    assert h.probe.runs == []
    assert "[penguin] approve callback threw: approver exploded; denying." in caplog.messages
    decision = of_call(seen, "c1")[1].payload
    assert isinstance(decision, om.ApprovalDecisionPayload)
    assert decision.decision == "deny"


async def test_an_interrupt_while_waiting_for_approval_records_no_decision_and_runs_nothing(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    interrupt = trio.Event()
    asked: list[str] = []

    async def hesitant(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        asked.append(call.payload.tool_call_id)
        await trio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    # The model's turn is committed; the first approval hangs; then the user interrupts.
    llm = ScriptedLLM([turn(tool_call("probe", {}, "a"), tool_call("probe", {}, "b"))])
    async with open_harness(tmp_path, llm) as h:
        async with h.engine.run([om.user_text("go")], approve=hesitant, interrupt=interrupt) as s:
            async for message in s:
                if kind(message) == "request_end:completed":
                    await trio.testing.wait_all_tasks_blocked()
                    interrupt.set()
        records = await h.trace()
        carried = h.engine.ledger.carry_over()
    assert s.result.status == "aborted"
    assert asked == ["a"]
    assert h.probe.runs == []
    assert not any(kind(m) == "approval_decision" for m in records)
    assert kind(records[-1]) == "abort"
    # The committed calls are answered with placeholders in the carry-over, in call order.
    assert [om.to_dict(m)["payload"] for m in carried] == [
        {
            "type": "tool_call_output",
            "role": "user",
            "output": "[interrupted: tool aborted by user]",
            "tool_call_id": call_id,
            "stop_reason": "aborted",
        }
        for call_id in ("a", "b")
    ]


async def test_an_interrupt_mid_stream_drops_the_approvals_still_queued(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    interrupt = trio.Event()
    asked: list[str] = []

    async def hesitant(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        asked.append(call.payload.tool_call_id)
        interrupt.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    llm = ScriptedLLM([turn(tool_call("probe", {}, "a"), pause(5), tool_call("probe", {}, "b"))])
    async with open_harness(tmp_path, llm) as h:
        seen, result = await run_task(h.engine, "go", approve=hesitant, interrupt=interrupt)
        carried = h.engine.ledger.carry_over()
    assert result.status == "aborted"
    assert asked == ["a"]
    assert h.probe.runs == []
    assert [kind(m) for m in seen[-2:]] == ["request_end:aborted", "abort"]
    assert not any(kind(m) == "approval_decision" for m in seen)
    # An uncommitted turn: the input again, and what the model had produced.
    assert texts(carried) == [
        "go",
        '[turn_aborted]\n  [tool_call name="probe" id="a"]{}[/tool_call]\n[/turn_aborted]',
    ]


async def test_an_async_approver_may_answer_forbidden_without_a_policy_rule(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def strict(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        await trio.sleep(0.5)
        return "forbidden"

    llm = ScriptedLLM([turn(tool_call("probe", {}, "c1")), "ok"])
    async with open_harness(tmp_path, llm) as h:
        seen, _ = await run_task(h.engine, "go", approve=strict)
    decision, output = [m.payload for m in of_call(seen, "c1")][1:]
    assert decision == om.ApprovalDecisionPayload(decision="forbidden", tool_call_id="c1")
    assert json.loads(om.dumps(of_call(seen, "c1")[1]))["payload"] == {
        "type": "approval_decision",
        "decision": "forbidden",
        "tool_call_id": "c1",
    }
    assert isinstance(output, om.ToolCallOutputPayload)
    assert output.output == "Tool call denied by policy."
