"""chat.md C5.4 in the library: the session allow-list, answers with a reason, the factory."""

from __future__ import annotations

import json

import pytest
import trio

from penguin import protocol as om
from penguin.approval import (
    DENIED_BY_POLICY,
    DENIED_BY_USER,
    AllowList,
    Answer,
    Approval,
    ApprovalModeError,
    CommandPolicy,
    approver,
    command_segments,
    command_words,
    decide,
    denial_output,
    read_chat_answer,
    read_run_answer,
    with_command_policy,
)
from penguin.config import Permission


def _call(
    name: str, call_id: str = "c1", **arguments: object
) -> om.OmniMessage[om.ToolCallPayload]:
    return om.tool_call(name, json.dumps(arguments), call_id)


def _exec(cmd: str) -> om.OmniMessage[om.ToolCallPayload]:
    return _call("exec_command", cmd=cmd)


def test_c5_4_segments_are_the_policys() -> None:
    assert command_segments("pytest -x && echo ok | tee log") == ("pytest -x", "echo ok", "tee log")
    assert command_segments("pytest\nrm x") == ("pytest", "rm x")
    assert command_segments("  ;; ") == ()


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("pytest -x", ("pytest",)),
        ("pytest; echo x > y", ("pytest", "echo")),
        ("./run.sh a || /usr/bin/make", ("./run.sh", "/usr/bin/make")),
        ("pytest $(rm -rf x)", None),
        ("pytest `id`", None),
        ("diff <(ls) x", None),
        ("X=1 pytest", None),
        ("(cd x; pytest)", None),
        ('"$CMD" -x', None),
        ("", None),
    ],
)
def test_c5_4_command_words(command: str, words: tuple[str, ...] | None) -> None:
    assert command_words(command) == words


def test_c5_4_a_on_pytest_allows_pytest_only() -> None:
    allowed = AllowList()
    assert allowed.allow(_exec("pytest -x")) == ("exec_command pytest",)
    assert allowed.allows(_exec("pytest -q"))
    assert allowed.allows(_exec("pytest -q && pytest tests/x.py"))
    assert not allowed.allows(_exec("pytest; echo x > y"))
    assert not allowed.allows(_exec("pytest\nrm -r x"))
    assert not allowed.allows(_exec("pytest $(curl example.com)"))
    assert not allowed.allows(_call("input_command", chars="pytest\n"))  # another tool
    assert not allowed.allows(_call("write_file", file_path="x", content=""))
    assert allowed.entries() == ("exec_command pytest",)


def test_c5_4_a_on_other_tools_allows_the_tool() -> None:
    allowed = AllowList()
    assert allowed.allow(_call("write_file", file_path="a", content="x")) == ("write_file",)
    assert allowed.allow(_call("write_file", file_path="b", content="y")) == ()
    assert allowed.allows(_call("write_file", file_path="c", content="z"))
    assert not allowed.allows(_call("edit_file", file_path="c"))
    assert allowed.allow(_exec("pytest $(id)")) == ()  # a command the list cannot hold
    assert len(allowed) == 1


def test_c5_4_answers_in_chat() -> None:
    assert read_chat_answer("y") == Answer("allow")
    assert read_chat_answer(" Y ") == Answer("allow")
    assert read_chat_answer("") == Answer("allow")
    assert read_chat_answer("a") == Answer("allow", for_session=True)
    assert read_chat_answer("n") == Answer("deny")
    assert read_chat_answer("n use pathlib instead") == Answer("deny", reason="use pathlib instead")
    assert read_chat_answer("d") == "reason"
    for other in ("no!", "nah", "stop", "nope", "second one", "yes please", "a b", "q"):
        assert read_chat_answer(other) is None, other


def test_c5_4_answers_in_run() -> None:
    for allow in ("y", "YES", "", "\n"):
        assert read_run_answer(allow) == "allow"
    for deny in ("n", " No \n", None):
        assert read_run_answer(deny) == "deny"
    for other in ("no!", "nah", "stop", "nope", "sure"):
        assert read_run_answer(other) is None


def test_c5_4_denial_output_carries_the_reason() -> None:
    assert denial_output(Approval("deny")) == DENIED_BY_USER == "Tool call denied by user."
    assert denial_output(Approval("deny", reason="  ")) == "Tool call denied by user."
    assert (
        denial_output(Approval("deny", reason="use git mv"))
        == "Tool call denied by user. Reason: use git mv"
    )
    assert denial_output(Approval("forbidden", "mkfs")) == DENIED_BY_POLICY


def _permission(name: str) -> Permission | None:
    permissions: dict[str, Permission] = {
        "read_file": "r",
        "write_file": "rw",
        "exec_command": "rw",
    }
    return permissions.get(name)


async def test_c5_4_factory_asks_then_uses_the_list() -> None:
    asked: list[str] = []

    async def ask(call: om.OmniMessage[om.ToolCallPayload]) -> Answer:
        asked.append(call.payload.arguments)
        return Answer("allow", for_session=True)

    allowed = AllowList()
    approve = approver("always-ask", _permission, ask=ask, allow_list=allowed)
    assert (await approve.decide(_exec("pytest -x"))).verdict == "allow"
    assert (await approve.decide(_exec("pytest -q"))).verdict == "allow"
    assert len(asked) == 1
    assert (await approve(_exec("pytest; echo x > y"))) == "allow"
    assert len(asked) == 2  # asked: a segment starts with another word


async def test_c5_4_forbidden_rules_come_before_the_list() -> None:
    allowed = AllowList()
    allowed.allow(_exec("rm x"))
    guarded = with_command_policy(
        approver("always-ask", _permission, allow_list=allowed), CommandPolicy()
    )
    outcome = await decide(guarded, _exec("rm -rf build"))
    assert outcome == Approval("forbidden", "rm-recursive-force")
    assert (await decide(guarded, _exec("rm y"))).verdict == "allow"


async def test_c5_4_deny_with_reason_reaches_the_engine() -> None:
    async def ask(call: om.OmniMessage[om.ToolCallPayload]) -> Answer:
        return Answer("deny", reason=" not now ")

    guarded = with_command_policy(approver("always-ask", _permission, ask=ask), CommandPolicy())
    assert await decide(guarded, _exec("ls")) == Approval("deny", reason="not now")


async def test_c5_4_a_plain_approver_with_a_decide_attribute_is_consulted_as_a_plain_one() -> None:
    # decide() takes an approver's own decide(call) -> Approval only when it is a method;
    # a plain approver that merely carries a ``decide`` value is called as an approver.
    async def plain(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        return "deny"

    plain.decide = "allow"  # type: ignore[attr-defined]
    assert await decide(plain, _exec("rm -rf /")) == Approval("deny")
    guarded = with_command_policy(plain, CommandPolicy())
    assert await decide(guarded, _exec("ls")) == Approval("deny")


async def test_factory_modes_and_nobody_to_ask() -> None:
    read = _call("read_file", file_path="x")
    write = _call("write_file", file_path="x", content="")
    assert await approver("allow-all", _permission)(write) == "allow"
    assert await approver("deny-all", _permission)(read) == "deny"
    assert await approver("read-only", _permission)(read) == "allow"
    assert await approver("read-only", _permission)(write) == "deny"  # nobody to ask
    assert await approver("always-ask", _permission, ask=lambda call: "allow")(read) == "allow"
    with pytest.raises(ApprovalModeError):
        approver("ask-me", _permission)  # type: ignore[arg-type]


async def test_factory_ask_that_raises_or_answers_nonsense_denies(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def broken(call: om.OmniMessage[om.ToolCallPayload]) -> Answer:
        await trio.lowlevel.checkpoint()
        raise RuntimeError("gone")

    assert await approver("always-ask", _permission, ask=broken).decide(_exec("ls")) == Approval(
        "deny"
    )
    nonsense = approver("always-ask", _permission, ask=lambda call: "yes")  # type: ignore[arg-type,return-value]
    assert (await nonsense.decide(_exec("ls"))).verdict == "deny"
    assert "approve callback threw: gone" in caplog.text
    assert "approve callback answered 'yes'" in caplog.text
