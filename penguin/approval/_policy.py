r"""The command policy: which tool calls it looks at, how it reads them, how it is configured.

Reference 5.5. This module is pure: it turns a ``tool_call`` into the command text the
policy evaluates (:func:`command_of`), that text into the spellings that are tested
(:func:`command_variants`), and tests them against an ordered list of
:class:`~penguin.approval.PolicyRule`. Answering ``forbidden`` and consulting the
wrapped approver is :mod:`._consult`'s job; the factory rules live in :mod:`._factory`.

What is evaluated, and what deliberately is not:

- only ``exec_command`` (its ``cmd``) and ``input_command`` (its ``chars``, which a
  shell in the command session would run just the same);
- not other tools — ``write_file`` writing a script, MCP tools — and not calls whose
  arguments are not a JSON object, whose argument is missing or not a string, whose
  ``chars`` is exactly Ctrl-C (U+0003), or whose command is empty or only whitespace.
  Such calls go to the wrapped approver.
- Nothing is expanded or evaluated. ``$(echo rm) -rf /``, ``$CMD``, ``eval "$x"``, a
  script file or text piped into ``sh`` are runtime-computed and never matched: the
  policy is a net for the plain spellings of well-known disasters, not a sandbox.

The tested spellings are the *literal* (whitespace runs collapsed to one space, ends
trimmed) and, when different, the *unquoted* form of the literal: every backslash
escape ``\x`` replaced by ``x``, then every ``'`` and ``"`` removed (and whitespace
collapsed again). A rule matches
if its pattern is found in either; the first enabled rule that matches wins.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, final

import attrs

from penguin import protocol as om
from penguin._log import warn

from ._errors import PolicyPatternError
from ._factory import FACTORY_RULES
from ._rules import PolicyRule

__all__ = [
    "EVALUATED_ARGUMENTS",
    "CommandPolicy",
    "command_of",
    "command_segments",
    "command_variants",
]

EVALUATED_ARGUMENTS: Final[Mapping[str, str]] = MappingProxyType(
    {"exec_command": "cmd", "input_command": "chars"}
)
"""The tools the policy evaluates, and the argument that holds the command text."""

_CTRL_C: Final = "\x03"
_WHITESPACE_RUN: Final = re.compile(r"\s+")
_BACKSLASH_ESCAPE: Final = re.compile(r"\\(.)", re.DOTALL)
_SEGMENT_END: Final = re.compile(r"[;&|\n\r]")


def command_of(call: om.OmniMessage[om.ToolCallPayload]) -> str | None:
    """The command text of ``call`` that the policy evaluates, or ``None`` when it does not.

    ``None`` for every tool but ``exec_command``/``input_command``, for arguments
    that are not JSON or not a JSON object, for a missing or non-string argument,
    for ``chars`` that is exactly Ctrl-C, and for an empty or whitespace-only command.
    """
    key = EVALUATED_ARGUMENTS.get(call.payload.name)
    if key is None:
        return None
    try:
        arguments: object = json.loads(call.payload.arguments)
    except (ValueError, RecursionError):
        return None
    if not isinstance(arguments, dict):
        return None
    command = arguments.get(key)
    if not isinstance(command, str) or command == _CTRL_C or not command.strip():
        return None
    return command


def command_variants(command: str) -> tuple[str, ...]:
    r"""The spellings of ``command`` that rules are tested against: literal, then unquoted.

    The literal collapses every whitespace run (newlines and tabs included) to one
    space and trims the ends. The unquoted form is derived from the literal: each
    backslash escape ``\x`` becomes ``x`` (left to right, so ``\\`` is one
    backslash), then every single and double quote is removed, and the whitespace
    runs this leaves (``a " " b``) are collapsed and trimmed again. It is included only
    when it differs from the literal and is not empty. An empty command has no
    spellings. For example ``sudo  rm -rf "/"`` is tested as ``sudo rm -rf "/"`` and
    as ``sudo rm -rf /``.
    """
    literal = _WHITESPACE_RUN.sub(" ", command).strip()
    if not literal:
        return ()
    unquoted = _BACKSLASH_ESCAPE.sub(r"\1", literal).replace("'", "").replace('"', "")
    unquoted = _WHITESPACE_RUN.sub(" ", unquoted).strip()  # `a " " b`: one space again
    if unquoted and unquoted != literal:
        return (literal, unquoted)
    return (literal,)


def command_segments(command: str) -> tuple[str, ...]:
    """The segments of raw shell text ``command``, as the factory rules read them.

    A segment is the text between ``;``, ``&`` and ``|`` (so ``&&`` and ``||`` end
    one too, leaving an empty piece that is dropped); parentheses do not end one.
    Newlines end a segment here as well — the shell starts a new command there, and
    the rules, which collapse whitespace, reach across it only because a rule asks for
    more than a first word. Each segment has its whitespace runs collapsed and its ends
    trimmed; empty ones are left out. ``pytest -x && echo ok | tee log`` is
    ``("pytest -x", "echo ok", "tee log")``.
    """
    pieces = _SEGMENT_END.split(command)
    segments = (_WHITESPACE_RUN.sub(" ", piece).strip() for piece in pieces)
    return tuple(segment for segment in segments if segment)


def _rule_tuple(rules: Iterable[PolicyRule]) -> tuple[PolicyRule, ...]:
    return tuple(rules)


@final
@attrs.frozen
class CommandPolicy:
    """An on/off switch and an ordered tuple of rules; ``CommandPolicy()`` is the factory policy.

    ``CommandPolicy(enabled=False)`` matches nothing; ``CommandPolicy(rules=())``
    neither. Build one from the project configuration with :meth:`from_config`.
    """

    enabled: bool = True
    rules: tuple[PolicyRule, ...] = attrs.field(default=FACTORY_RULES, converter=_rule_tuple)

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> CommandPolicy:
        r"""The policy described by a ``[command_policy]`` table (``None``: no table).

        Keys, as written in ``.project_config.toml``::

            [command_policy]
            enabled = true                 # false: the policy is off
            [[command_policy.rules]]       # absent: the factory rules; rules = []: none
            name = "no-force-push"
            pattern = 'git push\s.*(--force|-f)\b'
            description = "no force pushes"   # optional; kept on the PolicyRule
            enabled = true                 # false: this rule is skipped

        Semantics: ``None`` or a table without ``rules`` gives the factory rules;
        ``enabled = false`` turns the policy off; ``rules = []`` leaves no rules; a
        rule with ``enabled = false`` is skipped. Configuration mistakes never make
        loading fail, but they fail safe and each one is reported on the ``penguin``
        logger: a rule whose pattern does not compile, or that lacks a string
        ``name`` or ``pattern``, is skipped with a warning naming it; an ``enabled``
        that is not a boolean is read as ``true``; a ``rules`` that is not a list
        keeps the factory rules; a ``description`` that is not a string is dropped.
        Unknown keys are ignored. A table seeded with the factory rules gives exactly
        ``CommandPolicy()``.
        """
        if config is None:
            return cls()
        enabled = config.get("enabled", True)
        if enabled is False:
            return cls(enabled=False, rules=())
        if enabled is not True:
            warn(
                f"[penguin] command_policy.enabled must be true or false, not {enabled!r}; "
                "keeping the command policy on."
            )
        raw_rules = config.get("rules")
        if raw_rules is None:
            return cls()
        if isinstance(raw_rules, str | bytes) or not isinstance(raw_rules, Sequence):
            warn(
                "[penguin] command_policy.rules must be a list of rules; "
                "using the factory rules instead."
            )
            return cls()
        return cls(rules=_parse_rules(raw_rules))

    def match(self, call: om.OmniMessage[om.ToolCallPayload]) -> PolicyRule | None:
        """The first enabled rule that forbids ``call``, or ``None``.

        ``None`` also for every call the policy does not evaluate (see
        :func:`command_of`) and whenever the policy is off.
        """
        if not self.enabled:
            return None
        command = command_of(call)
        return None if command is None else self.match_command(command)

    def match_command(self, command: str) -> PolicyRule | None:
        """The first enabled rule found in a spelling of raw shell text ``command``, or ``None``.

        The same test as :meth:`match`, for text that is not wrapped in a tool call.
        """
        if not self.enabled:
            return None
        variants = command_variants(command)
        for rule in self.rules:
            if rule.enabled and any(rule.search(variant) for variant in variants):
                return rule
        return None


def _parse_rules(entries: Iterable[object]) -> tuple[PolicyRule, ...]:
    rules: list[PolicyRule] = []
    for number, entry in enumerate(entries, start=1):
        if not isinstance(entry, Mapping):
            warn(
                f"[penguin] command policy rule #{number} skipped: "
                'expected a table with "name" and "pattern".'
            )
            continue
        name = entry.get("name")
        label = f'"{name}"' if isinstance(name, str) and name else f"#{number}"
        pattern = entry.get("pattern")
        if not isinstance(name, str) or not name or not isinstance(pattern, str):
            warn(
                f"[penguin] command policy rule {label} skipped: "
                '"name" and "pattern" must both be strings.'
            )
            continue
        enabled = entry.get("enabled", True)
        if enabled is False:
            continue
        if enabled is not True:
            warn(
                f"[penguin] command policy rule {label}: enabled must be true or false, "
                f"not {enabled!r}; keeping the rule on."
            )
        description = entry.get("description", "")
        if not isinstance(description, str):
            warn(
                f"[penguin] command policy rule {label}: description must be a string, "
                f"not {description!r}; ignoring it."
            )
            description = ""
        try:
            rules.append(PolicyRule(name, pattern, description=description))
        except PolicyPatternError as error:
            warn(
                f"[penguin] command policy rule {label} skipped: its pattern is not a valid "
                f"Python regular expression ({error.reason})."
            )
    return tuple(rules)
