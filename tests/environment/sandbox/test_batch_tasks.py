"""A batch task line's ``"sandbox"`` (spec/sandbox.md X1.3), read and written."""

from __future__ import annotations

import pytest

from penguin.batch import BatchTask


def test_x1_3_a_task_line_carries_its_sandbox() -> None:
    line = {"id": "t1", "prompt": "p", "sandbox": {"mode": "read-only", "network": False}}
    task = BatchTask.from_json(line)
    assert task.sandbox == {"mode": "read-only", "network": False}
    assert task.to_json() == line
    assert BatchTask.from_json({"id": "t2", "prompt": "p"}).sandbox is None


@pytest.mark.parametrize(
    ("sandbox", "message"),
    [
        ("off", '"sandbox" must be a JSON object'),
        ({"mode": "full"}, '"sandbox.mode" must be one of off, read-only, workspace-write'),
        ({"network": "no"}, '"sandbox.network" must be true or false'),
        ({"writable_roots": []}, '"sandbox" has unknown key'),
    ],
)
def test_x1_3_a_bad_task_sandbox_says_what_is_wrong(sandbox: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BatchTask.from_json({"id": "t", "prompt": "p", "sandbox": sandbox})
