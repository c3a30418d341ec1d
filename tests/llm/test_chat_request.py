"""OmniMessages → the Chat Completions request body (pure)."""

from __future__ import annotations

from penguin import protocol as om
from penguin.llm import LLMRequest
from penguin.llm._chat_request import chat_completions_body, chat_messages

Message = om.OmniMessage[om.CompleteModelPayload]
READ = om.ToolDefinition(
    name="read_file",
    description="Read a file.",
    parameters={"type": "object", "properties": {"file_path": {"type": "string"}}},
)


def test_body_shape() -> None:
    request = LLMRequest(
        system_prompt="Be brief.",
        messages=(om.user_text("hi"),),
        tools=(READ, om.ToolDefinition(name="noop", description="Nothing.")),
    )
    assert chat_completions_body(request, model_id="m") == {
        "model": "m",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "read_file",
                    "description": "Read a file.",
                    "parameters": {
                        "type": "object",
                        "properties": {"file_path": {"type": "string"}},
                    },
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "noop",
                    "description": "Nothing.",
                    "parameters": {"type": "object", "properties": {}},
                },
            },
        ],
    }


def test_no_tools_no_system_prompt() -> None:
    body = chat_completions_body(
        LLMRequest(system_prompt="", messages=(om.user_text("hi"),), tools=()), model_id="m"
    )
    assert "tools" not in body
    assert body["messages"] == [{"role": "user", "content": "hi"}]


def test_thinking_levels_map_to_reasoning_effort() -> None:
    def effort(level: str | None) -> object:
        request = LLMRequest(system_prompt="", messages=(), tools=(), thinking_level=level)
        return chat_completions_body(request, model_id="m").get("reasoning_effort")

    assert [effort(level) for level in ("low", "medium", "high", "xhigh", "max")] == [
        "low",
        "medium",
        "high",
        "high",
        "high",
    ]
    assert effort(None) is None
    assert effort("unheard-of") is None
    request = LLMRequest(system_prompt="", messages=(), tools=(), thinking_level="max")
    custom = chat_completions_body(request, model_id="m", reasoning_efforts={"max": "xhigh"})
    assert custom["reasoning_effort"] == "xhigh"


def test_extra_body_is_merged_last() -> None:
    request = LLMRequest(system_prompt="", messages=(), tools=())
    body = chat_completions_body(request, model_id="m", extra_body={"temperature": 0, "model": "x"})
    assert (body["temperature"], body["model"]) == (0, "x")


def test_one_assistant_message_per_turn_and_tool_results() -> None:
    messages: list[Message] = [
        om.user_text("read a.txt"),
        om.thinking("I should read it.", fidelity={"reasoning_field": "reasoning_content"}),
        om.assistant_text("Reading."),
        om.tool_call("read_file", {"file_path": "a.txt"}, "call_1"),
        om.tool_call("read_file", '{"file_path": "b.txt"', "call_2"),
        om.tool_call_output("     1\thello", "call_1"),
        om.tool_call_output("[tool error] no such file", "call_2", "failed"),
        om.thinking("Done thinking.", fidelity={"reasoning_field": "reasoning_content"}),
        om.assistant_text("It says hello."),
        om.user_text("thanks"),
    ]
    assert chat_messages("sys", messages) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "read a.txt"},
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"file_path":"a.txt"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"file_path": "b.txt"'},
                },
            ],
            "reasoning_content": "I should read it.",
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "     1\thello"},
        {"role": "tool", "tool_call_id": "call_2", "content": "[tool error] no such file"},
        {"role": "assistant", "content": "It says hello.", "reasoning_content": "Done thinking."},
        {"role": "user", "content": "thanks"},
    ]


def test_reasoning_without_its_field_or_when_disabled_is_not_sent() -> None:
    messages: list[Message] = [
        om.thinking("from elsewhere"),
        om.tool_call("f", "{}", "c1"),
    ]
    assert chat_messages("", messages) == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        }
    ]
    kept: list[Message] = [
        om.thinking("r", fidelity={"reasoning_field": "reasoning"}),
        om.assistant_text("a"),
    ]
    assert chat_messages("", kept) == [{"role": "assistant", "content": "a", "reasoning": "r"}]
    assert chat_messages("", kept, return_reasoning=False) == [
        {"role": "assistant", "content": "a"}
    ]


def test_images_become_content_parts() -> None:
    messages: list[Message] = [
        om.user_text("what is this?"),
        om.image_url("https://example.com/cat.png"),
        om.inline_data("user", "AAAA", "image/png"),
        om.inline_data("user", "AAAA", "application/pdf"),
    ]
    assert chat_messages("", messages) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        }
    ]


def test_tool_images_follow_the_run_of_tool_messages() -> None:
    messages: list[Message] = [
        om.tool_call("read_image", "{}", "c1"),
        om.tool_call("read_image", "{}", "c2"),
        om.tool_call_output("image 1", "c1", images=["data:image/png;base64,AA"]),
        om.user_text("[background_task_done] x", harness=True),
        om.tool_call_output("image 2", "c2", images=["data:image/png;base64,BB"]),
        om.assistant_text("Two images."),
    ]
    out = chat_messages("", messages)
    assert [message["role"] for message in out] == [
        "assistant",
        "tool",
        "tool",
        "user",
        "assistant",
    ]
    assert out[3]["content"] == [
        {"type": "text", "text": "[images from tool call c1]"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
        {"type": "text", "text": "[background_task_done] x"},
        {"type": "text", "text": "[images from tool call c2]"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,BB"}},
    ]


def test_user_input_before_a_tool_output_keeps_its_place() -> None:
    messages: list[Message] = [om.user_text("first"), om.tool_call_output("out", "c1")]
    assert chat_messages("", messages) == [
        {"role": "user", "content": "first"},
        {"role": "tool", "tool_call_id": "c1", "content": "out"},
    ]


def test_unrepresentable_messages_are_left_out() -> None:
    messages: list[Message] = [
        om.user_text("hi"),
        om.inline_thinking("AAAA", "application/octet-stream"),
        om.inline_data("assistant", "AAAA", "image/png"),
    ]
    assert chat_messages("", messages) == [{"role": "user", "content": "hi"}]
