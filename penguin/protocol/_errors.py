"""The protocol's one exception.

::

    ValueError
     └── ProtocolError   a JSON text or dict is not a valid OmniMessage

Its message names the offending place with a JSON path (``$.payload.text``) and
says what was expected there.
"""

from __future__ import annotations

__all__ = ["ProtocolError"]


class ProtocolError(ValueError):
    """Input that is not a valid OmniMessage: malformed JSON, unknown type, bad field."""
