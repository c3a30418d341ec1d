r"""Batches of sessions: penguin's own CPU per task, the local backend, and Ray beside it.

Run it with ``python -m benchmarks.batch`` (``--quick`` for a smaller run). The model
is scripted and served by a separate process (its CPU is not penguin's); every task
makes the same tool calls — write_file, read_file, exec_command, read_file,
exec_command, in that order by default — and then answers. One run prints, each with
the load average beside it (the machine may be shared: CPU time per task is the robust
figure, wall-clock figures move with the load):

a. ``--sequential`` tasks (200) one after another through ``Session.run``, from one agent
   and one model client: tasks per second;
b. ``--tasks`` tasks (1,000) at ``--concurrency`` 64 on the local backend, every result
   appended to a results file: tasks per second, the gain over (a), penguin's CPU per
   task — this process's own CPU time (the tools' processes are counted apart) —, peak
   RSS, the most file descriptors open at once, and how many results the file holds.
   The batch is run ``--repeat`` times (3), each in a fresh interpreter, and the median
   CPU per task is judged: from one process to the next on this machine the same code
   moves by up to an eighth. Targets (issue 20): CPU per task <= 12 ms; with
   ``--tasks 10000 --concurrency 256`` every result written, peak RSS < 1 GiB, fds
   bounded by the concurrency. Then, from a second batch of 100 tasks under a Trio
   instrument, the tasks started and the task steps run per task: exact counts, which
   do not move with the machine. With them, the context switches of penguin's process
   per task (every thread; waited: a thread blocked on a lock, the GIL or a system
   call; forced: its time slice ended), steadier than CPU time and a sign of thread
   hops and of the GIL handed back and forth between a worker and the loop. Beside it,
   the model process's CPU per task, and what that and the tools' CPU leave as the most
   any number of processes could run on this machine's cores (the ceiling of (c), (d));
c. the same tasks with ``--workers 2`` on the local backend (two worker processes):
   start-up and shut-down apart, throughput between them against the median of (b)'s
   runs (target: >= 1.7 x on 2 cores);
d. ``--ray-tasks`` tasks (1,000) on the Ray backend with 2 local workers: its start-up
   (the local cluster and the workers, up to the first task starting) and its shut-down
   (after the last result: the workers and the local cluster stopping) reported apart,
   and its throughput between them against (b)'s (target: >= 1.7 x on 2 cores).

"After start-up" is always from the first task's start to the last result, for (b)
too: the fixed costs at either end are printed, not spread over the tasks.

The model answers at once, which keeps penguin's loop busy. ``--think MS`` has it take
about ``MS`` a turn (0.5-1.5 x, drawn at random) and runs (b) alone (``--repeat``
times): penguin's CPU per task at a model's pace. Beside it, the same unit of plain
Python work (below), done in 100 pieces 10 ms apart, as a process whose sessions wait
on a model does its work: short bursts cost a virtual machine more than steady work.

Machines here differ in Python speed by up to 3x from one session to the next (the same
code measured 11 ms of CPU per task on one and 39 ms on another), so the run first times
a fixed piece of pure-Python work of a task's kind, and prints penguin's CPU per task in
those units too: that figure compares across machines, the milliseconds do not.

Each part runs in a fresh interpreter (so peak RSS is that part's own), with ``HOME``
set to an empty directory: every session starts one login shell (``bash -l``) to read
the environment, and a user's profile (pyenv's rehash, say) can make that cost more
than everything else a task does, and contend for locks between sessions. Its cost
with the real ``HOME`` and with the empty one is printed first; ``--real-home`` runs
the parts with the real one.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import psutil
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


async def _serve(calls: int, think: float) -> None:
    """The model's process: answer each turn after ``think`` seconds or so (0: at once).

    Each wait is drawn evenly from half to one and a half times ``think`` (seeded), so
    that the sessions' turns spread out as real ones do.
    """
    draw = random.Random(20)

    async def handler(request: t.ReceivedRequest) -> t.Reply:
        messages = request.json()["messages"]
        if think > 0:
            await trio.sleep(think * draw.uniform(0.5, 1.5))
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
        "voluntary_switches": own.ru_nvcsw,
        "forced_switches": own.ru_nivcsw,
    }


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0


async def _run_batch(root: Path, count: int, **options: Any) -> dict[str, Any]:
    progress = batch.BatchProgress(total=count)
    first_start: list[float] = []
    last_result = [0.0]
    statuses: dict[str, int] = {}
    peak_fds = [_open_fds()]
    results_path = root / f"bench-results-{os.getpid()}.jsonl"
    results_path.unlink(missing_ok=True)
    before = _usage()
    start = trio.current_time()
    with batch.ResultsFile.open(results_path) as results:
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                # BatchProgress has no event to wait on; a 5 ms poll is precise enough here.
                while progress.running == 0 and progress.done == 0:  # noqa: ASYNC110
                    await trio.sleep(0.005)
                first_start.append(trio.current_time() - start)
                while True:  # the most descriptors open at once, sampled
                    peak_fds[0] = max(peak_fds[0], _open_fds())
                    await trio.sleep(0.05)

            nursery.start_soon(watch)
            async with batch.run_batch(
                _tasks(count, "t"), root=root, progress=progress, **options
            ) as stream:
                async for result in stream:
                    statuses[result.status] = statuses.get(result.status, 0) + 1
                    await results.append(result)
                    last_result[0] = trio.current_time() - start
            nursery.cancel_scope.cancel()
    wall = trio.current_time() - start
    after = _usage()
    with results_path.open("rb") as file:
        written = sum(1 for line in file if line.strip())
    results_path.unlink()
    return {
        "wall": wall,
        "first_start": first_start[0] if first_start else wall,
        "last_result": last_result[0],
        "cpu": after["cpu"] - before["cpu"],
        "tools_cpu": after["tools_cpu"] - before["tools_cpu"],
        "peak_rss_mib": after["peak_rss_mib"],
        "voluntary_switches": after["voluntary_switches"] - before["voluntary_switches"],
        "forced_switches": after["forced_switches"] - before["forced_switches"],
        "peak_fds": peak_fds[0],
        "written": written,
        "statuses": statuses,
        "load": _load(),
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
        "load": _load(),
    }


def _load() -> str:
    with open("/proc/loadavg") as file:
        return " ".join(file.read().split()[:3])


async def _deny(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
    return "deny"


def _running(part: dict[str, Any]) -> float:
    """Seconds from the first task's start to the last result (start-up, shut-down apart)."""
    return max(float(part["last_result"] - part["first_start"]), 1e-9)


def _shutdown(part: dict[str, Any]) -> float:
    """Seconds from the last result to the backend being closed."""
    return float(part["wall"] - part["last_result"])


def _part(args: argparse.Namespace) -> None:
    root = Path(args.root)
    if args.part == "sequential":
        figures = trio.run(_run_sequential, root, args.count)
    elif args.part == "local":
        figures = trio.run(lambda: _run_batch(root, args.count, concurrency=args.concurrency))
        figures.update(_scheduling_work(root, min(args.count, 100), args.concurrency))
    elif args.part == "local-again":
        figures = trio.run(lambda: _run_batch(root, args.count, concurrency=args.concurrency))
    elif args.part == "processes":
        figures = trio.run(
            lambda: _run_batch(root, args.count, concurrency=args.concurrency, workers=2)
        )
    else:
        figures = trio.run(
            lambda: _run_batch(
                root, args.count, concurrency=args.concurrency, backend="ray", workers=2
            )
        )
    print(json.dumps(figures))


class _Counter(trio.abc.Instrument):
    """Tasks started and task steps run: the loop's work, counted exactly."""

    def __init__(self) -> None:
        self.spawned = 0
        self.steps = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.spawned += 1

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += 1


def _scheduling_work(root: Path, count: int, concurrency: int) -> dict[str, float]:
    """Tasks started and scheduling steps per task, from a second, counted batch.

    Counts do not move with the machine's speed or load, which CPU time here does by up
    to a third from one process to the next: they show a change in the loop's work that
    the CPU figures cannot resolve. (The instrument's own cost stays out of the CPU
    figures: this batch runs after them.)
    """
    counter = _Counter()
    trio.run(lambda: _run_batch(root, count, concurrency=concurrency), instruments=[counter])
    return {"spawned_per_task": counter.spawned / count, "steps_per_task": counter.steps / count}


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
    extra = ""
    if "peak_fds" in f:
        extra = f"   fds {f['peak_fds']:>4}   written {f['written']:>5}"
    return (
        f"    {name:<22} {count:>5} tasks {f['wall']:7.1f} s {count / f['wall']:7.1f} tasks/s"
        f"   CPU {1000 * f['cpu'] / count:6.1f} ms/task"
        f"   tools {1000 * f['tools_cpu'] / count:5.1f} ms/task"
        f"   peak RSS {f['peak_rss_mib']:6.0f} MiB{extra}   {f['statuses']}"
        f"   (load {f['load']})"
    )


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--sequential", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--ray-tasks", type=int, default=1000)
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of (b) whose median CPU per task is judged"
    )
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--real-home", action="store_true", help="keep HOME for the parts")
    parser.add_argument("--quick", action="store_true", help="200 tasks, 30 sequential, 200 on Ray")
    parser.add_argument(
        "--think",
        type=float,
        default=0.0,
        metavar="MS",
        help="the model's time per turn, on average (each takes 0.5-1.5 times it); with it,"
        " only (b) runs: penguin's CPU per task at a model's pace (default 0: at once)",
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--part", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--root", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        trio.run(_serve, args.calls, args.think / 1000)
        return
    if args.part is not None:
        _part(args)
        return
    if args.quick:
        args.tasks, args.sequential, args.ray_tasks, args.repeat = 200, 30, 200, 1

    with tempfile.TemporaryDirectory(prefix="penguin-bench-") as scratch:
        root = Path(scratch) / "root"
        with serve_model(args.calls, args.think / 1000) as (base_url, server):
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
            unit = _machine_unit()
            print(
                f"(this machine's unit of Python work: {unit:.1f} ms of CPU; penguin's CPU per"
                " task is given in units too, which compare across machines)"
            )
            if args.think > 0:
                _report_paced(args, root, env, unit)
            else:
                _report(args, root, env, server, unit)


@contextmanager
def serve_model(calls: int, think: float = 0.0) -> Iterator[tuple[str, psutil.Process]]:
    """The scripted model in a process of its own: its base URL and its process.

    It takes ``think`` seconds a turn, on average (0: it answers at once). The process
    serves until its stdin is closed, which leaving the block does.
    """
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "benchmarks.batch", "--serve"),
            *("--calls", str(calls), "--think", str(think * 1000)),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        yield server.stdout.readline().strip(), psutil.Process(server.pid)
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=30)


def _machine_unit(pause: float = 0.0, rounds: int = 8) -> float:
    """CPU ms of a fixed piece of pure-Python work of the kind a task does (best of rounds).

    JSON of a chat request's shape, both ways, and small objects: what penguin's own
    per-task CPU is made of. Machines here differ by up to 3x in Python speed from one
    session to the next; CPU per task divided by this unit can be compared across them.

    With ``pause``, the work is done in 100 pieces with ``pause`` seconds of sleep
    between them, as a process whose sessions wait on a model does its work: on a
    virtual machine each piece can start with cold caches, and cost more.
    """
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "x" * 200, "n": n} for n in range(8)],
        "stream": True,
    }
    best = float("inf")
    for _ in range(rounds):  # the first rounds warm the machine up
        start = time.process_time()
        for n in range(2000):
            text = json.dumps(body, separators=(",", ":"))
            parsed = json.loads(text)
            parsed["messages"].append({"role": "assistant", "content": str(n)})
            _ = [dict(m, seen=True) for m in parsed["messages"]]
            if pause > 0 and n % 20 == 19:
                time.sleep(pause)
        best = min(best, time.process_time() - start)
    return 1000 * best


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


def _cpu_of(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def _report_paced(
    args: argparse.Namespace, root: Path, env: dict[str, str] | None, unit: float
) -> None:
    """(b) only, with a model that takes ``--think`` a turn: penguin's CPU per task then.

    The other parts measure throughput, which the model's pace sets here.
    """
    print(
        f"{args.tasks:,} scripted tasks of {args.calls} tool calls each, the model taking"
        f" {args.think:g} ms a turn on average (0.5-1.5 x) (load before: {_load()})"
    )
    cpus = []
    for run in range(1, args.repeat + 1):
        figures = _spawn_part("local-again", root, args.tasks, args.concurrency, env)
        cpus.append(1000 * figures["cpu"] / args.tasks)
        print(_row(f"(b) concurrency {args.concurrency}, run {run}", args.tasks, figures))
    cpu = statistics.median(cpus)
    runs = f"median of {len(cpus)} runs: {', '.join(f'{c:.1f}' for c in cpus)}"
    print(f"    penguin's CPU per task {cpu:5.1f} ms   ({runs})")
    print(f"                           {cpu / unit:5.2f} units of this machine's Python work")
    pieces = _machine_unit(pause=0.01, rounds=3)
    print(
        f"    the unit done in 100 pieces 10 ms apart: {pieces:.1f} ms of CPU ="
        f" {pieces / unit:.2f} x the unit (work done in bursts costs this machine more)"
    )
    print(
        "    ((a), (c) and (d) measure throughput, which the model's pace sets: they run"
        " without --think)"
    )


def _report(
    args: argparse.Namespace,
    root: Path,
    env: dict[str, str] | None,
    model: psutil.Process,
    unit: float,
) -> None:
    print(f"{args.tasks:,} scripted tasks of {args.calls} tool calls each (load before: {_load()})")
    sequential = _spawn_part("sequential", root, args.sequential, 1, env)
    print(_row("(a) one after another", args.sequential, sequential))
    model_cpu = _cpu_of(model)
    local = _spawn_part("local", root, args.tasks, args.concurrency, env)
    model_ms = 1000 * (_cpu_of(model) - model_cpu) / args.tasks
    print(_row(f"(b) concurrency {args.concurrency}", args.tasks, local))
    local_rate = args.tasks / local["wall"]
    gain = local_rate / (args.sequential / sequential["wall"])
    print(f"    concurrency gain       {gain:5.1f} x tasks per second")
    cpus = [1000 * local["cpu"] / args.tasks]
    rates = [args.tasks / _running(local)]
    for run in range(2, args.repeat + 1):
        again = _spawn_part("local-again", root, args.tasks, args.concurrency, env)
        cpus.append(1000 * again["cpu"] / args.tasks)
        rates.append(args.tasks / _running(again))
        print(
            f"    (b) again, run {run}       CPU {cpus[-1]:6.1f} ms/task"
            f"   {args.tasks / again['wall']:5.1f} tasks/s   (load {again['load']})"
        )
    cpu = statistics.median(cpus)
    runs = f"median of {len(cpus)} runs: {', '.join(f'{c:.1f}' for c in cpus)}"
    print(
        f"    penguin's CPU per task {cpu:5.1f} ms   ({runs})   {_verdict(cpu <= 12)}"
        " target: <= 12 ms"
    )
    print(f"                           {cpu / unit:5.2f} units of this machine's Python work")
    print(
        f"    scheduling work        {local['spawned_per_task']:5.1f} tasks started and"
        f" {local['steps_per_task']:.0f} task steps per task (counted, exact)"
    )
    print(
        f"    context switches       {local['voluntary_switches'] / args.tasks:5.0f} waited and"
        f" {local['forced_switches'] / args.tasks:.0f} forced per task, every thread of"
        " penguin's process (a hop to a worker thread and back is at least two; each system"
        " call a worker makes while the loop holds the GIL can add two more)"
    )
    every = local["written"] == args.tasks
    print(f"    results written        {local['written']:>5}    {_verdict(every)} target: all")
    if args.tasks >= 10000:
        rss = local["peak_rss_mib"]
        print(f"    peak RSS               {rss:5.0f} MiB {_verdict(rss < 1024)} target: < 1 GiB")
    fds = local["peak_fds"]
    bound = 8 * args.concurrency + 64
    print(
        f"    peak open fds          {fds:5d}    {_verdict(fds <= bound)} target: bounded by"
        f" the concurrency (<= 8 x {args.concurrency} + 64 = {bound})"
    )
    print(
        "    (CPU is the penguin process's own; 'tools' is that of the processes it ran: each\n"
        "     session's login shell and its commands; RSS is each part's own interpreter)"
    )
    tools_ms = 1000 * local["tools_cpu"] / args.tasks
    whole = cpu + tools_ms + model_ms
    cores = os.cpu_count() or 1
    # (c) and (d) are judged against the median of (b)'s runs, as the CPU is: one run
    # alone can be an eighth off the others, in either direction.
    local_after = statistics.median(rates)
    most = 1000 * cores / whole
    print(
        f"    (b) after start-up     {local_after:5.1f} tasks/s   (median of {len(rates)} runs:"
        f" {', '.join(f'{r:.1f}' for r in rates)})"
    )
    print(
        f"    the model's process    {model_ms:5.1f} ms CPU per task, so a task costs the machine"
        f" {whole:.1f} ms of CPU in all:\n"
        f"    {cores} cores run at most {most:.1f} tasks/s = {most / local_after:4.2f} x (b)'s"
        f" {local_after:.1f}, however many processes share the work"
    )
    print()
    print(f"(c) {args.tasks:,} tasks on the local backend with --workers 2 (worker processes)")
    procs = _spawn_part("processes", root, args.tasks, args.concurrency, env)
    print(_row("local, 2 processes", args.tasks, procs))
    startup = procs["first_start"]
    procs_rate = args.tasks / _running(procs)
    ratio = procs_rate / local_after
    print(f"    start-up               {startup:5.1f} s (the worker processes, to the first task)")
    print(f"    shut-down              {_shutdown(procs):5.1f} s (after the last result)")
    print(
        f"    after start-up         {procs_rate:5.1f} tasks/s = {ratio:4.2f} x local's"
        f" {local_after:.1f}   {_verdict(ratio >= 1.7)} target: >= 1.7 x"
    )
    print("    (CPU and RSS of this row are the driver's; its 'tools' hold the workers' CPU)")
    if args.no_ray:
        return
    print()
    print(f"(d) {args.ray_tasks} tasks on the Ray backend (2 local workers)")
    if importlib.util.find_spec("ray") is None:
        print("    skipped: ray is not installed (pip install 'penguin[ray]')")
        return
    on_ray = _spawn_part("ray", root, args.ray_tasks, args.concurrency, env)
    print(_row("ray, 2 workers", args.ray_tasks, on_ray))
    startup = on_ray["first_start"]
    ray_rate = args.ray_tasks / _running(on_ray)
    ratio = ray_rate / local_after
    print(f"    Ray start-up           {startup:5.1f} s (cluster and workers, to the first task)")
    print(f"    Ray shut-down          {_shutdown(on_ray):5.1f} s (after the last result)")
    print(
        f"    after start-up         {ray_rate:5.1f} tasks/s = {ratio:4.2f} x local's"
        f" {local_after:.1f}   {_verdict(ratio >= 1.7)} target: >= 1.7 x"
    )
    print("    (the Ray row's CPU and RSS are the driver's only; the workers are other processes)")


if __name__ == "__main__":
    main()
