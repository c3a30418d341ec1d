"""The subagent supervisor (reference 4.2, 4.4, 4.6, 4.12, 5.8, 3.13) driven with fake children."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import attrs
import pytest
import trio
import trio.testing

from penguin import protocol as om
from penguin.environment import BackgroundReport, SubagentRequest
from penguin.environment.supervisor import (
    MESSAGE_BUFFER_CAP,
    MessageTap,
    RoundExit,
    SubagentSession,
    SubagentSupervisor,
    round_exit,
)

from ..children import FakeResult, FakeRunner, RoundContext

Message = om.OmniMessage[om.Payload]
ToolCall = om.OmniMessage[om.ToolCallPayload]


@attrs.define
class Harness:
    supervisor: SubagentSupervisor
    runner: FakeRunner
    reports: list[BackgroundReport]

    async def spawn(self) -> SubagentSession:
        return await self.supervisor.spawn(self.runner, SubagentRequest())


@asynccontextmanager
async def open_supervisor(runner: FakeRunner, **options: int) -> AsyncIterator[Harness]:
    reports: list[BackgroundReport] = []
    async with trio.open_nursery() as nursery:
        supervisor = SubagentSupervisor(nursery, post_report=reports.append, **options)
        try:
            yield Harness(supervisor, runner, reports)
        finally:
            await supervisor.aclose()
            nursery.cancel_scope.cancel()


async def until(condition: Callable[[], bool]) -> None:
    """Wait until ``condition()`` holds: polled in virtual time, for states with no event."""
    with trio.fail_after(60):
        while not condition():  # noqa: ASYNC110 - e.g. a count of queued approvals
            await trio.sleep(0.001)


async def ignore(text: str) -> None:
    await trio.lowlevel.checkpoint()


async def drop(message: Message) -> None:
    await trio.lowlevel.checkpoint()


# --------------------------------------------------------------------------- pure parts


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"status": "completed", "wrote_text": True}, RoundExit("completed")),
        (
            {"status": "completed"},
            RoundExit("completed", "[subagent finished without a text answer]"),
        ),
        (
            {"status": "aborted", "abort_reason": "aborted", "wrote_text": True},
            RoundExit("failed", "[subagent aborted: aborted]"),
        ),
        ({"status": None, "error": "boom"}, RoundExit("failed", "[subagent error: boom]")),
        (
            {"status": "failed", "error_message": "HTTP 500"},
            RoundExit("failed", "[subagent aborted: HTTP 500]"),
        ),
        ({"status": "max_turns"}, RoundExit("failed", "[subagent aborted: max_turns]")),
    ],
)
def test_3_8_4_round_exit(kwargs: dict[str, object], expected: RoundExit) -> None:
    assert round_exit(**kwargs) == expected  # type: ignore[arg-type]


async def test_message_tap_keeps_the_newest() -> None:
    tap = MessageTap(capacity=3)
    for index in range(5):
        tap(om.user_text(str(index)))
    kept = [tap.receive.receive_nowait().payload for _ in range(3)]
    assert [p.text for p in kept if isinstance(p, om.TextPayload)] == ["2", "3", "4"]
    tap.close()
    tap(om.user_text("after close"))  # ignored, never raises


# --------------------------------------------------------------------------- the cap (4.2)


async def test_4_2_cap_evicts_only_idle_sessions_in_registration_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def quick_or_blocking(ctx: RoundContext) -> FakeResult | None:
        if ctx.prompt == "block":
            return await ctx.block()
        await ctx.say("ok")
        return None

    runner = FakeRunner(quick_or_blocking)
    async with open_supervisor(runner) as h:
        sessions = []
        for index in range(8):
            session = await h.spawn()
            session.start_round("quick" if index in (2, 5) else "block")
            h.supervisor.register(session)
            sessions.append(session)
        await until(lambda: not sessions[2].running and not sessions[5].running)
        # Full: the first idle session in registration order goes, and only it.
        assert h.supervisor.make_room()
        assert sessions[2].killed
        assert sessions[2].subagent_id not in h.supervisor._registry
        assert h.supervisor.make_room()  # 7 registered: room without evicting
        assert not sessions[5].killed
        h.supervisor.register(await h.spawn())
        assert h.supervisor.make_room()
        assert sessions[5].subagent_id not in h.supervisor._registry
        await until(lambda: sessions[2].ended.is_set() and sessions[5].ended.is_set())
        assert [i for i, child in enumerate(runner.children) if child.closed] == [2, 5]
        # Only running ones left: no room, and none of them is touched.
        h.supervisor.register(await h.spawn())
        for _, session in h.supervisor._registry.items():
            if not session.running:  # the two newcomers never had a round
                session.start_round("block")
        assert len(h.supervisor._registry) == 8
        assert not h.supervisor.make_room()
        assert all(not s.killed for _, s in h.supervisor._registry.items())


async def test_4_2_running_sessions_are_never_evicted_registration_may_overshoot(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runner = FakeRunner(RoundContext.block)
    async with open_supervisor(runner) as h:
        sessions = []
        for _ in range(9):
            session = await h.spawn()
            session.start_round("work")
            h.supervisor.register(session)  # the ninth overshoots: tolerated
            sessions.append(session)
        assert len(h.supervisor._registry) == 9
        assert all(s.running and not s.killed for s in sessions)


# --------------------------------------------------------------------------- buffers (4.4, 4.6)


async def test_4_6_message_buffer_keeps_the_newest_4096(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def chatty(ctx: RoundContext) -> None:
        for index in range(MESSAGE_BUFFER_CAP + 10):
            await ctx.send(om.request_begin() if index % 2 else om.user_text(str(index)))

    runner = FakeRunner(chatty)
    async with open_supervisor(runner) as h:
        session = await h.spawn()
        session.start_round("go")
        await until(lambda: not session.running)
        forwarded: list[Message] = []

        async def keep(message: Message) -> None:
            forwarded.append(message)

        assert await h.supervisor.collect(session, 1.0, ignore, keep, None)
    assert len(forwarded) == MESSAGE_BUFFER_CAP
    first = forwarded[0].payload
    assert isinstance(first, om.TextPayload)
    assert first.text == "10"


async def test_4_4_text_buffer_capped_with_the_subagent_label(
    autojump_clock: trio.testing.MockClock,
) -> None:
    chunk = "x" * 100_000

    async def verbose(ctx: RoundContext) -> None:
        await ctx.say(*([chunk] * 11), "END")

    runner = FakeRunner(verbose)
    async with open_supervisor(runner) as h:
        session = await h.spawn()
        session.start_round("go")
        await until(lambda: not session.running)
        emitted: list[str] = []

        async def keep(text: str) -> None:
            emitted.append(text)

        assert await h.supervisor.collect(session, 1.0, keep, drop, None)
    text = "".join(emitted)
    dropped = 11 * 100_000 + 3 - 1_048_576
    assert text.startswith(f"[... {dropped} chars of earlier subagent output dropped ...]\n")
    assert text.endswith("END")
    assert len(text) == len(f"[... {dropped} chars of earlier subagent output dropped ...]\n") + (
        1_048_576
    )


# --------------------------------------------------------------------------- approvals (5.8)


async def test_5_8_one_at_a_time_in_order(autojump_clock: trio.testing.MockClock) -> None:
    verdicts: dict[str, str] = {}

    async def asks_twice(ctx: RoundContext) -> None:
        async def one(call_id: str) -> None:
            verdicts[call_id] = await ctx.ask("write_file", {"file_path": call_id}, call_id)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(one, "a")
            await trio.sleep(1)
            nursery.start_soon(one, "b")

    asked: list[str] = []
    gates = {"a": trio.Event(), "b": trio.Event()}

    async def sink(call: ToolCall) -> om.ApprovalVerdict:
        call_id = call.payload.tool_call_id
        asked.append(call_id)
        await gates[call_id].wait()
        return "allow" if call_id == "a" else "deny"

    runner = FakeRunner(asks_twice)
    async with open_supervisor(runner) as h:
        session = await h.spawn()
        session.start_round("go")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(h.supervisor.collect, session, 3600.0, ignore, drop, sink)
            await until(lambda: session.pending_approvals == 2)
            assert asked == ["a"]  # b waits behind a
            gates["a"].set()
            await until(lambda: asked == ["a", "b"])
            gates["b"].set()
            await until(lambda: not session.running)
    assert verdicts == {"a": "allow", "b": "deny"}


async def test_5_8_late_answer_still_applies_first_answer_wins(
    autojump_clock: trio.testing.MockClock,
) -> None:
    verdicts: list[str] = []

    async def asks(ctx: RoundContext) -> None:
        verdicts.append(await ctx.ask("write_file", {"file_path": "x"}))
        await ctx.say("after the decision")

    slow_answer = trio.Event()
    second_asked = trio.Event()
    second_cancelled = trio.Event()

    async def slow(call: ToolCall) -> om.ApprovalVerdict:
        await slow_answer.wait()
        return "allow"

    async def second(call: ToolCall) -> om.ApprovalVerdict:
        second_asked.set()
        try:
            await trio.sleep_forever()
        finally:
            second_cancelled.set()
        raise AssertionError

    runner = FakeRunner(asks)
    async with open_supervisor(runner) as h:
        session = await h.spawn()
        session.start_round("go")
        # The first window ends while its sink is still deciding: the request stays queued.
        assert not await h.supervisor.collect(session, 5.0, ignore, drop, slow)
        assert session.pending_approvals == 1
        assert session.running
        async with trio.open_nursery() as nursery:
            # A second window asks again, through its own sink...
            nursery.start_soon(h.supervisor.collect, session, 3600.0, ignore, drop, second)
            await second_asked.wait()
            # ...but the late first answer arrives first, and wins.
            slow_answer.set()
            await second_cancelled.wait()
            await until(lambda: not session.running)
    assert verdicts == ["allow"]


async def test_5_8_the_call_reaches_the_sink_with_the_child_id_in_origin(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[ToolCall] = []

    async def asks(ctx: RoundContext) -> None:
        await ctx.ask("exec_command", {"cmd": "ls"})

    def sink(call: ToolCall) -> om.ApprovalVerdict:
        seen.append(call)
        return "forbidden"

    runner = FakeRunner(asks)
    async with open_supervisor(runner) as h:
        session = await h.spawn()
        session.start_round("go")
        assert await h.supervisor.collect(session, 60.0, ignore, drop, sink)
    assert [(c.payload.name, c.origin) for c in seen] == [
        ("exec_command", (runner.children[0].session_id,))
    ]


async def test_5_8_a_raising_sink_denies(autojump_clock: trio.testing.MockClock) -> None:
    verdicts: list[str] = []

    async def asks(ctx: RoundContext) -> None:
        verdicts.append(await ctx.ask("write_file", {}))

    def broken(call: ToolCall) -> om.ApprovalVerdict:
        raise RuntimeError("approver crashed")

    runner = FakeRunner(asks)
    async with open_supervisor(runner) as h:
        session = await h.spawn()
        session.start_round("go")
        assert await h.supervisor.collect(session, 60.0, ignore, drop, broken)
    assert verdicts == ["deny"]


async def test_4_12_kill_denies_queued_and_later_requests(
    autojump_clock: trio.testing.MockClock,
) -> None:
    verdicts: list[str] = []

    async def asks(ctx: RoundContext) -> None:
        verdicts.append(await ctx.ask("write_file", {}, "first"))
        # A child that keeps asking after its kill is denied at once.
        verdicts.append(await ctx.ask("write_file", {}, "second"))

    runner = FakeRunner(asks)
    async with open_supervisor(runner) as h:
        session = await h.spawn()
        session.start_round("go")
        h.supervisor.register(session)
        await until(lambda: session.pending_approvals == 1)
        await h.supervisor.remove(session)
        assert runner.children[0].closed
    assert verdicts == ["deny", "deny"]


async def test_4_12_dispose_denies_pending_approvals_and_closes_children(
    autojump_clock: trio.testing.MockClock,
) -> None:
    verdicts: list[str] = []

    async def asks(ctx: RoundContext) -> FakeResult:
        verdicts.append(await ctx.ask("write_file", {}))
        return await ctx.block()

    runner = FakeRunner(asks)
    async with open_supervisor(runner) as h:
        registered = await h.spawn()
        registered.start_round("one")
        h.supervisor.register(registered)
        unregistered = await h.spawn()
        unregistered.start_round("two")
        registered.report_label = "armed"  # even an armed report is not sent after dispose
        await until(lambda: registered.pending_approvals == unregistered.pending_approvals == 1)
        await h.supervisor.aclose()
        assert all(child.closed for child in runner.children)
        assert registered.ended.is_set()
        assert unregistered.ended.is_set()
        with pytest.raises(Exception, match="disposed"):
            await h.spawn()
        assert h.reports == []
    assert verdicts == ["deny", "deny"]


async def test_4_12_a_child_deaf_to_its_interrupt_is_cancelled_after_the_grace(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def deaf(ctx: RoundContext) -> None:
        await trio.sleep_forever()

    runner = FakeRunner(deaf)
    async with open_supervisor(runner, dispose_grace=3) as h:
        session = await h.spawn()
        session.start_round("go")
        start = trio.current_time()
        await h.supervisor.aclose()
        assert trio.current_time() - start == pytest.approx(3.0)
        assert runner.children[0].closed


# --------------------------------------------------------------------------- reports (3.13)


async def test_3_13_a_report_per_round_with_the_reply_tail(
    autojump_clock: trio.testing.MockClock,
) -> None:
    long_reply = "y" * 5000 + "the end"

    async def replies(ctx: RoundContext) -> None:
        if ctx.round == 1:
            await ctx.say("short answer")
        else:
            await ctx.say(long_reply)

    runner = FakeRunner(replies)
    async with open_supervisor(runner) as h:
        session = await h.spawn()
        subagent_id = h.supervisor.launch_in_background(session, "first\nline two", "first", None)
        await until(lambda: len(h.reports) == 1)
        assert not session.text  # what the report carried is not delivered twice
        session.start_round("second")
        await until(lambda: len(h.reports) == 2)
    assert h.reports[0] == BackgroundReport(
        kind="subagent",
        id=subagent_id,
        label="first",
        status="completed",
        detail="",
        output="short answer",
    )
    second = h.reports[1]
    assert second.output == ("[earlier output dropped: exceeded 4000 chars]\n" + long_reply[-4000:])
    assert "Background subagent finished: `first` (subagent_id" in second.text()


async def test_3_13_failed_round_report(autojump_clock: trio.testing.MockClock) -> None:
    async def raises(ctx: RoundContext) -> None:
        raise RuntimeError("broke")

    runner = FakeRunner(raises)
    async with open_supervisor(runner) as h:
        session = await h.spawn()
        h.supervisor.launch_in_background(session, "task", "task", None)
        await until(lambda: len(h.reports) == 1)
    report = h.reports[0]
    assert (report.status, report.detail, report.output) == (
        "failed",
        "[subagent error: broke]",
        "",
    )


async def test_3_8_7_standing_sink_answers_background_approvals(
    autojump_clock: trio.testing.MockClock,
) -> None:
    verdicts: list[str] = []

    async def asks(ctx: RoundContext) -> None:
        verdicts.append(await ctx.ask("write_file", {}))

    runner = FakeRunner(asks)
    async with open_supervisor(runner) as h:
        session = await h.spawn()
        h.supervisor.launch_in_background(session, "task", "task", lambda call: "allow")
        await until(lambda: len(h.reports) == 1)
    assert verdicts == ["allow"]


async def test_4_3_idle_sessions_are_reaped_after_ten_days(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runner = FakeRunner()
    async with open_supervisor(runner) as h:
        session = await h.spawn()
        session.start_round("go")
        h.supervisor.register(session)
        await until(lambda: not session.running)
        await trio.sleep(10 * 24 * 3600 + 3600)
        assert h.supervisor.get(session.subagent_id) is None
        assert session.killed


async def test_a_child_that_fails_to_close_does_not_take_the_parent_down(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    runner = FakeRunner(close_error="trace disk full")
    async with open_supervisor(runner) as h:
        session = await h.spawn()
        session.start_round("go")
        await session.wait_idle()
        await h.supervisor.remove(session)
        again = await h.spawn()  # the supervisor (and its nursery) carry on
        assert not again.killed
    assert "failed to close: trace disk full" in caplog.text
