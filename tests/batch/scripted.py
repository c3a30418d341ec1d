"""A scripted OpenAI-compatible model that answers each batch task by its own script.

The task's id is in its prompt (``task <id>: ...``); the step is the number of
assistant messages the request already holds. A script is a list of replies; past
its end the model says ``done <id>``. Every request is recorded with its task id,
so tests see which tasks asked what, and when.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import trio

from penguin import config as cfg
from penguin.llm import testing as t

_TASK = re.compile(r"^task (\S+):")

Step = t.Reply | Callable[[], t.Reply]


def prompt(task_id: str, text: str = "do the thing") -> str:
    return f"task {task_id}: {text}"


def task_line(task_id: str, text: str = "do the thing", **fields: Any) -> str:
    return json.dumps({"id": task_id, "prompt": prompt(task_id, text), **fields})


def write_tasks(path: Path, lines: Sequence[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def text_reply(text: str, *, prompt_tokens: int = 50, completion_tokens: int = 10) -> t.Reply:
    return t.sse_reply(
        [
            t.content_chunk(text),
            t.finish_chunk(),
            t.usage_chunk(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens),
        ]
    )


def tool_reply(
    name: str,
    arguments: Mapping[str, object],
    *,
    call_id: str = "call_1",
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
    cached_tokens: int | None = None,
) -> t.Reply:
    return t.sse_reply(
        [
            t.tool_call_chunk(0, id=call_id, name=name, arguments=json.dumps(arguments)),
            t.finish_chunk("tool_calls"),
            t.usage_chunk(
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                cached_tokens=cached_tokens,
            ),
        ]
    )


def exec_reply(cmd: str, *, call_id: str = "call_1") -> t.Reply:
    return tool_reply("exec_command", {"description": "run it", "cmd": cmd}, call_id=call_id)


def logged_exec(log: Path, task_id: str, body: str = "sleep 0.3") -> t.Reply:
    """A command that logs ``<id> start|end <ns>`` around ``body`` (concurrency checks)."""
    where = shlex.quote(str(log))
    return exec_reply(
        f'echo "{task_id} start $(date +%s%N)" >> {where}; {body}; '
        f'echo "{task_id} end $(date +%s%N)" >> {where}'
    )


def read_log(log: Path) -> dict[str, list[tuple[str, int]]]:
    """``{task_id: [(start|end, ns), ...]}`` from a log the commands above wrote."""
    events: dict[str, list[tuple[str, int]]] = {}
    if not log.exists():
        return events
    for line in log.read_text().splitlines():
        task_id, what, ns = line.split()
        events.setdefault(task_id, []).append((what, int(ns)))
    return events


def most_at_once(log: Path) -> int:
    """The most tasks that were between their start and end at one moment."""
    edges: list[tuple[int, int]] = []
    for events in read_log(log).values():
        for what, ns in events:
            edges.append((ns, 1 if what == "start" else -1))
    running = peak = 0
    for _, step in sorted(edges, key=lambda edge: (edge[0], edge[1])):
        running += step
        peak = max(peak, running)
    return peak


class TaskScripts:
    """The handler of :func:`penguin.llm.testing.serve_openai_compatible` for a batch."""

    def __init__(self, scripts: Mapping[str, Sequence[Step]] | None = None) -> None:
        self.scripts: dict[str, Sequence[Step]] = dict(scripts or {})
        self.requests: list[tuple[str, int, float]] = []
        """``(task_id, step, trio time)`` of every request, in arrival order."""

    def __call__(self, request: t.ReceivedRequest) -> t.Reply:
        messages = request.json()["messages"]
        task_id = _task_of(messages)
        step = sum(1 for message in messages if message["role"] == "assistant")
        self.requests.append((task_id, step, trio.current_time()))
        script = self.scripts.get(task_id, ())
        if step < len(script):
            reply = script[step]
            return reply() if callable(reply) else reply
        return text_reply(f"done {task_id}")

    def asked(self) -> list[str]:
        """The task ids that sent a first request, in order."""
        return [task_id for task_id, step, _ in self.requests if step == 0]


def _task_of(messages: Sequence[Mapping[str, Any]]) -> str:
    for message in messages:
        if message["role"] != "user":
            continue
        content = message["content"]
        text = content if isinstance(content, str) else content[0].get("text", "")
        found = _TASK.match(text)
        if found:
            return found.group(1)
    raise AssertionError(f"no task id in {messages!r}")


async def read_terminal(terminal: trio.lowlevel.FdStream) -> str:
    """Everything written to a pseudo-terminal's other side, until its last writer closed it.

    ``terminal`` is the leader's end; the reads are Trio's, so a caller can bound them.
    """
    chunks: list[bytes] = []
    with contextlib.suppress(trio.BrokenResourceError):  # EIO: no writer is left
        while chunk := await terminal.receive_some(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def configure_model(root: Path, base_url: str, api_key: str = "sk-test") -> None:
    paths = cfg.AgentPaths(root)
    entry = cfg.ModelEntry(
        provider="local", model_id="scripted-model", base_url=base_url, api_key=api_key
    )
    project = cfg.add_model(cfg.load_project_config(paths.project_config), entry, set_default=True)
    cfg.save_project_config(paths.project_config, project)
