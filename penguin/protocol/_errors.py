"""The protocol's one exception.

::

    PenguinError         the root of every penguin exception (penguin._errors)
     └── ProtocolError   (also ValueError) a JSON text or dict is not a valid OmniMessage

Its message names the offending place with a JSON path (``$.payload.text``) and
says what was expected there.
"""

from __future__ import annotations

from typing import final

from penguin._errors import PenguinError

__all__ = ["ProtocolError"]


@final
class ProtocolError(PenguinError, ValueError):
    """Input that is not a valid OmniMessage: malformed JSON, unknown type, bad field."""
