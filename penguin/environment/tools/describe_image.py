"""The describe_image tool (reference 3.12): a vision model describes an image in words.

For models that do not accept images: the image is loaded exactly as read_image
loads it, then sent in a one-off request to the project's vision model, and the
model's text streams back as this call's output. The vision model is reached
through an injected :class:`~penguin.environment.VisionService` (reference D1: a tool
never builds a model client); it is ``None``, or has ``model_id`` ``None``, when the
project has no usable ``vision_model``.

Check order: ``source`` → a vision model is configured → the image loads → the
request. A failed check never calls the model. The request is two user messages,
the prompt text then the image (reference 3.12.2); of the answer only text reaches the
output — thinking, tool calls and everything else are dropped, and nothing of the
request is forwarded into the parent's stream. The call never returns images.

Where the spec is silent: a model answer made only of complete ``text`` messages
(no ``partial_text`` deltas) is forwarded too, one delta per message; and with
downscaling configured but Pillow missing, the one-line note of ``_images`` is
appended (the image is sent as it is). Messages print the fixed name
``describe_image`` (reference 3.1.3).
"""

from __future__ import annotations

from typing import Any, Final, final

from penguin import protocol as om

from .._contract import ToolContext, ToolResult, VisionResponse
from ._args import fail, required_string
from ._base import BuiltinTool
from ._images import load_for_call

__all__ = ["DEFAULT_PROMPT", "NO_TEXT", "NO_VISION_MODEL", "TOOL_NAME", "DescribeImageTool"]

TOOL_NAME: Final = "describe_image"

DEFAULT_PROMPT: Final = (
    "Describe this image in detail, including any visible text, numbers, UI elements and layout."
)
"""The question asked when the call's ``prompt`` is missing or blank (reference 3.12.2)."""

NO_VISION_MODEL: Final = (
    "No vision model is configured for this project. The current model does not accept "
    "images; ask the user to pick a vision model in the model settings (vision_model) to "
    "enable image reading."
)
"""The failure when the project has no vision model (reference 3.12.1)."""

NO_TEXT: Final = "[vision model returned no text]"


@final
class DescribeImageTool(BuiltinTool):
    """describe_image: ask the project's vision model about one image.

    ``services.vision`` is the vision model (or ``None``).
    """

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """Run one call: a header line, then the vision model's text as it streams."""
        source = required_string(args, "source")
        if source is None:
            fail(f'Missing required argument "source" for {TOOL_NAME}.')
        vision = self.services.vision
        model_id = None if vision is None else vision.model_id
        if vision is None or model_id is None:
            fail(NO_VISION_MODEL)
        image, note = await load_for_call(source, ctx.workspace_dir, self.services.images)
        prompt = args.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            prompt = DEFAULT_PROMPT
        await ctx.emit(f"{image.summary} — described by {model_id}:\n")
        request = (om.user_text(prompt), om.image_url(image.data_url))
        async with vision.stream(request) as response:
            wrote_text = await _relay_text(response, ctx)
            outcome = response.outcome
        if outcome.status != "completed":
            failure = f"Vision model ({model_id}) request {outcome.status}"
            if outcome.error_message:
                failure += f": {outcome.error_message}"
            fail(("\n" if wrote_text else "") + failure, note=note)
        if not wrote_text:
            await ctx.emit(NO_TEXT)
        return ToolResult(note=note)


async def _relay_text(response: VisionResponse, ctx: ToolContext) -> bool:
    """Emit the answer's text as it streams; whether there was any."""
    wrote = False
    streamed = False  # deltas of the current text message were emitted
    async for message in response:
        payload = message.payload
        if isinstance(payload, om.PartialTextPayload):
            if payload.event_type == "delta" and payload.text:
                await ctx.emit(payload.text)
                wrote = streamed = True
        elif isinstance(payload, om.TextPayload):
            if not streamed and payload.text:
                await ctx.emit(payload.text)
                wrote = True
            streamed = False
    return wrote
