"""The four approval modes of ``--approve`` (reference 5.6) and the approver each one makes.

This module owns the vocabulary (:data:`ApprovalMode`), parsing user text into it,
and :func:`approver_for_mode`, which turns a mode plus two injected capabilities —
an interactive ``ask`` and a ``permission`` lookup — into an
:data:`~penguin.protocol.ApproveFn`. It does no I/O itself: asking the human is the
caller's ``ask``, and the command policy is layered on top separately
(:func:`penguin.approval.with_command_policy`), so a mode never has to know about it.

Invariant: ``allow-all`` and ``deny-all`` never call ``ask``; ``read-only`` allows
without asking only a tool whose permission is exactly ``"r"``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal, TypeAlias, get_args

from penguin import protocol as om
from penguin.config import Permission

from ._consult import resolve
from ._errors import ApprovalModeError

__all__ = [
    "APPROVAL_MODES",
    "DEFAULT_APPROVAL_MODE",
    "ApprovalMode",
    "PermissionLookup",
    "approver_for_mode",
    "parse_approval_mode",
]

ApprovalMode: TypeAlias = Literal["allow-all", "deny-all", "read-only", "always-ask"]
"""How tool calls are approved: everything, nothing, read-only tools, or ask each time."""

APPROVAL_MODES: Final[tuple[ApprovalMode, ...]] = get_args(ApprovalMode)
"""The four modes, in the order the spec lists them."""

DEFAULT_APPROVAL_MODE: Final[ApprovalMode] = "allow-all"
"""The mode used when none is given (``--approve`` absent, a new server session)."""

PermissionLookup: TypeAlias = Callable[[str], Permission | None]
"""A tool name's permission: ``"r"``, ``"rw"``, or ``None`` (unknown tool or no permission).

``Environment.tool_permission`` is one.
"""


def parse_approval_mode(text: str) -> ApprovalMode:
    """Read an approval mode from user text (a flag value, a server request field).

    Surrounding whitespace and letter case do not matter (``" Read-Only "`` is
    ``"read-only"``). Anything else raises :class:`ApprovalModeError`, whose message is
    the spec's line quoting ``text`` as given; the CLI prints it and exits 1.
    """
    candidate = text.strip().lower()
    for mode in APPROVAL_MODES:
        if candidate == mode:
            return mode
    raise ApprovalModeError(text)


def approver_for_mode(
    mode: ApprovalMode, *, ask: om.ApproveFn, permission: PermissionLookup
) -> om.ApproveFn:
    """The approver that implements ``mode``.

    - ``allow-all``: every call is allowed; ``ask`` is never called.
    - ``deny-all``: every call is denied; ``ask`` is never called.
    - ``read-only``: a call is allowed without asking when ``permission(name)`` is
      exactly ``"r"``; every other call (``"rw"``, an unknown tool, a tool without a
      permission) is put to ``ask``.
    - ``always-ask``: every call is put to ``ask``.

    ``ask`` is the interactive prompt (sync or async, answering like any approver).
    The returned approver is async. It does not guard ``ask`` or ``permission``: an
    exception from either propagates, so that :func:`penguin.approval.consult`, which
    the engine calls it through, reports it and denies. ``mode`` is checked here too,
    so a value that bypassed the type checker fails at once rather than at the first
    tool call.
    """
    if mode not in APPROVAL_MODES:
        raise ApprovalModeError(str(mode))
    if mode == "allow-all":

        async def allow_all(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
            return "allow"

        return allow_all
    if mode == "deny-all":

        async def deny_all(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
            return "deny"

        return deny_all
    if mode == "read-only":

        async def read_only(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
            if permission(call.payload.name) == "r":
                return "allow"
            return await resolve(ask, call)

        return read_only

    async def always_ask(call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        return await resolve(ask, call)

    return always_ask
