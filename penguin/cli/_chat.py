"""``penguin chat``: one session, many tasks, approvals inline, the model's work as it happens.

The command (spec chat.md C1–C4) is a REPL over one :class:`~penguin.Session` at a time:
each line typed is a Task (``Session.run``), shown by the renderer ``penguin run`` uses
(:mod:`._render`), approved by the mode of ``--approve`` with the same prompt; text
typed while a Task runs is steering (``Session.steer``); slash commands act on the
session (``/help`` lists them). It resumes a session from its trace (``--resume``).

Two ways to run:

- **On a terminal** (stdin and stdout both terminals): the line editor and the screen
  are :mod:`._terminal` and :mod:`._screen` (prompt_toolkit in a worker thread, rich
  for Markdown), imported only then. Ctrl-C follows C4: at a question it denies; while
  a Task runs it interrupts it (a second one within 2 s stops it at once); with text
  in the line it clears it; on an empty line it asks ``Exit? [y/N]``.
- **Scriptable** (stdin not a terminal): one Task per line of stdin until its end, no
  line editing, plain text out; approval answers are read from the same stdin. SIGINT
  then works as in ``penguin run`` (deny at a question, interrupt a Task), and ends the
  chat when it arrives between Tasks.

Approval questions (C5) name their call (its ``●`` line right above, with a preview:
the diff of an edit, the start of a file to write, the whole command) and take only a
deliberate answer: type-ahead goes to the input line, keys in the question's first
300 ms are dropped, and ``y`` / ``a`` / ``n`` / ``n REASON`` / ``d`` / Enter are the
answers; anything else asks again. ``a`` fills the session's
:class:`~penguin.approval.AllowList`, which ``/approve`` lists.

SIGTERM and SIGHUP end the chat at once (exit status 130). However it ends, leaving
the session's ``async with`` ends every process the session started and the terminal
is back in its normal mode. One process writes a session (C5.6): the Session holds
the lock beside its trace, and a session another process holds is refused at once,
naming it (checked before the header, and again by the Session when it opens).

Start-up is part of the interface (first prompt in < 400 ms, ``benchmarks/chat.py``):
the header and the first prompt are up before the agent stack is imported and the
session opened; both happen in the background, and the first Task waits for them.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import re
import shutil
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, final

import attrs
import trio

from penguin import config as cfg
from penguin import protocol as om
from penguin._concurrency import collapse_single
from penguin._errors import PenguinError
from penguin._log import logger
from penguin.approval import (
    APPROVAL_MODES,
    CHAT_PROMPT,
    DEFAULT_APPROVAL_MODE,
    REASK,
    REASON_PROMPT,
    AllowList,
    Answer,
    ApprovalMode,
    ApprovalModeError,
    approver,
    parse_approval_mode,
    read_chat_answer,
)
from penguin.trace import (
    SessionLock,
    TraceLocation,
    find_session,
    latest_session,
    lock_path,
    trace_files,
)

from ._dataroot import unwritable_reason
from ._render import (
    Renderer,
    TaskStats,
    call_preview,
    history_lines,
    paint,
    shorten,
    use_color,
)
from ._run import (
    QUESTION_GUARD,
    add_agent_options,
    add_approval_options,
    add_workspace_and_model_options,
    approval_mode_of,
    render_run,
)
from ._sandbox import add_sandbox_options, policy_for, resumed_policy
from ._signals import Controls

if TYPE_CHECKING:
    from penguin.agent import Agent, Session, SessionHolder
    from penguin.llm import OpenAIChatLLM

    from ._screen import ScreenSurface
    from ._terminal import Terminal

__all__ = ["COMMANDS", "STOP_WINDOW", "TaskControl", "configure"]

SURFACE: Final = "penguin chat"
"""How a session this chat holds is named to a process refused it (C5.6)."""
QUESTION_HINT: Final = "y once · a for the session · n no · n REASON"
"""Shown beside an approval question once it takes keys."""
STOP_WINDOW: Final = 2.0
"""Seconds after an interrupting Ctrl-C in which another one stops the Task at once."""
HISTORY_FILE: Final = "chat_history"
_LATEST: Final = ""
"""``--resume`` without a session id: the newest session of the agent."""

COMMANDS: Final[dict[str, tuple[str, str]]] = {
    "/help": ("", "list these commands"),
    "/exit": ("", "end the chat (so do /quit and Ctrl-D on an empty line)"),
    "/quit": ("", "end the chat"),
    "/clear": ("", "start a new session in the same workspace; the old one stays resumable"),
    "/compact": ("", "compact the context now"),
    "/approve": (" [MODE]", "show the approval mode, or change it for the next calls"),
    "/verbose": ("", "stream thinking and tool output in full, or stop"),
    "/model": (" [PROVIDER MODEL_ID]", "show the model, or change it for the next task"),
    "/processes": ("", "the session's background commands: state and service URL"),
    "/kill": (" PROCESS_ID", "end a background command"),
}
"""The slash commands: name -> (its arguments, what it does)."""
_DURING_A_TASK: Final = frozenset(
    {"/help", "/verbose", "/approve", "/model", "/processes", "/kill", "/exit", "/quit"}
)
_MAX_ECHO_LINES: Final = 12
_MCP_UNAVAILABLE: Final = re.compile(r'\[penguin\] MCP server ".*" unavailable: ')
"""The stderr line of a server that failed to connect, which the chat shows once, rendered."""


def configure(parser: argparse.ArgumentParser) -> None:
    """Fill in the ``chat`` subcommand's parser (``penguin chat --help``)."""
    parser.description = (
        "Talk with the agent in the terminal: each line is a task in one session, "
        "tool calls are approved as they come, and text typed while a task runs "
        "steers it. With stdin not a terminal, each line of stdin is a task."
    )
    parser.epilog = (
        "examples:\n"
        "  penguin chat --workspace ~/src/app --approve always-ask\n"
        "  penguin chat --resume                 # the newest session\n"
        "  penguin chat --resume session-2026-11-30-10-00-00-0a1b2c3d\n"
        "  printf 'List the files\\n/exit\\n' | penguin chat --workspace .\n"
        "\nslash commands: " + " ".join(COMMANDS) + " (/help explains them)\n"
        "exit status: 0 ended by /exit, /quit or end of input; 1 bad usage; "
        "130 ended by SIGTERM or SIGHUP"
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_workspace_and_model_options(parser)
    parser.add_argument(
        "--resume",
        nargs="?",
        const=_LATEST,
        default=None,
        metavar="SESSION",
        help="continue SESSION from its trace (without an id: the newest session)",
    )
    add_approval_options(parser)
    add_agent_options(parser)
    add_sandbox_options(parser, default="workspace-write")
    parser.set_defaults(handler=_main)


# ---------------------------------------------------------------------- Ctrl-C while a task runs


@final
@attrs.define
class TaskControl:
    """Ctrl-C while a Task runs: the first interrupts it, another within 2 s stops it at once.

    ``graceful=False`` (a compaction, which has no graceful path) stops at the first.
    """

    graceful: bool = True
    interrupt: trio.Event = attrs.Factory(trio.Event)
    """Set by the first Ctrl-C: the run's ``interrupt=``."""
    stop_scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    """Cancelled by the stopping Ctrl-C: the hard stop of the run."""
    _last: float | None = None

    def press(self) -> Literal["interrupting", "stopping", "waiting"]:
        """One Ctrl-C: what it does (call from the Trio thread)."""
        now = trio.current_time()
        if self.graceful and not self.interrupt.is_set():
            self.interrupt.set()
            self._last = now
            return "interrupting"
        if not self.graceful or (self._last is not None and now - self._last <= STOP_WINDOW):
            self.stop_scope.cancel()
            return "stopping"
        self._last = now
        return "waiting"


# ---------------------------------------------------------------------- what to open


@final
class _UsageError(PenguinError, ValueError):
    """A command line that cannot start a chat; the message says what is wrong."""


@final
@attrs.frozen
class _Plan:
    """What the chat opens first: a new session, or one to resume."""

    provider: str
    model_id: str
    workspace: Path
    resume: TraceLocation | None = None
    mode: ApprovalMode = DEFAULT_APPROVAL_MODE
    """The approval mode to use: ``--approve``'s, or on a resume the one recorded."""
    mode_change: str | None = None
    """On a resume, the line that says ``--approve`` changed the recorded mode."""


def _session_meta(path: Path) -> dict[str, Any] | None:
    """The payload of the ``session_meta`` a trace file opens with, or None.

    Read with ``json`` alone: the command has not loaded the codec yet.
    """
    try:
        with path.open("rb") as file:
            first = file.readline()
        value = json.loads(first)
    except (OSError, ValueError):
        return None
    if not isinstance(value, dict) or value.get("type") != "session_meta":
        return None
    payload = value.get("payload")
    return payload if isinstance(payload, dict) else None


def _plan(args: argparse.Namespace, paths: cfg.AgentPaths, mode: ApprovalMode) -> _Plan:
    """Check the command line against the agent's files; raise :class:`_UsageError`.

    ``mode`` is ``--approve``'s (the default when it is absent). A session that another
    process holds raises :class:`~penguin.trace.SessionLockedError` (C5.6).
    """
    project = cfg.load_project_config(paths.project_config)
    if args.resume is None:
        entry = cfg.resolve_model(project, provider=args.provider, model_id=args.model_id)
        if args.workspace is not None:
            workspace = Path(args.workspace).expanduser().resolve()
            if not workspace.is_dir():
                raise _UsageError(f"the workspace {workspace} is not a directory; create it first")
        else:
            workspace = cfg.new_temp_workspace(paths)
        return _Plan(entry.provider, entry.model_id, workspace, mode=mode)
    traces = paths.traces_dir
    if args.resume == _LATEST:
        location = latest_session(traces, skip_subagents=True)
        if location is None:
            raise _UsageError(f"no session to resume: {traces} holds no trace of this agent")
    else:
        location = find_session(traces, args.resume)
        if location is None:
            raise _UsageError(f"no session {args.resume} under {traces}; nothing to resume")
    meta = _session_meta(location.path)
    if meta is None:
        raise _UsageError(f"{location.path} does not start with a session_meta record")
    workspace = Path(str(meta.get("workspace", "")))
    if args.workspace is not None and Path(args.workspace).resolve() != workspace.resolve():
        raise _UsageError(
            f"session {location.session_id} works in {workspace}; it cannot move to "
            f"{args.workspace} (leave --workspace out to resume it)"
        )
    provider, model_id = str(meta.get("provider")), str(meta.get("model_id"))
    if args.provider is not None and (args.provider, args.model_id) != (provider, model_id):
        raise _UsageError(
            f"session {location.session_id} uses the model {provider}/{model_id}; it cannot "
            f"change to {args.provider}/{args.model_id} (leave --provider and --model-id out)"
        )
    cfg.resolve_model(project, provider=provider, model_id=model_id)  # still configured?
    SessionLock.probe(lock_path(location.path, location.session_id), location.session_id)
    recorded = _recorded_mode(meta)
    change = None
    if args.approve is not None and recorded is not None and mode != recorded:
        change = f"[approval mode: {mode} (the session had {recorded}; --approve changed it)]"
    elif args.approve is None and recorded is not None:
        mode = recorded
    return _Plan(provider, model_id, workspace, resume=location, mode=mode, mode_change=change)


def _recorded_mode(meta: dict[str, Any]) -> ApprovalMode | None:
    """The approval mode a trace's ``session_meta`` records (C5.5), if it records one."""
    value = meta.get("approval_mode")
    if not isinstance(value, str):
        return None
    try:
        return parse_approval_mode(value)
    except ApprovalModeError:
        return None


# ---------------------------------------------------------------------- the session slot


@final
class _SessionSlot:
    """The chat's current Session, in a :class:`SessionHolder` so ``/clear`` can swap it."""

    def __init__(self) -> None:
        self.nursery: trio.Nursery | None = None
        """Where the session's holding task runs (set before :meth:`open`)."""
        self._holder: SessionHolder | None = None
        self._ready = trio.Event()
        self.session_id: str | None = None
        """The id of the session opened last (also once it is closed)."""

    def open(
        self,
        opener: Callable[[], AbstractAsyncContextManager[Session]],
        after: trio.Event | None = None,
    ) -> None:
        """Start opening a session, once ``after`` is set (:meth:`session` waits for it)."""
        ready, nursery = trio.Event(), self.nursery
        self._holder, self._ready = None, ready
        assert nursery is not None

        async def start() -> None:
            if after is not None:
                await after.wait()
            from penguin.agent import SessionHolder  # the agent stack, once the prompt is up

            holder = self._holder = SessionHolder()
            session = await holder.open(nursery, opener)
            self.session_id = session.session_id
            ready.set()

        nursery.start_soon(start)

    async def session(self) -> Session:
        """The open session (waiting until it is open)."""
        await self._ready.wait()
        session = None if self._holder is None else self._holder.session
        assert session is not None
        return session

    async def close(self) -> None:
        """Close the session (every process it started ends) and wait until it is closed."""
        if self._holder is not None:
            await self._holder.release()


# ---------------------------------------------------------------------- the chat


@final
class _Chat:
    """One ``penguin chat`` process: its session slot, its view, its input."""

    def __init__(
        self, args: argparse.Namespace, paths: cfg.AgentPaths, mode: ApprovalMode, plan: _Plan
    ) -> None:
        self.args = args
        self.paths = paths
        self.mode = mode
        self.plan = plan
        self.interactive = _is_a_terminal(sys.stdin) and _is_a_terminal(sys.stdout)
        self.terminal: Terminal | None = None
        self.surface: ScreenSurface | None = None
        self.plain: Controls | None = None
        self.control: TaskControl | None = None
        self.terminated = False
        self.exit_after_task = False
        self._agent: Agent | None = None
        self._next_model: OpenAIChatLLM | None = None
        self._clients: list[OpenAIChatLLM] = []
        self._carry = ""
        self.allowed = AllowList()
        """What the current session allows without asking (``a`` answers, C5.4)."""
        self.slot = _SessionSlot()
        if self.interactive:
            from ._screen import ScreenSurface
            from ._terminal import Terminal

            self.terminal = Terminal(paths.root / HISTORY_FILE, list(COMMANDS), sys.stdout)
            self.terminal.question_hint = QUESTION_HINT
            self.surface = ScreenSurface(self.terminal, color=use_color(sys.stdout))
            self.renderer = Renderer(surface=self.surface, verbose=args.verbose)
        else:
            self.renderer = Renderer(sys.stdout, verbose=args.verbose)

    # ------------------------------------------------------------------ the whole life

    async def main(self) -> int:
        handler = self._log_handler()
        try:
            with collapse_single():
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._watch_signals, nursery.cancel_scope)
                    slot = self.slot
                    slot.nursery = nursery
                    # On a terminal the session opens once the first prompt is drawn: the
                    # agent stack's import would otherwise compete with the drawing.
                    after = self.terminal.drawn if self.terminal is not None else None
                    if self.plan.resume is not None:
                        slot.open(self._resumed, after)
                    else:
                        plan = self.plan
                        slot.open(
                            lambda: self._new(plan.workspace, plan.provider, plan.model_id), after
                        )
                    if self.interactive:
                        self.asker = _ChatAsker(self, self._approval_question)
                        await self._repl()
                    else:
                        self.plain = Controls(nursery)
                        self.asker = _ChatAsker(self, self._plain_question)
                        await self._script()
                    await slot.close()
                    nursery.cancel_scope.cancel()
        finally:
            if handler is not None:
                logger.removeHandler(handler)
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                for client in self._clients:
                    await client.aclose()
            if self.slot.session_id is not None:
                self._say(f"resume with: penguin chat --resume {self.slot.session_id}")
        return 130 if self.terminated else 0

    async def _watch_signals(self, scope: trio.CancelScope) -> None:
        watched = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        with trio.open_signal_receiver(*watched) as signals:
            async for signum in signals:
                if signum == signal.SIGINT:
                    self._ctrl_c_signal()
                    continue
                self.terminated = True
                scope.cancel()
                return

    def _ctrl_c_signal(self) -> None:
        """SIGINT as a signal: the terminal is not in a prompt's raw mode, or no terminal."""
        if self.plain is not None and self.plain.cancel_prompt():
            return  # a question (denied) or the wait for the next line (the chat ends)
        if self.control is not None:
            self._press(self.control)

    def _press(self, control: TaskControl) -> None:
        outcome = control.press()
        if outcome == "stopping":
            return
        note = "interrupting… (Ctrl-C again within 2 s stops at once)"
        if self.surface is not None:
            self.surface.note = note
        elif outcome == "interrupting":
            self.renderer.line(f"[{note}]", "warn")

    def _log_handler(self) -> logging.Handler | None:
        """On a terminal, penguin's diagnostics go above the prompt like everything else."""
        if self.terminal is None:
            return None
        terminal = self.terminal
        color = use_color(sys.stdout)

        @final
        class AbovePrompt(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                line = record.getMessage()
                if _MCP_UNAVAILABLE.match(line):
                    return  # "[mcp] connected: NAME failed: REASON" says it on the screen
                terminal.write(paint(line, "warn", color) + "\n")

        handler = AbovePrompt(logging.WARNING)
        logger.addHandler(handler)
        return handler

    def _say(self, text: str) -> None:
        """A last line on stdout, whatever state the terminal is in."""
        with contextlib.suppress(OSError, ValueError):
            print(text, flush=True)

    # ------------------------------------------------------------------ sessions

    async def _agent_of(self) -> Agent:
        if self._agent is not None:
            return self._agent
        # Imported here, in a thread: the first prompt is up while the agent stack loads.
        module = await trio.to_thread.run_sync(importlib.import_module, "penguin.agent")
        paths = self.paths
        agent: Agent = await trio.to_thread.run_sync(
            module.Agent.open, paths.root, paths.project_id, paths.agent_id
        )
        self._agent = agent
        if self.surface is not None:  # the first answer's Markdown need not wait for it
            await trio.to_thread.run_sync(importlib.import_module, "rich.markdown")
        return agent

    @asynccontextmanager
    async def _new(self, workspace: Path, provider: str, model_id: str) -> AsyncIterator[Session]:
        agent = await self._agent_of()
        async with agent.session(
            workspace,
            provider=provider,
            model_id=model_id,
            sandbox=self.args.sandbox_policy,
            surface=SURFACE,
            approval_mode=self.mode,
        ) as session:
            yield session

    @asynccontextmanager
    async def _resumed(self) -> AsyncIterator[Session]:
        location = self.plan.resume
        assert location is not None
        agent = await self._agent_of()
        async with agent.resume_session(
            location.session_id, sandbox=self.args.sandbox_policy, surface=SURFACE
        ) as session:
            yield session

    # ------------------------------------------------------------------ the loops

    async def _repl(self) -> None:
        terminal = self.terminal
        assert terminal is not None
        while True:
            entry = await terminal.read(self._prompt(), default=self._take_carry())
            if entry.kind == "eof":
                return
            if entry.kind == "ctrl_c":
                answer = await self._question("Exit? [y/N] ")
                if answer is None or answer.strip().lower() in ("y", "yes"):
                    return
                continue
            text = entry.text
            if entry.kind != "line" or not text.strip():
                continue
            self._echo(text)
            if text.lstrip().startswith("/"):
                if await self._command(text.strip()) == "exit":
                    return
                continue
            await self._task(text)
            if self.exit_after_task:
                return

    async def _script(self) -> None:
        plain = self.plain
        assert plain is not None
        while True:
            line = await plain.read_line()
            if line is None:
                return
            text = line.rstrip("\r\n")
            if not text.strip():
                continue
            self.renderer.line(f"› {text}", "dim")
            if text.lstrip().startswith("/"):
                if await self._command(text.strip()) == "exit":
                    return
                continue
            await self._task(text)
            if self.exit_after_task:
                return

    def _prompt(self) -> str:
        return paint("›", "call", use_color(sys.stdout)) + " "

    def _take_carry(self) -> str:
        terminal = self.terminal
        carry = self._carry or (terminal.unsent if terminal is not None else "")
        self._carry = ""
        if terminal is not None:
            terminal.unsent = ""
        return carry

    def _echo(self, text: str) -> None:
        """The message as sent (the line editor erased itself): the first lines of it."""
        lines = text.split("\n")
        shown = lines[:_MAX_ECHO_LINES]
        for index, line in enumerate(shown):
            self.renderer.line(("› " if index == 0 else "  ") + line, "")
        if len(lines) > len(shown):
            self.renderer.line(f"  … (+{len(lines) - len(shown)} lines)", "dim")

    async def _question(self, text: str) -> str | None:
        assert self.terminal is not None
        return await self.terminal.question(text)

    async def _approval_question(self, text: str, guarded: bool) -> str | None:
        """An approval question on the terminal (the renderer holds other output meanwhile)."""
        assert self.terminal is not None
        return await self.terminal.question(text, guard=QUESTION_GUARD if guarded else 0.0)

    async def _plain_question(self, text: str, guarded: bool) -> str | None:
        """An approval question when stdin is not a terminal: the answer is the next line."""
        assert self.plain is not None
        surface = self.renderer.surface
        line: str | None = None
        surface.question(text)
        try:
            line = await self.plain.read_line()
        finally:
            surface.answered(line, echo=True)
        return None if line is None else line.rstrip("\r\n")

    # ------------------------------------------------------------------ a task

    async def _task(self, text: str) -> None:
        session = await self.slot.session()
        if self._next_model is not None:
            session.set_llm(self._next_model)
            self._next_model = None
        control = self.control = TaskControl()
        stats = TaskStats(context_window=session.llm.context_window)
        started = time.monotonic()
        approve = approver(
            self.mode, session.environment.tool_permission, ask=self.asker, allow_list=self.allowed
        )
        if self.surface is not None:
            self.surface.working(started)
        result = None
        try:
            with control.stop_scope:
                async with trio.open_nursery() as nursery:
                    if self.terminal is not None:
                        nursery.start_soon(self._steer, session, control)
                    result = await render_run(
                        session,
                        [om.user_text(text)],
                        self.renderer,
                        approve,
                        control.interrupt,
                        stats.observe,
                    )
                    nursery.cancel_scope.cancel()
        finally:
            self.control = None
            if self.surface is not None:
                self.surface.working(None)
        if control.stop_scope.cancelled_caught:
            self.renderer.finish()
            self.renderer.line("[stopped]", "warn")
        elif result is not None and result.status not in ("completed", "aborted"):
            detail = f": {result.error_message}" if result.error_message else ""
            self.renderer.line(f"[the task ended: {result.status}{detail}]", "error")
        self.renderer.line(stats.line(time.monotonic() - started), "dim")

    async def _steer(self, session: Session, control: TaskControl) -> None:
        """The input line while a Task runs: steering, Ctrl-C, a few slash commands."""
        terminal, surface = self.terminal, self.surface
        assert terminal is not None
        assert surface is not None
        saved = ""
        while True:
            entry = await terminal.read(self._prompt(), default=saved, live=surface.live)
            saved = ""
            if entry.kind in ("preempted", "ctrl_c"):
                saved = entry.text
                if entry.kind == "ctrl_c":
                    self._press(control)
                continue
            if entry.kind != "line":
                return  # end of input: Ctrl-C now arrives as a signal
            text = entry.text
            if not text.strip():
                continue
            if text.lstrip().startswith("/"):
                await self._command_during_task(text.strip(), control)
                continue
            if session.steer([om.user_text(text)]):
                self.renderer.line(f"[steering queued] {shorten(text)}", "note")
            else:  # the Task is ending: offer it again on the next prompt
                self._carry = text

    async def _command_during_task(self, text: str, control: TaskControl) -> None:
        name = text.split(maxsplit=1)[0]
        if name not in COMMANDS or name in _DURING_A_TASK:
            if await self._command(text) == "exit":
                self.exit_after_task = True
                control.stop_scope.cancel()
            return
        self.renderer.line(f"[{name} waits until the task ends; Ctrl-C interrupts it]", "warn")

    # ------------------------------------------------------------------ slash commands

    async def _command(self, text: str) -> Literal["exit"] | None:
        name, *args = text.split()
        say = self.renderer.line
        if name in ("/exit", "/quit"):
            return "exit"
        if name == "/help":
            for command, (arguments, summary) in COMMANDS.items():
                say(f"  {command + arguments:<30} {summary}", "dim")
        elif name == "/clear":
            await self._clear()
        elif name == "/compact":
            await self._compact()
        elif name == "/approve":
            self._approve(args)
        elif name == "/verbose":
            self.renderer.verbose = not self.renderer.verbose
            full = "on: thinking and tool output stream in full"
            say(f"[verbose {full if self.renderer.verbose else 'off'}]", "note")
        elif name == "/model":
            await self._model(args)
        elif name == "/processes":
            await self._processes()
        elif name == "/kill":
            await self._kill(args)
        else:
            say(f"unknown command {name}; /help lists them", "error")
        return None

    def _approve(self, args: list[str]) -> None:
        if not args:
            choices = ", ".join(APPROVAL_MODES)
            self.renderer.line(f"[approval mode: {self.mode} (one of {choices})]", "note")
            entries = self.allowed.entries()
            listed = ", ".join(entries) if entries else "nothing yet (answer a to add a tool)"
            self.renderer.line(f"[allowed for this session: {listed}]", "note")
            return
        try:
            self.mode = parse_approval_mode(" ".join(args))
        except ApprovalModeError as exc:
            self.renderer.line(str(exc), "error")
            return
        self.renderer.line(f"[approval mode for the next calls: {self.mode}]", "note")

    async def _clear(self) -> None:
        session = await self.slot.session()
        old = session.session_id
        workspace, model = session.workspace_dir, session.llm.model
        await self.slot.close()
        self.allowed = AllowList()  # a new session starts with nothing allowed
        self.slot.open(lambda: self._new(workspace, model.provider, model.model_id))
        new = await self.slot.session()
        self.renderer.line(
            f"[new session {new.session_id}; the last one stays resumable: "
            f"penguin chat --resume {old}]",
            "note",
        )

    async def _compact(self) -> None:
        session = await self.slot.session()
        if session.usage.turns == 0:
            self.renderer.line(
                "[nothing to compact: the context has no model turns since it began]", "note"
            )
            return
        control = self.control = TaskControl(graceful=False)
        result = None
        try:
            with control.stop_scope:
                async with session.compact() as stream:
                    async for message in stream:
                        if not om.is_partial(message):
                            self.renderer.show(message)
                    result = stream.result
        finally:
            self.control = None
        if result is None:
            self.renderer.line("[compaction stopped; the context is unchanged]", "warn")
        elif result.status != "completed" and result.error_message:
            self.renderer.line(f"[compaction {result.status}: {result.error_message}]", "error")

    async def _model(self, args: list[str]) -> None:
        session = await self.slot.session()
        if not args:
            llm = self._next_model or session.llm
            window = llm.context_window
            known = f" (context window {window:,} tokens)" if window else ""
            self.renderer.line(f"[model: {llm.model.provider}/{llm.model.model_id}{known}]", "note")
            return
        if len(args) != 2:
            self.renderer.line("usage: /model [PROVIDER MODEL_ID]", "error")
            return
        agent = await self._agent_of()
        try:
            client = agent.model_client(provider=args[0], model_id=args[1])
        except cfg.ConfigError as exc:
            self.renderer.line(str(exc), "error")
            return
        self._clients.append(client)
        self._next_model = client
        self.renderer.line(f"[model for the next task: {args[0]}/{args[1]}]", "note")

    async def _processes(self) -> None:
        environment = (await self.slot.session()).environment
        await environment.probe_background_command_services()
        commands = environment.list_background_commands()
        if not commands:
            self.renderer.line("[no background commands]", "note")
            return
        for command in commands:
            state = "running" if command.running else "exited"
            url = command.service_url or "-"
            shown = shorten(command.cmd, 60)
            self.renderer.line(f"  {command.process_id}  {state:<7}  {url}  {shown}")

    async def _kill(self, args: list[str]) -> None:
        if len(args) != 1:
            self.renderer.line("usage: /kill PROCESS_ID (/processes lists them)", "error")
            return
        environment = (await self.slot.session()).environment
        if await environment.kill_background_command(args[0]):
            self.renderer.line(f"[killed {args[0]}]", "note")
        else:
            self.renderer.line(f"[no background command {args[0]}; /processes lists them]", "error")


@final
class _ChatAsker:
    """The chat's ``ask``: the call named and previewed, then a deliberate answer (C5).

    One question at a time (a subagent's call may be due while its parent's is asked).
    ``question(text, guarded)`` asks one line (``None``: Ctrl-C or end of input, which
    deny); ``guarded`` is true for the approval question itself, false for the reason
    line that ``d`` asks for.
    """

    def __init__(self, chat: _Chat, question: Callable[[str, bool], Awaitable[str | None]]) -> None:
        self._chat = chat
        self._question = question
        self._one_at_a_time = trio.Lock()

    async def __call__(self, call: om.OmniMessage[om.ToolCallPayload]) -> Answer:
        chat = self._chat
        renderer = chat.renderer
        async with self._one_at_a_time:
            origin = call.origin or ()
            renderer.mark_asked(origin, call.payload.tool_call_id)
            workspace = (await chat.slot.session()).workspace_dir
            width = shutil.get_terminal_size().columns
            renderer.question_header(call, call_preview(call.payload, workspace, width))
            renderer.hold()  # nothing else between the call, its question and its answer
            try:
                answer = await self._answer()
                notes = self._allowed_notes(call) if answer.for_session else ()
                renderer.decided(origin, call.payload.tool_call_id, answer.verdict, notes)
            finally:
                renderer.release()
            return answer

    async def _answer(self) -> Answer:
        while True:
            line = await self._question(CHAT_PROMPT, True)
            if line is None:
                return Answer("deny")
            answer = read_chat_answer(line)
            if answer == "reason":
                reason = await self._question(REASON_PROMPT, False)
                return Answer("deny", reason=reason)
            if answer is not None:
                return answer
            self._chat.renderer.surface.line(REASK, "warn")  # past the hold: it is the question

    @staticmethod
    def _allowed_notes(call: om.OmniMessage[om.ToolCallPayload]) -> tuple[str]:
        added = AllowList().allow(call)  # what the session's list is about to take
        if added:
            shown = ", ".join(added)
            return (f"[allowed for this session: {shown}; /approve lists what is allowed]",)
        return (
            "[allowed once: this command cannot be allowed for the session "
            "(it runs commands inside it, or a part does not start with a command name)]",
        )


def _is_a_terminal(stream: Any) -> bool:
    try:
        return stream is not None and bool(stream.isatty())
    except ValueError:  # closed
        return False


_HEADER_SEPARATOR: Final = " · "


def _header(plan: _Plan, mode: ApprovalMode, sandbox: Any = None, width: int | None = None) -> str:
    """The header (C1.2): its parts on one line, or broken between parts to fit ``width``.

    A terminal would otherwise wrap it wherever the width ends, mid-word; a part
    longer than the width (a deep workspace) gets a line of its own. ``width``
    defaults to the terminal's; off a terminal the header is one line. ``sandbox``
    is the session's policy (spec/sandbox.md X1.4), shown when there is one.
    """
    parts = (
        "penguin chat",
        f"{plan.provider}/{plan.model_id}",
        str(plan.workspace),
        f"approve {mode}",
        *(() if sandbox is None else (f"sandbox {sandbox.describe()}",)),
        "/help for commands",
    )
    if width is None:
        if not _is_a_terminal(sys.stdout):
            return _HEADER_SEPARATOR.join(parts)  # no terminal to wrap it: one line
        width = shutil.get_terminal_size().columns
    room = width - 1
    lines: list[str] = []
    current = ""
    for part in parts:
        joined = f"{current}{_HEADER_SEPARATOR}{part}" if current else part
        if current and len(joined) > room:
            lines.append(current + _HEADER_SEPARATOR.rstrip())
            current = "  " + part
        else:
            current = joined
    lines.append(current)
    return "\n".join(lines)


def _history(plan: _Plan, color: bool) -> list[str]:
    """The resumed session's past, compactly (the trace files, oldest first)."""
    from penguin.trace import read_trace

    assert plan.resume is not None
    location = plan.resume
    shown: list[str] = []
    traces = location.path.parents[1]
    for path in trace_files(traces, location.session_id):
        for text, style in history_lines(read_trace(path)):
            shown.append(paint(text, style, color))
    if len(shown) > 60:
        shown = [paint(f"… ({len(shown) - 60} earlier lines)", "dim", color), *shown[-60:]]
    return [*shown, paint(f"[resumed session {location.session_id}]", "note", color)]


def _main(args: argparse.Namespace) -> int:
    mode = approval_mode_of(args)
    if mode is None:
        return 1
    if (args.provider is None) != (args.model_id is None):
        print("penguin chat: give --provider and --model-id together", file=sys.stderr)
        return 1
    try:
        paths = cfg.AgentPaths(args.root, args.project_id, args.agent_id)
        unwritable = unwritable_reason(paths)
        if unwritable is not None:
            print(f"penguin chat: {unwritable}", file=sys.stderr)
            return 1
        plan = _plan(args, paths, mode)
        args.sandbox_policy = _sandbox_of(args, paths, plan)
        if args.sandbox_policy is None:
            return 1
        color = use_color(sys.stdout)
        print(paint(_header(plan, plan.mode, args.sandbox_policy), "dim", color), flush=True)
        if plan.resume is not None:
            for line in _history(plan, color):
                print(line)
        if plan.mode_change is not None:
            print(paint(plan.mode_change, "warn", color), flush=True)
        chat = _Chat(args, paths, plan.mode, plan)
        return trio.run(chat.main)
    except (PenguinError, OSError) as exc:
        print(f"penguin chat: {_reason(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C before the chat routes it (while it starts)
        return 130


def _sandbox_of(args: argparse.Namespace, paths: cfg.AgentPaths, plan: _Plan) -> Any:
    """The session's sandbox policy (X1.3; a resumed one keeps its own, C5.5)."""
    project = cfg.load_project_config(paths.project_config).sandbox
    if plan.resume is None:
        return policy_for(args, project, default="workspace-write", prog="penguin chat")
    meta = _session_meta(plan.resume.path) or {}
    return resumed_policy(args, meta.get("sandbox"), project, prog="penguin chat")


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
