"""OmniMessages → an OpenAI Chat Completions request body. Pure, no I/O.

The mapping (the protocol's complete messages on the left):

- the system prompt → the first ``{"role": "system"}`` message (left out when empty);
- user ``text``, ``image_url`` and image ``inline_data`` → one ``user`` message per
  run of user input: a lone text is sent as a string, anything else as content
  parts (``{"type": "text"}`` / ``{"type": "image_url", "image_url": {"url"}}``);
- the assistant's ``thinking``, ``text`` and ``tool_call`` messages of one turn (a
  run with nothing else between them) → ONE ``assistant`` message: ``content`` is the
  texts joined as they were streamed (``null`` when there are none), ``tool_calls``
  the calls in order, and the reasoning goes back in the field its thinking message
  was read from (``fidelity["reasoning_field"]``, e.g. ``reasoning_content``);
  thinking without that fidelity (another provider's, or scripted) is not sent;
- each ``tool_call_output`` → ``{"role": "tool", "tool_call_id", "content"}`` with the
  complete output. Tool messages carry no images, so a tool output's ``images`` go
  into the ``user`` message that follows the run of tool messages, each batch after
  a text part naming its call; user input that arrives inside a run of tool outputs
  (a harness note) waits there too, because the API wants every tool message
  directly after the assistant message that made the calls.

Not sent: ``inline_thinking``, assistant ``inline_data`` and non-image user
``inline_data``, which Chat Completions has no place for. Arguments of a tool call
are sent verbatim, even when they are not valid JSON.

``thinking_level`` → ``reasoning_effort`` through :data:`REASONING_EFFORTS` by
default: ``low``, ``medium`` and ``high`` as they are, and ``xhigh`` and ``max`` as
``high``, the strongest effort every reasoning model of the API accepts. A level
without a mapping sends no ``reasoning_effort``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Final, final

from penguin import protocol as om

from ._interface import LLMRequest

__all__ = ["REASONING_EFFORTS", "chat_completions_body", "chat_messages"]

REASONING_EFFORTS: Final[Mapping[str, str]] = MappingProxyType(
    {"low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}
)
"""The default thinking level → ``reasoning_effort`` mapping."""

_EMPTY_SCHEMA: Final[Mapping[str, Any]] = MappingProxyType({"type": "object", "properties": {}})

JSONObject = dict[str, Any]


def chat_completions_body(
    request: LLMRequest,
    *,
    model_id: str,
    reasoning_efforts: Mapping[str, str] = REASONING_EFFORTS,
    return_reasoning: bool = True,
    extra_body: Mapping[str, Any] | None = None,
) -> JSONObject:
    """The JSON body of ``POST /chat/completions`` for ``request``, streaming with usage.

    ``extra_body`` entries are added last (sampling parameters, provider options)
    and win over the computed ones.
    """
    body: JSONObject = {
        "model": model_id,
        "messages": chat_messages(
            request.system_prompt, request.messages, return_reasoning=return_reasoning
        ),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [_tool(tool) for tool in request.tools]
    if request.thinking_level is not None:
        effort = reasoning_efforts.get(request.thinking_level)
        if effort is not None:
            body["reasoning_effort"] = effort
    if extra_body:
        body.update(extra_body)
    return body


def _tool(tool: om.ToolDefinition) -> JSONObject:
    parameters = tool.parameters if tool.parameters is not None else _EMPTY_SCHEMA
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": dict(parameters),
        },
    }


def chat_messages(
    system_prompt: str,
    messages: Iterable[om.OmniMessage[om.CompleteModelPayload]],
    *,
    return_reasoning: bool = True,
) -> list[JSONObject]:
    """The ``messages`` array for a system prompt and complete OmniMessages (module doc)."""
    builder = _ChatMessages(return_reasoning=return_reasoning)
    if system_prompt:
        builder.out.append({"role": "system", "content": system_prompt})
    for message in messages:
        builder.add(message.payload)
    builder.flush_assistant()
    builder.flush_user()
    return builder.out


@final
class _ChatMessages:
    def __init__(self, *, return_reasoning: bool) -> None:
        self.return_reasoning = return_reasoning
        self.out: list[JSONObject] = []
        self.user_parts: list[JSONObject] = []
        self.texts: list[str] = []
        self.reasoning: dict[str, list[str]] = {}
        self.tool_calls: list[JSONObject] = []

    def add(self, payload: om.CompleteModelPayload) -> None:
        match payload:
            case om.TextPayload(role="user", text=text):
                self.flush_assistant()
                self.user_parts.append({"type": "text", "text": text})
            case om.ImageUrlPayload(image_url=url):
                self.flush_assistant()
                self.user_parts.append(_image_part(url))
            case om.InlineDataPayload(role="user", data=data, mime_type=mime_type):
                if mime_type.startswith("image/"):
                    self.flush_assistant()
                    self.user_parts.append(_image_part(f"data:{mime_type};base64,{data}"))
            case om.TextPayload(role="assistant", text=text):
                self.flush_user()
                self.texts.append(text)
            case om.ThinkingPayload(thinking=text, fidelity=fidelity):
                self.flush_user()
                field = fidelity.get("reasoning_field") if fidelity else None
                if self.return_reasoning and isinstance(field, str) and field:
                    self.reasoning.setdefault(field, []).append(text)
            case om.ToolCallPayload():
                self.flush_user()
                self.tool_calls.append(
                    {
                        "id": payload.tool_call_id,
                        "type": "function",
                        "function": {"name": payload.name, "arguments": payload.arguments},
                    }
                )
            case om.ToolCallOutputPayload():
                self.flush_assistant()
                if not self._in_tool_run():
                    self.flush_user()
                call_id, output = payload.tool_call_id, payload.output
                self.out.append({"role": "tool", "tool_call_id": call_id, "content": output})
                if payload.images:
                    label = f"[images from tool call {call_id}]"
                    self.user_parts.append({"type": "text", "text": label})
                    self.user_parts.extend(_image_part(url) for url in payload.images)
            case _:
                pass  # inline_thinking, assistant inline_data: no place in Chat Completions

    def _in_tool_run(self) -> bool:
        last = self.out[-1] if self.out else None
        return last is not None and (last["role"] == "tool" or "tool_calls" in last)

    def flush_user(self) -> None:
        if not self.user_parts:
            return
        parts, self.user_parts = self.user_parts, []
        if len(parts) == 1 and parts[0]["type"] == "text":
            self.out.append({"role": "user", "content": parts[0]["text"]})
        else:
            self.out.append({"role": "user", "content": parts})

    def flush_assistant(self) -> None:
        if not (self.texts or self.tool_calls or self.reasoning):
            return
        message: JSONObject = {
            "role": "assistant",
            "content": "".join(self.texts) if self.texts else None,
        }
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        for field, texts in self.reasoning.items():
            message[field] = "".join(texts)
        self.out.append(message)
        self.texts, self.tool_calls, self.reasoning = [], [], {}


def _image_part(url: str) -> JSONObject:
    return {"type": "image_url", "image_url": {"url": url}}
