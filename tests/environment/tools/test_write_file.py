"""write_file (reference 3.7), driven through a real ToolContext on real files."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import trio

from penguin.environment.tools.write_file import WriteFileTool

from .conftest import Runner


def test_3_0_1_write_file_is_registered() -> None:
    from penguin.environment.tools.registry import BUILTIN_TOOLS

    assert BUILTIN_TOOLS["write_file"] is WriteFileTool


# --- 3.7.1 errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "text"),
    [
        ({}, 'Missing required argument "file_path" for write_file.'),
        (
            {"file_path": "", "content": "x"},
            'Missing required argument "file_path" for write_file.',
        ),
        ({"file_path": 7, "content": "x"}, 'Missing required argument "file_path" for write_file.'),
        ({"file_path": "a.txt"}, 'Missing required argument "content" for write_file.'),
        (
            {"file_path": "a.txt", "content": None},
            'Missing required argument "content" for write_file.',
        ),
        (
            {"file_path": "a.txt", "content": 5},
            'Missing required argument "content" for write_file.',
        ),
    ],
)
async def test_3_7_1_argument_errors(
    write_file: Runner, workspace: Path, args: dict[str, object], text: str
) -> None:
    run = await write_file(args)
    assert run.deltas == (text,)
    assert run.stop == "failed"
    assert os.listdir(workspace) == []


async def test_3_1_3_write_messages_print_the_configured_name(write_file: Runner) -> None:
    run = await write_file({"file_path": "a"}, name="put")
    assert run.text == 'Missing required argument "content" for put.'


async def test_3_7_1_directory(write_file: Runner, workspace: Path) -> None:
    (workspace / "d").mkdir()
    run = await write_file({"file_path": "d", "content": "x"})
    assert run.text == 'Cannot write "d": it is a directory.'
    assert run.stop == "failed"


async def test_3_7_1_parent_component_is_a_file(write_file: Runner, workspace: Path) -> None:
    (workspace / "plain.txt").write_text("x")
    run = await write_file({"file_path": "plain.txt/sub/new.txt", "content": "y"})
    assert run.text == (
        'Failed to write "plain.txt/sub/new.txt": ENOTDIR: Not a directory, '
        f"'{workspace}/plain.txt'"
    )
    assert run.stop == "failed"
    assert os.listdir(workspace) == ["plain.txt"]


async def test_3_7_1_other_write_error(write_file: Runner, workspace: Path) -> None:
    run = await write_file({"file_path": "n" * 300, "content": "y"})
    assert run.text.startswith(f'Failed to write "{"n" * 300}": ENAMETOOLONG: File name too long')
    assert os.listdir(workspace) == []


async def test_3_7_1_non_regular_target_is_refused(write_file: Runner, workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    with trio.fail_after(5):
        run = await write_file({"file_path": "pipe", "content": "x"})
    assert run.text == 'Failed to write "pipe": it is not a regular file (a FIFO).'
    assert stat.S_ISFIFO((workspace / "pipe").stat().st_mode)


async def test_3_7_1_nul_in_the_path_is_a_write_error(write_file: Runner) -> None:
    run = await write_file({"file_path": "a\0b", "content": ""})
    assert run.text == 'Failed to write "a\0b": embedded null byte'
    assert run.stop == "failed"


# --- 3.7.2 parents and the atomic write ---------------------------------------------------


async def test_3_7_2_creates_missing_parents(write_file: Runner, workspace: Path) -> None:
    run = await write_file({"file_path": "a/b/c/new.txt", "content": "hi\n"})
    assert run.deltas == ('Created "a/b/c/new.txt" (1 line, 3 bytes).',)
    assert run.stop == "completed"
    assert (workspace / "a/b/c/new.txt").read_text() == "hi\n"
    assert os.listdir(workspace / "a/b/c") == ["new.txt"]


async def test_3_7_2_absolute_path(write_file: Runner, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "x.txt"
    run = await write_file({"file_path": str(target), "content": ""})
    assert run.text == f'Created "{target}" (0 lines, 0 bytes).'
    assert target.read_bytes() == b""


@pytest.mark.parametrize("mode", [0o640, 0o755, 0o400])
async def test_3_7_2_overwrite_keeps_the_mode(
    write_file: Runner, workspace: Path, mode: int
) -> None:
    target = workspace / "a.sh"
    target.write_text("old\n")
    target.chmod(mode)
    run = await write_file({"file_path": "a.sh", "content": "new\n"})
    assert run.stop == "completed"
    assert stat.S_IMODE(target.stat().st_mode) == mode
    assert target.read_text() == "new\n"
    assert os.listdir(workspace) == ["a.sh"]


async def test_3_7_2_new_file_gets_the_default_mode(write_file: Runner, workspace: Path) -> None:
    umask = os.umask(0o022)
    try:
        await write_file({"file_path": "n.txt", "content": "x"})
    finally:
        os.umask(umask)
    assert stat.S_IMODE((workspace / "n.txt").stat().st_mode) == 0o644


async def test_3_7_2_symlink_is_written_through(
    write_file: Runner, workspace: Path, tmp_path: Path
) -> None:
    real = tmp_path / "real.txt"
    real.write_text("a\n")
    (workspace / "link.txt").symlink_to(real)
    run = await write_file({"file_path": "link.txt", "content": "b\n"})
    assert run.text.startswith('Overwrote "link.txt" (1 line, 2 bytes).')
    assert (workspace / "link.txt").is_symlink()
    assert real.read_text() == "b\n"


async def test_3_7_2_cancelled_write_changes_nothing(write_file: Runner, workspace: Path) -> None:
    with trio.CancelScope() as scope:
        scope.cancel()
        await write_file({"file_path": "x.txt", "content": "x"})
    assert scope.cancelled_caught
    assert os.listdir(workspace) == []


# --- 3.7.3 first line ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "counts"),
    [
        ("", "0 lines, 0 bytes"),
        ("a", "1 line, 1 byte"),
        ("a\n", "1 line, 2 bytes"),
        ("a\nb", "2 lines, 3 bytes"),
        ("\n", "1 line, 1 byte"),
        ("\n\n", "2 lines, 2 bytes"),
        ("é", "1 line, 2 bytes"),
        ("😀\n", "1 line, 5 bytes"),
        ("a\r\nb\r\n", "2 lines, 6 bytes"),
        ("x\ud800", "1 line, 4 bytes"),
    ],
)
async def test_3_7_3_created_line_counts(
    write_file: Runner, workspace: Path, content: str, counts: str
) -> None:
    run = await write_file({"file_path": "f.txt", "content": content})
    assert run.deltas == (f'Created "f.txt" ({counts}).',)
    assert len((workspace / "f.txt").read_bytes()) == int(counts.split(", ")[1].split()[0])


async def test_3_7_3_overwrote(write_file: Runner, workspace: Path) -> None:
    (workspace / "f.txt").write_text("a\n")
    run = await write_file({"file_path": "f.txt", "content": "a\nb\n"})
    assert run.text.split("\n")[0] == 'Overwrote "f.txt" (2 lines, 4 bytes).'


# --- 3.7.4 overwrite diff -----------------------------------------------------------------


async def test_3_7_4_content_unchanged(write_file: Runner, workspace: Path) -> None:
    (workspace / "f.txt").write_text("same\n")
    run = await write_file({"file_path": "f.txt", "content": "same\n"})
    assert run.deltas == ('Overwrote "f.txt" (1 line, 5 bytes).\n(content unchanged)',)


async def test_3_7_4_lossy_equal_text_shows_no_diff(write_file: Runner, workspace: Path) -> None:
    (workspace / "f.txt").write_bytes(b"caf\xe9\n")
    run = await write_file({"file_path": "f.txt", "content": "caf\ufffd\n"})
    assert run.text == 'Overwrote "f.txt" (1 line, 7 bytes).'
    assert (workspace / "f.txt").read_bytes() == "caf\ufffd\n".encode()


async def test_3_7_4_created_files_never_carry_a_diff(write_file: Runner) -> None:
    run = await write_file({"file_path": "f.txt", "content": "a\nb\n"})
    assert run.text == 'Created "f.txt" (2 lines, 4 bytes).'


async def test_3_7_4_line_diff_with_context(write_file: Runner, workspace: Path) -> None:
    old = "".join(f"line {n}\n" for n in range(1, 11))
    (workspace / "f.txt").write_text(old)
    new = old.replace("line 5\n", "line five\nline 5b\n")
    run = await write_file({"file_path": "f.txt", "content": new})
    assert run.text == "\n".join(
        [
            'Overwrote "f.txt" (11 lines, 82 bytes).',
            "@@ -2,7 +2,8 @@",
            " line 2",
            " line 3",
            " line 4",
            "-line 5",
            "+line five",
            "+line 5b",
            " line 6",
            " line 7",
            " line 8",
        ]
    )


async def test_3_7_4_changes_six_lines_apart_share_a_hunk(
    write_file: Runner, workspace: Path
) -> None:
    old = [f"{n}\n" for n in range(1, 21)]
    (workspace / "f.txt").write_text("".join(old))
    new = list(old)
    new[2], new[9] = "three\n", "ten\n"  # lines 3 and 10: six unchanged lines between
    run = await write_file({"file_path": "f.txt", "content": "".join(new)})
    assert run.text.split("\n")[1:] == [
        "@@ -1,13 +1,13 @@",
        " 1",
        " 2",
        "-3",
        "+three",
        *[f" {n}" for n in range(4, 10)],
        "-10",
        "+ten",
        " 11",
        " 12",
        " 13",
    ]


async def test_3_7_4_changes_seven_lines_apart_split(write_file: Runner, workspace: Path) -> None:
    old = [f"{n}\n" for n in range(1, 21)]
    (workspace / "f.txt").write_text("".join(old))
    new = list(old)
    new[2], new[10] = "three\n", "eleven\n"
    run = await write_file({"file_path": "f.txt", "content": "".join(new)})
    headers = [line for line in run.text.split("\n") if line.startswith("@@")]
    assert headers == ["@@ -1,6 +1,6 @@", "@@ -8,7 +8,7 @@"]


async def test_3_7_4_overwriting_an_empty_file(write_file: Runner, workspace: Path) -> None:
    (workspace / "f.txt").write_text("")
    run = await write_file({"file_path": "f.txt", "content": "x"})
    assert run.text == 'Overwrote "f.txt" (1 line, 1 byte).\n@@ -0,0 +1,1 @@\n+x'


async def test_3_7_4_emptying_a_file(write_file: Runner, workspace: Path) -> None:
    (workspace / "f.txt").write_text("a\nb\n")
    run = await write_file({"file_path": "f.txt", "content": ""})
    assert run.text == 'Overwrote "f.txt" (0 lines, 0 bytes).\n@@ -1,2 +0,0 @@\n-a\n-b'


async def test_3_7_4_final_newline_change_shows(write_file: Runner, workspace: Path) -> None:
    (workspace / "f.txt").write_text("a\nb")
    run = await write_file({"file_path": "f.txt", "content": "a\nb\n"})
    assert run.text == 'Overwrote "f.txt" (2 lines, 4 bytes).\n@@ -1,2 +1,2 @@\n a\n-b\n+b'


async def test_3_7_4_no_diff_for_an_old_file_over_1_mib(
    write_file: Runner, workspace: Path
) -> None:
    (workspace / "f.txt").write_bytes(b"x" * (1024 * 1024 + 1))
    run = await write_file({"file_path": "f.txt", "content": "y"})
    assert run.text == 'Overwrote "f.txt" (1 line, 1 byte).'


async def test_3_7_4_diff_for_an_old_file_of_exactly_1_mib(
    write_file: Runner, workspace: Path
) -> None:
    (workspace / "f.txt").write_bytes(b"x" * (1024 * 1024 - 1) + b"\n")
    run = await write_file({"file_path": "f.txt", "content": "y\n"})
    assert run.text == (
        'Overwrote "f.txt" (1 line, 2 bytes).\n'
        "@@ -1,1 +1,1 @@\n-" + "x" * 2000 + "… [line truncated]\n+y"
    )


async def test_3_7_4_no_diff_for_an_old_file_with_nul(write_file: Runner, workspace: Path) -> None:
    (workspace / "f.bin").write_bytes(b"a\0b\n")
    run = await write_file({"file_path": "f.bin", "content": "text\n"})
    assert run.text == 'Overwrote "f.bin" (1 line, 5 bytes).'


async def test_3_7_4_diff_too_large_fallback_on_cells(write_file: Runner, workspace: Path) -> None:
    (workspace / "f.txt").write_text("".join(f"old {n}\n" for n in range(501)))
    run = await write_file(
        {"file_path": "f.txt", "content": "".join(f"new {n}\n" for n in range(500))}
    )
    assert run.text == (
        'Overwrote "f.txt" (500 lines, 3890 bytes).\n'
        "+500/\u2212501 lines vs the previous content (diff too large to show)"
    )


async def test_3_7_4_diff_too_large_fallback_on_lines(write_file: Runner, workspace: Path) -> None:
    old = "".join(f"{n}\n" for n in range(100))
    (workspace / "f.txt").write_text(old)
    # 30 changed lines in one hunk: 1 header + 3 + 60 + 3 = 67 lines > 60.
    new = old.replace(
        "".join(f"{n}\n" for n in range(10, 40)), "".join(f"x{n}\n" for n in range(10, 40))
    )
    run = await write_file({"file_path": "f.txt", "content": new})
    assert run.text.split("\n")[1] == (
        "+30/\u221230 lines vs the previous content (diff too large to show)"
    )


async def test_3_7_4_sixty_lines_are_still_shown(write_file: Runner, workspace: Path) -> None:
    old = "".join(f"{n}\n" for n in range(100))
    (workspace / "f.txt").write_text(old)
    # 1 header + 3 + 2 * 26 + 3 = 59; the header line counts.
    body = "".join(f"{n}\n" for n in range(10, 36))
    new = old.replace(body, body.replace("\n", "x\n"))
    run = await write_file({"file_path": "f.txt", "content": new})
    assert len(run.text.split("\n")) == 1 + 59
    (workspace / "f.txt").write_text(old)
    body = "".join(f"{n}\n" for n in range(10, 37))
    new = old.replace(body, body.replace("\n", "x\n"))
    run = await write_file({"file_path": "f.txt", "content": new})
    assert run.text.split("\n")[1].endswith("(diff too large to show)")


async def test_3_7_4_diff_too_large_fallback_on_chars(write_file: Runner, workspace: Path) -> None:
    (workspace / "f.txt").write_text("short\n")
    run = await write_file(
        {"file_path": "f.txt", "content": "y" * 500 + "\n"}, max_output_length=500
    )
    assert run.text == (
        'Overwrote "f.txt" (1 line, 501 bytes).\n'
        "+1/\u22121 lines vs the previous content (diff too large to show)"
    )


async def test_3_7_4_char_budget_boundary(write_file: Runner, workspace: Path) -> None:
    (workspace / "f.txt").write_text("a\n")
    first = 'Overwrote "f.txt" (1 line, 2 bytes).'
    diff = "@@ -1,1 +1,1 @@\n-a\n+b"
    exact = len(first) + 1 + len(diff) + 120
    run = await write_file({"file_path": "f.txt", "content": "b\n"}, max_output_length=exact)
    assert run.text == f"{first}\n{diff}"
    (workspace / "f.txt").write_text("a\n")
    run = await write_file({"file_path": "f.txt", "content": "b\n"}, max_output_length=exact - 1)
    assert run.text == f"{first}\n+1/\u22121 lines vs the previous content (diff too large to show)"


async def test_3_7_4_disabled_limit_means_16000(write_file: Runner, workspace: Path) -> None:
    (workspace / "f.txt").write_text("a\n")
    run = await write_file(
        {"file_path": "f.txt", "content": "b" * 1900 + "\n"}, max_output_length=0
    )
    assert run.text.endswith("+" + "b" * 1900)


async def test_secret_stores_are_never_written(write_file: Runner, workspace: Path) -> None:
    (workspace / "real.toml").write_text("key = 1\n")
    (workspace / "cfg").symlink_to(workspace / ".project_config.toml")
    for name in (".project_config.toml", "cfg"):
        run = await write_file({"file_path": name, "content": "x"})
        assert run.text == (
            f'Refusing to write "{name}": .project_config.toml holds the user\'s secrets and '
            "must never enter the conversation."
        )
        assert run.stop == "failed"
    assert not (workspace / ".project_config.toml").exists()
