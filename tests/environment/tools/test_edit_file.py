"""edit_file (reference 3.6), driven through a real ToolContext on real files."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest
import trio

from penguin.environment.tools._files import temp_path_for, write_atomically
from penguin.environment.tools.edit_file import EditFileTool, edit_file_blocking

from .conftest import Runner


def numbered(count: int, marks: dict[int, str] | None = None) -> str:
    """Lines ``l01``.. with ``marks[n]`` appended to line n (1-based)."""
    marks = marks or {}
    return "".join(f"l{n:02d}{marks.get(n, '')}\n" for n in range(1, count + 1))


def snapshot(path: Path) -> tuple[bytes, int, int]:
    info = path.stat()
    return path.read_bytes(), info.st_mtime_ns, info.st_ino


def test_3_0_1_edit_file_is_registered() -> None:
    from penguin.environment.tools.registry import BUILTIN_TOOLS

    assert BUILTIN_TOOLS["edit_file"] is EditFileTool


# --- 3.6.1 errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "text"),
    [
        ({}, 'Missing required argument "file_path" for edit_file.'),
        ({"file_path": ""}, 'Missing required argument "file_path" for edit_file.'),
        ({"file_path": 3, "old_string": 1}, 'Missing required argument "file_path" for edit_file.'),
        ({"file_path": "a"}, 'Missing required argument "old_string" for edit_file.'),
        (
            {"file_path": "a", "old_string": None, "new_string": 5},
            'Missing required argument "old_string" for edit_file.',
        ),
        (
            {"file_path": "a", "old_string": "x"},
            'Missing required argument "new_string" for edit_file.',
        ),
        (
            {"file_path": "a", "old_string": "x", "new_string": ["y"]},
            'Missing required argument "new_string" for edit_file.',
        ),
        (
            {"file_path": "a", "old_string": "", "new_string": ""},
            "old_string must not be empty — edit_file replaces existing text. To create a file "
            "or rewrite it wholesale, use write_file.",
        ),
        (
            {"file_path": "a", "old_string": "same", "new_string": "same"},
            "old_string and new_string are identical — nothing to change. Make new_string the "
            "desired replacement text.",
        ),
    ],
)
async def test_3_6_1_argument_errors_in_order(
    edit_file: Runner, args: dict[str, object], text: str
) -> None:
    run = await edit_file(args)
    assert run.deltas == (text,)
    assert run.stop == "failed"


async def test_3_1_3_edit_messages_print_the_configured_name(edit_file: Runner) -> None:
    run = await edit_file({"file_path": "a"}, name="patch")
    assert run.text == 'Missing required argument "old_string" for patch.'


async def test_3_6_1_directory(edit_file: Runner, workspace: Path) -> None:
    (workspace / "d").mkdir()
    run = await edit_file({"file_path": "d", "old_string": "a", "new_string": "b"})
    assert run.text == 'Cannot edit "d": it is a directory.'
    assert run.stop == "failed"


async def test_3_6_1_missing_file_with_hint(edit_file: Runner, workspace: Path) -> None:
    (workspace / "notes.md").write_text("")
    run = await edit_file({"file_path": "note.md", "old_string": "a", "new_string": "b"})
    assert run.text == (
        'File not found: "note.md". edit_file only edits existing files — check the path '
        "(absolute paths are supported), or use write_file to create it. The directory "
        f'"{workspace}" exists but has no entry "note.md". It contains: notes.md.'
    )
    assert run.stop == "failed"
    assert sorted(os.listdir(workspace)) == ["notes.md"]


async def test_3_6_1_other_read_error(edit_file: Runner, workspace: Path) -> None:
    (workspace / "loop").symlink_to("loop")
    run = await edit_file({"file_path": "loop", "old_string": "a", "new_string": "b"})
    assert run.text == (
        f"Failed to read \"loop\": ELOOP: Too many levels of symbolic links, '{workspace}/loop'"
    )
    assert run.stop == "failed"


async def test_3_6_1_non_regular_file_is_a_read_error(edit_file: Runner, workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    with trio.fail_after(5):
        run = await edit_file({"file_path": "pipe", "old_string": "a", "new_string": "b"})
    assert run.text == 'Failed to read "pipe": it is not a regular file (a FIFO).'
    assert run.stop == "failed"


async def test_3_6_1_write_error_leaves_file_and_directory_clean(
    edit_file: Runner, workspace: Path
) -> None:
    # The temp name (".{name}.tmp-{pid}-xxxxxx") exceeds NAME_MAX while the file's own fits.
    name = "n" * 250
    target = workspace / name
    target.write_text("before\n")
    before = snapshot(target)
    run = await edit_file({"file_path": name, "old_string": "before", "new_string": "after"})
    assert re.fullmatch(
        rf"Failed to write \"{name}\": ENAMETOOLONG: File name too long, "
        rf"'{re.escape(str(workspace))}/\.{name}\.tmp-{os.getpid()}-[0-9a-z]{{6}}'",
        run.text,
    )
    assert run.stop == "failed"
    assert snapshot(target) == before
    assert os.listdir(workspace) == [name]


async def test_3_6_1_nul_in_the_path_is_a_read_error(edit_file: Runner) -> None:
    run = await edit_file({"file_path": "a\0b", "old_string": "a", "new_string": "b"})
    assert run.text == 'Failed to read "a\0b": embedded null byte'
    assert run.stop == "failed"


# --- 3.6.2 matching -----------------------------------------------------------------------


async def test_3_6_2_not_found(edit_file: Runner, workspace: Path) -> None:
    target = workspace / "a.txt"
    target.write_text("hello world\n")
    before = snapshot(target)
    run = await edit_file({"file_path": "a.txt", "old_string": "hello  world", "new_string": "x"})
    assert run.text == (
        'old_string not found in "a.txt". Make sure it matches the file content exactly, '
        "including whitespace and indentation."
    )
    assert run.stop == "failed"
    assert snapshot(target) == before


async def test_3_6_2_not_found_in_crlf_file_adds_the_note(
    edit_file: Runner, workspace: Path
) -> None:
    (workspace / "c.txt").write_bytes(b"one\r\ntwo\r\n")
    run = await edit_file({"file_path": "c.txt", "old_string": "one\ntwo", "new_string": "x"})
    assert run.text == (
        'old_string not found in "c.txt". Make sure it matches the file content exactly, '
        "including whitespace and indentation. Note: the file uses CRLF (\\r\\n) line endings "
        "— a multi-line old_string must include the \\r characters."
    )
    assert "\r" not in run.text


async def test_3_6_2_multiple_occurrences_need_replace_all(
    edit_file: Runner, workspace: Path
) -> None:
    target = workspace / "a.txt"
    target.write_text("x = 1\nx = 1\nx = 1\n")
    before = snapshot(target)
    for flag in (None, False, "true", 1, [True]):
        args: dict[str, object] = {
            "file_path": "a.txt",
            "old_string": "x = 1",
            "new_string": "x = 2",
        }
        if flag is not None:
            args["replace_all"] = flag
        run = await edit_file(args)
        assert run.text == (
            'old_string occurs 3 times in "a.txt". Add surrounding context to make it unique, '
            "or set replace_all to true to replace every occurrence."
        )
        assert run.stop == "failed"
    assert snapshot(target) == before


async def test_3_6_2_occurrences_do_not_overlap(edit_file: Runner, workspace: Path) -> None:
    target = workspace / "a.txt"
    target.write_text("aaa\n")
    run = await edit_file({"file_path": "a.txt", "old_string": "aa", "new_string": "b"})
    assert run.text.splitlines()[0] == 'Replaced 1 occurrence in "a.txt".'
    assert target.read_text() == "ba\n"
    target.write_text("aaaa\n")
    run = await edit_file(
        {"file_path": "a.txt", "old_string": "aa", "new_string": "b", "replace_all": True}
    )
    assert run.text.splitlines()[0] == 'Replaced 2 occurrences in "a.txt".'
    assert target.read_text() == "bb\n"


async def test_3_6_2_matching_is_exact(edit_file: Runner, workspace: Path) -> None:
    target = workspace / "a.txt"
    target.write_text("Value\n")
    run = await edit_file({"file_path": "a.txt", "old_string": "value", "new_string": "v"})
    assert run.stop == "failed"
    assert target.read_text() == "Value\n"


async def test_3_6_2_invalid_utf8_outside_the_edit_survives(
    edit_file: Runner, workspace: Path
) -> None:
    target = workspace / "latin1.txt"
    target.write_bytes(b"caf\xe9\nkeep\n")
    run = await edit_file({"file_path": "latin1.txt", "old_string": "keep", "new_string": "kept"})
    assert run.stop == "completed"
    assert target.read_bytes() == b"caf\xe9\nkept\n"
    assert (
        run.text
        == 'Replaced 1 occurrence in "latin1.txt".\n@@ -1,2 +1,2 @@\n caf\ufffd\n-keep\n+kept'
    )


# --- 3.6.3 atomic write -------------------------------------------------------------------


def test_3_6_3_temp_name() -> None:
    name = temp_path_for("/some/dir/name.txt")
    assert re.fullmatch(rf"/some/dir/\.name\.txt\.tmp-{os.getpid()}-[0-9a-z]{{6}}", name)


@pytest.mark.parametrize("mode", [0o640, 0o755, 0o600, 0o4711])
async def test_3_6_3_permission_bits_are_preserved(
    edit_file: Runner, workspace: Path, mode: int
) -> None:
    target = workspace / "script.sh"
    target.write_text("echo hi\n")
    target.chmod(mode)
    run = await edit_file({"file_path": "script.sh", "old_string": "hi", "new_string": "ho"})
    assert run.stop == "completed"
    assert stat.S_IMODE(target.stat().st_mode) == mode
    assert target.read_text() == "echo ho\n"


async def test_3_6_3_the_file_is_replaced_not_rewritten(edit_file: Runner, workspace: Path) -> None:
    target = workspace / "a.txt"
    target.write_text("old\n")
    inode = target.stat().st_ino
    await edit_file({"file_path": "a.txt", "old_string": "old", "new_string": "new"})
    assert target.stat().st_ino != inode
    assert os.listdir(workspace) == ["a.txt"]


async def test_3_6_3_symlink_is_edited_through(
    edit_file: Runner, workspace: Path, tmp_path: Path
) -> None:
    real = tmp_path / "real.txt"
    real.write_text("one\n")
    (workspace / "link.txt").symlink_to(real)
    run = await edit_file({"file_path": "link.txt", "old_string": "one", "new_string": "two"})
    assert run.stop == "completed"
    assert (workspace / "link.txt").is_symlink()
    assert real.read_text() == "two\n"


def test_3_6_3_temp_removed_when_rename_fails(tmp_path: Path) -> None:
    target = tmp_path / "dir"
    target.mkdir()
    (target / "inside").write_text("")
    with pytest.raises(IsADirectoryError):
        write_atomically(str(target), b"data", mode=None)
    assert os.listdir(tmp_path) == ["dir"]


def test_3_6_3_temp_removed_when_commit_is_abandoned(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("keep\n")

    class Abandon(Exception):
        pass

    def abandon() -> None:
        raise Abandon

    with pytest.raises(Abandon):
        edit_file_blocking(
            workspace=str(tmp_path),
            file_path="a.txt",
            old="keep",
            new="lose",
            replace_all=False,
            budget=16000,
            before_commit=abandon,
        )
    assert target.read_text() == "keep\n"
    assert os.listdir(tmp_path) == ["a.txt"]


async def test_3_6_3_cancelled_edit_leaves_the_file(edit_file: Runner, workspace: Path) -> None:
    target = workspace / "a.txt"
    target.write_text("keep\n")
    with trio.CancelScope() as scope:
        scope.cancel()
        await edit_file({"file_path": "a.txt", "old_string": "keep", "new_string": "lose"})
    assert scope.cancelled_caught
    assert target.read_text() == "keep\n"


# --- 3.6.4 output -------------------------------------------------------------------------


async def test_3_6_4_single_replacement_output(edit_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text(numbered(10, {5: "X"}))
    run = await edit_file({"file_path": "a.txt", "old_string": "X", "new_string": "Y"})
    assert run.deltas == (
        'Replaced 1 occurrence in "a.txt".\n'
        "@@ -2,7 +2,7 @@\n l02\n l03\n l04\n-l05X\n+l05Y\n l06\n l07\n l08",
    )
    assert run.stop == "completed"


async def test_3_6_4_at_most_five_hunks_then_more_line(edit_file: Runner, workspace: Path) -> None:
    marks = dict.fromkeys((1, 11, 21, 31, 41, 51, 61), "X")
    (workspace / "a.txt").write_text(numbered(70, marks))
    run = await edit_file(
        {"file_path": "a.txt", "old_string": "X", "new_string": "Y", "replace_all": True}
    )
    lines = run.text.split("\n")
    assert lines[0] == 'Replaced 7 occurrences in "a.txt".'
    assert sum(line.startswith("@@") for line in lines) == 5
    assert lines[-1] == "…and 2 more replacements"


async def test_3_6_4_one_more_replacement_is_singular(edit_file: Runner, workspace: Path) -> None:
    marks = dict.fromkeys((1, 11, 21, 31, 41, 51), "X")
    (workspace / "a.txt").write_text(numbered(60, marks))
    run = await edit_file(
        {"file_path": "a.txt", "old_string": "X", "new_string": "Y", "replace_all": True}
    )
    assert run.text.split("\n")[-1] == "…and 1 more replacement"


async def test_3_6_4_budget_stops_hunks(edit_file: Runner, workspace: Path) -> None:
    marks = dict.fromkeys((1, 11, 21), "X")
    (workspace / "a.txt").write_text(numbered(30, marks))
    first = 'Replaced 3 occurrences in "a.txt".'
    hunk = "@@ -1,4 +1,4 @@\n-l01X\n+l01Y\n l02\n l03\n l04"
    exact = len(first) + 1 + len(hunk) + 120
    run = await edit_file(
        {"file_path": "a.txt", "old_string": "X", "new_string": "Y", "replace_all": True},
        max_output_length=exact,
    )
    assert run.text == f"{first}\n{hunk}\n…and 2 more replacements"
    run = await edit_file(
        {"file_path": "a.txt", "old_string": "Y", "new_string": "X", "replace_all": True},
        max_output_length=exact - 1,
    )
    assert run.text == f"{first}\n…and 3 more replacements"


async def test_3_6_4_disabled_limit_means_16000(edit_file: Runner, workspace: Path) -> None:
    long_line = "z" * 1990
    marks = dict.fromkeys((1, 11, 21, 31, 41), "X" + long_line)
    (workspace / "a.txt").write_text(numbered(50, marks))
    run = await edit_file(
        {"file_path": "a.txt", "old_string": "X", "new_string": "Y", "replace_all": True},
        max_output_length=0,
    )
    # Each hunk holds two ~2000-char lines (~4,030 chars): three fit in 16000 - 120.
    assert sum(line.startswith("@@") for line in run.text.split("\n")) == 3
    assert run.text.endswith("…and 2 more replacements")


# --- 3.6.5 hunks --------------------------------------------------------------------------


async def test_3_6_5_hunks_merge_within_three_lines(edit_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text(numbered(15, {3: "X", 9: "X"}))
    run = await edit_file(
        {"file_path": "a.txt", "old_string": "X", "new_string": "Y", "replace_all": True}
    )
    old = [f"-l{n:02d}{'X' if n in (3, 9) else ''}" for n in range(3, 10)]
    new = [f"+l{n:02d}{'Y' if n in (3, 9) else ''}" for n in range(3, 10)]
    assert run.text == "\n".join(
        [
            'Replaced 2 occurrences in "a.txt".',
            "@@ -1,12 +1,12 @@",
            " l01",
            " l02",
            *old,
            *new,
            " l10",
            " l11",
            " l12",
        ]
    )


async def test_3_6_5_hunks_split_beyond_three_lines(edit_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text(numbered(15, {3: "X", 10: "X"}))
    run = await edit_file(
        {"file_path": "a.txt", "old_string": "X", "new_string": "Y", "replace_all": True}
    )
    assert run.text == "\n".join(
        [
            'Replaced 2 occurrences in "a.txt".',
            "@@ -1,6 +1,6 @@",
            " l01",
            " l02",
            "-l03X",
            "+l03Y",
            " l04",
            " l05",
            " l06",
            "@@ -7,7 +7,7 @@",
            " l07",
            " l08",
            " l09",
            "-l10X",
            "+l10Y",
            " l11",
            " l12",
            " l13",
        ]
    )


async def test_3_6_5_new_start_shifts_by_earlier_hunks(edit_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text(numbered(20, {3: "X", 12: "X"}))
    run = await edit_file(
        {
            "file_path": "a.txt",
            "old_string": "X\n",
            "new_string": "\nadded\nmore\n",
            "replace_all": True,
        }
    )
    headers = [line for line in run.text.split("\n") if line.startswith("@@")]
    assert headers == ["@@ -1,6 +1,8 @@", "@@ -9,7 +11,9 @@"]


async def test_3_6_5_common_lines_become_context(edit_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\nb\nc\n")
    run = await edit_file({"file_path": "a.txt", "old_string": "b\n", "new_string": "b\nB\n"})
    assert run.text == 'Replaced 1 occurrence in "a.txt".\n@@ -1,3 +1,4 @@\n a\n b\n+B\n c'


async def test_3_6_5_empty_side_prints_start_minus_one(edit_file: Runner, workspace: Path) -> None:
    target = workspace / "a.txt"
    target.write_text("only\n")
    run = await edit_file({"file_path": "a.txt", "old_string": "only\n", "new_string": ""})
    assert run.text == 'Replaced 1 occurrence in "a.txt".\n@@ -1,1 +0,0 @@\n-only'
    assert target.read_bytes() == b""


async def test_3_6_5_joined_lines_are_shown_as_the_file_has_them(
    edit_file: Runner, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("a\nb\nc\n")
    run = await edit_file({"file_path": "a.txt", "old_string": "b\n", "new_string": "B "})
    assert run.text == 'Replaced 1 occurrence in "a.txt".\n@@ -1,3 +1,2 @@\n a\n-b\n-c\n+B c'


async def test_3_6_5_crlf_stripped_and_long_lines_cut(edit_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_bytes(b"head\r\n" + b"x" * 2500 + b"X\r\ntail\r\n")
    run = await edit_file({"file_path": "a.txt", "old_string": "X", "new_string": "Y"})
    cut = "x" * 2000 + "… [line truncated]"
    assert run.text == (
        f'Replaced 1 occurrence in "a.txt".\n@@ -1,3 +1,3 @@\n head\n-{cut}\n+{cut}\n tail'
    )
    assert "---" not in run.text
    assert "+++" not in run.text


async def test_secret_stores_are_never_edited(edit_file: Runner, workspace: Path) -> None:
    store = workspace / ".Vault.toml"
    store.write_text('api_key = "sk-secret"\nother = 1\n')
    run = await edit_file(
        {"file_path": ".Vault.toml", "old_string": "other = 1", "new_string": "other = 2"}
    )
    assert run.text == (
        'Refusing to edit ".Vault.toml": .vault.toml holds the user\'s secrets and must never '
        "enter the conversation."
    )
    assert run.stop == "failed"
    assert store.read_text() == 'api_key = "sk-secret"\nother = 1\n'
