"""A host program for the watchdog tests: it holds an Environment until it is killed.

``python watchdog_host.py MODE CMD`` opens an Environment in the current directory,
runs ``CMD`` (a command that prints ``ready <pid>...`` once its stubborn processes
exist) and prints one JSON line per event on stdout, then waits to be killed:

- ``foreground``: CMD through exec_command with a long window; the call is still
  running when the ``ready`` record is printed.
- ``background``: CMD launched with ``run_in_background`` and polled with
  input_command until its ready line.
- ``fork``: as ``background``, then the host forks twice: one child reports its
  host tag and exits (and is reaped), the other sleeps until killed; a ``forked``
  record names both and the tag.
- ``mid_kill``: as ``background``, then kill_command is called on it; ``killing`` is
  printed once the call is under way (a TERM-ignoring CMD keeps it in its grace period).
- ``spawn_loop``: background launches of CMD one after another, a ``spawned`` record
  each, for ever (a kill lands at any point of a spawn).

Records carry the pid and tag of the process that printed them (``host``,
``host_tag``) and its watchdog's pid (``watchdog``, 0 for none).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import trio

import penguin
from penguin import protocol as om
from penguin.environment.supervisor._watchdog import host_watchdog

READY = re.compile(r"^ready((?: \d+)+)$", re.MULTILINE)
PROCESS_ID = re.compile(r"process_id (proc-[0-9a-f]{8})")


def record(event: str, **fields: Any) -> None:
    watchdog = host_watchdog()
    line = {
        "event": event,
        "host": os.getpid(),
        "host_tag": watchdog.tag(),
        "watchdog": watchdog.pid,
        **fields,
    }
    print(json.dumps(line), flush=True)


def call(name: str, **args: Any) -> om.OmniMessage[om.ToolCallPayload]:
    return om.tool_call(name, {"description": "watchdog host", **args}, f"call-{name}")


def ready_pids(text: str) -> list[int] | None:
    match = READY.search(text)
    return None if match is None else [int(p) for p in match.group(1).split()]


async def foreground(env: penguin.Environment, cmd: str) -> None:
    text = ""
    announced = False
    message = call("exec_command", cmd=cmd, yield_time_ms=600_000)
    async with env.execute_tool(message) as stream:
        async for msg in stream:
            payload = msg.payload
            if isinstance(payload, om.PartialToolCallOutputPayload) and not announced:
                text += payload.output
                pids = ready_pids(text)
                if pids is not None:
                    announced = True
                    record("ready", pids=pids)
    raise AssertionError(f"the command ended: {text!r}")


async def launch(env: penguin.Environment, cmd: str) -> tuple[str, list[int]]:
    out = await env.call_tool(call("exec_command", cmd=cmd, run_in_background=True))
    match = PROCESS_ID.search(out.payload.output)
    assert match, out.payload.output
    process_id = match.group(1)
    text = ""
    while (pids := ready_pids(text)) is None:
        poll = await env.call_tool(call("input_command", process_id=process_id, yield_time_ms=1000))
        text += poll.payload.output
    return process_id, pids


def fork_children() -> None:
    # The child that stays touches nothing of penguin's: only the fork hook can have
    # closed its copy of the link. The one that exits at once reports its tag first.
    read_end, write_end = os.pipe()
    quick = os.fork()
    if quick == 0:
        os.write(write_end, host_watchdog().tag().encode())
        os._exit(0)
    os.close(write_end)
    child_tag = os.read(read_end, 64).decode()
    os.close(read_end)
    os.waitpid(quick, 0)
    read_end, write_end = os.pipe()
    stays = os.fork()
    if stays == 0:
        os.write(write_end, b"x")  # os.fork has returned: its hooks have run
        while True:
            signal.pause()
    os.close(write_end)
    os.read(read_end, 1)
    os.close(read_end)
    record("forked", quick=quick, child=stays, child_tag=child_tag)


async def main(mode: str, cmd: str) -> None:
    config = penguin.EnvironmentConfig(workspace_dir=Path.cwd())
    async with penguin.Environment.open(config) as env:
        if mode == "foreground":
            await foreground(env, cmd)
        elif mode == "spawn_loop":
            for n in range(10_000):
                out = await env.call_tool(call("exec_command", cmd=cmd, run_in_background=True))
                record("spawned", n=n, output=out.payload.output)
        else:
            process_id, pids = await launch(env, cmd)
            if mode == "fork":
                fork_children()
            record("ready", pids=pids)
            if mode == "mid_kill":
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(env.call_tool, call("kill_command", process_id=process_id))
                    # Any instant must do; this one is inside the grace period, after
                    # kill_command's SIGTERMs, before its SIGKILLs.
                    await trio.sleep(0.1)
                    record("killing")
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2])
