"""B2.4: the Ray worker's poll (``BatchWorker.take``), without Ray.

``BatchWorker`` is a plain class that Ray wraps as an actor; its ``take`` is called in
one of the actor's threads while the share's Trio loop runs in another. Here a
thread plays the Trio side through the same calls (``start``, the finished flag under
the condition), so what one poll carries is exact, not timed.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from penguin.batch._ray_worker import GATHER_S, BatchWorker
from penguin.batch._tasks import BatchTask


def _worker(root: Path) -> BatchWorker:
    return BatchWorker({"root": str(root)}, {}, False)


def _finish(worker: BatchWorker) -> None:
    loop = worker._loop
    with loop.ready:  # what run_share does once its share is done
        loop.finished = True
        loop.ready.notify_all()


def test_b2_4_one_poll_carries_what_happens_while_it_gathers(tmp_path: Path) -> None:
    worker = _worker(tmp_path)

    def share() -> None:
        for number in range(5):
            worker._loop.start(BatchTask(id=f"t{number}", prompt="p"))
            time.sleep(0.01)
        _finish(worker)

    thread = threading.Thread(target=share)
    began = time.monotonic()
    thread.start()
    report = worker.take(30.0, gather_s=30.0)
    thread.join()
    # The first start did not end the poll (one poll per event is what it saves);
    # the share's end did, long before the 30 s window.
    assert report["started"] == ["t0", "t1", "t2", "t3", "t4"]
    assert report["finished"] is True
    assert time.monotonic() - began < 15


def test_b2_4_a_poll_ends_when_its_window_does_while_the_share_runs_on(
    tmp_path: Path,
) -> None:
    worker = _worker(tmp_path)
    taken = threading.Event()

    def share() -> None:
        worker._loop.start(BatchTask(id="first", prompt="p"))
        taken.wait(30)
        worker._loop.start(BatchTask(id="second", prompt="p"))
        _finish(worker)

    thread = threading.Thread(target=share)
    thread.start()
    try:
        first = worker.take(30.0, gather_s=0.05)
    finally:
        taken.set()
    thread.join()
    second = worker.take(30.0, gather_s=30.0)
    assert (first["started"], first["finished"]) == (["first"], False)
    assert (second["started"], second["finished"]) == (["second"], True)


def test_b2_4_a_poll_with_nothing_to_report_waits_only_its_wait(tmp_path: Path) -> None:
    began = time.monotonic()
    report = _worker(tmp_path).take(0.05)
    assert report == {
        "started": [],
        "results": [],
        "finished": False,
        "failure": None,
        "stopped": None,
    }
    assert time.monotonic() - began < 15
    assert 0 < GATHER_S <= 0.25  # a result still reaches the driver as its task ends
