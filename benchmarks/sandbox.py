r"""What the sandbox costs (spec/sandbox.md X4.1).

Run it with ``python -m benchmarks.sandbox`` (``--quick`` for a smaller run):

a. exec_command ``true`` through ``env.call_tool`` under ``workspace-write`` with the
   network off, against the same call with the sandbox off, in the same run and
   interleaved (target: p50 ratio <= 1.3 and at most 2 ms added at p99);
b. 64 concurrent sandboxed background sessions, every line delivered exactly once:
   ``python -m benchmarks.stress_sessions --sandbox workspace-write`` runs the stress
   benchmark's (b) (and the rest) with every Environment sandboxed; this script runs
   that (b) once too unless ``--no-sessions``.

The load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import trio

import penguin
from benchmarks import stress_sessions
from penguin import protocol as om

PACE: Final = 0.03


def _call(**args: Any) -> om.OmniMessage[om.ToolCallPayload]:
    return om.tool_call("exec_command", {"description": "bench", **args}, "bench")


def _percentile(samples: list[float], q: int) -> float:
    return statistics.quantiles(samples, n=100)[q - 1]


async def bench_latency(workdir: Path, rounds: int) -> None:
    policy = penguin.SandboxPolicy(mode="workspace-write", network=False)
    call = _call(cmd="true")
    async with (
        penguin.Environment.open(penguin.EnvironmentConfig(workspace_dir=workdir)) as off,
        penguin.Environment.open(
            penguin.EnvironmentConfig(workspace_dir=workdir, sandbox=policy)
        ) as boxed,
    ):
        envs = {"off": off, "workspace-write": boxed}
        for env in envs.values():  # the login environment and the first namespaces
            for _ in range(20):
                out = await env.call_tool(call)
                assert out.payload.stop_reason == "completed", out.payload.output
        samples: dict[str, list[float]] = {name: [] for name in envs}
        for _ in range(rounds):
            for name, env in envs.items():
                start = time.perf_counter()
                out = await env.call_tool(call)
                samples[name].append(time.perf_counter() - start)
                assert out.payload.stop_reason == "completed", out.payload.output
                await trio.sleep(PACE)
    p = {n: (statistics.median(s) * 1000, _percentile(s, 99) * 1000) for n, s in samples.items()}
    print(f"(a) exec_command `true`, {rounds:,} calls each, interleaved (load {_load()})")
    for name, (p50, p99) in p.items():
        print(f"    {name:<17}p50 {p50:6.2f} ms   p99 {p99:6.2f} ms")
    ratio = p["workspace-write"][0] / p["off"][0]
    added = p["workspace-write"][1] - p["off"][1]
    print(f"    ratio p50 {ratio:5.2f} x   added at p99 {added:+6.2f} ms")
    ok = ratio <= 1.3 and added <= 2.0
    print(f"    {'PASS' if ok else 'MISS'} target: p50 <= 1.3 x, <= 2 ms added at p99")


def _load() -> str:
    with open("/proc/loadavg", encoding="ascii") as handle:
        return handle.read().strip()


async def main(quick: bool, sessions: bool) -> None:
    print(f"load average: {_load()}")
    with tempfile.TemporaryDirectory(prefix="penguin-bench-") as tmp:
        await bench_latency(Path(tmp), 150 if quick else 500)
        if sessions:
            print()
            stress_sessions.SANDBOX = penguin.SandboxPolicy(mode="workspace-write", network=False)
            await stress_sessions.bench_sessions(
                Path(tmp), 16 if quick else 64, 3.0 if quick else 10.0
            )
    print(f"load average: {_load()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller volumes, for a smoke run")
    parser.add_argument("--no-sessions", action="store_true", help="only the latency figure")
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    args = parser.parse_args()
    trio.run(main, args.quick, not args.no_sessions)
