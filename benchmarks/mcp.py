"""MCP tools through the Environment against the SDK's own client, on one stdio server.

Run it with ``python -m benchmarks.mcp`` (``--quick`` for a smaller run). Each figure
is printed beside a baseline measured in the same run, on the same server
(``benchmarks/_mcp_server.py``, one ``echo`` tool):

a. per-call time of ``Environment.call_tool`` on ``mcp__bench__echo`` against the
   SDK's ``ClientSession.call_tool`` over the SDK's ``stdio_client``, calls one after
   another: the median overhead (target: under 1 ms above the baseline);
b. 100 concurrent calls (one nursery), both ways: the wall time of the batch;
c. connecting 4 servers in parallel (``connect_mcp``: spawn, initialize, list)
   against connecting one alone (target: under 1.5 x). The servers here are
   ``benchmarks/_mcp_light_server.sh`` (bash builtins, ready in about a millisecond),
   so the figure is penguin's connect phase; the same ratio with SDK servers is
   printed after it for reference: each of those spends ~0.5 s of CPU importing, so
   four of them on a 2-CPU machine take about twice as long as one, whatever the
   client does;
d. sessions connecting one remote server (Streamable HTTP on 127.0.0.1), each in an
   Environment of its own, one after another: this process's CPU per connect, the
   first (which makes the process's TLS context for remote servers) and the median
   of the others, beside the CPU of making one such context, measured here: what each
   connect paid on top before the context was shared.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import trio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import penguin
from penguin import protocol as om
from penguin.config import McpRemoteTransport, McpServerConfig, McpStdioTransport

REPO = Path(__file__).resolve().parents[1]
ARGS = ("-m", "benchmarks._mcp_server")
LIGHT = McpStdioTransport(command="bash", args=(str(REPO / "benchmarks/_mcp_light_server.sh"),))


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


SDK = McpStdioTransport(command=sys.executable, args=ARGS, env={"PYTHONPATH": str(REPO)})


def server(name: str = "bench", transport: McpStdioTransport = SDK) -> McpServerConfig:
    return McpServerConfig(name=name, transport=transport)


def _sdk_parameters() -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=list(ARGS), env={"PYTHONPATH": str(REPO)}, cwd=REPO
    )


async def _timed(calls: int, one: object) -> list[float]:
    assert callable(one)
    times = []
    for index in range(calls):
        start = time.perf_counter()
        await one(index)
        times.append(time.perf_counter() - start)
    return times


async def _batch(count: int, one: object) -> float:
    assert callable(one)
    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for index in range(count):
            nursery.start_soon(one, index)
    return time.perf_counter() - start


async def bench_calls(calls: int, workspace: Path) -> None:
    async with stdio_client(_sdk_parameters()) as (read, write), ClientSession(read, write) as sdk:
        await sdk.initialize()
        await sdk.list_tools()

        async def direct(index: int) -> None:
            await sdk.call_tool("echo", {"text": f"n{index}"})

        await _timed(50, direct)  # warm up
        baseline = await _timed(calls, direct)
        baseline_batch = await _batch(100, direct)

    config = penguin.EnvironmentConfig(workspace_dir=workspace, tools=[], mcp_servers=[server()])
    async with penguin.Environment.open(config) as env:
        await env.list_tools()

        async def through(index: int) -> None:
            call = om.tool_call("mcp__bench__echo", f'{{"text": "n{index}"}}', f"c{index}")
            out = await env.call_tool(call)
            assert out.payload.stop_reason == "completed", out.payload.output

        await _timed(50, through)
        ours = await _timed(calls, through)
        batch = await _batch(100, through)

    base, median = statistics.median(baseline) * 1e6, statistics.median(ours) * 1e6
    p99 = statistics.quantiles(ours, n=100)[98] * 1e6
    print(f"(a) one call at a time, {calls:,} calls of echo over stdio")
    print(f"    Environment.call_tool   median {median:8.1f} us   p99 {p99:8.1f} us")
    print(f"    ClientSession.call_tool median {base:8.1f} us   (the SDK alone)")
    print(f"    overhead                {median - base:8.1f} us per call")
    print(f"    {_verdict(median - base < 1000)} target: under 1 ms above the SDK at the median")
    print("(b) 100 concurrent calls")
    print(f"    Environment.call_tool   {batch * 1000:8.1f} ms for the batch")
    print(f"    ClientSession.call_tool {baseline_batch * 1000:8.1f} ms (the SDK alone)")


async def _connect(count: int, workspace: Path, transport: McpStdioTransport) -> float:
    servers = [server(f"s{index}", transport) for index in range(count)]
    config = penguin.EnvironmentConfig(workspace_dir=workspace, tools=[], mcp_servers=servers)
    async with penguin.Environment.open(config) as env:
        start = time.perf_counter()
        results = await env.connect_mcp()
        elapsed = time.perf_counter() - start
        assert all(result.status == "completed" for result in results), results
    return elapsed


async def _ratio(rounds: int, workspace: Path, transport: McpStdioTransport) -> tuple[float, float]:
    await _connect(1, workspace, transport)  # warm the file cache and the SDK's import
    one = statistics.median([await _connect(1, workspace, transport) for _ in range(rounds)])
    four = statistics.median([await _connect(4, workspace, transport) for _ in range(rounds)])
    return one, four


async def bench_connect(rounds: int, workspace: Path) -> None:
    one, four = await _ratio(rounds, workspace, LIGHT)
    print(f"(c) connect (spawn, initialize, list), median of {rounds} rounds")
    print(f"    4 servers in parallel   {four * 1000:8.1f} ms")
    print(f"    1 server alone          {one * 1000:8.1f} ms")
    print(f"    ratio                   {four / one:8.2f} x")
    print(f"    {_verdict(four / one < 1.5)} target: under 1.5 x")
    sdk_one, sdk_four = await _ratio(rounds, workspace, SDK)
    print(f"    with SDK servers: 4 in {sdk_four * 1000:.0f} ms, 1 in {sdk_one * 1000:.0f} ms")
    print(f"    ({sdk_four / sdk_one:.2f} x; their start-up is CPU-bound, {os.cpu_count()} CPUs)")


@contextlib.contextmanager
def _http_server(workspace: Path) -> Iterator[str]:
    """The benchmark's server over Streamable HTTP, in a process of its own: its URL."""
    port_file = workspace / "port"
    command = [sys.executable, "-m", "benchmarks._mcp_server", "--http", str(port_file)]
    process = subprocess.Popen(command, cwd=REPO)
    try:
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text()):
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the HTTP server of the benchmark did not start")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port_file.read_text()}/mcp"
    finally:
        process.kill()
        process.wait()


async def _remote_connect(workspace: Path, url: str) -> float:
    """CPU seconds of this process for one Environment connecting ``url`` (open to close)."""
    remote = McpServerConfig(name="remote", transport=McpRemoteTransport(kind="http", url=url))
    config = penguin.EnvironmentConfig(workspace_dir=workspace, tools=[], mcp_servers=[remote])
    start = time.process_time()
    async with penguin.Environment.open(config) as env:
        (result,) = await env.connect_mcp()
        assert result.status == "completed", result
    return time.process_time() - start


async def bench_remote(sessions: int, workspace: Path) -> None:
    with _http_server(workspace) as url:
        costs = [await _remote_connect(workspace, url) for _ in range(sessions)]
    contexts = []
    for _ in range(5):
        start = time.process_time()
        httpx2.create_ssl_context()
        contexts.append(time.process_time() - start)
    later = statistics.median(costs[1:])
    print(f"(d) {sessions} sessions connecting one remote server, one after another (CPU)")
    print(f"    first connect           {costs[0] * 1000:8.1f} ms (makes the TLS context)")
    print(f"    later connects          {later * 1000:8.1f} ms, median")
    print(f"    one TLS context         {statistics.median(contexts) * 1000:8.1f} ms, median of 5")


async def main(quick: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="penguin-bench-") as tmp:
        workspace = Path(tmp)
        await bench_calls(300 if quick else 3000, workspace)
        print()
        await bench_connect(3 if quick else 7, workspace)
        print()
        await bench_remote(5 if quick else 40, workspace)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls, for a smoke run")
    trio.run(main, parser.parse_args().quick)
