"""What the command tests need to see of real processes and to drive real command tools.

Every command penguin starts carries ``PENGUIN_OWNER=<environment tag>/<process_id>`` in
its environment, so a test can always find what a session left behind, even a daemon
that left both the process group and the process tree. The ``no_stray_processes``
fixture (``conftest.py``) also puts a per-test ``PENGUIN_TEST_RUN`` id in the host
environment, which every child inherits: that is how it tells this test's processes
from those of anything else running on the machine.

Waiting is on conditions, never on the clock: :func:`wait_until` polls a condition
under a deadline.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs
import psutil
import trio

import penguin
from penguin import protocol as om
from penguin.config import default_tools
from penguin.environment.supervisor import BackgroundCommand

OWNER_VARIABLE = "PENGUIN_OWNER"
RUN_VARIABLE = "PENGUIN_TEST_RUN"
PROCESS_ID = re.compile(r"proc-[0-9a-f]{8}")

Message = om.OmniMessage[om.Payload]


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is dead: it only waits to be reaped)."""
    try:
        return _alive(psutil.Process(pid))
    except psutil.Error:
        return False


def marked_processes(owner_prefix: str = "", *, run: str | None = None) -> list[psutil.Process]:
    """Live processes whose owner marker starts with ``owner_prefix``.

    With ``run``, only those whose ``PENGUIN_TEST_RUN`` is ``run`` (started by one test).
    """
    found = []
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        try:
            environ = proc.environ()
        except psutil.Error:
            continue
        owner = environ.get(OWNER_VARIABLE)
        if owner is None or not owner.startswith(owner_prefix):
            continue
        if run is not None and environ.get(RUN_VARIABLE) != run:
            continue
        if _alive(proc):
            found.append(proc)
    return found


def command_lines(processes: Iterable[psutil.Process]) -> dict[int, list[str]]:
    """The command line of each process still there, by pid."""
    found = {}
    for proc in processes:
        try:
            found[proc.pid] = proc.cmdline()
        except psutil.Error:
            continue
    return found


def env_processes(env: penguin.Environment) -> list[psutil.Process]:
    """Live processes started by ``env``'s command sessions."""
    return marked_processes(env._commands.tag + "/")


def session_processes(env: penguin.Environment, process_id: str) -> list[psutil.Process]:
    """Live processes started by one command session of ``env``."""
    return marked_processes(f"{env._commands.tag}/{process_id}")  # ids have a fixed length


class _SpawnedTasks(trio.abc.Instrument):
    def __init__(self) -> None:
        self.names: list[str] = []

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.names.append(task.name)


@contextlib.contextmanager
def spawned_tasks() -> Iterator[list[str]]:
    """The names of the Trio tasks spawned while the block runs, in order.

    A name is the task's function's qualified name, with its module
    (``penguin.environment.supervisor._commands.CommandSession._pump``).
    """
    instrument = _SpawnedTasks()
    trio.lowlevel.add_instrument(instrument)
    try:
        yield instrument.names
    finally:
        trio.lowlevel.remove_instrument(instrument)


async def wait_until(condition: Callable[[], bool], *, within: float = 5.0) -> None:
    """Poll ``condition`` until it holds; fail the test after ``within`` seconds.

    For conditions no event announces: the process table, files a command writes.
    """
    with trio.fail_after(within):
        while not condition():  # noqa: ASYNC110 - the process table has no event to wait on
            await trio.sleep(0.01)


async def wait_gone(pids: Iterable[int], *, within: float = 5.0) -> None:
    """Wait until none of ``pids`` is a live process."""
    pids = list(pids)
    await wait_until(lambda: not any(alive(pid) for pid in pids), within=within)


async def pid_of(env: penguin.Environment, process_id: str, *, within: float = 5.0) -> int:
    """The root pid of a registered command, once its process exists.

    A background launch is listed at once, before its process has started (``pid`` is
    None until then).
    """
    pid: int | None = None

    def started() -> bool:
        nonlocal pid
        command = registered(env).get(process_id)
        pid = None if command is None else command.pid
        return pid is not None

    await wait_until(started, within=within)
    assert pid is not None
    return pid


def tool_definition(name: str, **changes: Any) -> penguin.ToolDefinitionConfig:
    """The default definition of builtin ``name``, with ``changes`` (limits, timeouts)."""
    entry = next(d for d in default_tools() if d.name == name)
    return attrs.evolve(entry, **changes)


def command_tools(**changes: dict[str, Any]) -> list[penguin.ToolDefinitionConfig]:
    """The three command tools, each with the changes given under its name."""
    names = ("exec_command", "input_command", "kill_command")
    return [tool_definition(name, **changes.get(name, {})) for name in names]


def process_id_in(text: str) -> str:
    """The ``proc-…`` id a note names."""
    match = PROCESS_ID.search(text)
    assert match is not None, f"no process_id in {text!r}"
    return match.group()


async def call(
    env: penguin.Environment,
    name: str,
    args: dict[str, Any],
    *,
    interrupt: trio.Event | None = None,
    call_id: str = "call_1",
) -> om.ToolCallOutputPayload:
    """Run one tool call through the Environment; its complete output's payload."""
    out = await env.call_tool(om.tool_call(name, args, call_id), interrupt=interrupt)
    return out.payload


async def exec_command(env: penguin.Environment, cmd: str, **args: Any) -> om.ToolCallOutputPayload:
    """exec_command ``cmd`` with the given extra arguments."""
    return await call(env, "exec_command", {"description": "test", "cmd": cmd, **args})


async def input_command(
    env: penguin.Environment, process_id: str, chars: str | None = None, **args: Any
) -> om.ToolCallOutputPayload:
    """input_command on ``process_id``; ``chars=None`` leaves the argument out (a poll)."""
    payload: dict[str, Any] = {"description": "test", "process_id": process_id, **args}
    if chars is not None:
        payload["chars"] = chars
    return await call(env, "input_command", payload)


async def kill_command(env: penguin.Environment, process_id: str) -> om.ToolCallOutputPayload:
    """kill_command on ``process_id``."""
    return await call(env, "kill_command", {"description": "test", "process_id": process_id})


async def launch(env: penguin.Environment, cmd: str, **args: Any) -> tuple[str, str]:
    """Start ``cmd`` so that it is registered after a 250 ms window.

    Returns its process_id and the output of that first window (without the note).
    The command must still be running when the window ends.
    """
    out = await exec_command(env, cmd, yield_time_ms=250, **args)
    assert out.stop_reason == "completed", out.output
    process_id = process_id_in(out.output.rpartition("\n")[2])
    note = running_note(process_id)
    assert out.output.endswith(note), out.output
    return process_id, out.output.removesuffix(note).removesuffix("\n")


async def first_line(env: penguin.Environment, process_id: str, first: str) -> str:
    """The first line a background command prints, polling past its first window.

    ``first`` is what :func:`launch` returned; on a loaded machine the line may not be
    complete yet (a slow interpreter start, or ``PYTHONUNBUFFERED`` splitting a print).
    """
    text = first
    with trio.fail_after(30):
        while "\n" not in text:
            out = await input_command(env, process_id, yield_time_ms=250)
            assert out.stop_reason == "completed", out.output
            text += out.output.removesuffix(still_running_note(process_id)).removesuffix("\n")
    return text.partition("\n")[0]


async def start_in_background(env: penguin.Environment, cmd: str, **args: Any) -> str:
    """Start ``cmd`` so that it is registered after a 250 ms window; its process_id."""
    process_id, _ = await launch(env, cmd, **args)
    return process_id


def running_note(process_id: str) -> str:
    """exec_command's note for a command still running at the end of its window (3.2.7)."""
    return (
        f"[process running with process_id {process_id}; "
        "use input_command to send input or poll for output]"
    )


def still_running_note(process_id: str) -> str:
    """input_command's note for a command still running (3.3.6)."""
    return f"[process still running with process_id {process_id}]"


def registered(env: penguin.Environment) -> dict[str, BackgroundCommand]:
    """The host's listing by process_id."""
    return {c.process_id: c for c in env.list_background_commands()}


def has_exited(env: penguin.Environment, process_id: str) -> Callable[[], bool]:
    """A condition: the registered command ``process_id`` is listed as no longer running."""

    def check() -> bool:
        command = registered(env).get(process_id)
        return command is not None and not command.running

    return check


async def collect(
    env: penguin.Environment,
    call: om.OmniMessage[om.ToolCallPayload],
    *,
    interrupt: trio.Event | None = None,
) -> list[Message]:
    """Every message of one streamed call."""
    async with env.execute_tool(call, interrupt=interrupt) as stream:
        return [message async for message in stream]
