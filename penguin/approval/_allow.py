"""A session's allow-list and a person's answer beyond a bare verdict (chat.md C5.4).

When a person answers "allow this tool for the rest of the session" (``a`` in
``penguin chat``), later calls of that tool are allowed without asking. This module
owns what that grants, one :class:`AllowList` per session, and :class:`Answer`, the
answer an ``ask`` may give instead of a plain verdict (allow for the session; deny
with a reason).

What an entry grants:

- For most tools, the tool by name: ``read_file`` allowed once for the session is
  allowed from then on, whatever its arguments.
- For the tools whose text a shell runs (``exec_command``'s ``cmd`` and
  ``input_command``'s ``chars``, :data:`~penguin.approval.EVALUATED_ARGUMENTS`), never
  the tool: the *first word of each segment* of the command, the segments being what
  the command policy reads (:func:`~penguin.approval.command_segments`: the text
  between ``;``, ``&``, ``|`` and newlines). A later command is allowed without asking
  only when every one of its segments starts with an allowed word: ``a`` on
  ``pytest -x`` lets ``pytest -q`` through and asks about ``pytest; echo x > y``.
- A command that runs commands the segments cannot show — a command substitution
  (``$(...)``, backquotes) or a process substitution (``<(...)``, ``>(...)``) — is
  never allowed by the list and adds nothing to it; nor does a segment whose first
  word is not a plain command word (``X=1``, ``(cd``, ``"$CMD"``): such calls are
  asked every time.

The command policy still comes first: the approver that reads the list is wrapped by
:func:`~penguin.approval.with_command_policy` in ``Session.run``, so a forbidden
command is forbidden whatever the list says. Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
import re
from typing import Final, Literal, final

import attrs

from penguin import protocol as om

from ._policy import EVALUATED_ARGUMENTS, command_of, command_segments

__all__ = ["AllowList", "Answer", "command_words"]

_NESTED: Final = ("$(", "`", "<(", ">(")
"""Where a command runs commands of its own that its segments do not show."""
_PLAIN_WORD: Final = re.compile(r"[A-Za-z0-9_./+][A-Za-z0-9_./+:@-]*")
"""A command word that names a program: no quotes, ``=``, ``$``, globs or brackets."""


@final
@attrs.frozen
class Answer:
    """A person's answer to an approval question when a bare verdict says too little.

    An ``ask`` (of :func:`penguin.approval.approver`) may return one instead of
    ``"allow"``/``"deny"``: ``Answer("allow", for_session=True)`` allows this call and
    puts it on the session's :class:`AllowList`; ``Answer("deny", reason=...)`` denies
    it and the model's denial output carries the reason
    (:func:`~penguin.approval.denial_output`).
    """

    verdict: Literal["allow", "deny"] = attrs.field(
        validator=attrs.validators.in_(("allow", "deny"))
    )
    for_session: bool = False
    """``allow`` only: allow what this call is (see :class:`AllowList`) for the session."""
    reason: str | None = None
    """``deny`` only: why, in the person's words (``None`` or blank: no reason)."""


def command_words(command: str) -> tuple[str, ...] | None:
    """The first word of each segment of shell text ``command``, or ``None``.

    ``None`` when the command cannot be allowed by a list: it has no segment, nests
    commands (``$(``, a backquote, ``<(``, ``>(``), or a segment starts with something
    that is not a plain command word. ``pytest -x; git status`` gives
    ``("pytest", "git")``.
    """
    if any(marker in command for marker in _NESTED):
        return None
    words: list[str] = []
    for segment in command_segments(command):
        first = segment.split(" ", 1)[0]
        if _PLAIN_WORD.fullmatch(first) is None:
            return None
        words.append(first)
    return tuple(words) if words else None


@final
class AllowList:
    """What one session allows without asking: tool names, and command words per shell tool.

    Filled by :meth:`allow` (the approver does it for an ``Answer(for_session=True)``),
    read by :meth:`allows`; :meth:`entries` lists it for people (``/approve``, the
    server's session JSON). Not thread-safe; one session's approvals are sequential.
    """

    def __init__(self) -> None:
        self._tools: set[str] = set()
        self._words: dict[str, set[str]] = {}

    @property
    def tools(self) -> frozenset[str]:
        """The tools allowed by name."""
        return frozenset(self._tools)

    def command_words(self, tool: str) -> frozenset[str]:
        """The command words allowed for the shell tool ``tool`` (``exec_command``...)."""
        return frozenset(self._words.get(tool, ()))

    def allow(self, call: om.OmniMessage[om.ToolCallPayload]) -> tuple[str, ...]:
        """Allow what ``call`` is for the rest of the session; the entries it added.

        ``()`` when nothing could be added (a shell command the list cannot hold, see
        :func:`command_words`) or everything was allowed already.
        """
        name = call.payload.name
        if name not in EVALUATED_ARGUMENTS:
            if name in self._tools:
                return ()
            self._tools.add(name)
            return (name,)
        command = command_of(call)
        words = command_words(command) if command is not None else None
        if words is None:
            return ()
        allowed = self._words.setdefault(name, set())
        added = tuple(dict.fromkeys(word for word in words if word not in allowed))
        allowed.update(added)
        return tuple(_entry(name, word) for word in added)

    def allows(self, call: om.OmniMessage[om.ToolCallPayload]) -> bool:
        """Whether ``call`` is allowed without asking."""
        name = call.payload.name
        if name not in EVALUATED_ARGUMENTS:
            return name in self._tools
        allowed = self._words.get(name)
        if not allowed:
            return False
        command = command_of(call)
        words = command_words(command) if command is not None else None
        return words is not None and all(word in allowed for word in words)

    def entries(self) -> tuple[str, ...]:
        """Every entry, sorted: ``read_file``, ``exec_command pytest`` ..."""
        shown = [*self._tools]
        for tool, words in self._words.items():
            shown.extend(_entry(tool, word) for word in words)
        return tuple(sorted(shown))

    def __len__(self) -> int:
        return len(self._tools) + sum(len(words) for words in self._words.values())

    def __repr__(self) -> str:
        return f"AllowList({json.dumps(list(self.entries()))})"


def _entry(tool: str, word: str) -> str:
    return f"{tool} {word}"
