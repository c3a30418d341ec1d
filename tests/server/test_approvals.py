"""The approval registry without sockets (S6.3, S6.5, S6.6, S6.8)."""

from __future__ import annotations

import trio
import trio.testing

from penguin import protocol as om
from penguin.server import ApprovalRegistry, PendingApproval

Call = om.OmniMessage[om.ToolCallPayload]


def call(call_id: str, *origin: str) -> Call:
    message = om.tool_call("exec_command", {"description": "d", "cmd": "ls"}, call_id)
    return om.with_origin(message, *origin) if origin else message


class Recorder:
    def __init__(self) -> None:
        self.requests: list[PendingApproval] = []
        self.resolved: list[tuple[str, str]] = []

    def registry(self) -> ApprovalRegistry:
        return ApprovalRegistry(self.requests.append, lambda i, v: self.resolved.append((i, v)))


async def ask_into(registry: ApprovalRegistry, message: Call, answers: list[str]) -> None:
    answer = await registry.ask(message)
    assert isinstance(answer, str)  # a plain answer comes back as the bare verdict
    answers.append(answer)


async def test_s6_3_a_manual_call_waits_without_timeout_until_answered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen = Recorder()
    registry = seen.registry()
    answers: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask_into, registry, call("c1"), answers)
        await trio.sleep(24 * 3600)  # a day: still waiting
        assert answers == []
        assert [p.tool_call_id for p in registry.pending] == ["c1"]
        assert [p.tool_call_id for p in seen.requests] == ["c1"]
        assert registry.answer("c1", "allow")
    assert answers == ["allow"]
    assert seen.resolved == [("c1", "allow")]
    assert len(registry) == 0


async def test_s6_3_the_first_answer_wins_and_a_second_finds_nothing() -> None:
    registry = Recorder().registry()
    answers: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask_into, registry, call("c1"), answers)
        await trio.testing.wait_all_tasks_blocked()
        assert registry.answer("c1", "deny")
        assert not registry.answer("c1", "allow")
    assert answers == ["deny"]
    assert not registry.answer("unknown", "allow")


async def test_s6_4_pending_calls_are_listed_in_the_order_asked() -> None:
    registry = Recorder().registry()
    answers: list[str] = []
    calls = {name: call(name) for name in ("b", "a", "c")}
    async with trio.open_nursery() as nursery:
        for asked in calls.values():
            nursery.start_soon(ask_into, registry, asked, answers)
            await trio.testing.wait_all_tasks_blocked()
        assert [p.tool_call_id for p in registry.pending] == ["b", "a", "c"]
        described = registry.pending[0].describe()
        assert described["origin"] is None
        # the same message (a second call("b") could carry the next millisecond's timestamp)
        assert described["toolCall"] == om.to_dict(calls["b"])
        registry.deny_all()
    assert answers == ["deny", "deny", "deny"]


async def test_s6_5_a_subagent_call_is_pending_under_its_id_with_the_origin() -> None:
    registry = Recorder().registry()
    answers: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask_into, registry, call("call_1", "session-child"), answers)
        await trio.testing.wait_all_tasks_blocked()
        (pending,) = registry.pending
        assert pending.describe()["origin"] == ["session-child"]
        assert registry.answer("call_1", "allow")
    assert answers == ["allow"]


async def test_s6_5_the_same_call_asked_twice_waits_on_one_entry() -> None:
    seen = Recorder()
    registry = seen.registry()
    answers: list[str] = []
    async with trio.open_nursery() as nursery:
        for _ in range(2):
            nursery.start_soon(ask_into, registry, call("c", "child"), answers)
        await trio.testing.wait_all_tasks_blocked()
        assert len(registry) == 1
        assert len(seen.requests) == 1
        registry.answer("c", "allow")
    assert answers == ["allow", "allow"]


async def test_s6_6_deny_all_and_close_deny_now_and_later() -> None:
    seen = Recorder()
    registry = seen.registry()
    answers: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask_into, registry, call("x"), answers)
        nursery.start_soon(ask_into, registry, call("y"), answers)
        await trio.testing.wait_all_tasks_blocked()
        registry.close()
    assert answers == ["deny", "deny"]
    assert sorted(seen.resolved) == [("x", "deny"), ("y", "deny")]
    assert await registry.ask(call("z")) == "deny"
    assert sorted(p.tool_call_id for p in seen.requests) == ["x", "y"]


async def test_s6_8_a_withdrawn_call_is_reported_resolved_once() -> None:
    seen = Recorder()
    registry = seen.registry()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(registry.ask, call("w"))
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert len(registry) == 0
    assert seen.resolved == [("w", "deny")]
    assert not registry.answer("w", "allow")
