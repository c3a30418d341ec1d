"""The interactive approval prompt's words, without the terminal (reference 5.6).

This module owns what the prompt says and how an answer line is read; reading the
line (and treating Ctrl-C while prompting as a ``deny``) is the CLI's thin shell
around it. Keeping the words here means the CLI, the tests and any other front end
agree on them.

Invariant: reading an answer never raises and never returns ``forbidden`` — only
the command policy forbids.
"""

from __future__ import annotations

from typing import Final

from penguin import protocol as om

__all__ = [
    "APPROVED_LABEL",
    "DENIED_LABEL",
    "FORBIDDEN_LABEL",
    "PROMPT",
    "parse_prompt_answer",
    "verdict_label",
]

PROMPT: Final = "? Approve this tool call? [Y/n] "
"""The question, printed without a newline; the answer is the rest of the line."""

APPROVED_LABEL: Final = "✓ [approved]"
DENIED_LABEL: Final = "× [denied]"
FORBIDDEN_LABEL: Final = "× [forbidden by policy]"

_LABELS: Final[dict[om.ApprovalVerdict, str]] = {
    "allow": APPROVED_LABEL,
    "deny": DENIED_LABEL,
    "forbidden": FORBIDDEN_LABEL,
}
_NO: Final = frozenset({"n", "no"})


def parse_prompt_answer(line: str | None) -> om.ApprovalVerdict:
    """The verdict of one answer line; ``None`` means standard input ended (EOF).

    ``n``/``no`` deny (trimmed, any case); end of input denies; everything else —
    ``y``, ``yes``, a bare Enter, and any other text — allows, as the ``[Y/n]``
    default promises.
    """
    if line is None:
        return "deny"
    return "deny" if line.strip().lower() in _NO else "allow"


def verdict_label(verdict: om.ApprovalVerdict) -> str:
    """How a decision is shown to the user.

    ``✓ [approved]``, ``× [denied]`` or ``× [forbidden by policy]``.
    """
    return _LABELS[verdict]
