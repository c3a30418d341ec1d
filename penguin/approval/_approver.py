"""The one approver factory of the surfaces: a mode, a permission lookup, a person, a list.

:func:`approver` is what ``penguin chat``, ``penguin run``, ``penguin batch`` and the
server build their ``approve=`` with, so the four agree on what each mode means:

- ``allow-all`` allows and ``deny-all`` denies, asking no one;
- ``read-only`` allows a tool whose permission is exactly ``"r"``; every other call is
  allowed when the session's :class:`~penguin.approval.AllowList` allows it, else put
  to ``ask``;
- ``always-ask`` allows what the list allows and puts every other call to ``ask``.

No ``ask`` (a batch, which has no one to ask) denies what would have been asked.
``ask`` answers like any approver, or with an :class:`~penguin.approval.Answer`: one
``for_session`` is put on the list, and a denial's ``reason`` travels in the
:class:`~penguin.approval.Approval` the engine gets from
:meth:`ModeApprover.decide`, and from there into the model's denial output. An ``ask``
that raises or answers nonsense denies, with the same line on stderr as
:func:`~penguin.approval.consult` writes. The command policy is not checked here:
``Session.run`` wraps every approver with it, so it comes before the mode and the list.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TypeAlias, final

import attrs

from penguin import protocol as om

from ._allow import AllowList, Answer
from ._consult import Approval, consult
from ._errors import ApprovalModeError
from ._modes import APPROVAL_MODES, ApprovalMode, PermissionLookup

__all__ = ["Ask", "ModeApprover", "approver"]

Ask: TypeAlias = Callable[
    [om.OmniMessage[om.ToolCallPayload]],
    Awaitable[om.ApprovalVerdict | Answer] | om.ApprovalVerdict | Answer,
]
"""How a person is asked about one call: a verdict, or an :class:`Answer` (sync or async)."""


@final
@attrs.frozen
class ModeApprover:
    """The approver :func:`approver` makes; calling it is an :data:`~penguin.protocol.ApproveFn`.

    :meth:`decide` is the same decision with the person's reason, for the engine.
    """

    mode: ApprovalMode
    permission: PermissionLookup
    ask: Ask | None = None
    allow_list: AllowList | None = None

    async def decide(self, call: om.OmniMessage[om.ToolCallPayload]) -> Approval:
        """The decision on ``call``; see the module docstring. Never raises an ``Exception``."""
        decided: list[Approval] = []

        async def deciding(asked: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
            approval = await self._decide(asked)
            decided.append(approval)
            return approval.verdict

        verdict = await consult(deciding, call)  # a raising lookup or ask denies, said once
        if decided and decided[-1].verdict == verdict:
            return decided[-1]
        return Approval(verdict)

    async def _decide(self, call: om.OmniMessage[om.ToolCallPayload]) -> Approval:
        mode = self.mode
        if mode == "allow-all":
            return Approval("allow")
        if mode == "deny-all":
            return Approval("deny")
        if mode == "read-only" and self.permission(call.payload.name) == "r":
            return Approval("allow")
        allow_list = self.allow_list
        if allow_list is not None and allow_list.allows(call):
            return Approval("allow")
        if self.ask is None:
            return Approval("deny")
        answer: object = self.ask(call)
        if inspect.isawaitable(answer):
            answer = await answer
        if not isinstance(answer, Answer):
            # A verdict, or nonsense that consult turns into a deny (and says so).
            return Approval(answer)  # type: ignore[arg-type]
        if answer.verdict == "deny":
            return Approval("deny", reason=(answer.reason or "").strip() or None)
        if answer.for_session and allow_list is not None:
            allow_list.allow(call)
        return Approval("allow")

    async def __call__(self, call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        """The verdict alone, for callers that need a plain approver."""
        return (await self.decide(call)).verdict


def approver(
    mode: ApprovalMode,
    permission: PermissionLookup,
    *,
    ask: Ask | None = None,
    allow_list: AllowList | None = None,
) -> ModeApprover:
    """The approver for ``mode`` (see the module docstring).

    ``permission`` is ``session.environment.tool_permission``; ``ask`` the surface's
    question (``None``: nobody to ask, so what would be asked is denied);
    ``allow_list`` the session's list, read before asking and filled by
    ``Answer(for_session=True)``. An invalid ``mode`` raises
    :class:`~penguin.approval.ApprovalModeError` here, not at the first call.
    """
    if mode not in APPROVAL_MODES:
        raise ApprovalModeError(str(mode))
    return ModeApprover(mode, permission, ask, allow_list)
