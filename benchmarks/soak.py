r"""``penguin server`` soaked: 32 sessions running scripted tasks for a bounded time (issue 21.5).

Run it with ``python -m benchmarks.soak`` (``--minutes 10`` is the default; it stops by
itself). One local OpenAI-compatible model in this process answers every request: a
task is three ``exec_command`` calls, one per turn, then a short answer. Under
``always-ask`` each session's client subscribes to its stream, starts a task, approves
each call from the stream, and at random aborts the task after its first approval
(1 in 8) or drops its stream and subscribes again mid-task (1 in 6; the snapshot of
the new subscription carries the pending approval). When a task ends the next starts;
after ``--tasks-per-session`` tasks (default 10) the session is deleted and a new one
takes its place, so a session's growing conversation (which the model context rightly
keeps) does not pass for a leak.

Every 10 s the server process is sampled: RSS, open file descriptors, threads, and the
number of processes in its tree (itself, its commands, its watchdog). The table is
printed as it goes; at the end the verdict: PASS when no later minute's level (the median
of its samples) is above the first minute's level (its highest sample) + 10 % (rounded
up), else the figure that grew. A level, not a single sample: fds and processes rise and
fall with the commands in flight at the instant of a sample.

The server runs under :mod:`benchmarks._soak_probe`, which adds two columns the verdict
does not judge but which say what RSS is made of: Python's allocated blocks (``pyblk k``,
``sys.getallocatedblocks()``) and malloc's bytes in use over every arena (``malloc MB``,
glibc's ``mallinfo2``). Flat columns under a rising RSS are the allocator keeping freed
memory, not a leak. ``--probe FILE`` keeps the probe's lines; ``PENGUIN_SOAK_TRACEMALLOC``
and ``PENGUIN_SOAK_SNAPSHOTS`` add tracemalloc snapshots and object counts (see there).

Login shells read no profile (``HOME`` is a fresh directory); traffic stays on
127.0.0.1; the server is stopped with SIGINT at the end and must exit.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import httpx
import psutil
import trio

from penguin import config as cfg
from penguin.llm import testing as t

TOKEN: Final = "soak-token"
TASK: Final = "soak: three commands"
CALLS: Final = 3
SESSIONS: Final = 32
SAMPLE_EVERY: Final = 10.0
ABORT_ONE_IN: Final = 8
RECONNECT_ONE_IN: Final = 6
SESSIONS_PATH: Final = "/api/projects/default_project/agents/default_agent/sessions"


def handler(request: t.ReceivedRequest) -> t.Reply:
    """Three commands, one per turn, then ``Done.``."""
    messages = request.json()["messages"]
    last_task = max(
        (i for i, m in enumerate(messages) if m.get("role") == "user" and TASK in str(m)),
        default=-1,
    )  # the session's history holds the earlier tasks: count this task's turns only
    turn = sum(1 for m in messages[last_task + 1 :] if m.get("role") == "assistant")
    if turn < CALLS:
        arguments = json.dumps({"description": "step", "cmd": f"echo step {turn}"})
        return t.sse_reply(
            [
                t.tool_call_chunk(0, id=f"call_{turn}", name="exec_command", arguments=arguments),
                t.finish_chunk("tool_calls"),
            ]
        )
    return t.sse_reply([t.content_chunk("Done."), t.finish_chunk()])


def configure(root: Path, base_url: str) -> None:
    paths = cfg.AgentPaths(root)
    entry = cfg.ModelEntry(provider="local", model_id="soak", base_url=base_url, api_key="k")
    project = cfg.add_model(cfg.load_project_config(paths.project_config), entry, set_default=True)
    cfg.save_project_config(paths.project_config, project)


class Frames:
    """SSE frames of one response, as raw bytes."""

    def __init__(self, response: httpx.Response) -> None:
        self._chunks = response.aiter_bytes()
        self._buffer = b""

    async def next(self) -> bytes | None:
        while b"\n\n" not in self._buffer:
            try:
                self._buffer += await self._chunks.__anext__()
            except StopAsyncIteration:
                return None
        frame, _, self._buffer = self._buffer.partition(b"\n\n")
        return frame


def _data(frame: bytes) -> Any:
    for line in frame.split(b"\n"):
        if line.startswith(b"data: "):
            return json.loads(line[6:])
    return None


@contextlib.asynccontextmanager
async def subscribed(client: httpx.AsyncClient, sid: str) -> AsyncIterator[Frames]:
    async with client.stream("GET", f"/api/sessions/{sid}/stream") as response:
        yield Frames(response)


class Tally:
    def __init__(self) -> None:
        self.tasks = 0
        self.approvals = 0
        self.aborts = 0
        self.reconnects = 0
        self.sessions = 0
        self.errors: list[str] = []


async def follow(
    client: httpx.AsyncClient, sid: str, frames: Frames, plan: str, tally: Tally
) -> str:
    """Read until the task ends (``done``) or the plan says drop the stream (``reconnect``)."""
    running = False
    while (frame := await frames.next()) is not None:
        if b'"task_state"' in frame:
            state = _data(frame)["state"]
            if state == "running":
                running = True
            elif running:
                return "done"
            continue
        if b"approval_request" not in frame:
            continue
        running = True  # a pending call: the task runs (a reconnect's snapshot says so too)
        call_id = _data(frame)["toolCall"]["payload"]["tool_call_id"]
        if plan == "abort":
            tally.aborts += 1
            await client.post(f"/api/sessions/{sid}/abort")
            plan = "none"
            continue
        if plan == "reconnect":
            tally.reconnects += 1
            return "reconnect"
        answer = await client.post(
            f"/api/sessions/{sid}/approvals/{call_id}", json={"decision": "allow"}
        )
        if answer.status_code == 204:
            tally.approvals += 1
        elif answer.status_code != 404:  # 404: answered already (a reconnect's replay)
            tally.errors.append(f"approve {answer.status_code}: {answer.text[:120]}")
    return "closed"


async def drive(
    client: httpx.AsyncClient, deadline: float, rng: random.Random, tally: Tally, per_session: int
) -> None:
    sid = ""
    done = per_session
    while trio.current_time() < deadline:
        if done >= per_session:
            if sid:
                gone = await client.delete(f"/api/sessions/{sid}")
                if gone.status_code not in (200, 204):
                    tally.errors.append(f"delete {gone.status_code}: {gone.text[:120]}")
            created = await client.post(SESSIONS_PATH, json={"approvalMode": "always-ask"})
            sid = created.json()["session"]["sessionId"]
            tally.sessions += 1
            done = 0
        done += 1
        plan = (
            "abort"
            if rng.randrange(ABORT_ONE_IN) == 0
            else "reconnect"
            if rng.randrange(RECONNECT_ONE_IN) == 0
            else "none"
        )
        async with subscribed(client, sid) as frames:
            await frames.next()  # the snapshot's task_state (idle)
            started = await client.post(
                f"/api/sessions/{sid}/tasks", json={"input": [{"type": "text", "text": TASK}]}
            )
            if started.status_code != 202:
                tally.errors.append(f"start {started.status_code}: {started.text[:120]}")
                await trio.sleep(1)
                continue
            tally.tasks += 1
            how = await follow(client, sid, frames, plan, tally)
        while how == "reconnect":
            async with subscribed(client, sid) as frames:
                how = await follow(client, sid, frames, "none", tally)


def sample(process: psutil.Process) -> tuple[int, int, int, int]:
    """(RSS bytes, open fds, threads, processes in its tree)."""
    with process.oneshot():
        rss = process.memory_info().rss
        fds = process.num_fds()
        threads = process.num_threads()
    tree = 1 + len(process.children(recursive=True))
    return rss, fds, threads, tree


def heap_sample(path: Path) -> tuple[int, int]:
    """The server's latest probe line: Python's allocated blocks, malloc's bytes in use."""
    try:
        last = path.read_text().splitlines()[-1]
    except (OSError, IndexError):
        return 0, 0
    line = json.loads(last)
    return int(line["blocks"]), int(line.get("in_use", 0))


def heap_report(heaps: list[tuple[float, int, int]], end: float) -> str:
    """The first minute's highest Python blocks and malloc bytes in use against the last
    minute's median, as the RSS rule compares RSS (reported, not judged)."""
    first = [h for h in heaps if h[0] <= 60.0]
    last = [h for h in heaps if max(60.0, end - 60.0) < h[0] <= end]
    if not first or not last:
        return "too few samples"
    words = []
    for index, name, scale, unit in (
        (1, "Python blocks", 1e3, "k"),
        (2, "malloc in use", 1e6, " MB"),
    ):
        peak = max(h[index] for h in first) / scale
        level = statistics.median(h[index] for h in last) / scale
        change = (level / peak - 1) * 100 if peak else 0.0
        words.append(f"{name} {peak:.1f}{unit} -> {level:.1f}{unit} ({change:+.1f} %)")
    return "; ".join(words)


def verdict(rows: list[tuple[float, int, int, int, int]], end: float) -> tuple[bool, str]:
    first = [row for row in rows if row[0] <= 60.0] or rows[:1]
    minutes = [
        [row for row in rows if 60.0 * m < row[0] <= 60.0 * (m + 1) and row[0] <= end]
        for m in range(1, math.ceil(end / 60.0))
    ]
    names = ("RSS", "fds", "threads", "processes")
    grew = []
    for index, name in enumerate(names, start=1):
        limit = math.ceil(max(row[index] for row in first) * 1.1)
        for number, minute in enumerate(minutes, start=2):
            if not minute:
                continue
            level = statistics.median(row[index] for row in minute)
            if level > limit:
                grew.append(f"{name} in minute {number}: {level:.0f} > {limit}")
    return not grew, "; ".join(grew) or "every figure within the first minute's level + 10 %"


async def main(minutes: float, seed: int, per_session: int, probe: Path | None) -> int:
    rng = random.Random(seed)
    tally = Tally()
    rows: list[tuple[float, int, int, int, int]] = []
    heaps: list[tuple[float, int, int]] = []
    with tempfile.TemporaryDirectory(prefix="penguin-soak-") as tmp:
        root = Path(tmp) / "root"
        home = Path(tmp) / "home"
        home.mkdir()
        async with t.serve_openai_compatible(handler) as served:
            configure(root, served.base_url)
            heap = probe or Path(tmp) / "heap.jsonl"
            serve_args = ["server", "--port", "0", "--root", str(root)]
            server = await trio.lowlevel.open_process(
                [sys.executable, "-m", "benchmarks._soak_probe", str(heap), *serve_args],
                stdout=subprocess.PIPE,
                env={**os.environ, "PENGUIN_SERVER_TOKEN": TOKEN, "HOME": str(home)},
            )
            assert server.stdout is not None
            line = b""
            with trio.fail_after(60):
                while not line.endswith(b"\n"):
                    line += await server.stdout.receive_some(4096)
            base = line.decode().split("server: ", 1)[1].split("/?token=")[0]
            watched = psutil.Process(server.pid)
            limits = httpx.Limits(max_connections=4 * SESSIONS + 32, max_keepalive_connections=64)
            start = trio.current_time()
            deadline = start + minutes * 60
            print(f"soak: {SESSIONS} sessions for {minutes:g} min against {base}")
            print(f"{'t (s)':>6} {'RSS MB':>8} {'fds':>5} {'threads':>8} {'procs':>6} "
                  f"{'tasks':>6} {'aborts':>7} {'reconn':>7} {'pyblk k':>8} {'malloc MB':>9}"
                  "  load")  # fmt: skip
            try:
                async with (
                    httpx.AsyncClient(
                        base_url=base,
                        headers={"Authorization": f"Bearer {TOKEN}"},
                        timeout=120,
                        limits=limits,
                    ) as client,
                    trio.open_nursery() as nursery,
                ):
                    for _ in range(SESSIONS):
                        plan = random.Random(rng.random())
                        nursery.start_soon(drive, client, deadline, plan, tally, per_session)

                    async def sampler() -> None:
                        while True:
                            now = trio.current_time() - start
                            rss, fds, threads, tree = sample(watched)
                            rows.append((now, rss, fds, threads, tree))
                            blocks, in_use = heap_sample(heap)
                            heaps.append((now, blocks, in_use))
                            load = Path("/proc/loadavg").read_text().split()[:3]  # noqa: ASYNC240
                            print(
                                f"{now:6.0f} {rss / 1e6:8.1f} {fds:5d} {threads:8d} {tree:6d} "
                                f"{tally.tasks:6d} {tally.aborts:7d} {tally.reconnects:7d} "
                                f"{blocks / 1e3:8.0f} {in_use / 1e6:9.1f}  " + " ".join(load),
                                flush=True,
                            )
                            await trio.sleep(SAMPLE_EVERY)

                    nursery.start_soon(sampler)
                    await trio.sleep_until(deadline + 30)  # the last tasks finish meanwhile
                    nursery.cancel_scope.cancel()
            finally:
                server.send_signal(signal.SIGINT)
                with trio.fail_after(60):
                    code = await server.wait()
    ok, why = verdict(rows, minutes * 60)
    print(
        f"tasks {tally.tasks}, sessions {tally.sessions}, approvals {tally.approvals}, "
        f"aborts {tally.aborts}, reconnects {tally.reconnects}, "
        f"client errors {len(tally.errors)}; server exit {code}"
    )
    for error in tally.errors[:5]:
        print(f"  {error}")
    print(
        "server's heap (not judged; tells a leak from the allocator): "
        + heap_report(heaps, minutes * 60)
    )
    ok = ok and not tally.errors and code == 0
    print(f"{'PASS' if ok else 'FAIL'}: {why}")
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long (default 10)")
    parser.add_argument("--seed", type=int, default=21, help="the random plan's seed")
    parser.add_argument(
        "--tasks-per-session", type=int, default=10, help="tasks before a session is replaced"
    )
    parser.add_argument("--probe", type=Path, help="keep the server's heap probe lines here")
    arguments = parser.parse_args()
    sys.exit(
        trio.run(
            main, arguments.minutes, arguments.seed, arguments.tasks_per_session, arguments.probe
        )
    )
