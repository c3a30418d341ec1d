"""Spec mcp.md M2.4 without a server: a ``tools/call`` result as text and images."""

from __future__ import annotations

import base64

import pytest

from penguin.environment.mcp import IMAGE_LIMIT, MappedResult, map_result


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def test_m2_4_text_blocks_are_joined_with_newlines() -> None:
    assert map_result({"content": [text("one"), text("two")]}) == MappedResult(text="one\ntwo")


def test_m2_4_images_become_data_urls_after_the_text() -> None:
    image = {"type": "image", "data": "iVBORw0K", "mimeType": "image/png"}
    result = map_result({"content": [image, text("caption")]})
    assert result == MappedResult(text="caption", images=("data:image/png;base64,iVBORw0K",))


def test_m2_4_audio_and_resources_become_lines() -> None:
    result = map_result(
        {
            "content": [
                text("start"),
                {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
                {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "A's text"}},
                {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAAA"}},
                {"type": "resource_link", "uri": "https://example.com/c", "name": "c"},
            ]
        }
    )
    assert result.text == (
        "start\n[audio: audio/wav]\nA's text\n[resource: file:///b.bin]\n"
        "[resource: https://example.com/c]"
    )


def test_m2_4_structured_content_only_without_a_text_block() -> None:
    structured = {"answer": 42, "items": ["a", "é"]}
    assert map_result({"content": [], "structuredContent": structured}).text == (
        '{"answer":42,"items":["a","é"]}'
    )
    with_text = map_result({"content": [text("42")], "structuredContent": structured})
    assert with_text.text == "42"


def test_m2_4_an_empty_result_is_empty_text_and_is_error_fails() -> None:
    assert map_result({"content": []}) == MappedResult(text="")
    assert map_result({}) == MappedResult(text="")
    assert map_result({"content": [text("it broke")], "isError": True}) == MappedResult(
        text="it broke", failed=True
    )


def test_m2_4_an_image_over_the_limit_is_named_not_attached() -> None:
    data = base64.b64encode(b"\0" * (IMAGE_LIMIT + 3)).decode()
    result = map_result({"content": [{"type": "image", "data": data, "mimeType": "image/png"}]})
    assert result.images == ()
    assert result.text == "[image: image/png, 5.0 MB exceeds the 5.0 MB limit; not shown]"
    fits = base64.b64encode(b"\0" * IMAGE_LIMIT).decode()
    assert map_result({"content": [{"type": "image", "data": fits, "mimeType": "x"}]}).images


def test_m2_4_unknown_blocks_are_named() -> None:
    assert map_result({"content": [{"type": "video"}, 3]}).text == (
        "[unsupported content: video]\n[unsupported content: not an object]"
    )


@pytest.mark.parametrize("bad", [[], "x", {"content": "not a list"}, None])
def test_m2_5_a_result_of_the_wrong_shape_raises(bad: object) -> None:
    with pytest.raises(ValueError, match=r"expected a result object|is not a list"):
        map_result(bad)
