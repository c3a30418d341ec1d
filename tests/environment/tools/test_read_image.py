"""read_image (reference 3.11), the shared image loading, and the optional downscaling.

Local files are real files in a temporary workspace; URLs are served by a small
Trio + h11 server on 127.0.0.1 (below) whose every behaviour a test can wait on
(headers sent, client gone), so nothing synchronises with sleeps. Downscaling
tests need Pillow (the ``images`` extra) and skip cleanly without it.
"""

from __future__ import annotations

import base64
import io
import os
import socket
import struct
import sys
import textwrap
import zlib
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from decimal import ROUND_HALF_UP, Decimal, localcontext
from pathlib import Path
from typing import Any, Final, Literal

import attrs
import h11
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

import penguin
from penguin import protocol as om
from penguin.config import ConfigError, ImageSettings, ToolDefinitionConfig, load_system_config
from penguin.config import dump_default_system_config as dump_default
from penguin.environment import ToolServices
from penguin.environment.tools import _images
from penguin.environment.tools._images import (
    IMAGE_SIZE_LIMIT,
    LoadedImage,
    Rescale,
    decode_data_url,
    fit_within,
    format_size,
    sniff_mime,
)
from penguin.environment.tools.read_image import ReadImageTool

from .conftest import Run, make_context

MiB: Final = 1024 * 1024

# --- real, tiny, hand-made images -------------------------------------------------------


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


PNG: Final = (  # 2x1 RGB: one red pixel, one blue
    b"\x89PNG\r\n\x1a\n"
    + _png_chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 1, 8, 2, 0, 0, 0))
    + _png_chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00\x00\x00\xff"))
    + _png_chunk(b"IEND", b"")
)
JPEG: Final = (  # 1x1 grey baseline JPEG with one-code Huffman tables
    b"\xff\xd8"
    + b"\xff\xdb\x00\x43\x00"
    + b"\x01" * 64
    + b"\xff\xc0\x00\x0b\x08\x00\x01\x00\x01\x01\x01\x11\x00"
    + b"\xff\xc4\x00\x14\x00\x01"
    + b"\x00" * 15
    + b"\x00"
    + b"\xff\xc4\x00\x14\x10\x01"
    + b"\x00" * 15
    + b"\x00"
    + b"\xff\xda\x00\x08\x01\x01\x00\x00\x3f\x00"
    + b"\x3f"
    + b"\xff\xd9"
)
GIF: Final = (  # 1x1 transparent GIF89a
    b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00"
    b"\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
)
WEBP: Final = bytes.fromhex(  # 1x1 lossless WebP
    "524946461a000000574542505650384c0d0000002f00000010071011118888fe0700"
)
IMAGES: Final = {"image/png": PNG, "image/jpeg": JPEG, "image/gif": GIF, "image/webp": WEBP}


def data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def padded(image: bytes, size: int) -> bytes:
    """``image`` followed by zeros up to ``size`` bytes: sniffs as ``image``'s type."""
    return image + b"\0" * (size - len(image))


def has_pillow() -> bool:
    return _images.pillow_available()


needs_pillow = pytest.mark.skipif(not has_pillow(), reason="Pillow (the images extra) is absent")


# --- driving the tool -------------------------------------------------------------------


def definition(name: str = "read_image", timeout_ms: int = 60000) -> ToolDefinitionConfig:
    return ToolDefinitionConfig(
        name=name, description="test", permission="r", timeout_ms=timeout_ms
    )


async def read_image(
    workspace: Path, args: dict[str, Any], *, settings: ImageSettings | None = None
) -> Run:
    """One call of the tool itself (no Environment): every delta and the result."""
    entry = definition()
    services = ToolServices(images=settings or ImageSettings())
    tool = ReadImageTool(entry, services)
    sink: list[str] = []
    result = await tool.execute(args, make_context(workspace, entry, sink))
    return Run(tuple(sink), result)


def assert_failed(run: Run, text: str) -> None:
    assert run.deltas == (text,)
    assert run.stop == "failed"
    assert run.result is not None
    assert run.result.images == ()


def assert_image(run: Run, mime: str, data: bytes) -> None:
    assert run.deltas == (f"{mime}, {format_size(len(data))}",)
    assert run.stop == "completed"
    assert run.result is not None
    assert run.result.images == (data_url(mime, data),)


@asynccontextmanager
async def environment(
    workspace: Path, settings: ImageSettings | None = None
) -> AsyncIterator[penguin.Environment]:
    config = penguin.EnvironmentConfig(
        workspace_dir=workspace,
        services=ToolServices(images=settings or ImageSettings()),
    )
    async with penguin.Environment.open(config) as env:
        yield env


# --- a local image server ---------------------------------------------------------------

Behaviour = Literal["send", "stall", "endless"]


@attrs.frozen
class Route:
    """How the server answers one path.

    ``send``: the status, headers and whole body (a Content-Length is added unless
    the headers give one). ``stall``: the status and headers (and ``body`` as a first
    piece), then silence until the client goes away. ``endless``: a chunked body
    that never ends, until the client goes away.
    """

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    behaviour: Behaviour = "send"


@attrs.define(eq=False)
class Served:
    """What the server did for one path; the events are what tests wait on."""

    requests: int = 0
    body_bytes: int = 0
    headers_sent: trio.Event = attrs.Factory(trio.Event)
    client_gone: trio.Event = attrs.Factory(trio.Event)


@attrs.define(eq=False)
class ImageServer:
    base_url: str
    routes: dict[str, Route]
    served: defaultdict[str, Served] = attrs.Factory(lambda: defaultdict(Served))

    def url(self, path: str) -> str:
        return self.base_url + path


@asynccontextmanager
async def serve_images(routes: dict[str, Route]) -> AsyncIterator[ImageServer]:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    server = ImageServer(f"http://127.0.0.1:{port}", routes)

    async def connection(stream: trio.SocketStream) -> None:
        await _serve_one(server, stream)

    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, connection, listeners)
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()


async def _serve_one(server: ImageServer, stream: trio.SocketStream) -> None:
    conn = h11.Connection(h11.SERVER)
    served: Served | None = None
    async with stream:
        try:
            target = await _request_target(conn, stream)
            if target is None:
                return
            path = target.split("?", 1)[0]
            served = server.served[path]
            served.requests += 1
            route = server.routes.get(path, Route(status=404, body=b"not found"))
            await _answer(conn, stream, route, served)
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            pass
        finally:
            if served is not None:
                served.client_gone.set()


async def _request_target(conn: h11.Connection, stream: trio.SocketStream) -> str | None:
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await stream.receive_some(65536))
        elif isinstance(event, h11.Request):
            return event.target.decode()
        elif isinstance(event, h11.ConnectionClosed):
            return None


async def _answer(
    conn: h11.Connection, stream: trio.SocketStream, route: Route, served: Served
) -> None:
    headers = [*route.headers, ("connection", "close")]
    names = {name.lower() for name, _ in route.headers}
    if route.behaviour == "send" and "content-length" not in names:
        headers.append(("content-length", str(len(route.body))))
    await stream.send_all(conn.send(h11.Response(status_code=route.status, headers=headers)))
    if route.body:
        await stream.send_all(conn.send(h11.Data(data=route.body)))
        served.body_bytes += len(route.body)
    served.headers_sent.set()
    if route.behaviour == "send":
        await stream.send_all(conn.send(h11.EndOfMessage()))
        # Wait for the client to close, so `client_gone` means it really went.
        while await stream.receive_some(65536):
            pass
    elif route.behaviour == "stall":
        while await stream.receive_some(65536):
            pass
    else:
        piece = b"\0" * 65536
        while True:
            await stream.send_all(conn.send(h11.Data(data=piece)))
            served.body_bytes += len(piece)


def refused_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# ==========================================================================================
# 3.0.1 / 3.1: registered, with the default definition
# ==========================================================================================


def test_3_0_1_read_image_is_registered() -> None:
    from penguin.environment.tools.registry import BUILTIN_TOOLS

    assert BUILTIN_TOOLS["read_image"] is ReadImageTool


async def test_3_1_read_image_is_listed_with_its_schema(workspace: Path) -> None:
    async with environment(workspace) as env:
        tools = {tool.name: tool for tool in await env.list_tools()}
        assert env.tool_permission("read_image") == "r"
    assert tools["read_image"].parameters == {
        "type": "object",
        "properties": {"source": {"type": "string", "description": _source_description()}},
        "required": ["source"],
    }


def _source_description() -> str:
    entry = next(e for e in penguin.config.default_tools() if e.name == "read_image")
    assert entry.parameters is not None
    description: str = entry.parameters["properties"]["source"]["description"]
    return description


# ==========================================================================================
# 3.11.1 source
# ==========================================================================================


@pytest.mark.parametrize("args", [{}, {"source": ""}, {"source": 42}, {"source": None}])
async def test_3_11_1_missing_source(workspace: Path, args: dict[str, Any]) -> None:
    run = await read_image(workspace, args)
    assert_failed(run, 'Missing required argument "source" for read_image.')


async def test_3_1_3_messages_print_the_fixed_name(workspace: Path) -> None:
    entry = definition(name="look")
    tool = ReadImageTool(entry, ToolServices())
    sink: list[str] = []
    await tool.execute({}, make_context(workspace, entry, sink))
    assert sink == ['Missing required argument "source" for read_image.']


# ==========================================================================================
# 3.11.3 local files
# ==========================================================================================


@pytest.mark.parametrize(("mime", "data"), list(IMAGES.items()))
async def test_3_11_7_success_is_one_summary_delta_and_the_data_url(
    workspace: Path, mime: str, data: bytes
) -> None:
    (workspace / "picture").write_bytes(data)
    run = await read_image(workspace, {"source": "picture"})
    assert_image(run, mime, data)


async def test_3_11_7_the_summary_names_type_and_size(workspace: Path) -> None:
    (workspace / "a.png").write_bytes(PNG)
    run = await read_image(workspace, {"source": "a.png"})
    assert run.deltas == ("image/png, 70 B",)


async def test_3_11_7_through_the_environment_images_ride_on_the_complete_output(
    workspace: Path,
) -> None:
    (workspace / "a.gif").write_bytes(GIF)
    call = om.tool_call("read_image", {"source": "a.gif"}, "c1")
    async with environment(workspace) as env, env.execute_tool(call) as stream:
        messages = [message async for message in stream]
    complete = messages[-1].payload
    assert isinstance(complete, om.ToolCallOutputPayload)
    assert complete.output == "image/gif, 43 B"
    assert complete.stop_reason == "completed"
    assert complete.images == (data_url("image/gif", GIF),)
    image_delta = messages[-3].payload  # 1.9c: an output-less delta right before stop
    assert isinstance(image_delta, om.PartialToolCallOutputPayload)
    assert (image_delta.output, image_delta.images) == ("", complete.images)


async def test_3_0_4_relative_paths_resolve_against_the_workspace(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / "a.png").write_bytes(PNG)
    (tmp_path / "outside.jpg").write_bytes(JPEG)
    assert_image(await read_image(workspace, {"source": "sub/a.png"}), "image/png", PNG)
    assert_image(await read_image(workspace, {"source": "../outside.jpg"}), "image/jpeg", JPEG)
    absolute = str(tmp_path / "outside.jpg")
    assert_image(await read_image(workspace, {"source": absolute}), "image/jpeg", JPEG)


async def test_3_0_4_no_tilde_expansion(workspace: Path) -> None:
    run = await read_image(workspace, {"source": "~/a.png"})
    assert run.text.startswith('Failed to read image "~/a.png": ENOENT: ')
    assert str(workspace / "~" / "a.png") in run.text


async def test_3_11_3_missing_file_is_a_read_error(workspace: Path) -> None:
    run = await read_image(workspace, {"source": "nope.png"})
    assert_failed(
        run,
        f'Failed to read image "nope.png": ENOENT: No such file or directory, '
        f"'{workspace / 'nope.png'}'",
    )


async def test_3_11_3_a_directory_is_not_a_file(workspace: Path) -> None:
    (workspace / "pics.png").mkdir()
    run = await read_image(workspace, {"source": "pics.png"})
    assert_failed(run, 'Failed to read image "pics.png": path is not a file.')


async def test_3_11_3_a_fifo_is_not_a_file_and_never_blocks(workspace: Path) -> None:
    os.mkfifo(workspace / "pipe.png")
    with trio.fail_after(5):
        run = await read_image(workspace, {"source": "pipe.png"})
    assert_failed(run, 'Failed to read image "pipe.png": path is not a file.')


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads everything")
async def test_3_11_3_unreadable_file_is_a_read_error(workspace: Path) -> None:
    target = workspace / "secret.png"
    target.write_bytes(PNG)
    target.chmod(0)
    run = await read_image(workspace, {"source": "secret.png"})
    assert_failed(
        run, f"Failed to read image \"secret.png\": EACCES: Permission denied, '{target}'"
    )


async def test_3_11_3_size_is_checked_before_reading(workspace: Path) -> None:
    huge = workspace / "huge.png"
    with huge.open("wb") as handle:  # sparse: reading it would take minutes
        handle.write(PNG)
        handle.truncate(10 * 1024 * MiB)
    with trio.fail_after(5):
        run = await read_image(workspace, {"source": "huge.png"})
    assert_failed(run, "Image too large: 10240.0 MB exceeds the 5.0 MB limit.")


# ==========================================================================================
# 3.11.4 sniffing and extensions
# ==========================================================================================


@pytest.mark.parametrize(
    ("data", "mime"),
    [
        (PNG, "image/png"),
        (PNG[:8], "image/png"),
        (PNG[:7], None),  # PNG needs 8 bytes
        (b"\x89PNG", None),
        (JPEG, "image/jpeg"),
        (b"\xff\xd8\xff", "image/jpeg"),
        (b"\xff\xd8\xfe", None),
        (GIF, "image/gif"),
        (b"GIF87a", "image/gif"),
        (b"GIF88a", None),
        (WEBP, "image/webp"),
        (b"RIFF\0\0\0\0WEBP", "image/webp"),
        (b"RIFF\0\0\0\0WAVE", None),
        (b"RIFF\0\0\0\0WEB", None),
        (b"", None),
        (b"BM\0\0", None),
    ],
)
def test_3_11_4_sniff(data: bytes, mime: str | None) -> None:
    assert sniff_mime(data) == mime


async def test_3_11_4_sniff_beats_extension(workspace: Path) -> None:
    (workspace / "photo.jpg").write_bytes(PNG)
    assert_image(await read_image(workspace, {"source": "photo.jpg"}), "image/png", PNG)


@pytest.mark.parametrize(
    ("name", "mime"),
    [
        ("x.png", "image/png"),
        ("x.JPG", "image/jpeg"),
        ("x.jpeg", "image/jpeg"),
        ("x.gif", "image/gif"),
        ("x.Webp", "image/webp"),
    ],
)
async def test_3_11_3_extension_when_nothing_sniffs(workspace: Path, name: str, mime: str) -> None:
    data = b"not a known signature"
    (workspace / name).write_bytes(data)
    assert_image(await read_image(workspace, {"source": name}), mime, data)


@pytest.mark.parametrize("name", ["x.bmp", "x.svg", "x", "x.png.txt"])
async def test_3_11_5_unknown_type_has_no_name(workspace: Path, name: str) -> None:
    (workspace / name).write_bytes(b"BM not an image we take")
    run = await read_image(workspace, {"source": name})
    assert_failed(run, "Unsupported image type: only png, jpeg, gif and webp are supported.")


# ==========================================================================================
# 3.11.5 / 3.11.6 limits and sizes
# ==========================================================================================


async def test_3_11_5_empty(workspace: Path) -> None:
    (workspace / "e.png").write_bytes(b"")
    assert_failed(await read_image(workspace, {"source": "e.png"}), 'Image "e.png" is empty.')


async def test_3_11_5_exactly_the_limit_is_accepted(workspace: Path) -> None:
    data = padded(PNG, IMAGE_SIZE_LIMIT)
    (workspace / "big.png").write_bytes(data)
    run = await read_image(workspace, {"source": "big.png"})
    assert run.deltas == ("image/png, 5.0 MB",)
    assert run.stop == "completed"


async def test_3_11_5_too_large(workspace: Path) -> None:
    assert IMAGE_SIZE_LIMIT == 5_242_880
    (workspace / "big.png").write_bytes(padded(PNG, IMAGE_SIZE_LIMIT + 1))
    run = await read_image(workspace, {"source": "big.png"})
    assert_failed(run, "Image too large: 5.0 MB exceeds the 5.0 MB limit.")


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 B"),
        (1, "1 B"),
        (1023, "1023 B"),
        (1024, "1.0 kB"),
        (1075, "1.0 kB"),  # 1.0498...
        (1076, "1.1 kB"),
        (1280, "1.3 kB"),  # exactly 1.25: JavaScript rounds the tie up (Python says 1.2)
        (1331, "1.3 kB"),
        (10 * 1024 - 1, "10.0 kB"),
        (1048575, "1024.0 kB"),
        (1048576, "1.0 MB"),
        (1310720, "1.3 MB"),  # exactly 1.25 MB
        (1572864, "1.5 MB"),
        (5242880, "5.0 MB"),
        (5242881, "5.0 MB"),
        (6 * MiB, "6.0 MB"),
        (10 * 1024 * MiB, "10240.0 MB"),
    ],
)
def test_3_11_6_size(size: int, text: str) -> None:
    assert format_size(size) == text


def _js_to_fixed_1(numerator: int, unit: int) -> str:
    """An independent model of ``(numerator / unit).toFixed(1)`` for an exact quotient."""
    with localcontext() as context:
        context.prec = 80
        value = Decimal(numerator) / Decimal(unit)
        return str(value.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))


@given(st.integers(min_value=0, max_value=2**53))
def test_3_11_6_size_matches_to_fixed(size: int) -> None:
    if size < 1024:
        expected = f"{size} B"
    elif size < MiB:
        expected = f"{_js_to_fixed_1(size, 1024)} kB"
    else:
        expected = f"{_js_to_fixed_1(size, MiB)} MB"
    assert format_size(size) == expected


# ==========================================================================================
# data: URLs (beyond the reference)
# ==========================================================================================


@pytest.mark.parametrize(("mime", "data"), list(IMAGES.items()))
async def test_data_url_is_a_source(workspace: Path, mime: str, data: bytes) -> None:
    assert_image(await read_image(workspace, {"source": data_url(mime, data)}), mime, data)


async def test_data_url_sniff_beats_the_declared_type(workspace: Path) -> None:
    run = await read_image(workspace, {"source": data_url("image/gif", PNG)})
    assert_image(run, "image/png", PNG)


async def test_data_url_declared_type_when_nothing_sniffs(workspace: Path) -> None:
    run = await read_image(workspace, {"source": "DATA:image/webp;base64,AAAA"})
    assert_image(run, "image/webp", b"\0\0\0")


def test_data_url_decoding_is_lenient() -> None:
    encoded = base64.b64encode(PNG).decode().rstrip("=")
    spaced = " ".join(encoded[i : i + 10] for i in range(0, len(encoded), 10))
    assert decode_data_url(f"data:image/png;base64,{spaced}") == ("image/png", PNG)
    escaped = base64.b64encode(PNG).decode().replace("+", "%2B").replace("/", "%2F")
    assert decode_data_url(f"data:;charset=x;BASE64,{escaped}") == (None, PNG)
    assert decode_data_url("data:image/gif,GIF89a%01%00") == ("image/gif", b"GIF89a\x01\x00")


async def test_data_url_errors_show_a_short_source(workspace: Path) -> None:
    source = "data:image/png;base64," + "!" * 200
    run = await read_image(workspace, {"source": source})
    assert_failed(
        run,
        f'Failed to read image "{source[:48]}…": the data URL holds invalid base64.',
    )
    run = await read_image(workspace, {"source": "data:image/png;base64"})
    assert_failed(
        run,
        'Failed to read image "data:image/png;base64": malformed data URL '
        "(no comma before the data).",
    )


async def test_data_url_limits(workspace: Path) -> None:
    run = await read_image(workspace, {"source": "data:image/png;base64,"})
    assert_failed(run, 'Image "data:image/png;base64," is empty.')
    big = data_url("image/png", padded(PNG, IMAGE_SIZE_LIMIT + 1))
    assert_failed(
        await read_image(workspace, {"source": big}),
        "Image too large: 5.0 MB exceeds the 5.0 MB limit.",
    )
    text = data_url("text/plain", b"hello")
    assert_failed(
        await read_image(workspace, {"source": text}),
        'Unsupported image type "text/plain": only png, jpeg, gif and webp are supported.',
    )


# ==========================================================================================
# 3.11.2 URLs
# ==========================================================================================


async def test_3_11_2_200_with_content_type(workspace: Path) -> None:
    routes = {"/a": Route(headers=(("content-type", "image/png"),), body=PNG)}
    async with serve_images(routes) as server:
        run = await read_image(workspace, {"source": server.url("/a")})
    assert_image(run, "image/png", PNG)


async def test_3_11_2_200_without_content_type_sniffs(workspace: Path) -> None:
    async with serve_images({"/a": Route(body=WEBP)}) as server:
        run = await read_image(workspace, {"source": server.url("/a")})
    assert_image(run, "image/webp", WEBP)


async def test_3_11_2_content_type_parameters_and_case(workspace: Path) -> None:
    routes = {"/a": Route(headers=(("Content-Type", "Image/JPEG ; q=1"),), body=JPEG)}
    async with serve_images(routes) as server:
        run = await read_image(workspace, {"source": server.url("/a")})
    assert_image(run, "image/jpeg", JPEG)


async def test_3_11_2_a_supported_content_type_wins_over_the_sniff(workspace: Path) -> None:
    # The spec's order: the header when it names a supported type, even a wrong one.
    routes = {"/a.png": Route(headers=(("content-type", "image/gif"),), body=PNG)}
    async with serve_images(routes) as server:
        run = await read_image(workspace, {"source": server.url("/a.png")})
    assert_image(run, "image/gif", PNG)


async def test_3_11_2_sniff_beats_an_unsupported_content_type(workspace: Path) -> None:
    routes = {"/a.gif": Route(headers=(("content-type", "application/octet-stream"),), body=PNG)}
    async with serve_images(routes) as server:
        run = await read_image(workspace, {"source": server.url("/a.gif")})
    assert_image(run, "image/png", PNG)


async def test_3_11_2_url_path_extension_when_nothing_sniffs(workspace: Path) -> None:
    data = b"no signature here"
    routes = {"/pics/cat.WEBP": Route(headers=(("content-type", "binary/x"),), body=data)}
    async with serve_images(routes) as server:
        run = await read_image(workspace, {"source": server.url("/pics/cat.WEBP?size=2")})
    assert_image(run, "image/webp", data)


async def test_3_11_2_unsupported_names_the_header_type(workspace: Path) -> None:
    routes = {
        "/page": Route(headers=(("content-type", "text/html; charset=utf-8"),), body=b"<html>"),
        "/blob": Route(body=b"<html>"),
    }
    async with serve_images(routes) as server:
        page = await read_image(workspace, {"source": server.url("/page")})
        blob = await read_image(workspace, {"source": server.url("/blob")})
    assert_failed(
        page,
        'Unsupported image type "text/html": only png, jpeg, gif and webp are supported.',
    )
    assert_failed(blob, "Unsupported image type: only png, jpeg, gif and webp are supported.")


async def test_3_11_2_scheme_is_case_insensitive(workspace: Path) -> None:
    async with serve_images({"/a": Route(body=GIF)}) as server:
        url = server.url("/a").replace("http://", "HTTP://")
        run = await read_image(workspace, {"source": url})
    assert_image(run, "image/gif", GIF)


async def test_3_11_2_redirects_are_followed(workspace: Path) -> None:
    routes = {"/old": Route(status=302, headers=(("location", "/new"),)), "/new": Route(body=PNG)}
    async with serve_images(routes) as server:
        run = await read_image(workspace, {"source": server.url("/old")})
    assert_image(run, "image/png", PNG)


@pytest.mark.parametrize("status", [404, 500, 204])
async def test_3_11_2_non_2xx_is_a_download_error(workspace: Path, status: int) -> None:
    routes = {"/a": Route(status=status, body=b"" if status == 204 else b"nope")}
    async with serve_images(routes) as server:
        url = server.url("/a" if status != 404 else "/missing.png")
        run = await read_image(workspace, {"source": url})
    if status == 204:  # a 2xx without a body: the image is empty
        assert_failed(run, f'Image "{url}" is empty.')
    else:
        assert_failed(run, f'Failed to download image "{url}": HTTP {status}')


async def test_3_11_2_connection_refused(workspace: Path) -> None:
    url = f"http://127.0.0.1:{refused_port()}/a.png"
    with trio.fail_after(10):
        run = await read_image(workspace, {"source": url})
    assert run.stop == "failed"
    assert len(run.deltas) == 1
    prefix = f'Failed to download image "{url}": '
    assert run.text.startswith(prefix)
    assert len(run.text) > len(prefix)


async def test_3_11_2_malformed_url_is_a_download_error(workspace: Path) -> None:
    run = await read_image(workspace, {"source": "http://exa mple.com:99999/a.png"})
    assert run.stop == "failed"
    assert run.text.startswith('Failed to download image "http://exa mple.com:99999/a.png": ')


async def test_3_11_2_oversized_content_length_fails_before_the_body(workspace: Path) -> None:
    size = 6 * MiB
    routes = {"/big": Route(headers=(("content-length", str(size)),), behaviour="stall")}
    async with serve_images(routes) as server:
        with trio.fail_after(10):  # the body never comes: waiting for it would hang
            run = await read_image(workspace, {"source": server.url("/big")})
            await server.served["/big"].client_gone.wait()
        assert server.served["/big"].body_bytes == 0
    assert_failed(run, "Image too large: 6.0 MB exceeds the 5.0 MB limit.")


async def test_3_11_2_a_body_over_the_limit_without_content_length_is_cut(
    workspace: Path,
) -> None:
    async with serve_images({"/endless": Route(behaviour="endless")}) as server:
        with trio.fail_after(20):
            run = await read_image(workspace, {"source": server.url("/endless")})
            await server.served["/endless"].client_gone.wait()
        sent = server.served["/endless"].body_bytes
    assert_failed(run, "Image too large: more than 5.0 MB exceeds the 5.0 MB limit.")
    assert sent < IMAGE_SIZE_LIMIT + 32 * MiB  # socket buffers, not the whole stream


async def test_3_11_2_a_slow_download_is_interrupted_promptly(workspace: Path) -> None:
    routes = {"/slow": Route(headers=(("content-length", "5000"),), body=PNG, behaviour="stall")}
    interrupt = trio.Event()
    async with serve_images(routes) as server, environment(workspace) as env:
        served = server.served["/slow"]
        call = om.tool_call("read_image", {"source": server.url("/slow")}, "c1")
        with trio.fail_after(10):  # the tool's own timeout is 60 s
            async with trio.open_nursery() as nursery:

                async def interrupt_once_stalled() -> None:
                    await served.headers_sent.wait()
                    interrupt.set()

                nursery.start_soon(interrupt_once_stalled)
                output = await env.call_tool(call, interrupt=interrupt)
            await served.client_gone.wait()
    assert output.payload.stop_reason == "aborted"
    assert output.payload.output == "[interrupted: tool aborted by user]"
    assert output.payload.images is None


async def test_3_11_2_an_already_interrupted_call_sends_no_request(workspace: Path) -> None:
    interrupt = trio.Event()
    interrupt.set()
    async with serve_images({"/a": Route(body=PNG)}) as server, environment(workspace) as env:
        call = om.tool_call("read_image", {"source": server.url("/a")}, "c1")
        output = await env.call_tool(call, interrupt=interrupt)
        assert server.served["/a"].requests == 0
    assert output.payload.stop_reason == "aborted"


async def test_3_11_2_timeout_ends_a_stalled_download(workspace: Path) -> None:
    routes = {"/slow": Route(headers=(("content-length", "5000"),), body=PNG, behaviour="stall")}
    entries = [
        attrs.evolve(e, timeout_ms=300) if e.name == "read_image" else e
        for e in penguin.config.default_tools()
    ]
    async with serve_images(routes) as server:
        config = penguin.EnvironmentConfig(workspace_dir=workspace, tools=entries)
        async with penguin.Environment.open(config) as env:
            call = om.tool_call("read_image", {"source": server.url("/slow")}, "c1")
            with trio.fail_after(10):
                output = await env.call_tool(call)
    assert output.payload.stop_reason == "failed"
    assert output.payload.output == "[tool timeout: exceeded 300ms]"


# ==========================================================================================
# the images section of system_config.yaml
# ==========================================================================================


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "system_config.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.mark.parametrize("text", ["", "images:\n", "images: {}\n", "tools: {builtin: []}\n"])
def test_images_settings_default_to_off(tmp_path: Path, text: str) -> None:
    assert load_system_config(_config(tmp_path, text)).images == ImageSettings()
    assert ImageSettings() == ImageSettings(downscale=False, max_edge=2048)


def test_images_settings_are_read(tmp_path: Path) -> None:
    path = _config(tmp_path, "images:\n  downscale: true\n  maxEdge: 1024\n")
    assert load_system_config(path).images == ImageSettings(downscale=True, max_edge=1024)


@pytest.mark.parametrize(
    ("text", "line", "field", "reason"),
    [
        ("images: 5\n", 1, "images", "expected a mapping with downscale and/or maxEdge, got 5"),
        ("images:\n  downscale: yes please\n", 2, "images.downscale", "expected true or false"),
        ("images:\n  maxEdge: 0\n", 2, "images.maxEdge", "expected a positive number of pixels"),
        ("images:\n  maxEdge: 1.5\n", 2, "images.maxEdge", "expected an integer, got 1.5"),
        (
            "images:\n  downscale: true\n  max_edge: 10\n",
            3,
            "images.max_edge",
            'unknown key (allowed keys: downscale, maxEdge); did you mean "maxEdge"?',
        ),
    ],
)
def test_images_settings_errors_name_file_line_and_field(
    tmp_path: Path, text: str, line: int, field: str, reason: str
) -> None:
    path = _config(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_system_config(path)
    assert (caught.value.line, caught.value.field) == (line, field)
    assert str(caught.value).startswith(f"{path}:{line}: {field}: ")
    assert reason in caught.value.reason


def test_images_settings_are_in_the_default_file(tmp_path: Path) -> None:
    path = tmp_path / "system_config.yaml"
    dump_default(path)
    text = path.read_text(encoding="utf-8")
    assert "images:\n  downscale: false\n  maxEdge: 2048\n" in text
    assert "# images: what read_image and describe_image do with big images." in text
    assert load_system_config(path).images == ImageSettings()


def test_image_settings_refuse_a_bad_edge() -> None:
    with pytest.raises(ValueError, match="positive number of pixels"):
        ImageSettings(max_edge=0)


# ==========================================================================================
# downscaling (issue 5 item 6)
# ==========================================================================================

ON: Final = ImageSettings(downscale=True, max_edge=64)


def pil_image(
    size: tuple[int, int], mode: str = "RGB", *, noise: bool = False, color: Any = None
) -> Any:
    from PIL import Image

    if noise:
        raw = os.urandom(size[0] * size[1] * len(mode))
        return Image.frombytes(mode, size, raw)
    return Image.new(mode, size, color if color is not None else "red")


def encoded(image: Any, fmt: str, **options: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def decoded(url: str) -> Any:
    from PIL import Image

    _, payload = url.split(",", 1)
    image = Image.open(io.BytesIO(base64.b64decode(payload)))
    image.load()
    return image


def test_fit_within_keeps_the_aspect_ratio() -> None:
    assert fit_within((8000, 6000), 2048) == (2048, 1536)
    assert fit_within((6000, 8000), 2048) == (1536, 2048)
    assert fit_within((2048, 10), 2048) == (2048, 10)
    assert fit_within((10000, 1), 100) == (100, 1)
    assert fit_within((1, 1), 1) == (1, 1)


def test_the_summary_says_what_downscaling_did() -> None:
    image = LoadedImage(
        "image/jpeg", b"x" * 3_250_586, Rescale("image/png", 9 * MiB, (8000, 6000), (2048, 1536))
    )
    assert image.summary == (
        "image/jpeg, 3.1 MB (downscaled from 8000×6000 to 2048×1536; original image/png, 9.0 MB)"
    )
    same = LoadedImage(
        "image/jpeg", b"x" * 2048, Rescale("image/png", 6 * MiB, (900, 900), (900, 900))
    )
    assert same.summary == "image/jpeg, 2.0 kB (re-encoded at 900×900; original image/png, 6.0 MB)"


@needs_pillow
@pytest.mark.parametrize(("mime", "data"), list(IMAGES.items()))
def test_the_hand_made_images_are_valid(mime: str, data: bytes) -> None:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        image.load()
        assert Image.MIME[image.format or ""] == mime


async def test_downscaling_off_keeps_the_spec_behaviour(workspace: Path) -> None:
    (workspace / "big.png").write_bytes(padded(PNG, 6 * MiB))
    run = await read_image(workspace, {"source": "big.png"}, settings=ImageSettings())
    assert_failed(run, "Image too large: 6.0 MB exceeds the 5.0 MB limit.")


@needs_pillow
async def test_downscaling_an_image_over_max_edge(workspace: Path) -> None:
    data = encoded(pil_image((400, 300)), "JPEG", quality=90)
    (workspace / "photo.jpg").write_bytes(data)
    run = await read_image(workspace, {"source": "photo.jpg"}, settings=ON)
    assert run.stop == "completed"
    assert run.result is not None
    (url,) = run.result.images
    assert url.startswith("data:image/jpeg;base64,")
    result = decoded(url)
    assert (result.format, result.size) == ("JPEG", (64, 48))
    size = format_size(len(base64.b64decode(url.split(",", 1)[1])))
    assert run.deltas == (
        f"image/jpeg, {size} (downscaled from 400×300 to 64×48; "
        f"original image/jpeg, {format_size(len(data))})",
    )


@needs_pillow
async def test_downscaling_leaves_a_fitting_image_alone(workspace: Path) -> None:
    data = encoded(pil_image((64, 10)), "PNG")
    (workspace / "small.png").write_bytes(data)
    assert_image(
        await read_image(workspace, {"source": "small.png"}, settings=ON), "image/png", data
    )


@needs_pillow
async def test_downscaling_keeps_png_transparency(workspace: Path) -> None:
    data = encoded(pil_image((300, 100), "RGBA", color=(0, 0, 255, 128)), "PNG")
    (workspace / "logo.png").write_bytes(data)
    run = await read_image(workspace, {"source": "logo.png"}, settings=ON)
    assert run.result is not None
    result = decoded(run.result.images[0])
    assert (result.format, result.mode, result.size) == ("PNG", "RGBA", (64, 21))
    assert result.getpixel((10, 10)) == (0, 0, 255, 128)


@needs_pillow
async def test_downscaling_an_animated_gif_keeps_its_first_frame_as_png(workspace: Path) -> None:
    frames = [pil_image((200, 200), color=color).convert("P") for color in ("red", "lime")]
    buffer = io.BytesIO()
    frames[0].save(buffer, "GIF", save_all=True, append_images=frames[1:], duration=100)
    (workspace / "anim.gif").write_bytes(buffer.getvalue())
    run = await read_image(workspace, {"source": "anim.gif"}, settings=ON)
    assert run.result is not None
    result = decoded(run.result.images[0])
    assert (result.format, result.size) == ("PNG", (64, 64))
    assert result.convert("RGB").getpixel((32, 32)) == (255, 0, 0)
    assert run.text.startswith("image/png, ")
    assert "(downscaled from 200×200 to 64×64; original image/gif, " in run.text


@needs_pillow
async def test_downscaling_a_webp(workspace: Path) -> None:
    from PIL import features

    if not features.check("webp"):
        pytest.skip("this Pillow has no WebP support")
    (workspace / "a.webp").write_bytes(encoded(pil_image((130, 65)), "WEBP"))
    run = await read_image(workspace, {"source": "a.webp"}, settings=ON)
    assert run.result is not None
    assert decoded(run.result.images[0]).size == (64, 32)
    assert "(downscaled from 130×65 to 64×32; original image/webp, " in run.text


@needs_pillow
async def test_downscaling_applies_the_exif_orientation(workspace: Path) -> None:
    from PIL import Image

    exif = Image.Exif()
    exif[0x0112] = 6  # rotated 90°: shown as 100 wide, 300 high
    data = encoded(pil_image((300, 100)), "JPEG", exif=exif.tobytes())
    (workspace / "phone.jpg").write_bytes(data)
    run = await read_image(workspace, {"source": "phone.jpg"}, settings=ON)
    assert run.result is not None
    assert decoded(run.result.images[0]).size == (21, 64)
    assert "(downscaled from 100×300 to 21×64; " in run.text


@needs_pillow
async def test_downscaling_an_image_over_the_byte_limit(workspace: Path) -> None:
    data = encoded(pil_image((1400, 1400), noise=True), "PNG")
    assert len(data) > IMAGE_SIZE_LIMIT
    (workspace / "noise.png").write_bytes(data)
    settings = ImageSettings(downscale=True, max_edge=4096)
    run = await read_image(workspace, {"source": "noise.png"}, settings=settings)
    assert run.stop == "completed"
    assert run.result is not None
    sent = base64.b64decode(run.result.images[0].split(",", 1)[1])
    assert len(sent) <= IMAGE_SIZE_LIMIT
    assert run.text.startswith(f"image/jpeg, {format_size(len(sent))} (")  # PNG stays too big
    assert run.text.endswith(f"; original image/png, {format_size(len(data))})")


@needs_pillow
async def test_downscaling_a_big_download(workspace: Path) -> None:
    data = encoded(pil_image((1400, 1400), noise=True), "PNG")
    routes = {"/noise": Route(headers=(("content-type", "image/png"),), body=data)}
    async with serve_images(routes) as server:
        run = await read_image(workspace, {"source": server.url("/noise")}, settings=ON)
    assert run.stop == "completed"
    assert "(downscaled from 1400×1400 to 64×64; original image/png, " in run.text


@needs_pillow
async def test_downscaling_an_undecodable_image_falls_back_to_the_spec(workspace: Path) -> None:
    (workspace / "broken.png").write_bytes(padded(PNG[:16], 6 * MiB))
    run = await read_image(workspace, {"source": "broken.png"}, settings=ON)
    assert_failed(run, "Image too large: 6.0 MB exceeds the 5.0 MB limit.")
    (workspace / "small.png").write_bytes(padded(PNG[:16], 100))
    run = await read_image(workspace, {"source": "small.png"}, settings=ON)
    assert run.deltas == ("image/png, 100 B",)


@needs_pillow
async def test_downscaling_has_its_own_input_limit(workspace: Path) -> None:
    huge = workspace / "huge.png"
    with huge.open("wb") as handle:
        handle.write(PNG)
        handle.truncate(80 * MiB)
    run = await read_image(workspace, {"source": "huge.png"}, settings=ON)
    assert_failed(run, "Image too large: 80.0 MB exceeds the 64.0 MB limit.")


@pytest.fixture
def without_pillow(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in sys.modules if name == "PIL" or name.startswith("PIL.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "PIL", None)  # makes `import PIL...` fail


PILLOW_NOTE: Final = (
    "[image downscaling is on but unavailable: Pillow is not installed "
    '(pip install "penguin[images]")]'
)


async def test_downscaling_without_pillow_is_a_note_not_a_crash(
    workspace: Path, without_pillow: None
) -> None:
    assert not _images.pillow_available()
    (workspace / "big.png").write_bytes(padded(PNG, 6 * MiB))
    (workspace / "a.png").write_bytes(PNG)
    big = await read_image(workspace, {"source": "big.png"}, settings=ON)
    assert_failed(big, "Image too large: 6.0 MB exceeds the 5.0 MB limit.")
    assert big.result is not None
    assert big.result.note == PILLOW_NOTE
    small = await read_image(workspace, {"source": "a.png"}, settings=ON)
    assert_image(small, "image/png", PNG)
    assert small.result is not None
    assert small.result.note == PILLOW_NOTE
    off = await read_image(workspace, {"source": "a.png"}, settings=ImageSettings())
    assert off.result is not None
    assert off.result.note is None


async def test_downscaling_without_pillow_through_the_environment(
    workspace: Path, without_pillow: None
) -> None:
    (workspace / "a.png").write_bytes(PNG)
    async with environment(workspace, ON) as env:
        output = await env.call_tool(om.tool_call("read_image", {"source": "a.png"}, "c1"))
    assert output.payload.output == f"image/png, 70 B\n{PILLOW_NOTE}"
    assert output.payload.stop_reason == "completed"
    assert output.payload.images == (data_url("image/png", PNG),)
