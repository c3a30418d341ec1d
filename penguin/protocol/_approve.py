"""Calling an approver safely: the one rule both approval and the subagent supervisor keep.

An :data:`~penguin.protocol.ApproveFn` is the protocol's; what asking one *means* —
sync or async, a raising approver denies, an answer that is not a verdict denies, each
with its line on stderr — is written here, once. It sits in the protocol layer because
the two layers that ask approvers, ``penguin.approval`` (the engine's approvals, the
command policy) and ``penguin.environment`` (a child session's calls queued in the
subagent supervisor, reference 5.8), are siblings that may not import each other.
``penguin.protocol`` exports :func:`consult`, :func:`resolve` and :data:`VERDICTS`
(the subagent supervisor imports them from there, never from this module), and
``penguin.approval`` re-exports them as its own; users reach them there.

No I/O beyond the diagnostic line on the ``penguin`` logger.
"""

from __future__ import annotations

import inspect
import reprlib
from typing import Final, get_args

from penguin._log import warn

from ._types import ApprovalVerdict, ApproveFn, OmniMessage, ToolCallPayload

__all__ = ["VERDICTS", "consult", "resolve"]

VERDICTS: Final[tuple[ApprovalVerdict, ...]] = get_args(ApprovalVerdict)
"""The three answers an approver may give: ``allow``, ``deny``, ``forbidden``."""

_short_repr: Final = reprlib.Repr()
_short_repr.maxstring = 60
_short_repr.maxother = 60


async def resolve(approve: ApproveFn, call: OmniMessage[ToolCallPayload]) -> ApprovalVerdict:
    """Call ``approve`` and await its answer when it is awaitable; nothing is guarded.

    For composing approvers (a mode's approver calling its ``ask``): errors and
    odd answers travel up to the :func:`consult` that the engine calls.
    """
    answer = approve(call)
    if inspect.isawaitable(answer):
        return await answer
    return answer


async def consult(approve: ApproveFn | None, call: OmniMessage[ToolCallPayload]) -> ApprovalVerdict:
    """Ask ``approve`` about ``call`` and always come back with a verdict.

    Sync and async approvers are both accepted. The promises, in order:

    - ``approve is None``: ``"deny"`` (no approver denies everything), silently.
    - ``approve`` raises an :class:`Exception`: ``"deny"``, and the line
      ``[penguin] approve callback threw: <message>; denying.`` on the ``penguin``
      logger (stderr unless the application routes it). ``<message>`` is
      ``str(error)``, or the exception's class name when that is empty.
    - ``approve`` answers anything but ``"allow"``, ``"deny"`` or ``"forbidden"``
      (``True``, ``None``, ``"yes"``, ``"Allow"``): ``"deny"``, and the line
      ``[penguin] approve callback answered <repr>, which is not "allow", "deny" or
      "forbidden"; denying.`` No spelling is guessed at: an approver that answers
      loosely is a bug to be seen, and denying is the safe reading.
    - Anything that is not an :class:`Exception` (``trio.Cancelled``,
      ``KeyboardInterrupt``) propagates unchanged.
    """
    if approve is None:
        return "deny"
    try:
        answer: object = await resolve(approve, call)
    except Exception as error:
        warn(f"[penguin] approve callback threw: {str(error) or type(error).__name__}; denying.")
        return "deny"
    for verdict in VERDICTS:
        if isinstance(answer, str) and answer == verdict:
            return verdict
    warn(
        f"[penguin] approve callback answered {_short_repr.repr(answer)}, which is not "
        f'"allow", "deny" or "forbidden"; denying.'
    )
    return "deny"
