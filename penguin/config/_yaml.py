"""YAML plumbing for the configuration files: round-trip setup, located values, atomic writes.

Owns the one ruamel.yaml round-trip configuration penguin reads and writes with
(comments and key order survive an edit), :class:`Located` — a value read from a
document together with its dotted field path and 1-based line, whose ``fail``
raises a :class:`ConfigError` pointing at that place — the small typed readers
built on it (``expect_*``, :func:`reject_unknown_keys`, :func:`to_json_value`),
and :func:`write_text_atomically`.

It knows no file's schema: ``_system`` and ``_mcp`` decide which keys exist and
what they mean. All functions are synchronous; async callers run them in a
worker thread.
"""

from __future__ import annotations

import difflib
import json
import math
import stat
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any, NoReturn, final

import attrs
from ruamel.yaml import YAML
from ruamel.yaml.comments import TaggedScalar
from ruamel.yaml.scalarbool import ScalarBoolean

from penguin._log import warn

from ._errors import ConfigError
from ._files import replace_text

__all__ = [
    "Located",
    "describe_value",
    "expect_bool",
    "expect_choice",
    "expect_int",
    "expect_list",
    "expect_mapping",
    "expect_str",
    "reject_unknown_keys",
    "round_trip_yaml",
    "to_json_value",
    "write_text_atomically",
]


def round_trip_yaml() -> YAML:
    """A ruamel.yaml instance in round-trip mode, set up the way penguin writes files."""
    yaml = YAML(typ="rt")
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096  # long descriptions stay on one line instead of being re-folded
    yaml.preserve_quotes = True
    return yaml


def describe_value(value: object) -> str:
    """A short rendering of a YAML value for messages: ``"fast"``, ``true``, ``a list``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(str(value), ensure_ascii=False)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return repr(float(value))
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, TaggedScalar):
        return f"a value tagged {value.tag}"
    return f"a {type(value).__name__} value"


def _line_of(container: object, accessor: str, key: object) -> int | None:
    lc = getattr(container, "lc", None)
    if lc is None:
        return None
    try:
        line = getattr(lc, accessor)(key)[0]
    except (KeyError, IndexError, TypeError):
        return None
    return int(line) + 1 if isinstance(line, int) else None


def _unwrapped(value: object) -> object:
    # An anchored boolean (`&flag true`) loads as ScalarBoolean, an int subclass.
    return bool(value) if isinstance(value, ScalarBoolean) else value


@final
@attrs.frozen
class Located:
    """A value of a YAML document and where it is: file, dotted field path, 1-based line.

    ``field`` is empty for the document root. Children inherit the file and take the
    line of their key (mappings) or item (sequences), falling back to the parent's.
    """

    value: Any
    field: str
    line: int
    path: str

    def fail(self, reason: str) -> NoReturn:
        """Raise a :class:`ConfigError` at this place."""
        raise ConfigError(reason, self.path, self.line, self.field or None)

    def child(self, key: object) -> Located:
        """The value under ``key`` of this mapping (the key must be present)."""
        name = str(key)
        return Located(
            value=_unwrapped(self.value[key]),
            field=f"{self.field}.{name}" if self.field else name,
            line=_line_of(self.value, "key", key) or self.line,
            path=self.path,
        )

    def children(self) -> Iterator[tuple[object, Located]]:
        """Every ``(key, value)`` of this mapping, in document order."""
        for key in self.value:
            yield key, self.child(key)

    def items(self) -> Iterator[Located]:
        """Every item of this sequence, in document order."""
        for index, value in enumerate(self.value):
            yield Located(
                value=_unwrapped(value),
                field=f"{self.field}[{index}]",
                line=_line_of(self.value, "item", index) or self.line,
                path=self.path,
            )


def expect_mapping(node: Located, what: str = "a mapping") -> Located:
    """The node itself, after checking that it is a mapping."""
    if not isinstance(node.value, Mapping):
        node.fail(f"expected {what}, got {describe_value(node.value)}")
    return node


def expect_list(node: Located, what: str = "a list") -> Located:
    """The node itself, after checking that it is a sequence."""
    if not isinstance(node.value, list):
        node.fail(f"expected {what}, got {describe_value(node.value)}")
    return node


def expect_str(node: Located, *, blank_ok: bool = False) -> str:
    """The node's value as a plain ``str``; blank strings fail unless ``blank_ok``."""
    if not isinstance(node.value, str):
        node.fail(f"expected a string, got {describe_value(node.value)}")
    if not blank_ok and not node.value.strip():
        node.fail("must not be empty")
    return str(node.value)


def expect_int(node: Located) -> int:
    """The node's value as a plain ``int`` (booleans and floats are refused)."""
    if isinstance(node.value, bool) or not isinstance(node.value, int):
        node.fail(f"expected an integer, got {describe_value(node.value)}")
    return int(node.value)


def expect_bool(node: Located) -> bool:
    """The node's value as a ``bool`` (``true`` or ``false`` only)."""
    if not isinstance(node.value, bool):
        node.fail(f"expected true or false, got {describe_value(node.value)}")
    return bool(node.value)


def expect_choice(node: Located, choices: Collection[str]) -> str:
    """The node's value, which must be one of the given strings."""
    if not isinstance(node.value, str) or node.value not in choices:
        listed = " or ".join(json.dumps(choice) for choice in choices)
        node.fail(f"expected {listed}, got {describe_value(node.value)}")
    return str(node.value)


def _squashed(key: str) -> str:
    return key.replace("_", "").replace("-", "").lower()


def _unknown_key_reason(key: object, allowed: Collection[str]) -> str:
    spelled = str(key)
    hint = [known for known in allowed if _squashed(known) == _squashed(spelled)]
    hint = hint or difflib.get_close_matches(spelled, list(allowed), n=1, cutoff=0.75)
    suggestion = f'; did you mean "{hint[0]}"?' if hint else ""
    return f"unknown key (allowed keys: {', '.join(allowed)}){suggestion}"


def reject_unknown_keys(node: Located, allowed: Collection[str]) -> None:
    """Fail at the first key of the mapping ``node`` that is not in ``allowed``.

    The message lists the allowed keys and, when the key looks like a misspelling
    of one (``timeout_ms`` for ``timeoutMs``), names the likely intended key.
    """
    for key, child in node.children():
        if not (isinstance(key, str) and key in allowed):
            child.fail(_unknown_key_reason(key, allowed))


def warn_unknown_keys(node: Located, allowed: Collection[str]) -> None:
    """Log (not fail) every key of ``node`` outside ``allowed``, with the same hint.

    For sections a later version may extend: the file stays usable, and a
    misspelling is still pointed out with its file, line and field.
    """
    for key, child in node.children():
        if not (isinstance(key, str) and key in allowed):
            reason = _unknown_key_reason(key, allowed)
            warn(str(ConfigError(f"{reason}; ignored", child.path, child.line, child.field)))


def to_json_value(node: Located) -> Any:
    """A deep copy of the node's value made of plain JSON types (dict, list, str, ...).

    ruamel's round-trip types (``CommentedMap``, ``ScalarFloat``, quoted strings...)
    become their builtin equivalents. Values JSON cannot carry — non-string keys,
    timestamps, infinities — fail at their own field.
    """
    value = node.value
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            node.fail(f"expected a finite number, got {describe_value(value)}")
        return float(value)
    if isinstance(value, Mapping):
        result: dict[str, Any] = {}
        for key, child in node.children():
            if not isinstance(key, str):
                child.fail(f"keys must be strings, got {describe_value(key)}")
            result[str(key)] = to_json_value(child)
        return result
    if isinstance(value, list):
        return [to_json_value(item) for item in node.items()]
    node.fail(f"expected a JSON value, got {describe_value(value)}")


def write_text_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) so readers see the old file or the new one.

    See :func:`~._files.replace_text`; missing parent directories are created. An
    existing file's permission bits are kept, a new file gets 0644. Raises
    :class:`OSError`.
    """
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o644
    replace_text(path, text, mode)
