"""Diagnostics for the operator, never for the model.

The spec sends some lines to stderr (an ignored message, a failed archive, a
throwing approver). They go through the ``penguin`` logger: with no logging
configured, Python's last-resort handler prints the bare message on stderr, which is
exactly the spec's line; an embedding application can route them anywhere.
"""

from __future__ import annotations

import logging
from typing import Final

__all__ = ["logger", "warn"]

logger: Final = logging.getLogger("penguin")


def warn(line: str) -> None:
    """Report one diagnostic line (already in its final wording)."""
    logger.warning(line)
