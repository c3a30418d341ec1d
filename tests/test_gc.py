"""Issue 20 item 1: the collector's pace while many sessions share one process.

``many_sessions_gc`` raises the youngest generation's threshold while a batch or a
server runs, respects what the process chose (a higher threshold, the collector
switched off, a change made meanwhile), and puts the thresholds back when the last
holder lets go — also when holders overlap across threads. A real batch (real
sessions, a real model server on 127.0.0.1) runs at that pace and leaves the
process as it found it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from penguin._gc import MANY_SESSIONS_THRESHOLD, many_sessions_gc
from penguin.batch import BatchTask, run_batch
from penguin.llm import testing as t
from tests.batch.scripted import TaskScripts, configure_model, prompt, text_reply

DEFAULT = (700, 10, 10)


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[None]:
    """Each test starts from CPython's defaults, and the process gets its own back."""
    before = gc.get_threshold()
    gc.set_threshold(*DEFAULT)
    yield
    gc.set_threshold(*before)


def test_20_1_the_threshold_is_raised_while_held_and_put_back_after() -> None:
    with many_sessions_gc():
        assert gc.get_threshold() == (MANY_SESSIONS_THRESHOLD, 10, 10)
    assert gc.get_threshold() == DEFAULT


def test_20_1_the_threshold_is_put_back_when_the_block_raises() -> None:
    with pytest.raises(KeyError), many_sessions_gc():
        raise KeyError("boom")
    assert gc.get_threshold() == DEFAULT


def test_20_1_nested_holders_restore_only_when_the_last_one_leaves() -> None:
    with many_sessions_gc():
        with many_sessions_gc():
            assert gc.get_threshold()[0] == MANY_SESSIONS_THRESHOLD
        assert gc.get_threshold()[0] == MANY_SESSIONS_THRESHOLD
    assert gc.get_threshold() == DEFAULT


def test_20_1_a_higher_threshold_or_a_switched_off_collector_is_left_alone() -> None:
    for chosen in ((50_000, 5, 5), (0, 10, 10)):
        gc.set_threshold(*chosen)
        with many_sessions_gc():
            assert gc.get_threshold() == chosen
        assert gc.get_threshold() == chosen


def test_20_1_a_change_made_while_held_is_not_overwritten() -> None:
    with many_sessions_gc():
        gc.set_threshold(2_000, 20, 20)  # the embedding program's own choice, meanwhile
    assert gc.get_threshold() == (2_000, 20, 20)


def test_20_1_holders_in_two_threads_overlap_and_the_last_restores() -> None:
    first_in = threading.Event()
    second_in = threading.Event()
    first_out = threading.Event()
    seen: dict[str, int] = {}

    def first() -> None:
        with many_sessions_gc():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with many_sessions_gc():
            second_in.set()
            first_out.wait(10)
            seen["after the first left"] = gc.get_threshold()[0]

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert seen == {"after the first left": MANY_SESSIONS_THRESHOLD}
    assert gc.get_threshold() == DEFAULT


class Pace(TaskScripts):
    """The scripted model, noting the collector's threshold at every request."""

    def __init__(self, scripts: dict[str, list[t.Reply]]) -> None:
        super().__init__(scripts)
        self.thresholds: list[int] = []

    def __call__(self, request: t.ReceivedRequest) -> t.Reply:
        self.thresholds.append(gc.get_threshold()[0])  # the model runs in this process
        return super().__call__(request)


async def test_20_1_a_batch_runs_at_the_many_sessions_pace_and_restores_it(
    tmp_path: Path,
) -> None:
    scripts = Pace({f"t{i}": [text_reply(f"done {i}")] for i in range(4)})
    async with t.serve_openai_compatible(scripts) as server:
        root = tmp_path / "root"
        configure_model(root, server.base_url)
        tasks = [BatchTask(id=f"t{i}", prompt=prompt(f"t{i}")) for i in range(4)]
        async with run_batch(tasks, root=root, concurrency=2) as stream:
            statuses = [result.status async for result in stream]
    assert statuses == ["completed"] * 4
    assert scripts.thresholds == [MANY_SESSIONS_THRESHOLD] * 4
    assert gc.get_threshold() == DEFAULT
