"""The Environment's close-out under load: throughput, per-call overhead, read_file's cap.

Run it with ``python -m benchmarks.closeout`` (``--quick`` for a smaller run). Every
figure is printed beside a baseline measured in the same run, with the target:

a. a custom tool emitting 1 GiB in 64 KiB deltas, max_output_length 16000, archive on:
   throughput (target >= 500 MB/s) against a bare loop that only UTF-8-encodes the
   same deltas, and the growth of peak RSS (target < 50 MB);
b. ``call_tool`` on a no-op custom tool: median per-call time (target < 150 us)
   against awaiting the tool's ``execute`` directly;
c. read_file of a window deep in a 200 MB file: it must stop at the 8 MiB scan cap
   (target < 100 ms) against a bare read of 8 MiB that counts newlines.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

import penguin
from penguin import protocol as om
from penguin.environment import ToolContext, ToolResult

MB = 1_000_000
MIB = 1024 * 1024


class Firehose:
    """Emits the same 64 KiB text ``count`` times."""

    name = "firehose"

    def __init__(self, count: int) -> None:
        self.count = count
        self.chunk = ("0123456789abcdef" * 4096)[: 64 * 1024]
        self.definition = penguin.ToolDefinitionConfig(
            name=self.name, description="emit a lot", max_output_length=16_000, timeout_ms=0
        )

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        chunk = self.chunk
        for _ in range(self.count):
            await ctx.emit(chunk)
        return None


class Noop:
    """Does nothing."""

    name = "noop"
    definition = penguin.ToolDefinitionConfig(name="noop", description="nothing")

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        return None


def _peak_rss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _verdict(ok: bool) -> str:
    return "ok  " if ok else "MISS"


async def bench_throughput(total_bytes: int, workdir: Path) -> None:
    tool = Firehose(total_bytes // (64 * 1024))
    volume = tool.count * len(tool.chunk.encode())

    start = time.perf_counter()
    chunk = tool.chunk
    for _ in range(tool.count):
        chunk.encode()
    bare = time.perf_counter() - start

    config = penguin.EnvironmentConfig(
        workspace_dir=workdir, tools=[], custom_tools=[tool], scratchpad_dir=workdir / "scratch"
    )
    peak_before = _peak_rss_bytes()
    async with penguin.Environment.open(config) as env:
        start = time.perf_counter()
        out = await env.call_tool(om.tool_call("firehose", "{}", "bench-a"))
        elapsed = time.perf_counter() - start
    growth = _peak_rss_bytes() - peak_before
    assert "[output archived (8 MiB limit; head and tail kept): " in out.payload.output

    rate = volume / elapsed / MB
    bare_rate = volume / bare / MB
    print(f"(a) {volume / MIB:,.0f} MiB in 64 KiB deltas, limit 16000, archive on")
    print(f"    close-out      {rate:9,.0f} MB/s   ({elapsed:.2f} s)")
    print(f"    bare encode    {bare_rate:9,.0f} MB/s   ({bare:.2f} s)")
    print(f"    ratio          {rate / bare_rate:9.2f} x of the bare loop")
    print(f"    {_verdict(rate >= 500)} target >= 500 MB/s")
    print(f"    peak RSS growth {growth / MB:8.1f} MB")
    print(f"    {_verdict(growth < 50 * MB)} target < 50 MB")


async def bench_overhead(calls: int, workdir: Path) -> None:
    tool = Noop()
    config = penguin.EnvironmentConfig(workspace_dir=workdir, tools=[], custom_tools=[tool])
    async with penguin.Environment.open(config) as env:
        call = om.tool_call("noop", "{}", "bench-b")
        for _ in range(200):  # warm up
            await env.call_tool(call)
        samples = []
        for _ in range(calls):
            start = time.perf_counter_ns()
            await env.call_tool(call)
            samples.append(time.perf_counter_ns() - start)

        streamed = []
        for _ in range(calls):
            start = time.perf_counter_ns()
            async with env.execute_tool(call) as stream:
                async for _message in stream:
                    pass
            streamed.append(time.perf_counter_ns() - start)

    async def emit(text: str) -> None:
        await trio.lowlevel.checkpoint()

    async def forward(message: om.OmniMessage[om.Payload]) -> None:
        await trio.lowlevel.checkpoint()

    ctx = ToolContext(
        workspace_dir=workdir,
        tool_call_id="bench-b",
        definition=tool.definition,
        approve=None,
        emit=emit,
        forward=forward,
    )
    direct = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        await tool.execute({}, ctx)
        await trio.lowlevel.checkpoint()
        direct.append(time.perf_counter_ns() - start)

    median = statistics.median(samples) / 1000
    p99 = statistics.quantiles(samples, n=100)[98] / 1000
    base = statistics.median(direct) / 1000
    print(f"(b) call_tool on a no-op custom tool, {calls:,} calls")
    print(f"    call_tool      median {median:7.1f} us   p99 {p99:7.1f} us")
    stream_median = statistics.median(streamed) / 1000
    print(
        f"    execute_tool   median {stream_median:7.1f} us   (the streaming path, for reference)"
    )
    print(f"    direct execute median {base:7.1f} us")
    print(f"    overhead       {median - base:7.1f} us per call ({median / base:.0f} x)")
    print(f"    {_verdict(median < 150)} target: median < 150 us")


async def bench_read_file(size: int, workdir: Path) -> None:
    path = workdir / "big.txt"
    line = b"the quick brown fox jumps over the lazy dog 0123456789\n"
    block = line * (MIB // len(line))
    with path.open("wb") as handle:
        written = 0
        while written < size:
            handle.write(block)
            written += len(block)
    total_lines = written // len(line)

    start = time.perf_counter()
    with path.open("rb") as handle:
        seen = handle.read(8 * MIB).count(b"\n")
    bare = time.perf_counter() - start

    config = penguin.EnvironmentConfig(workspace_dir=workdir)
    async with penguin.Environment.open(config) as env:
        args = {"file_path": str(path), "offset": total_lines - 10, "limit": 5}
        await env.call_tool(om.tool_call("read_file", {"file_path": str(path), "limit": 1}, "w"))
        start = time.perf_counter()
        out = await env.call_tool(om.tool_call("read_file", args, "bench-c"))
        elapsed = time.perf_counter() - start
    stopped = out.payload.output.startswith("Stopped after scanning 8 MB of ")
    print(f"(c) read_file, offset {total_lines - 10:,} of a {written / MB:,.0f} MB file")
    print(f"    read_file      {elapsed * 1000:7.1f} ms   stopped at the cap: {stopped}")
    print(f"    bare 8 MiB read + newline count {bare * 1000:7.1f} ms ({seen:,} lines)")
    print(f"    ratio          {elapsed / bare:7.1f} x of the bare read")
    print(f"    {_verdict(stopped and elapsed < 0.1)} target: stops at the 8 MiB cap, < 100 ms")


async def main(quick: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="penguin-bench-") as tmp:
        workdir = Path(tmp)
        await bench_throughput((128 if quick else 1024) * MIB, workdir)
        print()
        await bench_overhead(2_000 if quick else 20_000, workdir)
        print()
        await bench_read_file((40 if quick else 200) * MB, workdir)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller volumes, for a smoke run")
    trio.run(main, parser.parse_args().quick)
