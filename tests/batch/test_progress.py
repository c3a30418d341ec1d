"""B2.3: the progress arithmetic (done/total, running, failed, tasks per minute, ETA)."""

from __future__ import annotations

from penguin.batch import BatchProgress, BatchResult
from penguin.batch._progress import format_duration


def finished(progress: BatchProgress, status: str, now: float, task_id: str = "t") -> None:
    progress.task_finished(BatchResult(id=task_id, status=status), now)  # type: ignore[arg-type]


def test_b2_3_rate_and_eta_follow_the_finished_tasks() -> None:
    progress = BatchProgress(total=10)
    progress.start(100.0)
    assert progress.line(100.0) == "0/10 done, 0 running, 0 failed, -- tasks/min, ETA --"
    for _ in range(3):
        progress.task_started(100.0)
    finished(progress, "completed", 110.0)
    finished(progress, "timeout", 120.0)
    assert progress.running == 1
    assert progress.failed == 1
    assert progress.per_minute(130.0) == 4.0  # 2 tasks in 30 s
    assert progress.eta_s(130.0) == 120.0  # 8 left at 4 a minute
    assert progress.line(130.0) == "2/10 done, 1 running, 1 failed, 4.0 tasks/min, ETA 2m00s"
    finished(progress, "aborted", 130.0)
    assert progress.failed == 1  # aborted is not a failure
    progress.task_lost()
    assert progress.running == 0
    assert progress.summary(160.0) == "3/10 tasks in 1m00s: 1 aborted, 1 completed, 1 timeout"


def test_b2_3_a_finished_task_line_says_how_it_ended() -> None:
    progress = BatchProgress(total=2)
    done = BatchResult(id="t1", status="completed", turns=2, tool_calls=3, wall_s=1.26)
    progress.task_finished(done, 1.0)
    assert progress.finished_line(done) == "[1/2] t1 completed in 1.3 s (2 turns, 3 tool calls)"
    bad = BatchResult(id="t2", status="error", error='template "x" does not exist')
    progress.task_finished(bad, 2.0, was_running=False)
    assert progress.finished_line(bad).endswith(
        '(0 turns, 0 tool calls; template "x" does not exist)'
    )


def test_b2_3_one_finished_task_is_one_line_whatever_its_id_holds() -> None:
    progress = BatchProgress(total=1)
    odd = BatchResult(
        id="two\nlines\x00\x1b[2J\u2028", status="failed", error="model said:\r\nno\tway"
    )
    progress.task_finished(odd, 1.0)
    line = progress.finished_line(odd)
    assert line == (
        "[1/1] two\\nlines\\x00\\x1b[2J\\u2028 failed in 0.0 s"
        " (0 turns, 0 tool calls; model said:\\r\\nno\\tway)"
    )
    assert line.isprintable()
    emoji = BatchResult(id="pingüino 🐧", status="completed")
    assert "] pingüino 🐧 completed" in progress.finished_line(emoji)


def test_b2_3_durations_are_short() -> None:
    assert [format_duration(s) for s in (0.4, 42, 185, 7260)] == ["0s", "42s", "3m05s", "2h01m"]


def test_b2_3_what_the_batch_does_before_its_first_task_is_on_the_line() -> None:
    progress = BatchProgress(total=4)
    progress.start(0.0)
    progress.phase = "starting a local Ray cluster"
    assert progress.line(1.0) == (
        "0/4 done, 0 running, 0 failed, -- tasks/min, ETA -- (starting a local Ray cluster)"
    )
    progress.phase = "starting 2 Ray workers"
    progress.task_started(3.0)  # the first task to start ends the phase: no parentheses
    assert progress.line(3.0) == "0/4 done, 1 running, 0 failed, -- tasks/min, ETA --"
