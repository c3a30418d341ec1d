r"""Batches of sessions: the local backend's throughput, and Ray against it.

Run it with ``python -m benchmarks.batch`` (``--quick`` for a smaller run). The model
is scripted and served by a separate process (its CPU is not the engine's); every
task makes the same tool calls — write_file, read_file, exec_command, read_file,
exec_command, in that order by default — and then answers. Every figure is
printed beside a baseline measured in the same run:

a. ``--tasks`` tasks (1,000) at ``--concurrency`` 64 on the local backend, against
   the same tasks one after another through ``Session.run`` (``--sequential`` of
   them, 200 by default, from the same agent): tasks per second, the gain, peak
   RSS, and the engine's CPU — this process's own CPU time (the tools' processes
   are counted apart) as a share of wall time and per task;
b. ``--ray-tasks`` tasks (200) on the Ray backend with 2 local workers against the
   same tasks on the local backend (target: within 1.5x of local wall time). Ray's
   share is reported apart: its start-up (the local cluster and the workers, up to
   the first task starting) and the rest, which is transport and the two loops.

Each part runs in a fresh interpreter (so peak RSS is that part's own), with ``HOME``
set to an empty directory: every session starts one login shell (``bash -l``) to read
the environment, and a user's profile (pyenv's rehash, say) can make that cost more
than everything else a task does, and contend for locks between sessions. Its cost
with the real ``HOME`` and with the empty one is printed first; ``--real-home`` runs
the parts with the real one. The machine is shared with other work: the figures vary
from run to run by tens of percent.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Final

import trio

from penguin import batch
from penguin import config as cfg
from penguin import protocol as om
from penguin.agent import Agent
from penguin.approval import approver_for_mode
from penguin.llm import testing as t

CALLS: Final = ("write_file", "read_file", "exec_command", "read_file", "exec_command")


# --------------------------------------------------------------------------- the model


def _reply(step: int, calls: int) -> t.Reply:
    if step >= calls:
        return t.sse_reply(
            [
                t.content_chunk("done"),
                t.finish_chunk(),
                t.usage_chunk(prompt_tokens=400, completion_tokens=5),
            ]
        )
    name = CALLS[step % len(CALLS)]
    arguments: dict[str, Any]
    if name == "write_file":
        arguments = {"description": "note", "file_path": "note.txt", "content": "x\n" * 20}
    elif name == "read_file":
        arguments = {"file_path": "note.txt"}
    else:
        arguments = {"description": "count", "cmd": "wc -l note.txt"}
    return t.sse_reply(
        [
            t.tool_call_chunk(0, id=f"call_{step}", name=name, arguments=json.dumps(arguments)),
            t.finish_chunk("tool_calls"),
            t.usage_chunk(prompt_tokens=300 + 50 * step, completion_tokens=20),
        ]
    )


async def _serve(calls: int) -> None:
    def handler(request: t.ReceivedRequest) -> t.Reply:
        messages = request.json()["messages"]
        return _reply(sum(1 for m in messages if m["role"] == "assistant"), calls)

    async with t.serve_openai_compatible(handler) as server:
        print(server.base_url, flush=True)
        await trio.to_thread.run_sync(sys.stdin.read)  # until the parent closes stdin


# --------------------------------------------------------------------------- the parts


def _tasks(count: int, prefix: str) -> list[batch.BatchTask]:
    return [batch.BatchTask(id=f"{prefix}{n}", prompt=f"task {n}") for n in range(count)]


def _usage() -> dict[str, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "cpu": own.ru_utime + own.ru_stime,
        "tools_cpu": children.ru_utime + children.ru_stime,
        "peak_rss_mib": own.ru_maxrss / 1024,
    }


async def _run_batch(root: Path, count: int, **options: Any) -> dict[str, Any]:
    progress = batch.BatchProgress(total=count)
    first_start: list[float] = []
    statuses: dict[str, int] = {}
    before = _usage()
    start = trio.current_time()
    async with trio.open_nursery() as nursery:

        async def watch_first_start() -> None:
            # BatchProgress has no event to wait on; a 5 ms poll is precise enough here.
            while progress.running == 0 and progress.done == 0:  # noqa: ASYNC110
                await trio.sleep(0.005)
            first_start.append(trio.current_time() - start)

        nursery.start_soon(watch_first_start)
        async with batch.run_batch(
            _tasks(count, "t"), root=root, progress=progress, **options
        ) as stream:
            async for result in stream:
                statuses[result.status] = statuses.get(result.status, 0) + 1
    wall = trio.current_time() - start
    after = _usage()
    return {
        "wall": wall,
        "first_start": first_start[0] if first_start else wall,
        "cpu": after["cpu"] - before["cpu"],
        "tools_cpu": after["tools_cpu"] - before["tools_cpu"],
        "peak_rss_mib": after["peak_rss_mib"],
        "statuses": statuses,
    }


async def _run_sequential(root: Path, count: int) -> dict[str, Any]:
    agent = Agent.open(root)
    statuses: dict[str, int] = {}
    before = _usage()
    start = trio.current_time()
    client = agent.model_client()
    async with client:
        for task in _tasks(count, "s"):
            workspace = cfg.new_temp_workspace(agent.paths)
            async with agent.session(workspace, client) as session:
                approve = approver_for_mode(
                    "allow-all", ask=_deny, permission=session.environment.tool_permission
                )
                async with session.run([om.user_text(task.prompt)], approve=approve) as stream:
                    async for _ in stream:
                        pass
                status = stream.result.status
                statuses[status] = statuses.get(status, 0) + 1
    wall = trio.current_time() - start
    after = _usage()
    return {
        "wall": wall,
        "first_start": 0.0,
        "cpu": after["cpu"] - before["cpu"],
        "tools_cpu": after["tools_cpu"] - before["tools_cpu"],
        "peak_rss_mib": after["peak_rss_mib"],
        "statuses": statuses,
    }


async def _deny(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
    return "deny"


def _part(args: argparse.Namespace) -> None:
    root = Path(args.root)
    if args.part == "sequential":
        figures = trio.run(_run_sequential, root, args.count)
    elif args.part == "local":
        figures = trio.run(lambda: _run_batch(root, args.count, concurrency=args.concurrency))
    else:
        figures = trio.run(
            lambda: _run_batch(
                root, args.count, concurrency=args.concurrency, backend="ray", workers=2
            )
        )
    print(json.dumps(figures))


def _spawn_part(
    part: str, root: Path, count: int, concurrency: int, env: dict[str, str] | None
) -> dict[str, Any]:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "benchmarks.batch", "--part", part, "--root", str(root)),
            *("--count", str(count), "--concurrency", str(concurrency)),
        ],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if done.returncode != 0:
        raise SystemExit(f"the {part} part failed:\n{done.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


# --------------------------------------------------------------------------- report


def _row(name: str, count: int, f: dict[str, Any]) -> str:
    return (
        f"    {name:<22} {count:>5} tasks {f['wall']:7.1f} s {count / f['wall']:7.1f} tasks/s"
        f"   CPU {100 * f['cpu'] / f['wall']:5.1f} % of wall, {1000 * f['cpu'] / count:6.1f} ms"
        f"/task   tools {1000 * f['tools_cpu'] / count:5.1f} ms/task"
        f"   peak RSS {f['peak_rss_mib']:6.0f} MiB   {f['statuses']}"
    )


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--sequential", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--ray-tasks", type=int, default=200)
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--real-home", action="store_true", help="keep HOME for the parts")
    parser.add_argument("--quick", action="store_true", help="100 tasks, 30 sequential, 40 on Ray")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--part", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--root", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        trio.run(_serve, args.calls)
        return
    if args.part is not None:
        _part(args)
        return
    if args.quick:
        args.tasks, args.sequential, args.ray_tasks = 100, 30, 40

    with tempfile.TemporaryDirectory(prefix="penguin-bench-") as scratch:
        root = Path(scratch) / "root"
        server = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.batch", "--serve", "--calls", str(args.calls)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            base_url = server.stdout.readline().strip()
            paths = cfg.AgentPaths(root)
            entry = cfg.ModelEntry(provider="local", model_id="scripted", base_url=base_url)
            project = cfg.add_model(
                cfg.load_project_config(paths.project_config), entry, set_default=True
            )
            cfg.save_project_config(paths.project_config, project)
            home = Path(scratch) / "home"
            home.mkdir()
            env = None if args.real_home else {**os.environ, "HOME": str(home)}
            _login_probe(home)
            _report(args, root, env)
        finally:
            if server.stdin is not None:
                server.stdin.close()
            server.wait(timeout=30)


def _login_probe(home: Path) -> None:
    def cost(env: dict[str, str] | None) -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        for _ in range(5):
            subprocess.run(
                ["bash", "-lc", "env -0"], stdout=subprocess.DEVNULL, env=env, check=False
            )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        used = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        return 1000 * used / 5

    empty = {**os.environ, "HOME": str(home)}
    print(
        f"(one session's login shell, `bash -l`: {cost(None):.0f} ms CPU with this HOME, "
        f"{cost(empty):.0f} ms with an empty one)"
    )


def _report(args: argparse.Namespace, root: Path, env: dict[str, str] | None) -> None:
    print(
        f"(a) {args.tasks:,} scripted tasks of {args.calls} tool calls each, local backend at "
        f"concurrency {args.concurrency}, against tasks one after another through Session.run"
    )
    local = _spawn_part("local", root, args.tasks, args.concurrency, env)
    sequential = _spawn_part("sequential", root, args.sequential, 1, env)
    print(_row(f"batch, concurrency {args.concurrency}", args.tasks, local))
    print(_row("one after another", args.sequential, sequential))
    gain = (args.tasks / local["wall"]) / (args.sequential / sequential["wall"])
    print(f"    concurrency gain       {gain:5.1f} x tasks per second")
    print(
        "    (CPU is the penguin process's own; 'tools' is that of the processes it ran: each\n"
        "     session's login shell and its commands; RSS is each part's own interpreter)"
    )
    if args.no_ray:
        return
    print()
    print(f"(b) {args.ray_tasks} tasks on the Ray backend (2 local workers) against local")
    if importlib.util.find_spec("ray") is None:
        print("    skipped: ray is not installed (pip install 'penguin[ray]')")
        return
    local_small = _spawn_part("local", root, args.ray_tasks, args.concurrency, env)
    on_ray = _spawn_part("ray", root, args.ray_tasks, args.concurrency, env)
    print(_row("local", args.ray_tasks, local_small))
    print(_row("ray, 2 workers", args.ray_tasks, on_ray))
    ratio = on_ray["wall"] / local_small["wall"]
    startup = on_ray["first_start"] - local_small["first_start"]
    rest = (on_ray["wall"] - on_ray["first_start"]) - (
        local_small["wall"] - local_small["first_start"]
    )
    print(f"    wall time ratio        {ratio:5.2f} x   {_verdict(ratio <= 1.5)} target: <= 1.5 x")
    print(f"    Ray start-up           {startup:5.1f} s (cluster and workers, to the first task)")
    print(
        f"    the rest               {rest:+5.1f} s (transport, two loops, shares finishing apart)"
    )
    print("    (the Ray row's CPU and RSS are the driver's only; the workers are other processes)")


if __name__ == "__main__":
    main()
