r"""The ``[command_policy]`` table of ``.project_config.toml``, as read.

The table, as penguin seeds it in a new project (one ``[[command_policy.rules]]``
per factory rule)::

    [command_policy]
    enabled = true

    [[command_policy.rules]]
    name = "rm-recursive-force"
    pattern = '(?:^|(?<=[;&|]))...'
    description = "rm with both a recursive and a force flag (rm -rf ...), whatever the target"
    enabled = true

Owns: :class:`PolicyRuleConfig` (a rule as the file holds it: text, not a compiled
regex), the order its keys are written in (:data:`POLICY_RULE_KEYS`) and reading the
rules a table lists (:func:`policy_rules_of`). Semantics kept from reference 5.5: no
``rules`` key means the default (factory) rules; ``rules = []`` means none.

Does not own editing the table in the file (``_project_edits``: the rules as TOML
tables, the factory rules written out before an edit, the atomic rewrite) nor what a
rule means, whether its pattern compiles or which rules are the factory set: that is
``penguin.approval``, which this layer must not import, so the caller hands the rules
an absent ``rules`` key means (``default_rules``) in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, final

import attrs

from ._errors import ConfigValueError

__all__ = ["POLICY_RULE_KEYS", "PolicyRuleConfig", "policy_rules_of"]

POLICY_RULE_KEYS: Final = ("name", "pattern", "description", "enabled")
"""The keys of a ``[[command_policy.rules]]`` table, in the order penguin writes them."""


def _text(name: str) -> Any:
    def check(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
        if not isinstance(value, str):
            raise ConfigValueError(f"a policy rule's {name} must be a string, not {value!r}")

    return check


@final
@attrs.frozen
class PolicyRuleConfig:
    """One ``[[command_policy.rules]]`` entry, as written in the file.

    ``name`` identifies the rule (non-blank); ``pattern`` is the text of a Python
    regular expression, not checked here (``penguin.approval.PolicyRule`` compiles
    it); ``description`` says in words what it forbids; ``enabled = false`` keeps the
    rule in the file without applying it. Construction raises :class:`ValueError`
    for a blank name or a value that is not a string.
    """

    name: str = attrs.field(validator=_text("name"))
    pattern: str = attrs.field(validator=_text("pattern"))
    description: str = attrs.field(default="", validator=_text("description"))
    enabled: bool = True

    def __attrs_post_init__(self) -> None:
        if not self.name.strip():
            raise ConfigValueError("a policy rule needs a non-blank name")
        if not isinstance(self.enabled, bool):
            raise ConfigValueError(
                f"a policy rule's enabled must be true or false, not {self.enabled!r}"
            )


def policy_rules_of(table: Mapping[str, Any] | None) -> tuple[PolicyRuleConfig, ...] | None:
    """The rules a ``[command_policy]`` table lists, in order; ``None`` when it lists none.

    ``None`` (the default rules apply) when there is no table, no ``rules`` key, or a
    ``rules`` that is not an array; ``()`` for ``rules = []``. Entries the policy
    would skip as malformed (not a table, no string ``name`` or ``pattern``) are left
    out; an ``enabled`` that is not a boolean reads as true and a ``description``
    that is not a string as empty, as the policy reads them.
    """
    if table is None:
        return None
    rules = table.get("rules")
    if isinstance(rules, str | bytes) or not isinstance(rules, Sequence):
        return None
    found = []
    for entry in rules:
        if not isinstance(entry, Mapping):
            continue
        name, pattern = entry.get("name"), entry.get("pattern")
        if not isinstance(name, str) or not name.strip() or not isinstance(pattern, str):
            continue
        description = entry.get("description", "")
        found.append(
            PolicyRuleConfig(
                name,
                pattern,
                description if isinstance(description, str) else "",
                entry.get("enabled", True) is not False,
            )
        )
    return tuple(found)
