"""The OpenAI client's stream parsing: tokens per second against a local server.

Run it with ``python -m benchmarks.sse`` (``--quick`` for a smaller run). The local
OpenAI-compatible server of ``penguin.llm.testing`` streams 1M tokens, one small
``content`` delta per chat completion chunk (a realistic ~200-byte chunk each), and
the figures are printed beside baselines measured in the same run against the same
server:

- *raw read*: httpx reading the body's bytes without parsing (the transport's ceiling);
- *naive parse*: httpx + the SSE parser + ``json.loads`` of every event, no messages
  (what a straightforward client pays before building a single message);
- *client*: ``OpenAIChatLLM.stream`` to the end, every fragment handed to the consumer
  (target >= 200k tokens/s).
"""

from __future__ import annotations

import argparse
import json
import time

import httpx
import trio

from penguin import protocol as om
from penguin.llm import LLMRequest, OpenAIChatLLM
from penguin.llm import testing as t
from penguin.llm._sse import SSEParser

BLOCK_EVENTS = 512
"""Events per written part: the server writes the same pre-rendered block repeatedly."""


def _event(text: str) -> bytes:
    chunk = {
        "id": "chatcmpl-9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "bench-model",
        "system_fingerprint": "fp_bench",
        "choices": [
            {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}
        ],
    }
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


def _reply(tokens: int) -> t.StreamReply:
    block = _event(" tok") * BLOCK_EVENTS
    tail = [
        json.dumps(t.finish_chunk(), separators=(",", ":")),
        json.dumps(t.usage_chunk(10, tokens), separators=(",", ":")),
    ]
    end = b"".join(b"data: " + item.encode() + b"\n\n" for item in tail) + b"data: [DONE]\n\n"
    return t.StreamReply((block,) * (tokens // BLOCK_EVENTS) + (end,))


def _verdict(ok: bool) -> str:
    return "ok  " if ok else "MISS"


async def bench_raw(base_url: str) -> tuple[float, int]:
    async with httpx.AsyncClient(timeout=60) as client:
        start = time.perf_counter()
        size = 0
        async with client.stream("POST", base_url + "/chat/completions", content=b"{}") as reply:
            async for chunk in reply.aiter_bytes():
                size += len(chunk)
        return time.perf_counter() - start, size


async def bench_parse(base_url: str) -> float:
    async with httpx.AsyncClient(timeout=60) as client:
        start = time.perf_counter()
        parser = SSEParser()
        loads = json.loads
        async with client.stream("POST", base_url + "/chat/completions", content=b"{}") as reply:
            async for chunk in reply.aiter_bytes():
                for event in parser.feed(chunk):
                    if event.data != "[DONE]":
                        loads(event.data)
        return time.perf_counter() - start


async def bench_client(base_url: str) -> tuple[float, int, str]:
    request = LLMRequest(system_prompt="", messages=(om.user_text("go"),), tools=())
    async with OpenAIChatLLM(base_url=base_url, model_id="bench-model") as llm:
        start = time.perf_counter()
        deltas = 0  # tokens seen, counted by their text (deltas of one read are joined)
        async with llm.stream(request) as response:
            async for message in response:
                payload = message.payload
                if isinstance(payload, om.PartialTextPayload) and payload.event_type == "delta":
                    deltas += payload.text.count(" tok")
        elapsed = time.perf_counter() - start
        return elapsed, deltas, response.outcome.status


async def main(quick: bool) -> None:
    tokens = (100_000 if quick else 1_000_000) // BLOCK_EVENTS * BLOCK_EVENTS
    reply = _reply(tokens)
    volume = sum(len(part) for part in reply.parts)
    async with t.serve_openai_compatible(lambda request: reply) as server:
        raw, size = await bench_raw(server.base_url)
        parse = await bench_parse(server.base_url)
        client, deltas, status = await bench_client(server.base_url)
    assert size == volume, (size, volume)
    assert (deltas, status) == (tokens, "completed"), (deltas, status)

    rate = tokens / client
    print(f"SSE stream of {tokens:,} tokens, one content delta each ({volume / 1e6:,.0f} MB)")
    print(f"    raw read       {tokens / raw:12,.0f} tokens/s   ({raw:.2f} s, httpx bytes only)")
    print(
        f"    naive parse    {tokens / parse:12,.0f} tokens/s   ({parse:.2f} s, SSE + json.loads)"
    )
    print(f"    client         {rate:12,.0f} tokens/s   ({client:.2f} s, OpenAIChatLLM.stream)")
    print(f"    ratio          {client / raw:12.1f} x the raw read's time")
    print(f"    {_verdict(rate >= 200_000)} target >= 200,000 tokens/s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100k tokens, for a smoke run")
    trio.run(main, parser.parse_args().quick)
