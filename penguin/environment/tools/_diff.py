r"""Diff rendering for edit_file (reference 3.6.4-3.6.5) and write_file (reference 3.7.4). Sans-IO.

Owns the hunks the model sees after a successful edit or overwrite: which lines
form a hunk, how hunks merge, their headers and line prefixes, and the size rules
that cut or replace the rendering. It never touches a file, a thread or the event
loop; callers hand it text and get text back.

Lines are compared WITH their terminators (``"a"`` and ``"a\n"`` differ), so a
change of the final newline alone still shows as a changed line; they are displayed
without it (and without one trailing ``\r``), cut to 2000 chars.

Two hunk builders share one :class:`Hunk` and one renderer:

- edit hunks come from the replacement sites (no general diff is needed: each
  merged region is re-applied line-wise, and common leading/trailing lines of the
  region turn into context);
- write hunks come from a line diff: common prefix and suffix trimmed, an LCS
  table on the middle (capped at 250,000 cells), changes grouped when at most six
  unchanged lines apart, three lines of context.

Decision where the spec is silent: an edit site whose ``old_string`` ends with a
newline that ``new_string`` does not keep joins the following line in the new text,
so that following line is counted in the site's span (otherwise the rendered lines
would not be the file's lines).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Final, Literal, final

import attrs

from ._files import plural, sanitize_text, split_lines_keepends, truncate_line

__all__ = [
    "DiffLine",
    "DiffOp",
    "Hunk",
    "build_edit_hunks",
    "build_write_hunks",
    "line_diff",
    "render_edit_report",
    "render_hunk",
    "render_write_diff",
]

CONTEXT_LINES: Final = 3
EDIT_MAX_HUNKS: Final = 5
EDIT_MERGE_DISTANCE: Final = 3
"""Sites merge when ``next.start - 3 <= prev.end + 3``."""
WRITE_MERGE_GAP: Final = 6
"""Changes at most this many unchanged lines apart share a write hunk."""
WRITE_MAX_CELLS: Final = 250_000
WRITE_MAX_LINES: Final = 60
BUDGET_RESERVE: Final = 120

Tag = Literal[" ", "-", "+"]


@final
@attrs.frozen
class DiffLine:
    r"""One hunk line: ``tag`` is `` ``, ``-`` or ``+``; ``text`` keeps its ``\n``."""

    tag: Tag
    text: str


@final
@attrs.frozen
class Hunk:
    """A contiguous block of a diff. Starts are 0-based line indices.

    ``old_start`` is the index of the first old line the hunk covers (for a hunk
    covering no old line: the index it inserts before); likewise ``new_start``.
    ``sites`` counts the edit replacements the hunk shows (0 for write hunks).
    """

    old_start: int
    old_count: int
    new_start: int
    new_count: int
    lines: tuple[DiffLine, ...]
    sites: int = 0


def _header_start(start: int, count: int) -> int:
    # 1-based, printed minus one when the side is empty (git-style).
    return start + 1 if count else start


def render_hunk(hunk: Hunk) -> str:
    """``@@ -a,b +c,d @@`` then one prefixed display line per hunk line."""
    header = (
        f"@@ -{_header_start(hunk.old_start, hunk.old_count)},{hunk.old_count}"
        f" +{_header_start(hunk.new_start, hunk.new_count)},{hunk.new_count} @@"
    )
    rows = [header]
    rows.extend(line.tag + _display(line.text) for line in hunk.lines)
    return "\n".join(rows)


def _display(text: str) -> str:
    if text.endswith("\n"):
        text = text[:-1]
    if text.endswith("\r"):
        text = text[:-1]
    return truncate_line(sanitize_text(text))


# --- edit_file ----------------------------------------------------------------------------


def build_edit_hunks(content: str, sites: Sequence[int], old: str, new: str) -> list[Hunk]:
    """Every hunk of replacing ``old`` by ``new`` at the char offsets ``sites`` of ``content``.

    ``sites`` are the starts of the replaced, non-overlapping occurrences, ascending.
    The returned ``new_start`` values already carry the shift of earlier hunks.
    """
    if not sites:
        return []
    line_starts = [0]
    position = content.find("\n")
    while position != -1:
        line_starts.append(position + 1)
        position = content.find("\n", position + 1)
    line_count = len(split_lines_keepends(content))
    if line_starts[-1] == len(content) and len(line_starts) > 1:
        line_starts.pop()  # no line starts after a final newline

    def line_of(offset: int) -> int:
        return bisect.bisect_right(line_starts, offset) - 1

    def line_end(index: int) -> int:
        return line_starts[index + 1] if index + 1 < len(line_starts) else len(content)

    joins_next = old.endswith("\n") and not new.endswith("\n")
    # Regions of merged sites: [first site, last site, first line, last line].
    regions: list[list[int]] = []
    for index, start in enumerate(sites):
        first = line_of(start)
        last = line_of(start + len(old) - 1)
        if joins_next and last + 1 < line_count:
            last += 1
        if regions and first - EDIT_MERGE_DISTANCE <= regions[-1][3] + EDIT_MERGE_DISTANCE:
            regions[-1][1] = index
            regions[-1][3] = max(regions[-1][3], last)
        else:
            regions.append([index, index, first, last])

    old_lines = split_lines_keepends(content)
    hunks: list[Hunk] = []
    shift = 0
    for first_site, last_site, first_line, last_line in regions:
        begin, end = line_starts[first_line], line_end(last_line)
        pieces: list[str] = []
        cursor = begin
        for start in sites[first_site : last_site + 1]:
            pieces.append(content[cursor:start])
            pieces.append(new)
            cursor = start + len(old)
        pieces.append(content[cursor:end])
        region_old = old_lines[first_line : last_line + 1]
        region_new = split_lines_keepends("".join(pieces))
        hunk = _hunk_around(
            old_lines,
            region_start=first_line,
            region_old=region_old,
            region_new=region_new,
            shift=shift,
            sites=last_site - first_site + 1,
        )
        shift += hunk.new_count - hunk.old_count
        hunks.append(hunk)
    return hunks


def _hunk_around(
    old_lines: Sequence[str],
    *,
    region_start: int,
    region_old: Sequence[str],
    region_new: Sequence[str],
    shift: int,
    sites: int,
) -> Hunk:
    limit = min(len(region_old), len(region_new))
    head = 0
    while head < limit and region_old[head] == region_new[head]:
        head += 1
    tail = 0
    while tail < limit - head and region_old[-1 - tail] == region_new[-1 - tail]:
        tail += 1
    removed = region_old[head : len(region_old) - tail]
    added = region_new[head : len(region_new) - tail]
    core_start = region_start + head
    core_end = core_start + len(removed)
    before_start = max(0, core_start - CONTEXT_LINES)
    after_end = min(len(old_lines), core_end + CONTEXT_LINES)
    lines = [DiffLine(" ", text) for text in old_lines[before_start:core_start]]
    lines += [DiffLine("-", text) for text in removed]
    lines += [DiffLine("+", text) for text in added]
    lines += [DiffLine(" ", text) for text in old_lines[core_end:after_end]]
    context = (core_start - before_start) + (after_end - core_end)
    return Hunk(
        old_start=before_start,
        old_count=context + len(removed),
        new_start=before_start + shift,
        new_count=context + len(added),
        lines=tuple(lines),
        sites=sites,
    )


def render_edit_report(first_line: str, hunks: Sequence[Hunk], replaced: int, budget: int) -> str:
    """The edit_file output: first line, up to five hunks that fit, the "…and k more" line.

    A hunk is added while ``used + 1 + len(hunk) <= budget - 120`` (``used`` starts
    at the first line's length); the first one that does not fit ends the list.
    """
    parts = [first_line]
    used = len(first_line)
    covered = 0
    for hunk in hunks[:EDIT_MAX_HUNKS]:
        text = render_hunk(hunk)
        if used + 1 + len(text) > budget - BUDGET_RESERVE:
            break
        parts.append(text)
        used += 1 + len(text)
        covered += hunk.sites
    remaining = replaced - covered
    if remaining > 0:
        parts.append(f"…and {plural(remaining, 'more replacement')}")
    return "\n".join(parts)


# --- write_file ---------------------------------------------------------------------------


@final
@attrs.frozen
class DiffOp:
    """One step of a line diff, positioned in both files."""

    tag: Tag
    old_index: int  # the old line (for " " and "-"), else the old position it precedes
    new_index: int  # the new line (for " " and "+"), else the new position it precedes
    text: str


def line_diff(old: Sequence[str], new: Sequence[str], *, max_cells: int) -> list[DiffOp] | None:
    """A shortest edit script of ``old`` into ``new`` as ops over the whole files.

    Common leading and trailing lines are trimmed first; the LCS runs on the rest.
    ``None`` when the middle has more than ``max_cells`` (old x new) cells.
    Deletions come before insertions within a change.
    """
    limit = min(len(old), len(new))
    head = 0
    while head < limit and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < limit - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    a = old[head : len(old) - tail]
    b = new[head : len(new) - tail]
    if len(a) * len(b) > max_cells:
        return None
    ops = [DiffOp(" ", i, i, old[i]) for i in range(head)]
    ids: dict[str, int] = {}
    a_ids = [ids.setdefault(text, len(ids)) for text in a]
    b_ids = [ids.setdefault(text, len(ids)) for text in b]
    n, m = len(a_ids), len(b_ids)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        row, below, ai = table[i], table[i + 1], a_ids[i]
        for j in range(m - 1, -1, -1):
            if ai == b_ids[j]:
                row[j] = below[j + 1] + 1
            else:
                right = row[j + 1]
                down = below[j]
                row[j] = down if down >= right else right
    i = j = 0
    while i < n or j < m:
        if i < n and j < m and a_ids[i] == b_ids[j]:
            ops.append(DiffOp(" ", head + i, head + j, a[i]))
            i += 1
            j += 1
        elif j >= m or (i < n and table[i + 1][j] >= table[i][j + 1]):
            ops.append(DiffOp("-", head + i, head + j, a[i]))
            i += 1
        else:
            ops.append(DiffOp("+", head + i, head + j, b[j]))
            j += 1
    old_rest, new_rest = len(old) - tail, len(new) - tail
    ops += [DiffOp(" ", old_rest + k, new_rest + k, old[old_rest + k]) for k in range(tail)]
    return ops


def build_write_hunks(ops: Sequence[DiffOp]) -> list[Hunk]:
    """Group the changes of ``ops`` into hunks with three lines of context."""
    changes = [k for k, op in enumerate(ops) if op.tag != " "]
    if not changes:
        return []
    groups: list[tuple[int, int]] = []
    first = last = changes[0]
    for k in changes[1:]:
        if k - last - 1 <= WRITE_MERGE_GAP:
            last = k
        else:
            groups.append((first, last))
            first = last = k
    groups.append((first, last))
    hunks = []
    for first, last in groups:
        low = max(0, first - CONTEXT_LINES)
        high = min(len(ops), last + 1 + CONTEXT_LINES)
        block = ops[low:high]
        hunks.append(
            Hunk(
                old_start=block[0].old_index,
                old_count=sum(1 for op in block if op.tag != "+"),
                new_start=block[0].new_index,
                new_count=sum(1 for op in block if op.tag != "-"),
                lines=tuple(DiffLine(op.tag, op.text) for op in block),
            )
        )
    return hunks


def render_write_diff(old_text: str, new_text: str, *, first_line: str, budget: int) -> str:
    """What follows write_file's first line on an overwrite (reference 3.7.4); may be ``""``.

    ``(content unchanged)`` for equal texts; otherwise the hunks, or the one-line
    ``+added/−removed`` summary when the middle exceeds 250,000 LCS cells, the hunks
    exceed 60 lines (headers included), or first line + newline + hunks exceed
    ``budget - 120`` chars.
    """
    if old_text == new_text:
        return "(content unchanged)"
    old_lines = split_lines_keepends(old_text)
    new_lines = split_lines_keepends(new_text)
    ops = line_diff(old_lines, new_lines, max_cells=WRITE_MAX_CELLS)
    if ops is None:
        limit = min(len(old_lines), len(new_lines))
        head = 0
        while head < limit and old_lines[head] == new_lines[head]:
            head += 1
        tail = 0
        while tail < limit - head and old_lines[-1 - tail] == new_lines[-1 - tail]:
            tail += 1
        return _too_large(len(new_lines) - head - tail, len(old_lines) - head - tail)
    hunks = build_write_hunks(ops)
    added = sum(1 for op in ops if op.tag == "+")
    removed = sum(1 for op in ops if op.tag == "-")
    if sum(1 + len(h.lines) for h in hunks) > WRITE_MAX_LINES:
        return _too_large(added, removed)
    text = "\n".join(render_hunk(h) for h in hunks)
    if len(first_line) + 1 + len(text) > budget - BUDGET_RESERVE:
        return _too_large(added, removed)
    return text


def _too_large(added: int, removed: int) -> str:
    return f"+{added}/\u2212{removed} lines vs the previous content (diff too large to show)"
