"""Argument rules and the failure shape shared by the builtin tools (reference 3.0).

Tools never read their JSON Schema: each coerces its own arguments with these
helpers, so the model gets the same leniency and the same messages everywhere. A
failure is one text delta and a returned ``failed`` (3.0.2): a tool calls :func:`fail`,
which raises, and ``BuiltinTool.execute`` (``_base``) is the one place that turns it
into that shape — so no check has to hand a result back through its callers.
"""

from __future__ import annotations

import math
from typing import Any, Final, NoReturn, final

from penguin._errors import PenguinError

__all__ = [
    "MIN_YIELD_TIME_MS",
    "CallFailed",
    "clamp_yield_time_ms",
    "fail",
    "finite_number",
    "required_string",
]

MIN_YIELD_TIME_MS: Final = 250
"""The shortest collect window a tool accepts."""

_TIMEOUT_MARGIN_MS: Final = 1000
"""How long before the Environment's timeout a window must end, to report in time."""


def finite_number(value: object) -> float | None:
    """``value`` as a float when it is a finite JSON number (booleans are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def clamp_yield_time_ms(value: object, default: int, timeout_ms: int) -> float:
    """The collect window of exec_command, input_command, run_subagent, input_subagent.

    Reference 3.0.3: a value that is not a finite number gives ``default`` (a numeric
    string too); the window is at least 250 ms; when the tool has a timeout, the
    window ends a second before it (but never under 250 ms), so the tool can report
    before the Environment times the call out.
    """
    number = finite_number(value)
    window = max(float(default) if number is None else number, MIN_YIELD_TIME_MS)
    if timeout_ms > 0:
        window = min(window, max(timeout_ms - _TIMEOUT_MARGIN_MS, MIN_YIELD_TIME_MS))
    return window


def required_string(args: dict[str, Any], key: str) -> str | None:
    """``args[key]`` when it is a non-empty string, else ``None``."""
    value = args.get(key)
    return value if isinstance(value, str) and value else None


@final
class _CallFailed(PenguinError):
    """A builtin's check failed: the call ends with ``text`` as a delta, stop ``failed``.

    Never leaves the tool: ``BuiltinTool.execute`` catches it. ``note`` follows the
    output, as a returned :class:`~penguin.environment.ToolResult`'s would.
    """

    def __init__(self, text: str, note: str | None = None) -> None:
        super().__init__(text)
        self.text = text
        self.note = note


CallFailed = _CallFailed
"""The failure :func:`fail` raises, for the one ``except`` that catches it."""


def fail(text: str, *, note: str | None = None) -> NoReturn:
    """End the call the way every builtin fails: ``text`` as one delta, stop ``failed``."""
    raise _CallFailed(text, note)
