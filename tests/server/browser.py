"""What the page tests share: a server on a thread of its own, and the browser to drive it.

playwright's sync API runs its own event loop on the calling thread, so a page test is a
plain (non-async) test and the server runs elsewhere: :class:`ThreadedServer` runs
``trio.run`` on a thread with the scripted OpenAI-compatible model and
``open_server(port=0)`` in it, over real sockets on 127.0.0.1, and stops it (the clean
shutdown of S1.4) when the block ends.

The browser is Debian's ``chromium`` (``$PENGUIN_CHROMIUM`` when set), launched headless
through ``executable_path``: playwright's own browser download is not used.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TypeVar

import trio

from penguin.llm import testing as t
from penguin.server import RunningServer, ServerOptions, open_server

from .support import TOKEN, ScriptedModel, configure_model

CHROMIUM_VARIABLE = "PENGUIN_CHROMIUM"
T = TypeVar("T")
_START_WITHIN = 60.0


def chromium_path() -> str | None:
    """The Chromium binary to drive: ``$PENGUIN_CHROMIUM``, else ``chromium`` on PATH."""
    configured = os.environ.get(CHROMIUM_VARIABLE)
    if configured:
        return configured
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


class ThreadedServer:
    """``open_server`` and the scripted model on a thread running its own Trio loop."""

    def __init__(
        self, root: Path, model: ScriptedModel, *, port: int = 0, ui: Path | None = None
    ) -> None:
        self.root = root
        self.model = model
        self.port = port
        self.ui = ui
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="penguin-server", daemon=True)
        self._server: RunningServer | None = None
        self._trio_token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._error: BaseException | None = None

    @property
    def server(self) -> RunningServer:
        assert self._server is not None, "the server is not running"
        return self._server

    @property
    def base_url(self) -> str:
        return self.server.base_url

    @property
    def login_url(self) -> str:
        return self.server.login_url

    def run_sync(self, function: Callable[[], T]) -> T:
        """Call ``function`` on the server's Trio thread (between two of its tasks' steps)."""
        assert self._trio_token is not None, "the server is not running"
        return trio.from_thread.run_sync(function, trio_token=self._trio_token)

    def drop_streams(self, session_id: str) -> int:
        """End every SSE connection of the session, as the server does to one that overflows.

        The channel stays open, so a client that reconnects with ``Last-Event-ID`` gets the
        gap (S7.5); the number of connections ended.
        """

        def drop() -> int:
            live = self.server.sessions._live[session_id]
            subscribers = list(live.channel._subscribers)
            for subscriber in subscribers:
                subscriber.close()
            return len(subscribers)

        return self.run_sync(drop)

    def subscriber_count(self, session_id: str) -> int:
        """How many SSE connections the session has."""

        def count() -> int:
            live = self.server.sessions._live.get(session_id)
            return 0 if live is None else live.channel.subscriber_count

        return self.run_sync(count)

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:
            self._error = exc
        finally:
            self._ready.set()

    async def _main(self) -> None:
        async with t.serve_openai_compatible(self.model) as model_server:
            configure_model(self.root, model_server.base_url)
            options = ServerOptions(
                port=self.port, root=self.root, token=TOKEN, grace=5.0, ui=self.ui
            )
            async with open_server(options) as server:
                self._server = server
                self._trio_token = trio.lowlevel.current_trio_token()
                self._stop = trio.Event()
                self._ready.set()
                await self._stop.wait()

    def __enter__(self) -> ThreadedServer:
        self._thread.start()
        if not self._ready.wait(_START_WITHIN):
            raise TimeoutError(f"the server did not start within {_START_WITHIN} s")
        if self._error is not None:
            raise RuntimeError("the server failed to start") from self._error
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._stop is not None and self._trio_token is not None and self._thread.is_alive():
            stop = self._stop
            trio.from_thread.run_sync(stop.set, trio_token=self._trio_token)
        self._thread.join(_START_WITHIN)
        if self._thread.is_alive():
            raise TimeoutError(f"the server did not stop within {_START_WITHIN} s")
        if self._error is not None and kind is None:
            raise RuntimeError("the server failed") from self._error
