"""S1 end to end: a real ``penguin server`` process — the printed line, the token, SIGINT and
SIGTERM shutdown that denies what is pending and leaves no process; one Trio loop, no asyncio."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import httpx
import pytest
import trio

from penguin import config as cfg
from penguin import protocol as om
from penguin.llm import testing as t
from penguin.trace import read_trace, trace_files
from tests.environment.processes import marked_processes, wait_until

from .support import (
    SESSIONS,
    ScriptedModel,
    calls,
    configure_model,
    create_session,
    exec_command,
    open_stream,
    start_task,
)

REPOSITORY = Path(__file__).resolve().parents[2]
LINE = re.compile(r"penguin server: http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]+)")


@attrs.define
class ServerProcess:
    process: trio.Process
    line: str
    port: int
    token: str
    stdout: bytearray
    stderr: bytearray

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{self.port}",
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=30,
        )

    async def stop(self, *signals: signal.Signals, within: float = 30) -> int:
        for signum in signals:
            self.process.send_signal(signum)
        with trio.fail_after(within):
            return await self.process.wait()


async def _pump(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
    while chunk := await stream.receive_some(65536):
        into.extend(chunk)


@asynccontextmanager
async def penguin_server(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[ServerProcess]:
    command = [sys.executable, "-m", "penguin", "server", "--port", "0", "--root", str(root), *args]
    process = await trio.lowlevel.open_process(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    assert process.stdout is not None
    assert process.stderr is not None
    stdout, stderr = bytearray(), bytearray()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_pump, process.stdout, stdout)
            nursery.start_soon(_pump, process.stderr, stderr)
            with trio.fail_after(60):
                while b"\n" not in stdout:
                    if process.poll() is not None:
                        raise AssertionError(f"the server exited: {stderr.decode()}")
                    await trio.sleep(0.01)
            line = stdout.decode().splitlines()[0]
            match = LINE.fullmatch(line)
            assert match is not None, line
            yield ServerProcess(process, line, int(match[1]), match[2], stdout, stderr)
            with trio.fail_after(30):
                await process.wait()
    finally:
        if process.poll() is None:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()


async def test_s1_1_one_line_and_s1_4_sigint_denies_what_is_pending_and_leaves_no_process(
    root: Path, model: ScriptedModel, workspace: Path, no_stray_processes: str
) -> None:
    task = model.script(
        "background then ask",
        calls(exec_command("sleep 300", yield_time_ms=200)),
        calls(exec_command("touch never")),
    )
    async with penguin_server(root) as server:
        assert len(server.token) == 43  # 32 random bytes, URL-safe base64
        async with server.client() as client:
            assert (await client.get(SESSIONS)).status_code == 200
            sid = (
                await create_session(client, approvalMode="read-only", workspace=str(workspace))
            )["sessionId"]
            async with open_stream(client, sid) as stream:
                await start_task(client, sid, task)
                first = await stream.until_type("approval_request")
                call = first.data["toolCall"]["payload"]["tool_call_id"]
                await client.post(
                    f"/api/sessions/{sid}/approvals/{call}", json={"decision": "allow"}
                )
                pending = await stream.until(
                    lambda e: e.type == "approval_request" and "touch" in str(e.data)
                )
                assert marked_processes(run=no_stray_processes)  # the sleep runs
                code = await server.stop(signal.SIGINT)
                resolved = await stream.until_type("approval_resolved")
                assert resolved.data["decision"] == "deny"
                assert (
                    resolved.data["toolCallId"]
                    == pending.data["toolCall"]["payload"]["tool_call_id"]
                )
                assert await stream.ended()
    assert code == 0
    assert server.stdout.decode() == server.line + "\n"  # exactly one line on stdout
    assert server.token not in server.stderr.decode()
    await wait_until(lambda: not marked_processes(run=no_stray_processes))
    assert not (workspace / "never").exists()
    (trace,) = trace_files(cfg.AgentPaths(root).traces_dir, sid)
    decided = [
        r.payload.tool_call_id
        for r in read_trace(trace)
        if isinstance(r.payload, om.ApprovalDecisionPayload)
    ]
    assert decided == [call]  # the denied pending call recorded no decision


async def test_s1_4_sigterm_stops_cleanly_and_a_second_sigint_stops_at_once(
    root: Path, model: ScriptedModel, no_stray_processes: str
) -> None:
    task = model.script("background", calls(exec_command("sleep 300", yield_time_ms=200)))
    async with penguin_server(root) as server:
        assert await server.stop(signal.SIGTERM) == 0
    async with penguin_server(root) as server:
        async with server.client() as client:
            sid = (await create_session(client))["sessionId"]
            async with open_stream(client, sid) as stream:
                await start_task(client, sid, task)
                await stream.until_idle()
            assert (await client.get(f"/api/sessions/{sid}/processes")).json()["processes"]
        assert await server.stop(signal.SIGINT, signal.SIGINT) == 0
    await wait_until(lambda: not marked_processes(run=no_stray_processes))


async def test_s1_2_the_token_comes_from_the_environment_or_is_new_each_start(root: Path) -> None:
    async with penguin_server(root) as first:
        await first.stop(signal.SIGINT)
    async with penguin_server(root) as second:
        await second.stop(signal.SIGINT)
    assert first.token != second.token
    async with penguin_server(root, env={"PENGUIN_SERVER_TOKEN": "my-own-token"}) as third:
        assert third.token == "my-own-token"
        async with third.client() as client:
            assert (await client.get(SESSIONS)).status_code == 200
        await third.stop(signal.SIGINT)
    async with penguin_server(root, env={"PENGUIN_SERVER_TOKEN": ""}) as fourth:
        assert len(fourth.token) == 43
        await fourth.stop(signal.SIGINT)


async def test_s1_3_a_non_loopback_host_gets_the_warning(root: Path) -> None:
    # 192.0.2.1 is a documentation address that no interface here has: the server warns,
    # then cannot bind, and no packet is ever sent anywhere.
    done = await trio.run_process(
        [
            sys.executable,
            "-m",
            "penguin",
            "server",
            "--host",
            "192.0.2.1",
            "--port",
            "0",
            "--root",
            str(root),
        ],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    stderr = done.stderr.decode()
    assert (
        "penguin server: listening on 192.0.2.1: anyone who can reach this address and has the "
        "token can run commands as you"
    ) in stderr
    assert done.returncode == 1
    assert "cannot listen on 192.0.2.1" in stderr
    assert done.stdout == b""


async def test_s1_1_bad_options_exit_1(root: Path) -> None:
    for args in (["--port", "70000"], ["--project-id", "../x"]):
        done = await trio.run_process(
            [sys.executable, "-m", "penguin", "server", "--root", str(root), *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        assert done.returncode == 1, args
    helped = await trio.run_process(
        [sys.executable, "-m", "penguin", "server", "--help"], capture_stdout=True, check=False
    )
    text = helped.stdout.decode()
    for option in ("--host", "--port", "--root", "--project-id", "--allow-host"):
        assert option in text
    assert "PENGUIN_SERVER_TOKEN" in text


NO_ASYNCIO = """
import asyncio, gc, sys
import httpx, trio
from penguin.server import ServerOptions, open_server

async def main():
    async with open_server(ServerOptions(port=0, root=sys.argv[1], token="t")) as server:
        auth = {"Authorization": "Bearer t"}
        async with httpx.AsyncClient(base_url=server.base_url, headers=auth) as c:
            sessions = "/api/projects/default_project/agents/default_agent/sessions"
            created = await c.post(sessions, json={})
            listed = await c.get(sessions)
            print(created.status_code, listed.status_code)

trio.run(main)
loops = [o for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop)]
backend = "anyio._backends._asyncio" in sys.modules
print("asyncio loops:", len(loops), "anyio asyncio backend:", backend)
"""


async def test_s1_5_one_trio_process_and_no_asyncio_loop(root: Path, tmp_path: Path) -> None:
    await trio.Path(tmp_path / "probe.py").write_text(NO_ASYNCIO)
    done = await trio.run_process(
        [sys.executable, str(tmp_path / "probe.py"), str(root)],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        cwd=REPOSITORY,
    )
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.decode().splitlines()
    assert lines[0] == "201 200"
    assert lines[1] == "asyncio loops: 0 anyio asyncio backend: False"


async def _server_exit(root: Path) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(30):
        return await trio.run_process(
            [sys.executable, "-m", "penguin", "server", "--port", "0", "--root", str(root)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


async def test_21_4_an_unwritable_data_root_is_refused_at_start_naming_the_path(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    done = await _server_exit(blocker / "root")
    assert done.returncode == 1
    assert done.stdout == b""
    assert done.stderr.decode() == (
        f"penguin server: the data root {blocker / 'root'} cannot be used: {blocker} is not a "
        "folder\n"
    )


@contextlib.contextmanager
def read_only_mount(path: Path) -> Iterator[bool]:
    """A tmpfs at ``path``, remounted read-only; False where mounting is not permitted."""
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(path)], capture_output=True
    )
    if mounted.returncode != 0:
        yield False
        return
    try:
        yield True
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


async def test_21_4_a_read_only_root_a_server_ran_on_is_refused_in_one_line(
    tmp_path: Path, model_server: t.LocalServer
) -> None:
    with read_only_mount(tmp_path / "ro") as mounted:
        if not mounted:
            pytest.skip("mounting a tmpfs is not permitted here")
        root = tmp_path / "ro" / "data"
        configure_model(root, model_server.base_url)
        async with penguin_server(root) as server, server.client() as client:
            await create_session(client)  # the index and a trace exist
            assert await server.stop(signal.SIGTERM) == 0
        await trio.run_process(["mount", "-o", "remount,ro", str(tmp_path / "ro")])
        done = await _server_exit(root)
    assert done.returncode == 1
    assert done.stderr.decode() == (
        f"penguin server: the data root {root} is not writable ({root}: read-only file system)\n"
    )


async def test_21_3_idle_close_is_an_option_and_a_negative_one_exits_1(root: Path) -> None:
    done = await trio.run_process(
        [sys.executable, "-m", "penguin", "server", "--root", str(root), "--idle-close", "-5"],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.decode() == (
        "penguin server: --idle-close must be 0 or more seconds, not -5.0\n"
    )
    helped = await trio.run_process(
        [sys.executable, "-m", "penguin", "server", "--help"], capture_stdout=True, check=False
    )
    assert "--idle-close SECONDS" in helped.stdout.decode()
