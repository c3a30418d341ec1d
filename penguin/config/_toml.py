"""The TOML files penguin edits: private and atomic on disk, comment-keeping in memory.

Two files are TOML: a project's ``.project_config.toml`` (``_project`` reads it,
``_project_edits`` rewrites it) and an agent's vault (``_vault``). Both may hold
secrets and both are edited by hand as well as by ``penguin config``, so they share
what this module owns:

- *private files*: :func:`read_private_toml` and :func:`write_private_toml`. Mode
  0600 on create; a looser mode is tightened, with a warning, whenever penguin
  reads or writes the file; a write replaces the file atomically
  (``_files.replace_text``), so a reader sees the old file or the new one and a
  failed write leaves the old file and no temporary;
- *places for messages*: tomlkit keeps no line numbers, so :func:`field_lines`,
  :func:`line_of_field` and :func:`first_repeated_field` find a key's line in the
  text, for a :class:`ConfigError` that names file, line and field;
- *document edits that keep the rest*: documents go through tomlkit, so comments,
  key order and unknown keys survive; :func:`header_document` starts a new file
  with its explaining comment, :func:`set_key` changes or inserts one key in place,
  :func:`same_value` says whether a stored value already is the wanted one (so an
  unchanged value is not rewritten), :func:`followed_by_more` whether a table
  appended under an entry needs a blank line after it, and :func:`unescaped_string`
  writes text with its backslashes as they are (regular expressions).

It knows no file's schema: which keys exist and what they mean is each file's
module. Blocking functions; async callers run them in a worker thread.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import tomlkit
from tomlkit.exceptions import ParseError, TOMLKitError
from tomlkit.items import Item, Table
from tomlkit.toml_document import TOMLDocument

from penguin._log import warn

from ._errors import ConfigError
from ._files import read_config_text, replace_text

__all__ = [
    "PRIVATE_FILE_MODE",
    "field_lines",
    "first_repeated_field",
    "followed_by_more",
    "header_document",
    "line_of_field",
    "read_private_toml",
    "same_value",
    "set_key",
    "unescaped_string",
    "write_private_toml",
]

PRIVATE_FILE_MODE: Final = 0o600

_PARSE_POSITION: Final = re.compile(r" at line \d+ col \d+$")


# ------------------------------------------------------------------ private files


def _tighten_mode(path: Path) -> None:
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return
    if mode & 0o077:
        try:
            os.chmod(path, PRIVATE_FILE_MODE)
        except OSError as error:
            warn(
                f"[penguin] {path} is readable by others (mode {mode:04o}) and could not "
                f"be made private: {error.strerror or error}"
            )
            return
        warn(f"[penguin] {path} was readable by others (mode {mode:04o}); set it to 0600.")


def read_private_toml(path: Path) -> TOMLDocument | None:
    """The parsed document at ``path``, or None when the file does not exist.

    A mode looser than 0600 is tightened first. Raises :class:`ConfigError` (with
    the line when tomlkit reports one) for a file that cannot be read, is not
    UTF-8, or is not valid TOML.
    """
    _tighten_mode(path)
    try:
        text = read_config_text(path, "TOML")
    except FileNotFoundError:
        return None
    try:
        return tomlkit.parse(text)
    except ParseError as error:
        reason = _PARSE_POSITION.sub("", str(error))
        # tomlkit reports a repeated key as a ParseError at its line, but one inside an
        # inline table as KeyAlreadyPresent (below): the same message either way.
        repeated = first_repeated_field(text)
        if repeated is None or repeated[1] != error.line:
            raise ConfigError(f"invalid TOML: {reason}", path, error.line) from None
    except TOMLKitError as error:
        # A repeated key (KeyAlreadyPresent) carries no position: find it ourselves.
        reason = str(error)
        repeated = first_repeated_field(text)
        if repeated is None:
            raise ConfigError(f"invalid TOML: {reason}", path) from None
    field, line = repeated
    raise ConfigError(f"invalid TOML: defined twice ({reason})", path, line, field) from None


def write_private_toml(path: Path, document: TOMLDocument) -> None:
    """Replace ``path`` with ``document`` atomically, as a 0600 file.

    Missing parent directories are created. The text goes to a temporary file
    (created 0600) in the same directory, is flushed to disk and renamed over
    ``path``, so readers see the old file or the new one, never a mix, and a
    failure leaves the old file and no temporary. Trailing blank lines are
    trimmed to one newline. Raises :class:`OSError`.
    """
    text = document.as_string().rstrip("\n")
    replace_text(path, f"{text}\n" if text else "", PRIVATE_FILE_MODE)


# ------------------------------------------------------------------ places for messages


_KEY_PART: Final = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')"""
_DOTTED_KEY: Final = rf"{_KEY_PART}(?:\s*\.\s*{_KEY_PART})*"
_TABLE_HEADER: Final = re.compile(rf"^\s*(\[\[?)\s*({_DOTTED_KEY})\s*\]\]?\s*(?:#.*)?$")
_KEY_LINE: Final = re.compile(rf"^\s*({_DOTTED_KEY})\s*=")
_KEY_PARTS: Final = re.compile(_KEY_PART)


def _key_parts(dotted: str) -> list[str]:
    parts = []
    for part in _KEY_PARTS.findall(dotted):
        if part[:1] in {'"', "'"}:
            part = part[1:-1]
        parts.append(part)
    return parts


def _scan(text: str) -> Iterator[tuple[str, int]]:
    """Every table header and ``key =`` line of a TOML text, as ``(field, line)``."""
    array_index: dict[str, int] = {}
    prefix = ""
    delimiter: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if delimiter is not None:
            if line.count(delimiter) % 2 == 1:
                delimiter = None
            continue
        if header := _TABLE_HEADER.match(line):
            parts = _key_parts(header.group(2))
            prefix = ""
            for position, part in enumerate(parts):
                prefix = f"{prefix}.{part}" if prefix else part
                last = position == len(parts) - 1
                if last and header.group(1) == "[[":
                    array_index[prefix] = array_index.get(prefix, -1) + 1
                if prefix in array_index:
                    prefix = f"{prefix}[{array_index[prefix]}]"
            yield prefix, number
            continue
        if key := _KEY_LINE.match(line):
            field = ".".join(_key_parts(key.group(1)))
            yield (f"{prefix}.{field}" if prefix else field), number
        for quote in ('"""', "'''"):
            if line.count(quote) % 2 == 1:
                delimiter = quote
                break


def field_lines(text: str) -> dict[str, int]:
    """Where each key of a TOML text is: ``{"models[1].vision": 12, "models[1]": 9, ...}``.

    tomlkit keeps no line numbers, so this is a line scanner for error messages:
    table headers (``[a.b]``, ``[[a.b]]`` with their array index) and ``key =``
    lines, first occurrence wins, lines inside multi-line strings skipped. Keys
    written inside inline tables or arrays are not listed; :func:`line_of_field`
    then falls back to the enclosing key's line.
    """
    lines: dict[str, int] = {}
    for field, number in _scan(text):
        lines.setdefault(field, number)
    return lines


def first_repeated_field(text: str) -> tuple[str, int] | None:
    """The first key defined twice in a TOML text and the line of its second definition."""
    seen: set[str] = set()
    for field, number in _scan(text):
        if field in seen:
            return field, number
        seen.add(field)
    return None


def line_of_field(lines: dict[str, int], field: str) -> int | None:
    """The line of ``field`` in :func:`field_lines` output, or of its nearest listed parent."""
    while field:
        if field in lines:
            return lines[field]
        cut = max(field.rfind("."), field.rfind("["))
        field = field[:cut] if cut > 0 else ""
    return None


# ------------------------------------------------------------------ document edits


def header_document(lines: tuple[str, ...]) -> TOMLDocument:
    """A new document that starts with ``lines`` as comments and a blank line."""
    document = tomlkit.document()
    for line in lines:
        document.add(tomlkit.comment(line))
    document.add(tomlkit.nl())
    return document


def followed_by_more(document: TOMLDocument, name: str) -> bool:
    """Whether a key or table comes after the top-level entry ``name`` of ``document``.

    Tables appended to the last entry of a file need no blank line after them; those
    appended to an entry with more after it do, or the next table sticks to them.
    """
    found = False
    for key, _ in document.body:
        if found and key is not None:
            return True
        found = found or (key is not None and key.key == name)
    return False


def same_value(current: object, wanted: object) -> bool:
    """Whether a stored value (a tomlkit item, or plain) is ``wanted``, type included.

    ``True`` is not ``1`` here: a value of another type is rewritten.
    """
    plain = current.unwrap() if hasattr(current, "unwrap") else current
    return type(plain) is type(wanted) and plain == wanted


def set_key(table: Table, key: str, value: object, after: tuple[str, ...]) -> None:
    """Set ``key``; a new key goes right after the last of ``after`` the table has.

    An existing key is replaced only when its value differs, which keeps its line's
    position and comment. A table that has none of ``after`` gets the key after its
    last key.
    """
    if key in table:
        if not same_value(table[key], value):
            table[key] = value  # replacing keeps the line's position and comment
        return
    present = [name for name, _ in table.value.body if name is not None]
    anchor = next((name for name in reversed(present) if name.key in after), None)
    anchor = anchor or (present[-1] if present else None)
    if anchor is None:
        table[key] = value
    else:
        # Not table[key] = value, which appends after the comments and blank lines
        # that end the table (visually, they belong to what follows). tomlkit has no
        # public insert; _insert_at is its own (0.15 dropped the _insert_after used before).
        container = table.value
        body = container.body
        index = max(i for i, (name, _) in enumerate(body) if name == anchor)
        if index + 1 < len(body):
            container._insert_at(index + 1, key, value)
        else:  # nothing ends the table after the anchor: appending is the same
            table[key] = value


def unescaped_string(text: str, *, prefer_literal: bool) -> Item:
    """``text`` as a TOML string that shows its backslashes as they are, when it can.

    A literal string when ``prefer_literal`` or when the text has a backslash:
    ``'...'`` when it has no ``'``, ``'''...'''`` when it has one but no
    ``'''`` and does not end in ``'``. A basic (escaped) string otherwise, and
    whenever the text holds a control character, which literal strings cannot.
    """
    if any((ord(char) < 0x20 and char != "\t") or ord(char) == 0x7F for char in text):
        return tomlkit.string(text)
    if not prefer_literal and "\\" not in text:
        return tomlkit.string(text)
    if "'" not in text:
        return tomlkit.string(text, literal=True)
    if "'''" not in text and not text.endswith("'"):
        return tomlkit.string(text, literal=True, multiline=True)
    return tomlkit.string(text)
