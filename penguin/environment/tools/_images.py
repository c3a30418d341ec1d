"""Loading an image for read_image and describe_image (reference 3.11, 3.12.1; issue 5 item 6).

Owns where an image comes from — a local file, an ``http(s)://`` URL, a ``data:``
URL — the limits, the MIME decision (magic sniff, ``Content-Type``, file extension),
the size wording, every model-facing text of a failed load, and the optional
downscaling of big images with Pillow. It does not own a tool's argument checks or
output (``read_image``, ``describe_image``) and never talks to a model.

Shape: pure pieces (:func:`format_size`, :func:`sniff_mime`, :func:`extension_mime`,
:func:`content_type_mime`, :func:`decode_data_url`, :func:`fit_within`), blocking
pieces meant for a worker thread (:func:`read_local_image`, :func:`downscale_image`),
and the async shell that drives them (:func:`download_image`, :func:`load_image`).
An interrupt or a timeout reaches a download as trio cancellation (the request is
abandoned at once, the body is never read further), a file read at its next 1 MiB
chunk, and a downscale by abandoning its worker thread.

The exceptions, one per way a load fails; ``str(exc)`` is the exact text the model
sees (reference 3.11.2-3.11.5)::

    PenguinError                     the root of every penguin exception (penguin._errors)
     └── ImageError                  .source
          ├── ImageReadError         a local file or data URL could not be read
          ├── ImageDownloadError     a network error or a non-2xx status (.status)
          ├── EmptyImageError        zero bytes
          ├── ImageTooLargeError     .size (None: "more than" the limit), .limit
          └── UnsupportedImageError  .mime (None when nothing named a type)

Decisions where the spec is silent:

- ``data:`` URLs are accepted as a ``source`` too (``data:image/png;base64,...``, or
  percent-encoded without ``;base64``). Their MIME is the sniffed one, else the
  declared one; the same limits apply to the decoded bytes. In messages such a
  source is shown cut to its first 48 characters and ``…``.
- A download follows redirects, sends ``Accept: image/*`` and gives up after 10 s
  without a connection or 30 s without data (the tool's own timeout may be off).
  A body that grows past the limit without a ``Content-Length`` is abandoned at
  the limit: ``Image too large: more than 5.0 MB exceeds the 5.0 MB limit.``
- A local path is opened without blocking on a FIFO and checked again with
  ``fstat``, so a swap to a non-file after ``stat`` still reads as "not a file".

Downscaling (off unless ``images.downscale`` in ``system_config.yaml``, and only with
Pillow installed): an image over 5 MiB, or with a side over ``images.maxEdge``, is
scaled to fit ``maxEdge`` (aspect ratio kept, EXIF orientation applied) and
re-encoded — a JPEG as JPEG (quality 85), anything else as PNG (the first frame of
an animation), falling back to JPEG (transparency flattened onto white) when the
PNG is still over 5 MiB, and shrinking further by quarters until it fits. Images
up to 64 MiB are accepted for that; the summary line says what was done, e.g.
``image/jpeg, 463.1 kB (downscaled from 8000×6000 to 2048×1536; original
image/jpeg, 24.0 MB)``. An image Pillow cannot decode is sent as it is (or refused with the
spec's message when over 5 MiB). With downscaling on but Pillow missing, the spec's
behaviour applies and :func:`downscale_unavailable_note` says why.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import io
import os
import posixpath
import re
import stat
import urllib.parse
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Final, final

import attrs
import trio

from penguin._concurrency import run_leavable_in_worker
from penguin._errors import PenguinError
from penguin._tls import shared_tls_context
from penguin.config import ImageSettings

from ._args import fail
from ._files import describe_error, resolve_path

if TYPE_CHECKING:
    from PIL import Image as PILImage

__all__ = [
    "DOWNSCALE_INPUT_LIMIT",
    "IMAGE_SIZE_LIMIT",
    "SUPPORTED_MIME_TYPES",
    "EmptyImageError",
    "ImageDownloadError",
    "ImageError",
    "ImageReadError",
    "ImageTooLargeError",
    "LoadedImage",
    "Rescale",
    "UnsupportedImageError",
    "content_type_mime",
    "decode_data_url",
    "download_image",
    "downscale_image",
    "downscale_unavailable_note",
    "extension_mime",
    "fit_within",
    "format_size",
    "is_data_url",
    "is_http_url",
    "load_for_call",
    "load_image",
    "pillow_available",
    "read_local_image",
    "shown_source",
    "sniff_mime",
]

IMAGE_SIZE_LIMIT: Final = 5 * 1024 * 1024
"""The largest image sent to a model, in bytes (reference 3.11.5)."""

DOWNSCALE_INPUT_LIMIT: Final = 64 * 1024 * 1024
"""The largest image accepted when downscaling is on (it is sent only once it fits)."""

SUPPORTED_MIME_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

JPEG_QUALITY: Final = 85
_SHRINK_STEP: Final = 0.75
_SHRINK_ATTEMPTS: Final = 12
_READ_CHUNK: Final = 1024 * 1024
_SHOWN_DATA_URL_CHARS: Final = 48
_HTTP_TIMEOUT_S: Final = 30.0
_HTTP_CONNECT_TIMEOUT_S: Final = 10.0
_EXTENSIONS: Final = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
_HTTP_URL: Final = re.compile(r"https?://", re.IGNORECASE)
_DATA_URL: Final = re.compile(r"data:", re.IGNORECASE)
_EXIF_ORIENTATION: Final = 0x0112
_SWAPPING_ORIENTATIONS: Final = frozenset({5, 6, 7, 8})


# --- errors -------------------------------------------------------------------------------


class ImageError(PenguinError):
    """An image could not be loaded; ``str(exc)`` is the text the model sees."""

    def __init__(self, message: str, *, source: str) -> None:
        super().__init__(message)
        self.source = source
        """The ``source`` argument as given."""


@final
class ImageReadError(ImageError):
    """A local file (or a data URL) could not be read: ``Failed to read image ...``."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f'Failed to read image "{shown_source(source)}": {reason}', source=source)
        self.reason = reason


@final
class ImageDownloadError(ImageError):
    """A URL could not be fetched: a network error, or a status that is not 2xx."""

    def __init__(self, source: str, reason: str, *, status: int | None = None) -> None:
        super().__init__(f'Failed to download image "{source}": {reason}', source=source)
        self.reason = reason
        self.status = status
        """The HTTP status, when the server answered with one that is not 2xx."""


@final
class EmptyImageError(ImageError):
    """The image has zero bytes."""

    def __init__(self, source: str) -> None:
        super().__init__(f'Image "{shown_source(source)}" is empty.', source=source)


@final
class ImageTooLargeError(ImageError):
    """The image is over the limit; ``size`` is ``None`` when a download was cut at it."""

    def __init__(self, source: str, size: int | None, limit: int = IMAGE_SIZE_LIMIT) -> None:
        shown = f"more than {format_size(limit)}" if size is None else format_size(size)
        super().__init__(
            f"Image too large: {shown} exceeds the {format_size(limit)} limit.", source=source
        )
        self.size = size
        self.limit = limit


@final
class UnsupportedImageError(ImageError):
    """Not png, jpeg, gif or webp; ``mime`` is ``None`` when nothing named a type."""

    def __init__(self, source: str, mime: str | None) -> None:
        named = "" if not mime else f' "{mime}"'
        super().__init__(
            f"Unsupported image type{named}: only png, jpeg, gif and webp are supported.",
            source=source,
        )
        self.mime = mime


# --- pure pieces --------------------------------------------------------------------------


def format_size(size: int) -> str:
    """``size(n)`` of reference 3.11.6: ``812 B``, ``1.3 kB``, ``5.0 MB``.

    One decimal with JavaScript's ``toFixed(1)`` rounding: the exact quotient, a
    tie rounded up (1280 bytes are ``1.3 kB``, where Python's ``:.1f`` says 1.2).
    """
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{_one_decimal(size, 1024)} kB"
    return f"{_one_decimal(size, 1024 * 1024)} MB"


def _one_decimal(size: int, unit: int) -> str:
    tenths = (20 * size + unit) // (2 * unit)  # floor(10 * size / unit + 1/2), exactly
    return f"{tenths // 10}.{tenths % 10}"


def sniff_mime(data: bytes) -> str | None:
    """The image type the first bytes announce (reference 3.11.4), or ``None``."""
    if len(data) >= 8 and data.startswith(b"\x89PNG"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(data) >= 12 and data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def extension_mime(path: str) -> str | None:
    """The image type a path's extension names (.png .jpg .jpeg .gif .webp), or ``None``."""
    return _EXTENSIONS.get(posixpath.splitext(path)[1].lower())


def content_type_mime(header: str | None) -> str | None:
    """A ``Content-Type`` value without parameters, lower case; ``None`` when blank."""
    if header is None:
        return None
    return header.split(";", 1)[0].strip().lower() or None


def is_http_url(source: str) -> bool:
    """Whether ``source`` is fetched over HTTP (``^https?://``, any case)."""
    return _HTTP_URL.match(source) is not None


def is_data_url(source: str) -> bool:
    """Whether ``source`` is a ``data:`` URL (any case)."""
    return _DATA_URL.match(source) is not None


def shown_source(source: str) -> str:
    """``source`` as messages show it: a long data URL is cut to its head and ``…``."""
    if is_data_url(source) and len(source) > _SHOWN_DATA_URL_CHARS:
        return source[:_SHOWN_DATA_URL_CHARS] + "…"
    return source


def decode_data_url(source: str) -> tuple[str | None, bytes]:
    """The declared media type (lower case, or ``None``) and the bytes of a data URL.

    Base64 payloads may be percent-encoded, hold whitespace and lack padding.
    Raises :class:`ImageReadError` for a URL without a comma or with bad base64.
    """
    header, comma, payload = source[len("data:") :].partition(",")
    if not comma:
        raise ImageReadError(source, "malformed data URL (no comma before the data).")
    media_type, *parameters = header.split(";")
    declared = media_type.strip().lower() or None
    if not any(parameter.strip().lower() == "base64" for parameter in parameters):
        return declared, urllib.parse.unquote_to_bytes(payload)
    text = "".join(urllib.parse.unquote(payload).split())
    text += "=" * (-len(text) % 4)
    try:
        return declared, base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ImageReadError(source, "the data URL holds invalid base64.") from None


def fit_within(size: tuple[int, int], max_edge: int) -> tuple[int, int]:
    """``size`` scaled so that neither side exceeds ``max_edge`` (aspect kept, sides >= 1)."""
    width, height = size
    longest = max(width, height)
    if longest <= max_edge:
        return size
    return (
        max(1, round(width * max_edge / longest)),
        max(1, round(height * max_edge / longest)),
    )


@final
@attrs.frozen
class Rescale:
    """What downscaling did: the image it started from and the size it ended at."""

    original_mime: str
    original_bytes: int
    original_dimensions: tuple[int, int]
    dimensions: tuple[int, int]

    def describe(self) -> str:
        """The parenthesised part of the summary line (without the parentheses)."""
        width, height = self.dimensions
        original = f"original {self.original_mime}, {format_size(self.original_bytes)}"
        if self.dimensions == self.original_dimensions:
            return f"re-encoded at {width}×{height}; {original}"
        old_width, old_height = self.original_dimensions
        return f"downscaled from {old_width}×{old_height} to {width}×{height}; {original}"


@final
@attrs.frozen
class LoadedImage:
    """An image ready to send: its MIME type, its bytes, and what downscaling did."""

    mime: str
    data: bytes = attrs.field(repr=lambda data: f"<{len(data)} bytes>")
    rescale: Rescale | None = None

    @property
    def size_text(self) -> str:
        """``format_size`` of the bytes sent."""
        return format_size(len(self.data))

    @property
    def summary(self) -> str:
        """``${mime}, ${size}`` (reference 3.11.7), plus ``(downscaled ...)`` when it was."""
        text = f"{self.mime}, {self.size_text}"
        return text if self.rescale is None else f"{text} ({self.rescale.describe()})"

    @property
    def data_url(self) -> str:
        """``data:${mime};base64,${b64}``."""
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"


def _checked(source: str, data: bytes, mime: str | None, limit: int) -> LoadedImage:
    """The checks every source ends with (reference 3.11.5): empty, too large, unsupported."""
    if not data:
        raise EmptyImageError(source)
    if len(data) > limit:
        raise ImageTooLargeError(source, len(data), limit)
    if mime not in SUPPORTED_MIME_TYPES:
        raise UnsupportedImageError(source, mime)
    return LoadedImage(mime, data)


# --- blocking pieces (worker threads) -----------------------------------------------------


def read_local_image(
    source: str,
    workspace: str | os.PathLike[str],
    *,
    limit: int = IMAGE_SIZE_LIMIT,
    checkpoint: Callable[[], None] = lambda: None,
) -> bytes:
    """The bytes of the file ``source`` names (reference 3.11.3); blocking.

    Relative paths resolve against ``workspace``. The size is checked before
    reading; ``checkpoint`` runs before every 1 MiB chunk (it raises to abort).
    """
    path = resolve_path(workspace, source)
    try:
        info = os.stat(path)
    except (OSError, ValueError) as exc:
        raise ImageReadError(source, describe_error(exc)) from None
    if not stat.S_ISREG(info.st_mode):
        raise ImageReadError(source, "path is not a file.")
    if info.st_size > limit:
        raise ImageTooLargeError(source, info.st_size, limit)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ImageReadError(source, describe_error(exc)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ImageReadError(source, "path is not a file.")
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            checkpoint()
            chunk = os.read(fd, min(_READ_CHUNK, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        if exc.filename is None:
            exc.filename = path
        raise ImageReadError(source, describe_error(exc)) from None
    finally:
        os.close(fd)
    if total > limit:
        raise ImageTooLargeError(source, None, limit)  # it grew after the stat
    return b"".join(chunks)


def pillow_available() -> bool:
    """Whether Pillow (the optional ``images`` extra) can be imported."""
    try:
        import PIL.Image  # noqa: F401
    except ImportError:
        return False
    return True


def downscale_unavailable_note(settings: ImageSettings) -> str | None:
    """The one-line note for a call made with downscaling on but without Pillow."""
    if not settings.downscale or pillow_available():
        return None
    return (
        "[image downscaling is on but unavailable: Pillow is not installed "
        '(pip install "penguin[images]")]'
    )


def downscale_image(image: LoadedImage, source: str, *, max_edge: int) -> LoadedImage:
    """``image`` scaled and re-encoded to fit 5 MiB and ``max_edge``, when it does not.

    Blocking (decoding and encoding take a while): run it in a worker thread. An
    image that already fits comes back unchanged; one Pillow cannot decode comes
    back unchanged too, or raises :class:`ImageTooLargeError` (the spec's 5 MiB
    message) when it is over the limit. Requires Pillow.
    """
    from PIL import Image

    over_limit = len(image.data) > IMAGE_SIZE_LIMIT
    try:
        with Image.open(io.BytesIO(image.data)) as opened:
            original = _oriented_size(opened)
            if not over_limit and max(original) <= max_edge:
                return image
            encoded = _reencode(opened, image.mime, original, max_edge)
    except Exception:
        # Pillow raises many types for images it cannot decode; the spec's path applies.
        if over_limit:
            raise ImageTooLargeError(source, len(image.data)) from None
        return image
    if encoded is None:
        raise ImageTooLargeError(source, len(image.data))
    mime, data, dimensions = encoded
    return LoadedImage(
        mime,
        data,
        Rescale(
            original_mime=image.mime,
            original_bytes=len(image.data),
            original_dimensions=original,
            dimensions=dimensions,
        ),
    )


def _oriented_size(image: PILImage.Image) -> tuple[int, int]:
    width, height = image.size
    if image.getexif().get(_EXIF_ORIENTATION) in _SWAPPING_ORIENTATIONS:
        return height, width
    return width, height


def _has_alpha(image: PILImage.Image) -> bool:
    return image.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in image.info


def _reencode(
    opened: PILImage.Image, mime: str, original: tuple[int, int], max_edge: int
) -> tuple[str, bytes, tuple[int, int]] | None:
    """Encode ``opened`` (its first frame) to fit: ``(mime, bytes, size)``, or ``None``."""
    from PIL import Image, ImageOps

    target = fit_within(original, max_edge)
    if opened.format == "JPEG" and target != original:
        swapped = original != opened.size
        # JPEG decodes at 1/2, 1/4 or 1/8 scale directly: far less memory and time.
        opened.draft("RGB", (target[1], target[0]) if swapped else target)
    frame = ImageOps.exif_transpose(opened)
    alpha = _has_alpha(frame)
    if frame.mode not in ("RGB", "RGBA", "L", "LA"):
        frame = frame.convert("RGBA" if alpha else "RGB")
    formats = ("JPEG",) if mime == "image/jpeg" else ("PNG", "JPEG")
    size = target
    for _ in range(_SHRINK_ATTEMPTS):
        scaled = (
            frame
            if size == frame.size
            else frame.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)
        )
        for name in formats:
            data = _encode(scaled, name)
            if len(data) <= IMAGE_SIZE_LIMIT:
                return f"image/{name.lower()}", data, size
        size = (max(1, int(size[0] * _SHRINK_STEP)), max(1, int(size[1] * _SHRINK_STEP)))
    return None


def _encode(image: PILImage.Image, format_name: str) -> bytes:
    from PIL import Image

    if format_name == "JPEG" and image.mode in ("RGBA", "LA"):
        flat = Image.new("RGB", image.size, "white")
        rgba = image.convert("RGBA")
        flat.paste(rgba, mask=rgba.getchannel("A"))
        image = flat
    buffer = io.BytesIO()
    if format_name == "JPEG":
        image.save(buffer, "JPEG", quality=JPEG_QUALITY)
    else:
        image.save(buffer, "PNG")
    return buffer.getvalue()


# --- the async shell ----------------------------------------------------------------------


async def download_image(source: str, *, limit: int = IMAGE_SIZE_LIMIT) -> tuple[bytes, str | None]:
    """GET ``source``: its body and its ``Content-Type`` header (reference 3.11.2).

    A declared ``Content-Length`` over ``limit`` fails before any of the body is
    read; a body that grows past ``limit`` is abandoned there. Cancellation (an
    interrupt, a timeout) abandons the request at once.
    """
    # httpx is imported here, not at the top: every Environment loads this module (for
    # read_image and describe_image), and only a download needs the HTTP client.
    import httpx

    timeout = httpx.Timeout(_HTTP_TIMEOUT_S, connect=_HTTP_CONNECT_TIMEOUT_S)
    try:
        async with (
            httpx.AsyncClient(
                follow_redirects=True, timeout=timeout, verify=await shared_tls_context()
            ) as client,
            client.stream("GET", source, headers={"Accept": "image/*"}) as response,
        ):
            if not response.is_success:
                raise ImageDownloadError(
                    source, f"HTTP {response.status_code}", status=response.status_code
                )
            declared = _content_length(response.headers.get("content-length"))
            if declared is not None and declared > limit:
                raise ImageTooLargeError(source, declared, limit)
            body = bytearray()
            chunks = response.aiter_bytes()
            try:
                async for chunk in chunks:
                    body += chunk
                    if len(body) > limit:
                        raise ImageTooLargeError(source, None, limit)
            finally:
                await _unwind(chunks)
            return bytes(body), response.headers.get("content-type")
    except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, OSError) as exc:
        raise ImageDownloadError(source, str(exc) or type(exc).__name__) from None


async def _unwind(chunks: AsyncIterator[bytes]) -> None:
    """End httpx's body iterator so that none of its nested generators is left suspended.

    Leaving the loop early (the limit) would abandon the inner generators, each then
    finalized — with a warning — at garbage collection. Resuming the chain in a
    cancelled scope ends it from the bottom: the next read raises ``Cancelled``
    through every layer (or the body was finished already). The same technique as
    the model client's; an outer cancellation keeps propagating.
    """
    with trio.CancelScope() as scope, contextlib.suppress(Exception):
        scope.cancel()
        async for _ in chunks:
            pass


def _content_length(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        length = int(value.strip())
    except ValueError:
        return None
    return length if length >= 0 else None


async def load_image(
    source: str, workspace: str | os.PathLike[str], settings: ImageSettings | None = None
) -> LoadedImage:
    """Load ``source`` — a path, an ``http(s)`` URL or a ``data:`` URL — ready to send.

    Raises an :class:`ImageError` whose text is the model-facing failure. With
    ``settings.downscale`` on and Pillow installed, big images are downscaled
    (see the module docstring); otherwise they are refused over 5 MiB.
    """
    settings = ImageSettings() if settings is None else settings
    downscaling = settings.downscale and pillow_available()
    limit = DOWNSCALE_INPUT_LIMIT if downscaling else IMAGE_SIZE_LIMIT
    mime: str | None
    if is_http_url(source):
        data, content_type = await download_image(source, limit=limit)
        header_mime = content_type_mime(content_type)
        if header_mime in SUPPORTED_MIME_TYPES:
            mime = header_mime
        else:
            path = urllib.parse.urlsplit(source).path
            mime = sniff_mime(data) or extension_mime(path) or header_mime
    elif is_data_url(source):
        declared, data = await trio.to_thread.run_sync(decode_data_url, source)
        mime = sniff_mime(data) or declared
    else:
        data = await run_leavable_in_worker(  # a file server may stop answering
            lambda check: read_local_image(source, workspace, limit=limit, checkpoint=check)
        )
        mime = sniff_mime(data) or extension_mime(source)
    image = _checked(source, data, mime, limit)
    if not downscaling:
        return image
    return await trio.to_thread.run_sync(
        functools.partial(downscale_image, image, source, max_edge=settings.max_edge),
        abandon_on_cancel=True,
    )


async def load_for_call(
    source: str, workspace: str | os.PathLike[str], settings: ImageSettings
) -> tuple[LoadedImage, str | None]:
    """Load the image a read_image or describe_image call names, and the call's note.

    The note is :func:`downscale_unavailable_note`'s (``None`` mostly). An image that
    does not load ends the call (``_args.fail``): its text, stop ``failed``, the note.
    """
    note = downscale_unavailable_note(settings)
    try:
        image = await load_image(source, workspace, settings)
    except ImageError as exc:
        fail(str(exc), note=note)
    return image, note
