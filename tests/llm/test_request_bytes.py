"""Issue 20.1d: the body is encoded with its tools and system prompt kept, byte for byte."""

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


LONG = 'A "long" prompt:\n\t\0 é ✓ \\ </script>\n' * 40
OTHER = LONG.replace("long", "other")


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"extra_body": {"temperature": 0.5}},
        {"extra_body": {"tools": [], "model": "x"}},
        {"extra_body": {"messages": [{"role": "user", "content": "instead"}]}},
    ],
)
async def test_20_1_d_the_body_is_the_bytes_of_one_plain_encoding(options: dict[str, Any]) -> None:
    async with OpenAIChatLLM(base_url="http://127.0.0.1:9", model_id="m", **options) as client:
        prompts = ["be brief", LONG, LONG, OTHER, "", LONG[:600], OTHER]
        lists = [(READ, NOOP), (READ, NOOP), (NOOP,), (), (READ, NOOP), (), (NOOP,)]
        for prompt, tools in zip(prompts, lists, strict=True):
            request = LLMRequest(
                system_prompt=prompt,
                messages=(om.user_text("hi " + LONG),),  # the prompt's text in a message too
                tools=tools,
                thinking_level="high",
            )
            assert client._body(request) == _plain(request, **options)
