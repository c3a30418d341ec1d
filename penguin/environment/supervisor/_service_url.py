"""Which local URL a long-running command serves on (reference 4.14).

A background command that starts a dev server usually says where it listens. Two
sources, in the spec's order of preference:

- :class:`ServiceUrlScanner` (sans-IO) reads the command's output as it is pumped and
  remembers the LAST local URL printed: ``http(s)://`` followed by ``localhost``,
  ``127.0.0.1``, ``0.0.0.0``, ``[::1]`` or ``[::]``, an optional port and path. It strips
  ANSI CSI and OSC sequences first, trims trailing ``.,;:!?'"``, and rewrites the
  wildcard hosts ``0.0.0.0`` and ``[::]`` to ``localhost`` (a browser cannot open them).
- when nothing was printed, :func:`listening_ports` asks the OS which TCP ports the
  command's process group listens on, and :func:`service_url_from_ports` turns the
  smallest into ``http://localhost:${port}``.

The probe uses psutil, never ``ps``/``ss``/``lsof`` subprocesses, and it blocks: callers
run it in a worker thread under :data:`PROBE_TIMEOUT`, at most every
:data:`PROBE_INTERVAL`, for running sessions only, keeping the old value when it fails
(None) and clearing it when it finds nothing (``[]``). That scheduling is theirs.

Scanning is incremental: each :meth:`ServiceUrlScanner.feed` rescans the last
:data:`CARRY_CHARS` chars of earlier output (escape sequences removed, except one still
incomplete at the end) together with the new text, so a URL or an escape sequence split
across chunks is seen whole without keeping the whole output. Invariant: fed in any
chunking, the scanner reports what scanning the whole output at once would, for every
URL shorter than the carry; a longer one that crosses a chunk boundary is reported as it
stood at that boundary.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Final, final

import psutil

__all__ = [
    "CARRY_CHARS",
    "PROBE_INTERVAL",
    "PROBE_TIMEOUT",
    "ServiceUrlScanner",
    "find_local_url",
    "listening_ports",
    "service_url_from_ports",
    "strip_ansi",
]

CARRY_CHARS: Final = 256
PROBE_TIMEOUT: Final = 1.5
"""Seconds a listen-port probe may take before its result is ignored."""
PROBE_INTERVAL: Final = 5.0
"""The least number of seconds between two probes of one session."""

_ANSI: Final = re.compile(
    r"\x1b(?:"
    r"\[[0-?]*[ -/]*[@-~]"  # CSI: parameters, intermediates, final byte
    r"|\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC: up to BEL or ST
    r")"
)

_LOCAL_URL: Final = re.compile(
    r"https?://"
    r"(?P<host>localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1\]|\[::\])"
    # The host must end here: not localhost.example.com, not 127.0.0.10.
    r"(?![\w-]|\.[\w-])"
    r"(?::\d+(?![\w-]))?"
    r"(?:[/?#][^\s<>\"`\x00-\x1f\x7f]*)?",
    re.IGNORECASE,
)
_LOOKAHEAD: Final = 2
"""How many chars past its end can still change a match (``localhost`` + ``.x``)."""

_OPEN_ESCAPE: Final = re.compile(r"\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*\x1b?)?\Z")
"""An escape sequence that has begun at the end of the text seen so far."""

_TRAILING: Final = ".,;:!?'\""
_WILDCARD_HOSTS: Final = frozenset({"0.0.0.0", "[::]"})


def strip_ansi(text: str) -> str:
    """``text`` without ANSI CSI (colours, cursor moves) and OSC (titles, links) sequences."""
    return _ANSI.sub("", text) if "\x1b" in text else text


def _finish(url: str, host_start: int, host_end: int) -> str:
    url = url.rstrip(_TRAILING)
    # A URL inside parentheses keeps its closing one only if it opened one itself.
    while url.endswith(")") and url.count(")") > url.count("("):
        url = url[:-1].rstrip(_TRAILING)
    if url[host_start:host_end] in _WILDCARD_HOSTS:
        url = url[:host_start] + "localhost" + url[host_end:]
    return url


def _normalise(match: re.Match[str]) -> str:
    start = match.start()
    return _finish(match.group(), match.start("host") - start, match.end("host") - start)


def find_local_url(text: str) -> str | None:
    """The last local URL in ``text`` (already free of escape sequences), normalised."""
    if "://" not in text:
        return None
    last: re.Match[str] | None = None
    for match in _LOCAL_URL.finditer(text):
        last = match
    return None if last is None else _normalise(last)


def _still_open(window: str, end: int) -> bool:
    """Whether a match ending at ``end`` could still change with the text that follows.

    It can while the regex's lookahead (two chars) reaches past the text seen so far,
    not counting an escape sequence that has begun but not ended.
    """
    if len(window) - end <= _LOOKAHEAD:
        return True
    return any(
        window[i] == "\x1b" and _OPEN_ESCAPE.match(window, i) is not None
        for i in range(end, end + _LOOKAHEAD + 1)
    )


@final
class ServiceUrlScanner:
    """Remembers the last local URL a command printed, fed its output chunk by chunk.

    Each feed scans the carry (the last :data:`CARRY_CHARS` chars of earlier output,
    escape sequences already removed) followed by the new text, from where the previous
    scan left off: the end of the last match, so the middle of a URL already read is
    never taken for a new one. A match at the very end of what was seen is *tentative*:
    the next chunk may extend it (``…:30`` + ``00/``) or unmake it (``…localhost`` +
    ``.example.com``), so the next scan starts at it and decides again; until then it is
    reported as it stands. A tentative match that starts too far back to be rescanned
    stands as printed.
    """

    __slots__ = ("_carry", "_resume", "_settled", "_tentative")

    def __init__(self) -> None:
        self._carry = ""
        self._resume = 0  # where in the carry the next scan starts
        self._settled: str | None = None
        self._tentative: str | None = None

    @property
    def url(self) -> str | None:
        """The last local URL printed so far, or None if none was."""
        return self._tentative if self._tentative is not None else self._settled

    def feed(self, text: str) -> None:
        """Scan the next chunk of output (stdout and stderr alike, in arrival order)."""
        if not text:
            return
        # Only an escape sequence left incomplete at the carry's end can change when
        # stripped again, and no match reaches into one: ``_resume`` stays valid.
        window = strip_ansi(self._carry + text)
        resume = self._resume
        last: re.Match[str] | None = None
        before_last: re.Match[str] | None = None
        # ``":"`` is a one-char search (memchr); most chunks of a flood stop there.
        if window.find(":", resume) >= 0 and window.find("://", resume) >= 0:
            for match in _LOCAL_URL.finditer(window, resume):
                before_last, last = last, match
        self._tentative = None
        cut = max(0, len(window) - CARRY_CHARS)
        if last is not None:
            settled: re.Match[str] | None = last
            resume = last.end()
            if _still_open(window, last.end()) and last.start() >= cut:
                self._tentative = _normalise(last)
                settled = before_last
                resume = last.start()
            # (A match too far back to be rescanned settles as it stands.)
            if settled is not None:
                self._settled = _normalise(settled)
        self._carry = window[cut:]
        self._resume = max(0, resume - cut)


def _listening_ports_of(pid: int) -> list[int]:
    try:
        connections = psutil.Process(pid).net_connections(kind="tcp")
    except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError, PermissionError):
        return []
    return [c.laddr.port for c in connections if c.status == psutil.CONN_LISTEN and c.laddr]


def listening_ports(pgid: int) -> list[int] | None:
    """The TCP ports in LISTEN state held by live processes of process group ``pgid``.

    Sorted ascending, without duplicates (a port listened on over IPv4 and IPv6 counts
    once). Processes that vanish or deny access during the scan are skipped; None means
    the probe itself failed (the process table could not be read), which callers treat
    as "no news", unlike ``[]``. Blocking: run it in a worker thread.
    """
    try:
        pids = psutil.pids()
    except (OSError, psutil.Error):
        return None
    ports: set[int] = set()
    for pid in pids:
        try:
            if os.getpgid(pid) != pgid:
                continue
        except OSError:  # exited since the listing, or hidden from us
            continue
        ports.update(_listening_ports_of(pid))
    return sorted(ports)


def service_url_from_ports(ports: Sequence[int]) -> str | None:
    """The URL a listen-port probe suggests: the smallest port on localhost, or None."""
    if not ports:
        return None
    return f"http://localhost:{min(ports)}"
