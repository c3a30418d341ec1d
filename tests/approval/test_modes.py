"""Reference 5.6: the four approval modes of ``--approve``."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

import penguin
from penguin import protocol as om
from penguin.approval import (
    APPROVAL_MODES,
    DEFAULT_APPROVAL_MODE,
    ApprovalMode,
    ApprovalModeError,
    approver_for_mode,
    consult,
    parse_approval_mode,
)
from penguin.config import Permission

PERMISSIONS: dict[str, Permission | None] = {
    "read_file": "r",
    "read_image": "r",
    "write_file": "rw",
    "exec_command": "rw",
    "no_permission_tool": None,
}


def permission(name: str) -> Permission | None:
    return PERMISSIONS.get(name)


def call(name: str) -> om.OmniMessage[om.ToolCallPayload]:
    return om.tool_call(name, {}, f"call_{name}")


class Asker:
    """A stand-in for the interactive prompt: answers ``verdict`` and records who asked."""

    def __init__(self, verdict: om.ApprovalVerdict = "allow") -> None:
        self.verdict = verdict
        self.asked: list[str] = []

    async def __call__(self, tool_call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        await trio.lowlevel.checkpoint()
        self.asked.append(tool_call.payload.name)
        return self.verdict


def test_5_6_modes_and_default() -> None:
    assert APPROVAL_MODES == ("allow-all", "deny-all", "read-only", "always-ask")
    assert DEFAULT_APPROVAL_MODE == "allow-all"


@pytest.mark.parametrize(
    ("text", "mode"),
    [
        ("allow-all", "allow-all"),
        ("deny-all", "deny-all"),
        ("read-only", "read-only"),
        ("always-ask", "always-ask"),
        (" Read-Only ", "read-only"),
        ("ALWAYS-ASK\n", "always-ask"),
        ("\tDeny-All", "deny-all"),
    ],
)
def test_5_6_mode_is_trimmed_and_lowercased(text: str, mode: ApprovalMode) -> None:
    assert parse_approval_mode(text) == mode


@pytest.mark.parametrize("text", ["", "allow", "yolo", "read only", "allow_all", " Nope "])
def test_5_6_invalid_mode_message(text: str) -> None:
    with pytest.raises(ApprovalModeError) as caught:
        parse_approval_mode(text)
    assert str(caught.value) == (
        f'Invalid approval mode "{text}". Use allow-all, deny-all, read-only, or always-ask.'
    )
    assert caught.value.value == text
    assert isinstance(caught.value, ValueError)


@given(st.text())
def test_5_6_parse_accepts_exactly_the_four_modes(text: str) -> None:
    try:
        mode = parse_approval_mode(text)
    except ApprovalModeError:
        assert text.strip().lower() not in APPROVAL_MODES
    else:
        assert mode == text.strip().lower()


async def test_5_6_allow_all_and_deny_all_never_ask() -> None:
    asker = Asker("deny")
    allow_all = approver_for_mode("allow-all", ask=asker, permission=permission)
    deny_all = approver_for_mode("deny-all", ask=asker, permission=permission)
    for name in PERMISSIONS:
        assert await consult(allow_all, call(name)) == "allow"
        assert await consult(deny_all, call(name)) == "deny"
    assert asker.asked == []


async def test_5_6_read_only_allows_r_tools_without_asking() -> None:
    asker = Asker("deny")
    read_only = approver_for_mode("read-only", ask=asker, permission=permission)
    assert await consult(read_only, call("read_file")) == "allow"
    assert await consult(read_only, call("read_image")) == "allow"
    assert asker.asked == []


@pytest.mark.parametrize("verdict", ["allow", "deny"])
async def test_5_6_read_only_asks_for_rw_unknown_and_permissionless(
    verdict: om.ApprovalVerdict,
) -> None:
    asker = Asker(verdict)
    read_only = approver_for_mode("read-only", ask=asker, permission=permission)
    for name in ("write_file", "exec_command", "unknown_tool", "no_permission_tool"):
        assert await consult(read_only, call(name)) == verdict
    assert asker.asked == ["write_file", "exec_command", "unknown_tool", "no_permission_tool"]


async def test_5_6_always_ask_asks_for_everything() -> None:
    asker = Asker("deny")
    always_ask = approver_for_mode("always-ask", ask=asker, permission=permission)
    for name in PERMISSIONS:
        assert await consult(always_ask, call(name)) == "deny"
    assert asker.asked == list(PERMISSIONS)


async def test_5_6_sync_ask_is_accepted() -> None:
    def ask(tool_call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        return "deny"

    always_ask = approver_for_mode("always-ask", ask=ask, permission=permission)
    assert await consult(always_ask, call("read_file")) == "deny"


async def test_5_6_read_only_uses_the_environment_permission_lookup(tmp_path: Path) -> None:
    config = penguin.EnvironmentConfig(workspace_dir=tmp_path)
    async with penguin.Environment.open(config) as env:
        asker = Asker("deny")
        read_only = approver_for_mode("read-only", ask=asker, permission=env.tool_permission)
        assert await consult(read_only, call("read_file")) == "allow"
        assert await consult(read_only, call("exec_command")) == "deny"
        assert await consult(read_only, call("no_such_tool")) == "deny"
        assert asker.asked == ["exec_command", "no_such_tool"]


async def test_5_6_failing_prompt_denies_through_consult() -> None:
    def ask(tool_call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        raise EOFError("stdin closed")

    always_ask = approver_for_mode("always-ask", ask=ask, permission=permission)
    assert await consult(always_ask, call("read_file")) == "deny"


def test_5_6_unknown_mode_is_rejected_at_construction() -> None:
    with pytest.raises(ApprovalModeError):
        approver_for_mode("sometimes", ask=Asker(), permission=permission)  # type: ignore[arg-type]
