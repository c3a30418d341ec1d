"""Helpers of the engine tests: a probe tool, an engine on real files, replay of the trace.

The probe is a custom tool whose arguments say what it does (sleep, block, raise,
print), so one Environment serves every scenario and every call leaves a record of
when it started and finished (Trio time: virtual under ``MockClock``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

import penguin
from penguin import protocol as om
from penguin.engine import Engine, Ledger, RunResult, TraceRecorder
from penguin.environment import ToolContext, ToolResult
from penguin.llm import LLM
from penguin.trace import TraceWriter, read_trace

Message = om.OmniMessage[om.Payload]

SESSION_ID = "session-2026-01-02-03-04-05-abcdef01"
SYSTEM_PROMPT = "You are a test."


class Probe:
    """A custom tool steered by its arguments.

    ``{"sleep": s}`` sleeps ``s`` seconds, ``{"block": true}`` waits for the interrupt,
    ``{"raise": "msg"}`` raises, ``{"text": "t"}`` prints ``t`` (default ``ok``).
    """

    name = "probe"
    definition = penguin.ToolDefinitionConfig(
        name="probe", description="does what its arguments say", permission="r", timeout_ms=0
    )

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.finished: dict[str, float] = {}
        self.runs: list[str] = []

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        call_id = ctx.tool_call_id
        self.runs.append(call_id)
        self.started[call_id] = trio.current_time()
        if "sleep" in args:
            await trio.sleep(float(args["sleep"]))
        if args.get("block"):
            await trio.sleep_forever()
        if "raise" in args:
            raise RuntimeError(str(args["raise"]))
        await ctx.emit(str(args.get("text", "ok")))
        self.finished[call_id] = trio.current_time()
        return None


def session_meta(workspace: Path) -> om.OmniMessage[om.SessionMetaPayload]:
    return om.session_meta(
        session_id=SESSION_ID,
        provider="scripted",
        model_id="scripted",
        model_context_window=0,
        system_prompt=SYSTEM_PROMPT,
        agent_state="",
        workspace=str(workspace),
    )


@attrs.define
class Harness:
    """An engine on a real Environment and a real trace, with its pieces at hand."""

    engine: Engine
    env: penguin.Environment
    writer: TraceWriter
    recorder: TraceRecorder
    probe: Probe

    async def trace(self) -> list[Message]:
        """The records of the current trace file, once everything queued is written."""
        await self.recorder.flush()
        return await trio.to_thread.run_sync(read_trace, self.writer.path)

    async def replayed(self) -> Ledger:
        """A fresh ledger fed the current (latest) trace file: what a resume rebuilds."""
        ledger = Ledger()
        for message in await self.trace():
            ledger.observe(message)
        return ledger


@asynccontextmanager
async def open_harness(
    tmp_path: Path,
    llm: LLM,
    *,
    custom_tools: Sequence[penguin.Tool] = (),
    tools: list[penguin.ToolDefinitionConfig] | None = None,
    **engine_options: Any,
) -> AsyncIterator[Harness]:
    """Environment (probe + ``custom_tools``), TraceWriter + TraceRecorder, Engine."""
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    probe = Probe()
    config = penguin.EnvironmentConfig(
        workspace_dir=workspace,
        tools=[] if tools is None else tools,
        custom_tools=[probe, *custom_tools],
    )
    writer = TraceWriter(tmp_path / "traces", SESSION_ID)
    meta = session_meta(workspace)
    async with penguin.Environment.open(config) as env, TraceRecorder.open(writer) as recorder:
        recorder.record(meta)
        engine = Engine(
            llm=llm,
            environment=env,
            system_prompt=SYSTEM_PROMPT,
            tools=await env.list_tools(),
            recorder=recorder,
            session_meta=meta,
            **engine_options,
        )
        yield Harness(engine, env, writer, recorder, probe)


async def run_task(
    engine: Engine,
    messages: Sequence[Message] | str,
    *,
    approve: om.ApproveFn | None = None,
    interrupt: trio.Event | None = None,
) -> tuple[list[Message], RunResult]:
    """Run one Task to its end; every streamed message and the result."""
    if isinstance(messages, str):
        messages = [om.user_text(messages)]
    async with engine.run(messages, approve=approve, interrupt=interrupt) as stream:
        seen = [message async for message in stream]
    return seen, stream.result


def allow_all(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
    return "allow"


def kind(message: Message) -> str:
    """``partial_text:delta``, ``text``, ``request_end:completed``... for order checks."""
    payload = message.payload
    tag = getattr(payload, "type", message.type)
    if om.is_partial(message):
        return f"{tag}:{getattr(payload, 'event_type', '')}"
    if isinstance(payload, om.RequestEndPayload | om.CompactionEndPayload):
        return f"{tag}:{payload.status}"
    return str(tag)


def dicts(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [om.to_dict(message) for message in messages]


def ledger_state(ledger: Ledger) -> dict[str, Any]:
    """Everything a resumed session must get back, as plain data."""
    return {
        "history": dicts(ledger.history),
        "pending": dicts(ledger.pending),
        "carry_over": dicts(ledger.carry_over()),
        "awaiting": list(ledger.awaiting),
        "outputs": {key: om.to_dict(value) for key, value in ledger.outputs.items()},
        "turns": ledger.turns,
        "turn_open": ledger.turn_open,
        "attempt": ledger.attempt,
        "session_tokens": ledger.session_tokens,
        "last_request_total": ledger.last_request_total,
        "from_compaction": ledger.from_compaction,
        "open_compaction": ledger.open_compaction,
    }


def texts(messages: Sequence[om.OmniMessage[Any]]) -> list[str]:
    """The text of every text message, in order."""
    return [m.payload.text for m in messages if isinstance(m.payload, om.TextPayload)]
