r"""A short blocking call in a worker thread: ``trio.to_thread.run_sync`` against penguin's hop.

Run it with ``python -m benchmarks.thread_hop`` (``--hops``, ``--rounds``). A batch task
makes about nine thread hops (its workspace, the session lock, ``AGENTS.md``, three file
tools, trace bursts, the results line), each for a call of a few system calls. This
times ``await hop(noop)`` both ways, alternated in one process, one caller at a time and
32 callers at once (a batch's sessions), and prints the CPU and wall time per hop of
each with the load average beside it:

- **run_sync**: ``trio.to_thread.run_sync`` with its defaults;
- **run_in_worker**: :func:`penguin._concurrency.run_in_worker`, the same contract
  without the per-call thread naming, the ``trio.from_thread`` message loop and the
  copied context.

The process's CPU time counts every thread's, the worker's included.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Final

import trio

from penguin._concurrency import run_in_worker

CALLERS: Final = 32
Hop = Callable[[Callable[[], None]], Awaitable[None]]


def _noop() -> None:
    return None


async def _sequential(hop: Hop, hops: int) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(hops):
        await hop(_noop)
    return (time.process_time() - cpu) / hops, (time.perf_counter() - wall) / hops


async def _concurrent(hop: Hop, hops: int) -> tuple[float, float]:
    async def caller(count: int) -> None:
        for _ in range(count):
            await hop(_noop)

    each = hops // CALLERS
    cpu, wall = time.process_time(), time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(CALLERS):
            nursery.start_soon(caller, each)
    done = each * CALLERS
    return (time.process_time() - cpu) / done, (time.perf_counter() - wall) / done


def _load() -> str:
    with open("/proc/loadavg") as file:
        return " ".join(file.read().split()[:3])


async def _main(hops: int, rounds: int) -> None:
    ways: dict[str, Hop] = {"run_sync": trio.to_thread.run_sync, "run_in_worker": run_in_worker}
    for hop in ways.values():  # warm the thread cache
        await _concurrent(hop, CALLERS * 4)
    figures: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for _ in range(rounds):
        for name, hop in ways.items():
            figures.setdefault((name, "one caller"), []).append(await _sequential(hop, hops))
            figures.setdefault((name, f"{CALLERS} callers"), []).append(
                await _concurrent(hop, hops)
            )
    print(f"{hops:,} hops of a no-op call, {rounds} rounds alternated, medians (load {_load()})")
    cpu_of: dict[tuple[str, str], float] = {}
    for (name, shape), runs in figures.items():
        cpu = statistics.median(c for c, _ in runs)
        wall = statistics.median(w for _, w in runs)
        cpu_of[name, shape] = cpu
        print(f"    {name:<14} {shape:<11} CPU {1e6 * cpu:6.1f} µs/hop   wall {1e6 * wall:6.1f} µs")
    for shape in ("one caller", f"{CALLERS} callers"):
        ratio = cpu_of["run_sync", shape] / cpu_of["run_in_worker", shape]
        print(f"    {shape}: run_in_worker costs 1/{ratio:.2f} of run_sync's CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--hops", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    trio.run(_main, args.hops, args.rounds)


if __name__ == "__main__":
    main()
