"""How the command line reacts to signals and asks questions while work is in flight.

Ctrl-C (SIGINT) first interrupts the work gracefully — the tool is told, the Task
closes out, the next run re-sends what was cut off — and a second Ctrl-C stops at
once. While an approval prompt waits for an answer, Ctrl-C ends the prompt (no
decision is recorded: the call never runs) and interrupts the Task the same way, as
docs/cli.md promises (exit status 130). SIGTERM and SIGHUP stop at once. "At once" is still
structured: cancelling the block unwinds the Environment, which ends every process
it started, so a terminated ``penguin`` leaves nothing behind (unlike SIGKILL, which
nothing can catch).

Standard input is read by one background reader, a line at a time, and only once a
first prompt asks for it: a prompt that was answered by Ctrl-C leaves no reader
behind to swallow the answer to the next one.
"""

from __future__ import annotations

import contextlib
import math
import signal
import sys
import termios
from typing import final

import trio

__all__ = ["Controls"]


@final
class Controls:
    """The interrupt event, the hard stop, and stdin prompts of one command."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self.interrupt = trio.Event()
        """Set by the first Ctrl-C (also one at a prompt): pass it as ``interrupt=``."""
        self._nursery = nursery
        self._prompt_cancelled: trio.Event | None = None
        self._lines: trio.MemoryReceiveChannel[str] | None = None

    async def watch_signals(self) -> None:
        """Route SIGINT, SIGTERM and SIGHUP for as long as the command runs."""
        watched = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        with trio.open_signal_receiver(*watched) as signals:
            async for signum in signals:
                if signum == signal.SIGINT:
                    if self.cancel_prompt():
                        self.interrupt.set()  # the person meant the Task, not just the call
                        continue
                    if not self.interrupt.is_set():
                        self.interrupt.set()
                        continue
                self._nursery.cancel_scope.cancel()
                return

    def cancel_prompt(self) -> bool:
        """Answer the prompt waiting in :meth:`read_line` with ``None``; False if none waits."""
        prompt = self._prompt_cancelled
        if prompt is None or prompt.is_set():
            return False
        prompt.set()
        return True

    async def read_line(self) -> str | None:
        """The next line of stdin; ``None`` at end of input or when Ctrl-C answered instead."""
        if self._lines is None:
            send, self._lines = trio.open_memory_channel[str](math.inf)
            self._nursery.start_soon(_read_stdin, send)
        cancelled = self._prompt_cancelled = trio.Event()
        answer: list[str | None] = []
        try:
            async with trio.open_nursery() as race:

                async def take_line() -> None:
                    assert self._lines is not None
                    try:
                        answer.append(await self._lines.receive())
                    except trio.EndOfChannel:
                        answer.append(None)
                    race.cancel_scope.cancel()

                async def take_ctrl_c() -> None:
                    await cancelled.wait()
                    race.cancel_scope.cancel()

                race.start_soon(take_line)
                race.start_soon(take_ctrl_c)
        finally:
            self._prompt_cancelled = None
        return answer[0] if answer else None

    def discard_typeahead(self) -> None:
        """Drop what was typed before now (a question on a terminal takes no type-ahead).

        Both the lines read and not yet taken and what waits in the terminal's input
        queue (chat.md C5.1). Call it only when standard input is a terminal: piped
        answers are never dropped.
        """
        if self._lines is not None:
            with contextlib.suppress(trio.WouldBlock, trio.EndOfChannel):
                while True:
                    self._lines.receive_nowait()
        # termios.error is not an OSError: a terminal hung up (EIO) raises it.
        with contextlib.suppress(termios.error, OSError, ValueError, AttributeError):
            termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)


async def _read_stdin(send: trio.MemorySendChannel[str]) -> None:
    with send:
        while True:
            line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            if not line:
                return
            await send.send(line)
