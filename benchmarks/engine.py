"""The agent loop's own cost: per turn, 8 concurrent no-op tool calls, with and without a trace.

Run it with ``python -m benchmarks.engine`` (``--quick`` for a smaller run, ``--turns``
and ``--repeats`` to change the volumes). A turn is one ScriptedLLM response carrying 8
calls of a no-op custom tool, all approved, run concurrently and fed back. The
measurements run in rounds, each kind once per round, and every figure is the median
over the rounds, as wall time and as the process's CPU time (worker threads included),
beside baselines measured in the same run:

- *model stream*: reading the same scripted response without the engine;
- *tools, concurrent*: the same 8 calls through ``env.execute_tool`` (the streaming
  path the engine uses) in a nursery, and through ``env.call_tool`` one after the
  other, without the engine;
- *tools, interruptible*: the concurrent calls given an ``interrupt=`` event, as the
  engine always gives one (the Environment then watches it, per call).

Targets: the engine costs under 2 ms per turn beyond the tool time (engine per turn
minus the concurrent-tools baseline), with and without a TraceRecorder; and the loop's
own time with a TraceRecorder stays under 0.4 ms per turn. "The loop's own" also leaves
out the interrupt watchers and the model stream, which the loop pays for but does not
do; it is taken per round, and the trace's share is the median of the rounds'
differences (traced minus untraced), which a load spike disturbs least.

The recorder writes when the loop has nothing else to run (reference 7.4); this loop
never idles, so a 200-turn Task usually ends before anything is written. The benchmark
prints how much of the trace was on disk when the run ended and how long writing the
rest took after it (off the hot path: the run does not wait for it). ``--turns 1000``
makes the Tasks outlast the recorder's one-second bound, so the writing then runs
while the loop is busy.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import trio

import penguin
from penguin import protocol as om
from penguin.engine import Engine, TraceRecorder
from penguin.environment import ToolContext, ToolResult
from penguin.llm import LLMRequest, ScriptedLLM, Turn, tool_call, turn
from penguin.trace import TraceWriter

CALLS = 8
TARGET_MS = 2.0
OWN_TARGET_MS = 0.4


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


@attrs.frozen
class Sample:
    """One measurement, per turn: wall time, and CPU time of the whole process (threads too)."""

    wall: float
    cpu: float

    def __sub__(self, other: Sample) -> Sample:
        return Sample(self.wall - other.wall, self.cpu - other.cpu)


class Stopwatch:
    """Wall and process CPU time from construction to :meth:`per_turn`, in ms per turn."""

    def __init__(self) -> None:
        self._wall = time.perf_counter()
        self._cpu = time.process_time()

    def per_turn(self, turns: int) -> Sample:
        return Sample(
            (time.perf_counter() - self._wall) * 1000 / turns,
            (time.process_time() - self._cpu) * 1000 / turns,
        )


def _median(samples: list[Sample]) -> Sample:
    return Sample(
        statistics.median(s.wall for s in samples), statistics.median(s.cpu for s in samples)
    )


async def bench(turns: int, repeats: int, workdir: Path) -> None:
    config = penguin.EnvironmentConfig(workspace_dir=workdir, tools=[], custom_tools=[Noop()])
    request = LLMRequest(system_prompt="", messages=(om.user_text("go"),))
    calls = [om.tool_call("noop", "{}", f"c{n}") for n in range(CALLS)]
    async with penguin.Environment.open(config) as env:
        tools = await env.list_tools()

        async def model_stream() -> Sample:
            llm = _script(turns)
            watch = Stopwatch()
            for _ in range(turns):
                async with llm.stream(request) as response:
                    async for _message in response:
                        pass
            return watch.per_turn(turns)

        async def concurrent(interrupt: trio.Event | None) -> Sample:
            async def drain(call: om.OmniMessage[om.ToolCallPayload]) -> None:
                async with env.execute_tool(call, interrupt=interrupt) as stream:
                    async for _message in stream:
                        pass

            watch = Stopwatch()
            for _ in range(turns):
                async with trio.open_nursery() as nursery:
                    for call in calls:
                        nursery.start_soon(drain, call)
            return watch.per_turn(turns)

        async def tools_concurrent() -> Sample:
            return await concurrent(None)

        async def tools_interruptible() -> Sample:
            return await concurrent(trio.Event())

        async def tools_sequential() -> Sample:
            watch = Stopwatch()
            for _ in range(turns):
                for call in calls:
                    await env.call_tool(call)
            return watch.per_turn(turns)

        async def engine_run(recorder: TraceRecorder | None) -> Sample:
            engine = Engine(
                llm=_script(turns),
                environment=env,
                system_prompt="",
                tools=tools,
                recorder=recorder,
            )
            watch = Stopwatch()
            async with engine.run([om.user_text("go")], approve=_allow) as stream:
                async for _message in stream:
                    pass
            sample = watch.per_turn(turns + 1)
            assert stream.result.status == "completed"
            assert stream.result.turns == turns + 1
            return sample

        async def engine_bare() -> Sample:
            return await engine_run(None)

        on_disk: list[float] = []
        left_to_write: list[Sample] = []
        sessions = iter(range(10_000))

        async def engine_traced() -> Sample:
            writer = TraceWriter(workdir / "traces", f"session-bench-{next(sessions):08x}")
            async with TraceRecorder.open(writer) as recorder:
                sample = await engine_run(recorder)
                written = writer.path.stat().st_size if writer.path.exists() else 0
                watch = Stopwatch()
            left_to_write.append(watch.per_turn(turns + 1))
            on_disk.append(written / writer.path.stat().st_size)
            return sample

        kinds: dict[str, Callable[[], Awaitable[Sample]]] = {
            "stream": model_stream,
            "concurrent": tools_concurrent,
            "interruptible": tools_interruptible,
            "sequential": tools_sequential,
            "bare": engine_bare,
            "traced": engine_traced,
        }
        for warm in kinds.values():
            await warm()
        on_disk.clear()
        left_to_write.clear()
        # Rounds: every measurement once per round, so a load spike on a shared machine
        # tends to hit a round rather than one kind; each figure is a median of rounds.
        # Every other round runs in reverse order, so no kind always follows another.
        samples: dict[str, list[Sample]] = {name: [] for name in kinds}
        own: dict[str, list[Sample]] = {"bare": [], "traced": []}
        for round_number in range(repeats):
            order = list(kinds.items())
            if round_number % 2:
                order.reverse()
            taken = {name: await once() for name, once in order}
            for name, sample in taken.items():
                samples[name].append(sample)
            for name, values in own.items():
                values.append(taken[name] - taken["interruptible"] - taken["stream"])
        median = {name: _median(values) for name, values in samples.items()}
        own_bare, own_traced = _median(own["bare"]), _median(own["traced"])
        share = _median([t - b for t, b in zip(own["traced"], own["bare"], strict=True)])
        left = _median(left_to_write)

    print(f"engine: {turns} turns x {CALLS} concurrent no-op calls, median of {repeats} rounds")
    print("    (ms per turn: wall time, and in brackets the process's CPU time, threads included)")

    def show(label: str, sample: Sample, note: str = "") -> None:
        print(f"    {label:<25} {sample.wall:7.3f}  [{sample.cpu:6.3f}]  {note}".rstrip())

    show("model stream alone", median["stream"], "ScriptedLLM, no engine")
    show("tools, concurrent", median["concurrent"], f"execute_tool x{CALLS}")
    show("tools, sequential", median["sequential"], f"call_tool x{CALLS}")
    show(
        "tools, interruptible",
        median["interruptible"],
        f"execute_tool x{CALLS} with interrupt=, as the engine calls it",
    )
    for label, name in (("engine, no trace", "bare"), ("engine, TraceRecorder", "traced")):
        beyond = median[name] - median["concurrent"]
        show(label, median[name])
        show(
            "  beyond tool time",
            beyond,
            f"{_verdict(beyond.wall < TARGET_MS)} target < {TARGET_MS:.0f} ms",
        )
    print("    the loop's own: engine minus interruptible tools and model stream, per round")
    show("  no trace", own_bare)
    show(
        "  TraceRecorder",
        own_traced,
        f"{own_traced.wall / own_bare.wall:.2f}x no trace; "
        f"{_verdict(own_traced.wall < OWN_TARGET_MS)} target < {OWN_TARGET_MS} ms",
    )
    show("  the trace's share", share, "median of the rounds' differences")
    print(
        f"    trace on disk at the end  {statistics.median(on_disk):6.0%}   the recorder writes "
        "when the loop is idle, or once a record has waited 1 s"
    )
    show("trace left to write", left, "after the run, off the hot path")


async def main(quick: bool, turns: int | None, repeats: int | None) -> None:
    with tempfile.TemporaryDirectory(prefix="penguin-bench-") as tmp:
        await bench(
            turns=turns or (50 if quick else 200),
            repeats=repeats or (3 if quick else 9),
            workdir=Path(tmp),
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller volumes, for a smoke run")
    parser.add_argument("--turns", type=int, help="turns per Task (default 200)")
    parser.add_argument("--repeats", type=int, help="rounds of measurements (default 9)")
    args = parser.parse_args()
    trio.run(main, args.quick, args.turns, args.repeats)
