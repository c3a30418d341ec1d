"""Reconnect: model-side failures are retried within the run on the 2, 4, 8, 16, 30 s ladder.

``auth`` is never retried. A retry re-sends the turn's input plus a ``[turn_retried]``
block with what the failed attempt produced; tools approved in a failed attempt are
never run again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from penguin import protocol as om
from penguin.engine import DEFAULT_COMPACTION_PROMPT, CompactionSettings, ReconnectPolicy
from penguin.llm import LLMRequest, ScriptedLLM, Turn, error, text, tool_call, turn

from .support import allow_all, kind, open_harness, run_task, texts


def timed(times: list[float], script: Turn) -> Callable[[LLMRequest], Turn]:
    """A scripted turn that notes when its request arrived."""

    def play(request: LLMRequest) -> Turn:
        times.append(trio.current_time())
        return script

    return play


def request_ends(messages: list[om.OmniMessage[om.Payload]]) -> list[om.RequestEndPayload]:
    return [m.payload for m in messages if isinstance(m.payload, om.RequestEndPayload)]


async def test_reconnect_ladder_2_4_8_16_30(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    times: list[float] = []
    failing = turn(error("timeout", "upstream stalled"))
    llm = ScriptedLLM([*(timed(times, failing) for _ in range(5)), timed(times, turn(text("ok")))])
    async with open_harness(tmp_path, llm) as h:
        start = trio.current_time()
        seen, result = await run_task(h.engine, "hi")
    assert result.status == "completed"
    assert result.turns == 1
    assert [t - start for t in times] == [0, 2, 6, 14, 30, 60]
    ends = request_ends(seen)
    assert [(e.status, e.attempt, e.retry_in_ms, e.error_message) for e in ends] == [
        ("timeout", 1, 2000, "upstream stalled"),
        ("timeout", 2, 4000, "upstream stalled"),
        ("timeout", 3, 8000, "upstream stalled"),
        ("timeout", 4, 16000, "upstream stalled"),
        ("timeout", 5, 30000, "upstream stalled"),
        ("completed", 6, None, None),
    ]


@pytest.mark.parametrize("status", ["failed", "timeout", "malformed"])
async def test_every_model_failure_but_auth_is_retried(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, status: om.StopReason
) -> None:
    llm = ScriptedLLM([turn(error(status, "boom")), "ok"])
    async with open_harness(tmp_path, llm) as h:
        _, result = await run_task(h.engine, "hi")
    assert result.status == "completed"
    assert len(llm.requests) == 2


async def test_the_final_failure_has_no_retry_in_ms_and_ends_the_run_with_its_status(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM([turn(error("malformed", f"broken {n}")) for n in range(6)])
    async with open_harness(tmp_path, llm) as h:
        start = trio.current_time()
        seen, result = await run_task(h.engine, "hi")
        elapsed = trio.current_time() - start
    assert result.status == "malformed"
    assert result.error_message == "broken 5"
    assert elapsed == 60
    last = request_ends(seen)[-1]
    assert (last.status, last.attempt, last.retry_in_ms) == ("malformed", 6, None)
    assert last.error_message == "broken 5"
    assert kind(seen[-1]) == "request_end:malformed"  # no abort: the user did not interrupt
    assert len(llm.requests) == 6


async def test_a_retry_resends_the_input_with_a_turn_retried_block(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM(
        [turn(text("partial"), error("timeout", "cut")), turn(error("failed", "again")), "done"]
    )
    async with open_harness(tmp_path, llm) as h:
        seen, result = await run_task(h.engine, "hi")
        history = h.engine.ledger.history
    assert result.status == "completed"
    assert texts(llm.requests[0].messages) == ["hi"]
    block = "[turn_retried]\n  [text]partial[/text]\n[/turn_retried]"
    assert texts(llm.requests[1].messages) == ["hi", block]
    assert texts(llm.requests[2].messages) == ["hi", block]
    retried = llm.requests[1].messages[1].payload
    assert isinstance(retried, om.TextPayload)
    assert (retried.role, retried.sender) == ("user", "harness")
    # The committed turn keeps the block: the next request sees what the model saw.
    assert texts(history) == ["hi", block, "done"]
    ends = request_ends(seen)
    assert [e.attempt for e in ends] == [1, 2, 3]


async def test_tools_approved_in_a_failed_attempt_are_never_rerun(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM(
        [
            turn(tool_call("probe", {"text": "once"}, "c1"), error("timeout", "dropped")),
            turn(text("I see the result")),
        ]
    )
    async with open_harness(tmp_path, llm) as h:
        _, result = await run_task(h.engine, "hi", approve=allow_all)
        assert h.engine.ledger.awaiting == []
    assert result.status == "completed"
    assert h.probe.runs == ["c1"]
    assert len(llm.requests) == 2
    assert texts(llm.requests[1].messages) == [
        "hi",
        "[turn_retried]\n"
        '  [tool_call name="probe" id="c1"]{"text":"once"}[/tool_call]\n'
        '  [tool_call_output id="c1" status="completed"]once[/tool_call_output]\n'
        "[/turn_retried]",
    ]
    # The failed attempt's call is only text now: no unanswered tool_call is re-sent.
    assert not any(isinstance(m.payload, om.ToolCallPayload) for m in llm.requests[1].messages)


async def test_auth_ends_the_run_at_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM([turn(text("Hel"), error("auth", "invalid api key")), "never"])
    async with open_harness(tmp_path, llm) as h:
        start = trio.current_time()
        seen, result = await run_task(h.engine, "hi")
        assert trio.current_time() == start
    assert (result.status, result.error_message) == ("auth", "invalid api key")
    assert len(llm.requests) == 1
    (end,) = request_ends(seen)
    assert (end.status, end.attempt, end.retry_in_ms) == ("auth", 1, None)
    assert end.error_message == "invalid api key"


async def test_a_failed_run_keeps_its_turn_for_the_next_run(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM([turn(text("Hel"), error("auth", "invalid api key")), "welcome back"])
    async with open_harness(tmp_path, llm) as h:
        await run_task(h.engine, "hi")
        _, result = await run_task(h.engine, "key fixed")
        records = await h.trace()
    assert result.status == "completed"
    assert texts(llm.requests[1].messages) == [
        "hi",
        "[turn_retried]\n  [text]Hel[/text]\n[/turn_retried]",
        "key fixed",
    ]
    assert not any("[turn_retried]" in om.dumps(m) for m in records)


async def test_the_ladder_is_configurable(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    times: list[float] = []
    llm = ScriptedLLM([timed(times, turn(error("timeout", "x"))) for _ in range(3)])
    policy = ReconnectPolicy(delays=(1.0, 0.5))
    async with open_harness(tmp_path, llm, reconnect=policy) as h:
        start = trio.current_time()
        _, result = await run_task(h.engine, "hi")
    assert result.status == "timeout"
    assert [t - start for t in times] == [0, 1, 1.5]
    assert ReconnectPolicy().delay(5) == 30.0
    assert ReconnectPolicy().delay(6) is None


SUMMARY_STATUSES = ["failed", "timeout", "malformed", "auth", "aborted"]


@pytest.mark.parametrize("status", SUMMARY_STATUSES)
async def test_10_3_a_turn_and_a_summary_request_retry_the_same_failures(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, status: om.StopReason
) -> None:
    # One rule for both kinds of request: failed, timeout and malformed are retried;
    # auth is not, nor aborted (the engine's word for an interrupt, which a client
    # never reports: one that does is taken at its word).
    retried = status in ("failed", "timeout", "malformed")
    (tmp_path / "turn").mkdir()
    (tmp_path / "summary").mkdir()
    turn_llm = ScriptedLLM([turn(error(status, "boom")), "ok"])
    async with open_harness(tmp_path / "turn", turn_llm) as h:
        _, turn_result = await run_task(h.engine, "hi")
    summary_llm = ScriptedLLM(
        [turn(tool_call("probe", {}, "c1")), turn(error(status, "boom"))],
        fallback="[summary]all done[/summary]",
    )
    settings = CompactionSettings(max_session_turns=1)
    async with open_harness(tmp_path / "summary", summary_llm, compaction=settings) as h:
        seen, summary_result = await run_task(h.engine, "go", approve=allow_all)
    summary_requests = [
        r for r in summary_llm.requests if texts(r.messages[-1:]) == [DEFAULT_COMPACTION_PROMPT]
    ]
    (compaction_end,) = [m.payload for m in seen if isinstance(m.payload, om.CompactionEndPayload)]
    if retried:
        assert (turn_result.status, len(turn_llm.requests)) == ("completed", 2)
        assert len(summary_requests) == 2
        assert summary_result.status == "completed"
        assert compaction_end == om.CompactionEndPayload(
            reason="turns", mode="summarize", status="completed", attempt=2
        )
    else:
        assert (turn_result.status, turn_result.error_message) == (status, "boom")
        assert len(turn_llm.requests) == 1
        assert len(summary_requests) == 1
        assert (summary_result.status, summary_result.error_message) == (status, "boom")
        assert compaction_end == om.CompactionEndPayload(
            reason="turns", mode="summarize", status=status, attempt=1, error_message="boom"
        )
