"""``penguin chat``: time to the first prompt, and what rendering a streamed answer costs.

Run it with ``python -m benchmarks.chat`` (``--quick`` for fewer runs). Both parts run
``penguin chat`` code on a real pseudo-terminal (pexpect, from the tests extra).

**Start-up.** Each round starts, interleaved, ``python -c pass`` on a pty (the
baseline: what any Python command pays) and ``penguin chat`` with a configured
model and an explicit workspace, and times each until it is done, resp. until its
first prompt is drawn (the terminal is sent "bracketed paste on", which
prompt_toolkit does when it draws a prompt). The model is never contacted: a chat
asks nothing before the first task. Target (issue 13): under 400 ms, wall time.

**Rendering.** A child process on a pty opens the chat's Terminal with its live
prompt up (redrawn ten times a second from its worker thread), and feeds the chat's
Renderer on the chat's ScreenSurface an answer of N streamed text deltas, the way the
engine's stream hands them over (in batches of 64), then the complete answer (which is
printed as Markdown). The baseline is the same loop with the view doing nothing.
From the difference, the cost per token, and what a model streaming 200k tokens/s
would slow down to. Target: not below 100k tokens/s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pexpect
import trio

PROMPT_DRAWN = "\x1b[?2004h"
START_TARGET_MS = 400.0
STREAM_RATE = 200_000.0
RATE_TARGET = 100_000.0


# ---------------------------------------------------------------------- start-up


def _spawn_env(home: Path) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "PENGUIN_HOME")}
    env.update(HOME=str(home), TERM="xterm-256color", PROMPT_TOOLKIT_NO_CPR="1")
    return env


def _time_until(argv: list[str], env: dict[str, str], until: Any) -> float:
    start = time.perf_counter()
    child = pexpect.spawn(argv[0], argv[1:], env=env, encoding="utf-8", dimensions=(40, 120))
    try:
        if until is pexpect.EOF:
            child.expect(pexpect.EOF, timeout=30)
        else:
            child.expect_exact(until, timeout=30)
        return time.perf_counter() - start
    finally:
        if until is not pexpect.EOF:
            child.sendcontrol("d")
            child.expect(pexpect.EOF, timeout=30)
        child.close()


def startup(runs: int) -> None:
    from penguin import config as cfg

    with tempfile.TemporaryDirectory(prefix="penguin-chat-bench-") as tmp:
        root, workspace, home = Path(tmp) / "root", Path(tmp) / "ws", Path(tmp) / "home"
        workspace.mkdir()
        home.mkdir()
        paths = cfg.AgentPaths(root)
        entry = cfg.ModelEntry(
            provider="local", model_id="bench", base_url="http://127.0.0.1:9/v1", api_key="x"
        )
        project = cfg.add_model(
            cfg.load_project_config(paths.project_config), entry, set_default=True
        )
        cfg.save_project_config(paths.project_config, project)
        env = _spawn_env(home)
        chat = [sys.executable, "-m", "penguin", "chat", "--root", str(root)]
        chat += ["--workspace", str(workspace)]
        cases = {
            "python -c pass": ([sys.executable, "-c", "pass"], pexpect.EOF),
            "penguin chat, to its first prompt": (chat, PROMPT_DRAWN),
        }
        for argv, until in cases.values():  # warm-up: bytecode caches, the page cache
            _time_until(argv, env, until)
        times: dict[str, list[float]] = {label: [] for label in cases}
        for _ in range(runs):
            for label, (argv, until) in cases.items():
                times[label].append(_time_until(argv, env, until))
    base = statistics.median(times["python -c pass"]) * 1000
    print(f"start-up on a pty, median of {runs} runs")
    for label, samples in times.items():
        wall = statistics.median(samples) * 1000
        if label.startswith("python"):
            print(f"    {wall:7.1f} ms wall  (baseline)            {label}")
            continue
        verdict = "ok  " if wall < START_TARGET_MS else "MISS"
        print(
            f"    {wall:7.1f} ms wall  +{wall - base:6.1f} ms over pass  {label}"
            f"   {verdict} target < {START_TARGET_MS:.0f} ms"
        )


# ---------------------------------------------------------------------- rendering


async def _feed(tokens: int, render: bool, result: Path) -> None:
    from penguin import protocol as om
    from penguin.cli._render import Renderer
    from penguin.cli._screen import ScreenSurface
    from penguin.cli._terminal import Terminal

    deltas = [om.partial_text("delta", f"tok{index % 10} ") for index in range(tokens)]
    complete = om.assistant_text("".join(f"tok{index % 10} " for index in range(tokens)))
    terminal = Terminal(None, [], sys.stdout)
    surface = ScreenSurface(terminal, color=True)
    renderer = Renderer(surface=surface)
    show = renderer.show if render else (lambda message: None)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: terminal.read("› ", live=surface.live))
        surface.working(time.monotonic())
        await terminal.drawn.wait()  # the live prompt is up, redrawing
        start = time.perf_counter()
        for index, message in enumerate(deltas):
            show(message)
            if index % 64 == 63:  # the engine's stream hands over batches of 64
                await trio.lowlevel.checkpoint()
        streamed = time.perf_counter() - start
        show(complete)
        total = time.perf_counter() - start
        nursery.cancel_scope.cancel()
    await trio.Path(result).write_text(json.dumps({"streamed": streamed, "total": total}))


def _render_child(tokens: int, render: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="penguin-chat-render-") as tmp:
        result = Path(tmp) / "result.json"
        argv = ["-m", "benchmarks.chat", "--child", str(tokens), str(int(render)), str(result)]
        env = _spawn_env(Path(tmp))
        child = pexpect.spawn(sys.executable, argv, env=env, encoding="utf-8", dimensions=(40, 120))
        child.expect(pexpect.EOF, timeout=600)  # reading all it prints, as a terminal does
        child.close()
        if not result.exists():
            raise SystemExit(f"the rendering child failed: {str(child.before)[-2000:]!r}")
        measured: dict[str, float] = json.loads(result.read_text())
        return measured


def rendering(tokens: int, runs: int) -> None:
    base = [_render_child(tokens, render=False) for _ in range(runs)]
    real = [_render_child(tokens, render=True) for _ in range(runs)]
    base_s = statistics.median(r["streamed"] for r in base)
    real_s = statistics.median(r["streamed"] for r in real)
    final = statistics.median(r["total"] - r["streamed"] for r in real)
    cost = max(real_s - base_s, 0.0) / tokens
    slowed = 1 / (1 / STREAM_RATE + cost)
    print(
        f"rendering {tokens:,} streamed tokens on a pty with the live prompt up, median of {runs}"
    )
    print(f"    {tokens / base_s:12,.0f} tokens/s  (baseline: the same loop, nothing shown)")
    print(f"    {tokens / real_s:12,.0f} tokens/s  Renderer + ScreenSurface, live region redrawn")
    print(f"    {cost * 1e6:12.2f} µs per token")
    print(f"    {final * 1000:12.1f} ms to print the finished answer as Markdown")
    verdict = "ok  " if slowed >= RATE_TARGET else "MISS"
    print(
        f"    a {STREAM_RATE:,.0f} tokens/s stream would run at {slowed:,.0f} tokens/s"
        f"   {verdict} target >= {RATE_TARGET:,.0f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs, fewer tokens")
    parser.add_argument("--runs", type=int, default=15, metavar="N", help="start-up runs")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        tokens, render, result = options.child
        trio.run(_feed, int(tokens), render == "1", Path(result))
    else:
        startup(5 if options.quick else max(1, options.runs))
        rendering(50_000 if options.quick else 200_000, 1 if options.quick else 3)
