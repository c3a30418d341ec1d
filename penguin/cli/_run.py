"""``penguin run``: one Task with a configured model, in the terminal.

The assistant's text streams to stdout with a one-line view of each tool call and
its result (:mod:`._render`). Approvals follow ``--approve`` (allow-all, deny-all,
read-only, always-ask); interactive modes ask on stdin: ``y``/``yes``/empty approve,
``n``/``no`` deny, end of input denies, and any other answer asks again (chat.md
C5.4). The first Ctrl-C interrupts the Task cleanly (the next run re-sends what was
cut off), also at a question; a second one stops at once.

Exit status: 0 the Task completed (denied calls included), 1 bad usage (an invalid
``--approve``, no model configured), 3 the model request failed after its retries,
4 the model rejected the credentials (auth), 5 ``max_turns`` was reached, 130 the
Task was interrupted.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, TextIO, final

import trio

from penguin import protocol as om
from penguin._concurrency import collapse_single
from penguin.approval import (
    DEFAULT_APPROVAL_MODE,
    PROMPT,
    ApprovalMode,
    ApprovalModeError,
    approver,
    parse_approval_mode,
    read_run_answer,
)
from penguin.config import ConfigError

from ._dataroot import unwritable_reason
from ._render import Renderer, Style, call_preview
from ._sandbox import add_sandbox_options, policy_for, sandbox_line
from ._signals import Controls

if TYPE_CHECKING:
    from penguin.agent import Session
    from penguin.engine import RunResult

__all__ = [
    "EXIT_CODES",
    "QUESTION_GUARD",
    "PromptAsker",
    "add_agent_options",
    "add_approval_options",
    "approval_mode_of",
    "configure",
    "render_run",
    "run_task",
    "stdin_is_a_terminal",
    "under_controls",
]

QUESTION_GUARD: Final = 0.3
"""Seconds after an approval question is drawn during which no answer is taken (C5.1)."""

SURFACE: Final = "penguin run"
"""How a session ``penguin run`` holds is named to a process refused it (chat.md C5.6)."""
RUN_REASK: Final = "answer y or n"
"""Said before the question is asked again after an answer that is none of its words."""

EXIT_CODES: Final = {
    "completed": 0,
    "failed": 3,
    "timeout": 3,
    "malformed": 3,
    "auth": 4,
    "max_turns": 5,
    "aborted": 130,
}


def add_agent_options(parser: argparse.ArgumentParser) -> None:
    """``--root``, ``--project-id``, ``--agent-id``: which agent's state to use."""
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        metavar="DIR",
        help="data root (default: $PENGUIN_HOME or ~/.penguin/data)",
    )
    parser.add_argument("--project-id", default="default_project", metavar="ID")
    parser.add_argument("--agent-id", default="default_agent", metavar="ID")


def add_workspace_and_model_options(parser: argparse.ArgumentParser) -> None:
    """``--workspace``, ``--provider`` and ``--model-id``, as run and chat take them."""
    parser.add_argument(
        "--workspace",
        type=Path,
        default=None,
        metavar="DIR",
        help="where the agent works (default: a new temporary workspace)",
    )
    parser.add_argument("--provider", default=None, metavar="P")
    parser.add_argument("--model-id", default=None, metavar="M")


def add_approval_options(parser: argparse.ArgumentParser) -> None:
    """``--approve MODE`` and ``--verbose``: how a Task is approved and shown."""
    parser.add_argument(
        "--approve",
        default=None,
        metavar="MODE",
        help="allow-all (default), deny-all, read-only or always-ask",
    )
    parser.add_argument("--verbose", action="store_true", help="stream thinking and tool output")


def approval_mode_of(args: argparse.Namespace) -> ApprovalMode | None:
    """The ``--approve`` mode (absent: allow-all); ``None``, with the reason on stderr, if bad."""
    try:
        return parse_approval_mode(
            args.approve if args.approve is not None else DEFAULT_APPROVAL_MODE
        )
    except ApprovalModeError as exc:
        print(exc, file=sys.stderr)
        return None


def configure(parser: argparse.ArgumentParser) -> None:
    """Fill in the ``run`` subcommand's parser (``penguin run --help``)."""
    parser.description = "Run one task: the model works in the workspace with penguin's tools."
    parser.epilog = (
        "examples:\n"
        '  penguin run -m "List the Python files and count their lines"\n'
        '  penguin run -m "Fix the failing test" --workspace ~/src/app --approve always-ask\n'
        "\nexit status: 0 completed, 1 bad usage, 3 model or trace write failure, 4 auth, "
        "5 max_turns, 130 interrupted"
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("-m", "--message", required=True, metavar="TEXT", help="the task")
    add_workspace_and_model_options(parser)
    parser.add_argument(
        "--max-turns",
        type=int,
        default=None,
        metavar="N",
        help="stop after N model requests (default: no limit; exit status 5)",
    )
    add_approval_options(parser)
    add_agent_options(parser)
    add_sandbox_options(parser, default="workspace-write")
    parser.set_defaults(handler=_main)


def _main(args: argparse.Namespace) -> int:
    from penguin._errors import SandboxUnavailableError
    from penguin.agent import Agent
    from penguin.environment import WorkspaceError
    from penguin.trace import SessionLockedError

    mode = approval_mode_of(args)
    if mode is None:
        return 1
    if (args.provider is None) != (args.model_id is None):
        print("penguin run: give --provider and --model-id together", file=sys.stderr)
        return 1
    if not args.message.strip():
        print("penguin run: the task (-m) is empty; say what to do", file=sys.stderr)
        return 1
    if args.max_turns is not None and args.max_turns < 1:
        print(
            f"penguin run: --max-turns must be at least 1, not {args.max_turns} "
            "(leave it out for no limit)",
            file=sys.stderr,
        )
        return 1
    unwritable = unwritable_reason(args)
    if unwritable is not None:
        print(f"penguin run: {unwritable}", file=sys.stderr)
        return 1
    try:
        agent = Agent.open(args.root, args.project_id, args.agent_id)
        project_sandbox = agent.project_config().sandbox
    except (ConfigError, OSError) as exc:
        print(f"penguin run: {exc}", file=sys.stderr)
        return 1
    policy = policy_for(args, project_sandbox, default="workspace-write", prog="penguin run")
    if policy is None:
        return 1
    print(sandbox_line(policy), file=sys.stderr)

    async def main(controls: Controls) -> int:
        async with agent.session(
            args.workspace,
            provider=args.provider,
            model_id=args.model_id,
            sandbox=policy,
            surface=SURFACE,
            approval_mode=mode,
        ) as session:
            return await run_task(
                session,
                args.message,
                mode,
                controls,
                verbose=args.verbose,
                max_turns=args.max_turns,
            )

    try:
        return trio.run(under_controls, main)
    except (ConfigError, WorkspaceError, SessionLockedError) as exc:
        print(f"penguin run: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # the agent's folders: a new workspace, the lock (as chat says it)
        print(f"penguin run: {exc}", file=sys.stderr)
        return 1
    except SandboxUnavailableError as exc:
        print(exc, file=sys.stderr)
        return 1


async def under_controls(main: Callable[[Controls], Awaitable[int]]) -> int:
    """Run ``main`` with Ctrl-C and the other signals routed for its whole life.

    A hard stop (a second Ctrl-C, SIGTERM) anywhere — during the Task or while the
    session closes — ends with exit status 130, after the Environment has ended what
    it started.
    """
    codes: list[int] = []
    with collapse_single():
        async with trio.open_nursery() as nursery:
            controls = Controls(nursery)
            nursery.start_soon(controls.watch_signals)
            codes.append(await main(controls))
            nursery.cancel_scope.cancel()
    return codes[0] if codes else EXIT_CODES["aborted"]


@final
class PromptAsker:
    """The ``ask`` callback of the approval modes: a question on the terminal per call.

    One question at a time: the engine asks about one call at a time, but a subagent's
    calls are asked about from the parent's run_subagent window, which runs beside the
    engine, so two questions can be due at once; the second waits for the first answer.
    The question is written through the renderer and the answer read with
    ``read_line`` (``None``: end of input or Ctrl-C, which deny); an answer that is
    none of ``y``/``yes``/``n``/``no``/Enter is not guessed at: the question is asked
    again (chat.md C5.4).

    On a terminal nothing typed before the question answers it, as in ``penguin chat``
    (C5.1): ``discard`` drops the type-ahead once the question is drawn, and a line
    that comes within ``guard`` seconds of that (nobody has read the question yet) is
    not taken: the question is drawn again. A bare Enter pressed twice while the model
    was thinking approved the next two calls.

    ``preview`` gives the lines drawn between a call's line and its question, as chat's
    (C5.3): an edit's diff, a write's content, a command whole, an MCP call's arguments.
    """

    def __init__(
        self,
        renderer: Renderer,
        read_line: Callable[[], Awaitable[str | None]],
        *,
        echo: bool,
        guard: float = 0.0,
        discard: Callable[[], None] | None = None,
        preview: Callable[[om.ToolCallPayload], Iterable[tuple[str, Style]]] | None = None,
    ) -> None:
        self._renderer = renderer
        self._read_line = read_line
        self._echo = echo
        self._guard = guard
        self._discard = discard
        self._preview = preview
        self._one_at_a_time = trio.Lock()
        self._asked: set[tuple[tuple[str, ...], str]] = set()

    async def __call__(self, call: om.OmniMessage[om.ToolCallPayload]) -> om.ApprovalVerdict:
        """Show the call, ask, and read the answer (asking again until it is one)."""
        async with self._one_at_a_time:
            origin = call.origin or ()
            self._asked.add((origin, call.payload.tool_call_id))
            self._renderer.mark_asked(origin, call.payload.tool_call_id)
            # its line (once: the stream may not have shown it yet), then what it would do
            preview = () if self._preview is None else self._preview(call.payload)
            self._renderer.question_header(call, preview)
            try:
                while True:
                    line = await self._question(PROMPT)
                    verdict = read_run_answer(line)
                    if verdict is not None:
                        self._renderer.decided(origin, call.payload.tool_call_id, verdict)
                        return verdict
                    self._renderer.release()
                    self._renderer.line(RUN_REASK, "warn")
            finally:
                self._renderer.release()  # also when the question was cancelled

    async def _question(self, text: str) -> str | None:
        line: str | None = None
        self._renderer.prompt(text)
        shown = trio.current_time()
        if self._discard is not None:
            self._discard()
        try:
            while True:
                line = await self._read_line()
                if line is None or trio.current_time() - shown >= self._guard:
                    break
                self._renderer.answered(line, echo=self._echo)  # too soon: not an answer
                self._renderer.prompt(text)
        finally:  # still holding: the verdict goes right under the answer
            self._renderer.answered(line, echo=self._echo, release=False)
        return line

    def asked_about(self, origin: tuple[str, ...], tool_call_id: str) -> bool:
        """Whether the call ``tool_call_id`` of the session ``origin`` names was asked about."""
        return (origin, tool_call_id) in self._asked


async def render_run(
    session: Session,
    messages: Sequence[om.OmniMessage[om.Payload]],
    renderer: Renderer,
    approve: om.ApproveFn,
    interrupt: trio.Event,
    observe: Callable[[om.OmniMessage[om.Payload]], None] | None = None,
    *,
    max_turns: int | None = None,
) -> RunResult:
    """Run one Task on ``session`` and show its stream with ``renderer``; how it ended.

    ``observe`` sees every message too (the chat counts tokens with it); ``max_turns``
    caps the run's turns.
    """
    async with session.run(
        messages, approve=approve, interrupt=interrupt, max_turns=max_turns
    ) as stream:
        async for item in stream:
            renderer.show(item)
            if observe is not None:
                observe(item)
        result = stream.result
    renderer.finish()
    return result


async def run_task(
    session: Session,
    message: str,
    mode: ApprovalMode,
    controls: Controls,
    out: TextIO | None = None,
    *,
    verbose: bool = False,
    max_turns: int | None = None,
) -> int:
    """Run ``message`` as one Task on ``session``, rendered to ``out``; the exit status."""
    renderer = Renderer(out or sys.stdout, verbose=verbose)
    terminal = stdin_is_a_terminal()
    ask = PromptAsker(
        renderer,
        controls.read_line,
        echo=not terminal,
        guard=QUESTION_GUARD if terminal else 0.0,
        discard=controls.discard_typeahead if terminal else None,
        preview=lambda call: call_preview(
            call, session.workspace_dir, shutil.get_terminal_size().columns
        ),
    )
    approve = approver(mode, session.environment.tool_permission, ask=ask)
    writer = session.recorder.writer
    stop = trio.Event()  # Ctrl-C, or the trace the disk refuses (issue 21.4): the task ends
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_set_after, controls.interrupt.wait, stop)
        nursery.start_soon(_set_after, writer.wait_failure, stop)
        result = await render_run(
            session, [om.user_text(message)], renderer, approve, stop, max_turns=max_turns
        )
        nursery.cancel_scope.cancel()
    await session.flush_trace()
    print(f"trace: {session.trace_path}", file=sys.stderr)
    if writer.failure is not None:
        print(f"penguin: failed: {writer.failure}", file=sys.stderr)
        return EXIT_CODES["failed"]
    if result.status != "completed" and result.error_message:
        print(f"penguin: {result.status}: {result.error_message}", file=sys.stderr)
    return EXIT_CODES[result.status]


async def _set_after(wait: Callable[[], Awaitable[object]], event: trio.Event) -> None:
    await wait()
    event.set()


def stdin_is_a_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except ValueError:  # closed
        return False
