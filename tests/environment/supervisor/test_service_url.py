"""Reference 4.14: the service URL of a background command — scanned output and port probe."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from penguin.environment.supervisor._service_url import (
    CARRY_CHARS,
    ServiceUrlScanner,
    find_local_url,
    listening_ports,
    service_url_from_ports,
    strip_ansi,
)


def scan(*chunks: str) -> str | None:
    scanner = ServiceUrlScanner()
    for chunk in chunks:
        scanner.feed(chunk)
    return scanner.url


# ---- the scanner ------------------------------------------------------------------------


def test_4_14_nothing_printed_no_url() -> None:
    assert scan() is None
    assert scan("compiling...\n", "done in 3s\n") is None
    assert scan("see https://example.com:3000/ and http://10.0.0.1:80\n") is None


@pytest.mark.parametrize(
    ("line", "url"),
    [
        ("Local: http://localhost:5173/\n", "http://localhost:5173/"),
        ("listening on http://127.0.0.1:8000\n", "http://127.0.0.1:8000"),
        ("https://localhost:8443/app?x=1#top ready", "https://localhost:8443/app?x=1#top"),
        ("at http://[::1]:3000/path", "http://[::1]:3000/path"),
        ("at http://localhost", "http://localhost"),
        ("HTTP://LOCALHOST:3000/", "HTTP://LOCALHOST:3000/"),
        ("<http://localhost:3000/docs>", "http://localhost:3000/docs"),
        ('"http://localhost:3000/"', "http://localhost:3000/"),
        ("(see http://localhost:3000/docs)", "http://localhost:3000/docs"),
        ("http://localhost:3000/wiki/Foo_(bar)", "http://localhost:3000/wiki/Foo_(bar)"),
    ],
)
def test_4_14_local_url_forms(line: str, url: str) -> None:
    assert scan(line) == url


@pytest.mark.parametrize(
    "line",
    [
        "http://localhost.example.com:3000/",
        "http://127.0.0.10:3000/",
        "http://localhost-dev:3000/",
        "ftp://localhost:21/",
    ],
)
def test_4_14_not_a_local_url(line: str) -> None:
    assert scan(line) is None


@pytest.mark.parametrize(
    ("line", "url"),
    [
        ("Open http://localhost:3000.", "http://localhost:3000"),
        ("Open http://localhost:3000/!", "http://localhost:3000/"),
        ("Open http://localhost:3000/x?;", "http://localhost:3000/x"),
        ("'http://localhost:3000/a',", "http://localhost:3000/a"),
        ("at http://localhost:...", "http://localhost"),
    ],
)
def test_4_14_trailing_punctuation_trimmed(line: str, url: str) -> None:
    assert scan(line) == url


def test_4_14_zero_host_becomes_localhost() -> None:
    assert scan("Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C)") == (
        "http://localhost:8000"
    )
    assert scan("serving at https://[::]:4000/app.") == "https://localhost:4000/app"
    assert scan("http://0.0.0.0") == "http://localhost"


def test_4_14_last_local_url_wins() -> None:
    assert scan("http://localhost:3000 then http://127.0.0.1:4000/\n") == "http://127.0.0.1:4000/"
    assert scan("http://localhost:3000\n", "noise\n", "http://localhost:3001/\n") == (
        "http://localhost:3001/"
    )
    # A later line without a URL keeps the earlier one.
    assert scan("http://localhost:3000\n", "bye\n" * 200) == "http://localhost:3000"


def test_4_14_last_local_url_split_across_chunks() -> None:
    assert scan("Local:   http://loc", "alhost:51", "73/app\n") == "http://localhost:5173/app"
    assert scan("Server at http://localhost:30", "00/") == "http://localhost:3000/"
    assert scan("x" * 10_000 + " http://127.0.", "0.1:9", "000 ok") == "http://127.0.0.1:9000"


def test_4_14_ansi_stripped() -> None:
    colored = "\x1b[32m➜\x1b[39m  \x1b[1mLocal\x1b[22m:   \x1b[36mhttp://localhost:\x1b[1m5173\x1b[22m/\x1b[39m\n"
    assert scan(colored) == "http://localhost:5173/"
    # OSC 8 hyperlink and a window title: the payload is not output.
    osc = "\x1b]0;title http://localhost:1\x07\x1b]8;;http://localhost:2\x1b\\link\x1b]8;;\x1b\\\n"
    assert scan("http://localhost:9/\n", osc) == "http://localhost:9/"
    assert strip_ansi("\x1b[1;31mred\x1b[0m \x1b]2;t\x07ok") == "red ok"


def test_4_14_tentative_url_unmade_by_next_chunk() -> None:
    assert scan("http://localhost", ".example.com") is None
    assert scan("http://127.0.0.1", "0:80") is None
    assert scan("http://localhost:3000/\n", "at http://localhost", "-dev:1") == (
        "http://localhost:3000/"
    )
    # Reported as it stands while the next chunk has not come.
    scanner = ServiceUrlScanner()
    scanner.feed("ready on http://localhost:30")
    assert scanner.url == "http://localhost:30"
    scanner.feed("00/\n")
    assert scanner.url == "http://localhost:3000/"


def test_4_14_url_longer_than_carry_stands_as_printed() -> None:
    path = "/" + "p" * 400
    assert scan(f"http://localhost:1{path}", "tail") == f"http://localhost:1{path}"


def test_4_14_escape_split_across_chunks() -> None:
    assert scan("http://localhost:\x1b[1", "m5173\x1b[22m/\n") == "http://localhost:5173/"


def test_4_14_find_local_url_direct() -> None:
    assert find_local_url("") is None
    assert find_local_url("a http://[::]:1/ b http://localhost:2/.") == "http://localhost:2/"


# ---- property: chunking never changes the answer ----------------------------------------

noise = st.text(alphabet=st.sampled_from(list("abc :/.-_()!?'\"\n\t")), max_size=20)
url_token = st.builds(
    lambda scheme, host, port, path, trail: f"{scheme}://{host}{port}{path}{trail}",
    st.sampled_from(["http", "https", "HTTP"]),
    st.sampled_from(["localhost", "127.0.0.1", "0.0.0.0", "[::1]", "[::]", "example.com"]),
    st.one_of(st.just(""), st.integers(1, 65535).map(lambda p: f":{p}")),
    st.text(alphabet=st.sampled_from(list("abz/?#=&-_.")), max_size=30).map(
        lambda p: "/" + p if p else ""
    ),
    st.sampled_from(["", ".", ",", "!?", "'", '"', ")"]),
)
ansi = st.sampled_from(["\x1b[0m", "\x1b[1;32m", "\x1b]0;title\x07", "\x1b]8;;x\x1b\\", "\x1b[K"])
# Fragments that glue into near-URLs: hosts followed by ".com", "10", "-x", ports with text.
fragment = st.sampled_from(
    [
        "http://",
        "localhost",
        "127.0.0.1",
        "[::]",
        ".com",
        "10",
        "-x",
        ":3000",
        ":80a",
        "/",
        "z" * 120,
        "htt",
        "p:",
    ]
)
pieces = st.lists(st.one_of(noise, url_token, ansi, fragment), max_size=25)


@settings(max_examples=400, deadline=None)
@given(parts=pieces, cuts=st.lists(st.integers(0, 2000), max_size=12))
def test_4_14_property_chunking_does_not_matter(parts: list[str], cuts: list[int]) -> None:
    text = "".join(parts)
    bounds = sorted({c % (len(text) + 1) for c in cuts})
    chunks = [text[a:b] for a, b in zip([0, *bounds], [*bounds, len(text)], strict=True)]
    assert "".join(chunks) == text
    whole = find_local_url(strip_ansi(text))
    assert scan(text) == whole
    chunked = scan(*chunks)
    if whole is None or len(whole) < CARRY_CHARS - 8:
        assert chunked == whole
    else:
        # Longer than the carry: it may be reported as it stood at a chunk boundary.
        assert chunked is not None


@settings(max_examples=200, deadline=None)
@given(parts=pieces, size=st.integers(1, 7))
def test_4_14_property_char_by_char(parts: list[str], size: int) -> None:
    text = "".join(parts)
    chunks = [text[i : i + size] for i in range(0, len(text), size)]
    whole = scan(text)
    if whole is None or len(whole) < CARRY_CHARS - 8:
        assert scan(*chunks) == whole


def test_4_14_carry_is_256_chars() -> None:
    assert CARRY_CHARS == 256


# ---- the listen-port probe --------------------------------------------------------------

LISTENER = """
import os, socket, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
os.write(1, f"{s.getsockname()[1]}\\n".encode())  # one write: lines never interleave
time.sleep(600)
"""


async def read_line(stream: trio.abc.ReceiveStream) -> str:
    data = b""
    with trio.fail_after(20):
        while not data.endswith(b"\n"):
            chunk = await stream.receive_some(1024)
            assert chunk, f"the child exited before printing its port: {data!r}"
            data += chunk
    return data.decode().strip()


async def probe(pgid: int) -> list[int] | None:
    return await trio.to_thread.run_sync(listening_ports, pgid)


async def test_4_14_listening_port_found_by_pgid() -> None:
    process = await trio.lowlevel.open_process(
        [sys.executable, "-c", LISTENER], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert process.stdout is not None
        port = int(await read_line(process.stdout))
        assert await probe(process.pid) == [port]
        assert service_url_from_ports([port]) == f"http://localhost:{port}"
        # Our own group does not hold that port.
        ours = await probe(os.getpgid(0))
        assert ours is not None
        assert port not in ours
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        if process.stdout is not None:
            await process.stdout.aclose()


async def test_4_14_listening_ports_of_every_group_member() -> None:
    # The group leader is a shell; the listeners are its children, in the same group.
    script = f'{sys.executable} -c "$1" & {sys.executable} -c "$1" & wait'
    process = await trio.lowlevel.open_process(
        ["sh", "-c", script, "sh", LISTENER], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert process.stdout is not None
        lines: list[str] = []
        buffered = b""
        with trio.fail_after(20):
            while buffered.count(b"\n") < 2:
                chunk = await process.stdout.receive_some(1024)
                assert chunk, "the listeners exited before printing their ports"
                buffered += chunk
        lines = buffered.decode().split()
        ports = sorted(int(line) for line in lines)
        assert await probe(process.pid) == ports
        assert service_url_from_ports(list(reversed(ports))) == f"http://localhost:{ports[0]}"
        leader = psutil.Process(process.pid)
        assert all(os.getpgid(child.pid) == process.pid for child in leader.children())
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        if process.stdout is not None:
            await process.stdout.aclose()


async def test_4_14_unknown_group_has_no_ports() -> None:
    # A pid far above any live one: no process belongs to that group.
    assert await probe(2**22 + 12345) == []


def test_4_14_failed_probe_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreadable() -> list[int]:
        raise psutil.AccessDenied(0)

    monkeypatch.setattr(psutil, "pids", unreadable)
    assert listening_ports(1) is None


def test_4_14_service_url_from_ports() -> None:
    assert service_url_from_ports([]) is None
    assert service_url_from_ports([8080, 3000, 5173]) == "http://localhost:3000"
