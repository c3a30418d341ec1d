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

from .._contract import ToolContext, ToolResult
from ._args import fail, required_string
from ._base import BuiltinTool
from ._images import load_for_call

__all__ = ["TOOL_NAME", "ReadImageTool"]

TOOL_NAME: Final = "read_image"


@final
class ReadImageTool(BuiltinTool):
    """read_image: load one image and hand it to the model.

    ``services.images`` says whether big images are downscaled.
    """

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """Run one call: one delta, and the image on success."""
        source = required_string(args, "source")
        if source is None:
            fail(f'Missing required argument "source" for {TOOL_NAME}.')
        image, note = await load_for_call(source, ctx.workspace_dir, self.services.images)
        await ctx.emit(image.summary)
        return ToolResult(note=note, images=(image.data_url,))
