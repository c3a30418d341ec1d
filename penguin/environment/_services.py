"""What the layers above hand the builtin tools: :class:`ToolServices`.

The Environment never builds a model client or a child session itself. What only the
composition layer can provide — describe_image's vision model, run_subagent's way to
open child sessions, the image settings of ``system_config.yaml`` — comes in through
``EnvironmentConfig.services`` and goes, untouched, to every builtin tool's factory.

What it deliberately does not hold: the Environment's own machinery (its command and
subagent supervisors). The Environment makes those when it opens and hands them to the
factories itself (``tools._base.Supervisors``), so nothing here is ever replaced.
"""

from __future__ import annotations

from typing import final

import attrs

from penguin.config import ImageSettings

from ._contract import SubagentRunner, VisionService

__all__ = ["ToolServices"]


@final
@attrs.frozen(kw_only=True)
class ToolServices:
    """What the user (the composition layer) supplies to the builtin tools.

    Each service field is ``None`` when the Environment was opened without that
    service; a tool that needs a missing one answers with its "unavailable" message.
    ``images`` is a setting, not a service: it always has a value.
    """

    subagent_runner: SubagentRunner | None = None
    """How run_subagent opens child sessions (``penguin.agent`` provides one)."""
    vision: VisionService | None = None
    """describe_image's vision model."""
    images: ImageSettings = attrs.field(factory=ImageSettings)
    """What read_image and describe_image do with big images (``system_config.yaml``)."""
