"""read_file (reference 3.5), driven through a real ToolContext on real files."""

from __future__ import annotations

import io
import math
import os
import socket
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from penguin.environment.tools._files import compose_hint
from penguin.environment.tools.read_file import (
    SCAN_CAP,
    ReadFileTool,
    ScanResult,
    WindowLine,
    coerce_limit,
    coerce_offset,
    js_json,
    js_number_text,
    render_window,
    scan_lines,
)

from .conftest import Runner

MiB = 1024 * 1024


def not_found(file_path: str, workspace: Path, hint: str) -> str:
    return (
        f'File not found: "{file_path}". Absolute paths are supported; relative paths '
        f"resolve against the workspace ({workspace}).{hint}"
    )


def test_3_0_1_read_file_is_registered() -> None:
    from penguin.environment.tools.registry import BUILTIN_TOOLS

    assert BUILTIN_TOOLS["read_file"] is ReadFileTool


# --- 3.5.1 check order ----------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, "", 42, ["a.txt"]])
async def test_3_5_1_missing_file_path(read_file: Runner, value: object) -> None:
    run = await read_file({} if value is None else {"file_path": value})
    assert run.text == 'Missing required argument "file_path" for read_file.'
    assert run.stop == "failed"
    assert len(run.deltas) == 1


async def test_3_1_3_messages_print_the_configured_name(read_file: Runner) -> None:
    run = await read_file({}, name="peek")
    assert run.text == 'Missing required argument "file_path" for peek.'


async def test_3_5_1_file_path_before_offset(read_file: Runner) -> None:
    run = await read_file({"offset": "x"})
    assert run.text == 'Missing required argument "file_path" for read_file.'


async def test_3_5_1_offset_before_limit(read_file: Runner) -> None:
    run = await read_file({"file_path": "a.txt", "offset": "x", "limit": 0})
    assert run.text == 'Invalid "offset": expected a number (got "x").'
    assert run.stop == "failed"


async def test_3_5_1_limit_before_secret_guard(read_file: Runner, workspace: Path) -> None:
    (workspace / ".vault.toml").write_text("k = 1\n")
    run = await read_file({"file_path": ".vault.toml", "limit": 0})
    assert run.text == 'Invalid "limit": expected a positive number (got 0).'


async def test_3_5_1_secret_guard_before_stat(read_file: Runner) -> None:
    run = await read_file({"file_path": "missing/.vault.toml"})
    assert run.text.startswith('Refusing to read "missing/.vault.toml"')
    assert run.stop == "failed"


async def test_3_5_1_empty_before_past_end(read_file: Runner, workspace: Path) -> None:
    (workspace / "e.txt").write_bytes(b"")
    run = await read_file({"file_path": "e.txt", "offset": 50})
    assert run.text == '"e.txt" is an empty file (0 lines).'
    assert run.stop == "completed"


async def test_3_5_1_binary_before_cap(read_file: Runner, workspace: Path) -> None:
    (workspace / "b.bin").write_bytes(b"\0" + b"x" * (9 * MiB))
    run = await read_file({"file_path": "b.bin", "offset": 10**9})
    assert "looks like a binary file" in run.text


async def test_3_5_1_cap_before_past_end(read_file: Runner, workspace: Path) -> None:
    (workspace / "big.txt").write_bytes((b"y" * 99 + b"\n") * (90 * 1024))
    run = await read_file({"file_path": "big.txt", "offset": 10**8})
    assert run.text.startswith('Stopped after scanning 8 MB of "big.txt"')


# --- 3.5.2 offset / limit coercion --------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, 1),
        (3, 3),
        (2.9, 2),
        (0, 1),
        (-5, 1),
        (-0.5, 1),
        ("4", 4),
        (" 7.8 ", 7),
        ("\t1e1\n", 10),
        ("0x10", 16),
        (".5e1", 5),
    ],
)
def test_3_5_2_offset_coercion(value: object, expected: int) -> None:
    assert coerce_offset(value) == expected


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("abc", '"abc"'),
        ("", '""'),
        ("   ", '"   "'),
        (True, "true"),
        (False, "false"),
        ([1, 2], "[1,2]"),
        ({"a": 1, "b": [None, "x"]}, '{"a":1,"b":[null,"x"]}'),
        ("Infinity", '"Infinity"'),
        ("1_000", '"1_000"'),
        ("nan", '"nan"'),
        (math.inf, "null"),
        (10**400, "null"),
        ('say "hi"\n', '"say \\"hi\\"\\n"'),
        ("é", '"é"'),
    ],
)
def test_3_5_2_invalid_offset_text(value: object, shown: str) -> None:
    assert coerce_offset(value) == f'Invalid "offset": expected a number (got {shown}).'


@pytest.mark.parametrize(
    ("value", "expected"), [(None, 2000), (1, 1), (5.99, 5), ("12", 12), (10**30, 10**30)]
)
def test_3_5_2_limit_coercion(value: object, expected: int) -> None:
    assert coerce_limit(value) == expected


@pytest.mark.parametrize(
    ("value", "shown"),
    [(0, "0"), (-3, "-3"), (0.5, "0.5"), ("0", '"0"'), ("x", '"x"'), (True, "true"), ([], "[]")],
)
def test_3_5_2_invalid_limit_text(value: object, shown: str) -> None:
    assert coerce_limit(value) == f'Invalid "limit": expected a positive number (got {shown}).'


async def test_3_5_2_invalid_offset_through_the_tool(read_file: Runner) -> None:
    run = await read_file({"file_path": "a.txt", "offset": {"n": 1}})
    assert run.text == 'Invalid "offset": expected a number (got {"n":1}).'
    assert run.stop == "failed"


async def test_3_5_2_null_means_default(read_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\ntwo\n")
    run = await read_file({"file_path": "a.txt", "offset": None, "limit": None})
    assert run.text == "     1\tone\n     2\ttwo"


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0, "0"),
        (-0.0, "0"),
        (1.0, "1"),
        (1.5, "1.5"),
        (-2.25, "-2.25"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (0.000001, "0.000001"),
        (1.5e300, "1.5e+300"),
        (2**53, "9007199254740992"),
        (2**60, "1152921504606847000"),
        (10**22, "1e+22"),
    ],
)
def test_3_5_2_numbers_print_like_javascript(number: float, text: str) -> None:
    assert js_number_text(number) == text


def test_3_5_2_json_escapes_lone_surrogates_like_javascript() -> None:
    assert js_json("a\ud800") == '"a\\ud800"'


# --- 3.5.3 secret guard -------------------------------------------------------------------


def refusal(file_path: str, name: str) -> str:
    return (
        f'Refusing to read "{file_path}": {name} holds the user\'s secrets and must never '
        "enter the conversation."
    )


@pytest.mark.parametrize("name", [".vault.toml", ".project_config.toml"])
async def test_3_5_3_secret_guard_refuses_stores(
    read_file: Runner, workspace: Path, name: str
) -> None:
    (workspace / name).write_text("api_key = 'sk-123'\n")
    run = await read_file({"file_path": name})
    assert run.text == refusal(name, name)
    assert run.stop == "failed"
    assert "sk-123" not in run.text


async def test_3_5_3_secret_guard_is_case_insensitive(read_file: Runner, workspace: Path) -> None:
    (workspace / ".Vault.TOML").write_text("secret\n")
    run = await read_file({"file_path": ".Vault.TOML"})
    assert run.text == refusal(".Vault.TOML", ".vault.toml")


async def test_3_5_3_secret_guard_refuses_symlink_to_store(
    read_file: Runner, workspace: Path, tmp_path: Path
) -> None:
    store = tmp_path / "agent_state" / ".PROJECT_CONFIG.toml"
    store.parent.mkdir()
    store.write_text("secret\n")
    (workspace / "notes.txt").symlink_to(store)
    run = await read_file({"file_path": "notes.txt"})
    assert run.text == refusal("notes.txt", ".project_config.toml")
    assert run.stop == "failed"


async def test_3_5_3_secret_guard_refuses_store_named_symlink_to_ordinary_file(
    read_file: Runner, workspace: Path
) -> None:
    (workspace / "plain.txt").write_text("nothing secret\n")
    (workspace / ".vault.toml").symlink_to(workspace / "plain.txt")
    run = await read_file({"file_path": ".vault.toml"})
    assert run.text == refusal(".vault.toml", ".vault.toml")


async def test_3_5_3_secret_guard_through_absolute_and_dotdot_paths(
    read_file: Runner, workspace: Path
) -> None:
    (workspace / "d").mkdir()
    (workspace / ".vault.toml").write_text("x\n")
    path = f"{workspace}/d/../.vault.toml"
    run = await read_file({"file_path": path})
    assert run.text == refusal(path, ".vault.toml")


async def test_3_5_3_similar_names_are_readable(read_file: Runner, workspace: Path) -> None:
    (workspace / "vault.toml").write_text("ok\n")
    run = await read_file({"file_path": "vault.toml"})
    assert run.text == "     1\tok"


# --- 3.5.4 directory / missing / other errors ---------------------------------------------


async def test_3_5_4_directory(read_file: Runner, workspace: Path) -> None:
    (workspace / "src").mkdir()
    run = await read_file({"file_path": "src"})
    assert run.text == 'Cannot read "src": it is a directory. Pass the path of a file inside it.'
    assert run.stop == "failed"


async def test_3_5_4_missing_with_hint(read_file: Runner, workspace: Path) -> None:
    (workspace / "main.py").write_text("")
    run = await read_file({"file_path": "mian.py"})
    hint = f' The directory "{workspace}" exists but has no entry "mian.py". It contains: main.py.'
    assert run.text == not_found("mian.py", workspace, hint)
    assert run.stop == "failed"


async def test_3_5_4_parent_is_a_file_counts_as_missing(read_file: Runner, workspace: Path) -> None:
    (workspace / "file.txt").write_text("x")
    run = await read_file({"file_path": "file.txt/inner.txt"})
    hint = f' Note: "{workspace}/file.txt" exists but is a file, not a directory.'
    assert run.text == not_found("file.txt/inner.txt", workspace, hint)


async def test_3_5_4_other_errors(read_file: Runner, workspace: Path) -> None:
    (workspace / "loop").symlink_to("loop")
    run = await read_file({"file_path": "loop"})
    assert run.text == (
        f"Failed to read \"loop\": ELOOP: Too many levels of symbolic links, '{workspace}/loop'"
    )
    assert run.stop == "failed"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads everything")
async def test_3_5_4_unreadable_file_is_another_error(read_file: Runner, workspace: Path) -> None:
    target = workspace / "locked.txt"
    target.write_text("x\n")
    target.chmod(0)
    run = await read_file({"file_path": "locked.txt"})
    assert run.text == f"Failed to read \"locked.txt\": EACCES: Permission denied, '{target}'"


@pytest.mark.parametrize("make", [os.mkfifo, None])
async def test_3_5_4_non_regular_files_are_refused_without_blocking(
    read_file: Runner, workspace: Path, make: object
) -> None:
    if make is None:
        path, kind = "/dev/zero", "a character device"
    else:
        os.mkfifo(workspace / "pipe")
        path, kind = "pipe", "a FIFO"
    with trio.fail_after(5):
        run = await read_file({"file_path": path})
    assert run.text == (
        f'Failed to read "{path}": it is not a regular file ({kind}). '
        "Use shell commands to inspect it."
    )
    assert run.stop == "failed"


async def test_3_5_4_socket_is_refused(read_file: Runner, workspace: Path) -> None:
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(workspace / "sock"))
        run = await read_file({"file_path": "sock"})
    assert run.text == (
        'Failed to read "sock": it is not a regular file (a socket). '
        "Use shell commands to inspect it."
    )


async def test_3_5_4_nul_in_the_path_is_another_error(read_file: Runner) -> None:
    run = await read_file({"file_path": "a\0b"})
    assert run.text == 'Failed to read "a\0b": embedded null byte'
    assert run.stop == "failed"


# --- 3.5.6 empty file ---------------------------------------------------------------------


async def test_3_5_6_empty_file(read_file: Runner, workspace: Path) -> None:
    (workspace / "empty.txt").touch()
    run = await read_file({"file_path": "empty.txt"})
    assert run.deltas == ('"empty.txt" is an empty file (0 lines).',)
    assert run.stop == "completed"


# --- 3.5.7 scan ---------------------------------------------------------------------------


async def test_3_5_7_final_unterminated_line_counts(read_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\ntwo")
    run = await read_file({"file_path": "a.txt", "limit": 1})
    assert run.text == (
        "     1\tone\n[file has 2 lines total; showing 1-1 — call again with offset to continue]"
    )


async def test_3_5_7_trailing_cr_is_stripped(read_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_bytes(b"one\r\ntwo\r")
    run = await read_file({"file_path": "a.txt"})
    assert run.text == "     1\tone\n     2\ttwo\n(file uses CRLF line endings)"


async def test_3_5_7_lone_cr_is_not_crlf(read_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_bytes(b"two\r")
    run = await read_file({"file_path": "a.txt"})
    assert run.text == "     1\ttwo"


async def test_3_5_7_lossy_utf8(read_file: Runner, workspace: Path) -> None:
    (workspace / "l1.txt").write_bytes(b"caf\xe9 ok\n\xf0\x9f\x98\x80\n")
    run = await read_file({"file_path": "l1.txt"})
    assert run.text == "     1\tcaf\ufffd ok\n     2\t😀"


async def test_3_5_7_lines_keep_at_most_8000_bytes(read_file: Runner, workspace: Path) -> None:
    # 2-byte characters: 8000 bytes are 4000 chars, shown as 2000 + the marker.
    (workspace / "wide.txt").write_text("é" * 10_000 + "\nnext\n")
    run = await read_file({"file_path": "wide.txt"})
    assert run.text == "     1\t" + "é" * 2000 + "… [line truncated]\n     2\tnext"


async def test_3_5_7_line_cut_at_8000_bytes_is_marked_even_at_2000_chars(
    read_file: Runner, workspace: Path
) -> None:
    (workspace / "emoji.txt").write_text("😀" * 2500)
    run = await read_file({"file_path": "emoji.txt"})
    assert run.text == "     1\t" + "😀" * 2000 + "… [line truncated]"


async def test_3_5_7_counting_continues_past_the_window(read_file: Runner, workspace: Path) -> None:
    (workspace / "n.txt").write_bytes(b"".join(b"%d\n" % i for i in range(1, 100_001)))
    run = await read_file({"file_path": "n.txt", "offset": 10, "limit": 2})
    assert run.text == (
        "    10\t10\n    11\t11\n"
        "[file has 100000 lines total; showing 10-11 — call again with offset to continue]"
    )


async def test_3_5_7_crlf_anywhere_in_the_scanned_range(read_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_bytes(b"a\nb\nc\r\n")
    run = await read_file({"file_path": "a.txt", "limit": 1})
    assert run.text.splitlines()[1] == "(file uses CRLF line endings)"


def test_3_5_7_crlf_split_across_chunks() -> None:
    data = b"ab\r\ncd\n"
    result = scan_lines(io.BytesIO(data).read, first=1, last=9, max_rows=9, chunk_size=3)
    assert result.crlf
    assert [w.text for w in result.window] == ["ab", "cd"]


async def test_3_5_7_abort_is_checked_per_chunk(tmp_path: Path) -> None:
    """A cancellation reaching the worker thread stops the scan at the next chunk."""
    path = tmp_path / "big.txt"
    path.write_bytes((b"z" * 63 + b"\n") * (64 * 1024))  # 4 MiB = 16 chunks
    reads: list[int] = []
    with trio.CancelScope() as scope:

        def checkpoint() -> None:
            if len(reads) == 2:
                trio.from_thread.run_sync(scope.cancel)
            trio.from_thread.check_cancelled()

        def scan() -> ScanResult:
            with path.open("rb", buffering=0) as handle:

                def read(n: int) -> bytes:
                    data = handle.read(n)
                    assert data is not None
                    reads.append(len(data))
                    return data

                return scan_lines(read, first=1, last=10, max_rows=20, checkpoint=checkpoint)

        await trio.to_thread.run_sync(scan)
        pytest.fail("the scan was not cancelled")
    assert scope.cancelled_caught
    assert reads == [256 * 1024, 256 * 1024]


async def test_3_5_7_cancelled_call_emits_nothing(read_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text("x\n")
    with trio.CancelScope() as scope:
        scope.cancel()
        await read_file({"file_path": "a.txt"})
    assert scope.cancelled_caught


async def test_3_5_7_deep_window_in_a_200_mb_file_stops_at_the_cap(
    read_file: Runner, workspace: Path
) -> None:
    big = workspace / "huge.txt"
    with big.open("wb") as handle:
        handle.write((b"q" * 99 + b"\n") * (9 * 10_486))  # ~9 MiB of real lines
        handle.truncate(200 * 1000 * 1000)  # the rest is a hole the scan never reaches
    # How fast is benchmarks/closeout.py's business (c); this proves where it stops.
    run = await read_file({"file_path": "huge.txt", "offset": 1_500_000})
    assert run.text.startswith('Stopped after scanning 8 MB of "huge.txt"')


def _reference_scan(data: bytes, first: int, last: int, max_rows: int, cap: int) -> ScanResult:
    if b"\0" in data[:cap]:
        return ScanResult((), 0, False, True, b"\r\n" in data[:cap])
    capped = len(data) >= cap
    seen = data[:cap]
    parts = seen.split(b"\n")
    partial = capped and bool(parts[-1])  # the cap fell inside a line
    if capped or not parts[-1]:
        parts.pop()
    window: list[WindowLine] = []
    for number, raw in enumerate(parts, start=1):
        if first <= number <= last and len(window) < max_rows:
            cut = len(raw) > 8000
            kept = raw[:8000]
            if not cut and kept.endswith(b"\r"):
                kept = kept[:-1]
            window.append(WindowLine(number, kept.decode("utf-8", "replace"), cut))
    return ScanResult(tuple(window), len(parts), capped, False, b"\r\n" in seen, partial)


@settings(max_examples=300, deadline=None)
@given(
    data=st.lists(st.sampled_from([b"a", b"\n", b"\r", b"\xc3\xa9", b"\xe9", b"\r\n"])).map(
        b"".join
    ),
    first=st.integers(1, 8),
    span=st.integers(0, 8),
    max_rows=st.integers(1, 6),
    chunk_size=st.integers(1, 7),
    cap=st.integers(1, 40),
)
def test_3_5_7_scan_matches_a_reference(
    data: bytes, first: int, span: int, max_rows: int, chunk_size: int, cap: int
) -> None:
    result = scan_lines(
        io.BytesIO(data).read,
        first=first,
        last=first + span,
        max_rows=max_rows,
        chunk_size=chunk_size,
        cap=cap,
    )
    expected = _reference_scan(data, first, first + span, max_rows, cap)
    if expected.binary:
        assert result.binary
    else:
        assert result == expected


# --- 3.5.8 binary -------------------------------------------------------------------------


async def test_3_5_8_binary(read_file: Runner, workspace: Path) -> None:
    (workspace / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    run = await read_file({"file_path": "img.png"})
    assert run.text == (
        '"img.png" looks like a binary file (contains NUL bytes). Use shell commands to '
        "inspect it, or read_image if it is an image."
    )
    assert run.stop == "failed"


async def test_3_5_8_nul_after_the_window_still_means_binary(
    read_file: Runner, workspace: Path
) -> None:
    (workspace / "mixed.txt").write_bytes(b"text\n" * 100_000 + b"\0")
    run = await read_file({"file_path": "mixed.txt", "limit": 1})
    assert "looks like a binary file" in run.text


async def test_3_5_8_nul_beyond_the_cap_is_not_seen(read_file: Runner, workspace: Path) -> None:
    (workspace / "late.txt").write_bytes(b"x\n" * (SCAN_CAP // 2) + b"\0")
    run = await read_file({"file_path": "late.txt", "limit": 1})
    assert run.stop == "completed"
    assert run.text == (
        "     1\tx\n[file has more than 4194304 lines; showing 1-1 — call again with offset "
        "to continue]"
    )


# --- 3.5.9 scan cap -----------------------------------------------------------------------


def cap_message(file_path: str, scanned: str, first: int, last: int) -> str:
    return (
        f'Stopped after scanning 8 MB of "{file_path}" without reaching the requested window '
        f"(scanned {scanned}). The offset is too deep or the file has extremely long lines — "
        f"use shell commands (e.g. sed -n '{first},{last}p') for this file."
    )


async def test_3_5_9_cap_hit_before_window(read_file: Runner, workspace: Path) -> None:
    (workspace / "big.txt").write_bytes((b"w" * 99 + b"\n") * (90 * 1024))
    run = await read_file({"file_path": "big.txt", "offset": 100_000, "limit": 50})
    # 83886 whole lines and 8 bytes of the next: the line the cap fell in counts (9.6)
    assert run.text == cap_message("big.txt", "83887 lines", 100_000, 100_049)
    assert run.stop == "failed"


async def test_3_5_9_single_8_mib_line_fails(read_file: Runner, workspace: Path) -> None:
    (workspace / "one.txt").write_bytes(b"a" * SCAN_CAP)
    run = await read_file({"file_path": "one.txt"})
    assert run.text == cap_message("one.txt", "1 line", 1, 2000)
    assert run.stop == "failed"


async def test_9_6_one_8_mib_line_without_newline_scanned_1_line(
    read_file: Runner, workspace: Path
) -> None:
    # The reference's count: the scan read one line (all of it that fits in 8 MiB).
    (workspace / "one.txt").write_bytes(b"a" * (SCAN_CAP + 1000))
    run = await read_file({"file_path": "one.txt"})
    assert "(scanned 1 line)" in run.text
    (workspace / "lines.txt").write_bytes(b"a\n" * (SCAN_CAP // 2))  # the cap ends a line
    run = await read_file({"file_path": "lines.txt", "offset": SCAN_CAP})
    assert f"(scanned {SCAN_CAP // 2} lines)" in run.text


async def test_3_5_9_one_byte_less_succeeds(read_file: Runner, workspace: Path) -> None:
    (workspace / "one.txt").write_bytes(b"a" * (SCAN_CAP - 1))
    run = await read_file({"file_path": "one.txt"})
    assert run.text == "     1\t" + "a" * 2000 + "… [line truncated]"
    assert run.stop == "completed"


async def test_3_5_9_singular_line(read_file: Runner, workspace: Path) -> None:
    (workspace / "two.txt").write_bytes(b"b" * SCAN_CAP)
    run = await read_file({"file_path": "two.txt", "offset": 2, "limit": 3})
    assert run.text == cap_message("two.txt", "1 line", 2, 4)


async def test_3_5_9_a_line_the_cap_cut_counts(read_file: Runner, workspace: Path) -> None:
    (workspace / "two.txt").write_bytes(b"a\n" + b"b" * SCAN_CAP)
    run = await read_file({"file_path": "two.txt", "offset": 2, "limit": 3})
    assert run.text == cap_message("two.txt", "2 lines", 2, 4)


# --- 3.5.10 past the end ------------------------------------------------------------------


async def test_3_5_10_offset_past_end(read_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text("1\n2\n3\n")
    run = await read_file({"file_path": "a.txt", "offset": 4})
    assert run.text == 'Offset 4 is past the end of "a.txt" (3 lines total).'
    assert run.stop == "failed"


async def test_3_5_10_offset_past_end_singular(read_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text("only")
    run = await read_file({"file_path": "a.txt", "offset": 2})
    assert run.text == 'Offset 2 is past the end of "a.txt" (1 line total).'


async def test_3_5_10_last_line_is_not_past_end(read_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text("1\n2\n3\n")
    run = await read_file({"file_path": "a.txt", "offset": 3})
    assert run.text == "     3\t3"


# --- 3.5.11 rows --------------------------------------------------------------------------


async def test_3_5_11_row_format(read_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text("\tindented\n\nlast\n")
    run = await read_file({"file_path": "a.txt"})
    assert run.text == "     1\t\tindented\n     2\t\n     3\tlast"


async def test_3_5_11_wide_line_numbers(read_file: Runner, workspace: Path) -> None:
    (workspace / "nl.txt").write_bytes(b"\n" * 1_234_570)
    run = await read_file({"file_path": "nl.txt", "offset": 1_234_567, "limit": 1})
    assert run.text.splitlines()[0] == "1234567\t"


async def test_3_5_11_long_line_truncation(read_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text("x" * 2000 + "\n" + "y" * 2001 + "\n")
    run = await read_file({"file_path": "a.txt"})
    assert run.text == "     1\t" + "x" * 2000 + "\n     2\t" + "y" * 2000 + "… [line truncated]"


# --- 3.5.12 self-budget -------------------------------------------------------------------


async def test_3_5_12_rows_added_while_they_fit(read_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text("abc\n" * 4)
    # Each row is 10 chars; three rows joined are 32.
    run = await read_file({"file_path": "a.txt"}, max_output_length=256 + 32)
    assert run.text == (
        "     1\tabc\n     2\tabc\n     3\tabc\n[file has 4 lines total; showing 1-3 "
        "(output limit reached) — call again with offset to continue]"
    )
    run = await read_file({"file_path": "a.txt"}, max_output_length=256 + 31)
    assert run.text.startswith("     1\tabc\n     2\tabc\n[file has 4 lines total; showing 1-2 (")


async def test_3_5_12_exact_fit_of_the_whole_file_has_no_note(
    read_file: Runner, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("abc\n" * 3)
    run = await read_file({"file_path": "a.txt"}, max_output_length=256 + 32)
    assert run.text == "     1\tabc\n     2\tabc\n     3\tabc"


async def test_3_5_12_first_row_is_hard_cut(read_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text("abcdef\n")
    run = await read_file({"file_path": "a.txt"}, max_output_length=256 + 8)
    assert run.text == (
        "     1\ta\n[file has 1 lines total; showing 1-1 (output limit reached) — call again "
        "with offset to continue]"
    )


async def test_3_5_12_content_budget_is_at_least_one(read_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text("abcdef\nghi\n")
    run = await read_file({"file_path": "a.txt"}, max_output_length=100)
    assert run.text == (
        " \n[file has 2 lines total; showing 1-1 (output limit reached) — call again "
        "with offset to continue]"
    )


async def test_3_5_12_disabled_limit_means_64000(read_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text(("x" * 993 + "\n") * 100)  # rows of 1000 chars
    run = await read_file({"file_path": "a.txt"}, max_output_length=0)
    rows = run.text.split("\n")
    assert len(rows) == 64  # 63 rows (63,062 chars <= 63,744) + the note
    assert rows[-1] == (
        "[file has 100 lines total; showing 1-63 (output limit reached) — call again with "
        "offset to continue]"
    )


# --- 3.5.13 trailing rows -----------------------------------------------------------------


async def test_3_5_13_no_note_when_the_rest_is_shown(read_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\nb\nc\n")
    run = await read_file({"file_path": "a.txt", "offset": 2})
    assert run.deltas == ("     2\tb\n     3\tc",)
    assert run.stop == "completed"


async def test_3_5_13_note_when_limit_stops_before_eof(read_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\nb\nc\n")
    run = await read_file({"file_path": "a.txt", "limit": 2})
    assert run.text == (
        "     1\ta\n     2\tb\n[file has 3 lines total; showing 1-2 — call again with offset to "
        "continue]"
    )


async def test_3_5_13_crlf_row_then_note(read_file: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_bytes(b"a\r\nb\r\nc\r\n")
    run = await read_file({"file_path": "a.txt", "limit": 1})
    assert run.deltas == (
        "     1\ta\n(file uses CRLF line endings)\n[file has 3 lines total; showing 1-1 — call "
        "again with offset to continue]",
    )


async def test_3_5_13_total_unknown_after_the_cap(read_file: Runner, workspace: Path) -> None:
    (workspace / "big.txt").write_bytes(b"x\n" * (SCAN_CAP // 2 + 10))
    run = await read_file({"file_path": "big.txt", "offset": 3, "limit": 2})
    assert run.text == (
        "     3\tx\n     4\tx\n[file has more than 4194304 lines; showing 3-4 — call again "
        "with offset to continue]"
    )


async def test_3_5_13_total_unknown_and_trimmed(read_file: Runner, workspace: Path) -> None:
    (workspace / "big.txt").write_bytes(b"x\n" * (SCAN_CAP // 2 + 10))
    run = await read_file({"file_path": "big.txt", "limit": 5}, max_output_length=256 + 8)
    assert run.text == (
        "     1\tx\n[file has more than 4194304 lines; showing 1-1 (output limit reached) — "
        "call again with offset to continue]"
    )


def test_3_5_13_render_window_is_one_text() -> None:
    scan = ScanResult((WindowLine(1, "a"), WindowLine(2, "b")), 2, False, False, True)
    outcome = render_window("f", offset=1, limit=2000, scan=scan, budget=64000)
    assert outcome.text == "     1\ta\n     2\tb\n(file uses CRLF line endings)"
    assert not outcome.failed


async def test_3_0_4_absolute_paths_and_no_tilde(
    read_file: Runner, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("far\n")
    run = await read_file({"file_path": str(outside)})
    assert run.text == "     1\tfar"
    (workspace / "~").mkdir()
    (workspace / "~" / "t.txt").write_text("tilde\n")
    run = await read_file({"file_path": "~/t.txt"})
    assert run.text == "     1\ttilde"


# --- 3.5.5 path hint ----------------------------------------------------------------------


async def test_3_5_5_hint_ranks_by_common_prefix_then_alphabet(
    read_file: Runner, workspace: Path
) -> None:
    for name in ["beta.txt", "alpha.txt", "Alpine.md", "ALPHA.md", "zeta"]:
        (workspace / name).write_text("")
    (workspace / "alphabet").mkdir()
    run = await read_file({"file_path": "alpha.py"})
    hint = (
        f' The directory "{workspace}" exists but has no entry "alpha.py". It contains: '
        "ALPHA.md, alpha.txt, alphabet/, Alpine.md, beta.txt, zeta."
    )
    assert run.text == not_found("alpha.py", workspace, hint)


async def test_3_5_5_hint_lists_eight_and_counts_the_rest(
    read_file: Runner, workspace: Path
) -> None:
    for i in range(11):
        (workspace / f"f{i:02d}").write_text("")
    run = await read_file({"file_path": "g"})
    assert run.text.endswith(
        ' has no entry "g". It contains: f00, f01, f02, f03, f04, f05, f06, f07 (+3 more).'
    )


async def test_3_5_5_hint_empty_directory(read_file: Runner, workspace: Path) -> None:
    (workspace / "empty").mkdir()
    run = await read_file({"file_path": "empty/x.txt"})
    hint = f' The directory "{workspace}/empty" exists but has no entry "x.txt". It is empty.'
    assert run.text == not_found("empty/x.txt", workspace, hint)


async def test_3_5_5_hint_names_the_first_missing_segment(
    read_file: Runner, workspace: Path
) -> None:
    (workspace / "src").mkdir()
    run = await read_file({"file_path": "src/pkg/sub/mod.py"})
    hint = f' The directory "{workspace}/src" exists but has no entry "pkg". It is empty.'
    assert run.text == not_found("src/pkg/sub/mod.py", workspace, hint)


async def test_3_5_5_hint_not_a_directory_deeper(read_file: Runner, workspace: Path) -> None:
    (workspace / "f.txt").write_text("")
    run = await read_file({"file_path": "f.txt/a/b/c.txt"})
    hint = f' Note: "{workspace}/f.txt" exists but is a file, not a directory.'
    assert run.text == not_found("f.txt/a/b/c.txt", workspace, hint)


async def test_3_5_5_hint_empty_at_the_filesystem_root(read_file: Runner, workspace: Path) -> None:
    path = "/penguin-no-such-dir-3f9a/x/y.txt"
    run = await read_file({"file_path": path})
    assert run.text == not_found(path, workspace, "")


async def test_3_5_5_hint_symlinked_directories_get_a_slash(
    read_file: Runner, workspace: Path
) -> None:
    (workspace / "real").mkdir()
    (workspace / "link").symlink_to(workspace / "real")
    run = await read_file({"file_path": "missing"})
    assert run.text.endswith("It contains: link/, real/.")


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists every directory")
async def test_3_5_5_hint_unreadable_directory_gives_the_head_only(
    read_file: Runner, workspace: Path
) -> None:
    locked = workspace / "locked"
    locked.mkdir()
    locked.chmod(0o300)
    try:
        run = await read_file({"file_path": "locked/x"})
    finally:
        locked.chmod(0o700)
    hint = f' The directory "{locked}" exists but has no entry "x".'
    assert run.text == not_found("locked/x", workspace, hint)


def test_3_5_5_compose_hint_unreadable_directory() -> None:
    assert compose_hint("/w/d", "x", is_dir=True, entries=None) == (
        ' The directory "/w/d" exists but has no entry "x".'
    )


def test_3_5_5_compose_hint_ties_in_locale_order() -> None:
    entries = [("b", False), ("B", False), ("a", False), ("_x", False), ("1", False), ("é", True)]
    assert compose_hint("/w", "zzz", is_dir=True, entries=entries) == (
        ' The directory "/w" exists but has no entry "zzz". It contains: _x, 1, a, b, B, é/.'
    )


def test_3_5_5_compose_hint_prefix_is_case_insensitive() -> None:
    entries = [("readme.md", False), ("README.txt", False), ("Makefile", False)]
    assert compose_hint("/w", "ReadMe.rst", is_dir=True, entries=entries).endswith(
        "It contains: readme.md, README.txt, Makefile."
    )


def test_3_5_5_compose_hint_not_a_directory() -> None:
    assert compose_hint("/w/f", "x", is_dir=False, entries=None) == (
        ' Note: "/w/f" exists but is a file, not a directory.'
    )
