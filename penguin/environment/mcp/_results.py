"""What a ``tools/call`` result becomes for the model (spec/mcp.md M2.4), sans I/O.

Owns the mapping of a raw result (the JSON object the server answered) to the text,
the images and the failure flag of a tool call; the Environment's close-out then
frames, truncates and archives the text like any tool's. Content blocks are read in
order: text as is; an image as a data URL among the result's images (after the text,
as the close-out places them); audio as a line ``[audio: MIME]``; a resource as its
text when it is a text resource, else a line ``[resource: URI]``. Lines are joined
with newlines. ``structuredContent`` stands in, as compact JSON, only for a result
without a text block. ``isError: true`` fails the call with the server's text.

Decisions where the spec is silent: an image larger than the image tools' limit
(5 MiB decoded, reference 3.11) is not attached but named in a line, so one huge
image cannot blow up a model request; a block of an unknown type becomes a line
``[unsupported content: TYPE]``. A result that is not an object with a ``content``
list raises :class:`ValueError` (the caller reports it as a protocol error).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, final

import attrs

__all__ = ["IMAGE_LIMIT", "MappedResult", "map_result"]

IMAGE_LIMIT: Final = 5 * 1024 * 1024
"""The largest image attached, in decoded bytes (the image tools' limit)."""


@final
@attrs.frozen(kw_only=True)
class MappedResult:
    """A call's output as the close-out takes it."""

    text: str
    images: tuple[str, ...] = ()
    failed: bool = False


def _decoded_size(data: str) -> int:
    return len(data) * 3 // 4 - data[-2:].count("=")


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def _image(block: Mapping[str, Any], parts: list[str], images: list[str]) -> None:
    data, mime = block.get("data"), block.get("mimeType")
    mime = mime if isinstance(mime, str) and mime else "application/octet-stream"
    if not isinstance(data, str):
        parts.append(f"[image: {mime}, no data]")
        return
    size = _decoded_size(data)
    if size > IMAGE_LIMIT:
        parts.append(
            f"[image: {mime}, {_megabytes(size)} exceeds the {_megabytes(IMAGE_LIMIT)} limit; "
            "not shown]"
        )
        return
    images.append(f"data:{mime};base64,{data}")


def _resource(block: Mapping[str, Any], parts: list[str]) -> None:
    resource = block.get("resource") if block.get("type") == "resource" else block
    if not isinstance(resource, Mapping):
        parts.append("[resource: ?]")
        return
    text = resource.get("text")
    if block.get("type") == "resource" and isinstance(text, str):
        parts.append(text)
        return
    uri = resource.get("uri")
    parts.append(f"[resource: {uri if isinstance(uri, str) else '?'}]")


def map_result(result: object) -> MappedResult:
    """The text, images and failure of a raw ``tools/call`` result."""
    if not isinstance(result, Mapping):
        raise ValueError(f"expected a result object, got {type(result).__name__}")
    content = result.get("content", [])
    if not isinstance(content, list):
        raise ValueError(f'"content" is not a list (got {type(content).__name__})')
    parts: list[str] = []
    images: list[str] = []
    has_text = False
    for block in content:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if not isinstance(block, Mapping):
            parts.append("[unsupported content: not an object]")
        elif kind == "text":
            text = block.get("text")
            parts.append(text if isinstance(text, str) else "")
            has_text = True
        elif kind == "image":
            _image(block, parts, images)
        elif kind == "audio":
            mime = block.get("mimeType")
            parts.append(f"[audio: {mime if isinstance(mime, str) else '?'}]")
        elif kind in ("resource", "resource_link"):
            _resource(block, parts)
        else:
            parts.append(f"[unsupported content: {kind}]")
    structured = result.get("structuredContent")
    if structured is not None and not has_text:
        parts.insert(0, json.dumps(structured, ensure_ascii=False, separators=(",", ":")))
    return MappedResult(
        text="\n".join(parts), images=tuple(images), failed=result.get("isError") is True
    )
