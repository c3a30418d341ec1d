"""An agent's vault, ``agent_state/.vault.toml``: environment variables for its commands.

The vault holds environment variables that penguin hands to every command the
agent runs (reference 4.9: they override the host's values; the hardened set still
wins). The file is flat TOML, one ``NAME = "value"`` per line::

    # comments are kept when penguin rewrites the file
    GITHUB_TOKEN = "ghp_..."
    PGPASSWORD = "..."

Keys must be environment variable names (:data:`ENV_NAME_PATTERN`, which is also
the rule for a model's ``api_key_env``); values are strings. Owns reading and
editing that file.

It does not own how a private TOML file is read and written (``_toml``: mode 0600,
atomic replacement, comments kept), where the vault lives
(:class:`~penguin.config.AgentPaths`), nor injecting it into processes (the
Environment takes a plain ``dict``). Values never appear in an error message. All
functions are blocking; async callers run them in a worker thread.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

from tomlkit.toml_document import TOMLDocument

from ._errors import ConfigError, ConfigValueError
from ._files import editing
from ._toml import field_lines, header_document, read_private_toml, write_private_toml

__all__ = [
    "ENV_NAME_PATTERN",
    "list_vault_keys",
    "load_vault",
    "remove_vault",
    "set_vault",
    "validate_env_name",
]

ENV_NAME_PATTERN: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A portable environment variable name (matched whole)."""

_VAULT_HEADER: Final = (
    "An agent's vault: environment variables handed to every command this agent runs.",
    "They override the host's variables of the same name. Keep this file private (0600).",
    "Edit it with `penguin config vault set NAME` (reads the value from stdin) or by hand:",
    'NAME = "value", one per line; names are environment variable names.',
)


def validate_env_name(name: str) -> str:
    """``name`` itself when it is a valid environment variable name, else :class:`ValueError`."""
    if ENV_NAME_PATTERN.fullmatch(name) is None:
        raise ConfigValueError(
            f"invalid vault key {name!r}: use an environment variable name — letters, "
            "digits and '_', not starting with a digit (e.g. GITHUB_TOKEN)"
        )
    return name


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
        raise ConfigValueError(
            f"the value of {key} contains a NUL character, which no environment allows"
        )
    file = Path(path)
    with editing(file):
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
    with editing(file):
        document, values = _load(file)
        if document is None or key not in values:
            return False
        del document[key]
        write_private_toml(file, document)
    return True
