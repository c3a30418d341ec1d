"""``python -m benchmarks._soak_probe OUT [penguin args…]``: ``penguin server`` with a heap probe.

The soak benchmark (:mod:`benchmarks.soak`) starts the server through this module
instead of ``python -m penguin``, so that the server's Python heap can be told apart
from its RSS; nothing of it is in penguin itself. A daemon thread appends one JSON
line to ``OUT`` every ``PENGUIN_SOAK_PROBE_EVERY`` seconds (default 10): the time,
``sys.getallocatedblocks()`` (the Python objects' allocator blocks in use; cheap) and
RSS. With ``PENGUIN_SOAK_TRACEMALLOC=N`` (a debugging aid: it slows the server) the
process also traces allocations with ``N`` frames, and at the times listed in
``PENGUIN_SOAK_SNAPSHOTS`` (seconds, comma-separated) writes ``OUT.<t>.snapshot``
(a :mod:`tracemalloc` snapshot) and ``OUT.<t>.objects.json`` (live objects of
penguin's own classes, and of a few library ones, counted by class after a full
collection), for :func:`compare` to diff.
"""

from __future__ import annotations

import collections
import ctypes
import gc
import json
import os
import runpy
import sys
import threading
import time
import tracemalloc
from pathlib import Path

_WATCHED_MODULES = ("penguin", "trio", "hypercorn", "starlette", "h11", "httpx", "httpcore")


def _rss() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
            "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def _malloc() -> dict[str, int]:
    """glibc's totals over every arena: bytes in use, free in the arenas, mmapped."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = _MallInfo2
        info = libc.mallinfo2()
    except (OSError, AttributeError):
        return {}
    return {"in_use": info.uordblks + info.hblkhd, "free": info.fordblks, "heap": info.arena}


def _mappings() -> dict[str, int]:
    """RSS by kind of mapping: the brk heap, anonymous 1 MiB maps (pymalloc's arenas), files."""
    kinds = {"rss_heap": 0, "rss_arenas": 0, "rss_anon": 0, "rss_files": 0}
    kind = "rss_anon"
    with open("/proc/self/smaps") as handle:
        for line in handle:
            head = line.split(None, 6)
            if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                low, high = (int(x, 16) for x in head[0].split("-"))
                name = head[5].strip() if len(head) > 5 else ""
                if name == "[heap]":
                    kind = "rss_heap"
                elif name.startswith("/"):
                    kind = "rss_files"
                elif high - low == 1 << 20:
                    kind = "rss_arenas"
                else:
                    kind = "rss_anon"
            elif head[0] == "Rss:":
                kinds[kind] += int(head[1]) * 1024
    return kinds


def _object_counts() -> dict[str, int]:
    gc.collect()
    counts: collections.Counter[str] = collections.Counter()
    for obj in gc.get_objects():
        kind = type(obj)
        module = getattr(kind, "__module__", "") or ""
        if module.split(".", 1)[0] in _WATCHED_MODULES:
            counts[f"{module}.{kind.__qualname__}"] += 1
        elif kind in (dict, list, tuple, bytes, str, set, collections.deque):
            counts[f"builtins.{kind.__qualname__}"] += 1
    counts["threads"] = threading.active_count()
    return dict(counts)


def _probe(out: Path, every: float, snapshots: list[float], trim: bool) -> None:
    start = time.monotonic()
    pending = sorted(snapshots)
    with out.open("a") as handle:
        while True:
            now = time.monotonic() - start
            line = {"t": round(now, 1), "blocks": sys.getallocatedblocks(), "rss": _rss()}
            line.update(_malloc())
            line.update(_mappings())
            if trim:
                ctypes.CDLL(None).malloc_trim(0)
            if tracemalloc.is_tracing():
                line["traced"] = tracemalloc.get_traced_memory()[0]
            handle.write(json.dumps(line) + "\n")
            handle.flush()
            while pending and now >= pending[0]:
                at = int(pending.pop(0))
                if tracemalloc.is_tracing():
                    tracemalloc.take_snapshot().dump(f"{out}.{at}.snapshot")
                Path(f"{out}.{at}.objects.json").write_text(json.dumps(_object_counts()))
            time.sleep(every)


def compare(out: str, first: int, last: int, top: int = 25) -> None:
    """Print the top growers between two snapshots: by traceback, then by object class."""
    if Path(f"{out}.{first}.snapshot").exists():
        old = tracemalloc.Snapshot.load(f"{out}.{first}.snapshot")
        new = tracemalloc.Snapshot.load(f"{out}.{last}.snapshot")
        ignore = [
            tracemalloc.Filter(False, tracemalloc.__file__),
            tracemalloc.Filter(False, "<frozen importlib._bootstrap*>"),
        ]
        old, new = old.filter_traces(ignore), new.filter_traces(ignore)
        stats = new.compare_to(old, "traceback")
        total = sum(s.size_diff for s in stats)
        print(f"traced Python heap {first}s -> {last}s: {total / 1e6:+.2f} MB")
        for stat in stats[:top]:
            print(f"{stat.size_diff / 1e3:+9.1f} kB {stat.count_diff:+7d} blocks")
            for frame in stat.traceback.format()[-12:]:
                print("    " + frame.strip())
    before = json.loads(Path(f"{out}.{first}.objects.json").read_text())
    after = json.loads(Path(f"{out}.{last}.objects.json").read_text())
    grown = sorted(
        ((after.get(k, 0) - before.get(k, 0), k) for k in set(before) | set(after)), reverse=True
    )
    print("live objects, grown most:")
    for diff, name in grown[:top]:
        print(f"{diff:+8d}  {name}  ({before.get(name, 0)} -> {after.get(name, 0)})")


def main() -> None:
    out = Path(sys.argv[1])
    frames = int(os.environ.get("PENGUIN_SOAK_TRACEMALLOC", "0") or 0)
    if frames:
        tracemalloc.start(frames)
    every = float(os.environ.get("PENGUIN_SOAK_PROBE_EVERY", "10"))
    listed = os.environ.get("PENGUIN_SOAK_SNAPSHOTS", "")
    snapshots = [float(x) for x in listed.split(",") if x.strip()]
    trim = os.environ.get("PENGUIN_SOAK_TRIM") == "1"
    threading.Thread(target=_probe, args=(out, every, snapshots, trim), daemon=True).start()
    sys.argv = ["penguin", *sys.argv[2:]]
    runpy.run_module("penguin", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
