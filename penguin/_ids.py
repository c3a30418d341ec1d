"""Short identifiers that only need to differ from the ones issued beside them.

What this module owns: :func:`token_hex`, hex digits from a pseudo-random generator
seeded from the system's random source, for names that are checked against the ones
already issued (tool call ids a model client makes up, a command session's process id).
``secrets.token_hex`` makes one system call per name, and these are made several times
per model turn on the event loop's thread. The generator is reseeded in a forked child,
so two processes never walk the same sequence; it is no source of secrets.
"""

from __future__ import annotations

import os
import random
from typing import Final

__all__ = ["token_hex"]

_GENERATOR: Final = random.Random()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_GENERATOR.seed)


def token_hex(nbytes: int) -> str:
    """``2 * nbytes`` hex digits, as ``secrets.token_hex(nbytes)`` spells them."""
    return f"{_GENERATOR.getrandbits(8 * nbytes):0{2 * nbytes}x}"
