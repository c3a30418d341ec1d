r"""Server-sent events, sans-IO: bytes in, events out.

:class:`SSEParser` follows the WHATWG ``text/event-stream`` rules: lines end with
``\r\n``, ``\n`` or ``\r`` (a ``\r`` at the end of one chunk and a ``\n`` at the
start of the next are one line end); a line starting with ``:`` is a comment; a
field line is ``name: value`` (one space after the colon is dropped) or a bare
``name``; ``data`` lines accumulate (joined with ``\n``) and a blank line
dispatches the event; an event without data is not dispatched; ``id`` persists
across events and ``retry`` sets :attr:`SSEParser.retry`. A UTF-8 BOM at the very
start is skipped and invalid UTF-8 decodes with replacement characters.

One deliberate leniency: at the end of the stream, :meth:`SSEParser.close` dispatches
an event whose blank line never came (a server that ends with ``data: [DONE]\n``),
where the standard would discard it. A stream that was cut mid-event then shows its
torn data, and the layer above finds it broken instead of silently missing.

The parser knows nothing of sockets, of JSON or of ``[DONE]``: it is fed whatever
chunks the network delivers, and any chunking of the same bytes yields the same
events. Lines are split per chunk on bytes (a line end never falls inside a UTF-8
sequence), so a chunk costs one decode however many events it holds.
"""

from __future__ import annotations

from typing import final

import attrs

__all__ = ["SSEEvent", "SSEParser"]

_BOM = "\ufeff"


@final
@attrs.frozen
class SSEEvent:
    """One dispatched event: its type (``message`` by default), data, and the last event id."""

    data: str
    event: str = "message"
    id: str = ""


@final
class SSEParser:
    """An incremental ``text/event-stream`` parser; see the module doc."""

    def __init__(self) -> None:
        self._pending: list[bytes] = []
        """Bytes of the current, unterminated line (a held ``\\r`` included)."""
        self._started = False
        self._data: list[str] = []
        self._event = ""
        self._last_id = ""
        self.retry: int | None = None
        """The reconnection time in ms from the last valid ``retry`` field, if any."""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Parse the next chunk of the stream; return the events it completed."""
        if b"\n" not in chunk and b"\r" not in chunk:
            if chunk:
                self._pending.append(chunk)
            return []
        if self._pending:
            self._pending.append(chunk)
            chunk = b"".join(self._pending)
            self._pending = []
        hold_cr = chunk.endswith(b"\r")
        if hold_cr:
            # A final \r may be the first half of \r\n: keep it until the next chunk.
            chunk = chunk[:-1]
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = chunk.rfind(b"\n")
        if end < 0:
            self._pending.append(chunk + b"\r" if hold_cr else chunk)
            return []
        rest = chunk[end + 1 :]
        if rest or hold_cr:
            self._pending.append(rest + b"\r" if hold_cr else rest)
        return self._lines(chunk[:end].decode("utf-8", "replace").split("\n"))

    def close(self) -> list[SSEEvent]:
        """The stream ended: return the event that was still being received, if any."""
        # Ending the last line and adding a blank one dispatches whatever is pending.
        return self.feed(b"\n\n")

    def _lines(self, lines: list[str]) -> list[SSEEvent]:
        if not self._started and lines:
            self._started = True
            if lines[0].startswith(_BOM):
                lines[0] = lines[0][1:]
        # The hot loop: locals for the state, ``data: `` lines and blank lines first.
        events: list[SSEEvent] = []
        data = self._data
        event_type = self._event
        last_id = self._last_id
        for line in lines:
            if not line:
                if data:
                    joined = data[0] if len(data) == 1 else "\n".join(data)
                    events.append(SSEEvent(joined, event_type or "message", last_id))
                    data = []
                event_type = ""
            elif line[:6] == "data: ":
                data.append(line[6:])
            elif line[0] == ":":
                continue
            else:
                name, _, value = line.partition(":")
                if value[:1] == " ":
                    value = value[1:]
                if name == "data":
                    data.append(value)
                elif name == "event":
                    event_type = value
                elif name == "id":
                    if "\0" not in value:
                        last_id = value
                elif name == "retry" and value.isascii() and value.isdigit():
                    self.retry = int(value)
        self._data = data
        self._event = event_type
        self._last_id = last_id
        return events
