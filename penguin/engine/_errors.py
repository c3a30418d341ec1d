"""The engine's exceptions.

::

    PenguinError           the root of every penguin exception (penguin._errors)
     └── EngineBusyError   (also RuntimeError) a run (or a compaction) is already live
                           on this session

Nothing the model, a tool or the network does raises out of a run: those outcomes
are messages with a ``stop_reason`` and the run's :class:`~penguin.engine.RunResult`.
"""

from __future__ import annotations

from typing import final

from penguin._errors import PenguinError

__all__ = ["EngineBusyError"]


@final
class EngineBusyError(PenguinError, RuntimeError):
    """A session runs one Task at a time: steer the live one, or wait for it to end."""
