"""The fragment discipline, once for every client: deltas in, OmniMessages out.

A client reads its provider's stream and calls :class:`StreamAssembler` with plain
deltas (some text, some reasoning, a piece of tool call number *k*); the assembler
emits the protocol's messages in stream order and keeps the promises of
``_interface``:

- every fragment is ``start → delta… → stop`` and its complete message follows its
  ``stop`` immediately; the deltas concatenate to the complete content;
- text and reasoning are one open fragment at a time: switching between them, or
  starting a tool call, closes the open one (``completed``);
- tool calls stay open until :meth:`StreamAssembler.close`, because providers may
  interleave the arguments of parallel calls; they are closed in the order they
  started;
- :meth:`StreamAssembler.close` ends whatever is still open with one stop reason:
  ``completed`` at a normal end, the error's reason when the stream broke.

Tool call ids are not invented here: the client passes a function that turns the
provider's id (or ``None``) into the id to use, so uniqueness is the client's policy.
Empty deltas are dropped: they carry nothing and would open empty messages.

The messages of one batch (everything between two :meth:`StreamAssembler.take`
calls, i.e. one network read) share one timestamp: they were produced in the same
instant, and stamping each delta separately would cost as much as building it.
Consecutive text (or reasoning) deltas of one batch are joined into one delta
message — a fragment's deltas may be cut anywhere, and one message per read instead
of one per token is what keeps a fast stream cheap for everyone downstream. Deltas
are built from the payload classes directly for the same reason; the rarer messages
go through the protocol's builders and take the batch's stamp.

Pure logic: no I/O, no clock beyond the timestamps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, final

import attrs

from penguin import protocol as om

__all__ = ["StreamAssembler"]

Message = om.OmniMessage[om.Payload]
P = TypeVar("P", bound=om.ModelPayload)


@final
@attrs.define
class _OpenToolCall:
    name: str
    tool_call_id: str
    parts: list[str] = attrs.Factory(list)


@final
class StreamAssembler:
    """Turns a provider's deltas into fragments and complete messages; see the module doc."""

    def __init__(self, tool_call_id: Callable[[str | None], str]) -> None:
        self._tool_call_id = tool_call_id
        self._out: list[Message] = []
        self._stamp: str | None = None
        self._text: list[str] | None = None
        self._thinking: list[str] | None = None
        self._thinking_fidelity: om.Fidelity | None = None
        self._calls: dict[int, _OpenToolCall] = {}
        self._batch: list[str] = []
        self._batch_kind: type[om.PartialTextPayload] | type[om.PartialThinkingPayload] | None
        self._batch_kind = None

    def take(self) -> list[Message]:
        """The messages produced since the last call, in order (the batch ends here)."""
        self._flush_batch()
        out, self._out = self._out, []
        self._stamp = None
        return out

    def _now(self) -> str:
        stamp = self._stamp
        if stamp is None:
            stamp = self._stamp = om.now_iso()
        return stamp

    def _model(self, payload: P) -> om.OmniMessage[P]:
        return om.OmniMessage(self._now(), "model_msg", payload)

    def _restamp(self, message: om.OmniMessage[P]) -> om.OmniMessage[P]:
        return attrs.evolve(message, timestamp=self._now())

    def text(self, delta: str) -> None:
        """A piece of assistant text."""
        if not delta:
            return
        if self._text is None:
            self._close_thinking("completed")
            self._text = []
            self._out.append(self._restamp(om.partial_text("start")))
        self._text.append(delta)
        self._batched(om.PartialTextPayload, delta)

    def thinking(self, delta: str, fidelity: om.Fidelity | None = None) -> None:
        """A piece of reasoning; ``fidelity`` of the first piece goes on the complete message."""
        if not delta:
            return
        if self._thinking is None:
            self._close_text("completed")
            self._thinking = []
            self._thinking_fidelity = dict(fidelity) if fidelity else None
            self._out.append(self._restamp(om.partial_thinking("start")))
        self._thinking.append(delta)
        self._batched(om.PartialThinkingPayload, delta)

    def _batched(
        self, kind: type[om.PartialTextPayload] | type[om.PartialThinkingPayload], delta: str
    ) -> None:
        # The hot path: one call per token of a long answer, one list append.
        if self._batch_kind is not kind:
            self._flush_batch()
            self._batch_kind = kind
        self._batch.append(delta)

    def _flush_batch(self) -> None:
        kind, parts = self._batch_kind, self._batch
        if kind is None:
            return
        joined = parts[0] if len(parts) == 1 else "".join(parts)
        self._batch, self._batch_kind = [], None
        payload: om.PartialTextPayload | om.PartialThinkingPayload
        if kind is om.PartialTextPayload:
            payload = om.PartialTextPayload(
                event_type="delta", text=joined, stop_reason="completed"
            )
        else:
            payload = om.PartialThinkingPayload(
                event_type="delta", thinking=joined, stop_reason="completed"
            )
        self._out.append(om.OmniMessage(self._now(), "model_msg", payload))

    def tool_call(
        self,
        key: int,
        *,
        tool_call_id: str | None = None,
        name: str | None = None,
        arguments: str = "",
    ) -> None:
        """A piece of tool call ``key``; its first piece opens it with its id and name.

        A name that only arrives in a later piece is kept for the later fragments and
        the complete message. An id in a later piece is ignored: the id the fragments
        started with is the call's id.
        """
        self._flush_batch()
        call = self._calls.get(key)
        if call is None:
            self._close_thinking("completed")
            self._close_text("completed")
            call = _OpenToolCall(name=name or "", tool_call_id=self._tool_call_id(tool_call_id))
            self._calls[key] = call
            self._out.append(
                self._restamp(om.partial_tool_call("start", call.name, call.tool_call_id))
            )
        elif name and not call.name:
            call.name = name
        if arguments:
            call.parts.append(arguments)
            self._out.append(
                self._model(
                    om.PartialToolCallPayload(
                        event_type="delta",
                        name=call.name,
                        arguments=arguments,
                        tool_call_id=call.tool_call_id,
                        stop_reason="completed",
                    )
                )
            )

    def close(self, stop_reason: om.StopReason = "completed") -> None:
        """End every open fragment with ``stop_reason``: reasoning, text, then the tool calls."""
        self._flush_batch()
        self._close_thinking(stop_reason)
        self._close_text(stop_reason)
        calls, self._calls = self._calls, {}
        for call in calls.values():
            name, call_id = call.name, call.tool_call_id
            self._out.append(
                self._restamp(om.partial_tool_call("stop", name, call_id, "", stop_reason))
            )
            arguments = "".join(call.parts)
            self._out.append(
                self._restamp(om.tool_call(name, arguments, call_id, stop_reason=stop_reason))
            )

    def _close_text(self, stop_reason: om.StopReason) -> None:
        self._flush_batch()
        if self._text is None:
            return
        text, self._text = "".join(self._text), None
        self._out.append(self._restamp(om.partial_text("stop", "", stop_reason)))
        self._out.append(self._restamp(om.assistant_text(text, stop_reason)))

    def _close_thinking(self, stop_reason: om.StopReason) -> None:
        self._flush_batch()
        if self._thinking is None:
            return
        text, self._thinking = "".join(self._thinking), None
        self._out.append(self._restamp(om.partial_thinking("stop", "", stop_reason)))
        self._out.append(self._restamp(om.thinking(text, stop_reason, self._thinking_fidelity)))
