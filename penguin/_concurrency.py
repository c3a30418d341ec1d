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
from typing import NoReturn

__all__ = ["collapse_single", "error_text"]


def error_text(exc: BaseException) -> str:
    """The message of ``exc``, looking through groups of one; its class name if empty."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__


@contextmanager
def collapse_single() -> Iterator[None]:
    """Re-raise a ``BaseExceptionGroup`` of exactly one exception as that exception.

    Groups nested one inside another, each of one member, unwrap to the innermost
    exception. The exception comes out as it went in: its ``__cause__``, its
    ``__suppress_context__`` and its ``__context__`` (a ``ValueError`` raised while
    handling a ``KeyError`` still names the ``KeyError``) are the ones it was raised
    with, not links to the group it travelled in. A group of several exceptions (or of
    none) is re-raised unchanged. ``trio.Cancelled`` unwraps like any other, so the
    cancel scope that fired still catches it.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
            inner = group.exceptions[0]
            if not isinstance(inner, BaseExceptionGroup):
                _raise_unchained(inner)
            group = inner
        raise


def _raise_unchained(exc: BaseException) -> NoReturn:
    # Raising inside an ``except`` block sets the exception's __context__ to the
    # exception being handled (here, the group); put back the one it was raised with.
    # A bare ``raise exc`` (no ``from``) leaves __cause__ and __suppress_context__ alone.
    context = exc.__context__
    try:
        raise exc
    finally:
        exc.__context__ = context
        del exc, context  # the frame would otherwise keep the exception (and its traceback)
