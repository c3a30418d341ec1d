"""Small Trio idioms shared by every owner of background work.

Nurseries raise exception groups; the public surface of penguin raises plain
exceptions. :func:`collapse_single` is the one place where a group holding exactly one
exception is turned back into that exception, so ``async with`` blocks that own a
nursery (``Environment.open``, ``Environment.execute_tool``) let a caller's own
exception out unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collapse_single"]


@contextmanager
def collapse_single() -> Iterator[None]:
    """Re-raise a ``BaseExceptionGroup`` of exactly one exception as that exception."""
    try:
        yield
    except BaseExceptionGroup as group:
        while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
            inner = group.exceptions[0]
            if not isinstance(inner, BaseExceptionGroup):
                raise inner from inner.__cause__
            group = inner
        raise
