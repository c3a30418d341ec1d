"""Reference 2: the truncated-output archive (sans-IO capture and the Trio save shell)."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import resource
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from penguin.environment._archive import (
    ARCHIVE_BUDGET,
    GAP_MARKER,
    ArchiveOutcome,
    OutputCapture,
    archive_file_name,
    save_capture,
)

GAP = GAP_MARKER.encode()
MIB = 1024 * 1024
SLACK = 64 * 1024  # how far the rolling tail may overhang its window (one ordinary delta)
FAILURE_LINE = '[penguin] tool "{tool}" truncated output archive write failed ({code}).'


# ---- oracles, written independently of the module ----------------------------------------


def settle(text: str) -> str:
    """Surrogate repair, one code point at a time: pairs joined, lone ones to U+FFFD."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = ord(text[i])
        if 0xD800 <= c <= 0xDBFF and i + 1 < len(text) and 0xDC00 <= ord(text[i + 1]) <= 0xDFFF:
            out.append(chr(0x10000 + ((c - 0xD800) << 10) + (ord(text[i + 1]) - 0xDC00)))
            i += 2
            continue
        out.append("\ufffd" if 0xD800 <= c <= 0xDFFF else text[i])
        i += 1
    return "".join(out)


def expected_file(full: bytes, budget: int) -> bytes:
    """What reference 2.4/2.5 say the file holds for the complete encoded stream ``full``."""
    if len(full) <= budget:
        return full
    content = budget - len(GAP)
    head_budget = content // 2
    tail_budget = content - head_budget
    head = next(
        full[:k] for k in range(head_budget, -1, -1) if _decodes(full[:k])
    )  # the longest whole-code-point prefix within the head budget
    start = len(full) - tail_budget
    tail = next(full[s:] for s in range(start, len(full) + 1) if _decodes(full[s:]))
    return head + GAP + tail


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def captured(deltas: list[str], budget: int) -> OutputCapture:
    capture = OutputCapture(budget)
    for delta in deltas:
        capture.append(delta)
    return capture


def rendered(capture: OutputCapture) -> bytes:
    return b"".join(capture.render())


def in_head_tail(capture: OutputCapture) -> bool:
    """The mode, read through a call so mypy does not freeze it across mutations."""
    return capture.head_tail


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# ---- 2.3-2.6: the capture ----------------------------------------------------------------


def test_2_3_budget_and_gap_marker() -> None:
    assert ARCHIVE_BUDGET == 8_388_607
    assert len(GAP) == 28
    assert OutputCapture().budget == ARCHIVE_BUDGET


def test_2_5_budget_must_leave_room_for_the_gap_marker() -> None:
    with pytest.raises(ValueError, match="gap"):
        OutputCapture(27)
    OutputCapture(28)


def test_2_4_exact_mode_is_the_received_text() -> None:
    deltas = ["line one\n", "zwei: größer ✓\n", "", "emoji 😀 done"]
    capture = captured(deltas, budget=100)
    full = "".join(deltas).encode()
    assert not capture.head_tail
    assert capture.total_bytes == len(full)
    assert rendered(capture) == full


def test_2_4_exact_mode_holds_up_to_the_budget_inclusive() -> None:
    capture = captured(["a" * 60, "b" * 40], budget=100)
    assert not in_head_tail(capture)
    assert rendered(capture) == b"a" * 60 + b"b" * 40
    capture.append("c")
    assert in_head_tail(capture)
    assert capture.total_bytes == 101


def test_2_5_head_tail_layout() -> None:
    # budget 128: content 100, head 50, tail 50.
    text = "".join(f"{i:04d}" for i in range(100))  # 400 ASCII bytes, every position distinct
    capture = captured([text[:150], text[150:151], text[151:]], budget=128)
    assert capture.head_tail
    assert capture.total_bytes == 400
    assert rendered(capture) == text[:50].encode() + GAP + text[-50:].encode()
    assert len(rendered(capture)) == 128


def test_2_5_odd_content_budget_gives_the_extra_byte_to_the_tail() -> None:
    capture = captured(["x" * 10 + "y" * 200 + "z" * 11], budget=28 + 21)
    assert rendered(capture) == b"x" * 10 + GAP + b"z" * 11


def test_2_5_head_tail_cut_never_splits_a_code_point() -> None:
    # budget 128: head 50, tail 50. 17 x "€" (3 bytes) = 51 bytes, so byte 50 falls inside
    # the 17th euro sign at the head, and the tail window starts inside a 4-byte emoji.
    head_text = "€" * 17
    tail_text = "😀" * 13  # 52 bytes: the last 50 start 2 bytes into the first emoji
    capture = captured([head_text, "-" * 500, tail_text], budget=128)
    out = rendered(capture)
    assert out == ("€" * 16).encode() + GAP + ("😀" * 12).encode()
    assert "\ufffd" not in out.decode("utf-8")  # strict decode succeeds, nothing replaced


def test_2_5_a_single_delta_over_the_budget() -> None:
    text = "H" * 60 + "." * 10_000 + "T" * 60
    capture = OutputCapture(128)
    capture.append(text)
    assert capture.head_tail
    assert rendered(capture) == b"H" * 50 + GAP + b"T" * 50
    assert capture.retained_bytes <= 128


@pytest.mark.parametrize(
    ("budget", "delta_size"),
    [(4096, 1), (4096, 7), (MIB, 1000), (MIB, 64 * 1024), (MIB, 300_000), (MIB, 3 * MIB)],
)
def test_2_5_memory_is_bounded_by_the_budget(budget: int, delta_size: int) -> None:
    capture = OutputCapture(budget)
    delta = "ab" * (delta_size // 2) + "c" * (delta_size % 2)
    most = 0
    count = 0
    while count * delta_size < max(6 * budget, 4 * delta_size):
        capture.append(delta)
        count += 1
        if in_head_tail(capture):
            most = max(most, capture.retained_bytes)
        else:
            assert capture.retained_bytes == capture.total_bytes <= budget
    assert capture.total_bytes == count * delta_size
    # head and tail windows, plus at most one delta (or the slack, for big deltas) of overhang
    assert 0 < most <= budget - len(GAP) + min(delta_size, SLACK)
    out = rendered(capture)
    assert len(out) == budget
    assert out == expected_file((delta * count).encode(), budget)


def test_2_5_replace_takes_the_place_of_everything_captured() -> None:
    capture = captured(["x" * 500], budget=128)
    assert in_head_tail(capture)
    capture.replace("the complete output")
    assert not in_head_tail(capture)
    assert capture.total_bytes == len("the complete output")
    assert rendered(capture) == b"the complete output"
    capture.replace("\ud83d")
    capture.append("\ude00")  # the compat text's held-back half joins a later delta
    assert rendered(capture) == "😀".encode()


async def test_2_5_real_budget_head_and_tail(tmp_path: Path) -> None:
    """The one test at the real 8 MiB budget: 24 MiB of mixed text in 64 KiB deltas."""
    unit = "ascii, größe, €uro, 😀 emoji\n"
    delta = unit * (64 * 1024 // len(unit))
    capture = OutputCapture()
    deltas = 0
    most = 0
    while capture.total_bytes <= 24 * MIB:
        capture.append(delta)
        deltas += 1
        most = max(most, capture.retained_bytes)
    assert most <= ARCHIVE_BUDGET + SLACK
    full = (delta * deltas).encode()
    root = tmp_path / "scratch" / "truncated-tool-output"
    outcome = await save_capture(capture, root, "exec_command", "call_big")
    assert outcome.code is None
    assert outcome.path is not None
    assert outcome.note == f"[output archived (8 MiB limit; head and tail kept): {outcome.path}]"
    data = outcome.path.read_bytes()
    assert len(data) <= ARCHIVE_BUDGET
    assert data == expected_file(full, ARCHIVE_BUDGET)
    data.decode("utf-8")


def test_2_6_split_surrogate_pair_is_rejoined() -> None:
    capture = captured(["smile \ud83d", "\ude00 ok"], budget=100)
    assert rendered(capture) == "smile 😀 ok".encode()
    assert capture.total_bytes == len("smile 😀 ok".encode())


def test_2_6_split_pair_survives_an_empty_delta_between() -> None:
    capture = captured(["\ud83d", "", "\ude00"], budget=100)
    assert rendered(capture) == "😀".encode()


def test_2_6_pair_inside_one_delta_is_joined() -> None:
    assert rendered(captured(["a\ud83d\ude00b"], budget=100)) == "a😀b".encode()


@pytest.mark.parametrize(
    ("deltas", "text"),
    [
        (["a\ud83db"], "a\ufffdb"),  # lone high in the middle
        (["b\ude00c"], "b\ufffdc"),  # lone low
        (["a\ud83d", "b"], "a\ufffdb"),  # held-back high, next delta is not its pair
        (["a", "\ude00"], "a\ufffd"),  # low arriving without a high
        (["\ud83d\ud83d", "\ude00"], "\ufffd😀"),  # two highs: only the second pairs
        (["x\ud83d"], "x\ufffd"),  # high still waiting at render time
    ],
)
def test_2_6_lone_surrogate_becomes_replacement_character(deltas: list[str], text: str) -> None:
    assert rendered(captured(deltas, budget=100)) == text.encode()


def test_2_6_waiting_high_surrogate_is_counted_as_it_will_render() -> None:
    capture = captured(["x" * 98, "\ud83d"], budget=100)
    # 98 bytes + U+FFFD (3 bytes) = 101 > 100: the capture already reports head/tail.
    assert capture.total_bytes == 101
    assert capture.head_tail
    out = rendered(capture)
    assert out == b"x" * 36 + GAP + b"x" * 33 + "\ufffd".encode()
    # rendering did not consume the waiting half: it can still find its pair
    capture.append("\ude00")
    assert capture.total_bytes == 102
    assert rendered(capture).endswith("😀".encode())


# ---- properties of the sans-IO core --------------------------------------------------------

INTERESTING = st.sampled_from(
    ["a", "\n", "é", "€", "😀", "\U0010ffff", "\ud83d", "\ude00", "\udbff", "\udc00", "\ufffd"]
)
CHARS = st.one_of(INTERESTING, st.characters(exclude_categories=()))
DELTAS = st.lists(st.text(CHARS, max_size=40), max_size=25)
BUDGETS = st.integers(min_value=28, max_value=160)


@settings(max_examples=400)
@given(deltas=DELTAS, budget=BUDGETS)
def test_2_4_to_2_6_rendered_file_matches_the_spec(deltas: list[str], budget: int) -> None:
    capture = captured(deltas, budget)
    full = settle("".join(deltas)).encode("utf-8")
    out = rendered(capture)
    assert len(out) <= budget
    assert capture.total_bytes == len(full)
    assert capture.head_tail == (len(full) > budget)
    out.decode("utf-8")  # strict: never a split code point
    if not capture.head_tail:
        assert out == full
    else:
        assert GAP in out
        head, _, _ = out.partition(GAP)
        assert full.startswith(head)
        assert full.endswith(out[len(head) + len(GAP) :])
        assert out == expected_file(full, budget)


@settings(max_examples=200)
@given(deltas=DELTAS, budget=BUDGETS, data=st.data())
def test_2_6_delta_boundaries_do_not_matter(
    deltas: list[str], budget: int, data: st.DataObject
) -> None:
    text = "".join(deltas)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    assert rendered(captured(pieces, budget)) == rendered(captured([text], budget))


@settings(max_examples=100)
@given(deltas=DELTAS, budget=BUDGETS)
def test_2_5_rendering_twice_gives_the_same_bytes(deltas: list[str], budget: int) -> None:
    capture = captured(deltas, budget)
    first = rendered(capture)
    assert rendered(capture) == first
    assert capture.retained_bytes <= max(budget, capture.total_bytes) + SLACK


# ---- 2.7: the file name ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "safe"),
    [
        ("exec_command", "exec_command"),
        ("mcp__git-hub__list.repos", "mcp__git-hub__list_repos"),
        ("a b/c\\d:e", "a_b_c_d_e"),
        ("grüße😀", "gr__e_"),
        ("", "tool"),
        ("x" * 60, "x" * 48),
        ("/" * 60, "_" * 48),
    ],
)
def test_2_7_file_name(tool: str, safe: str) -> None:
    # SHA-256("call_1") begins 74196fe72e4cdc13.
    assert archive_file_name(tool, "call_1") == f"{safe}-74196fe72e4cdc13.log"


def test_2_7_hash_is_of_the_call_id_as_utf8() -> None:
    h = hashlib.sha256("ид-😀".encode()).hexdigest()[:16]
    assert archive_file_name("t", "ид-😀") == f"t-{h}.log"
    assert archive_file_name("t", "call_1") != archive_file_name("t", "call_2")


# ---- 2.8-2.11: saving -----------------------------------------------------------------------


async def test_2_8_modes_and_exclusive_create(tmp_path: Path) -> None:
    root = tmp_path / "agent" / "scratchpad" / "session-x" / "truncated-tool-output"
    capture = captured(["hello"], budget=100)
    with umask(0o022):
        outcome = await save_capture(capture, root, "exec_command", "call_1")
    assert outcome == ArchiveOutcome(
        note=f"[output archived: {root / 'exec_command-74196fe72e4cdc13.log'}]",
        path=root / "exec_command-74196fe72e4cdc13.log",
        code=None,
    )
    assert outcome.path is not None
    assert outcome.path.read_bytes() == b"hello"
    assert mode(outcome.path) == 0o600
    assert mode(root) == 0o700
    assert mode(root.parent) == 0o755  # missing ancestors: the default mode under the umask
    assert mode(tmp_path / "agent") == 0o755
    assert sorted(os.listdir(root)) == ["exec_command-74196fe72e4cdc13.log"]

    again = captured(["other text"], budget=100)
    second = await save_capture(again, root, "exec_command", "call_1")
    assert second.code == "EEXIST"
    assert second.path is None
    assert second.note == "[output archive failed: EEXIST]"
    assert outcome.path.read_bytes() == b"hello"  # the first archive is untouched


async def test_2_8_modes_hold_under_a_restrictive_umask(tmp_path: Path) -> None:
    root = tmp_path / "truncated-tool-output"
    with umask(0o377):
        outcome = await save_capture(captured(["x"], 100), root, "t", "c")
    assert outcome.path is not None
    assert mode(root) == 0o700
    assert mode(outcome.path) == 0o600


async def test_2_8_an_existing_directory_keeps_its_mode(tmp_path: Path) -> None:
    root = tmp_path / "truncated-tool-output"
    root.mkdir()
    os.chmod(root, 0o751)
    outcome = await save_capture(captured(["x"], 100), root, "t", "c")
    assert outcome.code is None
    assert mode(root) == 0o751


async def test_2_8_path_is_absolute_for_a_relative_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    outcome = await save_capture(captured(["x"], 100), Path("rel/truncated-tool-output"), "t", "c")
    assert outcome.path is not None
    assert outcome.path.is_absolute()
    assert outcome.path == tmp_path / "rel" / "truncated-tool-output" / archive_file_name("t", "c")
    assert outcome.note == f"[output archived: {outcome.path}]"


@pytest.mark.parametrize(("budget", "mib"), [(100, 1), (MIB, 1), (2 * MIB + 1, 3)])
async def test_2_9_head_tail_note_names_the_limit_in_mib(
    tmp_path: Path, budget: int, mib: int
) -> None:
    capture = captured(["z" * (budget + 1)], budget)
    outcome = await save_capture(capture, tmp_path / "a", "t", "c")
    assert outcome.path is not None
    note = f"[output archived ({mib} MiB limit; head and tail kept): {outcome.path}]"
    assert outcome.note == note
    assert len(outcome.path.read_bytes()) == budget


async def test_2_10_failure_code_enotdir(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    scratchpad = tmp_path / "scratchpad"
    scratchpad.write_text("a regular file where a directory should be")
    capture = captured(["x" * 200], budget=100)
    with caplog.at_level(logging.WARNING, logger="penguin"):
        outcome = await save_capture(capture, scratchpad / "truncated-tool-output", "exec", "c1")
    assert outcome == ArchiveOutcome(
        note="[output archive failed: ENOTDIR]", path=None, code="ENOTDIR"
    )
    [record] = [r for r in caplog.records if r.name == "penguin"]
    assert record.levelno == logging.WARNING
    assert record.getMessage() == FAILURE_LINE.format(tool="exec", code="ENOTDIR")
    assert str(tmp_path) not in caplog.text
    assert capture.saved


async def test_2_10_failure_code_enotdir_when_the_archive_dir_is_a_file(tmp_path: Path) -> None:
    root = tmp_path / "truncated-tool-output"
    root.write_text("")
    outcome = await save_capture(captured(["x"], 100), root, "t", "c")
    assert outcome.code == "ENOTDIR"


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permission bits")
async def test_2_10_failure_code_eacces(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        outcome = await save_capture(captured(["x"], 100), locked / "a" / "b", "t", "c")
    finally:
        os.chmod(locked, 0o700)
    assert outcome.note == "[output archive failed: EACCES]"


async def test_2_10_failed_write_leaves_no_partial_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "truncated-tool-output"
    capture = captured(["y" * 5000], budget=10_000)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, hard))  # a real write fails with EFBIG
    try:
        outcome = await save_capture(capture, root, "t", "c")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)
    assert outcome.code == "EFBIG"
    assert outcome.note == "[output archive failed: EFBIG]"
    assert root.is_dir()
    assert list(root.iterdir()) == []
    assert FAILURE_LINE.format(tool="t", code="EFBIG") in caplog.text


async def test_2_10_already_saved(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    capture = captured(["x" * 200], budget=100)
    first = await save_capture(capture, tmp_path / "one", "t", "c")
    assert first.code is None
    assert capture.saved
    other_root = tmp_path / "two"
    second = await save_capture(capture, other_root, "t", "c")
    assert second == ArchiveOutcome(
        note="[output archive failed: ALREADY_SAVED]", path=None, code="ALREADY_SAVED"
    )
    assert not other_root.exists()  # no I/O at all
    assert FAILURE_LINE.format(tool="t", code="ALREADY_SAVED") in caplog.text


async def test_2_10_a_failed_save_still_counts_as_the_one_save(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    capture = captured(["x"], 100)
    assert (await save_capture(capture, blocker / "a", "t", "c")).code == "ENOTDIR"
    assert (await save_capture(capture, tmp_path / "ok", "t", "c")).code == "ALREADY_SAVED"


async def test_2_11_archives_accumulate(tmp_path: Path) -> None:
    root = tmp_path / "truncated-tool-output"
    for call_id in ("c1", "c2", "c3"):
        outcome = await save_capture(captured([call_id], 100), root, "exec_command", call_id)
        assert outcome.code is None
    names = sorted(os.listdir(root))
    assert names == sorted(archive_file_name("exec_command", c) for c in ("c1", "c2", "c3"))
    assert {(root / n).read_text() for n in names} == {"c1", "c2", "c3"}
