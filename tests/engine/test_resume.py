"""Resume equivalence: the latest trace file, replayed into a fresh Ledger, is the live ledger.

This is the design's key property. The live engine builds every request from its
ledger, and the ledger is fed only recorded messages; a resumed session replays
the trace's latest file into a new one. After any run — completed, denied,
interrupted in either case, retried, failed, compacted, hard-stopped — both must
agree on the history, the pending input and carry-over, the awaited calls, the
turns and the token counters, including the timestamps of the messages the ledger
synthesizes. The hypothesis test checks the same over random scripts, along with
the invariants of the trace and of every request sent to the model.
"""

from __future__ import annotations

import collections
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import hypothesis
import hypothesis.strategies as st
import pytest
import trio
import trio.testing

from penguin import protocol as om
from penguin.engine import CompactionSettings, Engine, Ledger
from penguin.llm import (
    LLMRequest,
    ScriptedLLM,
    ScriptedTurn,
    Step,
    error,
    pause,
    text,
    thinking,
    tool_call,
    turn,
    usage,
)

from .support import Harness, Message, allow_all, kind, ledger_state, open_harness

# --------------------------------------------------------------------------- checking


async def assert_resumable(h: Harness) -> None:
    """The live ledger equals the latest trace file replayed into a fresh one."""
    replayed = await h.replayed()
    assert ledger_state(replayed) == ledger_state(h.engine.ledger)


async def checked_run(
    h: Harness,
    text_input: str | None,
    *,
    approve: om.ApproveFn | None = allow_all,
    interrupt_when: Callable[[Message], bool] | None = None,
    steer_when: Callable[[Message], bool] | None = None,
    stop_when: Callable[[Message], bool] | None = None,
) -> list[Message]:
    """One run; interrupt, steer or hard-stop on the first message matching; then check."""
    interrupt = trio.Event()
    seen: list[Message] = []
    inputs = [] if text_input is None else [om.user_text(text_input)]
    steered = False
    async with h.engine.run(inputs, approve=approve, interrupt=interrupt) as stream:
        async for message in stream:
            seen.append(message)
            if interrupt_when is not None and interrupt_when(message):
                interrupt.set()
            if steer_when is not None and not steered and steer_when(message):
                steered = h.engine.steer([om.user_text("steering")])
            if stop_when is not None and stop_when(message):
                break
    await assert_resumable(h)
    return seen


def is_kind(wanted: str) -> Callable[[Message], bool]:
    return lambda message: kind(message) == wanted


def deny_all(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
    return "deny"


# --------------------------------------------------------------------------- scenarios


@attrs.frozen
class Scenario:
    script: list[ScriptedTurn]
    body: Callable[[Harness], Awaitable[object]]
    options: dict[str, Any] = attrs.field(factory=dict)


async def normal(h: Harness) -> None:
    await checked_run(h, "go")
    await checked_run(h, "more")


async def denial(h: Harness) -> None:
    await checked_run(h, "go", approve=deny_all)


async def no_approver(h: Harness) -> None:
    await checked_run(h, "go", approve=None)


async def interrupt_a(h: Harness) -> None:
    await checked_run(h, "go", interrupt_when=is_kind("request_end:completed"))
    await checked_run(h, "again")


async def interrupt_b(h: Harness) -> None:
    await checked_run(h, "go", interrupt_when=is_kind("partial_text:delta"))
    await checked_run(h, None)


async def interrupt_before_request(h: Harness) -> None:
    await checked_run(h, "go", interrupt_when=is_kind("text"))
    await checked_run(h, "again")


async def hard_stop(h: Harness) -> None:
    await checked_run(h, "go", stop_when=is_kind("tool_call"))
    await checked_run(h, "again")


async def retries_then_success(h: Harness) -> None:
    await checked_run(h, "go")


async def final_failure(h: Harness) -> None:
    await checked_run(h, "go")
    await checked_run(h, "again")


async def auth(h: Harness) -> None:
    await checked_run(h, "go")
    await checked_run(h, "again")


async def compaction(h: Harness) -> None:
    await checked_run(h, "go")
    await checked_run(h, "more")


async def failed_compaction(h: Harness) -> None:
    await checked_run(h, "go")
    await checked_run(h, "more")


async def manual_compaction(h: Harness) -> None:
    await checked_run(h, "go")
    async with h.engine.compact() as stream:
        async for _ in stream:
            pass
    await assert_resumable(h)
    await checked_run(h, "more")


async def steering(h: Harness) -> None:
    await checked_run(h, "go", steer_when=is_kind("request_begin"))


async def max_turns(h: Harness) -> None:
    await checked_run(h, "go")
    await checked_run(h, "continue")


PROBE = {"text": "out"}
SLOW = {"sleep": 2, "text": "slow"}
BLOCK = {"block": True}

SCENARIOS: dict[str, Scenario] = {
    "normal": Scenario(
        [turn(thinking("t"), text("a"), tool_call("probe", PROBE), tool_call("probe", SLOW))],
        normal,
    ),
    "denial": Scenario([turn(tool_call("probe", PROBE), tool_call("probe", PROBE))], denial),
    "no approver": Scenario([turn(tool_call("probe", PROBE))], no_approver),
    "interrupt A": Scenario(
        [turn(tool_call("probe", PROBE), tool_call("probe", BLOCK), usage(total=9))], interrupt_a
    ),
    "interrupt B": Scenario(
        [turn(tool_call("probe", PROBE), text("Hel"), pause(5), text("lo"))], interrupt_b
    ),
    "interrupt before the request": Scenario(["never"], interrupt_before_request),
    "hard stop": Scenario([turn(tool_call("probe", BLOCK), pause(5), text("x"))], hard_stop),
    "retries then success": Scenario(
        [
            turn(text("part"), tool_call("probe", PROBE), error("timeout", "t1")),
            turn(thinking("again"), error("malformed", "m2")),
            turn(tool_call("probe", SLOW), usage(total=20)),
        ],
        retries_then_success,
    ),
    "final failure": Scenario(
        [turn(text(f"try {n}"), error("failed", f"f{n}")) for n in range(6)], final_failure
    ),
    "auth": Scenario([turn(tool_call("probe", PROBE), error("auth", "no key"))], auth),
    "compaction": Scenario(
        [
            turn(tool_call("probe", PROBE), usage(total=500)),
            "[summary]did things[/summary]",
            turn(tool_call("probe", PROBE), usage(total=20)),
        ],
        compaction,
        {"compaction": CompactionSettings(max_context_length=100)},
    ),
    "compaction discard": Scenario(
        [turn(tool_call("probe", PROBE)), turn(tool_call("probe", PROBE))],
        compaction,
        {"compaction": CompactionSettings(max_session_turns=1, mode="discard")},
    ),
    "failed compaction": Scenario(
        [turn(tool_call("probe", PROBE), usage(total=500)), turn(error("auth", "no"))],
        failed_compaction,
        {"compaction": CompactionSettings(max_context_length=100)},
    ),
    "manual compaction": Scenario(
        [turn(text("first"), usage(total=50)), "[summary]s[/summary]", "second"],
        manual_compaction,
    ),
    "steering": Scenario([turn(tool_call("probe", SLOW))], steering),
    "max turns": Scenario(
        [turn(tool_call("probe", PROBE)), turn(tool_call("probe", PROBE))],
        max_turns,
        {"max_turns": 1},
    ),
}


@pytest.mark.parametrize("name", SCENARIOS)
async def test_the_replayed_trace_gives_the_live_ledger(
    name: str, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    scenario = SCENARIOS[name]
    llm = ScriptedLLM(scenario.script)
    async with open_harness(tmp_path, llm, **scenario.options) as h:
        await scenario.body(h)


async def test_a_resumed_engine_sends_the_same_next_request(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    script: list[ScriptedTurn] = [turn(tool_call("probe", PROBE), text("Hel"), pause(5))]
    llm = ScriptedLLM([*script, "live"])
    async with open_harness(tmp_path, llm) as h:
        await checked_run(h, "go", interrupt_when=is_kind("partial_text:delta"))
        resumed_llm = ScriptedLLM(["resumed"])
        resumed = Engine(
            llm=resumed_llm,
            environment=h.env,
            system_prompt=h.engine.system_prompt,
            tools=h.engine.tools,
            ledger=await h.replayed(),
        )
        prompt = om.user_text("continue")
        for engine in (h.engine, resumed):
            async with engine.run([prompt]) as stream:
                async for _ in stream:
                    pass
    live_request, resumed_request = llm.requests[-1], resumed_llm.requests[0]
    assert [om.to_dict(m) for m in live_request.messages] == [
        om.to_dict(m) for m in resumed_request.messages
    ]


# --------------------------------------------------------------------------- random scripts

_ARGS = st.sampled_from(
    [{"text": "a"}, {"text": "bb", "sleep": 1}, {"sleep": 3}, {"raise": "oops"}, {}]
)
_STEP: st.SearchStrategy[Step] = st.one_of(
    st.builds(thinking, st.sampled_from(["think", "more"])),
    st.builds(text, st.sampled_from(["x", "y z", "[summary]sum[/summary]"])),
    st.builds(lambda args: tool_call("probe", args), _ARGS),
    st.builds(pause, st.sampled_from([0.5, 2.0])),
    st.builds(lambda total: usage(total=total), st.integers(0, 400)),
)
_END = st.one_of(
    st.none(),
    st.builds(error, st.sampled_from(["timeout", "failed", "malformed", "auth"]), st.just("boom")),
)
_TURN = st.builds(
    lambda steps, end: turn(*steps, *([] if end is None else [end])),
    st.lists(_STEP, max_size=5),
    _END,
)
_COMPACTION = st.one_of(
    st.none(),
    st.builds(
        CompactionSettings,
        max_context_length=st.sampled_from([0, 150, 300]),
        max_session_turns=st.sampled_from([0, 1, 2]),
        mode=st.sampled_from(["summarize", "discard"]),
    ),
)
_KINDS = [
    "request_begin",
    "partial_text:delta",
    "tool_call",
    "approval_decision",
    "tool_call_output",
    "request_end:completed",
    "request_end:timeout",
    "compaction_begin",
    "partial_tool_call_output:start",
]


@attrs.frozen
class RunPlan:
    input: str | None
    approver: str
    interrupt_at: str | None
    steer_at: str | None
    stop_at: str | None
    manual_compaction: bool


_RUN = st.builds(
    RunPlan,
    input=st.sampled_from(["go", "more", None]),
    approver=st.sampled_from(["allow", "deny", "raise", "none"]),
    interrupt_at=st.one_of(st.none(), st.sampled_from(_KINDS)),
    steer_at=st.one_of(st.none(), st.sampled_from(_KINDS)),
    stop_at=st.one_of(st.none(), st.sampled_from(_KINDS)),
    manual_compaction=st.booleans(),
)


def _approver(name: str) -> om.ApproveFn | None:
    def deny_odd(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        return "deny" if int(call.payload.tool_call_id.rsplit("_", 1)[-1]) % 2 else "allow"

    def raising(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        raise RuntimeError("approver bug")

    return {"allow": allow_all, "deny": deny_odd, "raise": raising, "none": None}[name]


def check_request_pairing(request: LLMRequest) -> None:
    """Every tool call sent to the model is answered exactly once, after it."""
    open_calls: set[str] = set()
    answered: collections.Counter[str] = collections.Counter()
    for message in request.messages:
        payload = message.payload
        assert not om.is_partial(message)
        if isinstance(payload, om.ToolCallPayload):
            assert payload.stop_reason == "completed", "only committed calls travel as calls"
            open_calls.add(payload.tool_call_id)
        elif isinstance(payload, om.ToolCallOutputPayload):
            assert payload.tool_call_id in open_calls, "an output without its call"
            answered[payload.tool_call_id] += 1
    assert set(answered) == open_calls, "a call without its output"
    assert all(count == 1 for count in answered.values())


def check_trace(records: list[Message]) -> None:
    """Records only; a call's decision comes before its output; one output per call."""
    decided: set[str] = set()
    outputs: collections.Counter[str] = collections.Counter()
    for message in records:
        assert not om.is_partial(message)
        assert not message.origin
        payload = message.payload
        if isinstance(payload, om.ApprovalDecisionPayload):
            decided.add(payload.tool_call_id)
        elif isinstance(payload, om.ToolCallOutputPayload):
            assert payload.tool_call_id in decided, "an output before its approval_decision"
            outputs[payload.tool_call_id] += 1
    assert all(count == 1 for count in outputs.values())


async def _random_session(
    workdir: Path,
    turns: list[ScriptedTurn],
    compaction: CompactionSettings | None,
    runs: list[RunPlan],
) -> None:
    llm = ScriptedLLM(turns)
    async with open_harness(workdir, llm, compaction=compaction) as h:
        for plan in runs:
            if plan.manual_compaction and not h.engine.ledger.turn_open:
                async with h.engine.compact() as stream:
                    async for _ in stream:
                        pass
                await assert_resumable(h)
            await checked_run(
                h,
                plan.input,
                approve=_approver(plan.approver),
                interrupt_when=None if plan.interrupt_at is None else is_kind(plan.interrupt_at),
                steer_when=None if plan.steer_at is None else is_kind(plan.steer_at),
                stop_when=None if plan.stop_at is None else is_kind(plan.stop_at),
            )
            check_trace(await h.trace())
        for request in llm.requests:
            check_request_pairing(request)


@hypothesis.settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[hypothesis.HealthCheck.too_slow],
)
@hypothesis.given(
    turns=st.lists(_TURN, max_size=8),
    compaction=_COMPACTION,
    runs=st.lists(_RUN, min_size=1, max_size=3),
)
def test_any_script_replays_to_the_live_ledger(
    turns: list[ScriptedTurn], compaction: CompactionSettings | None, runs: list[RunPlan]
) -> None:
    # Autojump after 1 ms of real idleness, not 0: the trace is written in worker
    # threads, and a clock that jumps while a write is in flight races through the
    # Environment's hourly idle sweep (thousands of virtual hours per second).
    with tempfile.TemporaryDirectory(prefix="penguin-resume-") as workdir:
        trio.run(
            _random_session,
            Path(workdir),
            turns,
            compaction,
            runs,
            clock=trio.testing.MockClock(autojump_threshold=0.001),
        )


def test_a_ledger_ignores_what_is_not_a_record() -> None:
    ledger = Ledger()
    ledger.observe(om.partial_text("start"))
    ledger.observe(om.with_origin(om.user_text("child"), "child-session"))
    assert ledger_state(ledger) == ledger_state(Ledger())
