"""The JSON codec: OmniMessages to dicts and one-line JSON, and back.

There is exactly one cattrs converter for the protocol (:data:`converter`); every
payload goes through it in both directions. The envelope itself is handled here by
hand, because its payload class is chosen by a tag (``payload.type``, or the envelope
``type`` for ``session_meta``) and because the envelope's key order is fixed.

Wire rules kept here:

- keys appear in declaration order, ``type`` first;
- optional fields that are ``None`` are omitted, except ``abort.reason`` (``null``);
- ``fidelity`` and tool ``parameters`` are carried as the JSON objects they were;
- JSON text is compact and keeps non-ASCII characters as they are.

Anything that does not fit the model raises :class:`~penguin.protocol.ProtocolError`
with a message naming the offending path (``$.payload.text``) and what was wrong.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from types import UnionType
from typing import Any, Final, Literal, Union, get_args, get_origin

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn

from ._errors import ProtocolError
from ._types import (
    AbortPayload,
    ApprovalDecisionPayload,
    CompactionBeginPayload,
    CompactionEndPayload,
    ImageUrlPayload,
    InlineDataPayload,
    InlineThinkingPayload,
    McpConnectBeginPayload,
    McpConnectEndPayload,
    McpServerConnectResult,
    OmniMessage,
    PartialTextPayload,
    PartialThinkingPayload,
    PartialToolCallOutputPayload,
    PartialToolCallPayload,
    Payload,
    RequestBeginPayload,
    RequestEndPayload,
    SessionMetaPayload,
    SubagentPayload,
    TextPayload,
    ThinkingPayload,
    TokenCounts,
    TokenUsagePayload,
    ToolCallOutputPayload,
    ToolCallPayload,
    ToolDefinition,
    ToolListReadyPayload,
)

__all__ = ["converter", "dumps", "from_dict", "loads", "payload_class", "to_dict"]

MODEL_PAYLOADS: Final[tuple[type[Payload], ...]] = (
    TextPayload,
    ImageUrlPayload,
    InlineDataPayload,
    ThinkingPayload,
    InlineThinkingPayload,
    ToolCallPayload,
    ToolCallOutputPayload,
    PartialTextPayload,
    PartialThinkingPayload,
    PartialToolCallPayload,
    PartialToolCallOutputPayload,
)
EVENT_PAYLOADS: Final[tuple[type[Payload], ...]] = (
    ApprovalDecisionPayload,
    AbortPayload,
    RequestBeginPayload,
    RequestEndPayload,
    TokenUsagePayload,
    CompactionBeginPayload,
    CompactionEndPayload,
    SubagentPayload,
    ToolListReadyPayload,
    McpConnectBeginPayload,
    McpConnectEndPayload,
)


def _tag(cls: type[Payload]) -> str:
    default = attrs.fields_dict(cls)["type"].default
    assert isinstance(default, str)
    return default


_MODEL_BY_TAG: Final = {_tag(c): c for c in MODEL_PAYLOADS}
_EVENT_BY_TAG: Final = {_tag(c): c for c in EVENT_PAYLOADS}

converter: Final = cattrs.Converter(forbid_extra_keys=False)
"""The protocol's one converter. Other packages reuse it for protocol types."""


def _opaque(value: Any, _: Any = None) -> Any:
    return value


def _check_object(value: Any, _: Any = None) -> Mapping[str, Any] | None:
    if value is None or isinstance(value, Mapping):
        return value
    raise ValueError(f"expected a JSON object, got {_json_type(value)}")


def _strict_str(value: Any, _: Any = None) -> str:
    if isinstance(value, str):
        return value
    raise ValueError(f"expected a string, got {_json_type(value)}")


def _strict_int(value: Any, _: Any = None) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ValueError(f"expected an integer, got {_json_type(value)}")


def _int_or_str(value: Any, _: Any = None) -> int | str:
    return value if isinstance(value, str) else _strict_int(value)


def _str_tuple(value: Any, _: Any = None) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        raise ValueError(f"expected an array of strings, got {_json_type(value)}")
    return tuple(_strict_str(v) for v in value)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


converter.register_structure_hook(str, _strict_str)
converter.register_structure_hook(int, _strict_int)
converter.register_structure_hook_func(lambda t: t == tuple[str, ...], _str_tuple)
converter.register_structure_hook_func(lambda t: t == (int | str), _int_or_str)
converter.register_structure_hook_func(lambda t: t == (Mapping[str, Any] | None), _check_object)
converter.register_unstructure_hook_func(lambda t: t == (Mapping[str, Any] | None), _opaque)


def _is_literal(t: Any) -> bool:
    return get_origin(t) is Literal


def _literal_hook(t: Any) -> Callable[[Any, Any], Any]:
    allowed = get_args(t)
    expected = ", ".join(json.dumps(a) for a in allowed)

    def structure(value: Any, _: Any = None) -> Any:
        if value in allowed and type(value) is type(allowed[allowed.index(value)]):
            return value
        raise ValueError(f"expected one of {expected}, got {json.dumps(value, default=str)}")

    return structure


converter.register_structure_hook_factory(_is_literal, _literal_hook)


def _identity_unstructure(t: Any) -> bool:
    return (
        t in (str, int, bool)
        or _is_literal(t)
        or (
            get_origin(t) in (Union, UnionType)
            and all(a is type(None) or a in (str, int) or _is_literal(a) for a in get_args(t))
        )
    )


def _configure(cls: type[Any]) -> None:
    """Register both directions for one attrs class.

    Unstructuring is written here rather than generated by cattrs so that optional
    fields are skipped *in place*: the wire key order is the declaration order.
    """
    attrs.resolve_types(cls)
    always_written = {"reason"} if cls is AbortPayload else set()
    plan: list[tuple[str, bool, Callable[[Any], Any] | None]] = []
    for a in attrs.fields(cls):
        omit_none = a.default is None and a.name not in always_written
        hook = None if _identity_unstructure(a.type) else converter.get_unstructure_hook(a.type)
        plan.append((a.name, omit_none, hook))

    def unstructure(obj: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, omit_none, hook in plan:
            value = getattr(obj, name)
            if value is None:
                if not omit_none:
                    out[name] = None
            elif hook is None:
                out[name] = value
            else:
                out[name] = hook(value)
        return out

    converter.register_unstructure_hook(cls, unstructure)
    converter.register_structure_hook(cls, make_dict_structure_fn(cls, converter))


def _is_homogeneous_tuple(t: Any) -> bool:
    args = get_args(t)
    return get_origin(t) is tuple and len(args) == 2 and args[1] is Ellipsis


def _tuple_to_list(t: Any) -> Callable[[Any], list[Any]]:
    item = get_args(t)[0]
    if item is str:
        return list
    hook = converter.get_unstructure_hook(item)
    return lambda values: [hook(v) for v in values]


converter.register_unstructure_hook_factory(_is_homogeneous_tuple, _tuple_to_list)

# Leaves first: a class's plan captures the hooks of the classes it contains.
for _cls in (
    ToolDefinition,
    TokenCounts,
    McpServerConnectResult,
    SessionMetaPayload,
    *MODEL_PAYLOADS,
    *EVENT_PAYLOADS,
):
    _configure(_cls)


def payload_class(kind: str, tag: str | None) -> type[Payload] | None:
    """The payload class for an envelope ``type`` and a payload ``type`` tag."""
    if kind == "session_meta":
        return SessionMetaPayload
    if kind == "model_msg":
        return _MODEL_BY_TAG.get(tag or "")
    if kind == "event_msg":
        return _EVENT_BY_TAG.get(tag or "")
    return None


def to_dict(message: OmniMessage[Payload]) -> dict[str, Any]:
    """The wire dict of a message: envelope keys in order, ``origin`` only when set."""
    out: dict[str, Any] = {
        "timestamp": message.timestamp,
        "type": message.type,
        "payload": converter.unstructure(message.payload, type(message.payload)),
    }
    if message.origin:
        out["origin"] = list(message.origin)
    return out


def _explain(exc: BaseException, expected: Any) -> str:
    if isinstance(exc, KeyError):
        return "required field missing"
    if isinstance(exc, ValueError) and not isinstance(exc, cattrs.BaseValidationError):
        return str(exc)
    if expected is not None and isinstance(expected, type):
        return f"expected {expected.__name__}"
    return f"invalid value ({exc})"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(exc, path="$.payload", format_exception=_explain))
    return str(exc)


def from_dict(data: Mapping[str, Any]) -> OmniMessage[Payload]:
    """Build a message from a wire dict; raise :class:`ProtocolError` naming the problem."""
    if not isinstance(data, Mapping):
        raise ProtocolError(f"an OmniMessage must be a JSON object, got {_json_type(data)}")
    for key in ("timestamp", "type", "payload"):
        if key not in data:
            raise ProtocolError(f"required field missing @ $.{key}")
    timestamp, kind, payload = data["timestamp"], data["type"], data["payload"]
    if not isinstance(timestamp, str):
        raise ProtocolError(f"expected a string @ $.timestamp, got {_json_type(timestamp)}")
    if kind not in ("session_meta", "model_msg", "event_msg"):
        raise ProtocolError(
            f"unknown message type {json.dumps(kind)} @ $.type "
            '(expected "session_meta", "model_msg" or "event_msg")'
        )
    if not isinstance(payload, Mapping):
        raise ProtocolError(f"expected a JSON object @ $.payload, got {_json_type(payload)}")
    tag = payload.get("type")
    cls = payload_class(kind, tag if isinstance(tag, str) else None)
    if cls is None:
        if "type" not in payload:
            raise ProtocolError("required field missing @ $.payload.type")
        raise ProtocolError(f"unknown {kind} payload type {json.dumps(tag)} @ $.payload.type")
    try:
        structured = converter.structure(payload, cls)
    except (cattrs.BaseValidationError, ValueError, TypeError, KeyError) as exc:
        raise ProtocolError(f"invalid {tag or kind} payload: {_describe(exc)}") from exc
    origin = data.get("origin")
    if origin is not None:
        try:
            origin = _str_tuple(origin) or None
        except ValueError as exc:
            raise ProtocolError(f"{exc} @ $.origin") from None
    return OmniMessage(timestamp=timestamp, type=kind, payload=structured, origin=origin)


_encode: Final[Callable[[Any], str]] = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False
).encode


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not valid JSON")


_DECODE: Final[Callable[[str], Any]] = json.JSONDecoder(parse_constant=_reject_constant).decode


def dumps(message: OmniMessage[Payload]) -> str:
    """One-line compact JSON (no trailing newline), identical in shape to the wire format."""
    return _encode(to_dict(message))


def loads(line: str | bytes) -> OmniMessage[Payload]:
    """Parse one JSON text into a message; raise :class:`ProtocolError` on bad input."""
    try:
        data = _DECODE(line if isinstance(line, str) else line.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ProtocolError(f"malformed JSON: {exc}") from None
    return from_dict(data)
