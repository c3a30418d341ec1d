"""The interactive approval prompt's words, without the terminal (reference 5.6).

This module owns what the prompt says and how an answer line is read; reading the
line (and treating Ctrl-C while prompting as a ``deny``) is the CLI's thin shell
around it. Keeping the words here means the CLI, the tests and any other front end
agree on them.

Two readings of an answer line:

- :func:`parse_prompt_answer` is the reference's (5.6): ``n``/``no`` deny and
  everything else allows. It is kept for callers that follow the reference to the letter.
- :func:`read_run_answer` is what ``penguin run`` asks with (chat.md C5.4): the same
  ``[Y/n]`` meanings for ``y``/``yes``/``n``/``no``/Enter/end of input, and ``None``
  — ask again — for any other text, so ``nah`` or ``stop`` never approves.
- :func:`read_chat_answer` is ``penguin chat``'s ``[Y/a/n]`` (C5.4): ``y`` allow once,
  ``a`` allow for the session, ``n`` deny, ``n REASON`` deny with a reason, ``d``
  deny and ask for the reason on the next line, Enter the default; ``None`` for
  anything else (ask again with :data:`REASK`).

Invariant: reading an answer never raises and never returns ``forbidden`` — only
the command policy forbids.
"""

from __future__ import annotations

from typing import Final, Literal

from penguin import protocol as om

from ._allow import Answer

__all__ = [
    "APPROVED_LABEL",
    "CHAT_PROMPT",
    "DENIED_LABEL",
    "FORBIDDEN_LABEL",
    "PROMPT",
    "REASK",
    "REASON_PROMPT",
    "parse_prompt_answer",
    "read_chat_answer",
    "read_run_answer",
    "verdict_label",
]

PROMPT: Final = "? Approve this tool call? [Y/n] "
"""The question, printed without a newline; the answer is the rest of the line."""

CHAT_PROMPT: Final = "? Approve this tool call? [Y/a/n] "
"""``penguin chat``'s question (C5.4): y allow once, a allow for the session, n deny."""
REASK: Final = "answer y, a or n"
"""What ``penguin chat`` says before asking again after an answer it does not know."""
REASON_PROMPT: Final = "? Why (the model is told; Enter for no reason): "
"""The line ``penguin chat`` asks after ``d``."""

APPROVED_LABEL: Final = "✓ [approved]"
DENIED_LABEL: Final = "× [denied]"
FORBIDDEN_LABEL: Final = "× [forbidden by policy]"

_LABELS: Final[dict[om.ApprovalVerdict, str]] = {
    "allow": APPROVED_LABEL,
    "deny": DENIED_LABEL,
    "forbidden": FORBIDDEN_LABEL,
}
_NO: Final = frozenset({"n", "no"})
_YES: Final = frozenset({"", "y", "yes"})


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


def read_run_answer(line: str | None) -> om.ApprovalVerdict | None:
    """``penguin run``'s reading of an answer line; ``None``: not an answer, ask again.

    ``y``/``yes``/a bare Enter allow and ``n``/``no`` deny (trimmed, any case); end of
    input (``None``) denies.
    """
    if line is None:
        return "deny"
    answer = line.strip().lower()
    if answer in _YES:
        return "allow"
    if answer in _NO:
        return "deny"
    return None


def read_chat_answer(
    line: str, default: Literal["allow", "deny"] = "allow"
) -> Answer | Literal["reason"] | None:
    """``penguin chat``'s reading of an answer line (C5.4); ``None``: ask again.

    ``y``/``yes`` allow once; ``a`` allow for the session; ``n``/``no`` deny;
    ``n REASON`` (or ``no REASON``) deny with that reason; ``d`` (or ``deny``) alone
    is ``"reason"``: ask for the reason on the next line; a bare Enter is ``default``.
    Letter case and the spaces around the answer do not matter.
    """
    text = line.strip()
    first, _, rest = text.partition(" ")
    word = first.lower()
    rest = rest.strip()
    if not text:
        return Answer(default)
    if word in ("y", "yes") and not rest:
        return Answer("allow")
    if word == "a" and not rest:
        return Answer("allow", for_session=True)
    if word in _NO:
        return Answer("deny", reason=rest or None)
    if word in ("d", "deny") and not rest:
        return "reason"
    return None
