"""What the server tests share: a scripted OpenAI-compatible model, and an SSE reader.

:class:`ScriptedModel` is the handler of :func:`penguin.llm.testing.serve_openai_compatible`.
It keeps one script per conversation, keyed by the conversation's first user message,
and answers a request with the step whose index is the number of assistant messages
the request already carries (so every session with the same task follows the same
script, however many run at once). A conversation without a script is answered
"Done.". A subagent's conversation starts with the prompt run_subagent was given.

:class:`EventStream` reads a ``text/event-stream`` response frame by frame; tests wait
on what the stream says (``until``), never on the clock.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio

from penguin import config as cfg
from penguin.llm import testing as t

TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PROJECT = "default_project"
AGENT = "default_agent"
SESSIONS = f"/api/projects/{PROJECT}/agents/{AGENT}/sessions"

Step = Callable[[int], t.Reply | Awaitable[t.Reply]]
"""One answer of a script: called with the turn's index."""


def say(text: str) -> Step:
    """A text answer that ends the task."""

    def step(turn: int) -> t.Reply:
        return t.sse_reply([t.content_chunk(text), t.finish_chunk()])

    return step


def calls(*tools: tuple[str, dict[str, Any]], text: str = "") -> Step:
    """Tool calls (ids ``call_<turn>_<n>``), optionally after some text."""

    def step(turn: int) -> t.Reply:
        chunks: list[dict[str, Any]] = [t.content_chunk(text)] if text else []
        for index, (name, arguments) in enumerate(tools):
            chunks.append(
                t.tool_call_chunk(
                    index, id=f"call_{turn}_{index}", name=name, arguments=json.dumps(arguments)
                )
            )
        chunks.append(t.finish_chunk("tool_calls"))
        return t.sse_reply(chunks)

    return step


def exec_command(cmd: str, description: str = "run it", **more: Any) -> tuple[str, dict[str, Any]]:
    return ("exec_command", {"description": description, "cmd": cmd, **more})


def read_file(path: str) -> tuple[str, dict[str, Any]]:
    return ("read_file", {"description": "read it", "file_path": path})


def hang(text: str = "Let me think") -> Step:
    """A stream that says ``text`` and then goes silent until the client gives up."""

    def step(turn: int) -> t.Reply:
        return t.sse_reply([t.content_chunk(text)], done=False, end="stall")

    return step


def fail(status: int = 401, message: str = "Incorrect API key provided") -> Step:
    """An HTTP error (401: ``auth``, which is not retried)."""

    def step(turn: int) -> t.Reply:
        return t.ErrorReply(status, message)

    return step


def gated(event: trio.Event, then: Step) -> Step:
    """Answer with ``then`` once ``event`` is set."""

    async def step(turn: int) -> t.Reply:
        await event.wait()
        reply = then(turn)
        return await reply if not isinstance(reply, t.StreamReply | t.ErrorReply) else reply

    return step


def _first_user_text(body: dict[str, Any]) -> str:
    for message in body.get("messages", []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


class ScriptedModel:
    """Scripts by first user message; see the module docstring."""

    def __init__(self) -> None:
        self.scripts: dict[str, list[Step]] = {}
        self.requests: list[dict[str, Any]] = []

    def script(self, prompt: str, *steps: Step) -> str:
        self.scripts[prompt] = list(steps)
        return prompt

    async def __call__(self, request: t.ReceivedRequest) -> t.Reply:
        body = request.json()
        self.requests.append(body)
        steps = self.scripts.get(_first_user_text(body), [])
        turn = sum(1 for message in body["messages"] if message.get("role") == "assistant")
        step = steps[turn] if turn < len(steps) else say("Done.")
        reply = step(turn)
        if not isinstance(reply, t.StreamReply | t.ErrorReply):
            reply = await reply
        return reply


def configure_model(root: Path, base_url: str, project: str = PROJECT) -> None:
    paths = cfg.AgentPaths(root, project)
    entry = cfg.ModelEntry(
        provider="local", model_id="scripted-model", base_url=base_url, api_key="sk-test"
    )
    config = cfg.add_model(cfg.load_project_config(paths.project_config), entry, set_default=True)
    cfg.save_project_config(paths.project_config, config)


# --------------------------------------------------------------------------- SSE


@attrs.frozen
class Event:
    """One frame: ``id`` and ``event`` as sent (or None), ``data`` decoded; or a comment."""

    id: str | None
    event: str | None
    data: Any
    comment: str | None = None

    @property
    def type(self) -> str:
        """The server event's type, or the OmniMessage payload's type."""
        if self.comment is not None:
            return ":" + self.comment
        if self.event == "server_event":
            return str(self.data["type"])
        return str(self.data["payload"].get("type", self.data["type"]))

    def is_state(self, state: str) -> bool:
        return self.type == "task_state" and self.data["state"] == state


class EventStream:
    """The frames of one SSE response, in order."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._chunks = response.aiter_bytes()
        self._buffer = b""
        self.seen: list[Event] = []

    async def aclose(self) -> None:
        """End httpx's nested body iterators from the bottom (as the model client does)."""
        with trio.CancelScope() as scope, contextlib.suppress(Exception):
            scope.cancel()
            async for _ in self._chunks:
                pass

    async def _frame(self) -> bytes:
        while b"\n\n" not in self._buffer:
            try:
                self._buffer += await self._chunks.__anext__()
            except StopAsyncIteration:
                raise EOFError("the stream ended") from None
        frame, _, self._buffer = self._buffer.partition(b"\n\n")
        return frame

    async def next(self) -> Event:
        frame = (await self._frame()).decode()
        if frame.startswith(":"):
            event = Event(None, None, None, comment=frame[1:].strip())
        else:
            fields: dict[str, str] = {}
            for line in frame.split("\n"):
                name, _, value = line.partition(":")
                fields[name] = value[1:] if value.startswith(" ") else value
            event = Event(fields.get("id"), fields.get("event"), json.loads(fields["data"]))
        self.seen.append(event)
        return event

    async def until(self, predicate: Callable[[Event], bool], *, within: float = 30) -> Event:
        with trio.fail_after(within):
            while True:
                event = await self.next()
                if predicate(event):
                    return event

    async def until_type(self, kind: str, *, within: float = 30) -> Event:
        return await self.until(lambda event: event.type == kind, within=within)

    async def until_idle(self, *, within: float = 30) -> Event:
        """Wait for the task to start (if it has not yet) and to end."""
        running = any(event.is_state("running") for event in self.seen)
        if not running:
            await self.until(lambda event: event.is_state("running"), within=within)
        return await self.until(lambda event: event.is_state("idle"), within=within)

    async def ended(self, *, within: float = 30) -> bool:
        """Read to the end of the stream; True when it ended."""
        with trio.fail_after(within):
            try:
                while True:
                    await self.next()
            except (EOFError, httpx.RemoteProtocolError, httpx.ReadError):
                return True


@asynccontextmanager
async def open_stream(
    client: httpx.AsyncClient, session_id: str, last_event_id: str | None = None
) -> AsyncIterator[EventStream]:
    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
    async with client.stream(
        "GET", f"/api/sessions/{session_id}/stream", headers=headers
    ) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        stream = EventStream(response)
        try:
            yield stream
        finally:
            await stream.aclose()


async def create_session(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await client.post(SESSIONS, json=body)
    assert response.status_code == 201, response.text
    session: dict[str, Any] = response.json()["session"]
    return session


async def start_task(client: httpx.AsyncClient, session_id: str, *texts: str) -> None:
    response = await client.post(
        f"/api/sessions/{session_id}/tasks",
        json={"input": [{"type": "text", "text": text} for text in texts]},
    )
    assert response.status_code == 202, response.text


def error_of(response: httpx.Response) -> tuple[int, str]:
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message"}, body
    assert body["error"]["message"], body
    return response.status_code, body["error"]["code"]


def payload_types(events: Iterable[Event]) -> list[str]:
    return [event.type for event in events]
