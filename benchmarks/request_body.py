r"""The model request's body: encoded whole every turn, or with its constant parts kept.

Run it with ``python -m benchmarks.request_body`` (``--rounds``). A batch task of
``benchmarks.batch`` asks the model six times: the default system prompt, the built-in
tools, and a conversation that grows by one tool call and its output per turn. This
encodes those six bodies both ways, alternated in the same process:

- **plain**: ``json.dumps`` of the whole body (:func:`chat_completions_body`), what
  every request cost before the tool list was kept;
- **tools kept**: the whole body but the tools, whose bytes, encoded once, are spliced
  in (what the client did before the system prompt was kept too);
- **kept**: :meth:`OpenAIChatLLM._body`, which encodes the tool list and a long system
  prompt once per client and splices both in.

It checks that all three give the same bytes, and prints the CPU per task of six
requests for each, and what the last step saved as a share of ``benchmarks.batch``'s
12 ms target, with the load average beside it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

import attrs
import trio

import penguin
from penguin import protocol as om
from penguin.config import DEFAULT_SYSTEM_PROMPT
from penguin.llm import LLMRequest, OpenAIChatLLM
from penguin.llm._chat_request import chat_completions_body

TURNS: Final = 6
TARGET_MS: Final = 12.0


def _load() -> str:
    with open("/proc/loadavg") as file:
        return " ".join(file.read().split()[:3])


async def _tools() -> tuple[om.ToolDefinition, ...]:
    with tempfile.TemporaryDirectory() as workdir:
        config = penguin.EnvironmentConfig(workspace_dir=Path(workdir))
        async with penguin.Environment.open(config) as env:
            return tuple(await env.list_tools())


def _requests(tools: tuple[om.ToolDefinition, ...]) -> list[LLMRequest]:
    messages: list[om.OmniMessage[om.CompleteModelPayload]] = [om.user_text("Count the lines.")]
    for turn in range(TURNS - 1):
        call_id = f"call_{turn}"
        messages.append(
            om.tool_call("exec_command", {"description": "count", "cmd": "wc -l a"}, call_id)
        )
        messages.append(om.tool_call_output("20 a\n", call_id, "completed"))
    return [
        LLMRequest(DEFAULT_SYSTEM_PROMPT, tuple(messages[: 1 + 2 * turn]), tools)
        for turn in range(TURNS)
    ]


def _plain(request: LLMRequest) -> bytes:
    body = chat_completions_body(request, model_id="m")
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def _tools_kept(tools: bytes) -> Callable[[LLMRequest], bytes]:
    """The body with only its tool list's bytes kept (``tools``: that list, encoded)."""
    marker = json.dumps("\0tools\0").encode()

    def encode(request: LLMRequest) -> bytes:
        body = chat_completions_body(attrs.evolve(request, tools=()), model_id="m")
        body["tools"] = "\0tools\0"  # where chat_completions_body puts them: last
        encoded = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        at = encoded.rfind(marker)
        return encoded[:at] + tools + encoded[at + len(marker) :]

    return encode


def _per_task(
    encode: Callable[[LLMRequest], bytes], requests: list[LLMRequest], repeat: int
) -> float:
    """CPU microseconds per task (one body per turn) for ``encode``."""
    start = time.process_time()
    for _ in range(repeat):
        for request in requests:
            encode(request)
    return (time.process_time() - start) / repeat * 1e6


async def _main(rounds: int, repeat: int) -> None:
    definitions = await _tools()
    requests = _requests(definitions)
    full = _plain(requests[-1])
    tools_json = json.dumps(json.loads(full)["tools"], ensure_ascii=False, separators=(",", ":"))
    ways: dict[str, Callable[[LLMRequest], bytes]] = {
        "plain": _plain,
        "tools": _tools_kept(tools_json.encode()),
    }
    async with OpenAIChatLLM(base_url="http://127.0.0.1:9", model_id="m") as client:
        ways["kept"] = client._body
        for request in requests:
            if len({encode(request) for encode in ways.values()}) != 1:
                raise SystemExit("the three encodings differ")
        sizes = [len(_plain(request)) for request in requests]
        samples: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(rounds):
            for name, encode in ways.items():
                samples[name].append(_per_task(encode, requests, repeat))
    plain, tools, kept = (statistics.median(samples[name]) for name in ways)
    print(
        f"{TURNS} request bodies of a batch task ({len(definitions)} tools, a system prompt of "
        f"{len(DEFAULT_SYSTEM_PROMPT):,} characters; {sizes[0]:,} to {sizes[-1]:,} bytes), "
        f"median of {rounds} rounds (load {_load()})"
    )
    print("    bytes identical: yes")
    print(f"    plain encoding          {plain:7.1f} us CPU per task")
    print(
        f"    tools kept              {tools:7.1f} us CPU per task   ({tools / plain:.2f} x plain)"
    )
    print(f"    tools and prompt kept   {kept:7.1f} us CPU per task   ({kept / plain:.2f} x plain)")
    print(
        f"    the prompt's share      {tools - kept:7.1f} us per task = "
        f"{100 * (tools - kept) / 1000 / TARGET_MS:.1f} % of the {TARGET_MS:.0f} ms target"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=50, help="tasks per round")
    args = parser.parse_args()
    trio.run(_main, args.rounds, args.repeat)


if __name__ == "__main__":
    main()
