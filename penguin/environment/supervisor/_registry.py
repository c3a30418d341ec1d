"""The capped session registry and its eviction policy, sans I/O (reference 4.1–4.3).

One :class:`SessionRegistry` maps session ids (``proc-…`` for commands, child session ids
for subagents) to whatever the owning manager keeps per session, in registration order,
with each entry's last-access time. It decides which entry to evict when the registry is
full and which entries have been idle long enough to reap; it never evicts, kills or
sleeps by itself — the manager that owns it acts on its answers, because evicting a
session means killing a process (commands) or releasing a child session (subagents).

Policy (the same code serves both managers):

- commands (cap 64, ``evict_running=True``): the first FINISHED session in registration
  order; if none, the least recently used running one (min last access; ties go to the
  earliest registered);
- subagents (cap 8, ``evict_running=False``): the first finished (idle) session in
  registration order; a running one is never a candidate;
- last access is set by :meth:`~SessionRegistry.add` and refreshed by
  :meth:`~SessionRegistry.get` and :meth:`~SessionRegistry.touch` (stdin write, Ctrl-C),
  never by :meth:`~SessionRegistry.peek`, :meth:`~SessionRegistry.items` or iteration
  (listing);
- idle reaping: :meth:`~SessionRegistry.idle_keys` names the sessions unaccessed for at
  least ``max_idle`` (:data:`IDLE_REAP_AFTER`, ten days), swept every
  :data:`IDLE_SWEEP_INTERVAL`.

Times are plain floats from the caller's clock (``trio.current_time()``), so tests drive
the policy with any numbers they like.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final, Generic, TypeVar, final

import attrs

from .._errors import DuplicateSessionError

__all__ = [
    "COMMAND_SESSION_CAP",
    "IDLE_REAP_AFTER",
    "IDLE_SWEEP_INTERVAL",
    "SUBAGENT_SESSION_CAP",
    "DuplicateSessionError",
    "SessionRegistry",
]

COMMAND_SESSION_CAP: Final = 64
SUBAGENT_SESSION_CAP: Final = 8
IDLE_REAP_AFTER: Final = 10 * 24 * 60 * 60.0
"""Seconds without access after which the sweep removes (kills) a session: ten days."""
IDLE_SWEEP_INTERVAL: Final = 60 * 60.0
"""Seconds between two idle sweeps: hourly."""

S = TypeVar("S")


@final
@attrs.define
class _Entry(Generic[S]):
    item: S
    last_access: float


@final
class SessionRegistry(Generic[S]):
    """Sessions by id, in registration order, with last-access times and a cap.

    The cap is advisory: :meth:`add` never refuses or evicts for lack of room (reference 4.2
    tolerates a brief overshoot); the owner checks :attr:`full` and asks
    :meth:`eviction_candidate` first.
    """

    __slots__ = ("_cap", "_entries")

    def __init__(self, cap: int) -> None:
        if cap < 1:
            raise ValueError(f"a session registry needs a cap of at least 1, got {cap}")
        self._cap = cap
        # dict order is insertion order: registration order, kept across refreshes.
        self._entries: dict[str, _Entry[S]] = {}

    @property
    def cap(self) -> int:
        """How many sessions the registry holds before it counts as full."""
        return self._cap

    @property
    def full(self) -> bool:
        """Whether registering one more session calls for an eviction first."""
        return len(self._entries) >= self._cap

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[str]:
        """The ids in registration order, from a snapshot: removing while iterating is safe."""
        return iter(tuple(self._entries))

    def __repr__(self) -> str:
        return f"SessionRegistry(cap={self._cap}, keys={list(self._entries)!r})"

    def add(self, key: str, item: S, now: float) -> None:
        """Register ``item`` under ``key`` as the newest session, accessed at ``now``.

        Raises :class:`DuplicateSessionError` (a ``ValueError``) if ``key`` is taken.
        """
        if key in self._entries:
            raise DuplicateSessionError(key)
        self._entries[key] = _Entry(item, now)

    def get(self, key: str, now: float) -> S | None:
        """The session under ``key`` (None if unknown); counts as an access at ``now``."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        entry.last_access = now
        return entry.item

    def peek(self, key: str) -> S | None:
        """The session under ``key`` (None if unknown), without counting as an access."""
        entry = self._entries.get(key)
        return None if entry is None else entry.item

    def touch(self, key: str, now: float) -> None:
        """Count an access at ``now`` (stdin write, Ctrl-C); an unknown id is ignored.

        Ignoring an unknown id is deliberate: between a lookup and the write it follows,
        the session may have been evicted or reaped, and that is not the writer's error.
        """
        entry = self._entries.get(key)
        if entry is not None:
            entry.last_access = now

    def last_access(self, key: str) -> float | None:
        """When the session under ``key`` was last accessed (None if unknown)."""
        entry = self._entries.get(key)
        return None if entry is None else entry.last_access

    def remove(self, key: str) -> S | None:
        """Unregister ``key`` and return its session (None if it was not registered)."""
        entry = self._entries.pop(key, None)
        return None if entry is None else entry.item

    def items(self) -> list[tuple[str, S]]:
        """Every ``(id, session)`` in registration order; a listing, so no access counted."""
        return [(key, entry.item) for key, entry in self._entries.items()]

    def eviction_candidate(
        self, *, finished: Callable[[S], bool], evict_running: bool
    ) -> str | None:
        """The id to evict to make room, or None if the policy allows none.

        The first session (registration order) for which ``finished`` is true; failing
        that, when ``evict_running``, the least recently used session, ties going to the
        earliest registered. An empty registry has no candidate.
        """
        for key, entry in self._entries.items():
            if finished(entry.item):
                return key
        if not evict_running:
            return None
        oldest: str | None = None
        oldest_access = 0.0
        for key, entry in self._entries.items():
            # Strictly less: on a tie the earlier-registered entry, met first, stays.
            if oldest is None or entry.last_access < oldest_access:
                oldest, oldest_access = key, entry.last_access
        return oldest

    def idle_keys(self, now: float, max_idle: float) -> list[str]:
        """Ids unaccessed for at least ``max_idle`` at ``now``, in registration order."""
        return [key for key, entry in self._entries.items() if now - entry.last_access >= max_idle]
