"""The exceptions of ``penguin.llm``, all internal to a client.

::

    PenguinError           the root of every penguin exception (penguin._errors)
     └── LLMStreamError    a request ended abnormally; ``status`` is its stop reason

Nothing here crosses the :class:`~penguin.llm.LLM` interface: a client raises
:class:`LLMStreamError` where it finds the problem (a bad HTTP status, a broken
event, a stalled read) and collapses it, in one place, into the response's
:class:`~penguin.llm.LLMOutcome`.
"""

from __future__ import annotations

from typing import final

from penguin import protocol as om
from penguin._errors import PenguinError

__all__ = ["LLMStreamError"]


@final
class LLMStreamError(PenguinError):
    """The request failed; ``status`` says how (``timeout`` is worth retrying, ``auth`` is not).

    ``unreachable``, ``retry_after`` and ``rate_limited`` are carried to the outcome
    (:class:`~penguin.llm.LLMOutcome`).
    """

    def __init__(
        self,
        status: om.StopReason,
        message: str,
        *,
        unreachable: bool = False,
        retry_after: float | None = None,
        rate_limited: bool = False,
    ) -> None:
        super().__init__(message)
        self.status: om.StopReason = status
        self.message = message
        self.unreachable = unreachable
        self.retry_after = retry_after
        self.rate_limited = rate_limited
