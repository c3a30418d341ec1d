"""A hand-written stdio JSON-RPC server, for what the SDK's server would never send.

``python -m tests.environment.mcp.raw_server MODE``. Modes:

- ``no-schema``: a correct server whose one tool ``bare`` has no ``inputSchema``;
- ``garbage``: answers every line with a line that is not JSON-RPC;
- ``silent``: reads its input and never answers;
- ``exit``: writes a line to stderr and exits 7 at once;
- ``bad-result``: initializes and lists, then answers ``tools/call`` with a result
  whose ``content`` is not a list.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request: dict[str, Any], result: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": request["id"], "result": result})


def main(mode: str) -> None:
    if mode == "exit":
        sys.stderr.write("cannot find my configuration\n")
        raise SystemExit(7)
    for line in sys.stdin:
        request = json.loads(line)
        if mode == "silent":
            continue
        if mode == "garbage":
            sys.stdout.write("hello, I am not JSON-RPC\n")
            sys.stdout.flush()
            continue
        if "id" not in request:
            continue  # a notification
        method = request.get("method")
        if method == "initialize":
            answer(
                request,
                {
                    "protocolVersion": request["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "raw", "version": "0"},
                },
            )
        elif method == "tools/list":
            answer(request, {"tools": [{"name": "bare", "description": "No schema."}]})
        elif method == "tools/call":
            if mode == "bad-result":
                answer(request, {"content": "not a list"})
            else:
                answer(request, {"content": [{"type": "text", "text": "bare ok"}]})
        else:
            send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "?"}})


if __name__ == "__main__":
    main(sys.argv[1])
