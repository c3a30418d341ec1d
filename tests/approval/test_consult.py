"""Reference 5.2 and 5.5: consulting an approver, and the command-policy wrapper."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import pytest
import trio

from penguin import protocol as om
from penguin.approval import (
    Approval,
    CommandPolicy,
    PolicyApprover,
    PolicyRule,
    approver_for_mode,
    consult,
    decide,
    with_command_policy,
)

CALL = om.tool_call("read_file", {"file_path": "README.md"}, "call_1")
DANGER = om.tool_call("exec_command", {"description": "d", "cmd": "sudo rm -rf /"}, "call_2")
SAFE = om.tool_call("exec_command", {"description": "d", "cmd": "ls"}, "call_3")


def penguin_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "penguin"]


def sync_approver(verdict: om.ApprovalVerdict) -> om.ApproveFn:
    def approve(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        return verdict

    return approve


def async_approver(verdict: om.ApprovalVerdict) -> om.ApproveFn:
    async def approve(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        await trio.lowlevel.checkpoint()
        return verdict

    return approve


class Recorder:
    """An approver that remembers the calls it was asked about."""

    def __init__(self, verdict: om.ApprovalVerdict) -> None:
        self.verdict = verdict
        self.calls: list[om.OmniMessage[om.ToolCallPayload]] = []

    async def __call__(self, call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        self.calls.append(call)
        return self.verdict


MAKERS: list[Callable[[om.ApprovalVerdict], om.ApproveFn]] = [sync_approver, async_approver]


# --------------------------------------------------------------------------- consult


async def test_5_2_no_approver_denies(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="penguin")
    assert await consult(None, CALL) == "deny"
    assert await consult(None, DANGER) == "deny"
    assert penguin_warnings(caplog) == []


@pytest.mark.parametrize("make", MAKERS)
@pytest.mark.parametrize("verdict", ["allow", "deny", "forbidden"])
async def test_5_2_sync_and_async_approvers_are_consulted(
    make: Callable[[om.ApprovalVerdict], om.ApproveFn], verdict: om.ApprovalVerdict
) -> None:
    assert await consult(make(verdict), CALL) == verdict


async def test_5_2_approver_receives_the_call() -> None:
    recorder = Recorder("allow")
    await consult(recorder, CALL)
    assert recorder.calls == [CALL]


async def test_5_2_raising_approver_denies_with_stderr_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="penguin")

    def sync_boom(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        raise RuntimeError("prompt closed")

    async def async_boom(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        await trio.lowlevel.checkpoint()
        raise ValueError("no terminal")

    assert await consult(sync_boom, CALL) == "deny"
    assert await consult(async_boom, CALL) == "deny"
    assert penguin_warnings(caplog) == [
        "[penguin] approve callback threw: prompt closed; denying.",
        "[penguin] approve callback threw: no terminal; denying.",
    ]


async def test_5_2_raising_approver_without_message_names_the_exception(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="penguin")

    def boom(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        raise LookupError

    assert await consult(boom, CALL) == "deny"
    assert penguin_warnings(caplog) == ["[penguin] approve callback threw: LookupError; denying."]


async def test_5_2_cancellation_while_waiting_propagates() -> None:
    async def slow(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    with trio.move_on_after(0.01) as scope:
        await consult(slow, CALL)
    assert scope.cancelled_caught


async def test_5_2_keyboard_interrupt_propagates() -> None:
    def interrupted(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        await consult(interrupted, CALL)


@pytest.mark.parametrize("answer", [True, None, "yes", "Allow", " allow", 1, b"allow", ["allow"]])
async def test_5_2_answer_that_is_not_a_verdict_denies_with_stderr_line(
    answer: object, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="penguin")

    def odd(call: om.OmniMessage[om.ToolCallPayload]) -> object:
        return answer

    assert await consult(odd, CALL) == "deny"  # type: ignore[arg-type]
    [line] = penguin_warnings(caplog)
    assert line == (
        f"[penguin] approve callback answered {answer!r}, which is not "
        '"allow", "deny" or "forbidden"; denying.'
    )


async def test_5_2_answer_repr_is_kept_short(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="penguin")

    async def chatty(call: om.OmniMessage[om.ToolCallPayload]) -> object:
        return "x" * 10_000

    assert await consult(chatty, CALL) == "deny"  # type: ignore[arg-type]
    [line] = penguin_warnings(caplog)
    assert len(line) < 200


# ------------------------------------------------------------------- the policy wrapper


async def test_5_5_policy_outranks_allow_all() -> None:
    allow_all = approver_for_mode("allow-all", ask=sync_approver("deny"), permission=lambda _: None)
    guarded = with_command_policy(allow_all, CommandPolicy())
    assert await consult(guarded, DANGER) == "forbidden"
    assert await consult(guarded, SAFE) == "allow"
    assert await guarded(DANGER) == "forbidden"


async def test_5_5_matching_rule_does_not_consult_the_wrapped_approver() -> None:
    recorder = Recorder("allow")
    guarded = with_command_policy(recorder, CommandPolicy())
    assert await guarded.decide(DANGER) == Approval("forbidden", "rm-recursive-force")
    assert recorder.calls == []
    assert await guarded.decide(SAFE) == Approval("allow", None)
    assert recorder.calls == [SAFE]


@pytest.mark.parametrize("make", MAKERS)
@pytest.mark.parametrize("verdict", ["allow", "deny", "forbidden"])
async def test_5_5_unmatched_calls_get_the_wrapped_verdict(
    make: Callable[[om.ApprovalVerdict], om.ApproveFn], verdict: om.ApprovalVerdict
) -> None:
    guarded = with_command_policy(make(verdict), CommandPolicy())
    assert await guarded.decide(SAFE) == Approval(verdict)
    assert await guarded.decide(CALL) == Approval(verdict)


async def test_5_5_wrapped_none_still_denies_and_policy_still_forbids() -> None:
    guarded = with_command_policy(None, CommandPolicy())
    assert await guarded.decide(SAFE) == Approval("deny")
    assert await guarded.decide(DANGER) == Approval("forbidden", "rm-recursive-force")


async def test_5_5_wrapped_raising_approver_denies_with_stderr_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="penguin")

    def boom(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        raise RuntimeError("bad")

    guarded = with_command_policy(boom, CommandPolicy())
    assert await guarded(SAFE) == "deny"
    assert penguin_warnings(caplog) == ["[penguin] approve callback threw: bad; denying."]


async def test_5_5_disabled_policy_delegates_everything() -> None:
    recorder = Recorder("allow")
    guarded = with_command_policy(recorder, CommandPolicy(enabled=False))
    assert await guarded.decide(DANGER) == Approval("allow")
    assert recorder.calls == [DANGER]


async def test_5_5_nested_wrappers_report_the_rule_that_fired() -> None:
    # 5.8: a child session wraps its parent's (already wrapped) approver again.
    parent = with_command_policy(
        sync_approver("allow"), CommandPolicy(rules=[PolicyRule("parent-rule", "^make deploy")])
    )
    child = with_command_policy(parent, CommandPolicy())
    deploy = om.tool_call("exec_command", {"cmd": "make deploy"}, "c")
    assert await child.decide(deploy) == Approval("forbidden", "parent-rule")
    assert await child.decide(DANGER) == Approval("forbidden", "rm-recursive-force")
    assert await child.decide(SAFE) == Approval("allow")
    assert await decide(child, deploy) == Approval("forbidden", "parent-rule")


async def test_5_5_decide_on_plain_approvers_has_no_rule() -> None:
    assert await decide(sync_approver("forbidden"), DANGER) == Approval("forbidden", None)
    assert await decide(None, CALL) == Approval("deny")


def test_5_5_policy_approver_is_an_approve_fn() -> None:
    guarded: om.ApproveFn = with_command_policy(None, CommandPolicy())
    assert isinstance(guarded, PolicyApprover)
    awaitable: Awaitable[om.ApprovalVerdict] = PolicyApprover(None, CommandPolicy())(CALL)
    assert isinstance(awaitable, Awaitable)
    awaitable.close()  # type: ignore[attr-defined]
