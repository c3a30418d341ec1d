"""Issue 20.1d: the body is encoded with its tools and system prompt kept, byte for byte."""

from __future__ import annotations

import json
from typing import Any

import pytest

from penguin import protocol as om
from penguin._kept import Kept
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


def test_20_1_d_the_prompts_of_many_sessions_in_turn_are_each_encoded_once() -> None:
    """A batch's client serves 64 sessions at once, each with a prompt of its own."""
    encoded: list[str] = []

    def encode(prompt: str) -> bytes:
        encoded.append(prompt)
        return json.dumps(prompt).encode()

    kept = Kept[str, bytes](encode, 512, hashable=True)
    prompts = [f"{LONG} session {n}" for n in range(64)]
    for _ in range(6):  # six turns, the sessions interleaved
        for prompt in prompts:
            assert kept.get(prompt) == json.dumps(prompt).encode()
    assert encoded == prompts


def test_20_1_d_past_the_bound_the_least_recently_used_prompt_goes() -> None:
    encoded: list[str] = []

    def encode(prompt: str) -> bytes:
        encoded.append(prompt)
        return prompt.encode()

    kept = Kept[str, bytes](encode, 2, hashable=True)
    for prompt in ("a", "b", "a", "c", "a", "b"):
        kept.get(prompt)
    assert encoded == ["a", "b", "c", "b"]  # "b" went for "c"; "a" stayed in use
