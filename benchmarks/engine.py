"""The agent loop's own cost: per turn, 8 concurrent no-op tool calls, with and without a trace.

Run it with ``python -m benchmarks.engine`` (``--quick`` for a smaller run). A turn is
one ScriptedLLM response carrying 8 calls of a no-op custom tool, all approved, run
concurrently and fed back; every figure is the median over several Tasks of
``turns`` turns each, printed beside baselines measured in the same run:

- *model stream*: reading the same scripted response without the engine;
- *tools, concurrent*: the same 8 calls through ``env.execute_tool`` (the streaming
  path the engine uses) in a nursery, and through ``env.call_tool`` one after the
  other, without the engine;
- *tools, interruptible*: the concurrent calls given an ``interrupt=`` event, as the
  engine always gives one (the Environment then watches it, per call).

Target: the engine costs under 2 ms per turn beyond the tool time (engine per turn
minus the concurrent-tools baseline), with and without a TraceRecorder. "The loop's
own" also leaves out the interrupt watchers and the model stream, which the loop
pays for but does not do. With a recorder, the time to write what a run queued is
measured separately (it is off the hot path: the run does not wait for it).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

import penguin
from penguin import protocol as om
from penguin.engine import Engine, TraceRecorder
from penguin.environment import ToolContext, ToolResult
from penguin.llm import LLMRequest, ScriptedLLM, Turn, tool_call, turn
from penguin.trace import TraceWriter

CALLS = 8
TARGET_MS = 2.0


class Noop:
    """Does nothing."""

    name = "noop"
    definition = penguin.ToolDefinitionConfig(name="noop", description="nothing", permission="r")

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        return None


def _allow(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
    return "allow"


def _tool_turn() -> Turn:
    return turn(*(tool_call("noop", "{}") for _ in range(CALLS)))


def _script(turns: int) -> ScriptedLLM:
    return ScriptedLLM([_tool_turn() for _ in range(turns)], fallback="done")


def _verdict(ok: bool) -> str:
    return "ok  " if ok else "MISS"


async def _median_ms(
    repeats: int, once: Callable[[], Awaitable[float]]
) -> tuple[float, list[float]]:
    samples = [await once() for _ in range(repeats)]
    return statistics.median(samples), samples


async def bench(turns: int, repeats: int, workdir: Path) -> None:
    config = penguin.EnvironmentConfig(workspace_dir=workdir, tools=[], custom_tools=[Noop()])
    request = LLMRequest(system_prompt="", messages=(om.user_text("go"),))
    calls = [om.tool_call("noop", "{}", f"c{n}") for n in range(CALLS)]
    async with penguin.Environment.open(config) as env:
        tools = await env.list_tools()

        async def model_stream() -> float:
            llm = _script(turns)
            start = time.perf_counter()
            for _ in range(turns):
                async with llm.stream(request) as response:
                    async for _message in response:
                        pass
            return (time.perf_counter() - start) * 1000 / turns

        async def concurrent(interrupt: trio.Event | None) -> float:
            async def drain(call: om.OmniMessage[om.ToolCallPayload]) -> None:
                async with env.execute_tool(call, interrupt=interrupt) as stream:
                    async for _message in stream:
                        pass

            start = time.perf_counter()
            for _ in range(turns):
                async with trio.open_nursery() as nursery:
                    for call in calls:
                        nursery.start_soon(drain, call)
            return (time.perf_counter() - start) * 1000 / turns

        async def tools_concurrent() -> float:
            return await concurrent(None)

        async def tools_interruptible() -> float:
            return await concurrent(trio.Event())

        async def tools_sequential() -> float:
            start = time.perf_counter()
            for _ in range(turns):
                for call in calls:
                    await env.call_tool(call)
            return (time.perf_counter() - start) * 1000 / turns

        async def engine_run(recorder: TraceRecorder | None) -> float:
            engine = Engine(
                llm=_script(turns),
                environment=env,
                system_prompt="",
                tools=tools,
                recorder=recorder,
            )
            start = time.perf_counter()
            async with engine.run([om.user_text("go")], approve=_allow) as stream:
                async for _message in stream:
                    pass
            elapsed = time.perf_counter() - start
            assert stream.result.status == "completed"
            assert stream.result.turns == turns + 1
            return elapsed * 1000 / (turns + 1)

        async def engine_bare() -> float:
            return await engine_run(None)

        traced_drain: list[float] = []
        sessions = iter(range(10_000))

        async def engine_traced() -> float:
            writer = TraceWriter(workdir / "traces", f"session-bench-{next(sessions):08x}")
            async with TraceRecorder.open(writer) as recorder:
                per_turn = await engine_run(recorder)
                start = time.perf_counter()
            traced_drain.append((time.perf_counter() - start) * 1000 / (turns + 1))
            return per_turn

        for warm in (model_stream, tools_concurrent, tools_interruptible, engine_bare):
            await warm()
        stream_ms, _ = await _median_ms(repeats, model_stream)
        concurrent_ms, _ = await _median_ms(repeats, tools_concurrent)
        interruptible_ms, _ = await _median_ms(repeats, tools_interruptible)
        sequential_ms, _ = await _median_ms(repeats, tools_sequential)
        bare_ms, _ = await _median_ms(repeats, engine_bare)
        traced_ms, _ = await _median_ms(repeats, engine_traced)
        drain_ms = statistics.median(traced_drain)

    print(f"engine: {turns} turns x {CALLS} concurrent no-op calls, median of {repeats} Tasks")
    print(f"    model stream alone      {stream_ms:7.3f} ms per turn (ScriptedLLM, no engine)")
    print(f"    tools, concurrent       {concurrent_ms:7.3f} ms per turn (execute_tool x{CALLS})")
    print(f"    tools, sequential       {sequential_ms:7.3f} ms per turn (call_tool x{CALLS})")
    print(
        f"    tools, interruptible    {interruptible_ms:7.3f} ms per turn "
        "(execute_tool x8 with interrupt=, as the engine calls it)"
    )
    for label, per_turn in (("engine, no trace", bare_ms), ("engine, TraceRecorder", traced_ms)):
        overhead = per_turn - concurrent_ms
        own = per_turn - interruptible_ms - stream_ms
        print(f"    {label:<23} {per_turn:7.3f} ms per turn")
        print(f"      beyond tool time      {overhead:7.3f} ms per turn")
        print(f"      {_verdict(overhead < TARGET_MS)} target: < {TARGET_MS:.0f} ms per turn")
        print(
            f"      the loop's own        {own:7.3f} ms per turn "
            "(beyond interruptible tools and the model stream)"
        )
    print(
        f"    trace left to write     {drain_ms:7.3f} ms per turn after the run (off the hot path)"
    )


async def main(quick: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="penguin-bench-") as tmp:
        await bench(turns=50 if quick else 200, repeats=3 if quick else 7, workdir=Path(tmp))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller volumes, for a smoke run")
    trio.run(main, parser.parse_args().quick)
