"""DESIGN §2: the event loop never blocks on a file, from a session's open to its end.

A workspace, a ``PATH`` directory, a ``HOME`` or the agent's data root on a network file
system can hang a ``stat`` for minutes; on the loop's thread that stalls every session
of the process, not only the one that asked. These tests watch the loop's own thread
with ``sys.setprofile`` (it sees every call of a builtin, made by whatever code) while
real sessions open, run a command and a file tool, resume and close (and a subagent, a
batch, every built-in tool and a stdio MCP server, with the kernel sandbox and without,
remote MCP servers, and a model client's first request over TLS), and name every
file-system call that penguin's code made there, a TLS context's loading of
certificates included. Reads of ``/proc`` are the kernel's own tables, never a disk's,
and are left out (``_proctable``). So are the few system calls of penguin's own
bookkeeping that ``_mounts.run_on_disk`` makes on the loop's thread because their
folder is on a local disk (a trace's records, a lock's release, a results line), and
the file tools' small calls and an Environment's first look around, which
``_mounts.run_file_work`` makes there when every mount of the machine is a local disk
or the kernel's: ``tests/test_on_disk.py`` shows they go to a worker anywhere else.
"""

from __future__ import annotations

import io
import os
import socket
import stat
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any, Literal

import pytest
import trio

import penguin
from penguin import _mounts, _tls
from penguin import protocol as om
from penguin.batch import BatchTask, run_batch
from penguin.config import McpServerConfig, McpStdioTransport
from penguin.llm import LLMRequest, OpenAIChatLLM, ScriptedLLM, text, tool_call, turn
from penguin.llm import testing as t

from .batch.scripted import TaskScripts, configure_model, exec_reply, prompt
from .environment.mcp import support as mcp_support
from .environment.processes import (
    call,
    exec_command,
    input_command,
    kill_command,
    start_in_background,
    wait_until,
)
from .environment.tools.test_read_image import PNG, Route, serve_images
from .stopped_server import stopped_server
from .test_subagents_e2e import Routed, child_prompt

_FILE_SYSTEM_CALLS = {
    os.stat,
    os.lstat,
    os.access,
    os.open,
    os.mkdir,
    os.makedirs,
    os.readlink,
    os.scandir,
    os.listdir,
    os.rename,
    os.replace,
    os.unlink,
    os.rmdir,
    os.chmod,
    io.open,
}
_FILE_SYSTEM_METHODS = {  # methods of C types, told apart by name (each call is a new object)
    "SSLContext.load_verify_locations",  # a CA bundle: a file, or a folder of them
    "SSLContext.load_cert_chain",
    "SSLContext.load_dh_params",
    "SSLContext.set_default_verify_paths",
}
_PACKAGE = os.path.dirname(penguin.__file__) + os.sep
_PROCFS_READER = "environment/supervisor/_proctable.py:"


_ON_DISK = (_mounts.run_on_disk.__code__, _mounts.run_file_work.__code__)


def _on_a_local_disk(frame: FrameType | None) -> bool:
    """Whether the call is one ``run_on_disk`` or ``run_file_work`` makes on this thread."""
    while frame is not None:
        if frame.f_code in _ON_DISK:
            return True
        frame = frame.f_back
    return False


def _penguin_site(frame: FrameType | None) -> str | None:
    """The innermost frame of penguin's own code on the stack, as ``file:line:function``.

    None when penguin's code is not on the stack, or when the call is an import's (a
    module is loaded once per process, by whichever thread first needs it).
    """
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith("<frozen importlib"):
            return None
        if filename.startswith(_PACKAGE):
            where = filename[len(_PACKAGE) :]
            return f"{where}:{frame.f_lineno}:{frame.f_code.co_name}"
        frame = frame.f_back
    return None


_FILE_OBJECT_METHODS = {"read", "read1", "readinto", "readline", "readlines", "write", "flush"}


def _on_a_file(method: Any) -> bool:
    """Whether ``method`` is a read or write of an open file object on a regular file.

    A file opened in a worker thread but read or written on the loop's is the same
    block (pipes, sockets and terminals are not files: they are left out).
    """
    owner = getattr(method, "__self__", None)
    if not isinstance(owner, io.IOBase) or method.__name__ not in _FILE_OBJECT_METHODS:
        return False
    try:
        return stat.S_ISREG(os.fstat(owner.fileno()).st_mode)
    except (OSError, ValueError):  # closed, or no descriptor (an in-memory buffer)
        return False


@contextmanager
def loop_file_calls() -> Iterator[list[str]]:
    """Every file-system call penguin's code makes on this thread while the block runs."""
    seen: list[str] = []
    me = threading.get_ident()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "c_call":
            return
        if arg not in _FILE_SYSTEM_CALLS:
            name: str = getattr(arg, "__qualname__", "")
            if name not in _FILE_SYSTEM_METHODS and not _on_a_file(arg):
                return
            arg = getattr(type(arg.__self__), name.rpartition(".")[2])  # named by its method
        assert threading.get_ident() == me  # sys.setprofile is this thread's alone
        site = _penguin_site(frame)
        if site is None or _on_a_local_disk(frame):
            return
        if not site.startswith(_PROCFS_READER):
            seen.append(f"{arg.__name__} from {site}")

    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(None)


def allow(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
    return "allow"


async def _one_round(session: penguin.Session, prompt: str) -> str:
    async with session.run([om.user_text(prompt)], approve=allow) as stream:
        async for _ in stream:
            pass
    assert stream.result.status == "completed", stream.result
    return stream.result.status


def _script() -> ScriptedLLM:
    return ScriptedLLM(
        [
            turn(tool_call("exec_command", {"cmd": "echo hi > out.txt"})),
            turn(tool_call("write_file", {"file_path": "a.txt", "content": "x\n"})),
            turn(text("Done.")),
        ]
    )


async def test_design_2_sessions_make_no_file_system_call_on_the_loop_thread(
    tmp_path: Path, workspace: Path
) -> None:
    agent = penguin.Agent.open(tmp_path / "root")
    with loop_file_calls() as seen:
        # The first session resolves the shared login environment, the second finds it
        # kept and fresh (the start-up files looked at with the workspace, in a worker).
        for _ in range(2):
            async with agent.session(workspace, llm=_script()) as session:
                await _one_round(session, "go")
                await session.flush_trace()
                session_id = session.session_id
        async with agent.resume_session(session_id, llm=ScriptedLLM([turn(text("Ok."))])) as again:
            await _one_round(again, "again")
        async with agent.session(llm=ScriptedLLM([turn(text("Hi."))])) as temporary:
            await _one_round(temporary, "hello")  # a temporary workspace is made for it
    assert (workspace / "out.txt").read_text() == "hi\n"
    assert (workspace / "a.txt").read_text() == "x\n"
    assert agent._login.probes == 1
    assert seen == [], "\n".join(seen)


async def test_design_2_a_session_whose_workspace_stopped_answering_holds_up_only_itself(
    tmp_path: Path, workspace: Path
) -> None:
    # Not a watch: a real file server that does not answer (a FUSE mount), and a real
    # session on another workspace that runs a round while one opens there.
    agent = penguin.Agent.open(tmp_path / "root")
    remote = tmp_path / "remote"
    remote.mkdir()
    failures: list[Exception] = []

    async def open_there() -> None:
        with pytest.raises(penguin.WorkspaceError) as raised:
            async with agent.session(remote, llm=ScriptedLLM([turn(text("Unseen."))])):
                pass  # pragma: no cover
        failures.append(raised.value)

    with stopped_server(remote) as server:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(open_there)
            await wait_until(server.waiting)  # its opening waits on the server
            async with agent.session(workspace, llm=_script()) as session:
                assert await _one_round(session, "go") == "completed"
            assert not failures
            server.answer()  # from the loop, which went on: the server refuses at last
    assert not server.given_up
    assert (workspace / "out.txt").read_text() == "hi\n"
    assert str(failures[0]) == f"workspace {str(remote)!r} cannot be read: Connection refused"


async def test_design_2_a_session_opening_where_the_server_stopped_answering_can_be_cancelled(
    tmp_path: Path,
) -> None:
    # Its opening trip (its files, its lock, AGENTS.md) waits on the mount; a cancel
    # leaves it, and the lock it took is let go once the server answers at last.
    agent = penguin.Agent.open(tmp_path / "root")
    remote = tmp_path / "remote"
    remote.mkdir()
    with stopped_server(remote) as server:
        with trio.move_on_after(0.2) as scope:
            async with agent.session(remote, llm=ScriptedLLM([turn(text("Unseen."))])):
                pass  # pragma: no cover
        given_up = server.given_up  # before the block's end answers it
    assert scope.cancelled_caught
    assert not given_up  # the opening was left while the server still did not answer
    traces = agent.paths.traces_dir
    await wait_until(lambda: traces.is_dir() and not list(traces.rglob("*.lock")))


async def test_design_2_a_subagent_makes_no_file_system_call_on_the_loop_thread(
    tmp_path: Path, workspace: Path
) -> None:
    # A child session opens (its agent's files, its Environment), runs a command and a
    # file tool, and closes, all inside the parent's run.
    task, child = "Delegate it.", child_prompt("Write c.")
    llm = Routed(
        {
            task: ScriptedLLM(
                [
                    turn(tool_call("run_subagent", {"description": "c", "prompt": child})),
                    turn(text("Delegated.")),
                ]
            ),
            child: ScriptedLLM(
                [
                    turn(tool_call("exec_command", {"cmd": "echo c > c.txt"})),
                    turn(tool_call("write_file", {"file_path": "d.txt", "content": "d\n"})),
                    "Wrote c and d.",
                ]
            ),
        }
    )
    agent = penguin.Agent.open(tmp_path / "root")
    with loop_file_calls() as seen:
        async with agent.session(workspace, llm=llm) as session:
            await _one_round(session, task)
    assert (workspace / "c.txt").read_text() == "c\n"
    assert (workspace / "d.txt").read_text() == "d\n"
    assert seen == [], "\n".join(seen)


async def test_design_2_a_subagent_of_another_agent_makes_no_file_system_call_on_the_loop_thread(
    tmp_path: Path, workspace: Path
) -> None:
    # The other agent is looked for and opened (its folder, its system config) in a
    # worker; one that does not exist is refused from there too.
    penguin.Agent.open(tmp_path / "root", agent_id="helper")
    task, child = "Ask the helper.", child_prompt("Help.")
    calls = [
        tool_call("run_subagent", {"description": "h", "prompt": child, "agent_id": name})
        for name in ("helper", "nobody")
    ]
    llm = Routed(
        {
            task: ScriptedLLM([turn(calls[0]), turn(calls[1]), turn(text("Asked."))]),
            child: ScriptedLLM(["helped"]),
        }
    )
    agent = penguin.Agent.open(tmp_path / "root")
    with loop_file_calls() as seen:
        async with (
            agent.session(workspace, llm=llm) as session,
            session.run([om.user_text(task)], approve=lambda _: "allow") as stream,
        ):
            outputs = [m.payload.output async for m in stream if om.is_tool_call_output(m)]
    assert outputs[0] == "helped"
    assert 'agent "nobody" does not exist' in outputs[1]
    assert seen == [], "\n".join(seen)


async def test_design_2_a_batch_makes_no_file_system_call_on_the_loop_thread(
    tmp_path: Path,
) -> None:
    # The batch's own steps too: the project file's [sandbox] for each task, its
    # temporary workspace, and the sessions' model clients (one per model).
    scripts = TaskScripts({f"t{n}": [exec_reply(f"echo {n} > n.txt")] for n in range(4)})
    async with t.serve_openai_compatible(scripts) as server:
        root = tmp_path / "root"
        configure_model(root, server.base_url)
        tasks = [BatchTask(id=f"t{n}", prompt=prompt(f"t{n}")) for n in range(4)]
        with loop_file_calls() as seen:
            async with run_batch(tasks, root=root, concurrency=2) as stream:
                results = [result async for result in stream]
    assert sorted(result.status for result in results) == ["completed"] * 4
    for result in results:
        assert result.workspace is not None
        assert (Path(result.workspace) / "n.txt").read_text() == f"{result.id[1:]}\n"
    assert seen == [], "\n".join(seen)


@pytest.mark.parametrize("cgroups", ["0", "1"], ids=["no-cgroup", "cgroup"])
async def test_design_2_every_builtin_tool_makes_no_file_system_call_on_the_loop_thread(
    sandbox: penguin.SandboxPolicy | None,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    cgroups: str,
) -> None:
    # Each built-in tool of an Environment, and the command tools' whole life: a command
    # in a terminal, one kept in the background, written to, polled and killed. An
    # image by URL too: its download's TLS context is the process's (made afresh here).
    # With PENGUIN_CGROUPS=1 also the cgroup's making, placings and removal (where
    # this machine lets a cgroup be made; elsewhere the two cases are the same).
    monkeypatch.setenv("PENGUIN_CGROUPS", cgroups)
    monkeypatch.setattr(_tls, "_CONTEXTS", {})
    (workspace / "a.png").write_bytes(PNG)
    config = penguin.EnvironmentConfig(workspace_dir=workspace, sandbox=sandbox)
    with loop_file_calls() as seen:
        async with (
            serve_images({"/b.png": Route(body=PNG)}) as images,
            penguin.Environment.open(config) as env,
        ):
            downloaded = await call(env, "read_image", {"source": images.url("/b.png")})
            written = await call(env, "write_file", {"file_path": "f.txt", "content": "one\n"})
            edited = await call(
                env, "edit_file", {"file_path": "f.txt", "old_string": "one", "new_string": "two"}
            )
            read = await call(env, "read_file", {"file_path": "f.txt"})
            image = await call(env, "read_image", {"source": "a.png"})
            in_terminal = await exec_command(env, "tty && echo t", tty=True)
            process_id = await start_in_background(env, 'read a; echo "got $a"; sleep 60')
            answered = await input_command(env, process_id, "x\n", yield_time_ms=2000)
            killed = await kill_command(env, process_id)
    outputs = (written, edited, read, image, downloaded, in_terminal)
    assert [o.stop_reason for o in outputs] == ["completed"] * 6
    assert (workspace / "f.txt").read_text() == "two\n"
    assert "two" in read.output
    assert in_terminal.output.rstrip().endswith("t")
    assert "got x" in answered.output
    assert f"[process {process_id} killed" in killed.output
    assert seen == [], "\n".join(seen)


async def test_design_2_an_mcp_server_makes_no_file_system_call_on_the_loop_thread(
    sandbox: penguin.SandboxPolicy | None, workspace: Path
) -> None:
    # A stdio MCP server's life: started (in the sandbox when there is one: its entry
    # opts in), listed, called, and stopped with the Environment.
    transport = McpStdioTransport(
        command=sys.executable,
        args=("-m", mcp_support.SERVER_MODULE),
        env={"PYTHONPATH": str(mcp_support.REPO)},
        sandbox=sandbox is not None,
    )
    servers = [McpServerConfig(name="s", transport=transport)]
    config = mcp_support.environment_config(workspace, *servers, sandbox=sandbox)
    with loop_file_calls() as seen:
        async with penguin.Environment.open(config) as env:
            names = [tool.name for tool in await env.list_tools()]
            echoed = await mcp_support.call(env, "echo", '{"text": "hello"}')
    assert "mcp__s__echo" in names
    assert echoed.output == "hello"
    assert seen == [], "\n".join(seen)


@pytest.mark.parametrize("kind", ["http", "sse"])
async def test_design_2_a_remote_mcp_server_makes_no_file_system_call_on_the_loop_thread(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: Literal["http", "sse"]
) -> None:
    # A remote MCP server (Streamable HTTP or SSE): its HTTP client takes the process's
    # TLS context (made afresh here), whatever the URL's scheme, as httpx would make one.
    monkeypatch.setattr(_tls, "_CONTEXTS", {})
    with mcp_support.http_server(tmp_path, kind) as server:
        entry = mcp_support.remote_server("r", server.url, kind)
        with loop_file_calls() as seen:
            async with penguin.Environment.open(
                mcp_support.environment_config(workspace, entry)
            ) as env:
                echoed = await mcp_support.call(env, "echo", '{"text": "hi"}', server="r")
    assert echoed.output == "hi"
    assert seen == [], "\n".join(seen)


@pytest.mark.parametrize("proxied", [False, True], ids=["direct", "through-a-proxy"])
async def test_design_2_a_model_client_over_tls_makes_no_file_system_call_on_the_loop_thread(
    monkeypatch: pytest.MonkeyPatch, proxied: bool
) -> None:
    # An https:// model server: the process's TLS context loads the CA bundle (a file,
    # or a folder of them) when the first such request is made. Nothing listens here,
    # so the request fails after the context is made and before any handshake. The
    # context is made once per process: an earlier test's must not hide this one's.
    # Through a proxy (HTTPS_PROXY, nothing listening there either) the client is
    # httpx's own, which would make a context per proxy if it were not given ours.
    monkeypatch.setattr(_tls, "_CONTEXTS", {})
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    if proxied:
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{port}")
    base_url = f"https://127.0.0.1:{port}/v1"
    request = LLMRequest(system_prompt="Be brief.", messages=(om.user_text("hi"),), tools=())
    with loop_file_calls() as seen:
        async with (
            OpenAIChatLLM(base_url=base_url, model_id="m") as llm,
            llm.stream(request) as response,
        ):
            messages = [message async for message in response]
    assert messages == []
    assert response.outcome.error_message == f"cannot connect to {base_url} (Connection refused)"
    assert _tls._CONTEXTS  # made, and in a worker
    assert seen == [], "\n".join(seen)


async def test_design_2_the_watch_sees_a_file_system_call_on_the_loop_thread(
    tmp_path: Path,
) -> None:
    # The watch itself: a stat made by penguin's code on this thread is named, with
    # where it was made (so the test above cannot pass by seeing nothing).
    from penguin.environment.supervisor._login import _startup_files

    with loop_file_calls() as seen:
        _startup_files(str(tmp_path))
        await trio.lowlevel.checkpoint()
    assert seen
    assert all(call.startswith("stat from environment/supervisor/_login.py:") for call in seen)


async def test_design_2_the_watch_sees_a_file_read_or_written_on_the_loop_thread(
    tmp_path: Path,
) -> None:
    # A file opened elsewhere (a worker thread, say) but written and read on the loop's
    # thread is named too; a pipe is not a file and is not. The code runs as penguin's
    # (its file name is in the package), as a site in penguin would.
    code = compile(
        "data.write(b'x'); data.flush(); data.seek(0); data.read(); piped.write(b'y')",
        _PACKAGE + "somewhere.py",
        "exec",
    )
    read_end, write_end = os.pipe()
    with (
        (tmp_path / "data").open("w+b") as data,
        os.fdopen(write_end, "wb", buffering=0) as piped,
        os.fdopen(read_end, "rb"),
        loop_file_calls() as seen,
    ):
        exec(code, {"data": data, "piped": piped})
        await trio.lowlevel.checkpoint()
    assert seen == [f"{name} from somewhere.py:1:<module>" for name in ("write", "flush", "read")]
