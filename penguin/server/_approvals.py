"""The approval registry of one session: manual decisions parked until the API answers (S6.3).

When a session's approver needs a person, it calls :meth:`ApprovalRegistry.ask`:
the call is registered as pending under its ``tool_call_id`` (and its ``origin``, the
child session ids of a subagent's call), ``on_request`` is told (the session
publishes ``approval_request``), and the caller waits — with no timeout — until
:meth:`~ApprovalRegistry.answer` gives the verdict — with a person's reason for a
denial, or "for the session" for an allow, as an :class:`~penguin.approval.Answer`
(``ask`` returns one, and the session's approver turns it into the denial output or
an allow-list entry). The first answer wins: an
answered call leaves the registry, so a second answer finds nothing (404
``approval_not_found``).

:meth:`~ApprovalRegistry.deny_all` denies everything pending at once (abort, DELETE,
server shutdown: S6.6); :meth:`~ApprovalRegistry.close` does that and denies every
later question without asking. Each call leaving the registry — answered, denied
in bulk, or withdrawn because its asker stopped waiting (an interrupted run, a
subagent window that closed) — is reported through ``on_resolved`` exactly once, so
a client's list of pending calls follows the registry's.

The same call asked again while pending (a subagent's request re-asked by a new
window) waits on the same entry: one ``approval_request``, one answer for both.
Plain Trio, no I/O; unit-tested with a MockClock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, final

import attrs
import trio

from penguin import protocol as om
from penguin.approval import Answer

__all__ = ["ApprovalRegistry", "PendingApproval"]

Verdict = Literal["allow", "deny"]


@final
@attrs.define(eq=False)
class PendingApproval:
    """One call waiting for a person's decision."""

    call: om.OmniMessage[om.ToolCallPayload]
    decided: trio.Event = attrs.field(factory=trio.Event)
    answer: Answer = attrs.field(factory=lambda: Answer("deny"))
    waiters: int = 0

    @property
    def tool_call_id(self) -> str:
        """The call's id, as the API names it."""
        return self.call.payload.tool_call_id

    @property
    def origin(self) -> tuple[str, ...] | None:
        """The child session ids of a subagent's call; None for the session's own."""
        return tuple(self.call.origin) if self.call.origin else None

    def describe(self) -> dict[str, object]:
        """``{"toolCall": OmniMessage, "origin": [...] | null}`` (S6.4)."""
        origin = self.origin
        return {"toolCall": om.to_dict(self.call), "origin": list(origin) if origin else None}


@final
class ApprovalRegistry:
    """``tool_call_id`` -> a waiting call and its verdict; see the module docstring."""

    def __init__(
        self,
        on_request: Callable[[PendingApproval], None] = lambda pending: None,
        on_resolved: Callable[[str, Verdict], None] = lambda call_id, verdict: None,
    ) -> None:
        self._on_request = on_request
        self._on_resolved = on_resolved
        self._pending: dict[tuple[tuple[str, ...], str], PendingApproval] = {}
        self.closed = False

    @property
    def pending(self) -> list[PendingApproval]:
        """The calls waiting now, in the order they were asked."""
        return list(self._pending.values())

    def __len__(self) -> int:
        return len(self._pending)

    async def ask(self, call: om.OmniMessage[om.ToolCallPayload]) -> Verdict | Answer:
        """Park ``call`` until it is answered: the verdict, or the whole :class:`Answer`.

        A plain ``allow`` or ``deny`` is returned as the verdict; one with a reason or
        "for the session" as the :class:`~penguin.approval.Answer` it was given as.
        """
        if self.closed:
            await trio.lowlevel.checkpoint()
            return "deny"
        key = (tuple(call.origin or ()), call.payload.tool_call_id)
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = PendingApproval(call)
            self._on_request(pending)
        pending.waiters += 1
        try:
            await pending.decided.wait()
        finally:
            pending.waiters -= 1
            if not pending.decided.is_set() and pending.waiters == 0:
                self._resolve(key, pending, Answer("deny"))  # withdrawn: nobody waits any more
        answer = pending.answer
        return answer if answer.reason or answer.for_session else answer.verdict

    def answer(self, tool_call_id: str, decision: Verdict | Answer) -> bool:
        """Give the first pending call named ``tool_call_id`` its answer; False if none."""
        answer = decision if isinstance(decision, Answer) else Answer(decision)
        for key, pending in self._pending.items():
            if key[1] == tool_call_id:
                self._resolve(key, pending, answer)
                return True
        return False

    def deny_all(self) -> int:
        """Deny every pending call; how many there were."""
        entries = list(self._pending.items())
        for key, pending in entries:
            self._resolve(key, pending, Answer("deny"))
        return len(entries)

    def close(self) -> None:
        """Deny what is pending and every later question (the session is going away)."""
        self.closed = True
        self.deny_all()

    def _resolve(
        self, key: tuple[tuple[str, ...], str], pending: PendingApproval, answer: Answer
    ) -> None:
        if self._pending.get(key) is not pending:
            return
        del self._pending[key]
        pending.answer = answer
        pending.decided.set()
        self._on_resolved(pending.tool_call_id, answer.verdict)
