"""A stdio MCP server as a child of its Environment (spec/mcp.md M1.5).

Owns the server's process: it is spawned here (``supervisor.spawn_piped``, not by the
SDK's ``stdio_client``, which neither passes the whole environment nor lets the
Environment mark and supervise the process; nor can its start be left when ``cwd`` is
on a file server that stopped answering), as the leader of a new session and
process group, with the process's environment plus the entry's ``env`` plus the
Environment's owner marker (``PENGUIN_OWNER``), so the host's watchdog and the
Environment's closing sweep find it and everything it started. Its stdout and stdin
are bridged to the anyio memory streams the SDK's session reads and writes (one
JSON-RPC message per line); its stderr is read into a short tail, whose last line
explains a server that exits.

How it ends: leaving :func:`open_stdio_server` closes the server's stdin (the MCP way
to ask a stdio server to exit), gives it :data:`EXIT_WAIT` seconds, then ends the
whole tree the way a command's is ended (SIGTERM to the group, SIGKILL after the
grace, marker sweeps), shielded and bounded. A server that exits on its own takes
its group and marked descendants with it at once, and its streams close, so the
requests in flight fail as "disconnected" instead of hanging.

A line on stdout that is not a JSON-RPC message is dropped and remembered (a server
that answers only garbage times out with that line in the reason); a line longer
than :data:`MAX_LINE` ends the server (a flood cannot exhaust memory).
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final, final

import anyio
import attrs
import mcp_types
import trio
from mcp.shared.message import SessionMessage

from penguin.config import McpStdioTransport

from ..supervisor import (
    OWNER_VARIABLE,
    ServerProcess,
    SpawnedProcess,
    end_process_tree,
    spawn_piped,
    start_host_watchdog,
)

if TYPE_CHECKING:
    from ..sandbox import CommandSandbox

__all__ = ["EXIT_WAIT", "MAX_LINE", "StdioServer", "open_stdio_server"]

EXIT_WAIT: Final = 0.5
"""Seconds a server gets to exit by itself once its stdin is closed."""
MAX_LINE: Final = 64 * 1024 * 1024
"""The longest message line a server may send, in bytes."""
_TAIL: Final = 4096
_CHUNK: Final = 256 * 1024


@final
@attrs.define(eq=False)
class StdioServer:
    """A running stdio server: its process, how it ended, what it last said on stderr."""

    process: ServerProcess
    owner: str
    exited: trio.Event = attrs.field(factory=trio.Event)
    garbage: str | None = None
    """The first stdout line that was not a JSON-RPC message, cut short."""
    overflow: bool = False
    died: bool = False
    """It exited (or closed its stdout) on its own, before the connection ended it."""
    closing: bool = False
    stdout_closed: bool = False
    stderr_tail: collections.deque[bytes] = attrs.field(
        factory=lambda: collections.deque(maxlen=64)
    )

    @property
    def pid(self) -> int:
        """The server's process id (its group's id too)."""
        return self.process.pid

    def last_stderr_line(self) -> str | None:
        """The last non-blank line the server wrote to stderr, if any.

        It is quoted in the reason a server is unavailable, which terminals show: its
        control characters (a colour, a cursor move) are replaced by ``�``.
        """
        text = b"".join(self.stderr_tail)[-_TAIL:].decode("utf-8", "replace")
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if not lines:
            return None
        return "".join(c if c.isprintable() else "\ufffd" for c in lines[-1][:200])

    def exit_reason(self) -> str | None:
        """Why the server is gone on its own (``None`` while it runs, or once closed)."""
        if self.overflow:
            return f"sent a message line over {MAX_LINE // (1024 * 1024)} MiB"
        code = self.process.returncode
        if code is None or not (self.died or self.stdout_closed):
            return None
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            reason = f"was killed by {name}"
        else:
            reason = f"exited with code {code}"
        last = self.last_stderr_line()
        return f"{reason}: {last}" if last else reason


def _environment(config: McpStdioTransport, owner: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(config.env)
    env[OWNER_VARIABLE] = owner
    return env


async def _arm_watchdog() -> None:
    with contextlib.suppress(OSError):  # the commands' own warning covers this host
        await start_host_watchdog()


@asynccontextmanager
async def open_stdio_server(
    config: McpStdioTransport,
    *,
    workspace: Path,
    owner: str,
    sandbox: CommandSandbox | None = None,
) -> AsyncIterator[
    tuple[
        StdioServer,
        anyio.abc.ObjectReceiveStream[SessionMessage | Exception],
        anyio.abc.ObjectSendStream[SessionMessage],
    ]
]:
    """Start the server; yield it with the read and write streams of its session.

    Raises ``OSError`` when the command cannot be started. ``cwd`` resolves against
    the workspace (its default).
    """
    cwd = workspace / config.cwd if config.cwd else workspace
    await _arm_watchdog()
    argv: Sequence[str] = [config.command, *config.args]
    env = _environment(config, owner)
    if sandbox is not None:  # the entry opted in (spec/sandbox.md X2.5)
        env.update(sandbox.environment())
        argv, _ = await sandbox.wrap(argv, None, cwd, env.get("PATH"))
    piped = await spawn_piped(argv, cwd=cwd, env=env)
    process = piped.process
    server = StdioServer(process=process, owner=owner)
    spawned = SpawnedProcess(
        process=process,
        pgid=process.pid,
        output=piped.stdout,
        stdin=piped.stdin,
        tty=False,
        started_at=time.time(),
    )
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    ended = trio.Event()

    async def end_tree() -> None:
        if not ended.is_set():
            ended.set()
            with trio.CancelScope(shield=True):
                await end_process_tree(spawned, owner, server.exited)

    async def wait_exit() -> None:
        with trio.CancelScope(shield=True):
            await process.wait()
        server.died = not server.closing
        server.exited.set()
        read_send.close()  # requests in flight see the connection end
        await end_tree()  # what it started goes with it

    async def read_stdout() -> None:
        stdout = piped.stdout
        buffer = bytearray()
        with read_send:
            while True:
                try:
                    chunk = await stdout.receive_some(_CHUNK)
                except (trio.ClosedResourceError, trio.BrokenResourceError):
                    return
                if not chunk:
                    server.stdout_closed = not server.closing
                    return
                buffer += chunk
                *lines, rest = bytes(buffer).split(b"\n")
                buffer = bytearray(rest)
                for line in lines:
                    if not line.strip():
                        continue
                    try:
                        message = mcp_types.jsonrpc_message_adapter.validate_json(
                            line, by_name=False
                        )
                    except ValueError:
                        if server.garbage is None:
                            server.garbage = line[:80].decode("utf-8", "replace")
                        continue
                    try:
                        await read_send.send(SessionMessage(message))
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return
                if len(buffer) > MAX_LINE:
                    server.overflow = True
                    await end_tree()
                    return

    async def write_stdin() -> None:
        stdin = piped.stdin
        try:
            async with write_receive:
                async for item in write_receive:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send_all(data.encode() + b"\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            read_send.close()

    async def read_stderr() -> None:
        stderr = piped.stderr
        with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
            while chunk := await stderr.receive_some(_CHUNK):
                server.stderr_tail.append(bytes(chunk[-_TAIL:]))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait_exit)
        nursery.start_soon(read_stdout)
        nursery.start_soon(write_stdin)
        nursery.start_soon(read_stderr)
        try:
            yield server, read_receive, write_send
        finally:
            with trio.CancelScope(shield=True):
                server.closing = True
                write_send.close()
                with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
                    await piped.stdin.aclose()
                with trio.move_on_after(EXIT_WAIT):
                    await server.exited.wait()
                await end_tree()
                await server.exited.wait()
            nursery.cancel_scope.cancel()
