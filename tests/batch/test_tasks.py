"""B1.1: the task file, read and validated whole, every complaint naming its line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from penguin import batch
from penguin.batch import BatchTask, TaskFileError, load_tasks, parse_tasks


def lines(*objs: object) -> str:
    return "".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objs)


def test_b1_1_a_line_with_every_field_reads_into_a_task(tmp_path: Path) -> None:
    (tmp_path / "tpl").mkdir()
    text = lines(
        {
            "id": "t1",
            "prompt": "fix it",
            "template": "tpl",
            "approve": "Deny-All",
            "provider": "local",
            "model_id": "m",
            "max_turns": 3,
            "timeout_s": 2,
            "metadata": {"split": "dev", "n": 1},
        },
        {"id": "t2", "prompt": "and this", "workspace": str(tmp_path)},
    )
    first, second = parse_tasks(text, path=tmp_path / "tasks.jsonl")
    assert first == BatchTask(
        id="t1",
        prompt="fix it",
        template=tmp_path / "tpl",
        approve="deny-all",
        provider="local",
        model_id="m",
        max_turns=3,
        timeout_s=2.0,
        metadata={"split": "dev", "n": 1},
    )
    assert second.workspace == tmp_path
    assert second.template is None
    assert second.approve is None
    assert second.metadata == {}
    assert BatchTask.from_json(first.to_json()) == first


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{not json", "not valid JSON"),
        ('["a list"]', 'a task is a JSON object, got ["a list"]'),
        ({"prompt": "no id"}, '"id" must be a non-empty string, got nothing'),
        ({"id": 7, "prompt": "x"}, '"id" must be a non-empty string, got 7'),
        ({"id": "a", "prompt": ""}, '"prompt" must be a non-empty string'),
        ({"id": "a", "prompt": "x", "promt": "y"}, "unknown field 'promt'"),
        (
            {"id": "a", "prompt": "x", "workspace": "/w", "template": "/t"},
            'give "workspace" or "template", not both',
        ),
        ({"id": "a", "prompt": "x", "provider": "p"}, 'give "provider" and "model_id" together'),
        ({"id": "a", "prompt": "x", "max_turns": 0}, '"max_turns" must be a whole number >= 1'),
        ({"id": "a", "prompt": "x", "max_turns": True}, '"max_turns" must be a whole number'),
        ({"id": "a", "prompt": "x", "timeout_s": -1}, '"timeout_s" must be a number of seconds'),
        ({"id": "a", "prompt": "x", "metadata": [1]}, '"metadata" must be a JSON object'),
        ({"id": "a", "prompt": "x", "approve": "sometimes"}, 'Invalid approval mode "sometimes"'),
        ({"id": "a", "prompt": "x", "approve": "always-ask"}, '"approve": always-ask asks'),
        ({"id": "a", "prompt": "x", "approve": "read-only"}, '"approve": read-only asks'),
    ],
)
def test_b1_1_a_bad_line_is_named_with_what_is_wrong(
    tmp_path: Path, line: object, reason: str
) -> None:
    path = tmp_path / "tasks.jsonl"
    text = lines({"id": "ok", "prompt": "fine"}, "", line)
    with pytest.raises(TaskFileError) as caught:
        parse_tasks(text, path=path)
    assert caught.value.line == 3  # blank lines count
    assert caught.value.path == path
    assert str(caught.value).startswith(f"{path}:3: ")
    assert reason in caught.value.reason
    assert isinstance(caught.value, ValueError)


def test_b1_1_a_duplicate_id_names_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    text = lines({"id": "a", "prompt": "x"}, {"id": "b", "prompt": "y"}, {"id": "a", "prompt": "z"})
    with pytest.raises(TaskFileError, match=r":3: duplicate id 'a' \(first used on line 1\)"):
        parse_tasks(text, path=path)


def test_b1_1_relative_paths_are_read_from_the_task_file_directory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "repos" / "app").mkdir(parents=True)
    path = data / "tasks.jsonl"
    path.write_text(lines({"id": "a", "prompt": "x", "template": "repos/app"}))
    (task,) = load_tasks(path)
    assert task.template == data / "repos" / "app"


def test_b1_1_a_missing_template_or_workspace_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    (tmp_path / "file").write_text("")
    path.write_text(
        lines({"id": "a", "prompt": "x"}, {"id": "b", "prompt": "y", "template": "nope"})
    )
    with pytest.raises(TaskFileError) as caught:
        load_tasks(path)
    assert caught.value.line == 2
    assert caught.value.reason == f'template "{tmp_path / "nope"}" does not exist'
    path.write_text(lines({"id": "a", "prompt": "x", "workspace": "file"}))
    with pytest.raises(TaskFileError, match=r":1: workspace .* is not a directory"):
        load_tasks(path)
    assert load_tasks(path, check_paths=False)[0].workspace == tmp_path / "file"


def test_b1_1_bytes_that_are_not_utf_8_name_their_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(b'{"id": "a", "prompt": "x"}\n\n{"id": "b", "prompt": "caf\xe9"}\n')
    with pytest.raises(TaskFileError) as caught:
        load_tasks(path)
    assert str(caught.value) == f"{path}:3: not valid UTF-8 (byte 0xe9 at column 27)"
    assert isinstance(caught.value, ValueError)  # what a caller of load_tasks catches


def test_b1_1_a_byte_order_mark_at_the_start_is_allowed(tmp_path: Path) -> None:
    # RFC 8259 lets a parser ignore it; editors on Windows write one.
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + lines({"id": "a", "prompt": "x"}).encode())
    assert [task.id for task in load_tasks(path)] == ["a"]
    path.write_bytes(b"\xef\xbb\xbf\xff\n")
    with pytest.raises(TaskFileError, match=r":1: not valid UTF-8 \(byte 0xff at column 4\)$"):
        load_tasks(path)


def test_b1_1_tasks_from_python_are_checked_too() -> None:
    tasks = [BatchTask(id="a", prompt="x"), BatchTask(id="a", prompt="y")]
    with pytest.raises(TaskFileError, match=r"^task 2: duplicate id 'a' \(first used on task 1\)"):
        batch._tasks.check_unique_ids(tasks)


@pytest.mark.parametrize("mode", ["always-ask", "read-only", " Read-Only "])
def test_b2_1_the_asking_modes_are_refused(mode: str) -> None:
    with pytest.raises(batch.BatchOptionError, match="nobody is there to answer"):
        batch.unattended_mode(mode)
    assert batch.unattended_mode(" Allow-All ") == "allow-all"
    assert batch.unattended_mode("deny-all") == "deny-all"
