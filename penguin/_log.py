"""Diagnostics for the operator, never for the model: the one home of penguin's logger.

The spec sends some lines to stderr (an ignored message, a failed archive, a
throwing approver). They go through the ``penguin`` logger: with no logging
configured, Python's last-resort handler prints the bare message on stderr, which is
exactly the spec's line; an embedding application can route them anywhere.

Every module that logs takes the logger from here, never from ``logging.getLogger``
itself: :func:`warn` for a line already in its final wording, :data:`logger` for a
``%``-style line whose arguments are formatted only if the line is emitted.
"""

from __future__ import annotations

import logging
from typing import Final

__all__ = ["child", "logger", "quiet_library", "warn"]

logger: Final = logging.getLogger("penguin")
"""The ``penguin`` logger; everything penguin logs is a warning on it."""


def child(name: str) -> logging.Logger:
    """The ``penguin.<name>`` logger, for a surface with log lines of its own (the server)."""
    return logger.getChild(name)


def quiet_library(name: str) -> None:
    """Keep the logger ``name`` of a library penguin wraps off stderr by default.

    The MCP SDK logs its transports' failures with tracebacks; penguin reports each
    failure once, in its own words. A ``NullHandler`` keeps Python's last-resort
    handler from printing them, while an application that configures logging still
    receives the records (they propagate as usual).
    """
    logging.getLogger(name).addHandler(logging.NullHandler())


def warn(line: str) -> None:
    """Report one diagnostic line (already in its final wording)."""
    logger.warning(line)
