"""Ids in paths, checked before any file or database use (S2.6).

Sans-IO. The routes themselves are a list of starlette ``Route`` objects in ``_app``;
this module owns what their path parameters may be:

- project and agent ids: the one id rule of ``penguin.config`` (:func:`valid_id`), the
  same the command line, a batch and ``Agent.open`` follow;
- session ids: reference D4's ``session-YYYY-MM-DD-HH-mm-ss-<8hex>``;
- tool call and process ids: ``^[A-Za-z0-9_.:-]{1,128}$``.

:func:`validate_ids` raises the 404 of the resource's kind for the first bad one
(``project_not_found``, ``agent_not_found``, ``session_not_found``,
``approval_not_found``, ``process_not_found``), in path order.

:func:`segment_safe_path` keeps an encoded slash inside its segment: the server
decodes each segment of the raw path on its own, and a ``/`` that was sent as
``%2F`` stays ``%2F``, so ``/api/sessions/..%2F..%2Fetc`` reaches the session route
with the id ``..%2F..%2Fetc`` — refused as ``session_not_found`` — instead of
becoming a path with more segments.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Final

from penguin import config as cfg

from ._errors import ApiError

__all__ = [
    "OTHER_ID",
    "SESSION_ID",
    "segment_safe_path",
    "valid_id",
    "valid_session_id",
    "validate_ids",
]

SESSION_ID: Final = re.compile(
    r"session-[0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9]{2}-[0-9]{2}-[0-9]{2}-[0-9a-f]{8}", re.ASCII
)
"""Session ids as reference D4 makes them: ``session-YYYY-MM-DD-HH-mm-ss-<8hex>``."""
OTHER_ID: Final = re.compile(r"[A-Za-z0-9_.:-]{1,128}", re.ASCII)
"""Tool call ids and process ids."""


def valid_id(value: str) -> bool:
    """Whether ``value`` is a project or agent id (``penguin.config``'s one id rule)."""
    try:
        cfg.validate_id(value)
    except cfg.ConfigError:
        return False
    return True


def valid_session_id(value: str) -> bool:
    """Whether ``value`` has the shape of a session id."""
    return SESSION_ID.fullmatch(value) is not None


def _other_id(value: str) -> bool:
    return OTHER_ID.fullmatch(value) is not None


_PARAMETERS: Final[Mapping[str, tuple[Callable[[str], bool], str, str]]] = {
    "project": (valid_id, "project_not_found", "project"),
    "agent": (valid_id, "agent_not_found", "agent"),
    "session": (valid_session_id, "session_not_found", "session"),
    "call": (_other_id, "approval_not_found", "pending approval for the tool call"),
    "process": (_other_id, "process_not_found", "process"),
}


def validate_ids(params: Mapping[str, object]) -> dict[str, str]:
    """The path parameters, each checked against its kind's pattern (in path order)."""
    checked: dict[str, str] = {}
    for name, value in params.items():
        text = str(value)
        rule = _PARAMETERS.get(name)
        if rule is not None:
            valid, code, kind = rule
            if not valid(text):
                raise ApiError(404, code, f"There is no {kind} {text!r}.")
        checked[name] = text
    return checked


def segment_safe_path(raw_path: bytes) -> str:
    """The decoded path of ``raw_path`` with each segment decoded alone (``%2F`` kept)."""
    text = raw_path.decode("latin-1").split("?", 1)[0]
    return "/".join(
        urllib.parse.unquote(segment).replace("/", "%2F") for segment in text.split("/")
    )
