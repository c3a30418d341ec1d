"""The model context as a pure function of the trace: the sans-IO core of the agent loop.

A :class:`Ledger` is fed every message the engine records (the trace's records, in
order) and keeps what the next model request must contain: the committed
``history``, the ``pending`` input, the tool calls whose outputs are awaited, and
the turn in progress. It holds no I/O and no clock; every message it synthesizes
(a ``[turn_retried]`` or ``[turn_aborted]`` block, a placeholder output for a call
that never ran) takes its timestamp from the record that caused it.

That is what makes resume exact: the live engine builds each request from its
ledger, and resuming a session replays the trace file into a fresh ledger, which
ends in the same state. The carry-over of an interrupted run is never written to
the trace — it is *derived* from the records, the same way both times.

The rules, per record:

- a user message (text, image) is input: it joins ``pending``;
- ``request_begin`` starts an attempt; the first attempt of a turn freezes the
  turn's input (outputs of the calls awaited from the previous turn, in call order,
  then ``pending``);
- assistant messages belong to the open attempt; its completed tool calls are noted;
- complete tool outputs are kept by call id, whenever they arrive;
- ``request_end`` ``completed`` commits the turn: input, a ``[turn_retried]`` block
  if earlier attempts failed, and the attempt's messages join ``history``, and its
  calls become the awaited ones. A failure with ``retry_in_ms`` waits for the retry;
  a final failure turns the turn back into input (with the ``[turn_retried]`` block
  of what the attempts produced), to be sent again by the next run;
- ``abort`` ends the run: an uncommitted turn goes back to input with a
  ``[turn_aborted]`` block; after a committed turn, the awaited outputs become input
  (a call that never finished gets ``[interrupted: tool aborted by user]``);
- ``compaction_end`` ``completed`` starts an empty context; records between
  ``compaction_begin`` and ``compaction_end`` (the summary request) are not turns;
  an ``abort`` inside that span closes it (a hard stop during a compaction);
- ``token_usage`` updates the counters (inside a compaction, the session's only:
  the summary request is not a request of this context). The engine opens every
  new context's file with one (the session's counters, an empty request), so the
  latest file alone gives them back.
"""

from __future__ import annotations

from typing import final

import attrs

from penguin import protocol as om

from ._markers import TURN_ABORTED, TURN_RETRIED, transcript_lines, turn_block

__all__ = ["INTERRUPTED_OUTPUT", "Ledger"]

INTERRUPTED_OUTPUT = "[interrupted: tool aborted by user]"

Message = om.OmniMessage[om.Payload]
Complete = om.OmniMessage[om.CompleteModelPayload]
Output = om.OmniMessage[om.ToolCallOutputPayload]

_USER_INPUT = (om.TextPayload, om.ImageUrlPayload, om.InlineDataPayload)
_ASSISTANT = (
    om.TextPayload,
    om.ThinkingPayload,
    om.InlineThinkingPayload,
    om.ToolCallPayload,
    om.InlineDataPayload,
)


@final
@attrs.define
class _Attempt:
    produced: list[Complete] = attrs.Factory(list)
    calls: list[str] = attrs.Factory(list)
    status: om.StopReason | None = None
    ended_at: str = ""


def _stamped(message: om.OmniMessage[om.Payload], timestamp: str) -> Complete:
    stamped = attrs.evolve(message, timestamp=timestamp)
    assert om.is_complete_model_message(stamped)
    return stamped


def _harness_text(text: str, timestamp: str) -> Complete:
    return _stamped(om.user_text(text, harness=True), timestamp)


def _placeholder_output(call_id: str, timestamp: str) -> Complete:
    return _stamped(om.tool_call_output(INTERRUPTED_OUTPUT, call_id, "aborted"), timestamp)


@final
class Ledger:
    """What the model has seen and will see next, rebuilt from recorded messages."""

    def __init__(self) -> None:
        self.history: list[Complete] = []
        """The committed context, oldest first."""
        self.pending: list[Complete] = []
        """Input for the next request besides the awaited outputs (user text, reports…)."""
        self.awaiting: list[str] = []
        """Ids of the last committed turn's tool calls, in call order."""
        self.outputs: dict[str, Output] = {}
        """Every complete tool output of this context, by call id."""
        self.session_tokens = om.TokenCounts()
        """Cumulative token usage of the session (compaction requests included)."""
        self.last_request_total = 0
        """The last request's total tokens: how full the context is."""
        self.turns = 0
        """Committed turns in this context (reset by compaction)."""
        self.from_compaction = False
        """Whether this context was opened by a completed compaction."""
        self._turn_input: list[Complete] | None = None
        self._attempts: list[_Attempt] = []
        self._compaction: om.CompactionBeginPayload | None = None

    # ------------------------------------------------------------------ reading

    @property
    def turn_open(self) -> bool:
        """Whether a turn has started and is not committed yet."""
        return self._turn_input is not None

    @property
    def attempt(self) -> int:
        """The 1-based ordinal of the current attempt of the open turn (0 if none)."""
        return len(self._attempts)

    @property
    def open_compaction(self) -> om.CompactionBeginPayload | None:
        """The ``compaction_begin`` of a compaction that has not ended (a crash left it)."""
        return self._compaction

    def has_input(self) -> bool:
        """Whether there is anything to send: awaited outputs or pending input."""
        return bool(self.awaiting or self.pending)

    def request_messages(self) -> list[Complete]:
        """The whole input of the attempt that ``request_begin`` just opened."""
        assert self._turn_input is not None, "request_messages() needs an open attempt"
        messages = [*self.history, *self._turn_input]
        retried = self._retried_block(self._attempts[:-1])
        if retried is not None:
            messages.append(retried)
        return messages

    def carry_over(self) -> list[Complete]:
        """What the next request sends before any new input (awaited outputs + pending)."""
        return [*(self.outputs[c] for c in self.awaiting if c in self.outputs), *self.pending]

    # ------------------------------------------------------------------ feeding

    def observe(self, message: Message) -> None:
        """Take one recorded message into account (non-recordable ones are ignored)."""
        if message.origin:
            return
        payload = message.payload
        if isinstance(payload, om.TokenUsagePayload):
            self.session_tokens = payload.session
            if self._compaction is None:  # a summary request says nothing of this context
                self.last_request_total = payload.request.total
            return
        if isinstance(payload, om.CompactionBeginPayload):
            self._compaction = payload
            return
        if isinstance(payload, om.CompactionEndPayload):
            self._compaction = None
            if payload.status == "completed":
                self._reset_context()
            return
        if self._compaction is not None:
            if not isinstance(payload, om.AbortPayload):
                return  # the summary request is not a turn of this context
            self._compaction = None
        if isinstance(payload, om.ToolCallOutputPayload):
            self.outputs[payload.tool_call_id] = message  # type: ignore[assignment]
        elif isinstance(payload, om.RequestBeginPayload):
            self._begin(message.timestamp)
        elif isinstance(payload, om.RequestEndPayload):
            self._end(payload, message.timestamp)
        elif isinstance(payload, om.AbortPayload):
            self._abort(message.timestamp)
        elif isinstance(payload, _USER_INPUT) and payload.role == "user":
            self.pending.append(message)  # type: ignore[arg-type]
        elif isinstance(payload, _ASSISTANT) and self._attempts:
            attempt = self._attempts[-1]
            attempt.produced.append(message)  # type: ignore[arg-type]
            if isinstance(payload, om.ToolCallPayload) and payload.stop_reason in (
                None,
                "completed",
            ):
                attempt.calls.append(payload.tool_call_id)

    # ------------------------------------------------------------------ transitions

    def _take_awaited(self, timestamp: str) -> list[Complete]:
        taken: list[Complete] = []
        for call_id in self.awaiting:
            output = self.outputs.get(call_id)
            taken.append(output if output is not None else _placeholder_output(call_id, timestamp))
        self.awaiting = []
        return taken

    def _begin(self, timestamp: str) -> None:
        if self._turn_input is None:
            # A live request never begins while a committed call still runs, so every
            # awaited output is here; placeholders only fill in after a crash.
            self._turn_input = [*self._take_awaited(timestamp), *self.pending]
            self.pending = []
            self._attempts = []
        self._attempts.append(_Attempt())

    def _end(self, payload: om.RequestEndPayload, timestamp: str) -> None:
        if not self._attempts:
            return
        attempt = self._attempts[-1]
        attempt.status = payload.status
        attempt.ended_at = timestamp
        if payload.status == "completed":
            assert self._turn_input is not None
            retried = self._retried_block(self._attempts[:-1])
            self.history.extend(self._turn_input)
            if retried is not None:
                self.history.append(retried)
            self.history.extend(attempt.produced)
            self.awaiting = list(attempt.calls)
            self._turn_input = None
            self._attempts = []
            self.turns += 1
        elif payload.status != "aborted" and payload.retry_in_ms is None:
            self._return_turn_to_input(TURN_RETRIED, timestamp)

    def _abort(self, timestamp: str) -> None:
        if self._turn_input is not None:
            self._return_turn_to_input(TURN_ABORTED, timestamp)
        else:
            self.pending = [*self._take_awaited(timestamp), *self.pending]

    def _return_turn_to_input(self, tag: str, timestamp: str) -> None:
        assert self._turn_input is not None
        lines = [
            line for a in self._attempts for line in transcript_lines(a.produced, self.outputs)
        ]
        block = [_harness_text(turn_block(tag, lines), timestamp)] if lines else []
        self.pending = [*self._turn_input, *block, *self.pending]
        self._turn_input = None
        self._attempts = []

    def _retried_block(self, failed: list[_Attempt]) -> Complete | None:
        lines = [line for a in failed for line in transcript_lines(a.produced, self.outputs)]
        if not lines:
            return None
        return _harness_text(turn_block(TURN_RETRIED, lines), failed[-1].ended_at)

    def _reset_context(self) -> None:
        self.history = []
        self.pending = []
        self.awaiting = []
        self.outputs = {}
        self._turn_input = None
        self._attempts = []
        self.turns = 0
        self.last_request_total = 0
        self.from_compaction = True
