"""The configuration package's exceptions.

::

    PenguinError               the root of every penguin exception (penguin._errors)
     └── ConfigError           (also ValueError) a configuration file is missing,
          │                    unreadable, not YAML, or holds a bad value
          └── ConfigValueError a value given directly (an argument, not a file) is not allowed
               └── InvalidIdError  a project, agent or session id breaks the id rule

A :class:`ConfigError` carries where the problem is — ``path``, ``line`` (1-based,
or None when no line applies) and ``field`` (a dotted path such as
``tools.builtin[3].timeoutMs``, or None for problems of the whole file) — and its
message spells all three out in the ``file:line: field: reason`` shape compilers
use, so an editor can jump to the place::

    system_config.yaml:12: tools.builtin[3].timeoutMs: expected an integer, got "fast"

A :class:`ConfigValueError` is the same for a value that did not come from a file
(a model entry built in code, an id on the command line): no location, and its
message is its ``reason``. Every user-input error of this package is one of these
classes, so ``except ConfigError`` is the one catch a surface needs.

This module owns the exceptions only; the readers in this package decide what is an
error and what (like an invalid MCP server entry) is merely a logged warning.
Failures to *write* a configuration file are plain :class:`OSError`.
"""

from __future__ import annotations

import os
from typing import Any, final

from penguin._errors import PenguinError

__all__ = ["ConfigError", "ConfigValueError", "InvalidIdError", "format_location"]


def format_location(path: str, line: int | None, field: str | None) -> str:
    """The ``file:line: field`` prefix shared by errors and warnings (parts may be absent)."""
    where = path if line is None else f"{path}:{line}"
    return where if field is None else f"{where}: {field}"


class ConfigError(PenguinError, ValueError):
    """A configuration file that cannot be used as it is.

    Attributes: ``path`` (the file, as given), ``line`` (1-based or None), ``field``
    (dotted path of the offending key or None) and ``reason`` (the message without
    the location).
    """

    path: str
    line: int | None
    field: str | None
    reason: str

    def __init__(
        self,
        reason: str,
        path: str | os.PathLike[str],
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.reason = reason
        self.path = os.fspath(path)
        self.line = line
        self.field = field
        super().__init__(f"{format_location(self.path, line, field)}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        # The default reduction would call __init__ with the formatted message only.
        return (type(self), (self.reason, self.path, self.line, self.field))


class ConfigValueError(ConfigError):
    """A value that is not allowed, given directly rather than read from a file.

    ``reason`` is the whole message; ``path`` is empty and ``line`` None; ``field``
    names the value when the caller knows it (it is not in the message).
    """

    def __init__(self, reason: str, field: str | None = None) -> None:
        self.reason = reason
        self.path = ""
        self.line = None
        self.field = field
        ValueError.__init__(self, reason)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.reason, self.field))


@final
class InvalidIdError(ConfigValueError):
    """A project, agent or session id that breaks the id rule (``config._paths.is_valid_id``)."""
