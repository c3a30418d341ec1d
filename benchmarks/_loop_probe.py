"""``python -m benchmarks._loop_probe OUT [penguin args…]``: ``penguin server`` with a loop probe.

:mod:`benchmarks.server` starts the server through this module with ``--loop-profile``,
to say where the server's one Trio loop spends its CPU; nothing of it is in penguin
itself. A :class:`trio.abc.Instrument` reads the main thread's CPU clock around every
task step and adds it to the task's name (a request's handler, the engine's turn, a
tool's run…); what the loop does between steps (scheduling, ``epoll``, I/O
registration) is the rest of the thread's CPU. SSE frames and the chunks they were
written in are counted too (frames per chunk: how much each write carries).

It also times the loop's passes: Trio runs every task that is ready, one step each, then
waits in ``epoll`` for more (with no wait when some task is ready again). A task that
yields (any checkpoint: a lock, a channel, a socket write) takes its next step in the
next pass, so under load each yield on a request's path costs it about one pass: the
queueing the server's latency is made of. Each pass's wall time (from the end of one
``epoll`` wait to the start of the next, preemption included) is kept.

``SIGUSR1`` starts the count afresh; ``SIGUSR2`` writes it to ``OUT`` as JSON
(``{"thread": s, "tasks": {name: [s, steps]}, "frames": n, "chunks": n, "passes": [s]}``).
"""

from __future__ import annotations

import collections
import json
import runpy
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any, final

import trio


@final
class LoopProbe(trio.abc.Instrument):
    """CPU seconds and steps of each task name, on the loop's thread."""

    def __init__(self) -> None:
        self.cpu: collections.defaultdict[str, float] = collections.defaultdict(float)
        self.steps: collections.Counter[str] = collections.Counter()
        self.counts: collections.Counter[str] = collections.Counter()
        self.began = time.thread_time()
        self._step = 0.0
        self.passes: list[float] = []
        """Each pass's wall seconds, from one ``epoll`` wait's end to the next one's start."""
        self._pass_began: float | None = None

    def reset(self) -> None:
        self.cpu.clear()
        self.steps.clear()
        self.counts.clear()
        self.began = time.thread_time()
        self.passes = []
        self._pass_began = None

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._step = time.thread_time()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        self.cpu[task.name] += time.thread_time() - self._step
        self.steps[task.name] += 1

    def after_io_wait(self, timeout: float) -> None:
        self._pass_began = time.perf_counter()

    def before_io_wait(self, timeout: float) -> None:
        if self._pass_began is not None:
            self.passes.append(time.perf_counter() - self._pass_began)

    def figures(self) -> dict[str, Any]:
        return {
            "thread": time.thread_time() - self.began,
            "tasks": {name: [self.cpu[name], self.steps[name]] for name in self.cpu},
            "frames": self.counts["frames"],
            "chunks": self.counts["chunks"],
            "passes": self.passes,
        }


def _count_chunks(probe: LoopProbe) -> None:
    from penguin.server import _channel

    take = _channel.Subscriber.take

    def counted(self: _channel.Subscriber) -> bytes | None:
        frames = len(self._initial) + len(self._queue)
        chunk = take(self)
        if chunk:
            probe.counts["chunks"] += 1
            probe.counts["frames"] += frames
        return chunk

    _channel.Subscriber.take = counted  # type: ignore[method-assign]


def main() -> None:
    out = Path(sys.argv[1])
    probe = LoopProbe()

    def write(signum: int, frame: FrameType | None) -> None:
        part = out.with_suffix(".part")
        part.write_text(json.dumps(probe.figures()))
        part.replace(out)  # whole, or not there

    signal.signal(signal.SIGUSR1, lambda signum, frame: probe.reset())
    signal.signal(signal.SIGUSR2, write)
    _count_chunks(probe)
    run = trio.run

    def probed_run(*args: Any, **options: Any) -> Any:
        options["instruments"] = [*options.get("instruments", ()), probe]
        return run(*args, **options)

    trio.run = probed_run  # type: ignore[assignment]  # penguin's CLI calls trio.run
    sys.argv = ["penguin", *sys.argv[2:]]
    runpy.run_module("penguin", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
