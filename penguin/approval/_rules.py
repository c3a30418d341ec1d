"""One command-policy rule: a name and a Python regular expression, compiled once.

This module owns :class:`PolicyRule` and nothing else; which commands a rule is
tested against, and in which spellings, is :mod:`._policy`'s business.

Invariant: a :class:`PolicyRule` that exists has a pattern that compiles, so
matching never raises. A pattern that does not compile raises
:class:`~penguin.approval.PolicyPatternError` at construction.
"""

from __future__ import annotations

import re
from typing import final

import attrs

from ._errors import PolicyPatternError

__all__ = ["PolicyRule"]


@final
@attrs.frozen
class PolicyRule:
    """A named regex; a command is forbidden when the pattern is found anywhere in it.

    ``pattern`` is a Python :mod:`re` pattern, searched (``re.search``, not a full
    match) in each tested spelling of the command; put ``(?i)`` at its start to ignore
    case. A rule with ``enabled=False`` never matches. ``description`` says in plain
    words what the rule forbids (shown by ``penguin config policy list``).
    """

    name: str
    pattern: str
    enabled: bool = True
    description: str = ""
    _regex: re.Pattern[str] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        try:
            regex = re.compile(self.pattern)
        except (re.error, OverflowError, RecursionError) as error:
            raise PolicyPatternError(self.name, self.pattern, str(error)) from None
        object.__setattr__(self, "_regex", regex)

    def search(self, command: str) -> bool:
        """Whether the pattern occurs in ``command`` (regardless of ``enabled``)."""
        return self._regex.search(command) is not None
