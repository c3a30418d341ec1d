"""The batch's numeric and model options, and the one rule each of them follows.

:func:`check_options` is the only place a batch's ``concurrency``, ``workers``,
``max_turns``, ``timeout_s`` and the ``provider`` + ``model_id`` pair are checked;
:func:`~penguin.batch.run_batch`, :func:`~penguin.batch.run_tasks` and ``penguin
batch`` all ask it. Its messages are the library's: they name the option as the
Python API spells it (``max_turns``), never a command-line flag, and the
:class:`~penguin.batch.BatchOptionError` carries the ``option`` and the ``value`` so
that a surface can say it in its own words. (The approval mode's rule is
:func:`~penguin.batch.unattended_mode`; a task line's fields are checked where the
task file is read.)
"""

from __future__ import annotations

from ._errors import BatchOptionError

__all__ = ["check_options"]


def check_options(
    *,
    concurrency: int | None = None,
    workers: int | None = None,
    max_turns: int | None = None,
    timeout_s: float | None = None,
    provider: str | None = None,
    model_id: str | None = None,
) -> None:
    """:class:`BatchOptionError` for the first option that a batch cannot run with.

    ``concurrency``, ``workers`` and ``max_turns`` must be at least 1, ``timeout_s``
    more than 0 (``None`` is "not given" for each), and ``provider`` and
    ``model_id`` come together or not at all.
    """
    for option, value in (
        ("concurrency", concurrency),
        ("workers", workers),
        ("max_turns", max_turns),
    ):
        if value is not None and value < 1:
            raise BatchOptionError(option, f"{option} must be at least 1, got {value}", value)
    if timeout_s is not None and not timeout_s > 0:
        raise BatchOptionError(
            "timeout_s", f"timeout_s must be more than 0, got {timeout_s}", timeout_s
        )
    if (provider is None) != (model_id is None):
        raise BatchOptionError("provider", "give provider and model_id together", provider)
