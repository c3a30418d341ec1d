"""An OpenAI Chat Completions stream → assembler calls, and errors → stop reasons. Pure.

:class:`ChatStreamDecoder` takes the stream's SSE events in order and drives a
:class:`~penguin.llm._assemble.StreamAssembler` (most events take a fast path that
scans one JSON string instead of parsing the chunk; see the class):

- ``choices[0].delta.content`` → text;
- ``choices[0].delta.reasoning_content`` (DeepSeek, vLLM, SGLang...) or
  ``.reasoning`` (OpenRouter, ollama...) → reasoning, whose complete message gets
  ``fidelity={"reasoning_field": <that name>}`` so the request side can send it back;
- ``choices[0].delta.tool_calls[]`` → tool call pieces keyed by ``index`` (the id and
  name usually come only with the first piece; the arguments concatenate; the
  pieces of parallel calls may interleave). A piece without ``index`` continues the
  last call, or starts a new one when it brings an id of its own;
- ``finish_reason`` and ``data: [DONE]`` mark a proper end; ``usage`` (the last
  chunk, with ``stream_options.include_usage``) → :class:`~penguin.protocol.TokenCounts`.

Every ``finish_reason`` counts as a proper end, ``length`` and ``content_filter``
included: the server chose to stop, and the model sees what it produced.

Errors raise :class:`~penguin.llm._errors.LLMStreamError` with their stop reason:
an event that is not a JSON object → ``malformed``; an error object inside the
stream → classified like an HTTP status when it has a numeric code, else
``failed``; the end of the stream without ``[DONE]`` or a ``finish_reason``
(:meth:`ChatStreamDecoder.end_of_stream`) → ``malformed``.

:func:`status_stop_reason` and :func:`http_error_message` classify a non-200 answer
(reference D6): 401/403 → ``auth``; 408, 429 and 5xx → ``timeout`` (worth retrying);
any other status → ``failed``. The message says what happened in words (``rate
limited: …``, ``server error 500: …``); :func:`retry_after_seconds` reads the wait a
429 or 503 asks for.
"""

from __future__ import annotations

import datetime
import email.utils
import http
import json
import json.decoder
import math
from collections.abc import Callable, Iterable
from typing import Any, Final, TypeAlias, final

from penguin import protocol as om

from ._assemble import StreamAssembler
from ._errors import LLMStreamError
from ._sse import SSEEvent

__all__ = [
    "ChatStreamDecoder",
    "http_error_message",
    "retry_after_seconds",
    "status_stop_reason",
    "usage_counts",
]

_REASONING_FIELDS: Final = ("reasoning_content", "reasoning")
_FIDELITY: Final = {name: {"reasoning_field": name} for name in _REASONING_FIELDS}
_STRING_FIELDS: Final = ("content", *_REASONING_FIELDS)
_scanstring: Final[Callable[[str, int], tuple[str, int]]] = json.decoder.scanstring  # type: ignore[attr-defined]
"""The json module's string-literal scanner (C when available): the text after an
opening quote → the decoded string and the index after the closing quote."""
_MAX_ERROR_TEXT: Final = 500

_Template: TypeAlias = tuple[str, str, int, int, Callable[[str], None]]
"""Prefix (through the opening quote), suffix, their lengths, what a decoded piece feeds."""


def status_stop_reason(status_code: int) -> om.StopReason:
    """The stop reason of an HTTP error status."""
    if status_code in (401, 403):
        return "auth"
    if status_code in (408, 429) or 500 <= status_code <= 599:
        return "timeout"
    return "failed"


def http_error_message(status_code: int, reason_phrase: str, body: bytes) -> str:
    """``"401 Unauthorized: bad key"``: what the status is, and the server's own message.

    A 429 says ``rate limited (429): <message>``, a 5xx ``server error 503: <message>`` (the
    status's phrase when the body says nothing), any other status its number and
    phrase first. The server's message is read from the usual error shapes
    (``{"error": {"message"}}``, ``{"error": "..."}``, ``{"message"}``, ``{"detail"}``),
    else the body's text, shortened.
    """
    if not reason_phrase:
        try:
            reason_phrase = http.HTTPStatus(status_code).phrase
        except ValueError:
            reason_phrase = ""
    detail = _error_detail(body)
    if status_code == 429:
        return f"rate limited (429): {detail}" if detail else "rate limited (429)"
    if 500 <= status_code <= 599:
        said = detail or reason_phrase
        return f"server error {status_code}: {said}" if said else f"server error {status_code}"
    head = f"{status_code} {reason_phrase}".rstrip()
    return f"{head}: {detail}" if detail else head


def retry_after_seconds(value: str | None, now: datetime.datetime | None = None) -> float | None:
    """The wait an HTTP ``Retry-After`` header asks for, in seconds (None: none or unreadable).

    The header is either a number of seconds or an HTTP date; a date in the past is
    a wait of 0.
    """
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.UTC)
        now = now if now is not None else datetime.datetime.now(datetime.UTC)
        seconds = (when - now).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def _error_detail(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip()
    try:
        value = json.loads(text)
    except ValueError:
        return _shorten(text)
    message = _message_of(value)
    return _shorten(message if message is not None else text)


def _message_of(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("error", "message", "detail"):
            if key in value:
                found = _message_of(value[key])
                if found is not None:
                    return found
    return None


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_ERROR_TEXT else text[: _MAX_ERROR_TEXT - 1] + "…"


def usage_counts(usage: dict[str, Any]) -> om.TokenCounts:
    """A Chat Completions ``usage`` object as token counts (cached prompt tokens are reads)."""
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    prompt = _int(usage.get("prompt_tokens"))
    output = _int(usage.get("completion_tokens"))
    total = usage.get("total_tokens")
    return om.TokenCounts(
        cache_read=_int(cached),
        cache_write=0,
        output=output,
        total=_int(total) if total is not None else prompt + output,
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@final
class ChatStreamDecoder:
    """Feeds a Chat Completions event stream into an assembler; see the module doc.

    Most events of a long answer differ from the one before only in one string:
    the piece of text (or reasoning). After an event whose only effect was such a
    piece, the decoder keeps its JSON text around that string as a *template*; an
    event that is the same text with another JSON string literal in that place is
    decoded by scanning that literal alone, which is several times cheaper than
    ``json.loads`` and gives the same result by construction. Anything else takes
    the full path (and may become the next template).
    """

    def __init__(self, assembler: StreamAssembler) -> None:
        self._assembler = assembler
        self.done = False
        """``data: [DONE]`` was received: nothing more will come."""
        self.finish_reason: str | None = None
        self.usage: om.TokenCounts | None = None
        self._last_key = -1
        self._keys_by_id: dict[str, int] = {}
        self._template: _Template | None = None

    def _thinking_piece(self, field: str) -> Callable[[str], None]:
        fidelity = _FIDELITY[field]
        thinking = self._assembler.thinking

        def piece(value: str) -> None:
            thinking(value, fidelity)

        return piece

    def feed(self, events: Iterable[SSEEvent]) -> None:
        """Decode events in order; raises ``LLMStreamError`` at a broken or error event.

        Events after ``[DONE]`` are ignored.
        """
        template = self._template
        if template is not None:
            prefix, suffix, start, stop_offset, piece = template
        for event in events:
            if self.done:
                return
            if template is not None and event.event == "message":
                # The fast path (class doc): the template's text around one string literal.
                data = event.data
                if data.startswith(prefix) and data.endswith(suffix):
                    try:
                        value, end = _scanstring(data, start)
                    except ValueError:
                        pass
                    else:
                        if end == len(data) - stop_offset:
                            piece(value)
                            continue
            self._feed_slow(event)
            template = self._template
            if template is not None:
                prefix, suffix, start, stop_offset, piece = template

    def _feed_slow(self, event: SSEEvent) -> None:
        data = event.data
        if data == "[DONE]":
            self.done = True
            return
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise LLMStreamError(
                "malformed", f"invalid JSON in the response stream: {exc}: {_shorten(data)}"
            ) from None
        if not isinstance(chunk, dict):
            raise LLMStreamError(
                "malformed", f"a response stream event is not a JSON object: {_shorten(data)}"
            )
        if event.event == "error" or chunk.get("error") is not None:
            raise _stream_error(chunk)
        choices = chunk.get("choices")
        if isinstance(choices, list) and choices:
            choice = choices[0]
            if isinstance(choice, dict):
                self._choice(choice)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = usage_counts(usage)
        self._template = None
        if event.event == "message":
            found = _template_of(data, chunk)
            if found is not None:
                prefix, suffix, field = found
                piece = self._assembler.text if field == "content" else self._thinking_piece(field)
                self._template = (prefix, suffix, len(prefix), len(suffix), piece)

    def _choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta")
        if isinstance(delta, dict):
            content = delta.get("content")
            if content and isinstance(content, str):
                self._assembler.text(content)
            for field in _REASONING_FIELDS:
                reasoning = delta.get(field)
                if reasoning and isinstance(reasoning, str):
                    self._assembler.thinking(reasoning, _FIDELITY[field])
                    break
            tool_calls = delta.get("tool_calls")
            if tool_calls and isinstance(tool_calls, list):
                for piece in tool_calls:
                    if isinstance(piece, dict):
                        self._tool_call(piece)
        finish_reason = choice.get("finish_reason")
        if finish_reason and isinstance(finish_reason, str):
            self.finish_reason = finish_reason

    def _tool_call(self, piece: dict[str, Any]) -> None:
        call_id = piece.get("id")
        call_id = call_id if isinstance(call_id, str) and call_id else None
        key = piece.get("index")
        if not isinstance(key, int):
            if call_id is None:
                key = max(self._last_key, 0)
            elif call_id in self._keys_by_id:
                key = self._keys_by_id[call_id]
            else:
                key = self._last_key + 1
        if call_id is not None:
            self._keys_by_id.setdefault(call_id, key)
        self._last_key = max(self._last_key, key)
        function = piece.get("function")
        name = arguments = None
        if isinstance(function, dict):
            name = function.get("name")
            arguments = function.get("arguments")
        self._assembler.tool_call(
            key,
            tool_call_id=call_id,
            name=name if isinstance(name, str) else None,
            arguments=arguments if isinstance(arguments, str) else "",
        )

    def end_of_stream(self) -> None:
        """The stream ended; raises ``LLMStreamError`` (``malformed``) if it ended too early."""
        if not (self.done or self.finish_reason):
            raise LLMStreamError(
                "malformed", "the response stream ended before [DONE] or a finish_reason"
            )


def _template_of(data: str, chunk: dict[str, Any]) -> tuple[str, str, str] | None:
    """The template of an event whose only effect is one piece of text or reasoning.

    That is: the text up to and including the literal's opening quote, the text after
    its closing quote, and the delta field the literal fills.
    """
    if chunk.get("usage") is not None:
        return None
    choices = chunk.get("choices")
    if not isinstance(choices, list) or len(choices) != 1:
        return None
    choice = choices[0]
    if not isinstance(choice, dict) or choice.get("finish_reason") is not None:
        return None
    delta = choice.get("delta")
    if not isinstance(delta, dict):
        return None
    found: tuple[str, str] | None = None
    for key, value in delta.items():
        if value is None or key == "role":
            continue
        if found is not None or key not in _STRING_FIELDS or not isinstance(value, str):
            return None
        found = (key, value)
    if found is None:
        return None
    field, value = found
    # The key must occur once in the text, so the literal after it is the one decoded.
    needle = f'"{field}":'
    at = data.find(needle)
    if at < 0 or data.find(needle, at + 1) >= 0:
        return None
    start = at + len(needle)
    while data[start : start + 1] in (" ", "\t", "\n", "\r"):
        start += 1
    if data[start : start + 1] != '"':
        return None
    literal, end = _scanstring(data, start + 1)
    if literal != value:
        return None
    return data[: start + 1], data[end:], field


def _stream_error(chunk: dict[str, Any]) -> LLMStreamError:
    error = chunk.get("error", chunk)
    message = _message_of(error) or _shorten(json.dumps(chunk))
    code = error.get("code") if isinstance(error, dict) else None
    if isinstance(code, str) and code.isdigit():
        code = int(code)
    if isinstance(code, int) and not isinstance(code, bool) and 100 <= code <= 599:
        return LLMStreamError(
            status_stop_reason(code), f"error in the response stream ({code}): {message}"
        )
    return LLMStreamError("failed", f"error in the response stream: {message}")
