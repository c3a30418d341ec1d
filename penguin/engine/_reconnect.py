"""How a model request ends, and whether it is tried again (reference D6).

This module owns the one rule both kinds of model request follow — a turn's and a
compaction's summary request: the ``token_usage`` and ``request_end`` records that
close an attempt, which outcomes are retried, and how long to wait first
(:class:`ReconnectPolicy`). It does not stream, record or run anything; the turn and
the compaction send the records where each of them sends its own (the stream, or the
trace alone) and wait with :func:`wait_to_retry`.

Retried: the failures ``failed``, ``timeout`` and ``malformed``, and, for a summary, a
request that completed without a usable reply. Never retried: ``auth`` (the
credentials will not get better by waiting) and ``aborted``, which is the engine's
word for a user interrupt and which a model client never reports
(:mod:`penguin.llm`); a client that reports it anyway is taken at its word, and the
request is not tried again.

How long to wait follows the failure: a server that cannot be reached at all
(``unreachable``: connection refused, an unknown host) is tried twice more within a
few seconds, then given up, since a long wait will not bring it up; a server that
said how long to wait (``Retry-After``) is waited for that long, up to a cap; every
other failure waits on the ladder.
"""

from __future__ import annotations

from typing import Final, final

import attrs
import trio

from penguin import protocol as om
from penguin.llm import LLMOutcome

__all__ = [
    "RETRYABLE",
    "ReconnectPolicy",
    "RequestEnd",
    "end_request",
    "usage_record",
    "wait_to_retry",
]

RETRYABLE: Final = frozenset({"failed", "timeout", "malformed"})
"""The stop reasons of a failed request that are worth another attempt."""


@final
@attrs.frozen(kw_only=True)
class ReconnectPolicy:
    """Waits before each in-run retry of a failed request (reference D6: 2, 4, 8, 16, 30 s).

    ``unreachable_delays`` are the waits when the server could not be reached at all
    (two retries within 2 s, then the request fails); ``max_retry_after`` caps the
    wait a server asks for with ``Retry-After``, which replaces the ladder's.
    """

    delays: tuple[float, ...] = (2.0, 4.0, 8.0, 16.0, 30.0)
    unreachable_delays: tuple[float, ...] = (0.5, 1.5)
    max_retry_after: float = 60.0

    def delay(self, attempt: int, outcome: LLMOutcome | None = None) -> float | None:
        """Seconds to wait after failed attempt ``attempt`` (1-based), or None: give up.

        ``outcome`` is how that attempt ended, when known: it picks the waits.
        """
        unreachable = outcome is not None and outcome.unreachable
        ladder = self.unreachable_delays if unreachable else self.delays
        if attempt > len(ladder):
            return None
        if outcome is not None and outcome.retry_after is not None:
            return min(outcome.retry_after, self.max_retry_after)
        return ladder[attempt - 1]


@final
@attrs.frozen
class RequestEnd:
    """How one attempt ended: its ``request_end`` record and the wait before the next one.

    ``retry_in`` is ``None`` when there is no next attempt: the request completed, was
    interrupted, failed for good, or ran out of the policy's delays.
    """

    record: om.OmniMessage[om.RequestEndPayload]
    retry_in: float | None


def end_request(
    outcome: LLMOutcome | None, attempt: int, policy: ReconnectPolicy, *, usable: bool = True
) -> RequestEnd:
    """The end of attempt ``attempt`` (1-based) whose response ended with ``outcome``.

    ``outcome`` is ``None`` when an interrupt cut the response: ``request_end`` is then
    ``aborted``. ``usable=False`` says a ``completed`` response is no good to the caller
    (a summary request answered with a tool call, or without a summary): it is retried
    like a failure, and its ``request_end`` still says ``completed``. A first attempt
    that succeeds carries no ``attempt``; every failure does, and ``retry_in_ms`` when
    another attempt follows.
    """
    numbered = attempt if attempt > 1 else None
    if outcome is None:
        return RequestEnd(om.request_end("aborted", attempt=numbered), None)
    if outcome.status == "completed" and usable:
        return RequestEnd(om.request_end("completed", attempt=numbered), None)
    retried = outcome.status == "completed" or outcome.status in RETRYABLE
    delay = policy.delay(attempt, outcome) if retried else None
    record = om.request_end(
        outcome.status,
        error_message=outcome.error_message,
        attempt=attempt,
        retry_in_ms=None if delay is None else round(delay * 1000),
    )
    return RequestEnd(record, delay)


def usage_record(
    outcome: LLMOutcome, session_tokens: om.TokenCounts
) -> om.OmniMessage[om.TokenUsagePayload] | None:
    """``token_usage`` of a completed request, or of a failed one that reported usage.

    A failed request without usage says nothing about the context's size, so it
    does not overwrite the last measure: ``None``. ``session_tokens`` are the
    session's counts before this request.
    """
    if outcome.usage is None and outcome.status != "completed":
        return None
    usage = outcome.usage or om.TokenCounts()
    return om.token_usage(session_tokens + usage, usage)


async def wait_to_retry(delay: float, interrupt: trio.Event) -> bool:
    """Wait ``delay`` seconds before the next attempt; False if ``interrupt`` came first."""
    with trio.move_on_after(delay):
        await interrupt.wait()
        return False
    return True
