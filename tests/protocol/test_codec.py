"""The JSON codec: round trips, wire shape, and the errors bad input gets."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from hypothesis import given

from penguin import protocol as om

from .strategies import messages


@given(messages())
def test_round_trip_through_dicts(message: om.OmniMessage[om.Payload]) -> None:
    assert om.from_dict(om.to_dict(message)) == message


@given(messages())
def test_round_trip_through_json_text_is_byte_identical(
    message: om.OmniMessage[om.Payload],
) -> None:
    line = om.dumps(message)
    assert "\n" not in line
    again = om.loads(line)
    assert again == message
    assert om.dumps(again) == line
    assert json.loads(line) == om.to_dict(message)


@given(messages())
def test_wire_keys_follow_declaration_order_and_omit_absent_optionals(
    message: om.OmniMessage[om.Payload],
) -> None:
    wire = om.to_dict(message)
    assert list(wire)[:3] == ["timestamp", "type", "payload"]
    assert ("origin" in wire) == bool(message.origin)
    payload = message.payload
    expected = [
        a.name
        for a in attrs.fields(type(payload))
        if getattr(payload, a.name) is not None
        or (a.name == "reason" and a.default is None and isinstance(payload, om.AbortPayload))
    ]
    assert list(wire["payload"]) == expected


def test_0_2_tool_call_output_key_order_with_images() -> None:
    msg = om.tool_call_output("hi", "call_1", "completed", images=["data:image/png;base64,AA=="])
    assert list(om.to_dict(msg)["payload"]) == [
        "type",
        "role",
        "output",
        "images",
        "tool_call_id",
        "stop_reason",
    ]


def test_0_2_images_key_omitted_when_empty() -> None:
    assert "images" not in om.to_dict(om.tool_call_output("hi", "c", images=[]))["payload"]
    partial = om.partial_tool_call_output("delta", "x", "c", images=())
    assert "images" not in om.to_dict(partial)["payload"]


def test_abort_reason_is_written_as_null() -> None:
    assert om.to_dict(om.abort())["payload"] == {"type": "abort", "reason": None}


def test_fidelity_passes_through_unchanged() -> None:
    fidelity: dict[str, Any] = {
        "reasoning_field": "reasoning_content",
        "nested": {"z": [1, 2.5, None, True], "a": "é☃"},
        "signature": "EqQBCkYIBxgCKkB",
    }
    line = (
        '{"timestamp":"2026-01-01T00:00:00.000Z","type":"model_msg","payload":{"type":"thinking",'
        '"role":"assistant","thinking":"hm","stop_reason":"completed","fidelity":'
        + json.dumps(fidelity, ensure_ascii=False, separators=(",", ":"))
        + "}}"
    )
    message = om.loads(line)
    assert isinstance(message.payload, om.ThinkingPayload)
    assert message.payload.fidelity == fidelity
    assert om.dumps(message) == line


def test_legacy_and_future_extra_keys_are_tolerated() -> None:
    line = (
        '{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":'
        '{"session_id":"s","provider":"p","model_id":"m","model_context_window":"128k",'
        '"system_prompt":"","agent_state":"/a","workspace":"/w","thinking_level":"high","tools":[]}}'
    )
    meta = om.loads(line)
    assert isinstance(meta.payload, om.SessionMetaPayload)
    assert meta.payload.model_context_window == "128k"


def test_timestamp_format() -> None:
    stamp = om.user_text("x").timestamp
    assert len(stamp) == 24
    assert stamp[10] == "T"
    assert stamp.endswith("Z")
    assert stamp[19] == "."


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{", "malformed JSON"),
        ("", "malformed JSON"),
        (b"\xff\xfe", "malformed JSON"),
        ("[]", "must be a JSON object, got array"),
        ('{"type":"model_msg","payload":{}}', "required field missing @ $.timestamp"),
        ('{"timestamp":"t","payload":{}}', "required field missing @ $.type"),
        ('{"timestamp":"t","type":"model_msg"}', "required field missing @ $.payload"),
        ('{"timestamp":1,"type":"model_msg","payload":{}}', "expected a string @ $.timestamp"),
        ('{"timestamp":"t","type":"chat","payload":{}}', 'unknown message type "chat" @ $.type'),
        ('{"timestamp":"t","type":"model_msg","payload":[]}', "expected a JSON object @ $.payload"),
        (
            '{"timestamp":"t","type":"model_msg","payload":{}}',
            "required field missing @ $.payload.type",
        ),
        (
            '{"timestamp":"t","type":"model_msg","payload":{"type":"nope"}}',
            'unknown model_msg payload type "nope" @ $.payload.type',
        ),
        (
            '{"timestamp":"t","type":"event_msg","payload":{"type":"text","role":"user","text":"x"}}',
            'unknown event_msg payload type "text"',
        ),
        (
            '{"timestamp":"t","type":"model_msg","payload":{"type":"text","role":"user"}}',
            "required field missing @ $.payload.text",
        ),
        (
            '{"timestamp":"t","type":"model_msg","payload":{"type":"text","role":"bot","text":"x"}}',
            'expected one of "user", "assistant", got "bot" @ $.payload.role',
        ),
        (
            '{"timestamp":"t","type":"model_msg","payload":{"type":"text","role":"user","text":5}}',
            "expected a string, got number @ $.payload.text",
        ),
        (
            '{"timestamp":"t","type":"model_msg","payload":{"type":"text","role":"user","text":"x",'
            '"fidelity":[1]}}',
            "expected a JSON object, got array @ $.payload.fidelity",
        ),
        (
            '{"timestamp":"t","type":"event_msg","payload":{"type":"token_usage",'
            '"session":{"total":"many"},"request":{}}}',
            "expected an integer, got string @ $.payload.session.total",
        ),
        (
            '{"timestamp":"t","type":"event_msg","payload":{"type":"tool_list_ready",'
            '"tools":[{"name":"x"}]}}',
            "required field missing @ $.payload.tools[0].description",
        ),
        (
            '{"timestamp":"t","type":"model_msg","payload":{"type":"text","role":"user","text":"x"},'
            '"origin":[1]}',
            "expected a string, got number @ $.origin",
        ),
    ],
)
def test_bad_input_raises_one_protocol_error_naming_the_problem(
    text: str | bytes, fragment: str
) -> None:
    with pytest.raises(om.ProtocolError) as info:
        om.loads(text)
    assert fragment in str(info.value)
    assert isinstance(info.value, ValueError)


def test_from_dict_rejects_non_mapping() -> None:
    with pytest.raises(om.ProtocolError, match="got string"):
        om.from_dict("text")  # type: ignore[arg-type]


def test_empty_origin_is_this_session() -> None:
    line = (
        '{"timestamp":"t","type":"model_msg",'
        '"payload":{"type":"text","role":"user","text":"x"},"origin":[]}'
    )
    message = om.loads(line)
    assert message.origin is None
    assert "origin" not in om.to_dict(message)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_json_constants_are_malformed(constant: str) -> None:
    line = (
        '{"timestamp":"t","type":"model_msg","payload":{"type":"text","role":"user",'
        f'"text":"x","fidelity":{{"a":{constant}}}}}}}'
    )
    with pytest.raises(om.ProtocolError, match=f"malformed JSON: {constant} is not valid JSON"):
        om.loads(line)
