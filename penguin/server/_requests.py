"""Request bodies: JSON decoding and the shape of every body the API accepts (S3.2, S4-S6).

Sans-IO: each function takes the raw bytes (or the decoded value) and returns a
frozen request object, or raises :class:`~._errors.ApiError`:

- bytes that are not JSON (or not UTF-8, or ``NaN``) → 400 ``invalid_json``;
- a body that is not an object, a missing required field, a field of the wrong
  type, or an unknown field → 400 ``invalid_request``, the message naming the field;
- the few field-specific codes of the spec (``invalid_approval_mode``, ``no_update``).

Field names are camelCase (S3.4). ``null`` for an optional field means "absent",
except ``title``, where it means "no title".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, Literal, final

import attrs

from penguin.approval import ApprovalMode, ApprovalModeError, parse_approval_mode

from ._errors import ApiError
from ._sandbox import refuse_sandbox_update, sandbox_fields

__all__ = [
    "CreateSession",
    "Decision",
    "StartTask",
    "Steer",
    "UpdateSession",
    "create_session_request",
    "decision_request",
    "decode_json",
    "start_task_request",
    "steer_request",
    "update_session_request",
]

_UNSET: Final = object()


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


def decode_json(raw: bytes, *, empty: object = _UNSET) -> object:
    """The JSON value of a request body; ``empty`` (when given) stands for no body at all."""
    if not raw.strip() and empty is not _UNSET:
        return empty
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        if not raw.strip():
            raise ApiError(
                400, "invalid_json", "The request body is empty; send a JSON object."
            ) from None
        raise ApiError(
            400, "invalid_json", "The request body is not valid JSON; send a JSON object."
        ) from None


def _invalid(message: str) -> ApiError:
    return ApiError(400, "invalid_request", message)


def _fields(body: object, allowed: tuple[str, ...]) -> Mapping[str, object]:
    if not isinstance(body, dict):
        raise _invalid(f"The request body must be a JSON object, not {_kind(body)}.")
    for name in body:
        if name not in allowed:
            expected = ", ".join(allowed) if allowed else "no fields"
            raise _invalid(f"Unknown field {name!r}; this request takes {expected}.")
    return body


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _string(body: Mapping[str, object], name: str, *, required: bool = False) -> str | None:
    value = body.get(name)
    if value is None:
        if required:
            raise _invalid(f"The field {name!r} is required (a string).")
        return None
    if not isinstance(value, str):
        raise _invalid(f"The field {name!r} must be a string, not {_kind(value)}.")
    return value


def _mode(body: Mapping[str, object], name: str = "approvalMode") -> ApprovalMode | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _invalid(f"The field {name!r} must be a string, not {_kind(value)}.")
    try:
        return parse_approval_mode(value)
    except ApprovalModeError:
        raise ApiError(
            400,
            "invalid_approval_mode",
            f"{value!r} is not an approval mode; use allow-all, deny-all, read-only or always-ask.",
        ) from None


@final
@attrs.frozen
class CreateSession:
    """``POST /api/projects/{p}/agents/{a}/sessions``: every field optional."""

    model_id: str | None = None
    provider: str | None = None
    workspace: str | None = None
    approval_mode: ApprovalMode | None = None
    title: str | None = None
    sandbox_mode: str | None = None
    network: bool | None = None


def create_session_request(raw: bytes) -> CreateSession:
    """Read a session-creation body (an empty body is ``{}``)."""
    body = _fields(
        decode_json(raw, empty={}),
        ("modelId", "provider", "workspace", "approvalMode", "sandboxMode", "network", "title"),
    )
    sandbox_mode, network = sandbox_fields(body)
    model_id = _string(body, "modelId")
    provider = _string(body, "provider")
    if (model_id is None) != (provider is None):
        missing = "provider" if provider is None else "modelId"
        raise _invalid(f"The field {missing!r} is required with the other: give both or neither.")
    return CreateSession(
        model_id=model_id,
        provider=provider,
        workspace=_string(body, "workspace"),
        approval_mode=_mode(body),
        title=_string(body, "title"),
        sandbox_mode=sandbox_mode,
        network=network,
    )


@final
@attrs.frozen
class UpdateSession:
    """``PATCH /api/sessions/{id}``: what to change; ``title_set`` tells a null title apart."""

    approval_mode: ApprovalMode | None = None
    title: str | None = None
    title_set: bool = False
    archived: bool | None = None


def update_session_request(raw: bytes) -> UpdateSession:
    """Read a session-update body; an empty object is 400 ``no_update``.

    The reference's ``thinkingLevel`` is accepted and ignored (penguin has no
    thinking levels; docs/reference/differences.md); ``sandboxMode``/``network`` are
    refused (a running session's processes cannot change policy).
    """
    decoded = decode_json(raw)
    refuse_sandbox_update(decoded)
    body = _fields(decoded, ("approvalMode", "title", "archived", "thinkingLevel"))
    _string(body, "thinkingLevel")
    if not body:
        raise ApiError(
            400, "no_update", "The update is empty; give approvalMode, title or archived."
        )
    if "approvalMode" in body and body["approvalMode"] is None:
        raise _invalid("The field 'approvalMode' must be a string, not null.")
    archived = body.get("archived")
    if "archived" in body and not isinstance(archived, bool):
        raise _invalid(f"The field 'archived' must be a boolean, not {_kind(archived)}.")
    return UpdateSession(
        approval_mode=_mode(body),
        title=_string(body, "title"),
        title_set="title" in body,
        archived=archived if isinstance(archived, bool) else None,
    )


@final
@attrs.frozen
class StartTask:
    """``POST /api/sessions/{id}/tasks``: the texts of the user's input, in order."""

    texts: tuple[str, ...]
    queue_if_busy: bool = False
    """The reference's ``queueIfBusy``: queue the task behind a running one."""


def start_task_request(raw: bytes) -> StartTask:
    """Read a task body ``{"input": [{"type": "text", "text": T}, ...]}``.

    The reference's optional fields are accepted: ``queueIfBusy`` (a boolean: queue
    the task when one runs), and ``thinkingLevel`` and ``goal``, which are ignored
    (docs/reference/differences.md).
    """
    body = _fields(decode_json(raw), ("input", "queueIfBusy", "thinkingLevel", "goal"))
    queue = body.get("queueIfBusy")
    if queue is not None and not isinstance(queue, bool):
        raise _invalid(f"The field 'queueIfBusy' must be a boolean, not {_kind(queue)}.")
    _string(body, "thinkingLevel")
    parts = body.get("input")
    if not isinstance(parts, list):
        raise _invalid(
            'The field \'input\' is required: an array of {"type": "text", "text": ...}'
            f" parts, not {_kind(parts)}."
        )
    texts = []
    for index, part in enumerate(parts):
        where = f"input[{index}]"
        if not isinstance(part, dict):
            raise _invalid(f"The field {where!r} must be an object, not {_kind(part)}.")
        for name in part:
            if name not in ("type", "text"):
                raise _invalid(f"Unknown field '{where}.{name}'; a part has type and text.")
        if part.get("type") != "text":
            raise _invalid(f"The field '{where}.type' must be \"text\".")
        text = part.get("text")
        if not isinstance(text, str):
            raise _invalid(f"The field '{where}.text' must be a string, not {_kind(text)}.")
        if text.strip():
            texts.append(text)
    if not texts:
        raise _invalid("The field 'input' has no non-empty text; say what the task is.")
    return StartTask(tuple(texts), queue_if_busy=queue is True)


@final
@attrs.frozen
class Steer:
    """``POST /api/sessions/{id}/steer``: a message for the running task."""

    text: str


def steer_request(raw: bytes) -> Steer:
    """Read a steering body ``{"text": T}`` (T not blank)."""
    body = _fields(decode_json(raw), ("text",))
    text = _string(body, "text", required=True)
    assert text is not None
    if not text.strip():
        raise _invalid("The field 'text' is empty; say what the task should do.")
    return Steer(text)


@final
@attrs.frozen
class Decision:
    """``POST /api/sessions/{id}/approvals/{toolCallId}``: the answer to a pending call.

    ``reason`` (a ``deny`` only) is told to the model in the denial output;
    ``for_session`` (an ``allow`` only) puts the call on the session's allow-list.
    """

    decision: Literal["allow", "deny"]
    reason: str | None = None
    for_session: bool = False


def decision_request(raw: bytes) -> Decision:
    """Read ``{"decision": "allow" | "deny", "reason"?: R, "forSession"?: bool}``."""
    body = _fields(decode_json(raw), ("decision", "reason", "forSession"))
    value = body.get("decision")
    if value not in ("allow", "deny"):
        raise _invalid('The field \'decision\' is required and must be "allow" or "deny".')
    reason = _string(body, "reason")
    if reason is not None and value != "deny":
        raise _invalid("The field 'reason' goes with \"deny\" only.")
    for_session = body.get("forSession")
    if for_session is not None and not isinstance(for_session, bool):
        raise _invalid(f"The field 'forSession' must be a boolean, not {_kind(for_session)}.")
    if for_session and value != "allow":
        raise _invalid("The field 'forSession' goes with \"allow\" only.")
    return Decision(
        "allow" if value == "allow" else "deny",
        reason=reason.strip() or None if reason is not None else None,
        for_session=bool(for_session),
    )
