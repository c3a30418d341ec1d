"""Start-up time of the ``penguin`` command, beside the interpreter's own.

Run it with ``python -m benchmarks.startup`` (``--quick`` for fewer runs). Each round
starts three real processes, interleaved so that a change in the machine's load
affects them alike: ``python -c pass`` (the baseline: what any Python command pays),
``penguin --version`` and ``penguin tool read_file`` on a one-line file. The figures are
medians of wall time, each also shown above the baseline, and of the CPU time the
process used (user + system, less sensitive to other work on the machine).

Targets (issue 9 item 7): ``penguin --version`` under 100 ms and ``penguin tool
read_file`` under 250 ms, wall time. ``--version`` must load nothing beyond the
argument parser; ``tool`` pays for Trio and the Environment, never for the model
client, the agent or the engine.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import attrs


@attrs.frozen
class Case:
    """One command line to time, with what a correct run prints and the target."""

    label: str
    argv: Sequence[str]
    expect: str
    target_ms: float | None


@attrs.define
class Samples:
    """Wall and CPU seconds of each run of one case."""

    wall: list[float] = attrs.field(factory=list)
    cpu: list[float] = attrs.field(factory=list)


def penguin_command() -> list[str]:
    """The installed ``penguin`` script beside this interpreter, else ``python -m penguin``."""
    script = Path(sys.executable).with_name("penguin")
    if script.exists():
        return [str(script)]
    found = shutil.which("penguin")
    return [found] if found else [sys.executable, "-m", "penguin"]


def run_once(case: Case, samples: Samples) -> None:
    """Start the case's process once and record its wall and CPU time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(case.argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0 or case.expect not in done.stdout:
        raise SystemExit(
            f"{case.label}: exit {done.returncode}, stdout {done.stdout!r}, "
            f"stderr {done.stderr!r}; expected {case.expect!r} in stdout"
        )
    samples.wall.append(wall)
    samples.cpu.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))


def main(runs: int) -> None:
    penguin = penguin_command()
    with tempfile.TemporaryDirectory(prefix="penguin-startup-") as tmp:
        target = Path(tmp) / "hello.txt"
        target.write_text("hello from the start-up benchmark\n")
        arguments = json.dumps({"file_path": str(target)})
        cases = [
            Case("python -c pass", [sys.executable, "-c", "pass"], "", None),
            Case("penguin --version", [*penguin, "--version"], "penguin ", 100.0),
            Case(
                "penguin tool read_file '{...}'",
                [*penguin, "tool", "read_file", arguments, "--workspace", tmp],
                "hello from the start-up benchmark",
                250.0,
            ),
        ]
        results = {case.label: Samples() for case in cases}
        for case in cases:  # one warm-up each: bytecode caches, the page cache
            run_once(case, Samples())
        for _ in range(runs):
            for case in cases:
                run_once(case, results[case.label])

    print(f"start-up, median of {runs} runs ({' '.join(penguin)})")
    base = statistics.median(results[cases[0].label].wall) * 1000
    for case in cases:
        samples = results[case.label]
        wall = statistics.median(samples.wall) * 1000
        cpu = statistics.median(samples.cpu) * 1000
        line = f"    {wall:7.1f} ms wall  {cpu:7.1f} ms cpu"
        if case.target_ms is None:
            line += "  (baseline)          "
        else:
            line += f"  +{wall - base:6.1f} ms over pass"
        line += f"  {case.label}"
        if case.target_ms is not None:
            verdict = "ok  " if wall < case.target_ms else "MISS"
            line += f"   {verdict} target < {case.target_ms:.0f} ms"
        print(line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 runs instead of --runs")
    parser.add_argument("--runs", type=int, default=21, metavar="N", help="runs of each command")
    options = parser.parse_args()
    main(5 if options.quick else max(1, options.runs))
