"""Command-policy matching speed: ordinary commands and adversarial ones.

Run with ``python -m benchmarks.policy``. The policy is consulted once per
exec_command/input_command approval, so it must stay cheap even on hostile input: a
pattern that backtracks would let a model stall the engine with a long command. The
baseline is a plain ``str.split`` of the same text (the least any matcher must do).
Target: matching is linear — doubling an adversarial input at most about doubles the
time (ratio <= 2.5).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from penguin.approval import CommandPolicy

ORDINARY = [
    "ls -la",
    "git status && git diff --stat",
    "python -m pytest -q tests/",
    "rm -rf ./build dist",
    "sudo rm -rf /",
]
ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "sudo -u ...": lambda n: "sudo " + "-u " * n + "x",
    "rm -r ...": lambda n: "rm " + "-r " * n + "x",
    "bash -c ...": lambda n: "bash " + "-c " * n + "x",
    "env A=1 ...": lambda n: "env " + "A=1 " * n + "x",
    ";;;... rm -rf": lambda n: ";" * n + "rm -rf",
    "rm -rf aaa...": lambda n: "rm -rf " + "a" * n,
    "f(){ f|f|...": lambda n: "f(){ " + "f|" * n,
    "x=x=...": lambda n: "x=" * n,
    "rm rm rm ... -r": lambda n: "rm " * n + "-r",
    "dd dd dd ...": lambda n: "dd " * n + "of=/dev/nul",
    "tee tee ...": lambda n: "tee " * n + "x",
    "format format ...": lambda n: "format " * n + "x",
    "rd rd rd ... /s": lambda n: "rd " * n + "/s",
    "((((...": lambda n: "(" * (2 * n),
    "a/a/a/.../rm": lambda n: "a/" * n + "rm",
}


def _median_us(fn: Callable[[str], object], text: str, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        fn(text)
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000


def main() -> None:
    policy = CommandPolicy()
    print("ordinary commands (median of 2000 rounds)")
    for text in ORDINARY:
        took = _median_us(policy.match_command, text, 2000)
        base = _median_us(str.split, text, 2000)
        print(f"    {took:8.1f} us  (split {base:5.1f} us)  {text}")
    print("adversarial commands of n and 2n units, n = 4000 (median of 10 rounds)")
    worst = 0.0
    for name, build in ADVERSARIAL.items():
        small = _median_us(policy.match_command, build(4000), 10)
        large = _median_us(policy.match_command, build(8000), 10)
        base = _median_us(str.split, build(8000), 10)
        ratio = large / small
        worst = max(worst, ratio)
        print(
            f"    {small / 1000:6.1f} ms -> {large / 1000:6.1f} ms  x{ratio:4.2f}"
            f"  (split {base / 1000:5.2f} ms)  {name}"
        )
    print(f"    {'ok  ' if worst <= 2.5 else 'MISS'} target: doubling costs <= 2.5x (linear)")


if __name__ == "__main__":
    main()
