r"""The model client's own CPU per request: the lean h11 exchange against httpx's.

Run it with ``python -m benchmarks.model_exchange`` (``--requests``, ``--concurrency``,
``--rounds``). A scripted OpenAI-compatible model (``penguin.llm.testing``) is served by
a separate process, so its CPU is not counted; this process sends ``--requests``
streamed requests (2,000) at ``--concurrency`` (64) through :class:`OpenAIChatLLM` and
reads every answer to its end (one tool call, usage: the shape of a batch task's
turns). Each round measures both ways of reaching a plain ``http://`` server, one after
the other in the same conditions:

- **httpx**: the client, transport and pool layers of httpx (what every ``https://``
  server still takes);
- **lean**: h11 on penguin's own pool of kept-alive connections (``penguin.llm._lean``).

It prints CPU per request (this process's user + system time, over every thread) and
wall time for each, and the ratio lean / httpx, with the load average beside it: the
machine may be shared, and CPU time is the robust figure.
"""

from __future__ import annotations

import argparse
import os
import time
from functools import partial
from typing import Any

import trio

from penguin import protocol as om
from penguin.llm import LLMRequest, OpenAIChatLLM

from .batch import serve_model

REQUEST = LLMRequest(system_prompt="Be brief.", messages=(om.user_text("Hi"),), tools=())


async def _measure(base_url: str, *, lean: bool, requests: int, concurrency: int) -> dict[str, Any]:
    saved = {name: os.environ.get(name) for name in ("HTTP_PROXY", "NO_PROXY")}
    if not lean:  # what a user with a proxy in the environment gets: httpx's client
        os.environ.update(HTTP_PROXY="http://127.0.0.1:9", NO_PROXY="*")  # * : no proxy used
    try:
        llm = OpenAIChatLLM(base_url=base_url, model_id="scripted")
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    async def one() -> None:
        async with llm.stream(REQUEST) as response:
            async for _ in response:
                pass
        if response.outcome.status != "completed":
            raise SystemExit(f"a request ended {response.outcome}")

    async with llm:
        for _ in range(50):  # warm: connections open, code paths run once
            await one()
        left = requests

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                await one()

        cpu, wall = time.process_time(), time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):
                nursery.start_soon(worker)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"cpu_ms": 1000 * cpu / requests, "wall_s": wall, "load": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with serve_model(5) as (base_url, _):
        print(
            f"{args.requests} streamed requests at concurrency {args.concurrency}, "
            f"{args.rounds} rounds (load before: {os.getloadavg()[0]:.2f})"
        )
        ratios = []
        for round_ in range(1, args.rounds + 1):
            figures = {}
            for name, lean in (("httpx", False), ("lean", True)):
                f = trio.run(
                    partial(
                        _measure,
                        base_url,
                        lean=lean,
                        requests=args.requests,
                        concurrency=args.concurrency,
                    )
                )
                figures[name] = f
                print(
                    f"    round {round_}  {name:5s}  CPU {f['cpu_ms']:6.3f} ms/request"
                    f"   wall {f['wall_s']:5.2f} s   (load {f['load']:.2f})"
                )
            ratios.append(figures["lean"]["cpu_ms"] / figures["httpx"]["cpu_ms"])
        ratios.sort()
        print(f"    lean / httpx CPU per request: median {ratios[len(ratios) // 2]:.2f} x")


if __name__ == "__main__":
    main()
