"""Asking an approver, safely, and the command-policy wrapper around one (reference 5.2, 5.5).

This module is where the engine obtains an approver's answer:

- :func:`consult` (written in ``penguin.protocol``, which the subagent supervisor
  uses too) turns *any* approver outcome into a verdict. No approver denies
  everything; an approver that raises an :class:`Exception` denies (and says so on
  stderr); an answer that is not a verdict denies (and says so on stderr). Trio
  cancellation, ``KeyboardInterrupt`` and other non-``Exception`` errors propagate:
  an aborted run records no decision.
- :func:`with_command_policy` wraps an approver so that a call forbidden by the
  :class:`~penguin.approval.CommandPolicy` is answered ``"forbidden"`` before the
  wrapped approver is consulted, which is how the policy outranks ``allow-all``.

Which rule fired is not hidden state. The wrapper is a :class:`PolicyApprover`, a
plain :data:`~penguin.protocol.ApproveFn` for everyone who only needs a verdict (the
Environment's ``ctx.approve``, a child session), and whose :meth:`~PolicyApprover.decide`
returns an :class:`Approval` — verdict plus the name of the rule — for the engine,
which records both in the ``approval_decision`` event (``decision`` is the verdict
unchanged, ``forbidden`` included; ``policy_rule`` the rule's name). The matching
itself is pure (``CommandPolicy.match``); this module only sequences it.
"""

from __future__ import annotations

from typing import Final, cast, final

import attrs

from penguin import protocol as om
from penguin.protocol import VERDICTS, consult, resolve

from ._policy import CommandPolicy

__all__ = [
    "DENIED_BY_POLICY",
    "DENIED_BY_USER",
    "VERDICTS",
    "Approval",
    "PolicyApprover",
    "consult",
    "decide",
    "denial_output",
    "resolve",
    "with_command_policy",
]

DENIED_BY_USER: Final = "Tool call denied by user."
"""The output a denied call answers the model with (reference 5.4), when no reason is given."""
DENIED_BY_POLICY: Final = "Tool call denied by policy."
"""The output a ``forbidden`` call answers the model with (reference 5.4)."""


@final
@attrs.frozen
class Approval:
    """One approval outcome: the verdict, and the command-policy rule that forced it.

    ``policy_rule`` is the rule's name when the command policy answered
    ``forbidden`` on its own, and ``None`` whenever the verdict came from an approver
    (even a ``forbidden`` one). ``reason`` is what the person said when denying (a
    ``deny`` only; see :func:`denial_output`).
    """

    verdict: om.ApprovalVerdict
    policy_rule: str | None = None
    reason: str | None = None


def denial_output(approval: Approval) -> str:
    """The output a call that was not allowed answers the model with (reference 5.4).

    ``Tool call denied by policy.`` for ``forbidden``; ``Tool call denied by user.``
    for ``deny``, followed by `` Reason: REASON`` when the person gave one (chat.md
    C5.4), so the model learns why.
    """
    if approval.verdict == "forbidden":
        return DENIED_BY_POLICY
    reason = (approval.reason or "").strip()
    return f"{DENIED_BY_USER} Reason: {reason}" if reason else DENIED_BY_USER


async def decide(
    approve: om.ApproveFn | None, call: om.OmniMessage[om.ToolCallPayload]
) -> Approval:
    """Like :func:`consult`, but also reporting the policy rule or the reason behind a verdict.

    When ``approve`` is a :class:`PolicyApprover` (also one wrapping another, as a
    child session's wrapper wraps its parent's) the rule name comes from whichever
    policy matched; when it is the approver of :func:`penguin.approval.approver` (any
    object with an async ``decide(call) -> Approval``) its outcome is taken whole,
    reason included; for any other approver ``policy_rule`` and ``reason`` are ``None``.
    """
    # Asked with getattr, not a runtime_checkable Protocol: that isinstance lists the
    # protocol's members on every call (7.8 us; ~1 % of a batch's CPU).
    method = getattr(approve, "decide", None)
    if callable(method):
        return cast("Approval", await method(call))
    return Approval(await consult(approve, call))


@final
@attrs.frozen
class PolicyApprover:
    """An approver guarded by a command policy; build it with :func:`with_command_policy`.

    Calling it is an :data:`~penguin.protocol.ApproveFn` (async, never raises an
    ``Exception``); :meth:`decide` is the same decision with the matched rule.
    """

    approve: om.ApproveFn | None
    """The wrapped approver; ``None`` denies every call the policy lets through."""
    policy: CommandPolicy

    async def decide(self, call: om.OmniMessage[om.ToolCallPayload]) -> Approval:
        """``forbidden`` with the rule's name if the policy matches, else the wrapped verdict.

        A matching rule answers without consulting the wrapped approver at all.
        """
        rule = self.policy.match(call)
        if rule is not None:
            return Approval("forbidden", rule.name)
        return await decide(self.approve, call)

    async def __call__(self, call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        """The verdict alone, for callers that need a plain approver."""
        return (await self.decide(call)).verdict


def with_command_policy(approve: om.ApproveFn | None, policy: CommandPolicy) -> PolicyApprover:
    """Wrap ``approve`` so that ``policy`` is checked first (what ``Session.run`` applies).

    A call matched by an enabled rule is ``forbidden`` without consulting ``approve``
    — it outranks ``allow-all`` and a custom approver alike. Every other call is
    decided by :func:`consult` on ``approve`` (so ``None`` still denies, and a raising
    approver still denies with its stderr line). Wrapping an already wrapped approver
    is harmless: both policies are checked, outer first.
    """
    return PolicyApprover(approve, policy)
