"""``penguin demo``: a real session on a scripted model, no API key and no network.

It runs the whole machinery — a Session with its Environment, the approval prompts
(``--approve always-ask`` asks for real), the trace — on :class:`ScriptedLLM`,
which plays a small task in a temporary workspace: write a script, fix a typo with
edit_file, start it with exec_command so that it moves to the background, poll it
with input_command until it finishes, and report. It prints where the trace is.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Final

import trio

from penguin.agent import Agent
from penguin.llm import LLMRequest, ScriptedLLM, Turn, text, thinking, tool_call, turn, usage

from ._run import add_approval_options, approval_mode_of, run_task, under_controls
from ._signals import Controls

__all__ = ["configure", "demo_llm"]

SCRIPT: Final = """\
import time

for step in range(1, 4):
    print(f"helo from step {step}", flush=True)
    time.sleep(0.4)
print("all steps done")
"""


def _last_process_id(request: LLMRequest) -> str:
    for message in reversed(request.messages):
        payload = message.payload
        output = getattr(payload, "output", None)
        if isinstance(output, str):
            found = re.search(r"process_id (proc-[0-9a-f]{8})", output)
            if found:
                return found.group(1)
    return "proc-00000000"


def _poll(request: LLMRequest) -> Turn:
    return turn(
        text("It is still running in the background; I'll wait for it to finish."),
        tool_call(
            "input_command",
            {
                "description": "Wait for the script to finish",
                "process_id": _last_process_id(request),
                "yield_time_ms": 5000,
            },
        ),
        usage(output=40, total=1900),
    )


def demo_llm() -> ScriptedLLM:
    """The scripted model of the demo (its turns react to the tool outputs they get)."""
    python = shlex.quote(sys.executable)
    return ScriptedLLM(
        [
            turn(
                thinking("A tiny script, a fix, a run in the background, then a check."),
                text("I'll write a small script, fix it, run it and watch it finish.\n"),
                tool_call(
                    "write_file",
                    {
                        "description": "Create the script",
                        "file_path": "steps.py",
                        "content": SCRIPT,
                    },
                ),
                usage(output=120, total=1200),
            ),
            turn(
                text("There is a typo in the greeting; fixing it.\n"),
                tool_call(
                    "edit_file",
                    {
                        "description": "Fix the typo",
                        "file_path": "steps.py",
                        "old_string": "helo",
                        "new_string": "hello",
                    },
                ),
                usage(output=60, total=1400),
            ),
            turn(
                text("Now running it; it takes a moment, so it will move to the background.\n"),
                tool_call(
                    "exec_command",
                    {
                        "description": "Run the script",
                        "cmd": f"{python} steps.py",
                        "yield_time_ms": 500,
                    },
                ),
                usage(output=50, total=1650),
            ),
            _poll,
            turn(
                text(
                    "Done: `steps.py` greets three times and finishes cleanly. "
                    "The typo is fixed and the run exited with status 0."
                ),
                usage(output=30, total=2100),
            ),
        ],
        fallback="Done.",
    )


def configure(parser: argparse.ArgumentParser) -> None:
    """Fill in the ``demo`` subcommand's parser (``penguin demo --help``)."""
    parser.description = (
        "Run a real session on a scripted model in a temporary workspace: it writes "
        "and fixes a script, runs it so it moves to the background, polls it, and "
        "finishes. Prints where the trace is."
    )
    add_approval_options(parser)
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        metavar="DIR",
        help="data root for the demo agent (default: a new temporary one)",
    )
    parser.set_defaults(handler=_main)


def _main(args: argparse.Namespace) -> int:
    mode = approval_mode_of(args)
    if mode is None:
        return 1
    root = args.root or Path(tempfile.mkdtemp(prefix="penguin-demo-"))
    agent = Agent.open(root, "demo_project", "demo_agent")
    print(f"demo agent data: {root}", file=sys.stderr)

    async def main(controls: Controls) -> int:
        async with agent.session(llm=demo_llm()) as session:
            print(f"workspace: {session.workspace_dir}", file=sys.stderr)
            return await run_task(
                session,
                "Write a small script that prints three steps, run it and check it finishes.",
                mode,
                controls,
                verbose=args.verbose,
            )

    return trio.run(under_controls, main)
