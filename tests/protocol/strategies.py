"""Hypothesis strategies for every OmniMessage payload, derived from the attrs fields."""

from __future__ import annotations

import types
import typing
from typing import Any

import attrs
from hypothesis import strategies as st

from penguin import protocol as om
from penguin.protocol._codec import EVENT_PAYLOADS, MODEL_PAYLOADS

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=10), json_values, max_size=5)


def for_type(tp: Any) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is str:
        return st.text(max_size=30)
    if tp is int:
        return st.integers(min_value=-(2**53), max_value=2**53)
    if tp is bool:
        return st.booleans()
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin in (typing.Union, types.UnionType):
        return st.one_of([st.none() if a is type(None) else for_type(a) for a in args])
    if origin is tuple:
        return st.lists(for_type(args[0]), max_size=3).map(tuple)
    if origin is typing.get_origin(typing.Mapping[str, Any]):
        return json_objects
    if attrs.has(tp):
        return payloads(tp)
    raise NotImplementedError(tp)


def payloads(cls: type[Any]) -> st.SearchStrategy[Any]:
    attrs.resolve_types(cls)
    fields = {a.name: for_type(a.type) for a in attrs.fields(cls) if a.name != "type"}
    return st.builds(cls, **fields)


def _origin() -> st.SearchStrategy[tuple[str, ...] | None]:
    return st.none() | st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=3).map(tuple)


timestamps = st.datetimes(timezones=st.just(__import__("datetime").UTC)).map(
    lambda d: d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z"
)


def messages() -> st.SearchStrategy[om.OmniMessage[om.Payload]]:
    model = st.one_of([payloads(c) for c in MODEL_PAYLOADS]).map(lambda p: ("model_msg", p))
    event = st.one_of([payloads(c) for c in EVENT_PAYLOADS]).map(lambda p: ("event_msg", p))
    meta = payloads(om.SessionMetaPayload).map(lambda p: ("session_meta", p))
    return st.builds(
        lambda ts, kp, origin: om.OmniMessage(
            timestamp=ts, type=kp[0], payload=kp[1], origin=origin
        ),
        timestamps,
        model | event | meta,
        _origin(),
    )
