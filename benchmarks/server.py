r"""``penguin server`` under load, beside the same work done in-process through ``Session.run``.

Run it with ``python -m benchmarks.server`` (``--quick`` for a smaller run). One local
OpenAI-compatible model (``penguin.llm.testing``), in a process of its own so that its
CPU is neither side's nor the client's, answers both sides; each side runs in a process
of its own, so their peak RSS can be read (``VmHWM``). Both sides' sessions run under
the same sandbox, ``--sandbox`` (default ``workspace-write``, the server's own default;
``off`` for none):

a. 64 sessions at once, each a scripted task of 10 ``exec_command`` calls under
   ``always-ask``. Server: a real ``penguin server`` process; for every session a client
   reads ``approval_request`` from the stream and approves it with a POST. Baseline: a
   worker process running the same 64 sessions with ``Session.run`` and an approver
   that allows at once. Figures: total wall time (target: server <= 1.5 x baseline);
   the approval round trip, from the client receiving ``approval_request`` to it
   receiving the call's first output (p50, p99; target: p50 < 5 ms), under that load
   and for one session alone; the server's peak RSS (target: < 300 MB). The model
   answers at once (``--think`` for a model that takes time), so the loaded round trip
   is that of a server kept busy all the time; it is measured again at a model's pace
   (server side only, 64 new sessions of 5 calls, each turn of the model taking 2 s on
   average), where the server's loop has time to spare, as it has with a real model.
b. SSE fan-out: one session whose model streams 20,000 text chunks, read by 10
   subscribers of its stream: events per second delivered (all subscribers together,
   and per subscriber), beside the rate at which ``Session.run`` yields the same
   messages in-process.

Login shells read no profile (``HOME`` is a fresh directory), and every loop is bounded:
the benchmark stops by itself. Traffic stays on 127.0.0.1.

With ``--loop-profile`` the server runs under :mod:`benchmarks._loop_probe`, and (a)
also prints where the server's loop spent its CPU, per call and by task (request
handlers and SSE writes, the engine's turns, tool runs, approvals…), and how many SSE
chunks carried each call's frames. The probe costs the loop a little CPU of its own.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Final, final

import httpx
import psutil
import trio

import penguin
from penguin import config as cfg
from penguin import protocol as om
from penguin.approval import approver_for_mode
from penguin.llm import testing as t

from ._h11_client import Client as H11Client

CALLS_TASK: Final = "bench: ten commands"
BURST_TASK: Final = "bench: a burst of text"
TOKEN: Final = "benchmark-token"
MB: Final = 1_000_000
PACE: Final = 2.0
"""The model's time per turn, on average, in (a) at a model's pace (seconds)."""
PACED_CALLS: Final = 5
"""Commands per session at a model's pace (each turn takes ``PACE``, so fewer than (a))."""

AnyClient = H11Client | httpx.AsyncClient
"""A session's client: see :func:`session_client`."""


# --------------------------------------------------------------------------- the model


def _first_user_text(body: dict[str, Any]) -> str:
    for message in body.get("messages", []):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return str(message["content"])
    return ""


def model_handler(calls: int, burst: int) -> Callable[[t.ReceivedRequest], t.Reply]:
    """The script both sides run: ``calls`` commands one per turn, or one long burst."""

    def handler(request: t.ReceivedRequest) -> t.Reply:
        body = request.json()
        turn = sum(1 for m in body["messages"] if m.get("role") == "assistant")
        task = _first_user_text(body)
        if task == CALLS_TASK and turn < calls:
            arguments = json.dumps({"description": "step", "cmd": f"echo step {turn}"})
            return t.sse_reply(
                [
                    t.tool_call_chunk(
                        0, id=f"call_{turn}", name="exec_command", arguments=arguments
                    ),
                    t.finish_chunk("tool_calls"),
                ]
            )
        if task == BURST_TASK and turn == 0:
            chunks: list[dict[str, Any]] = [t.content_chunk("word ") for _ in range(burst)]
            return t.sse_reply([*chunks, t.finish_chunk()])
        return t.sse_reply([t.content_chunk("Done."), t.finish_chunk()])

    return handler


def thinking(handler: Callable[[t.ReceivedRequest], t.Reply], think: float) -> t.Handler:
    """``handler``, answering a turn of the ten-command task after ``think`` seconds or so.

    Each wait is drawn evenly from half to one and a half times ``think`` (seeded, so
    runs draw the same): with one time for all, the 64 sessions' calls would all come
    in the same millisecond, turn after turn, as no real sessions do.
    """
    draw = random.Random(20)

    async def slow(request: t.ReceivedRequest) -> t.Reply:
        if _first_user_text(request.json()) == CALLS_TASK:
            await trio.sleep(think * draw.uniform(0.5, 1.5))
        return handler(request)

    return slow if think > 0 else handler


async def serve_model(calls: int, burst: int, think: float) -> None:
    """The model's process: print its URL, serve until stdin is closed."""
    async with t.serve_openai_compatible(thinking(model_handler(calls, burst), think)) as server:
        print(server.base_url, flush=True)
        await trio.to_thread.run_sync(sys.stdin.read)


@contextlib.asynccontextmanager
async def model_process(
    calls: int, burst: int, think: float
) -> AsyncIterator[tuple[trio.Process, str]]:
    """The model's process (:func:`serve_model`) and its base URL, until the block ends."""
    model = await trio.lowlevel.open_process(
        [sys.executable, "-m", "benchmarks.server", "--model", str(calls), str(burst), str(think)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert model.stdout is not None
        line = b""
        with trio.fail_after(60):
            while not line.endswith(b"\n"):
                line += await model.stdout.receive_some(4096)
        yield model, line.decode().strip()
    finally:
        assert model.stdin is not None
        await model.stdin.aclose()  # the model's process ends when its stdin does
        with trio.fail_after(30):
            await model.wait()


def configure(root: Path, base_url: str) -> None:
    paths = cfg.AgentPaths(root)
    entry = cfg.ModelEntry(provider="local", model_id="bench", base_url=base_url, api_key="k")
    project = cfg.add_model(cfg.load_project_config(paths.project_config), entry, set_default=True)
    cfg.save_project_config(paths.project_config, project)


def peak_rss(pid: int | None = None) -> int:
    """The process's peak resident set (``VmHWM``), in bytes."""
    status = Path(f"/proc/{pid or 'self'}/status").read_text()
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _cpu(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def _descendants_cpu(pid: int) -> float:
    """CPU seconds of everything ``pid`` started: its sandboxes and their commands.

    The live descendants' own and ended children's, and the ended children's of ``pid``
    itself (a session's sandbox lives as long as the session, which the server keeps).
    """
    process = psutil.Process(pid)
    own = process.cpu_times()
    total = own.children_user + own.children_system
    for child in process.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            times = child.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
    return float(total)


def percentile(samples: list[float], q: int) -> float:
    if len(samples) < 2:
        return samples[0] if samples else float("nan")
    return statistics.quantiles(samples, n=100)[q - 1]


# --------------------------------------------------------------------------- the baseline


async def worker(root: Path, sessions: int, burst: int, mode: str) -> dict[str, float]:
    """The baseline, in its own process: the same sessions through ``Session.run``."""
    agent = penguin.Agent.open(root)
    sandbox = None if mode == "off" else penguin.SandboxPolicy(mode)

    async def allow(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        return "allow"

    async def one() -> None:
        async with agent.session(sandbox=sandbox) as session:
            approve = approver_for_mode(
                "always-ask", ask=allow, permission=session.environment.tool_permission
            )
            async with session.run([om.user_text(CALLS_TASK)], approve=approve) as stream:
                async for _ in stream:
                    pass
            assert stream.result.status == "completed", stream.result

    own, children = _usage()
    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(sessions):
            nursery.start_soon(one)
    wall = time.perf_counter() - start
    own_after, children_after = _usage()
    async with agent.session() as session:
        count = 0
        began = time.perf_counter()
        async with session.run([om.user_text(BURST_TASK)]) as stream:
            async for _ in stream:
                count += 1
        rate = count / (time.perf_counter() - began)
    return {
        "wall": wall,
        "rate": rate,
        "events": count,
        "rss": peak_rss(),
        "cpu": own_after - own,
        "children_cpu": children_after - children,
    }


def _usage() -> tuple[float, float]:
    """This process's CPU seconds, and those of its children that have ended."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


async def run_worker(root: Path, sessions: int, burst: int, mode: str) -> dict[str, float]:
    done = await trio.run_process(
        [
            sys.executable,
            "-m",
            "benchmarks.server",
            "--worker",
            str(root),
            str(sessions),
            str(burst),
            mode,
        ],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the baseline worker failed:\n{done.stderr.decode()[-3000:]}")
    figures: dict[str, float] = json.loads(done.stdout.decode().splitlines()[-1])
    return figures


# --------------------------------------------------------------------------- the server


class Frames:
    """SSE frames of one response, as raw bytes (parsed only when a test needs to)."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks
        self._buffer = b""

    async def next(self) -> bytes | None:
        while b"\n\n" not in self._buffer:
            try:
                self._buffer += await self._chunks.__anext__()
            except StopAsyncIteration:
                return None
        frame, _, self._buffer = self._buffer.partition(b"\n\n")
        return frame

    async def aclose(self) -> None:
        with trio.CancelScope() as scope, contextlib.suppress(Exception):
            scope.cancel()
            async for _ in self._chunks:
                pass


def _data(frame: bytes) -> Any:
    for line in frame.split(b"\n"):
        if line.startswith(b"data: "):
            return json.loads(line[6:])
    return None


@contextlib.asynccontextmanager
async def frames_of(client: AnyClient, sid: str) -> AsyncIterator[Frames]:
    path = f"/api/sessions/{sid}/stream"
    async with contextlib.AsyncExitStack() as stack:
        if isinstance(client, H11Client):
            chunks = await stack.enter_async_context(client.stream(path))
        else:
            chunks = (await stack.enter_async_context(client.stream("GET", path))).aiter_bytes()
        frames = Frames(chunks)
        try:
            yield frames
        finally:
            await frames.aclose()


@final
class Trips:
    """One side's approval round trips, split where they can queue (client-side clock)."""

    def __init__(self) -> None:
        self.decide: list[float] = []
        """The model's tool call received → its ``approval_request`` received (the server
        reads the session's mode, then asks)."""
        self.whole: list[float] = []
        """``approval_request`` received → the call's first output received."""
        self.answer: list[float] = []
        """``approval_request`` received → the POST's 204 received."""
        self.after: list[float] = []
        """The POST's 204 received → the call's first output received."""


def session_client(shared: httpx.AsyncClient, kind: str = "h11") -> AnyClient:
    """A client of one session's own (``shared`` gives the address and credentials only).

    ``kind`` is ``h11`` (:mod:`benchmarks._h11_client`, the default: it takes less of the
    CPU the server needs) or ``httpx``.

    Each session is a user of its own, with its own connections, as 64 browsers would
    be. One pool of connections for every session queued the approvals in the client:
    with 64 streams open on it, httpcore's pool held a POST for 190-300 ms (p50) before
    it sent a byte. Make them before the clock starts: an ``httpx.AsyncClient`` builds an
    SSL context when it is made (22 ms of CPU here, even for ``http://``), and 64 of
    them made inside the timed part were 1.4 s of this client's CPU charged to the
    server's wall time.
    """
    if kind == "h11":
        return H11Client(str(shared.base_url), {"Authorization": f"Bearer {TOKEN}"})
    return httpx.AsyncClient(
        base_url=shared.base_url, headers=shared.headers, timeout=shared.timeout
    )


async def drive_session(shared: httpx.AsyncClient, trips: Trips, mode: str, kind: str) -> None:
    """One session of (a) with a client of its own: see :func:`session_client`."""
    async with session_client(shared, kind) as client:
        await _drive(client, trips, mode)


async def _drive(
    client: AnyClient,
    trips: Trips,
    mode: str,
    on_created: Callable[[], None] | None = None,
) -> None:
    created = await client.post(
        "/api/projects/default_project/agents/default_agent/sessions",
        json={"approvalMode": "always-ask", "sandboxMode": mode},
    )
    sid = created.json()["session"]["sessionId"]
    if on_created is not None:
        on_created()
    called: dict[str, float] = {}
    asked: dict[str, float] = {}
    answered: dict[str, float] = {}
    running = False
    async with frames_of(client, sid) as frames:
        started = await client.post(
            f"/api/sessions/{sid}/tasks", json={"input": [{"type": "text", "text": CALLS_TASK}]}
        )
        assert started.status_code == 202, started.text
        while (frame := await frames.next()) is not None:
            if b"approval_request" in frame:
                now = time.perf_counter()
                call_id = _data(frame)["toolCall"]["payload"]["tool_call_id"]
                asked[call_id] = now
                if call_id in called:
                    trips.decide.append(now - called.pop(call_id))
                answer = await client.post(
                    f"/api/sessions/{sid}/approvals/{call_id}", json={"decision": "allow"}
                )
                assert answer.status_code == 204, answer.text
                answered[call_id] = time.perf_counter()
            elif b'"type":"tool_call"' in frame:
                called[_data(frame)["payload"]["tool_call_id"]] = time.perf_counter()
            elif b'"partial_tool_call_output"' in frame and b'"start"' in frame:
                now = time.perf_counter()
                call_id = _data(frame)["payload"]["tool_call_id"]
                if call_id in asked:
                    ask, done = asked.pop(call_id), answered.pop(call_id)
                    trips.whole.append(now - ask)
                    trips.answer.append(done - ask)
                    trips.after.append(now - done)
            elif b'"task_state"' in frame:
                state = _data(frame)["state"]
                if state == "running":
                    running = True
                elif running:
                    break


async def measure_lag(lags: list[float], task_status: trio.TaskStatus[None]) -> None:
    """This client's own loop lag: how late a 1 ms sleep wakes (until cancelled)."""
    task_status.started()
    while True:
        began = trio.current_time()
        await trio.sleep(0.001)
        lags.append(trio.current_time() - began - 0.001)


async def fan_out(client: httpx.AsyncClient, subscribers: int) -> tuple[int, float]:
    """(b): one burst session, ``subscribers`` readers; events delivered and seconds taken."""
    created = await client.post(
        "/api/projects/default_project/agents/default_agent/sessions", json={}
    )
    sid = created.json()["session"]["sessionId"]
    counts: list[int] = []
    began: list[float] = []

    async def follow(task_status: trio.TaskStatus[None]) -> None:
        count = 0
        running = False
        async with frames_of(client, sid) as frames:
            task_status.started()
            while (frame := await frames.next()) is not None:
                count += 1
                if b'"task_state"' in frame:
                    if b'"running"' in frame:
                        running = True
                    elif running:
                        break
        counts.append(count)

    async with trio.open_nursery() as nursery:
        for _ in range(subscribers):
            await nursery.start(follow)
        began.append(time.perf_counter())
        started = await client.post(
            f"/api/sessions/{sid}/tasks", json={"input": [{"type": "text", "text": BURST_TASK}]}
        )
        assert started.status_code == 202
    return sum(counts), time.perf_counter() - began[0]


async def read_base_url(process: trio.Process) -> str:
    """The base URL from the line a starting ``penguin server`` prints (within 60 s)."""
    assert process.stdout is not None
    line = b""
    with trio.fail_after(60):
        while not line.endswith(b"\n"):
            line += await process.stdout.receive_some(4096)
    return line.decode().split("server: ", 1)[1].split("/?token=")[0]


async def run_server(
    root: Path,
    sessions: int,
    subscribers: int,
    mode: str,
    probe: Path | None = None,
    kind: str = "h11",
) -> dict[str, Any]:
    """(a) then (b) against a ``penguin server``; with ``probe``, under ``_loop_probe``."""
    figures: dict[str, Any] = {}
    async with server_process(root, sessions, probe, figures) as (process, client):
        alone = Trips()
        await drive_session(client, alone, mode, kind)  # also warms the server up
        if probe is not None:
            process.send_signal(signal.SIGUSR1)  # the loop's count starts with (a)
        loaded = Trips()
        lags: list[float] = []
        opened: list[tuple[float, float]] = []  # (time, server CPU) once all are created
        created = [0]

        def on_created() -> None:
            created[0] += 1
            if created[0] == sessions:
                opened.append((time.perf_counter(), _cpu(process.pid)))

        async with contextlib.AsyncExitStack() as clients:
            own: list[AnyClient] = [
                await clients.enter_async_context(session_client(client, kind))
                for _ in range(sessions)
            ]
            server_cpu = _cpu(process.pid)
            server_children = _descendants_cpu(process.pid)
            client_cpu = time.process_time()
            start = time.perf_counter()
            with trio.fail_after(600):
                async with trio.open_nursery() as outer:
                    await outer.start(measure_lag, lags)
                    async with trio.open_nursery() as nursery:
                        for session in own:
                            nursery.start_soon(_drive, session, loaded, mode, on_created)
                    outer.cancel_scope.cancel()
            end, end_cpu = time.perf_counter(), _cpu(process.pid)
            figures["wall"] = end - start
            if probe is not None:
                figures["loop"] = await _loop_figures(process, probe)
            figures["server_cpu"] = end_cpu - server_cpu
            figures["opening"] = opened[0][0] - start
            figures["calls_busy"] = (end_cpu - opened[0][1]) / (end - opened[0][0])
            figures["children_cpu"] = _descendants_cpu(process.pid) - server_children
            figures["client_cpu"] = time.process_time() - client_cpu
        figures["lags"] = lags
        figures["alone"] = alone
        figures["loaded"] = loaded
        with trio.fail_after(600):
            figures["events"], figures["seconds"] = await fan_out(client, subscribers)
        figures["rss"] = peak_rss(process.pid)
    return figures


@contextlib.asynccontextmanager
async def server_process(
    root: Path, sessions: int, probe: Path | None, figures: dict[str, Any]
) -> AsyncIterator[tuple[trio.Process, httpx.AsyncClient]]:
    """A ``penguin server`` on ``root`` and a client of it (its address and token).

    With ``probe``, the server runs under ``_loop_probe``. It is stopped with SIGINT on
    the way out, and its exit status is put in ``figures["exit"]``.
    """
    runner = ["penguin"] if probe is None else ["benchmarks._loop_probe", str(probe)]
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", *runner, "server", "--port", "0", "--root", str(root)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PENGUIN_SERVER_TOKEN": TOKEN},
    )
    try:
        base = await read_base_url(process)
        limits = httpx.Limits(max_connections=4 * sessions + 32, max_keepalive_connections=None)
        async with httpx.AsyncClient(
            base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120, limits=limits
        ) as client:
            yield process, client
    finally:
        process.send_signal(signal.SIGINT)
        with trio.fail_after(30):
            figures["exit"] = await process.wait()


async def run_paced(root: Path, sessions: int, mode: str, kind: str) -> dict[str, Any]:
    """(a) at a model's pace, server side only: its round trips and the server's CPU."""
    figures: dict[str, Any] = {}
    trips = Trips()
    async with (
        server_process(root, sessions, None, figures) as (process, client),
        contextlib.AsyncExitStack() as clients,
    ):
        own: list[AnyClient] = [
            await clients.enter_async_context(session_client(client, kind)) for _ in range(sessions)
        ]
        cpu, start = _cpu(process.pid), time.perf_counter()
        with trio.fail_after(600):
            async with trio.open_nursery() as nursery:
                for session in own:
                    nursery.start_soon(_drive, session, trips, mode)
        figures["busy"] = (_cpu(process.pid) - cpu) / (time.perf_counter() - start)
    figures["trips"] = trips
    return figures


async def _loop_figures(process: trio.Process, probe: Path) -> dict[str, Any]:
    """What ``_loop_probe`` counted since ``SIGUSR1`` (asked with ``SIGUSR2``)."""
    process.send_signal(signal.SIGUSR2)

    def written() -> dict[str, Any]:  # the probe writes the file whole (a rename)
        deadline = time.monotonic() + 10
        while not probe.exists():
            if time.monotonic() > deadline:
                raise RuntimeError("the server's loop probe wrote nothing within 10 s")
            time.sleep(0.01)
        figures: dict[str, Any] = json.loads(probe.read_text())
        return figures

    return await trio.to_thread.run_sync(written)


def print_loop(loop: dict[str, Any], calls: int, round_trip: float) -> None:
    """The server's loop during (a), per call: its thread's CPU, by task name; its passes.

    ``round_trip`` is the loaded approval round trip's p50, in seconds.
    """
    tasks: dict[str, list[float]] = loop["tasks"]
    in_steps = sum(cpu for cpu, _ in tasks.values())
    per = 1000 / calls
    print(
        f"    the server's loop during (a) (--loop-profile; its thread's CPU per call):"
        f" {loop['thread'] * per:.2f} ms, of which {in_steps * per:.2f} in task steps"
        f" and {(loop['thread'] - in_steps) * per:.2f} between them (scheduling, epoll)"
    )
    ranked = sorted(tasks.items(), key=lambda item: -item[1][0])
    for name, (cpu, steps) in ranked[:12]:
        print(
            f"      {cpu * per:6.2f} ms {steps / calls:6.1f} steps"
            f" {1e6 * cpu / max(steps, 1):6.1f} us/step  {name}"
        )
    if loop["chunks"]:
        print(
            f"      SSE: {loop['frames'] / calls:.1f} frames per call,"
            f" written in {loop['chunks'] / calls:.1f} chunks"
        )
    passes: list[float] = loop.get("passes", [])
    if passes and round_trip > 0:
        mean = statistics.fmean(passes)
        # A yield lands in a pass with odds in proportion to its length: on average
        # sum(d^2) / sum(d) long; it waits out the rest of that one (half, on average),
        # then its turn in the next (half of an average pass).
        wait = (sum(d * d for d in passes) / sum(passes) + mean) / 2
        print(
            f"      scheduler passes: {len(passes) / calls:.1f} per call, each"
            f" p50 {statistics.median(passes) * 1000:.2f} ms, mean {mean * 1000:.2f} ms,"
            f" p90 {percentile(passes, 90) * 1000:.2f} ms (wall)"
        )
        print(
            f"      a task that yields (a lock, a channel, a socket write) waits"
            f" {wait * 1000:.2f} ms for its next step: the loaded round trip's p50 is"
            f" {round_trip / wait:.1f} such waits"
        )


# --------------------------------------------------------------------------- report


def _verdict(ok: bool) -> str:
    return "ok  " if ok else "MISS"


async def main(
    quick: bool, mode: str, loop_profile: bool = False, kind: str = "h11", think: float = 0.0
) -> None:
    sessions, calls, subscribers, burst = (16, 10, 10, 5_000) if quick else (64, 10, 10, 20_000)
    with tempfile.TemporaryDirectory(prefix="penguin-bench-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        os.environ["HOME"] = str(home)  # login shells read no profile, on both sides
        async with model_process(calls, burst, think) as (model, base_url):
            base_root, server_root = Path(tmp) / "baseline", Path(tmp) / "server"
            configure(base_root, base_url)
            configure(server_root, base_url)
            print(
                f"penguin server benchmark: {sessions} sessions x {calls} exec_command calls,"
                f" sandbox {mode}, {kind} clients, the model answers in {think * 1000:g} ms"
                f" (load {' '.join(f'{x:.2f}' for x in os.getloadavg())})"
            )
            model_cpu = _cpu(model.pid)
            baseline = await run_worker(base_root, sessions, burst, mode)
            baseline["model_cpu"] = _cpu(model.pid) - model_cpu
            model_cpu = _cpu(model.pid)
            probe = Path(tmp) / "loop.json" if loop_profile else None
            server = await run_server(server_root, sessions, subscribers, mode, probe, kind)
            server["model_cpu"] = _cpu(model.pid) - model_cpu
        paced: dict[str, Any] | None = None
        if not quick and think == 0:
            async with model_process(PACED_CALLS, burst, PACE) as (_, base_url):
                paced_root = Path(tmp) / "paced"
                configure(paced_root, base_url)
                paced = await run_paced(paced_root, sessions, mode, kind)
    ratio = server["wall"] / baseline["wall"]
    trips, alone_trips = server["loaded"], server["alone"]
    loaded, alone = trips.whole, alone_trips.whole
    p50, p99 = statistics.median(loaded) * 1000, percentile(loaded, 99) * 1000
    a50, a99 = statistics.median(alone) * 1000, percentile(alone, 99) * 1000
    print(f"(a) {sessions} sessions, {len(loaded)} approvals through HTTP")
    print(f"    server (HTTP + SSE approvals)  {server['wall']:7.2f} s")
    print(f"    baseline (Session.run)         {baseline['wall']:7.2f} s")
    print(
        f"    ratio                          {ratio:7.2f} x"
        f"    {_verdict(ratio <= 1.5)} target <= 1.5 x"
    )
    print(
        f"    approval round trip, loaded    p50 {p50:6.2f} ms  p99 {p99:6.2f} ms"
        f"    {_verdict(p50 < 5)} target p50 < 5 ms"
    )
    print(
        f"      of which: ask -> 204 p50 {statistics.median(trips.answer) * 1000:6.2f} ms,"
        f" 204 -> first output p50 {statistics.median(trips.after) * 1000:6.2f} ms;"
        f" this client's loop lag p50 {statistics.median(server['lags']) * 1000:5.2f} ms"
        f" p99 {percentile(server['lags'], 99) * 1000:6.2f} ms"
    )
    print(
        f"      before the ask: the model's tool call -> ask p50"
        f" {statistics.median(trips.decide) * 1000:6.2f} ms"
        f" (the server reads the session's mode, then asks)"
    )
    busy = server["server_cpu"] / server["wall"], server["client_cpu"] / server["wall"]
    print(
        f"    CPU during (a): server {busy[0]:4.0%} of a core, this client {busy[1]:4.0%}"
        f" (load {' '.join(f'{x:.2f}' for x in os.getloadavg())})"
    )
    print(
        f"      the server's loop, once all {sessions} sessions were open"
        f" ({server['opening']:.2f} s in): {server['calls_busy']:4.0%} of a core"
        " (one loop: at 100 % the calls take calls x the server's CPU per call)"
    )
    cores = os.cpu_count() or 1
    print(f"    the machine's CPU per call ({cores} cores), in ms:")
    print("                     penguin  sandboxes+commands  client  model  busy")
    machine: dict[str, float] = {}  # each side's CPU seconds, every process together
    for name, side, client in (
        ("server", server, server["client_cpu"]),
        ("baseline", baseline, 0.0),
    ):
        own = side["server_cpu"] if name == "server" else side["cpu"]
        whole = machine[name] = own + side["children_cpu"] + client + side["model_cpu"]
        per = [
            1000 * x / len(loaded) for x in (own, side["children_cpu"], client, side["model_cpu"])
        ]
        print(
            f"      {name:<14} {per[0]:7.2f} {per[1]:19.2f} {per[2]:7.2f} {per[3]:6.2f}"
            f"  {whole / (side['wall'] * cores):4.0%} of the cores"
        )
    print(
        f"    at this CPU per call, the ratio is at least"
        f" {machine['server'] / cores / baseline['wall']:.2f} x with every core busy all the"
        f" time, and {server['server_cpu'] / baseline['wall']:.2f} x if the server's own"
        " CPU ran on one core without a pause"
    )
    if "loop" in server:
        print_loop(server["loop"], len(loaded), statistics.median(loaded))
    print(f"    approval round trip, alone     p50 {a50:6.2f} ms  p99 {a99:6.2f} ms")
    if paced is not None:
        whole = paced["trips"].whole
        print(
            f"    approval round trip, paced     p50 {statistics.median(whole) * 1000:6.2f} ms"
            f"  p99 {percentile(whole, 99) * 1000:6.2f} ms"
            f"    {sessions} sessions again, the model taking {PACE:g} s a turn"
            f" (0.5-1.5 x), {PACED_CALLS} calls each: the server {paced['busy']:.0%} of a core"
        )
    rss, base_rss = server["rss"] / MB, baseline["rss"] / MB
    print(
        f"    peak RSS: server {rss:6.1f} MB, baseline worker {base_rss:6.1f} MB"
        f"    {_verdict(rss < 300)} target < 300 MB"
    )
    rate = server["events"] / server["seconds"]
    print(f"(b) SSE fan-out: {burst:,} text chunks, {subscribers} subscribers")
    print(
        f"    server: {server['events']:,} events in {server['seconds']:.2f} s"
        f" = {rate:,.0f} events/s"
        f" ({rate / subscribers:,.0f} per subscriber)"
    )
    print(f"    baseline (Session.run in-process): {baseline['rate']:,.0f} messages/s")
    print(f"    server exit status after SIGINT: {server['exit']}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="16 sessions, a 5,000-chunk burst")
    parser.add_argument(
        "--sandbox",
        choices=("workspace-write", "read-only", "off"),
        default="workspace-write",
        help="both sides' sessions' sandbox (default: workspace-write, the server's default)",
    )
    parser.add_argument(
        "--loop-profile",
        action="store_true",
        help="run the server under benchmarks._loop_probe: its loop's CPU per call, by task",
    )
    parser.add_argument(
        "--think",
        type=float,
        default=0.0,
        metavar="MS",
        help="the model's time to answer each turn of (a)'s task, on average, on both sides"
        " (each turn takes 0.5-1.5 times it; default 0: at once, which keeps the server's"
        " loop busy; any real model takes longer, so a loaded round trip with some think"
        " time is the one a person at the page sees)",
    )
    parser.add_argument(
        "--client",
        choices=("h11", "httpx"),
        default="h11",
        help="the sessions' HTTP client in (a) (default: h11, the lighter; see"
        " benchmarks/_h11_client.py)",
    )
    parser.add_argument(
        "--worker", nargs=4, metavar=("ROOT", "SESSIONS", "BURST", "MODE"), help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--model", nargs=3, metavar=("CALLS", "BURST", "THINK"), help=argparse.SUPPRESS
    )
    arguments = parser.parse_args()
    if arguments.model:
        trio.run(
            serve_model, int(arguments.model[0]), int(arguments.model[1]), float(arguments.model[2])
        )
    elif arguments.worker:
        root, count, size, mode = arguments.worker
        print(json.dumps(trio.run(worker, Path(root), int(count), int(size), mode)))
    else:
        trio.run(
            main,
            arguments.quick,
            arguments.sandbox,
            arguments.loop_profile,
            arguments.client,
            arguments.think / 1000,
        )
