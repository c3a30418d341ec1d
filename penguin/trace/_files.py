"""Where traces live on disk, and finding them again (reference 7.1, D4).

Layout::

    <traces_dir>/<yyyy-mm-dd>/<session_id>_<NNN>.jsonl

``yyyy-mm-dd`` is the *local* date on which the writer was created (a resumed session
keeps writing into the date directory of the file it continues: the file follows the
model context, not the calendar); ``NNN`` is the 1-based index of the model context,
zero-padded to three digits (``001``), growing wider only past ``999``.

This module owns the naming rules and the directory scans the resume code needs: every
file of a session in index order (:func:`trace_files`, :func:`trace_locations`), the
newest file of a session (:func:`find_session`) and the most recently written session
(:func:`latest_session`). It writes nothing and parses no trace content, but for the
first line's ``session_meta`` when :func:`latest_session` is to skip subagents'
sessions.

The scans are blocking (a directory listing per date directory): call them through
``trio.to_thread.run_sync`` from async code. A missing ``traces_dir`` is an empty
result, never an error.
"""

from __future__ import annotations

import datetime
import json
import os
import re
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Final, final

import attrs

__all__ = [
    "TRACE_SUFFIX",
    "TraceLocation",
    "check_path_component",
    "find_session",
    "latest_session",
    "local_date_dir",
    "trace_file_name",
    "trace_files",
    "trace_locations",
]

TRACE_SUFFIX: Final = ".jsonl"
_FILE_NAME: Final = re.compile(r"(?P<session_id>.+)_(?P<index>[0-9]{3,})\.jsonl")


def check_path_component(value: str, what: str) -> str:
    """Return ``value`` if it can name one directory entry; raise ValueError otherwise."""
    if not value or value in (".", "..") or "/" in value or "\0" in value or os.sep in value:
        raise ValueError(f"{what} must be a plain file name (no '/', not '.' or '..'): {value!r}")
    return value


def local_date_dir(today: datetime.date | None = None) -> str:
    """The date directory name for ``today`` (default: the local date now), ``yyyy-mm-dd``."""
    return (today or datetime.date.today()).isoformat()


def trace_file_name(session_id: str, index: int) -> str:
    """``<session_id>_<NNN>.jsonl``: the file name of context ``index`` (1-based)."""
    if isinstance(index, bool) or not isinstance(index, int) or index < 1:
        raise ValueError(f"a trace index is an integer from 1, got {index!r}")
    return f"{session_id}_{index:03d}{TRACE_SUFFIX}"


@final
@attrs.frozen
class TraceLocation:
    """One trace file, with the parts of its path that a resumed writer needs.

    ``TraceWriter(traces_dir, loc.session_id, start_index=loc.index,
    date_dir=loc.date_dir)`` continues exactly this file.
    """

    path: Path
    """The file: ``<traces_dir>/<date_dir>/<session_id>_<NNN>.jsonl``."""
    session_id: str
    date_dir: str
    """The name of the date directory holding the file."""
    index: int
    """The 1-based context index parsed from the file name."""


def _parse(date_dir: Path, name: str) -> TraceLocation | None:
    match = _FILE_NAME.fullmatch(name)
    if match is None:
        return None
    index = int(match["index"])
    if index < 1:
        return None
    return TraceLocation(
        path=date_dir / name, session_id=match["session_id"], date_dir=date_dir.name, index=index
    )


def _scan(traces_dir: Path, wanted: Collection[str] | None) -> list[TraceLocation]:
    found: list[TraceLocation] = []
    try:
        date_dirs = [entry for entry in os.scandir(traces_dir) if entry.is_dir()]
    except (FileNotFoundError, NotADirectoryError):
        return found
    for date_dir in date_dirs:
        try:
            entries = list(os.scandir(date_dir.path))
        except (FileNotFoundError, NotADirectoryError):
            continue  # removed (or replaced) between the two listings
        for entry in entries:
            name = entry.name
            if wanted is not None and name.rpartition("_")[0] not in wanted:
                continue  # another session's: not parsed (the cheap test comes first)
            if name.endswith(TRACE_SUFFIX) and entry.is_file():
                location = _parse(traces_dir / date_dir.name, name)
                if location is not None:
                    found.append(location)
    return found


def _order(location: TraceLocation) -> tuple[str, int, str]:
    return (location.session_id, location.index, location.date_dir)


def trace_locations(
    traces_dir: str | os.PathLike[str],
    session_id: str | None = None,
    *,
    sessions: Iterable[str] | None = None,
) -> list[TraceLocation]:
    """Every trace file under ``traces_dir`` (of one session, or of all), in index order.

    Files are found in any subdirectory of ``traces_dir`` whose name matches
    ``<session_id>_<NNN>.jsonl``; other entries are ignored. The order is by session id,
    then index, then date directory (two date directories holding the same index do not
    happen unless files were moved by hand; both are listed). ``sessions`` keeps the
    files of those sessions only (with ``session_id``: of the sessions in both); the
    other files' names are passed over before they are parsed, so a scan for a few
    sessions costs little more than the directory listings.
    """
    wanted: set[str] | None = None if sessions is None else set(sessions)
    if session_id is not None:
        wanted = {session_id} if wanted is None else wanted & {session_id}
    return sorted(_scan(Path(traces_dir), wanted), key=_order)


def trace_files(traces_dir: str | os.PathLike[str], session_id: str) -> list[Path]:
    """The paths of every trace file of ``session_id``, across date directories, in index order."""
    return [loc.path for loc in trace_locations(traces_dir, session_id)]


def find_session(traces_dir: str | os.PathLike[str], session_id: str) -> TraceLocation | None:
    """The newest file (highest index) of ``session_id``, or None when it has no trace."""
    locations = trace_locations(traces_dir, session_id)
    return locations[-1] if locations else None


def latest_session(
    traces_dir: str | os.PathLike[str], *, skip_subagents: bool = False
) -> TraceLocation | None:
    """The newest file of the session written to most recently, or None when there is none.

    "Most recently" is the largest modification time of any of a session's files; ties
    go to the larger session id (ids start with their creation time). Used to resume
    "the last session" when the user names none. ``skip_subagents`` passes over the
    sessions whose newest file does not open with a ``session_meta`` of a top-level
    session (a subagent's ``source: "subagent"``, or no readable ``session_meta``).
    """
    newest: dict[str, TraceLocation] = {}
    mtime: dict[str, int] = {}
    for location in trace_locations(traces_dir):
        newest[location.session_id] = location  # index order: the last one wins
        try:
            stamp = location.path.stat().st_mtime_ns
        except FileNotFoundError:
            continue
        mtime[location.session_id] = max(stamp, mtime.get(location.session_id, stamp))
    order = sorted(mtime, key=lambda sid: (mtime[sid], sid), reverse=True)
    if skip_subagents:
        order = [sid for sid in order if _opens_top_level_session(newest[sid].path)]
    return newest[order[0]] if order else None


def _opens_top_level_session(path: Path) -> bool:
    """Whether ``path`` opens with the ``session_meta`` of a session that is not a subagent's."""
    try:
        with path.open("rb") as file:
            first = json.loads(file.readline())
    except (OSError, ValueError):
        return False
    if not isinstance(first, dict) or first.get("type") != "session_meta":
        return False
    payload = first.get("payload")
    return isinstance(payload, dict) and payload.get("source") != "subagent"
