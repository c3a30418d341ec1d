"""Issue 18 item 3: model errors said as they are, and waited for as they deserve.

A server that cannot be reached is tried twice more within 2 s and the run ends with
``cannot connect to …``; a server that says ``Retry-After`` is waited for that long
(capped); every other failure keeps the 2/4/8/16/30 s ladder. The clock is a MockClock
(no process is involved); the HTTP side of the same rules is in tests/llm/test_openai.py
and tests/cli/test_run.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import trio
import trio.testing

from penguin import protocol as om
from penguin.engine import ReconnectPolicy
from penguin.llm import LLMOutcome, LLMRequest, ScriptedLLM, Turn, error, text, turn

from .support import open_harness, run_task

REFUSED = "cannot connect to http://127.0.0.1:9/v1 (Connection refused)"


def timed(times: list[float], script: Turn) -> Callable[[LLMRequest], Turn]:
    def play(request: LLMRequest) -> Turn:
        times.append(trio.current_time())
        return script

    return play


def request_ends(messages: list[om.OmniMessage[om.Payload]]) -> list[om.RequestEndPayload]:
    return [m.payload for m in messages if isinstance(m.payload, om.RequestEndPayload)]


async def test_18_3_an_unreachable_server_is_tried_twice_more_within_2_s_then_the_run_ends(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    times: list[float] = []
    down = turn(error("timeout", REFUSED, unreachable=True))
    llm = ScriptedLLM([timed(times, down) for _ in range(5)])
    async with open_harness(tmp_path, llm) as h:
        start = trio.current_time()
        seen, result = await run_task(h.engine, "hi")
    assert [t - start for t in times] == [0, 0.5, 2]
    assert (result.status, result.error_message) == ("timeout", REFUSED)
    assert result.unreachable  # the server's failure, not the task's: a batch stops on it
    assert [(e.attempt, e.retry_in_ms, e.error_message) for e in request_ends(seen)] == [
        (1, 500, REFUSED),
        (2, 1500, REFUSED),
        (3, None, REFUSED),
    ]


async def test_18_3_retry_after_replaces_the_ladders_wait(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    times: list[float] = []
    limited = turn(error("timeout", "rate limited (429): slow down", retry_after=7.0))
    llm = ScriptedLLM(
        [timed(times, limited), timed(times, limited), timed(times, turn(text("ok")))]
    )
    async with open_harness(tmp_path, llm) as h:
        start = trio.current_time()
        seen, result = await run_task(h.engine, "hi")
    assert result.status == "completed"
    assert [t - start for t in times] == [0, 7, 14]
    assert [e.retry_in_ms for e in request_ends(seen)] == [7000, 7000, None]


async def test_18_3_a_server_error_keeps_the_ladder(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    times: list[float] = []
    broken = turn(error("timeout", "server error 500: boom"))
    llm = ScriptedLLM([timed(times, broken), timed(times, broken), timed(times, turn(text("ok")))])
    async with open_harness(tmp_path, llm) as h:
        start = trio.current_time()
        seen, result = await run_task(h.engine, "hi")
    assert result.status == "completed"
    assert [t - start for t in times] == [0, 2, 6]
    assert [e.error_message for e in request_ends(seen)][:2] == ["server error 500: boom"] * 2


async def test_18_3_a_run_that_fails_on_the_ladder_was_not_unreachable(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    broken = turn(error("timeout", "server error 500: boom"))
    async with open_harness(tmp_path, ScriptedLLM([broken] * 6)) as h:
        _, result = await run_task(h.engine, "hi")
    assert (result.status, result.error_message) == ("timeout", "server error 500: boom")
    assert not result.unreachable  # the server answered: the task's own result


async def test_20_a_run_refused_for_its_rate_limit_through_every_retry_says_so(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    limited = turn(
        error("timeout", "rate limited (429): slow down", retry_after=1, rate_limited=True)
    )
    async with open_harness(tmp_path, ScriptedLLM([limited] * 6)) as h:
        seen, result = await run_task(h.engine, "hi")
    assert (result.status, result.error_message) == ("timeout", "rate limited (429): slow down")
    assert result.rate_limited  # the account's limit, not the task: a batch stops on it
    assert not result.unreachable
    assert [e.retry_in_ms for e in request_ends(seen)] == [1000] * 5 + [None]
    # Only the last attempt counts: a limit that let go before the end is not the reason.
    broken = turn(error("timeout", "server error 500: boom"))
    for name in ("again", "once"):
        (tmp_path / name / "workspace").mkdir(parents=True)
    async with open_harness(tmp_path / "again", ScriptedLLM([limited] * 5 + [broken])) as h:
        _, result = await run_task(h.engine, "hi")
    assert (result.error_message, result.rate_limited) == ("server error 500: boom", False)
    async with open_harness(tmp_path / "once", ScriptedLLM([limited, turn(text("ok"))])) as h:
        _, result = await run_task(h.engine, "hi")
    assert (result.status, result.rate_limited) == ("completed", False)


def test_18_3_the_policy_picks_the_waits_from_the_outcome() -> None:
    policy = ReconnectPolicy()
    down = LLMOutcome("timeout", REFUSED, unreachable=True)
    assert [policy.delay(n, down) for n in (1, 2, 3)] == [0.5, 1.5, None]
    assert sum(policy.unreachable_delays) < 5  # "at most twice within 5 s"
    asked = LLMOutcome("timeout", "rate limited (429)", retry_after=3600.0)
    assert policy.delay(1, asked) == policy.max_retry_after == 60.0
    assert policy.delay(6, asked) is None  # Retry-After does not add attempts
    assert policy.delay(1, LLMOutcome("timeout", "rate limited (429)", retry_after=0.0)) == 0.0
    stalled = LLMOutcome("timeout", "the response stream stalled")
    assert [policy.delay(n, stalled) for n in range(1, 7)] == [2, 4, 8, 16, 30, None]
    assert [policy.delay(n) for n in range(1, 7)] == [2, 4, 8, 16, 30, None]
