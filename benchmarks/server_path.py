r"""Where an approval's round trip through ``penguin server`` waits, under load.

Run it with ``python -m benchmarks.server_path`` (``--sessions N``, 16 by default;
``--sessions 1`` for the unloaded path). It is a diagnostic beside
``benchmarks.server``, whose loaded round trip it takes apart: the same sessions (a
task of 10 ``exec_command`` calls under ``always-ask``, each call approved by a client
that reads ``approval_request`` from the session's stream), against a real
``penguin server`` process that carries probes at named points of the path. It prints,
for every approved call, the p50/p90 of each segment:

- the client receives ``approval_request`` and POSTs the answer;
- hypercorn reads the request's bytes from the socket (``raw read``);
- penguin's ASGI app is entered (``asgi``), the decision is handed to the session
  (``decide``), and the call's first output is published on the session's channel
  (``start pub``); the SSE writer's ``send`` of that frame returns (``sent``, which
  includes hypercorn's write; the client often has the bytes before it returns);
- the client receives the frame.

and, for the server's Trio loop during the loaded part, the share of time it waited in
``epoll`` (idle) and the mean length of one scheduling round ("tick": every task that
is runnable at its start runs once). On a saturated loop every schedule point of the
path (an ``await`` that yields: a lock, an event, a channel, a socket) costs about one
tick, so the round trip is about (schedule points on the path) x (tick).

The probes wrap private functions of ``penguin.server`` and ``hypercorn``: this is a
measuring tool, and it fails loudly (``AttributeError``) when one of them moves. Clocks:
``time.monotonic()`` in both processes (system-wide on Linux). Traffic stays on
127.0.0.1; login shells read no profile (``HOME`` is a fresh directory).
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any, Final

import httpx
import trio

from benchmarks import server as bench

PROBE_LOG_VARIABLE: Final = "PENGUIN_BENCH_PROBE_LOG"
SEGMENTS: Final = (
    ("client POST -> raw read", "c_post", "raw"),
    ("raw read -> asgi", "raw", "asgi"),
    ("asgi -> decide", "asgi", "decide"),
    ("decide -> start pub", "decide", "start_pub"),
    ("start pub -> sent", "start_pub", "start_sent"),
    ("sent -> client has it", "start_sent", "c_start"),
    ("(client POST answered)", "decide", "c_posted"),
    ("round trip", "c_ask", "c_start"),
)


# --------------------------------------------------------------------------- the server


def serve_probed(argv: list[str]) -> int:
    """``penguin server`` with the probes installed; they write to $PENGUIN_BENCH_PROBE_LOG."""
    from hypercorn.events import RawData
    from hypercorn.protocol import ProtocolWrapper

    from penguin.cli import main
    from penguin.server import _asgi, _channel, _live, _sessions

    log_file = open(os.environ[PROBE_LOG_VARIABLE], "a", buffering=1)  # noqa: SIM115

    def log(*fields: object) -> None:
        log_file.write(" ".join(map(str, (time.monotonic(), *fields))) + "\n")

    session_of: dict[int, str] = {}  # id(channel) -> session id
    for_session = _live.LiveSessions.for_session

    def for_session_probed(self: _live.LiveSessions, session_id: str) -> _live.Live:
        live = for_session(self, session_id)
        session_of[id(live.channel)] = session_id
        return live

    publish = _channel.EventChannel._publish

    def publish_probed(self: _channel.EventChannel, data: str, name: str | None) -> str:
        event_id = publish(self, data, name)
        log("pub", session_of.get(id(self), "-"), event_id)
        return event_id

    send_event_stream = _asgi.send_event_stream

    async def send_event_stream_probed(
        subscriber: _channel.Subscriber,
        receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
        send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ) -> None:
        sid = session_of.get(id(subscriber._channel), "-")

        async def send_probed(message: MutableMapping[str, Any]) -> None:
            await send(message)
            body = message.get("body") or b""
            ids = [line[4:].decode() for line in body.split(b"\n") if line.startswith(b"id: ")]
            if ids:
                log("sent", sid, *ids)

        await send_event_stream(subscriber, receive, send_probed)

    guard_call = _asgi.Guard.__call__

    async def guard_call_probed(
        self: _asgi.Guard,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
        send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ) -> None:
        path = str(scope.get("path", ""))
        if "/approvals/" in path:
            parts = path.split("/")
            log("asgi", parts[3], parts[5])
        await guard_call(self, scope, receive, send)

    decide = _sessions.ServerSessions.decide

    async def decide_probed(
        self: _sessions.ServerSessions, session_id: str, call_id: str, decision: Any
    ) -> None:
        log("decide", session_id, call_id)
        await decide(self, session_id, call_id, decision)

    handle = ProtocolWrapper.handle

    async def handle_probed(self: ProtocolWrapper, event: Any) -> None:
        if isinstance(event, RawData) and b"/approvals/" in event.data[:300]:
            parts = event.data.split(b" ", 2)[1].decode().split("/")
            log("raw", parts[3], parts[5])
        await handle(self, event)

    class Ticks(trio.abc.Instrument):
        """Time in ``epoll`` and rounds of the scheduler, logged every 50 ms."""

        def __init__(self) -> None:
            self.idle = 0.0
            self.ticks = 0
            self.began = 0.0
            self.logged = 0.0

        def before_io_wait(self, timeout: float) -> None:
            self.ticks += 1
            self.began = time.monotonic()

        def after_io_wait(self, timeout: float) -> None:
            now = time.monotonic()
            self.idle += now - self.began
            if now - self.logged > 0.05:
                self.logged = now
                log("loop", f"{self.idle:.6f}", self.ticks)

    lifespan = _asgi._lifespan

    async def lifespan_probed(
        receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
        send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ) -> None:
        trio.lowlevel.add_instrument(Ticks())
        await lifespan(receive, send)

    setattr(_live.LiveSessions, "for_session", for_session_probed)  # noqa: B010
    setattr(_channel.EventChannel, "_publish", publish_probed)  # noqa: B010
    setattr(_asgi, "send_event_stream", send_event_stream_probed)  # noqa: B010
    setattr(_asgi.Guard, "__call__", guard_call_probed)  # noqa: B010
    setattr(_sessions.ServerSessions, "decide", decide_probed)  # noqa: B010
    setattr(ProtocolWrapper, "handle", handle_probed)  # noqa: B010
    setattr(_asgi, "_lifespan", lifespan_probed)  # noqa: B010
    return main(argv)


# --------------------------------------------------------------------------- the client


class ClientLog:
    """What the client saw, per (session, call): ``{what: (time, event id)}``."""

    def __init__(self) -> None:
        self.calls: dict[tuple[str, str], dict[str, tuple[float, str]]] = collections.defaultdict(
            dict
        )

    def note(self, sid: str, call_id: str, what: str, event_id: str = "") -> None:
        self.calls[(sid, call_id)][what] = (time.monotonic(), event_id)


def _event_id(frame: bytes) -> str:
    for line in frame.split(b"\n"):
        if line.startswith(b"id: "):
            return line[4:].decode()
    return ""


async def drive(shared: httpx.AsyncClient, seen: ClientLog) -> None:
    """One session: create it, run the task, approve every call read from the stream.

    With connections of its own, as in ``benchmarks.server`` (see its ``drive_session``).
    """
    async with httpx.AsyncClient(
        base_url=shared.base_url, headers=shared.headers, timeout=shared.timeout
    ) as client:
        await _drive(client, seen)


async def _drive(client: httpx.AsyncClient, seen: ClientLog) -> None:
    created = await client.post(
        "/api/projects/default_project/agents/default_agent/sessions",
        json={"approvalMode": "always-ask", "sandboxMode": "off"},
    )
    sid = created.json()["session"]["sessionId"]
    running = False
    async with bench.frames_of(client, sid) as frames:
        started = await client.post(
            f"/api/sessions/{sid}/tasks",
            json={"input": [{"type": "text", "text": bench.CALLS_TASK}]},
        )
        assert started.status_code == 202, started.text
        while (frame := await frames.next()) is not None:
            if b"approval_request" in frame:
                call_id = bench._data(frame)["toolCall"]["payload"]["tool_call_id"]
                seen.note(sid, call_id, "c_ask", _event_id(frame))
                seen.note(sid, call_id, "c_post")
                answer = await client.post(
                    f"/api/sessions/{sid}/approvals/{call_id}", json={"decision": "allow"}
                )
                assert answer.status_code == 204, answer.text
                seen.note(sid, call_id, "c_posted")
            elif b'"partial_tool_call_output"' in frame and b'"start"' in frame:
                call_id = bench._data(frame)["payload"]["tool_call_id"]
                seen.note(sid, call_id, "c_start", _event_id(frame))
            elif b'"task_state"' in frame:
                state = bench._data(frame)["state"]
                if state == "running":
                    running = True
                elif running:
                    break


async def run(root: Path, sessions: int, probe_log: Path) -> tuple[ClientLog, float, float]:
    """Drive ``sessions`` at once against a probed server; the log and the loaded window."""
    env = {**os.environ, "PENGUIN_SERVER_TOKEN": bench.TOKEN, PROBE_LOG_VARIABLE: str(probe_log)}
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "benchmarks.server_path", "--serve", "server", "--port", "0",
         "--root", str(root)],
        stdout=subprocess.PIPE,
        env=env,
    )  # fmt: skip
    base = await bench.read_base_url(process)
    limits = httpx.Limits(max_connections=4 * sessions + 32, max_keepalive_connections=None)
    seen = ClientLog()
    try:
        async with httpx.AsyncClient(
            base_url=base,
            headers={"Authorization": f"Bearer {bench.TOKEN}"},
            timeout=120,
            limits=limits,
        ) as client:
            await drive(client, ClientLog())  # warms the server up
            start = time.monotonic()
            with trio.fail_after(600):
                async with trio.open_nursery() as nursery:
                    for _ in range(sessions):
                        nursery.start_soon(drive, client, seen)
            end = time.monotonic()
    finally:
        process.send_signal(signal.SIGINT)
        with trio.fail_after(30):
            await process.wait()
    return seen, start, end


# --------------------------------------------------------------------------- report


def _server_times(
    probe_log: Path,
) -> tuple[dict[tuple[str, str, str], float], list[tuple[float, float, int]]]:
    """``{(what, session, call or event id): first time}`` and the loop's samples."""
    times: dict[tuple[str, str, str], float] = {}
    loop: list[tuple[float, float, int]] = []
    for line in probe_log.read_text().splitlines():
        fields = line.split()
        at, what = float(fields[0]), fields[1]
        if what == "loop":
            loop.append((at, float(fields[2]), int(fields[3])))
        elif what == "sent":
            for event_id in fields[3:]:
                times.setdefault(("sent", fields[2], event_id), at)
        else:
            times.setdefault((what, fields[2], fields[3]), at)
    return times, loop


def report(seen: ClientLog, probe_log: Path, window: tuple[float, float]) -> None:
    times, loop = _server_times(probe_log)
    segments: dict[str, list[float]] = collections.defaultdict(list)
    for (sid, call_id), client in seen.calls.items():
        if not {"c_ask", "c_post", "c_posted", "c_start"} <= client.keys():
            continue
        start_id = client["c_start"][1]
        points = {what: at for what, (at, _) in client.items()}
        for what, key in (
            ("raw", ("raw", sid, call_id)),
            ("asgi", ("asgi", sid, call_id)),
            ("decide", ("decide", sid, call_id)),
            ("start_pub", ("pub", sid, start_id)),
            ("start_sent", ("sent", sid, start_id)),
        ):
            if key in times:
                points[what] = times[key]
        for label, first, last in SEGMENTS:
            if first in points and last in points:
                segments[label].append(1000 * (points[last] - points[first]))
    print(f"{'segment':28s}      p50        p90   (ms, {len(seen.calls)} approved calls)")
    for label, _, _ in SEGMENTS:
        values = sorted(segments.get(label, []))
        if values:
            p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
            print(f"    {label:24s} {statistics.median(values):8.2f}   {p90:8.2f}")
    inside = [sample for sample in loop if window[0] <= sample[0] <= window[1]]
    if len(inside) >= 2:
        (t0, idle0, ticks0), (t1, idle1, ticks1) = inside[0], inside[-1]
        rounds = max(1, ticks1 - ticks0)
        idle = 100 * (idle1 - idle0) / (t1 - t0)
        print(
            f"    server loop while loaded: idle (in epoll) {idle:.0f}% of {t1 - t0:.2f} s;"
            f" {rounds} scheduling rounds, {1000 * (t1 - t0) / rounds:.2f} ms each"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--serve", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.serve is not None:
        raise SystemExit(serve_probed(arguments.serve))
    with tempfile.TemporaryDirectory(prefix="penguin-bench-") as scratch:
        root = Path(scratch) / "root"
        home = Path(scratch) / "home"
        home.mkdir()
        os.environ["HOME"] = str(home)
        probe_log = Path(scratch) / "probes.log"
        model = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.server", "--model", "10", "100"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert model.stdout is not None
            bench.configure(root, model.stdout.readline().strip())
            with open("/proc/loadavg") as file:
                load = " ".join(file.read().split()[:3])
            print(
                f"approval round trip through penguin server, {arguments.sessions} sessions x 10"
                f" approved exec_command calls (load {load})"
            )
            seen, start, end = trio.run(run, root, arguments.sessions, probe_log)
            report(seen, probe_log, (start, end))
        finally:
            if model.stdin is not None:
                model.stdin.close()
            model.wait(timeout=30)


if __name__ == "__main__":
    main()
