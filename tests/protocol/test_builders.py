"""Builders, guards and the origin chain."""

from __future__ import annotations

import json

from penguin import protocol as om


def test_tool_call_keeps_string_arguments_verbatim() -> None:
    for raw in ["", "   ", "{not json", '{"a": 1}', "42"]:
        assert om.tool_call("x", raw, "c").payload.arguments == raw


def test_tool_call_writes_mappings_as_compact_json() -> None:
    call = om.tool_call("exec_command", {"description": "say hi", "cmd": "echo é"}, "call_1")
    assert call.payload.arguments == '{"description":"say hi","cmd":"echo é"}'
    assert json.loads(call.payload.arguments) == {"description": "say hi", "cmd": "echo é"}
    assert call.payload.stop_reason == "completed"
    assert call.type == "model_msg"


def test_with_origin_prepends_outer_to_inner() -> None:
    msg = om.assistant_text("hi")
    inner = om.with_origin(msg, "child-b")
    outer = om.with_origin(inner, "child-a")
    assert inner.origin == ("child-b",)
    assert outer.origin == ("child-a", "child-b")
    assert msg.origin is None
    assert outer.payload is msg.payload


def test_empty_fidelity_is_not_written() -> None:
    assert "fidelity" not in om.to_dict(om.assistant_text("x", fidelity={}))["payload"]


def test_user_text_from_the_harness_is_marked() -> None:
    assert om.to_dict(om.user_text("report", harness=True))["payload"]["sender"] == "harness"
    assert "sender" not in om.to_dict(om.user_text("hi"))["payload"]


def test_guards() -> None:
    partial = om.partial_text("delta", "x")
    complete = om.assistant_text("x")
    event = om.request_begin()
    meta = om.session_meta(
        session_id="s",
        provider="p",
        model_id="m",
        model_context_window=1,
        system_prompt="",
        agent_state="/a",
        workspace="/w",
    )
    call = om.tool_call("t", "{}", "c")
    out = om.tool_call_output("o", "c")
    assert om.is_partial(partial)
    assert not om.is_partial(complete)
    assert om.is_complete_model_message(complete)
    assert not om.is_complete_model_message(partial)
    assert not om.is_complete_model_message(event)
    assert om.is_event(event)
    assert not om.is_event(complete)
    assert om.is_session_meta(meta)
    assert not om.is_session_meta(event)
    assert om.is_model_message(partial)
    assert om.is_model_message(complete)
    assert om.is_tool_call(call)
    assert not om.is_tool_call(out)
    assert om.is_tool_call_output(out)
    assert not om.is_tool_call_output(call)


def test_eleven_events_and_seven_complete_payloads() -> None:
    from penguin.protocol._codec import EVENT_PAYLOADS, MODEL_PAYLOADS

    assert len(EVENT_PAYLOADS) == 11
    partial = [c for c in MODEL_PAYLOADS if c.__name__.startswith("Partial")]
    assert len(partial) == 4
    assert len(MODEL_PAYLOADS) - len(partial) == 7


def test_token_counts_add() -> None:
    a = om.TokenCounts(cache_read=1, cache_write=2, output=3, total=4)
    assert a + a == om.TokenCounts(cache_read=2, cache_write=4, output=6, total=8)


def test_request_end_carries_the_retry_detail() -> None:
    wire = om.to_dict(om.request_end("timeout", error_message="429", attempt=2, retry_in_ms=4000))
    assert wire["payload"] == {
        "type": "request_end",
        "status": "timeout",
        "error_message": "429",
        "attempt": 2,
        "retry_in_ms": 4000,
    }
