"""No process outlives its session: stubborn process trees against every way a session ends.

Each case starts one kind of stubborn process tree through exec_command, waits for the
command's ``ready <pid>...`` line (output, not time), ends the session by one route,
and then scans every process on the machine for the owner marker that penguin puts in
each child's environment (``PENGUIN_OWNER=<env tag>/<process_id>``). A zombie counts as
gone: it is already dead, and PID 1 in some containers never reaps orphans. The pids
from the ready line are checked too (by identity, so a reused pid is not mistaken for
a survivor), in case a process could lose its marker.

Routes that promise "nothing is left when the call returns" (kill_command, leaving the
Environment) are checked at once; routes that end the session in the background
(interrupt, timeout, eviction) are waited on for at most the grace period plus a margin.

The cases are independent — each has its own Environment, workspace and owner tag — so
a module fixture runs the selected ones concurrently in one ``trio.run`` (the 1 s
grace period is real, and ~50 cases one after the other would take a minute) and each
``test_chaos[kind-route]`` reports its own case.

Two private handles, for want of public ones: the eviction route shrinks the command
registry's cap to 1 by replacing the supervisor's registry right after the Environment
opens (filling the real cap of 64 per case would only add load), and the timeout route
resolves the login environment before its first command
(``env._commands._base_environment()``), so the time limit — which must stay under
exec_command's 250 ms minimum window for the Environment's deadline to fire first —
is not spent on ``bash -l``.
"""

from __future__ import annotations

import os
import re
import signal
import traceback
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import attrs
import psutil
import pytest
import trio

import penguin
from penguin import protocol as om
from penguin.environment.supervisor import OWNER_VARIABLE
from penguin.environment.supervisor._registry import SessionRegistry

GRACE: Final = 1.0
CASE_DEADLINE: Final = 30.0
SETTLE_DEADLINE: Final = GRACE + 6.0
"""How long a background kill (interrupt, timeout, eviction) may take to leave nothing."""
TIMEOUT_MS: Final = 240
"""exec_command's time limit on the timeout route: below its 250 ms minimum window, so
the Environment's deadline fires first while the command is still in the foreground."""
TIMEOUT_ATTEMPTS: Final = 3
CONCURRENT_CASES: Final = 12

# Every kind prints ``ready`` followed by the pids of its stubborn processes once they
# all exist. ``trap '' TERM`` makes a shell and everything it starts ignore SIGTERM.


@attrs.frozen
class Kind:
    name: str
    cmd: str
    foreground_exits: bool = False
    """The foreground process ends by itself right after the ready line."""


KINDS: Final = (
    Kind(
        "trap_term",
        "trap '' TERM; bash -c 'sleep 1000 & wait' & c=$!; "
        'sleep 1000 & echo "ready $$ $c $!"; wait',
    ),
    Kind("setsid", "trap '' TERM; setsid sleep 1000 & echo \"ready $!\"; wait"),
    Kind("nohup", "trap '' TERM; nohup sleep 1000 > /dev/null 2>&1 & echo \"ready $!\"; wait"),
    Kind("set_m_job", "set -m; trap '' TERM; sleep 1000 & echo \"ready $!\"; wait"),
    Kind(
        "double_fork",
        "trap '' TERM; ( sleep 1000 & echo \"ready $!\" ); exec sleep 1000",
    ),
    Kind(
        "daemon",  # double fork and a new session: out of the group and out of the tree
        "trap '' TERM; ( setsid sleep 1000 & echo \"ready $!\" ); exec sleep 1000",
    ),
    Kind(
        "pipe_holder",
        "trap '' TERM; exec 3>&1; sleep 1000 >&3 & echo \"ready $!\"",
        foreground_exits=True,
    ),
    Kind(
        "orphaned_job",  # its own group, and its parent gone before the kill
        "set -m; trap '' TERM; sleep 1000 & echo \"ready $!\"",
        foreground_exits=True,
    ),
    Kind(
        "orphan_respawner",  # its parent gone, it forks an escapee when terminated
        "bash -c 'trap \"setsid sleep 1000 &\" TERM; while :; do sleep 0.05; done' & "
        'echo "ready $!"',
        foreground_exits=True,
    ),
    Kind(
        "fork_loop",  # out of the group, ignores SIGTERM, forks escapees all the time
        'setsid bash -c \'trap "" TERM; echo "ready $$"; '
        "while :; do setsid sleep 1000 & sleep 0.02; done' & wait",
    ),
    Kind(
        "respawner",  # forks escaping children while the grace period runs
        "trap 'setsid sleep 1000 & setsid sleep 1000 &' TERM; "
        'echo "ready $$"; while :; do sleep 0.05; done',
    ),
)
ROUTES: Final = ("interrupt", "timeout", "kill_command", "eviction", "environment_exit")


@attrs.define
class CaseResult:
    ready_pids: list[int] = attrs.Factory(list)
    survivors: list[str] = attrs.Factory(list)
    error: str | None = None
    notes: list[str] = attrs.Factory(list)


# ---------------------------------------------------------------------- scanning


def _describe(proc: psutil.Process) -> str:
    try:
        return f"{proc.pid} {proc.name()} {proc.status()} {' '.join(proc.cmdline())!r}"
    except psutil.Error:
        return str(proc.pid)


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def marked_survivors(tag: str) -> list[psutil.Process]:
    """Live processes whose owner marker names this Environment's tag."""
    found = []
    for proc in psutil.process_iter():
        try:
            value = proc.environ().get(OWNER_VARIABLE, "")
        except psutil.Error:
            continue
        if value.startswith(f"{tag}/") and _alive(proc):
            found.append(proc)
    return found


def survivors(tag: str, ready: list[psutil.Process]) -> list[str]:
    found = {p.pid: p for p in marked_survivors(tag)}
    found.update({p.pid: p for p in ready if _alive(p)})
    return [_describe(p) for p in found.values()]


async def check_now(tag: str, ready: list[psutil.Process]) -> list[str]:
    return await trio.to_thread.run_sync(survivors, tag, ready)


async def check_settled(tag: str, ready: list[psutil.Process]) -> list[str]:
    """Survivors once the background kill had its chance (waits on the condition)."""
    left: list[str] = []
    with trio.move_on_after(SETTLE_DEADLINE):
        while True:
            left = await check_now(tag, ready)
            if not left:
                return []
            await trio.sleep(0.05)  # polling the condition, bounded by the deadline
    return left


# ---------------------------------------------------------------------- driving tools


def call(name: str, **args: Any) -> om.OmniMessage[om.ToolCallPayload]:
    return om.tool_call(name, {"description": "chaos", **args}, f"call-{name}")


READY: Final = re.compile(r"^ready((?: \d+)+)$", re.MULTILINE)


def ready_pids(text: str) -> list[int] | None:
    match = READY.search(text)
    return None if match is None else [int(p) for p in match.group(1).split()]


async def stream_until_ready(
    env: penguin.Environment,
    message: om.OmniMessage[om.ToolCallPayload],
    *,
    interrupt_when_ready: bool,
) -> tuple[str, list[int] | None, str]:
    """Run a call to its end, interrupting it at the ready line if asked; return the
    output, the ready pids and the stop reason."""
    interrupt = trio.Event()
    text = ""
    pids = None
    stop = ""
    async with env.execute_tool(message, interrupt=interrupt) as stream:
        async for msg in stream:
            payload = msg.payload
            if isinstance(payload, om.PartialToolCallOutputPayload):
                if payload.event_type == "delta":
                    text += payload.output
                    if pids is None:
                        pids = ready_pids(text)
                        if pids is not None and interrupt_when_ready:
                            interrupt.set()
            elif isinstance(payload, om.ToolCallOutputPayload):
                stop = payload.stop_reason or ""
    return text, pids, stop


def identities(pids: list[int]) -> list[psutil.Process]:
    """The ready processes, pinned by creation time (a reused pid is a different one)."""
    found = []
    for pid in pids:
        try:
            found.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue
    return found


async def launch_in_background(env: penguin.Environment, kind: Kind) -> tuple[str, list[int]]:
    """Start the kind with run_in_background; return its process_id and ready pids."""
    out = await env.call_tool(call("exec_command", cmd=kind.cmd, run_in_background=True))
    match = re.search(r"process_id (proc-[0-9a-f]{8})", out.payload.output)
    assert match, out.payload.output
    process_id = match.group(1)
    if kind.foreground_exits:
        # Polling would see the exit and clear the session; the completion report
        # carries the ready line instead, and the session stays registered.
        report = await env.background_reports.receive()
        assert report.id == process_id, report
        pids = ready_pids(report.output)
    else:
        poll = call("input_command", process_id=process_id, yield_time_ms=CASE_DEADLINE * 1000)
        text, pids, stop = await stream_until_ready(env, poll, interrupt_when_ready=True)
        assert stop == "aborted", f"the poll was to be interrupted at the ready line: {text!r}"
    assert pids is not None, "no ready line"
    return process_id, pids


@asynccontextmanager
async def open_env(workdir: Path, route: str) -> AsyncIterator[penguin.Environment]:
    tools = penguin.config.default_tools()
    if route == "timeout":
        tools = [
            attrs.evolve(t, timeout_ms=TIMEOUT_MS) if t.name == "exec_command" else t for t in tools
        ]
    async with penguin.Environment.open(
        penguin.EnvironmentConfig(workspace_dir=workdir, tools=tools)
    ) as env:
        if route == "eviction":
            env._commands._registry = SessionRegistry(1)
        yield env


# ---------------------------------------------------------------------- one case


async def run_case(kind: Kind, route: str, workdir: Path) -> CaseResult:
    result = CaseResult()
    ready: list[psutil.Process] = []
    tag = ""
    try:
        with trio.fail_after(CASE_DEADLINE):
            async with open_env(workdir, route) as env:
                tag = env._commands.tag
                if route in ("interrupt", "timeout"):
                    message = call("exec_command", cmd=kind.cmd, yield_time_ms=600_000)
                    for _ in range(TIMEOUT_ATTEMPTS):
                        text, pids, stop = await stream_until_ready(
                            env, message, interrupt_when_ready=route == "interrupt"
                        )
                        if pids is not None or route != "timeout":
                            break
                        # A loaded machine took longer than the time limit to print
                        # the ready line: what was started must still all be gone.
                        left = await check_settled(tag, [])
                        assert left == [], f"survived a timeout before ready: {left}"
                        result.notes.append(f"no ready line in {TIMEOUT_MS} ms; again")
                    assert pids is not None, f"no ready line before the {route}: {text!r}"
                    ready = identities(pids)
                    result.ready_pids = pids
                    expected = {"interrupt": "aborted", "timeout": "failed"}[route]
                    allowed = {expected, "completed"} if kind.foreground_exits else {expected}
                    assert stop in allowed, (stop, text)
                    if stop == "failed":
                        assert f"[tool timeout: exceeded {TIMEOUT_MS}ms]" in text, text
                    result.survivors = await check_settled(tag, ready)
                    return result

                process_id, pids = await launch_in_background(env, kind)
                ready = identities(pids)
                result.ready_pids = pids
                if route == "kill_command":
                    out = await env.call_tool(call("kill_command", process_id=process_id))
                    assert out.payload.stop_reason == "completed", out.payload.output
                    assert f"process {process_id}" in out.payload.output, out.payload.output
                    result.survivors = await check_now(tag, ready)
                elif route == "eviction":
                    out = await env.call_tool(
                        call("exec_command", cmd="true", run_in_background=True)
                    )
                    assert out.payload.stop_reason == "completed", out.payload.output
                    listed = [c.process_id for c in env.list_background_commands()]
                    assert process_id not in listed, listed
                    result.survivors = await check_settled(tag, ready)
            if route == "environment_exit":
                result.survivors = await check_now(tag, ready)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        result.error = "".join(traceback.format_exception(exc))
    finally:
        if tag:
            with trio.CancelScope(shield=True):
                left = await check_now(tag, ready)
            if left and not result.survivors and result.error is None:
                result.survivors = [f"after the Environment closed: {p}" for p in left]
            _kill_leftovers(tag, ready)
    return result


def _kill_leftovers(tag: str, ready: list[psutil.Process]) -> None:
    """Leave the machine clean for the rest of the suite even when a case failed."""
    for proc in [*marked_survivors(tag), *ready]:
        try:
            proc.send_signal(signal.SIGKILL)
        except psutil.Error:
            continue


# ---------------------------------------------------------------------- the tests

CASES: Final = [(kind.name, route) for kind in KINDS for route in ROUTES]
_BY_NAME: Final = {kind.name: kind for kind in KINDS}


def _selected(session: pytest.Session) -> list[tuple[str, str]]:
    wanted = []
    for item in session.items:
        if isinstance(item, pytest.Function) and item.originalname == "test_chaos":
            params = item.callspec.params
            wanted.append((str(params["kind"]), str(params["route"])))
    return wanted


@pytest.fixture(scope="module")
def chaos_results(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[str, str], CaseResult]:
    wanted = _selected(request.session)
    root = tmp_path_factory.mktemp("chaos")
    results: dict[tuple[str, str], CaseResult] = {}

    async def run_all() -> None:
        limiter = trio.CapacityLimiter(CONCURRENT_CASES)

        async def one(kind: str, route: str) -> None:
            async with limiter:
                workdir = root / f"{kind}-{route}"
                workdir.mkdir()
                results[kind, route] = await run_case(_BY_NAME[kind], route, workdir)

        async with trio.open_nursery() as nursery:
            for kind, route in wanted:
                nursery.start_soon(one, kind, route)

    # Each Environment resolves its login environment once with ``bash -l``; a slow
    # login profile on the machine (one that waits on a lock, say) would cost every
    # case the probe's timeout. An empty HOME keeps the cases about processes.
    home = root / "home"
    home.mkdir()
    saved = os.environ.get("HOME")
    os.environ["HOME"] = str(home)
    try:
        trio.run(run_all)
    finally:
        if saved is None:
            del os.environ["HOME"]
        else:
            os.environ["HOME"] = saved
    return results


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="POSIX process groups")
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("kind", [kind.name for kind in KINDS])
def test_chaos(kind: str, route: str, chaos_results: dict[tuple[str, str], CaseResult]) -> None:
    result = chaos_results[kind, route]
    assert result.error is None, result.error
    assert result.ready_pids, "the case never saw its ready line"
    assert result.survivors == [], f"survived the {route}: {result.survivors}"


LONG_GRACE = 20.0


async def test_a_dead_orphan_does_not_hold_a_kill_for_the_grace_period(
    tmp_path: Path, hermetic_home: Path
) -> None:
    # The orphan dies on SIGTERM; where PID 1 never reaps orphans it stays a zombie
    # member of the group for ever, and killpg(pgid, 0) keeps succeeding. The kill
    # must see that nothing is alive instead of waiting out the grace period.
    kind = Kind("orphan", 'sleep 1000 & echo "ready $!"', foreground_exits=True)
    with trio.fail_after(CASE_DEADLINE):
        async with penguin.Environment.open(
            penguin.EnvironmentConfig(workspace_dir=tmp_path)
        ) as env:
            env._commands.grace = LONG_GRACE  # waiting it out would be unmistakable
            process_id, pids = await launch_in_background(env, kind)
            ready = identities(pids)
            start = trio.current_time()
            out = await env.call_tool(call("kill_command", process_id=process_id))
            elapsed = trio.current_time() - start
            assert "had already exited (exit code 0)" in out.payload.output
            assert await check_now(env._commands.tag, ready) == []
    assert elapsed < LONG_GRACE / 2, f"kill_command took {elapsed:.2f} s"
