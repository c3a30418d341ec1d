"""Encodings kept for values that come back: the splice of a constant part into a record.

A model request repeats its tool list and its system prompt every turn, and a trace
records the same tool list at the start of every session: each is encoded once and its
bytes (or text) spliced into the whole, which is then exactly one encoding of the whole.
:class:`Kept` is the memory of those encodings, one per kind of value and owner.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar, final

__all__ = ["Kept"]

_K = TypeVar("_K")
_E = TypeVar("_E", bytes, str)


@final
class Kept(Generic[_K, _E]):
    """The encodings of the last ``bound`` values asked for.

    A ``hashable`` kind of value (a prompt) is found in a dict, least recently used
    first, whatever the bound; any other (a tool list, whose schemas are dicts) by
    looking for an equal one among the kept, most recently used first (so its bound
    stays small).
    """

    __slots__ = ("_bound", "_by_value", "_encode", "_kept")

    def __init__(self, encode: Callable[[_K], _E], bound: int, *, hashable: bool = False) -> None:
        self._encode: Callable[[_K], _E] = encode
        self._bound = bound
        self._by_value: dict[_K, _E] | None = {} if hashable else None
        self._kept: list[tuple[_K, _E]] = []

    def get(self, value: _K) -> _E:
        """``value``'s encoding: the kept one, or a new one that is then kept."""
        by_value = self._by_value
        if by_value is not None:
            encoded = by_value.pop(value, None)
            if encoded is None:
                encoded = self._encode(value)
                if len(by_value) >= self._bound:
                    del by_value[next(iter(by_value))]  # the least recently used
            by_value[value] = encoded
            return encoded
        for index, (known, kept) in enumerate(self._kept):
            if known is value or known == value:
                if index:
                    self._kept.insert(0, self._kept.pop(index))
                return kept
        encoded = self._encode(value)
        self._kept.insert(0, (value, encoded))
        del self._kept[self._bound :]
        return encoded
