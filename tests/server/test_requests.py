"""Request bodies and path ids without sockets (S2.6, S3.2, S4.2, S4.5, S5.1, S6.3)."""

from __future__ import annotations

import pytest

from penguin.server import ApiError
from penguin.server._requests import (
    CreateSession,
    create_session_request,
    decision_request,
    start_task_request,
    steer_request,
    update_session_request,
)
from penguin.server._routes import segment_safe_path, validate_ids

GOOD = "session-2026-01-01-00-00-00-abcdef12"


def code_of(function: object, raw: bytes) -> tuple[int, str, str]:
    with pytest.raises(ApiError) as caught:
        function(raw)  # type: ignore[operator]
    return caught.value.status, caught.value.code, caught.value.message


@pytest.mark.parametrize("raw", [b"{", b"nope", b'{"a": NaN}', b"\xff\xfe", b'{"title": "x"'])
def test_s3_2_malformed_json_is_invalid_json(raw: bytes) -> None:
    assert code_of(create_session_request, raw)[:2] == (400, "invalid_json")


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b"[]", "JSON object"),
        (b'"text"', "JSON object"),
        (b'{"modelId": 3, "provider": "p"}', "modelId"),
        (b'{"surprise": true}', "surprise"),
        (b'{"modelId": "m"}', "provider"),
        (b'{"provider": "p"}', "modelId"),
        (b'{"approvalMode": 1}', "approvalMode"),
        (b'{"workspace": ["/"]}', "workspace"),
    ],
)
def test_s3_2_bad_create_bodies_are_invalid_request_naming_the_field(
    raw: bytes, field: str
) -> None:
    status, code, message = code_of(create_session_request, raw)
    assert (status, code) == (400, "invalid_request")
    assert field in message


def test_s4_2_create_fields_and_an_empty_body() -> None:
    assert create_session_request(b"") == CreateSession()
    parsed = create_session_request(
        b'{"modelId": "m", "provider": "p", "approvalMode": " Always-Ask ", "title": "T"}'
    )
    assert parsed == CreateSession(
        model_id="m", provider="p", approval_mode="always-ask", title="T"
    )


def test_s4_2_a_string_that_is_not_a_mode_is_invalid_approval_mode() -> None:
    status, code, message = code_of(create_session_request, b'{"approvalMode": "yolo"}')
    assert (status, code) == (400, "invalid_approval_mode")
    assert "yolo" in message


def test_s4_5_an_empty_update_is_no_update_and_types_are_checked() -> None:
    assert code_of(update_session_request, b"{}")[:2] == (400, "no_update")
    assert code_of(update_session_request, b'{"approvalMode": "x"}')[1] == "invalid_approval_mode"
    assert code_of(update_session_request, b'{"approvalMode": null}')[1] == "invalid_request"
    assert code_of(update_session_request, b'{"archived": "yes"}')[1] == "invalid_request"
    assert code_of(update_session_request, b'{"archived": 1}')[1] == "invalid_request"
    assert code_of(update_session_request, b"")[1] == "invalid_json"
    cleared = update_session_request(b'{"title": null}')
    assert cleared.title_set
    assert cleared.title is None


@pytest.mark.parametrize(
    "raw",
    [
        b"{}",
        b'{"input": "hi"}',
        b'{"input": []}',
        b'{"input": [{"type": "image", "text": "x"}]}',
        b'{"input": [{"type": "text", "text": 5}]}',
        b'{"input": [{"type": "text", "text": "  "}]}',
        b'{"input": [{"type": "text", "text": "a", "extra": 1}]}',
        b'{"input": ["text"]}',
        b'{"input": [], "more": 1}',
    ],
)
def test_s5_1_bad_task_inputs_are_invalid_request(raw: bytes) -> None:
    assert code_of(start_task_request, raw)[:2] == (400, "invalid_request")


def test_s5_1_texts_are_kept_in_order_and_empty_parts_dropped() -> None:
    parsed = start_task_request(
        b'{"input": [{"type": "text", "text": "one"}, {"type": "text", "text": ""},'
        b' {"type": "text", "text": "two"}]}'
    )
    assert parsed.texts == ("one", "two")


def test_s5_2_steer_needs_text() -> None:
    assert steer_request(b'{"text": "faster"}').text == "faster"
    for raw in (b"{}", b'{"text": 1}', b'{"text": " "}', b'{"text": "a", "b": 2}'):
        assert code_of(steer_request, raw)[1] == "invalid_request"


@pytest.mark.parametrize(
    "raw", [b"{}", b'{"decision": "yes"}', b'{"decision": true}', b'{"decision": "Allow"}']
)
def test_s6_3_another_decision_value_is_invalid_request(raw: bytes) -> None:
    assert code_of(decision_request, raw)[:2] == (400, "invalid_request")


def test_s6_3_allow_and_deny() -> None:
    assert decision_request(b'{"decision": "allow"}').decision == "allow"
    assert decision_request(b'{"decision": "deny"}').decision == "deny"


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"project": "../etc"}, "project_not_found"),
        ({"project": ".hidden"}, "project_not_found"),
        ({"project": "p" * 65}, "project_not_found"),
        ({"project": "ok", "agent": "a/b"}, "agent_not_found"),
        ({"project": "bad!", "agent": "a/b"}, "project_not_found"),
        ({"session": "../../etc"}, "session_not_found"),
        ({"session": "session-2026-01-01-00-00-00-ABCDEF12"}, "session_not_found"),
        ({"session": "session-2026-01-01-00-00-00-abcdef12\n"}, "session_not_found"),
        ({"session": "session-2026-01-01-00-00-00-abcdef12", "call": "a b"}, "approval_not_found"),
        (
            {"session": "session-2026-01-01-00-00-00-abcdef12", "call": "x" * 129},
            "approval_not_found",
        ),
        (
            {"session": "session-2026-01-01-00-00-00-abcdef12", "process": "../p"},
            "process_not_found",
        ),
    ],
)
def test_s2_6_bad_ids_are_the_404_of_their_kind(params: dict[str, str], code: str) -> None:
    with pytest.raises(ApiError) as caught:
        validate_ids(params)
    assert (caught.value.status, caught.value.code) == (404, code)


def test_s2_6_good_ids_pass() -> None:
    params = {
        "project": "default_project",
        "agent": "a-1",
        "session": "session-2026-01-01-00-00-00-abcdef12",
        "call": "call_1:x.y-z",
        "process": "proc-0123abcd",
    }
    assert validate_ids(params) == params


def test_s2_6_an_encoded_slash_stays_inside_its_segment() -> None:
    assert segment_safe_path(b"/api/sessions/..%2F..%2Fetc") == "/api/sessions/..%2F..%2Fetc"
    assert segment_safe_path(b"/api/sessions/a%20b/messages") == "/api/sessions/a b/messages"
