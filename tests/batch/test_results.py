"""B1.2 and B1.3: the result line, the results file, and what --resume reads from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from penguin.batch import BatchOptionError, BatchResult, ResultsFile, TokenTotals
from penguin.batch._results import recorded_ids, status_of_run

SPEC_KEYS = [
    "id",
    "status",
    "session_id",
    "trace_path",
    "workspace",
    "turns",
    "tokens",
    "tool_calls",
    "wall_s",
    "final_text",
    "error",
    "metadata",
]


def result(task_id: str = "t1", **fields: object) -> BatchResult:
    return BatchResult(id=task_id, status="completed", **fields)  # type: ignore[arg-type]


def test_b1_2_a_result_is_one_line_with_the_spec_keys_in_order() -> None:
    full = result(
        session_id="session-2026-01-02-03-04-05-0000abcd",
        trace_path="/t/x_001.jsonl",
        workspace="/w",
        turns=2,
        tokens=TokenTotals(input=150, output=30, cached=20),
        tool_calls=1,
        wall_s=1.23456,
        final_text="done ✓",
        metadata={"k": [1]},
    )
    line = full.line()
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    obj = json.loads(line)
    assert list(obj) == SPEC_KEYS
    assert obj["tokens"] == {"input": 150, "output": 30, "cached": 20}
    assert obj["wall_s"] == 1.235
    assert "✓" in line.decode()
    assert BatchResult.from_line(line) == attrs_evolve_wall(full, 1.235)


def attrs_evolve_wall(r: BatchResult, wall: float) -> BatchResult:
    import attrs

    return attrs.evolve(r, wall_s=wall)


def test_b1_2_statuses_come_from_how_the_run_ended() -> None:
    assert status_of_run("completed") == "completed"
    assert status_of_run("malformed") == "failed"
    for same in ("failed", "timeout", "auth", "max_turns", "aborted"):
        assert status_of_run(same) == same
    with pytest.raises(ValueError, match="unknown status"):
        BatchResult.from_json({"id": "a", "status": "exploded"})


def test_b1_3_recorded_ids_skip_lines_that_hold_no_result() -> None:
    ids, unreadable = recorded_ids(
        [result("a").line(), b'{"id": "b", "sta', b"", b"[1]", result("c").line()]
    )
    assert ids == {"a", "c"}
    assert unreadable == [2, 4]


async def test_b1_2_the_results_file_gets_one_write_per_line_and_never_an_id_twice(
    tmp_path: Path,
) -> None:
    path = tmp_path / "out" / "results.jsonl"
    path.parent.mkdir()  # issue 18.4: a missing folder is refused, not created
    with ResultsFile.open(path) as out:
        assert await out.append(result("a"))
        assert await out.append(result("b"))
        assert not await out.append(result("a", turns=9))
    assert [json.loads(x)["id"] for x in path.read_text().splitlines()] == ["a", "b"]
    assert os.stat(path).st_mode & 0o777 == 0o644


async def test_b1_3_an_existing_results_file_needs_resume(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_bytes(result("a").line() + b'{"id": "b", "status"')  # torn by a crash
    with pytest.raises(BatchOptionError, match="pass --resume"):
        ResultsFile.open(path)
    with ResultsFile.open(path, resume=True) as out:
        assert out.ids == {"a"}
        assert out.unreadable_lines == [2]
        await out.append(result("b"))
    last = path.read_text().splitlines()[-1]
    assert json.loads(last)["id"] == "b"  # on a line of its own, after the torn one
    (tmp_path / "empty.jsonl").write_text("\n")
    with ResultsFile.open(tmp_path / "empty.jsonl") as out:  # blank: nothing to resume
        assert out.ids == set()


# ---------------------------------------------------------------------------- issues 18.4, 21.4


def test_18_4_a_missing_folder_is_refused_not_created(tmp_path: Path) -> None:
    path = tmp_path / "nonexistent" / "dir" / "r.jsonl"
    with pytest.raises(BatchOptionError, match="nonexistent/dir does not exist") as raised:
        ResultsFile.open(path)
    assert raised.value.option == "output"
    assert not (tmp_path / "nonexistent").exists()


async def test_18_4_resume_runs_the_aborted_again_and_the_last_line_wins(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    aborted = BatchResult(id="b", status="aborted")
    lines = [result("a"), aborted, attrs.evolve(aborted, id="c")]
    lines.append(result("c"))  # c ran again and completed: its last line wins
    path.write_bytes(b"".join(r.line() for r in lines))
    with ResultsFile.open(path, resume=True) as out:
        assert out.ids == {"a", "c"}
        assert out.aborted == {"b"}
        assert await out.append(result("b"))
        assert not await out.append(result("b"))
    assert [json.loads(x)["id"] for x in path.read_text().splitlines()] == ["a", "b", "c", "c", "b"]


def test_b1_3_a_results_file_has_one_writer_until_it_is_closed(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    other = [
        sys.executable,
        "-c",
        f"from penguin.batch import ResultsFile; ResultsFile.open({str(path)!r}, resume=True)",
    ]
    with ResultsFile.open(path) as out:
        # another process (a second `penguin batch --resume`) is refused, naming this one
        done = subprocess.run(other, capture_output=True, text=True, check=False)
        assert done.returncode != 0
        assert (
            f"BatchOptionError: {path} is being written by another batch (pid {os.getpid()}):"
            " wait for it to end, or choose another -o file"
        ) in done.stderr
        with pytest.raises(BatchOptionError, match="already open for results in this process"):
            ResultsFile.open(path, resume=True)
        assert out.path == path
    assert path.read_bytes() == b""  # the refused opens wrote nothing
    done = subprocess.run(other, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr  # closed: free again
    dead = subprocess.Popen(
        [sys.executable, "-c", other[2] + "; import os; os.kill(os.getpid(), 9)"]
    )
    assert dead.wait() == -9
    with ResultsFile.open(path, resume=True) as out:  # a killed holder left nothing to clear
        assert out.ids == set()


def test_21_4_a_line_the_disk_refuses_is_not_half_written(tmp_path: Path) -> None:
    # RLIMIT_FSIZE in a child stands in for a full disk here (the CLI test uses a tmpfs):
    # the kernel cuts the write short, then refuses the rest with EFBIG.
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    path = tmp_path / "results.jsonl"
    done = subprocess.run(
        [sys.executable, str(script), str(path)], capture_output=True, text=True, check=False
    )
    assert done.stdout.splitlines() == [
        f"cannot write results to {path}: File too large",
        "ids ['a']",
    ], done.stderr
    assert path.read_bytes() == result("a").line()  # nothing of b's line


CHILD = """
import os, resource, signal, sys, trio
from penguin.batch import BatchResult, ResultsFile, ResultsWriteError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

async def main(path):
    with ResultsFile.open(path) as out:
        await out.append(BatchResult(id="a", status="completed"))
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path) + 20, hard))
        try:
            await out.append(BatchResult(id="b", status="completed", final_text="x" * 5000))
        except ResultsWriteError as exc:
            print(exc)
        print("ids", sorted(out.ids))

trio.run(main, sys.argv[1])
"""
