"""Issue 20.1d: the request body is encoded with its tool list cached, byte for byte as before."""

from __future__ import annotations

import json
from typing import Any

import pytest

from penguin import protocol as om
from penguin.llm import LLMRequest, OpenAIChatLLM
from penguin.llm._chat_request import chat_completions_body

READ = om.ToolDefinition(
    name="read_file",
    description="Read a file. \0 é",
    parameters={"type": "object", "properties": {"file_path": {"type": "string"}}},
)
NOOP = om.ToolDefinition(name="noop", description="Nothing.")


def _plain(request: LLMRequest, **options: Any) -> bytes:
    body = chat_completions_body(request, model_id="m", **options)
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


@pytest.mark.parametrize(
    "options",
    [{}, {"extra_body": {"temperature": 0.5}}, {"extra_body": {"tools": [], "model": "x"}}],
)
async def test_20_1_d_the_body_is_the_bytes_of_one_plain_encoding(options: dict[str, Any]) -> None:
    async with OpenAIChatLLM(base_url="http://127.0.0.1:9", model_id="m", **options) as client:
        for tools in [(READ, NOOP), (READ, NOOP), (NOOP,), (), (READ, NOOP)]:
            request = LLMRequest(
                system_prompt="be brief",
                messages=(om.user_text("hi"),),
                tools=tools,
                thinking_level="high",
            )
            assert client._body(request) == _plain(request, **options)
