"""Issue 17 item 6: the batch's records round-trip, and task files parse line by line.

Hypothesis builds any valid :class:`BatchTask` and :class:`BatchResult`:

- a task written as a task line (``to_json``) reads back as the same task (B1.1);
- a result written as a results-file line reads back as the same result, is one line,
  and ``recorded_ids`` finds its id (B1.2, B1.3);
- a task file of such lines, with blank lines anywhere, parses to the tasks in order;
  one bad line anywhere is reported with its own line number, and a repeated id at the
  line of its second use;
- a batch's settings sent to a worker process as a JSON line read back as the same
  settings, every field (the processes backend once dropped the sandbox).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from penguin.batch import (
    UNATTENDED_MODES,
    BatchResult,
    BatchTask,
    TaskFileError,
    TokenTotals,
    parse_tasks,
)
from penguin.batch._api import _plain
from penguin.batch._results import BATCH_STATUSES, recorded_ids
from penguin.batch._runner import BatchSettings, settings_from_wire, settings_to_wire
from penguin.environment.sandbox import MODES, SandboxPolicy

words = st.text(st.characters(codec="utf-8"), min_size=1).filter(lambda s: s.strip() != "")
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
metadata = st.dictionaries(st.text(max_size=10), json_values, max_size=4)
segments = st.text(
    st.characters(codec="ascii", categories=("L", "N"), include_characters="_-."), min_size=1
).filter(lambda s: s not in (".", ".."))
absolute_paths = st.lists(segments, min_size=1, max_size=4).map(lambda parts: Path("/", *parts))


@st.composite
def tasks(draw: st.DrawFn, task_id: str | None = None) -> BatchTask:
    where = draw(st.sampled_from(["none", "workspace", "template"]))
    path = draw(absolute_paths)
    model = draw(st.none() | st.tuples(words, words))
    return BatchTask(
        id=task_id if task_id is not None else draw(words),
        prompt=draw(words),
        workspace=path if where == "workspace" else None,
        template=path if where == "template" else None,
        approve=draw(st.none() | st.sampled_from(UNATTENDED_MODES)),
        provider=None if model is None else model[0],
        model_id=None if model is None else model[1],
        max_turns=draw(st.none() | st.integers(1, 10**6)),
        timeout_s=draw(st.none() | st.floats(min_value=0.001, max_value=1e9, allow_nan=False)),
        metadata=draw(metadata),
    )


@st.composite
def results(draw: st.DrawFn) -> BatchResult:
    maybe_text = st.none() | st.text(max_size=40)
    return BatchResult(
        id=draw(words),
        status=draw(st.sampled_from(BATCH_STATUSES)),
        session_id=draw(maybe_text),
        trace_path=draw(maybe_text),
        workspace=draw(maybe_text),
        turns=draw(st.integers(0, 10**6)),
        tokens=TokenTotals(
            input=draw(st.integers(0, 10**9)),
            output=draw(st.integers(0, 10**9)),
            cached=draw(st.integers(0, 10**9)),
        ),
        tool_calls=draw(st.integers(0, 10**6)),
        wall_s=draw(st.integers(0, 10**9)) / 1000,  # the line keeps milliseconds
        final_text=draw(maybe_text),
        error=draw(maybe_text),
        metadata=draw(metadata),
    )


@st.composite
def batch_settings(draw: st.DrawFn) -> BatchSettings:
    model = draw(st.none() | st.tuples(words, words))
    paths = st.lists(absolute_paths.map(str), max_size=3)
    policy = SandboxPolicy(
        mode=draw(st.sampled_from(MODES)),
        network=draw(st.none() | st.booleans()),
        writable_roots=draw(paths),
        writable_tmp=draw(st.booleans()),
        protected=draw(paths),
        data_root=draw(st.none() | absolute_paths.map(str)),
    )
    return BatchSettings(
        root=draw(st.none() | absolute_paths),
        project_id=draw(words),
        agent_id=draw(words),
        concurrency=draw(st.integers(1, 10**4)),
        approve=draw(st.sampled_from(UNATTENDED_MODES)),
        provider=None if model is None else model[0],
        model_id=None if model is None else model[1],
        max_turns=draw(st.none() | st.integers(1, 10**6)),
        timeout_s=draw(st.none() | st.floats(min_value=0.001, max_value=1e9, allow_nan=False)),
        sandbox=draw(st.none() | st.just(_plain(policy))),
    )


@settings(max_examples=200, deadline=None)
@given(batch_settings())
def test_20_2_a_batch_s_settings_reach_a_worker_process_whole(chosen: BatchSettings) -> None:
    line = json.dumps(settings_to_wire(chosen))
    assert "\n" not in line
    assert settings_from_wire(json.loads(line)) == chosen


def line_of(task: BatchTask) -> str:
    return json.dumps(task.to_json(), ensure_ascii=False)


@settings(max_examples=200, deadline=None)
@given(tasks())
def test_17_6_a_task_line_reads_back_as_the_same_task(task: BatchTask) -> None:
    obj: dict[str, Any] = json.loads(line_of(task))
    assert BatchTask.from_json(obj) == task


@settings(max_examples=200, deadline=None)
@given(results())
def test_17_6_a_result_line_reads_back_as_the_same_result(result: BatchResult) -> None:
    line = result.line()
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert BatchResult.from_line(line) == result
    assert list(json.loads(line)) == list(result.to_json())  # keys in the spec's order
    assert recorded_ids([line]) == ({result.id}, [])


@st.composite
def task_files(draw: st.DrawFn) -> tuple[list[BatchTask], list[str]]:
    ids = draw(st.lists(words, unique=True, max_size=6))
    written = [draw(tasks(task_id)) for task_id in ids]
    lines: list[str] = []
    for task in written:
        lines.extend(draw(st.lists(st.sampled_from(["", " ", "\t"]), max_size=2)))
        lines.append(line_of(task))
    lines.extend(draw(st.lists(st.sampled_from(["", "  "]), max_size=2)))
    return written, lines


@settings(max_examples=150, deadline=None)
@given(task_files())
def test_17_6_a_task_file_parses_to_its_tasks_in_order(
    file: tuple[list[BatchTask], list[str]],
) -> None:
    written, lines = file
    assert parse_tasks("\n".join(lines)) == written


bad_lines = st.sampled_from(
    [
        "{broken",
        "[1, 2]",
        '{"prompt": "no id"}',
        '{"id": "x"}',
        '{"id": "x", "prompt": "p", "promt": "typo"}',
        '{"id": "x", "prompt": "p", "max_turns": 0}',
        '{"id": "x", "prompt": "p", "approve": "always-ask"}',
        '{"id": "x", "prompt": "p", "workspace": "/a", "template": "/b"}',
    ]
)


@settings(max_examples=150, deadline=None)
@given(task_files(), bad_lines, st.data())
def test_17_6_a_bad_line_is_reported_at_its_own_line(
    file: tuple[list[BatchTask], list[str]], bad: str, data: st.DataObject
) -> None:
    _, lines = file
    at = data.draw(st.integers(0, len(lines)))
    lines.insert(at, bad)
    path = Path("/data/tasks.jsonl")
    with pytest.raises(TaskFileError) as caught:
        parse_tasks("\n".join(lines), path=path)
    assert caught.value.line == at + 1
    assert str(caught.value).startswith(f"{path}:{at + 1}: ")


@settings(max_examples=100, deadline=None)
@given(task_files(), st.data())
def test_17_6_a_repeated_id_is_reported_at_its_second_use(
    file: tuple[list[BatchTask], list[str]], data: st.DataObject
) -> None:
    written, lines = file
    if not written:
        return
    again = data.draw(st.sampled_from(written))
    first = lines.index(line_of(again)) + 1
    at = data.draw(st.integers(first, len(lines)))
    lines.insert(at, json.dumps({"id": again.id, "prompt": "once more"}))
    with pytest.raises(TaskFileError) as caught:
        parse_tasks("\n".join(lines), path=Path("t.jsonl"))
    assert caught.value.line == at + 1
    assert caught.value.reason == f"duplicate id {again.id!r} (first used on line {first})"


def test_17_6_lines_end_at_newlines_only() -> None:
    # What Hypothesis found: str.splitlines cut a task line at a U+0085 inside its prompt.
    text = '{"id": "a", "prompt": "one\u0085two\u2028three"}\r\n\r\n{"id": "b", "prompt": "x"}\r\n'
    assert [(t.id, t.prompt) for t in parse_tasks(text)] == [
        ("a", "one\u0085two\u2028three"),
        ("b", "x"),
    ]
