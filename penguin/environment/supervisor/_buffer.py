r"""The capped unread buffer: output that waits for the next window to deliver it (reference 4.4).

A command session pumps every stdout and stderr chunk into one :class:`UnreadBuffer`;
exec_command, input_command, kill_command and the background completion report drain
it. A subagent session keeps one for its direct child's text. The buffer owns only the
accounting: what is unread, what was dropped, and the one line that tells the model
about the drop. It does not wait, wake readers or know where chunks come from — the
session that owns it does that.

Invariants:

- at most ``capacity`` unread chars are held; an overflow drops the OLDEST chars and
  keeps the tail, adding the dropped count to a pending tally;
- the text held is always a suffix of everything appended since the last drain, and
  ``len(held) + dropped`` is the length of everything appended since the last drain;
- :meth:`UnreadBuffer.drain` returns each appended char at most once, prefixed by
  ``[... ${n} chars of ${label} dropped ...]\n`` when the tally is non-zero, then
  starts afresh (nothing held, tally zero).

Appends cost O(len(text)) amortised however full the buffer is: chunks are kept in a
deque with a running total, and the oldest chars are dropped by advancing an offset
into the first chunk (or popping it), never by re-joining or re-slicing what is held.
"""

from __future__ import annotations

from collections import deque
from typing import Final, final

__all__ = ["BUFFER_CAPACITY", "COMMAND_LABEL", "SUBAGENT_LABEL", "UnreadBuffer", "dropped_line"]

BUFFER_CAPACITY: Final = 1_048_576
"""1 MiB of chars: the most unread output one session holds."""

COMMAND_LABEL: Final = "earlier output"
SUBAGENT_LABEL: Final = "earlier subagent output"

_COALESCE: Final = 512
"""Appends shorter than this are glued onto a short last chunk, so a stream of tiny
chunks (one line at a time) does not become a deque of a million one-char strings."""


def dropped_line(count: int, label: str) -> str:
    """The line that stands for ``count`` dropped chars at the head of a drain."""
    return f"[... {count} chars of {label} dropped ...]\n"


@final
class UnreadBuffer:
    """Unread text, capped at ``capacity`` chars; overflow drops the oldest and is tallied."""

    __slots__ = ("_capacity", "_chunks", "_dropped", "_head", "_label", "_size")

    def __init__(self, capacity: int = BUFFER_CAPACITY, label: str = COMMAND_LABEL) -> None:
        if capacity < 1:
            raise ValueError(f"UnreadBuffer capacity must be at least 1 char, got {capacity}")
        self._capacity = capacity
        self._label = label
        self._chunks: deque[str] = deque()
        self._head = 0  # chars of _chunks[0] already dropped
        self._size = 0  # unread chars held: sum of chunk lengths minus _head
        self._dropped = 0

    @property
    def capacity(self) -> int:
        """The most unread chars held at once."""
        return self._capacity

    @property
    def label(self) -> str:
        """What the drop line calls the dropped text (``earlier output`` for commands)."""
        return self._label

    @property
    def dropped(self) -> int:
        """Chars dropped since the last drain: the pending tally."""
        return self._dropped

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        # A tally alone is something to deliver: the model must learn that output was lost.
        return self._size > 0 or self._dropped > 0

    def __repr__(self) -> str:
        return (
            f"UnreadBuffer(held={self._size}, dropped={self._dropped}, "
            f"capacity={self._capacity}, label={self._label!r})"
        )

    def append(self, text: str) -> None:
        """Add ``text`` after what is held; drop the oldest chars past the capacity."""
        n = len(text)
        if n == 0:
            return
        capacity = self._capacity
        if n >= capacity:
            # Everything held goes, and so does the head of the text itself.
            self._dropped += self._size + (n - capacity)
            self._chunks.clear()
            self._head = 0
            self._chunks.append(text[n - capacity :] if n > capacity else text)
            self._size = capacity
            return
        chunks = self._chunks
        if n < _COALESCE and chunks and len(chunks[-1]) < _COALESCE:
            chunks[-1] += text
        else:
            chunks.append(text)
        self._size += n
        excess = self._size - capacity
        if excess > 0:
            self._trim(excess)

    def _trim(self, excess: int) -> None:
        """Drop the ``excess`` oldest chars (there are always more than that held)."""
        chunks = self._chunks
        self._size -= excess
        self._dropped += excess
        while excess > 0:
            left = len(chunks[0]) - self._head
            if left > excess:
                self._head += excess
                return
            chunks.popleft()
            self._head = 0
            excess -= left

    def drain(self) -> str:
        """Everything unread (after the drop line, if any was dropped); the buffer is emptied.

        Returns ``""`` when nothing is held and nothing was dropped.
        """
        if not self:
            return ""
        prefix = dropped_line(self._dropped, self._label) if self._dropped else ""
        chunks = self._chunks
        if chunks and self._head:
            chunks[0] = chunks[0][self._head :]
        text = prefix + "".join(chunks)
        chunks.clear()
        self._head = 0
        self._size = 0
        self._dropped = 0
        return text
