"""The server's exceptions: an API error that becomes the spec's error body (S3.1).

::

    PenguinError
     ├── ApiError          status + code + message: {"error": {"code", "message"}}
     │    └── BodyTooLarge  413 payload_too_large, raised while a body is being read
     └── UiFolderError     (ValueError) ``--ui`` names no folder, or one without index.html

Every refusal the server makes — bad input, a missing token, an unknown id, a busy
session — is raised as an :class:`ApiError` by the plain functions and objects that
decide it, and turned into a response in exactly one place (the ASGI guard). The
codes are wire format: a client branches on them. ``message`` is one sentence for a
person that names the offending field or id and, where it helps, what to do.
"""

from __future__ import annotations

from typing import Final, final

from penguin._errors import PenguinError

__all__ = ["MAX_BODY_BYTES", "ApiError", "BodyTooLarge", "UiFolderError", "error_body"]

MAX_BODY_BYTES: Final = 1024 * 1024
"""Request bodies are capped at 1 MiB, counted as read (S2.5)."""


@final
class UiFolderError(PenguinError, ValueError):
    """``--ui`` names no folder, or one without ``index.html`` (the server does not start)."""


class ApiError(PenguinError):
    """A request the server refuses, with the HTTP status and the error code to answer."""

    status: int
    code: str
    message: str

    def __init__(
        self, status: int, code: str, message: str, *, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})
        """Extra response headers (``Allow`` on a 405)."""

    def body(self) -> dict[str, dict[str, str]]:
        """The JSON body of the response: ``{"error": {"code": ..., "message": ...}}``."""
        return error_body(self.code, self.message)


@final
class BodyTooLarge(ApiError):
    """The request body went past :data:`MAX_BODY_BYTES` (declared or as read)."""

    def __init__(self) -> None:
        super().__init__(
            413,
            "payload_too_large",
            f"The request body is larger than {MAX_BODY_BYTES} bytes; send a smaller one.",
        )


def error_body(code: str, message: str) -> dict[str, dict[str, str]]:
    """The one error shape of S3.1."""
    return {"error": {"code": code, "message": message}}
