"""The approver of a server session: the mode from the index, on every decision (S6.1).

A :class:`SessionApprover` is the ``approve=`` a server task runs with. For each
call it reads the session's ``approvalMode`` from the index — never a copy kept in
memory — and lets :func:`penguin.approval.approver` (the one factory every surface
uses) decide, exactly as ``penguin run`` does for ``--approve``: ``allow-all``
allows, ``deny-all`` denies, ``read-only`` allows a tool whose permission is exactly
``"r"``, a call the session's :class:`~penguin.approval.AllowList` allows is
allowed, and every other case is asked of a person through the session's
:class:`~._approvals.ApprovalRegistry` (no timeout). So a PATCH between two calls
changes the second call's decision, and a PATCH never resolves a call already
waiting. A person's answer may carry a reason (a denial: the model's denial output
says it) or "for the session" (the call goes on the allow-list); :meth:`decide`
hands both to the engine, which asks approvers that have it.

The command policy is not checked here because it is checked before this approver
is ever reached: ``Session.run`` wraps whatever approver it is given with the
project's policy (``penguin.approval.with_command_policy``), so a match is
``forbidden`` without the mode being read (S6.2). A session whose row is gone (it
is being deleted) denies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import final

from penguin import protocol as om
from penguin.approval import AllowList, Approval, PermissionLookup, approver

from ._approvals import ApprovalRegistry
from ._index import SessionIndex

__all__ = ["SessionApprover"]


@final
class SessionApprover:
    """``approve=`` for one server session; see the module docstring."""

    def __init__(
        self,
        index: SessionIndex,
        session_id: str,
        registry: ApprovalRegistry,
        permission: PermissionLookup,
        *,
        allow_list: AllowList | None = None,
        on_read: Callable[[str], None] | None = None,
    ) -> None:
        self._index = index
        self._session_id = session_id
        self._registry = registry
        self._permission = permission
        self._allow_list = allow_list
        self._on_read = on_read

    async def decide(self, call: om.OmniMessage[om.ToolCallPayload]) -> Approval:
        """The decision on ``call`` under the mode stored for the session right now."""
        mode = await self._index.approval_mode(self._session_id)
        if self._on_read is not None:
            self._on_read(str(mode))
        if mode is None:
            return Approval("deny")
        deciding = approver(
            mode, self._permission, ask=self._registry.ask, allow_list=self._allow_list
        )
        return await deciding.decide(call)

    async def __call__(self, call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        """The verdict alone, for callers that need a plain approver."""
        return (await self.decide(call)).verdict
