"""The sans-IO diff rendering of edit_file (3.6.4-3.6.5) and write_file (3.7.4)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from penguin.environment.tools._diff import (
    DiffLine,
    Hunk,
    build_edit_hunks,
    build_write_hunks,
    line_diff,
    render_edit_report,
    render_hunk,
    render_write_diff,
)
from penguin.environment.tools._files import count_cat_lines, split_lines_keepends
from penguin.environment.tools.edit_file import find_occurrences


def apply_hunks(old_lines: Sequence[str], hunks: Sequence[Hunk]) -> list[str]:
    """Rebuild the new lines from the old ones and the hunks, checking every header."""
    out: list[str] = []
    position = 0
    for hunk in hunks:
        assert hunk.old_start >= position, "hunks overlap or are out of order"
        out.extend(old_lines[position : hunk.old_start])
        assert len(out) == hunk.new_start
        olds = [line.text for line in hunk.lines if line.tag != "+"]
        news = [line.text for line in hunk.lines if line.tag != "-"]
        assert olds == list(old_lines[hunk.old_start : hunk.old_start + hunk.old_count])
        assert len(olds) == hunk.old_count
        assert len(news) == hunk.new_count
        out.extend(news)
        position = hunk.old_start + hunk.old_count
    out.extend(old_lines[position:])
    return out


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


# --- hunk headers -------------------------------------------------------------------------


def test_3_6_5_header_is_one_based() -> None:
    hunk = Hunk(4, 2, 6, 3, (DiffLine(" ", "a\n"), DiffLine("-", "b\n"), DiffLine("+", "c\n")))
    assert render_hunk(hunk).split("\n")[0] == "@@ -5,2 +7,3 @@"


def test_3_6_5_empty_side_start_is_printed_minus_one() -> None:
    assert render_hunk(Hunk(0, 0, 0, 1, (DiffLine("+", "x"),))) == "@@ -0,0 +1,1 @@\n+x"
    assert render_hunk(Hunk(7, 1, 7, 0, (DiffLine("-", "x\n"),))) == "@@ -8,1 +7,0 @@\n-x"


def test_3_6_5_display_strips_one_cr_and_cuts_long_lines() -> None:
    lines = (DiffLine(" ", "a\r\r\n"), DiffLine("-", "b" * 2001 + "\r\n"), DiffLine("+", "\ud800"))
    assert render_hunk(Hunk(0, 2, 0, 2, lines)).split("\n")[1:] == [
        " a\r",
        "-" + "b" * 2000 + "… [line truncated]",
        "+\ufffd",
    ]


# --- edit hunks ---------------------------------------------------------------------------


def test_3_6_5_single_site_context_is_clipped_at_the_edges() -> None:
    content = "a\nb\nc\n"
    hunks = build_edit_hunks(content, [0], "a", "A")
    assert [render_hunk(h) for h in hunks] == ["@@ -1,3 +1,3 @@\n-a\n+A\n b\n c"]


def test_3_6_5_multi_line_site_spans_its_lines() -> None:
    content = "".join(f"{n}\n" for n in range(1, 11))
    start = content.index("4\n5\n6")
    hunks = build_edit_hunks(content, [start], "4\n5\n6", "four")
    assert render_hunk(hunks[0]) == ("@@ -1,9 +1,7 @@\n 1\n 2\n 3\n-4\n-5\n-6\n+four\n 7\n 8\n 9")


def test_3_6_5_sites_on_one_line_are_one_hunk() -> None:
    hunks = build_edit_hunks("x x x\n", [0, 2, 4], "x", "y")
    assert len(hunks) == 1
    assert hunks[0].sites == 3
    assert render_hunk(hunks[0]) == "@@ -1,1 +1,1 @@\n-x x x\n+y y y"


def test_3_6_4_report_budget_rule_is_inclusive() -> None:
    hunk = Hunk(0, 1, 0, 1, (DiffLine("-", "a"), DiffLine("+", "b")), sites=1)
    text = render_hunk(hunk)
    exact = len("First") + 1 + len(text) + 120
    assert render_edit_report("First", [hunk], 1, exact) == f"First\n{text}"
    assert render_edit_report("First", [hunk], 1, exact - 1) == "First\n…and 1 more replacement"


def test_3_6_4_report_stops_at_the_first_hunk_that_does_not_fit() -> None:
    small = Hunk(0, 1, 0, 1, (DiffLine("-", "a"), DiffLine("+", "b")), sites=1)
    large = Hunk(5, 1, 5, 1, (DiffLine("-", "a" * 500), DiffLine("+", "b")), sites=2)
    report = render_edit_report("F", [small, large, small], 4, 400)
    assert report == f"F\n{render_hunk(small)}\n…and 3 more replacements"


def test_3_6_4_report_shows_at_most_five_hunks() -> None:
    hunk = Hunk(0, 1, 0, 1, (DiffLine("-", "a"), DiffLine("+", "b")), sites=1)
    report = render_edit_report("F", [hunk] * 6, 6, 16000)
    assert report.count("@@") == 10
    assert report.endswith("\n…and 1 more replacement")


@settings(max_examples=400, deadline=None)
@given(
    pieces=st.lists(st.text(alphabet="ab\n\r", max_size=12), min_size=2, max_size=8),
    old=st.text(alphabet="ab\n", min_size=1, max_size=4),
    new=st.text(alphabet="abc\n", max_size=5),
    replace_all=st.booleans(),
)
def test_3_6_5_hunks_reconstruct_the_new_text(
    pieces: list[str], old: str, new: str, replace_all: bool
) -> None:
    assume(old != new)  # the tool refuses identical strings
    content = old.join(pieces)
    sites = find_occurrences(content, old)
    if not replace_all:
        sites = sites[:1]
    updated = content.replace(old, new, -1 if replace_all else 1)
    hunks = build_edit_hunks(content, sites, old, new)
    assert sum(h.sites for h in hunks) == len(sites)
    old_lines = split_lines_keepends(content)
    assert apply_hunks(old_lines, hunks) == split_lines_keepends(updated)
    for hunk in hunks:
        changed = [i for i, line in enumerate(hunk.lines) if line.tag != " "]
        assert changed, "a hunk always shows a change"
        assert changed[0] <= 3  # at most three context lines before
        assert len(hunk.lines) - 1 - changed[-1] <= 3  # and after


# --- write hunks --------------------------------------------------------------------------


def test_3_7_4_line_diff_trims_then_lcs() -> None:
    ops = line_diff(["a\n", "b\n", "c\n", "d\n"], ["a\n", "c\n", "x\n", "d\n"], max_cells=100)
    assert ops is not None
    assert [(op.tag, op.text) for op in ops] == [
        (" ", "a\n"),
        ("-", "b\n"),
        (" ", "c\n"),
        ("+", "x\n"),
        (" ", "d\n"),
    ]


def test_3_7_4_line_diff_cell_cap() -> None:
    old = [f"o{n}\n" for n in range(10)]
    new = [f"n{n}\n" for n in range(10)]
    assert line_diff(old, new, max_cells=99) is None
    assert line_diff(old, new, max_cells=100) is not None
    # Common prefix and suffix do not count as cells.
    assert line_diff(["s\n", *old, "e\n"], ["s\n", *new, "e\n"], max_cells=100) is not None


def test_3_7_4_deletions_come_before_insertions() -> None:
    text = render_write_diff("a\nb\nc\n", "a\nB\nc\n", first_line="F", budget=16000)
    assert text == "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c"


def test_3_7_4_content_unchanged() -> None:
    assert render_write_diff("x\n", "x\n", first_line="F", budget=16000) == "(content unchanged)"


def test_3_7_4_diff_too_large_fallback() -> None:
    old = "".join(f"{n}\n" for n in range(600))
    new = "".join(f"{n}x\n" for n in range(500))
    assert render_write_diff(old, new, first_line="F", budget=16000) == (
        "+500/\u2212600 lines vs the previous content (diff too large to show)"
    )


def test_3_7_4_cell_fallback_counts_only_the_middle() -> None:
    head = "".join(f"h{n}\n" for n in range(50))
    tail = "".join(f"t{n}\n" for n in range(50))
    old = head + "".join(f"{n}\n" for n in range(501)) + tail
    new = head + "".join(f"{n}x\n" for n in range(500)) + tail
    assert render_write_diff(old, new, first_line="F", budget=16000) == (
        "+500/\u2212501 lines vs the previous content (diff too large to show)"
    )


def test_3_7_4_fallback_counts_come_from_the_diff_when_it_was_computed() -> None:
    old = "".join(f"line{n}\n" for n in range(40))
    new = old.replace("line5\n", "five\n").replace("line30\n", "")
    text = render_write_diff(old, new, first_line="F" * 200, budget=300)
    assert text == "+1/\u22122 lines vs the previous content (diff too large to show)"


@settings(max_examples=300, deadline=None)
@given(
    old=st.lists(st.sampled_from(["a\n", "b\n", "c\n", "d", ""]), max_size=25),
    new=st.lists(st.sampled_from(["a\n", "b\n", "c\n", "e\n", "d"]), max_size=25),
)
def test_3_7_4_write_hunks_reconstruct_and_count_minimally(old: list[str], new: list[str]) -> None:
    old_text, new_text = "".join(old), "".join(new)
    old_lines, new_lines = split_lines_keepends(old_text), split_lines_keepends(new_text)
    ops = line_diff(old_lines, new_lines, max_cells=10**6)
    assert ops is not None
    assert [op.text for op in ops if op.tag != "+"] == old_lines
    assert [op.text for op in ops if op.tag != "-"] == new_lines
    added = sum(op.tag == "+" for op in ops)
    removed = sum(op.tag == "-" for op in ops)
    common = lcs_length(old_lines, new_lines)
    assert (added, removed) == (len(new_lines) - common, len(old_lines) - common)
    hunks = build_write_hunks(ops)
    assert apply_hunks(old_lines, hunks) == new_lines
    summary = render_write_diff(old_text, new_text, first_line="F", budget=0)
    if old_text != new_text:
        assert summary == (
            f"+{added}/\u2212{removed} lines vs the previous content (diff too large to show)"
        )
    assert count_cat_lines(new_text) == len(new_lines)


@settings(max_examples=200, deadline=None)
@given(
    old=st.lists(st.sampled_from(["a\n", "b\n", "c\n"]), max_size=30),
    new=st.lists(st.sampled_from(["a\n", "b\n", "x\n"]), max_size=30),
)
def test_3_7_4_hunks_are_separated_by_more_than_six_unchanged_lines(
    old: list[str], new: list[str]
) -> None:
    ops = line_diff(old, new, max_cells=10**6)
    assert ops is not None
    hunks = build_write_hunks(ops)
    for before, after in itertools.pairwise(hunks):
        gap = after.old_start - (before.old_start + before.old_count)
        # Three context lines on each side plus a gap: the changes were >= 7 lines apart.
        assert gap >= 1
