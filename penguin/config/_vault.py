"""An agent's vault, ``agent_state/.vault.toml``, and the private-TOML-file plumbing.

The vault holds environment variables that penguin hands to every command the
agent runs (reference 4.9: they override the host's values; the hardened set still
wins). The file is flat TOML, one ``NAME = "value"`` per line::

    # comments are kept when penguin rewrites the file
    GITHUB_TOKEN = "ghp_..."
    PGPASSWORD = "..."

Keys must be environment variable names (:data:`ENV_NAME_PATTERN`); values are
strings. Owns reading and editing that file, and — shared with ``_project`` —
reading and writing *private* TOML files: mode 0600 on create, a looser mode is
tightened (with a warning) whenever penguin reads or writes the file, writes are
atomic (a temporary file in the same directory, then ``os.replace``), and
documents go through tomlkit so comments and unknown keys survive an edit.

It does not decide where the vault lives (:class:`~penguin.config.AgentPaths`)
nor inject it into processes (the Environment takes a plain ``dict``). Values
never appear in an error message. All functions are blocking; async callers run
them in a worker thread.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import tomlkit
from tomlkit.exceptions import ParseError, TOMLKitError
from tomlkit.toml_document import TOMLDocument

from penguin._log import warn

from ._errors import ConfigError

__all__ = [
    "ENV_NAME_PATTERN",
    "PRIVATE_FILE_MODE",
    "field_lines",
    "first_repeated_field",
    "header_document",
    "line_of_field",
    "list_vault_keys",
    "load_vault",
    "read_private_toml",
    "remove_vault",
    "set_vault",
    "validate_env_name",
    "write_private_toml",
]

PRIVATE_FILE_MODE: Final = 0o600

ENV_NAME_PATTERN: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A portable environment variable name (matched whole)."""

_VAULT_HEADER: Final = (
    "An agent's vault: environment variables handed to every command this agent runs.",
    "They override the host's variables of the same name. Keep this file private (0600).",
    "Edit it with `penguin config vault set NAME` (reads the value from stdin) or by hand:",
    'NAME = "value", one per line; names are environment variable names.',
)

_PARSE_POSITION: Final = re.compile(r" at line \d+ col \d+$")


def validate_env_name(name: str) -> str:
    """``name`` itself when it is a valid environment variable name, else :class:`ValueError`."""
    if ENV_NAME_PATTERN.fullmatch(name) is None:
        raise ValueError(
            f"invalid vault key {name!r}: use an environment variable name — letters, "
            "digits and '_', not starting with a digit (e.g. GITHUB_TOKEN)"
        )
    return name


# ------------------------------------------------------------------ private TOML files


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
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise ConfigError("is a directory, not a TOML file", path) from None
    except OSError as error:
        raise ConfigError(f"cannot be read: {error.strerror or error}", path) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ConfigError("is not valid UTF-8 text", path, line) from None
    try:
        return tomlkit.parse(text)
    except ParseError as error:
        reason = _PARSE_POSITION.sub("", str(error))
        raise ConfigError(f"invalid TOML: {reason}", path, error.line) from None
    except TOMLKitError as error:
        # A repeated key (KeyAlreadyPresent) carries no position: find it ourselves.
        repeated = first_repeated_field(text)
        if repeated is None:
            raise ConfigError(f"invalid TOML: {error}", path) from None
        field, line = repeated
        raise ConfigError(f"invalid TOML: defined twice ({error})", path, line, field) from None


def write_private_toml(path: Path, document: TOMLDocument) -> None:
    """Replace ``path`` with ``document`` atomically, as a 0600 file.

    Missing parent directories are created. The text goes to a temporary file
    (created 0600) in the same directory, is flushed to disk and renamed over
    ``path``, so readers see the old file or the new one, never a mix, and a
    failure leaves the old file and no temporary. Trailing blank lines are
    trimmed to one newline. Raises :class:`OSError`.
    """
    text = document.as_string().rstrip("\n")
    text = f"{text}\n" if text else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            os.fchmod(stream.fileno(), PRIVATE_FILE_MODE)
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


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


# ------------------------------------------------------------------ the vault


def _load(path: Path) -> tuple[TOMLDocument | None, dict[str, str]]:
    document = read_private_toml(path)
    if document is None:
        return None, {}
    lines = field_lines(document.as_string())
    values: dict[str, str] = {}
    for key, value in document.unwrap().items():
        line = lines.get(key)
        if ENV_NAME_PATTERN.fullmatch(key) is None:
            raise ConfigError(
                "not an environment variable name (letters, digits and '_', "
                "not starting with a digit)",
                path,
                line,
                key,
            )
        if not isinstance(value, str):
            kind = "a table" if isinstance(value, dict) else f"a {type(value).__name__}"
            raise ConfigError(f'expected a string (NAME = "value"), got {kind}', path, line, key)
        values[key] = value
    return document, values


def load_vault(path: str | os.PathLike[str]) -> dict[str, str]:
    """The vault at ``path`` as ``{NAME: value}``, in file order; a missing file is empty.

    Raises :class:`ConfigError` naming the file, line and key for broken TOML, a
    key that is not an environment variable name, or a value that is not a
    string (the value itself is never shown).
    """
    return _load(Path(path))[1]


def list_vault_keys(path: str | os.PathLike[str]) -> list[str]:
    """The names stored in the vault at ``path``, in file order (values are not returned)."""
    return list(load_vault(path))


def set_vault(path: str | os.PathLike[str], key: str, value: str) -> None:
    """Store ``key = value`` in the vault, adding or replacing it; other entries and comments stay.

    Raises :class:`ValueError` for a key that is not an environment variable name
    or a value containing a NUL character (no process environment can hold one),
    :class:`ConfigError` when the existing file is broken (it is not overwritten),
    :class:`OSError` when the file cannot be written.
    """
    validate_env_name(key)
    if "\x00" in value:
        raise ValueError(
            f"the value of {key} contains a NUL character, which no environment allows"
        )
    file = Path(path)
    document, _ = _load(file)
    if document is None:
        document = header_document(_VAULT_HEADER)
    document[key] = value
    write_private_toml(file, document)


def remove_vault(path: str | os.PathLike[str], key: str) -> bool:
    """Remove ``key`` from the vault; True when it was there, False when there was nothing to do.

    The file is rewritten only when something was removed. Raises like :func:`set_vault`.
    """
    validate_env_name(key)
    file = Path(path)
    document, values = _load(file)
    if document is None or key not in values:
        return False
    del document[key]
    write_private_toml(file, document)
    return True
