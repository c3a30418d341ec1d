"""How the command line reacts to signals while work is in flight.

Ctrl-C (SIGINT) first interrupts the work gracefully — the tool is told, the Task
closes out, the next run re-sends what was cut off — and a second Ctrl-C stops at
once. SIGTERM and SIGHUP stop at once. "At once" is still structured: cancelling
the block unwinds the Environment, which ends every process it started, so a
terminated ``penguin`` leaves nothing behind (unlike SIGKILL, which nothing can
catch).
"""

from __future__ import annotations

import signal

import trio

__all__ = ["interrupt_on_signals"]


async def interrupt_on_signals(interrupt: trio.Event, hard_stop: trio.CancelScope) -> None:
    """Set ``interrupt`` on the first SIGINT; cancel ``hard_stop`` on the next or on TERM/HUP."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
        async for signum in signals:
            if signum == signal.SIGINT and not interrupt.is_set():
                interrupt.set()
                continue
            hard_stop.cancel()
            return
