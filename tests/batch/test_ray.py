"""B2.4 and B2.5: the Ray backend on real local clusters (slow: kept few).

One cluster serves the module: ``ray start --head --block`` on 127.0.0.1 with 2 CPUs,
its files under the module's temporary directory, stopped by SIGTERM at the end
(never ``ray stop``, which would stop every Ray on the machine). Its workers'
data root (``PENGUIN_HOME``) is not the driver's, as on a real cluster, so traces
are only under the driver's agent when ``--gather-traces`` brought them. One more
test lets ``penguin batch`` start (and stop) a local cluster of its own.

Ray runs only in subprocesses here (``penguin batch``, ``ray start`` and a small
killer script), never in the test process.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path

import attrs
import psutil
import pytest
import trio

from penguin.llm import testing as t

from ..faults.disks import fill, tmpfs
from .scripted import (
    TaskScripts,
    configure_model,
    exec_reply,
    logged_exec,
    read_log,
    read_terminal,
    task_line,
    text_reply,
    tool_reply,
    write_tasks,
)
from .test_runner import processes_with, wait_until

if importlib.util.find_spec("ray") is None:
    pytest.skip(
        "the Ray backend's tests need ray: pip install -e '.[ray]'", allow_module_level=True
    )

RAY = Path(sys.executable).with_name("ray")
PENGUIN = (sys.executable, "-m", "penguin")


@attrs.frozen
class Cluster:
    address: str
    env: Mapping[str, str]
    """The environment a driver of this cluster runs with (its token, loopback)."""
    worker_home: Path
    head: subprocess.Popen[bytes]


def short_temp_dir(factory: pytest.TempPathFactory, name: str) -> Path:
    where = factory.mktemp(name)
    assert len(str(where)) < 48, f"{where} is too long for Ray's socket paths"
    return where


def loopback_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {
        **os.environ,
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        **(extra or {}),
    }
    env.pop("RAY_ADDRESS", None)
    return env


def listening(processes: list[psutil.Process]) -> set[str]:
    addresses = set()
    for process in processes:
        try:
            for conn in process.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    addresses.add(conn.laddr.ip)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return addresses


def command_of(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    temp = short_temp_dir(tmp_path_factory, "ray")
    worker_home = tmp_path_factory.mktemp("worker-home")
    token = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    env = loopback_env({**token, "PENGUIN_HOME": str(worker_home)})
    with (temp / "head.log").open("wb") as log:
        head = subprocess.Popen(
            [
                *(str(RAY), "start", "--head", "--block", "--node-ip-address=127.0.0.1"),
                *("--port=0", "--num-cpus=2", "--include-dashboard=false"),
                *("--disable-usage-stats", f"--temp-dir={temp}"),
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        marker = temp / "ray_current_cluster"
        deadline = time.monotonic() + 90
        while not (marker.exists() and marker.read_text().strip()):  # written by ray start
            assert head.poll() is None, (temp / "head.log").read_text()
            assert time.monotonic() < deadline, "the Ray cluster did not start in 90 s"
            time.sleep(0.1)
        address = marker.read_text().strip()
        processes = tree(head.pid)
        assert listening(processes) <= {"127.0.0.1", "::ffff:127.0.0.1"}
        yield Cluster(address, loopback_env(token), worker_home, head)
    finally:
        processes = tree(head.pid)
        head.send_signal(signal.SIGTERM)
        _, alive = psutil.wait_procs(processes, timeout=60)
        for process in alive:
            process.kill()
        head.wait(timeout=10)
        assert alive == [], "the cluster left processes behind"


@pytest.fixture
async def model(tmp_path: Path) -> AsyncIterator[tuple[TaskScripts, Path]]:
    scripts = TaskScripts()
    async with t.serve_openai_compatible(scripts) as server:
        driver_home = tmp_path / "driver-home"
        configure_model(driver_home, server.base_url)
        yield scripts, driver_home


async def batch(
    tasks: Path, out: Path, *flags: str, env: Mapping[str, str], cwd: Path
) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        [*PENGUIN, "batch", str(tasks), "-o", str(out), *flags],
        env=dict(env),
        cwd=cwd,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )


def results_of(path: Path) -> dict[str, dict[str, object]]:
    found = {}
    for line in path.read_text().splitlines():
        obj = json.loads(line)
        assert obj["id"] not in found, f"{obj['id']} written twice"
        found[obj["id"]] = obj
    return found


def comparable(result: dict[str, object]) -> dict[str, object]:
    machine_specific = ("session_id", "trace_path", "workspace", "wall_s")
    return {k: v for k, v in result.items() if k not in machine_specific}


KILLER = """
import sys, time, ray
ray.init(address=sys.argv[1], logging_level="error")
names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)]
chosen = [n for n in names if n.startswith("batch-") and n.endswith(sys.argv[2])]
actors = [ray.get_actor(name, namespace="penguin") for name in chosen]
print(time.monotonic(), file=sys.stderr)
for actor in actors:
    ray.kill(actor, no_restart=True)
deadline = time.monotonic() + 60  # ray.kill only asks: wait until the names are released
while time.monotonic() < deadline:
    alive = set(a["name"] for a in ray.util.list_named_actors(all_namespaces=True))
    if not alive & set(chosen):
        break
    time.sleep(0.05)
else:
    sys.exit(f"still registered 60 s after ray.kill: {chosen}")
print(" ".join(chosen))
"""


async def kill_worker(cluster: Cluster, suffix: str, at: list[float] | None = None) -> list[str]:
    """Kill the workers named ``*suffix`` and wait until Ray has them dead; their names.
    ``at`` gets the ``time.monotonic()`` (system-wide on Linux) just before the kill."""
    done = await trio.run_process(
        [sys.executable, "-c", KILLER, cluster.address, suffix],
        env=dict(cluster.env),
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    if at is not None:
        at.append(float(done.stderr.decode().split()[-1]))
    return done.stdout.decode().split()


async def test_b2_4_results_match_the_local_backend_and_traces_are_gathered(
    cluster: Cluster, model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    scripts, driver_home = model
    ids = [f"t{n}" for n in range(6)]
    for n, task_id in enumerate(ids):
        scripts.scripts[task_id] = [
            tool_reply(
                "write_file",
                {"description": "note", "file_path": "note.txt", "content": f"{task_id}\n"},
                cached_tokens=n,
            ),
            exec_reply("cat note.txt; grep SigBlk /proc/self/status"),
            text_reply(f"wrote {task_id}"),
        ]
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [task_line(i, metadata={"n": n}) for n, i in enumerate(ids)]
    )
    driver_env = {**cluster.env, "PENGUIN_HOME": str(driver_home)}
    local_out, ray_out = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    done = await batch(tasks, local_out, env=driver_env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    done = await batch(
        tasks,
        ray_out,
        "--backend",
        "ray",
        "--ray-address",
        cluster.address,
        "--workers",
        "2",
        "--concurrency",
        "2",
        "--gather-traces",
        env=driver_env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr.decode()
    local, remote = results_of(local_out), results_of(ray_out)
    assert sorted(remote) == ids
    assert {k: comparable(v) for k, v in remote.items()} == {
        k: comparable(v) for k, v in local.items()
    }
    assert {r["status"] for r in remote.values()} == {"completed"}
    driver_traces = driver_home / "default_project/agents/default_agent/traces"
    worker_agent = cluster.worker_home / "default_project/agents/default_agent"
    for result in remote.values():
        trace = Path(str(result["trace_path"]))
        assert trace.is_relative_to(driver_traces), trace  # gathered to the driver's agent
        assert f"{result['session_id']}_001.jsonl" == trace.name
        (original,) = (worker_agent / "traces").rglob(trace.name)  # written by the worker
        gathered = await trio.Path(trace).read_bytes()
        assert gathered == await trio.Path(original).read_bytes()
        # The commands run with no signal blocked, as they do outside Ray.
        assert b"SigBlk:\\t0000000000000000" in gathered
        workspace = Path(str(result["workspace"]))
        assert workspace.is_relative_to(worker_agent / "workspaces")  # on the node that ran it
        assert (workspace / "note.txt").read_text() == f"{result['id']}\n"
    # The workers used the driver's model (its configuration was sent to them).
    assert sorted(task_id for task_id, step, _ in scripts.requests if step == 0) == sorted(
        ids + ids
    )


async def test_b2_4_results_stream_back_as_each_task_ends_and_ctrl_c_aborts_the_rest(
    cluster: Cluster, model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    scripts, driver_home = model
    log = tmp_path / "times.log"
    scripts.scripts = {"slow": [logged_exec(log, "slow", "sleep 60.274")]}
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line("slow"), task_line("fast")])
    out = tmp_path / "results.jsonl"
    flags = ["--backend", "ray", "--ray-address", cluster.address, "--workers", "1"]
    with (tmp_path / "stderr").open("wb") as err:
        process = await trio.lowlevel.open_process(
            [*PENGUIN, "batch", str(tasks), "-o", str(out), *flags],
            env={**cluster.env, "PENGUIN_HOME": str(driver_home)},
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        try:
            await wait_until(lambda: "slow" in read_log(log), within=120)
            await wait_until(lambda: out.exists() and b"fast" in out.read_bytes(), within=60)
            # One worker runs both: the fast result came back while the slow task runs.
            assert [what for what, _ in read_log(log)["slow"]] == ["start"]
            assert [p for p in processes_with("sleep 60.274") if p.name() == "sleep"]
            process.send_signal(signal.SIGINT)
            with trio.fail_after(60):
                code = await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
    assert code == 130, (tmp_path / "stderr").read_text()
    results = results_of(out)
    assert {k: r["status"] for k, r in results.items()} == {"fast": "completed", "slow": "aborted"}
    await wait_until(lambda: processes_with("sleep 60.274") == [])


async def test_b2_5_a_killed_worker_s_tasks_are_retried_once_and_nothing_is_written_twice(
    cluster: Cluster, model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    scripts, driver_home = model
    log = tmp_path / "times.log"
    ids = [f"t{n}" for n in range(6)]  # w0 gets t0, t2, t4; w1 gets t1, t3, t5
    # w0's tasks wait for a gate opened only once w0 is dead: however slow the machine,
    # none of them can finish (and be reported) before the kill.
    gate = tmp_path / "gate"
    for n, task_id in enumerate(ids):
        body = f"until [ -e {gate} ]; do sleep 0.05; done" if n % 2 == 0 else "sleep 2"
        scripts.scripts[task_id] = [logged_exec(log, task_id, body)]
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line(i) for i in ids])
    out = tmp_path / "results.jsonl"
    driver_env = {**cluster.env, "PENGUIN_HOME": str(driver_home)}
    async with trio.open_nursery() as nursery:
        finished: list[subprocess.CompletedProcess[bytes]] = []

        async def run() -> None:
            finished.append(
                await batch(
                    tasks,
                    out,
                    "--backend",
                    "ray",
                    "--ray-address",
                    cluster.address,
                    "--workers",
                    "2",
                    "--concurrency",
                    "3",
                    env=driver_env,
                    cwd=tmp_path,
                )
            )

        nursery.start_soon(run)
        await wait_until(lambda: {"t0", "t2", "t4"} <= set(read_log(log)), within=120)
        assert len(await kill_worker(cluster, "-w0")) == 1
        gate.touch()
    (done,) = finished
    assert done.returncode == 0, done.stderr.decode()
    results = results_of(out)
    assert sorted(results) == ids
    assert {r["status"] for r in results.values()} == {"completed"}
    starts = {i: [w for w, _ in events].count("start") for i, events in read_log(log).items()}
    assert {i: starts[i] for i in ("t1", "t3", "t5")} == {"t1": 1, "t3": 1, "t5": 1}
    assert all(starts[i] == 2 for i in ("t0", "t2", "t4")), starts  # killed, run again
    said = [line for line in done.stderr.decode().splitlines() if "] Ray worker " in line]
    assert len(said) == 1, said  # what the driver did about it, in its own words
    assert re.fullmatch(
        r"\[penguin\] Ray worker w0 was lost \(\w+\); its 3 unfinished tasks run again "
        r"on a new worker",
        said[0],
    ), said


async def test_b2_3_ray_s_account_of_a_dead_worker_never_lands_inside_the_live_line(
    cluster: Cluster, model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    """On a terminal, Ray's driver prints a SIGKILLed worker's death on stdout, from a
    thread of its own; it used to land in the middle of the progress line."""
    scripts, driver_home = model
    log, parents, gate = tmp_path / "times.log", tmp_path / "parents.log", tmp_path / "gate"
    ids = [f"t{n}" for n in range(4)]  # w0 gets t0, t2; w1 gets t1, t3
    for task_id in ids:  # all wait until Ray has spoken: the live line is up meanwhile
        body = f"echo {task_id} $$ $PPID >> {parents}; until [ -e {gate} ]; do sleep 0.05; done"
        scripts.scripts[task_id] = [logged_exec(log, task_id, body)]
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line(i) for i in ids])
    out = tmp_path / "results.jsonl"
    flags = ("--backend", "ray", "--ray-address", cluster.address, "--workers", "2")
    leader, follower = os.openpty()  # stdout and stderr: one terminal, as for a person
    shown: list[bytes] = []
    try:
        async with trio.lowlevel.FdStream(leader) as terminal, trio.open_nursery() as nursery:

            async def drain() -> None:
                with contextlib.suppress(trio.BrokenResourceError):  # EIO: no writer left
                    while chunk := await terminal.receive_some(65536):
                        shown.append(chunk)

            def text() -> str:
                return re.sub(r"\x1b\[[0-9;]*m", "", b"".join(shown).decode(errors="replace"))

            nursery.start_soon(drain)
            process = await trio.lowlevel.open_process(
                [*PENGUIN, "batch", str(tasks), "-o", str(out), *flags, "--concurrency", "2"],
                env={**cluster.env, "PENGUIN_HOME": str(driver_home)},
                cwd=tmp_path,
                stdout=follower,
                stderr=follower,
            )
            os.close(follower)
            follower = -1
            try:
                await wait_until(lambda: {"t0", "t2"} <= set(read_log(log)), within=120)
                worker = _worker_of(parents, "t0")
                assert "BatchWorker" in " ".join(worker.cmdline())
                worker.kill()
                await wait_until(lambda: "(raylet)" in text() and "was lost" in text(), within=60)
                gate.touch()
                with trio.fail_after(120):
                    assert await process.wait() == 0, text()
            finally:
                gate.touch()
                if process.returncode is None:
                    process.kill()
    finally:
        if follower >= 0:
            os.close(follower)
    shown_text = text()
    for mark in ("(raylet)", "[penguin] Ray worker w0 was lost"):
        starts = [m.start() for m in re.finditer(re.escape(mark), shown_text)]
        assert starts, shown_text
        for start in starts:  # each on a line of its own: right after an erased line
            before = shown_text[max(0, start - 80) : start + 40]
            assert shown_text[:start].endswith(("\r\x1b[K", "\n")), repr(before)
    assert not re.search(r"ETA [^\r\n]*\(raylet\)", shown_text)
    assert sorted(results_of(out)) == ids


async def test_b2_5_a_task_lost_twice_gets_error(
    cluster: Cluster, model: tuple[TaskScripts, Path], tmp_path: Path
) -> None:
    scripts, driver_home = model
    log = tmp_path / "times.log"
    scripts.scripts = {"lost": [logged_exec(log, "lost", "sleep 20.517")]}
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line("lost")])
    out = tmp_path / "results.jsonl"
    driver_env = {**cluster.env, "PENGUIN_HOME": str(driver_home)}
    async with trio.open_nursery() as nursery:
        finished: list[subprocess.CompletedProcess[bytes]] = []

        async def run() -> None:
            finished.append(
                await batch(
                    tasks,
                    out,
                    "--backend",
                    "ray",
                    "--ray-address",
                    cluster.address,
                    env=driver_env,
                    cwd=tmp_path,
                )
            )

        nursery.start_soon(run)

        def started(times: int) -> bool:
            return [w for w, _ in read_log(log).get("lost", [])].count("start") == times

        await wait_until(lambda: started(1), within=120)
        assert len(await kill_worker(cluster, "-w0")) == 1
        await wait_until(lambda: started(2), within=120)
        assert len(await kill_worker(cluster, "-w0-retry")) == 1
    (done,) = finished
    assert done.returncode == 0, done.stderr.decode()
    (result,) = results_of(out).values()
    assert result["status"] == "error"
    assert "lost twice" in str(result["error"])
    said = [line for line in done.stderr.decode().splitlines() if "] Ray worker " in line]
    assert [line.split(" was lost ")[0] for line in said] == [
        "[penguin] Ray worker w0",
        "[penguin] Ray worker w0-retry",
    ]
    assert said[0].endswith("; its unfinished task runs again on a new worker")
    assert said[1].endswith("; its unfinished task ends in error (lost twice)")


async def test_21_4_a_full_data_disk_stops_a_ray_batch_and_resume_finishes(
    cluster: Cluster, tmp_path: Path
) -> None:
    scripts = TaskScripts()
    ids = [f"t{n}" for n in range(12)]
    for task_id in ids:
        scripts.scripts[task_id] = [text_reply(f"done {task_id} " + "y" * 120_000)]
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line(i) for i in ids])
    out = tmp_path / "results.jsonl"
    async with t.serve_openai_compatible(scripts) as server:
        with tmpfs(tmp_path / "disk", size="8m") as disk:
            root = disk / "root"  # the driver's and the workers' (one machine)
            configure_model(root, server.base_url)
            filler = fill(disk, leave=600_000)  # room for about four traces
            flags = [*("--backend", "ray", "--ray-address", cluster.address, "--workers", "2")]
            flags += ("--concurrency", "2", "--root", str(root))
            done = await batch(tasks, out, *flags, env=cluster.env, cwd=tmp_path)
            stderr = done.stderr.decode()
            assert done.returncode == 3, stderr
            assert f"penguin batch: cannot write to {root}/" in stderr
            assert "No space left on device; the batch stopped. Tasks without a result: " in stderr
            assert "Traceback" not in stderr
            first = results_of(out)
            assert len(first) < len(ids)
            assert {r["status"] for r in first.values()} <= {"completed"}, first

            filler.unlink()  # space returns
            done = await batch(tasks, out, *flags, "--resume", env=cluster.env, cwd=tmp_path)
            assert done.returncode == 0, done.stderr.decode()
    results = results_of(out)  # each id once
    assert sorted(results) == sorted(ids)
    assert {r["status"] for r in results.values()} == {"completed"}


async def test_20_a_model_that_cannot_be_reached_stops_a_ray_batch(
    cluster: Cluster, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    configure_model(root, "http://127.0.0.1:9/v1")  # nothing listens there
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line(f"t{n}") for n in range(6)])
    out = tmp_path / "results.jsonl"
    flags = ["--backend", "ray", "--ray-address", cluster.address, "--workers", "2"]
    flags += ["--concurrency", "3"]  # two workers, three tasks each
    done = await batch(tasks, out, *flags, "--root", str(root), env=cluster.env, cwd=tmp_path)
    stderr = done.stderr.decode()
    assert done.returncode == 3, stderr
    assert (
        "penguin batch: the model cannot be reached: cannot connect to http://127.0.0.1:9/v1"
        " (Connection refused); the batch stopped. Tasks without a result: 6"
    ) in stderr
    assert "Traceback" not in stderr
    assert out.read_bytes() == b""


@pytest.fixture
def run_temp() -> Iterator[Path]:
    """A temporary directory short enough for Ray's socket paths (pytest's are long)."""
    where = Path(tempfile.mkdtemp(prefix="pgb-", dir="/tmp"))
    yield where
    shutil.rmtree(where, ignore_errors=True)


async def test_b2_4_a_local_cluster_is_started_on_loopback_and_stopped_after(
    model: tuple[TaskScripts, Path], tmp_path: Path, run_temp: Path
) -> None:
    scripts, driver_home = model
    log = tmp_path / "times.log"
    ids = ["a", "b", "c", "d"]
    for task_id in ids:
        scripts.scripts[task_id] = [logged_exec(log, task_id, "sleep 1.5")]
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line(i) for i in ids])
    out = tmp_path / "results.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") and k != "PENGUIN_HOME"}
    env |= {"TMPDIR": str(run_temp), "PENGUIN_HOME": str(driver_home), "HOME": str(tmp_path)}
    flags = ["--backend", "ray", "--workers", "2", "--concurrency", "2"]
    leader, follower = os.openpty()  # stderr on a terminal: the live progress line
    shown: list[str] = []
    async with trio.lowlevel.FdStream(leader) as terminal, trio.open_nursery() as nursery:
        read = trio.Event()

        async def drain() -> None:
            shown.append(await read_terminal(terminal))
            read.set()

        nursery.start_soon(drain)
        try:
            process = await trio.lowlevel.open_process(
                [*PENGUIN, "batch", str(tasks), "-o", str(out), *flags],
                env=env,
                cwd=tmp_path,
                stdout=subprocess.DEVNULL,
                stderr=follower,
            )
        finally:
            os.close(follower)  # the child has its own
        try:
            await wait_until(lambda: len(read_log(log)) >= 2, within=120)
            during = tree(process.pid)
            commands = [" ".join(command_of(p)) for p in during]
            bound = listening(during)
            entries = await trio.Path(run_temp).iterdir()
            cluster_dirs = [Path(p) for p in entries if p.name.startswith("penguin-ray-")]
            with trio.fail_after(120):
                code = await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
        with trio.move_on_after(30):  # until the last holder of the terminal is gone
            await read.wait()
        nursery.cancel_scope.cancel()
    stderr = "".join(shown)
    assert code == 0, stderr
    # What the 2-4 s before the first task are is on the line (then the tasks' counts).
    assert "(starting a local Ray cluster)" in stderr
    assert re.search(r"penguin batch: 4/4 tasks in [0-9hms]+: 4 completed", stderr)
    assert {r["status"] for r in results_of(out).values()} == {"completed"}
    assert len(during) > 5  # gcs, raylet, agents, workers: the cluster was there
    # The autoscaler's monitor and the log monitor are not started for it (lean_head).
    assert not [c for c in commands if "log_monitor.py" in c or "_private/monitor.py" in c]
    assert bound, "no listening socket found"
    assert bound <= {"127.0.0.1", "::ffff:127.0.0.1"}, bound
    assert len(cluster_dirs) == 1  # its files were under the run's temporary directory
    assert not cluster_dirs[0].exists()  # and removed after
    _, alive = psutil.wait_procs(during, timeout=30)
    assert alive == [], [p.name() for p in alive]
    assert not (tmp_path / ".ray").exists()  # no token written under ~/.ray
    assert processes_with(str(run_temp)) == []


def _daemons(log: Path, ids: tuple[str, ...]) -> list[int]:
    if not log.exists():
        return []
    lines = [line.split() for line in log.read_text().splitlines()]
    return [int(pid) for task_id, pid, _ in lines if task_id in ids]


def _worker_of(log: Path, task_id: str) -> psutil.Process:
    """The Ray worker process that ran ``task_id``: its command's parent, or (when the
    command ran in a sandbox, started by the sandbox's spawner under ``bwrap``) the
    nearest ancestor that is a Ray worker."""
    lines = [line.split() for line in log.read_text().splitlines()]
    (parent,) = {int(parent) for task, _, parent in lines if task == task_id}
    process = psutil.Process(parent)
    for ancestor in [process, *process.parents()]:
        if "ray::" in ancestor.name() or "BatchWorker" in " ".join(ancestor.cmdline()):
            return ancestor
    return process


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("how", ["ray.kill", "SIGKILL"])
async def test_21_2_what_a_killed_worker_s_tasks_started_is_gone_within_2_s(
    cluster: Cluster, model: tuple[TaskScripts, Path], tmp_path: Path, how: str
) -> None:
    """Ray's ``ray.kill`` ends the worker's direct children itself, the host's watchdog
    among them unless the actor runs without that cleanup: then the watchdog sweeps."""
    scripts, driver_home = model
    log = tmp_path / "times.log"
    daemons, leaked = tmp_path / "daemons.log", tmp_path / "leaked.log"
    ids = [f"t{n}" for n in range(4)]  # w0 gets t0, t2; w1 gets t1, t3
    for task_id in ids:
        daemon = f"(setsid sleep 300.417 > /dev/null 2>&1 & echo {task_id} $! $PPID >> {daemons})"
        leak = f"(env | grep ^RAY_kill_child >> {leaked} || true)"
        scripts.scripts[task_id] = [logged_exec(log, task_id, f"{daemon}; {leak}; sleep 6")]
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task_line(i) for i in ids])
    out = tmp_path / "results.jsonl"
    driver_env = {**cluster.env, "PENGUIN_HOME": str(driver_home)}
    finished: list[subprocess.CompletedProcess[bytes]] = []
    orphans: list[int] = []
    try:
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                finished.append(
                    await batch(
                        tasks, out, "--backend", "ray", "--ray-address", cluster.address,
                        "--workers", "2", "--concurrency", "2", env=driver_env, cwd=tmp_path,
                    )
                )  # fmt: skip

            nursery.start_soon(run)
            await wait_until(lambda: len(_daemons(daemons, ("t0", "t2"))) == 2, within=120)
            orphans = _daemons(daemons, ("t0", "t2"))
            gone = trio.Event()
            gone_at: list[float] = []

            async def watch() -> None:  # from before the kill: the killer's exit takes long
                left = orphans
                with trio.move_on_after(10):
                    while left:
                        await trio.sleep(0.01)
                        left = [pid for pid in orphans if _alive(pid)]
                    gone_at.append(time.monotonic())
                gone.set()

            nursery.start_soon(watch)
            killed_at: list[float] = []
            if how == "SIGKILL":
                worker = _worker_of(daemons, "t0")
                assert "BatchWorker" in " ".join(worker.cmdline())
                killed_at.append(time.monotonic())
                worker.kill()
            else:
                assert len(await kill_worker(cluster, "-w0", killed_at)) == 1
            await gone.wait()
            assert gone_at, f"alive 10 s after the kill: {[p for p in orphans if _alive(p)]}"
            after = gone_at[0] - killed_at[0]
            assert after <= 2.0, f"the killed worker's daemons were alive {after:.2f} s after"
            print(f"the killed worker's daemons gone {after:.2f} s after the kill")
    finally:
        for pid in _daemons(daemons, tuple(ids)):  # never leave them behind, whatever the outcome
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()
    (done,) = finished
    assert done.returncode == 0, done.stderr.decode()
    results = results_of(out)
    assert sorted(results) == ids
    assert {r["status"] for r in results.values()} == {"completed"}
    starts = {i: [w for w, _ in events].count("start") for i, events in read_log(log).items()}
    assert starts == {"t0": 2, "t1": 1, "t2": 2, "t3": 1}  # the killed worker's: one retry
    assert not leaked.exists() or leaked.read_text() == ""  # Ray's setting stays Ray's
    # The sessions that ended normally ended their daemons too.
    assert [pid for pid in _daemons(daemons, tuple(ids)) if _alive(pid)] == []
