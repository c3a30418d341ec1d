r"""``penguin batch``: a file of tasks, many sessions at a time, one result line per task.

A thin shell over :func:`penguin.batch.run_batch` (spec/batch.md): it checks the
options and the task file before anything runs, appends each result to the output
file as its task ends (:class:`penguin.batch.ResultsFile`), and shows progress on
stderr — a live line on a terminal, one line per finished task otherwise.

The live line is a plain carriage-return redraw (``\r`` and erase-to-end-of-line),
cut to the terminal's width so it never wraps: one line needs no screen library.
Nothing else writes over it: while it is drawn, penguin's log lines (a task's
``max_turns`` notice, say) go through the display, which clears the line, writes
the message on a line of its own and draws the progress again; so does whatever a
library prints on stdout when that is the same terminal (Ray's driver prints a dead
worker's account there, from a thread of its own). The display's writes hold one
lock, so a line from another thread never lands inside a redraw.

Ctrl-C interrupts every running task gracefully (their results say ``aborted``;
tasks not started yet get none, so ``--resume`` runs them later), and the command
exits 130 once those results are written; a second Ctrl-C stops at once. Either
way no process a task started is left running.

A results file the disk stops taking (full, say) stops the batch: the running tasks
are ended, no line is left half-written, and ``--resume`` runs the tasks without a
result once there is room again.

Exit status: 0 every task ran (whatever its own status), 1 bad usage (options, the
task file, no model, a results file that needs ``--resume`` or that another batch
holds, an unavailable backend, a data root or results folder that cannot be
written), 3 the results could not be written, 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Final, TextIO, TypeAlias, final

import trio

from penguin import _log, batch
from penguin import config as cfg
from penguin._errors import PenguinError
from penguin.agent import Agent
from penguin.approval import ApprovalMode, ApprovalModeError

from ._dataroot import unwritable_reason
from ._run import EXIT_CODES, add_agent_options, under_controls
from ._sandbox import add_sandbox_options, policy_for
from ._signals import Controls

__all__ = ["ProgressDisplay", "configure"]

_REFRESH_S: Final = 0.5


def configure(parser: argparse.ArgumentParser) -> None:
    """Fill in the ``batch`` subcommand's parser (``penguin batch --help``)."""
    parser.description = (
        "Run a JSON Lines file of tasks, many sessions at a time, and append one result "
        "line per task to the output file as each task ends."
    )
    parser.epilog = (
        "a task line:\n"
        '  {"id": "t1", "prompt": "Fix the failing test", "template": "repos/app"}\n'
        "examples:\n"
        "  penguin batch tasks.jsonl -o results.jsonl --concurrency 32\n"
        "  penguin batch tasks.jsonl -o results.jsonl --resume        # after an interrupt\n"
        "  penguin batch tasks.jsonl -o results.jsonl --backend ray --workers 4\n"
        "  jq -c '.[]' tasks.json | penguin batch - -o results.jsonl\n"
        "\nexit status: 0 every task ran, 1 bad usage, 3 stopped (results not written, a full\n"
        "disk, the model not reachable or rate limited: --resume later), 130 interrupted"
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "tasks",
        type=Path,
        metavar="TASKS.jsonl",
        help="the tasks, one per line (-: standard input)",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        metavar="RESULTS.jsonl",
        help="where each task's result line is appended",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=16,
        metavar="N",
        help="sessions at once (per Ray worker with --backend ray; default 16)",
    )
    parser.add_argument(
        "--approve",
        default="allow-all",
        metavar="MODE",
        help="allow-all (default) or deny-all: nobody is there to answer questions",
    )
    parser.add_argument("--provider", default=None, metavar="P")
    parser.add_argument("--model-id", default=None, metavar="M")
    parser.add_argument(
        "--max-turns", type=int, default=None, metavar="N", help="per task (default: no limit)"
    )
    parser.add_argument(
        "--timeout-s",
        type=float,
        default=None,
        metavar="S",
        help="per task: interrupt it after S seconds, stop it hard 10 s later",
    )
    add_agent_options(parser)
    parser.add_argument(
        "--resume",
        action="store_true",
        help="skip the tasks that already have a result in the output file "
        "(those whose last result is aborted run again)",
    )
    parser.add_argument("--backend", choices=batch.BACKENDS, default="local")
    parser.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="an existing Ray cluster (default: a local one for this batch)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="W",
        help="worker processes: local ones (default: this process alone), or Ray's "
        "(default: one per cluster CPU); at most one per N tasks",
    )
    parser.add_argument(
        "--discard-workspaces",
        action="store_true",
        help="remove each task's temporary workspace (a template's copy, or the empty "
        "one) once the task has ended; a task's own workspace is never touched",
    )
    parser.add_argument(
        "--gather-traces",
        action="store_true",
        help="copy each Ray task's trace back under this machine's agent",
    )
    add_sandbox_options(parser, default="workspace-write")
    parser.set_defaults(handler=_main)


def _fail(message: object) -> int:
    for line in str(message).splitlines() or [""]:  # a task file's problems: one line each
        print(f"penguin batch: {line}", file=sys.stderr)
    return 1


def _main(args: argparse.Namespace) -> int:
    try:
        mode = batch.unattended_mode(args.approve)
        _check_numbers(args)
        batch.check_backend(args.backend)
    except batch.BatchOptionError as exc:
        return _fail(_in_flags(exc))
    except (ApprovalModeError, batch.BackendUnavailableError) as exc:
        return _fail(exc)
    remote = args.backend == "ray" and args.ray_address is not None
    if str(args.tasks) == "-" and sys.stdin.isatty():
        print(
            "penguin batch: reading the tasks from standard input (end with Ctrl-D)",
            file=sys.stderr,
        )
    try:
        tasks = batch.load_tasks(args.tasks, check_paths=not remote)
    except batch.TaskFileError as exc:
        return _fail(exc)
    except OSError as exc:
        return _fail(f"cannot read the tasks: {exc}")
    unwritable = unwritable_reason(args)
    if unwritable is not None:
        return _fail(unwritable)
    try:
        project = cfg.load_project_config(
            cfg.AgentPaths(args.root, args.project_id, args.agent_id).project_config
        ).sandbox
    except cfg.ConfigError as exc:
        return _fail(exc)
    args.sandbox_policy = policy_for(args, project, default="workspace-write", prog="penguin batch")
    if args.sandbox_policy is None:
        return 1
    try:
        agent = Agent.open(args.root, args.project_id, args.agent_id)
        _check_models(agent, tasks, args.provider, args.model_id)
        results = batch.ResultsFile.open(args.output, resume=args.resume)
    except (cfg.ConfigError, batch.BatchOptionError, OSError) as exc:
        return _fail(exc)
    with results:
        pending = [task for task in tasks if task.id not in results.ids]
        if args.resume:
            again = sum(1 for task in pending if task.id in results.aborted)
            print(
                f"penguin batch: {len(tasks) - len(pending)} of {len(tasks)} tasks already "
                f"have a result in {args.output}; running the other {len(pending)}"
                + (f" ({again} of them aborted last time, run again)" if again else ""),
                file=sys.stderr,
            )
        for number in results.unreadable_lines:
            print(
                f"penguin batch: {args.output}:{number} holds no result; its task runs again",
                file=sys.stderr,
            )

        async def main(controls: Controls) -> int:
            return await _run(args, mode, pending, results, controls)

        try:
            return trio.run(under_controls, main)
        except (PenguinError, ConnectionError) as exc:
            return _fail(exc)


def _check_numbers(args: argparse.Namespace) -> None:
    batch.check_options(
        concurrency=args.concurrency,
        workers=args.workers,
        max_turns=args.max_turns,
        timeout_s=args.timeout_s,
        provider=args.provider,
        model_id=args.model_id,
    )
    if args.ray_address is not None and args.backend != "ray":
        raise batch.BatchOptionError("ray-address", "--ray-address needs --backend ray")


def _in_flags(exc: batch.BatchOptionError) -> str:
    """The library's complaint about an option, said with the command line's flags."""
    if exc.option == "approve":
        return str(exc).replace("approval mode ", "--approve ", 1)
    if exc.option == "provider":
        return "give --provider and --model-id together"
    if exc.option in ("concurrency", "workers", "max_turns", "timeout_s"):
        return f"--{exc.option.replace('_', '-')} must be more than 0, got {exc.value}"
    return str(exc)


def _check_models(
    agent: Agent, tasks: list[batch.BatchTask], provider: str | None, model_id: str | None
) -> None:
    """ConfigError, naming the command that fixes it, for a model no task could use."""
    project = agent.project_config()
    wanted = {(provider, model_id)}
    wanted.update((t.provider, t.model_id) for t in tasks if t.provider is not None)
    for want_provider, want_model in sorted(wanted, key=str):
        cfg.resolve_model(project, provider=want_provider, model_id=want_model)


async def _run(
    args: argparse.Namespace,
    mode: ApprovalMode,
    tasks: list[batch.BatchTask],
    results: batch.ResultsFile,
    controls: Controls,
) -> int:
    progress = batch.BatchProgress(total=len(tasks))
    display = ProgressDisplay(progress, sys.stderr, live=_is_terminal(sys.stderr))
    refused: list[_Stop] = []
    try:
        with display.routing_logs(), _stopped_by(refused):
            await _stream_results(args, mode, tasks, results, controls, display, progress)
    finally:
        display.close(f"results: {args.output}")
    if refused:
        print(
            f"penguin batch: {refused[0]}; the batch stopped. Tasks without a result: "
            f"{len(tasks) - _have_results(tasks, results)} (--resume runs them once "
            f"{_AGAIN[type(refused[0])]})",
            file=sys.stderr,
        )
        return _STOPPED
    return EXIT_CODES["aborted"] if controls.interrupt.is_set() else 0


_STOPPED: Final = 3
_Stop: TypeAlias = (
    batch.ResultsWriteError
    | batch.StorageFullError
    | batch.ModelUnreachableError
    | batch.ModelRateLimitedError
)
_AGAIN: Final[dict[type[Exception], str]] = {
    batch.ResultsWriteError: "the results can be written",
    batch.StorageFullError: "there is room again",
    batch.ModelUnreachableError: "the model can be reached again",
    batch.ModelRateLimitedError: "the limit allows; a lower --concurrency asks less at once",
}
"""When ``--resume`` is worth running, by what stopped the batch."""


def _have_results(tasks: list[batch.BatchTask], results: batch.ResultsFile) -> int:
    return sum(1 for task in tasks if task.id in results.ids)


@contextlib.contextmanager
def _stopped_by(refused: list[_Stop]) -> Iterator[None]:
    """Catch what stops a batch (alone or in a group): a results write, a disk, the model."""
    try:
        yield
    except* tuple(_AGAIN) as group:
        first = group.exceptions[0]
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        assert isinstance(first, _Stop)
        refused.append(first)


async def _stream_results(
    args: argparse.Namespace,
    mode: ApprovalMode,
    tasks: list[batch.BatchTask],
    results: batch.ResultsFile,
    controls: Controls,
    display: ProgressDisplay,
    progress: batch.BatchProgress,
) -> None:
    """Run the batch and append each result as it comes (a failed append ends it)."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(display.refresh_every, _REFRESH_S)
        nursery.start_soon(_announce_interrupt, controls, display)
        async with batch.run_batch(
            tasks,
            concurrency=args.concurrency,
            approve=mode,
            backend=args.backend,
            ray_address=args.ray_address,
            workers=args.workers,
            gather_traces=args.gather_traces,
            root=args.root,
            project_id=args.project_id,
            agent_id=args.agent_id,
            provider=args.provider,
            model_id=args.model_id,
            max_turns=args.max_turns,
            timeout_s=args.timeout_s,
            interrupt=controls.interrupt,
            progress=progress,
            sandbox=args.sandbox_policy,
            discard_workspaces=args.discard_workspaces,
        ) as stream:
            async for result in stream:
                await results.append(result)
                display.finished(result)
        nursery.cancel_scope.cancel()


async def _announce_interrupt(controls: Controls, display: ProgressDisplay) -> None:
    await controls.interrupt.wait()
    display.note(
        "interrupting the running tasks (their results will say aborted); "
        "Ctrl-C again stops at once"
    )


@final
class ProgressDisplay:
    """The batch's progress on stderr: one live line, or one line per finished task."""

    def __init__(self, progress: batch.BatchProgress, out: TextIO, *, live: bool) -> None:
        """Show ``progress`` on ``out``; ``live``: redraw one line (a terminal)."""
        self._progress = progress
        self._out = out
        self._live = live
        self._drawn = False
        self._shown = 0
        self._lock = threading.RLock()  # lines may come from other threads (Ray's, logging)
        self._text = ""  # the live line as last drawn from Trio's thread

    def finished(self, result: batch.BatchResult) -> None:
        """A result was written."""
        self._shown += 1
        if self._live:
            self._draw()
        else:
            self._write(self._progress.finished_line(result, self._shown) + "\n")

    def note(self, text: str) -> None:
        """A message of its own, above the live line."""
        self.line(f"penguin batch: {text}")

    def line(self, text: str) -> None:
        """``text`` on a line of its own, above the live line (which is drawn again)."""
        with self._lock:
            self._clear()
            self._write(f"{text}\n")
            if self._live:
                self._draw()

    @contextlib.contextmanager
    def routing_logs(self) -> Iterator[None]:
        """While the live line is shown, penguin's log lines go above it, never into it.

        So does what is printed on ``sys.stdout`` when it is a terminal too: line by line.
        """
        if not self._live:
            yield
            return
        handler = _AboveTheLine(self)
        _log.logger.addHandler(handler)
        stdout = sys.stdout
        above = _LinesAbove(self, stdout) if _is_terminal(stdout) else None
        if above is not None:
            sys.stdout = above
        try:
            yield
        finally:
            if above is not None:
                sys.stdout = stdout
                above.end()
            _log.logger.removeHandler(handler)

    async def refresh_every(self, seconds: float) -> None:
        """Redraw the live line every ``seconds`` (the rate and ETA move between results)."""
        if not self._live:
            return
        while True:
            self._draw()
            await trio.sleep(seconds)

    def close(self, trailer: str) -> None:
        """Replace the live line with the summary."""
        summary = self._progress.summary(trio.current_time())
        with self._lock:
            self._clear()
            self._write(f"penguin batch: {summary}; {trailer}\n")

    def _draw(self) -> None:
        """Draw the live line: afresh on Trio's thread, as last drawn from any other."""
        if trio.lowlevel.in_trio_run():  # the progress and its clock are the loop's
            width = shutil.get_terminal_size((100, 24)).columns
            self._text = self._progress.line(trio.current_time())[: max(10, width - 1)]
        with self._lock:
            self._write(f"\r\x1b[K{self._text}")
            self._drawn = True

    def _clear(self) -> None:
        with self._lock:
            if self._drawn:
                self._write("\r\x1b[K")
                self._drawn = False

    def _write(self, text: str) -> None:
        try:
            self._out.write(text)
            self._out.flush()
        except (OSError, ValueError):  # a closed or broken stderr must not stop the batch
            pass


@final
class _AboveTheLine(logging.Handler):
    """A ``penguin`` log line, written by the display above its live line."""

    def __init__(self, display: ProgressDisplay) -> None:
        super().__init__(logging.WARNING)
        self._display = display

    def emit(self, record: logging.LogRecord) -> None:
        self._display.line(record.getMessage())


@final
class _LinesAbove(io.TextIOBase):
    """``sys.stdout`` while the live line is drawn on the same terminal.

    Each whole line written goes to the display, above its live line; a line not
    ended yet waits for its end (or for :meth:`end`).
    """

    def __init__(self, display: ProgressDisplay, terminal: TextIO) -> None:
        super().__init__()
        self._display = display
        self._terminal = terminal
        self._partial = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self._display.line(line)
        return len(text)

    def end(self) -> None:
        """Show the line not ended yet, if any (the routing is over)."""
        with self._lock:
            rest, self._partial = self._partial, ""
        if rest:
            self._display.line(rest)

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._terminal.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]  # read-only on io.TextIOBase
        return self._terminal.encoding


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except ValueError:
        return False
