"""Reference 4.1–4.3: the capped session registry and its eviction and idle policy."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from penguin.environment.supervisor._registry import (
    COMMAND_SESSION_CAP,
    IDLE_REAP_AFTER,
    IDLE_SWEEP_INTERVAL,
    SUBAGENT_SESSION_CAP,
    DuplicateSessionError,
    SessionRegistry,
)


@attrs.define
class Fake:
    """A session stand-in: all the policy needs to know is whether it has finished."""

    done: bool = False


def is_done(session: Fake) -> bool:
    return session.done


def filled(
    n: int, cap: int | None = None, *, done: frozenset[int] = frozenset()
) -> SessionRegistry[Fake]:
    registry: SessionRegistry[Fake] = SessionRegistry(cap if cap is not None else n)
    for i in range(n):
        registry.add(f"s{i}", Fake(done=i in done), now=float(i))
    return registry


def test_4_1_caps() -> None:
    assert COMMAND_SESSION_CAP == 64
    assert SUBAGENT_SESSION_CAP == 8
    assert IDLE_REAP_AFTER == 10 * 24 * 3600
    assert IDLE_SWEEP_INTERVAL == 3600


def test_4_1_full_at_cap_and_add_never_evicts() -> None:
    registry = filled(3, cap=4)
    before = registry.full
    registry.add("s3", Fake(), now=3.0)
    assert (before, registry.full) == (False, True)
    # Registration past the cap is the owner's call (4.2 tolerates a brief overshoot).
    registry.add("s4", Fake(), now=4.0)
    assert len(registry) == 5
    assert list(registry) == ["s0", "s1", "s2", "s3", "s4"]


def test_4_1_duplicate_registration_is_refused() -> None:
    registry = filled(2)
    with pytest.raises(DuplicateSessionError, match="'s1' is already registered") as info:
        registry.add("s1", Fake(), now=9.0)
    assert isinstance(info.value, ValueError)
    assert info.value.key == "s1"
    assert registry.remove("s1") is not None
    registry.add("s1", Fake(), now=9.0)
    assert list(registry) == ["s0", "s1"]


def test_4_1_lookup_listing_and_removal() -> None:
    registry = filled(3)
    assert "s1" in registry
    assert "nope" not in registry
    assert registry.get("nope", now=5.0) is None
    assert registry.peek("nope") is None
    assert registry.remove("nope") is None
    registry.touch("nope", now=5.0)  # a session evicted in between: not an error
    assert [key for key, _ in registry.items()] == ["s0", "s1", "s2"]
    removed = registry.remove("s1")
    assert removed is not None
    assert "s1" not in registry
    assert [key for key, _ in registry.items()] == ["s0", "s2"]


def test_4_1_iteration_is_a_snapshot() -> None:
    registry = filled(4)
    for key in registry:
        registry.remove(key)
    assert len(registry) == 0


def test_4_1_evicts_first_exited_in_registration_order() -> None:
    registry = filled(5, done=frozenset({3, 1}))
    # s1 is the first exited one even though s0 is the least recently used overall.
    assert registry.eviction_candidate(finished=is_done, evict_running=True) == "s1"
    # Access does not change the order of exited ones.
    registry.get("s1", now=100.0)
    assert registry.eviction_candidate(finished=is_done, evict_running=True) == "s1"
    registry.remove("s1")
    assert registry.eviction_candidate(finished=is_done, evict_running=True) == "s3"


def test_4_1_lru_running_when_none_exited() -> None:
    registry = filled(4)
    assert registry.eviction_candidate(finished=is_done, evict_running=True) == "s0"
    registry.get("s0", now=10.0)
    registry.touch("s1", now=11.0)
    assert registry.eviction_candidate(finished=is_done, evict_running=True) == "s2"


def test_4_1_lru_running_ties_earliest() -> None:
    registry: SessionRegistry[Fake] = SessionRegistry(4)
    registry.add("a", Fake(), now=5.0)
    registry.add("b", Fake(), now=3.0)
    registry.add("c", Fake(), now=3.0)
    registry.add("d", Fake(), now=4.0)
    assert registry.eviction_candidate(finished=is_done, evict_running=True) == "b"
    registry.get("b", now=7.0)
    assert registry.eviction_candidate(finished=is_done, evict_running=True) == "c"
    registry.touch("c", now=5.0)
    registry.touch("d", now=5.0)
    # a, c and d all last accessed at 5.0: the earliest registered goes.
    assert registry.eviction_candidate(finished=is_done, evict_running=True) == "a"


def test_4_3_peek_and_listing_do_not_refresh() -> None:
    registry = filled(3)
    registry.peek("s0")
    registry.items()
    list(registry)
    assert "s0" in registry
    assert registry.last_access("s0") == 0.0
    assert registry.eviction_candidate(finished=is_done, evict_running=True) == "s0"


def test_4_3_get_and_touch_refresh() -> None:
    registry = filled(2)
    registry.get("s0", now=50.0)
    assert registry.last_access("s0") == 50.0
    registry.touch("s1", now=60.0)
    assert registry.last_access("s1") == 60.0
    assert registry.last_access("nope") is None


def test_4_2_running_never_evicted() -> None:
    registry = filled(SUBAGENT_SESSION_CAP)
    assert registry.full
    assert registry.eviction_candidate(finished=is_done, evict_running=False) is None
    session = registry.peek("s5")
    assert session is not None
    session.done = True
    assert registry.eviction_candidate(finished=is_done, evict_running=False) == "s5"


def test_4_2_empty_registry_has_no_candidate() -> None:
    registry: SessionRegistry[Fake] = SessionRegistry(2)
    assert registry.eviction_candidate(finished=is_done, evict_running=True) is None
    assert registry.eviction_candidate(finished=is_done, evict_running=False) is None


def test_4_3_idle_keys_ten_days() -> None:
    day = 24 * 3600.0
    registry: SessionRegistry[Fake] = SessionRegistry(8)
    registry.add("old", Fake(), now=0.0)
    registry.add("fresh", Fake(), now=5 * day)
    registry.add("exactly", Fake(), now=1 * day)
    registry.add("refreshed", Fake(), now=0.0)
    registry.touch("refreshed", now=2 * day)
    now = 11 * day
    assert registry.idle_keys(now, IDLE_REAP_AFTER) == ["old", "exactly"]
    assert registry.idle_keys(now - 1.0, IDLE_REAP_AFTER) == ["old"]
    # Listing for the sweep does not refresh anything.
    assert registry.idle_keys(now, IDLE_REAP_AFTER) == ["old", "exactly"]


def test_4_1_cap_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        SessionRegistry[Fake](0)


# ---- property: the policy against a plain oracle ------------------------------------------

Step = tuple[str, int, bool, float]
steps = st.lists(
    st.tuples(
        st.sampled_from(["add", "get", "touch", "remove", "finish"]),
        st.integers(0, 9),
        st.booleans(),
        st.floats(0.0, 100.0, allow_nan=False),
    ),
    max_size=50,
)


@settings(max_examples=300, deadline=None)
@given(steps=steps, evict_running=st.booleans())
def test_4_1_property_candidate_matches_oracle(steps: list[Step], evict_running: bool) -> None:
    registry: SessionRegistry[Fake] = SessionRegistry(4)
    order: list[str] = []  # oracle: registration order
    access: dict[str, float] = {}
    done: dict[str, bool] = {}
    for op, n, flag, now in steps:
        key = f"k{n}"
        if op == "add" and key not in order:
            registry.add(key, Fake(done=flag), now)
            order.append(key)
            access[key] = now
            done[key] = flag
        elif op in ("get", "touch") and key in order:
            if op == "get":
                registry.get(key, now)
            else:
                registry.touch(key, now)
            access[key] = now
        elif op == "remove":
            assert (registry.remove(key) is not None) == (key in order)
            if key in order:
                order.remove(key)
        elif op == "finish" and key in order:
            session = registry.peek(key)
            assert session is not None
            session.done = True
            done[key] = True
        assert list(registry) == order
        exited = [k for k in order if done[k]]
        if exited:
            expected: str | None = exited[0]
        elif evict_running and order:
            expected = min(order, key=lambda k: (access[k], order.index(k)))
        else:
            expected = None
        assert registry.eviction_candidate(finished=is_done, evict_running=evict_running) == (
            expected
        )
