"""The read_image tool (reference 3.11): show the model an image, for models that accept images.

``source`` is a path (relative to the workspace, or absolute), an ``http(s)://`` URL
or a ``data:`` URL. On success the output is one line, ``${mime}, ${size}``, and
the image itself travels as the call's ``images`` (a data URL), which the
Environment attaches only to a completed call (reference 1.9c).

This module speaks the tool's language only: the argument check, the summary
line, the failure shape of reference 3.0.2. Loading, limits, MIME detection and the
optional downscaling are ``_images``'s, shared with describe_image. Messages print
the fixed name ``read_image`` (reference 3.1.3).
"""

from __future__ import annotations

from typing import Any, Final, final

from penguin.config import ToolDefinitionConfig

from .._contract import ToolContext, ToolResult, ToolServices
from ._args import fail, required_string
from ._images import ImageError, downscale_unavailable_note, load_image

__all__ = ["TOOL_NAME", "ReadImageTool"]

TOOL_NAME: Final = "read_image"


@final
class ReadImageTool:
    """read_image: load one image and hand it to the model."""

    def __init__(self, definition: ToolDefinitionConfig, services: ToolServices) -> None:
        """Build the tool; ``services.images`` says whether big images are downscaled."""
        self.definition = definition
        self.name = definition.name
        self._settings = services.images

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """Run one call: one delta, and the image on success."""
        source = required_string(args, "source")
        if source is None:
            return await fail(ctx, f'Missing required argument "source" for {TOOL_NAME}.')
        note = downscale_unavailable_note(self._settings)
        try:
            image = await load_image(source, ctx.workspace_dir, self._settings)
        except ImageError as exc:
            await ctx.emit(str(exc))
            return ToolResult(stop_reason="failed", note=note)
        await ctx.emit(image.summary)
        return ToolResult(note=note, images=(image.data_url,))
