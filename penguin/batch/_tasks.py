"""The task file (spec B1.1): one JSON object per line, read into :class:`BatchTask`.

This module owns the task format and its validation, and nothing that runs a task.
Parsing is sans-IO (:func:`parse_tasks` takes the text); :func:`load_tasks` adds the
file read and, optionally, the checks that a ``workspace`` or ``template`` exists.
Every complaint names its line (:class:`~._errors.TaskFileError`), every bad line is
reported, in line order (one error carries them all), and a task file is accepted
whole or not at all: a batch never starts on half a file.

Relative ``workspace`` and ``template`` paths are read relative to the task file's
directory, so a data set and its templates can move together (tasks read from standard
input: the working directory).
"""

from __future__ import annotations

import codecs
import json
import math
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, final

import attrs

from penguin.approval import ApprovalMode, ApprovalModeError, parse_approval_mode

from ._errors import BatchOptionError, TaskFileError

__all__ = [
    "TASK_FIELDS",
    "UNATTENDED_MODES",
    "BatchTask",
    "check_task_paths",
    "check_unique_ids",
    "load_tasks",
    "parse_tasks",
    "unattended_mode",
]

TASK_FIELDS: Final = (
    "id",
    "prompt",
    "workspace",
    "template",
    "approve",
    "provider",
    "model_id",
    "max_turns",
    "timeout_s",
    "metadata",
    "sandbox",
)
"""The keys a task line may have, in the spec's order (B1.1)."""

_STDIN: Final = "-"
"""The task file name that means standard input (:func:`load_tasks`)."""

UNATTENDED_MODES: Final[tuple[ApprovalMode, ...]] = ("allow-all", "deny-all")
"""The approval modes a batch runs with: nobody is there to answer a question."""


@final
@attrs.frozen(kw_only=True)
class BatchTask:
    """One task of a batch: a prompt, where it works, and its own overrides.

    ``workspace`` is used as it is; ``template`` is copied into a fresh temporary
    workspace; neither means a fresh empty one. The other optional fields default
    to the batch's options (the command line's flags). ``metadata`` is carried into
    the task's result untouched.
    """

    id: str
    prompt: str
    workspace: Path | None = None
    template: Path | None = None
    approve: ApprovalMode | None = None
    provider: str | None = None
    model_id: str | None = None
    max_turns: int | None = None
    timeout_s: float | None = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict)
    sandbox: Mapping[str, Any] | None = None
    """``{"mode"?, "network"?}`` over the batch's sandbox (spec/sandbox.md X1.3)."""

    def to_json(self) -> dict[str, Any]:
        """The task as a task-file object (absent fields left out)."""
        out: dict[str, Any] = {"id": self.id, "prompt": self.prompt}
        for name in TASK_FIELDS[2:]:
            value = getattr(self, name)
            if name in ("metadata", "sandbox"):
                if value:
                    out[name] = dict(value)
            elif value is not None:
                out[name] = str(value) if isinstance(value, Path) else value
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], *, base: Path | None = None) -> BatchTask:
        """A task from one decoded task line; ``ValueError`` says what is wrong with it.

        ``base`` is the directory relative paths are read from (the task file's).
        """
        unknown = [key for key in obj if key not in TASK_FIELDS]
        if unknown:
            known = ", ".join(TASK_FIELDS)
            raise ValueError(f"unknown field {unknown[0]!r} (a task has: {known})")
        task_id = obj.get("id")
        if not isinstance(task_id, str) or not task_id.strip():
            raise ValueError(f'"id" must be a non-empty string, got {_shown(task_id)}')
        prompt = obj.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError(f'"prompt" must be a non-empty string, got {_shown(prompt)}')
        workspace = _path(obj, "workspace", base)
        template = _path(obj, "template", base)
        if workspace is not None and template is not None:
            raise ValueError('give "workspace" or "template", not both')
        approve = obj.get("approve")
        mode = None if approve is None else _mode(approve)
        provider = _text(obj, "provider")
        model_id = _text(obj, "model_id")
        if (provider is None) != (model_id is None):
            raise ValueError('give "provider" and "model_id" together')
        max_turns = obj.get("max_turns")
        if max_turns is not None and (
            not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1
        ):
            raise ValueError(f'"max_turns" must be a whole number >= 1, got {_shown(max_turns)}')
        timeout_s = obj.get("timeout_s")
        if timeout_s is not None and (
            not isinstance(timeout_s, int | float)
            or isinstance(timeout_s, bool)
            or not math.isfinite(timeout_s)
            or timeout_s <= 0
        ):
            raise ValueError(
                f'"timeout_s" must be a number of seconds > 0, got {_shown(timeout_s)}'
            )
        metadata = obj.get("metadata", {})
        if not isinstance(metadata, dict):
            raise ValueError(f'"metadata" must be a JSON object, got {_shown(metadata)}')
        sandbox = _sandbox(obj.get("sandbox"))
        return cls(
            id=task_id,
            prompt=prompt,
            workspace=workspace,
            template=template,
            approve=mode,
            provider=provider,
            model_id=model_id,
            max_turns=max_turns,
            timeout_s=None if timeout_s is None else float(timeout_s),
            metadata=metadata,
            sandbox=sandbox,
        )


_SANDBOX_MODES: Final = ("off", "read-only", "workspace-write")


def _sandbox(value: object) -> dict[str, Any] | None:
    """A task line's ``"sandbox"``: ``{"mode"?, "network"?}``; ``ValueError`` if not."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f'"sandbox" must be a JSON object, got {_shown(value)}')
    for key in value:
        if key not in ("mode", "network"):
            raise ValueError(f'"sandbox" has unknown key {key!r} (it has: mode, network)')
    mode = value.get("mode")
    if mode is not None and mode not in _SANDBOX_MODES:
        modes = ", ".join(_SANDBOX_MODES)
        raise ValueError(f'"sandbox.mode" must be one of {modes}, got {_shown(mode)}')
    network = value.get("network")
    if network is not None and not isinstance(network, bool):
        raise ValueError(f'"sandbox.network" must be true or false, got {_shown(network)}')
    return dict(value)


def unattended_mode(text: str) -> ApprovalMode:
    """An approval mode a batch can run with; :class:`BatchOptionError` for the others.

    ``always-ask`` and ``read-only`` ask someone about (some) calls, and a batch runs
    with nobody there to answer.
    """
    mode = parse_approval_mode(text)  # ApprovalModeError for a word that is no mode
    if mode not in UNATTENDED_MODES:
        raise BatchOptionError(
            "approve",
            f"approval mode {mode} asks before tool calls, and nobody is there to answer "
            "in a batch: use allow-all (the default) or deny-all; the command policy "
            "applies either way",
            mode,
        )
    return mode


def parse_tasks(text: str, *, path: Path | None = None) -> list[BatchTask]:
    """The tasks of a task file's ``text``; :class:`TaskFileError` names the first bad line.

    Lines end at a newline only (a carriage return before it is allowed); blank lines
    are skipped (they still count for line numbers). Relative paths are read relative
    to ``path``'s directory (the working directory when ``path`` is None). Ids must be
    unique.
    """
    tasks, _, problems = _parse(text, path, path.parent if path is not None else None)
    _raise_problems(problems, path)
    return tasks


def _parse(
    text: str, path: Path | None, base: Path | None
) -> tuple[list[BatchTask], list[int], list[tuple[int, str]]]:
    """The valid tasks, their line numbers, and every problem as (line, reason).

    ``path`` names the file in complaints; relative paths in it start at ``base``.
    """
    tasks: list[BatchTask] = []
    lines: list[int] = []
    problems: list[tuple[int, str]] = []
    # Lines end at "\n" only (JSON Lines): str.splitlines would also cut at U+0085,
    # U+2028 and the like, which a JSON string may hold as they are.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append((number, f"not valid JSON ({exc.msg})"))
            continue
        if not isinstance(obj, dict):
            problems.append((number, f"a task is a JSON object, got {_shown(obj)}"))
            continue
        try:
            tasks.append(BatchTask.from_json(obj, base=base))
        except ValueError as exc:
            problems.append((number, str(exc)))
            continue
        lines.append(number)
    problems.extend(_duplicate_ids(tasks, lines, path))
    return tasks, lines, problems


def _duplicate_ids(
    tasks: Sequence[BatchTask], lines: Sequence[int], path: Path | None
) -> Iterator[tuple[int, str]]:
    """``(line, problem)`` for every task whose id an earlier task already used (the one rule)."""
    seen: dict[str, int] = {}
    for task, number in zip(tasks, lines, strict=True):
        first = seen.setdefault(task.id, number)
        if first != number:
            where = f"line {first}" if path is not None else f"task {first}"
            yield number, f"duplicate id {task.id!r} (first used on {where})"


def _path_problems(tasks: Sequence[BatchTask], lines: Sequence[int]) -> list[tuple[int, str]]:
    problems = []
    for task, number in zip(tasks, lines, strict=True):
        for field in ("workspace", "template"):
            where: Path | None = getattr(task, field)
            if where is not None and not where.is_dir():
                state = "is not a directory" if where.exists() else "does not exist"
                problems.append((number, f'{field} "{where}" {state}'))
    return problems


def check_unique_ids(
    tasks: Sequence[BatchTask], *, lines: Sequence[int] | None = None, path: Path | None = None
) -> None:
    """:class:`TaskFileError` at the second task of an id that was already used."""
    numbers = lines if lines is not None else range(1, len(tasks) + 1)
    for number, problem in _duplicate_ids(tasks, numbers, path):
        raise TaskFileError(path, number, problem)


def check_task_paths(
    tasks: Iterable[BatchTask], *, lines: Sequence[int] | None = None, path: Path | None = None
) -> None:
    """:class:`TaskFileError` for a task whose ``workspace`` or ``template`` is no directory.

    Done before a local batch starts, so a typo stops the batch rather than failing
    one task among thousands. (Tasks run on other machines skip it: their paths are
    those machines'.)
    """
    for index, task in enumerate(tasks):
        number = lines[index] if lines is not None else index + 1
        for field in ("workspace", "template"):
            where: Path | None = getattr(task, field)
            if where is not None and not where.is_dir():
                state = "is not a directory" if where.exists() else "does not exist"
                raise TaskFileError(path, number, f'{field} "{where}" {state}')


def load_tasks(path: str | os.PathLike[str], *, check_paths: bool = True) -> list[BatchTask]:
    """The tasks of the JSON Lines file ``path`` (spec B1.1), validated whole.

    The file is UTF-8 (a byte order mark at its start is allowed, as RFC 8259 allows
    it). ``"-"`` reads standard input to its end instead: its relative paths start at
    the working directory, and its complaints name it ``<stdin>``.

    Raises :class:`TaskFileError` naming every bad line, in line order: bytes that are
    not UTF-8, bad JSON, a missing or mistyped field, an unknown field, a duplicate id,
    an approval mode a batch cannot use, or (``check_paths``) a ``workspace`` or
    ``template`` that is not a directory. ``OSError`` when the file cannot be read.
    """
    if os.fspath(path) == _STDIN:
        file, base = Path("<stdin>"), Path.cwd()
        data = sys.stdin.buffer.read()
    else:
        file = Path(path)
        base = file.parent
        data = file.read_bytes()
    text = _decoded(data, file)
    tasks, numbers, problems = _parse(text, file, base)
    if check_paths:
        problems.extend(_path_problems(tasks, numbers))
    _raise_problems(problems, file)
    return tasks


def _decoded(data: bytes, path: Path) -> str:
    """A task file's text; :class:`TaskFileError` at the first byte that is not UTF-8."""
    start = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[start:].decode("utf-8")
    except UnicodeDecodeError as error:
        at = start + error.start
        line_start = data.rfind(b"\n", 0, at) + 1
        line = data.count(b"\n", 0, at) + 1
        reason = f"not valid UTF-8 (byte 0x{data[at]:02x} at column {at - line_start + 1})"
        raise TaskFileError(path, line, reason) from None


def _raise_problems(problems: list[tuple[int, str]], path: Path | None) -> None:
    """One :class:`TaskFileError` for all ``problems`` (line, reason), in line order."""
    if not problems:
        return
    ordered = sorted(problems, key=lambda problem: problem[0])  # stable: a line's own order
    first = TaskFileError(path, *ordered[0])
    first.problems = tuple(TaskFileError(path, line, reason) for line, reason in ordered)
    raise first


def _path(obj: Mapping[str, Any], key: str, base: Path | None) -> Path | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f'"{key}" must be a directory path, got {_shown(value)}')
    where = Path(value).expanduser()
    if not where.is_absolute() and base is not None:
        where = base / where
    return where


def _text(obj: Mapping[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f'"{key}" must be a non-empty string, got {_shown(value)}')
    return value


def _mode(value: object) -> ApprovalMode:
    if not isinstance(value, str):
        raise ValueError(f'"approve" must be an approval mode, got {_shown(value)}')
    try:
        return unattended_mode(value)
    except ApprovalModeError as exc:
        raise ValueError(str(exc)) from None
    except BatchOptionError as exc:
        raise ValueError(str(exc).replace("approval mode ", '"approve": ', 1)) from None


def _shown(value: object) -> str:
    if value is None:
        return "nothing"
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."
