r"""The ``[command_policy]`` table of ``.project_config.toml`` as it is stored.

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
regex), reading the rules a table lists (:func:`policy_rules_of`), and the tomlkit
side of editing them in a document — writing rules as TOML tables with their
patterns in literal strings, finding the rules array and materialising the rules an
absent ``rules`` key stands for, so that an edit is visible in the file. The
file-level functions (which read, edit and atomically write the file) are in
:mod:`._project`.

Does not own what a rule means, whether its pattern compiles or which rules are the
factory set: that is ``penguin.approval``, which this layer must not import, so the
caller hands the rules an absent ``rules`` key means (``default_rules``) in.
Semantics kept from reference 5.5: no ``rules`` key means the default (factory) rules;
``rules = []`` means none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, final

import attrs
import tomlkit
from tomlkit.items import AoT, Array, InlineTable, Item, Table
from tomlkit.toml_document import TOMLDocument

from ._errors import ConfigError
from ._vault import followed_by_more

__all__ = [
    "POLICY_RULE_KEYS",
    "PolicyRuleConfig",
    "editable_rules",
    "policy_rules_of",
    "rule_index",
    "rule_table",
]

POLICY_RULE_KEYS = ("name", "pattern", "description", "enabled")
"""The keys of a ``[[command_policy.rules]]`` table, in the order penguin writes them."""


def _text(name: str) -> Any:
    def check(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
        if not isinstance(value, str):
            raise ValueError(f"a policy rule's {name} must be a string, not {value!r}")

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
            raise ValueError("a policy rule needs a non-blank name")
        if not isinstance(self.enabled, bool):
            raise ValueError(f"a policy rule's enabled must be true or false, not {self.enabled!r}")


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


def _unescaped(text: str, *, prefer_literal: bool) -> Item:
    """``text`` as a TOML string that shows its backslashes as they are, when it can.

    A literal string when ``prefer_literal`` or when the text has a backslash:
    ``'...'`` when it has no ``'``, ``'''...'''`` when it has one but no ``'''``
    and does not end in ``'``. A basic (escaped) string otherwise, and whenever the
    text holds a control character, which literal strings cannot.
    """
    if any((ord(char) < 0x20 and char != "\t") or ord(char) == 0x7F for char in text):
        return tomlkit.string(text)
    if not prefer_literal and "\\" not in text:
        return tomlkit.string(text)
    if "'" not in text:
        return tomlkit.string(text, literal=True)
    if "'''" not in text and not text.endswith("'"):
        return tomlkit.string(text, literal=True, multiline=True)
    return tomlkit.string(text)


def rule_table(rule: PolicyRuleConfig, *, blank_after: bool = False) -> Table:
    """``rule`` as a ``[[command_policy.rules]]`` table (an empty description is left out)."""
    table = tomlkit.table()
    table["name"] = rule.name
    table["pattern"] = _unescaped(rule.pattern, prefer_literal=True)
    if rule.description:
        table["description"] = _unescaped(rule.description, prefer_literal=False)
    table["enabled"] = rule.enabled
    if blank_after:
        table.add(tomlkit.nl())
    return table


def _rules_array(rules: Sequence[PolicyRuleConfig], *, blank_after: bool) -> AoT:
    array = tomlkit.aot()
    for index, rule in enumerate(rules):
        array.append(rule_table(rule, blank_after=blank_after and index == len(rules) - 1))
    return array


def editable_rules(
    document: TOMLDocument,
    default_rules: Sequence[PolicyRuleConfig],
    path: str,
) -> AoT:
    """The document's ``[[command_policy.rules]]`` array, made to exist, for editing in place.

    A missing ``[command_policy]`` table is appended (``enabled = true``); a missing
    ``rules`` key is replaced by ``default_rules``, written out, so that the rules
    that applied before the edit are the ones the file now shows. An inline
    ``command_policy = {...}`` or ``rules = [...]`` is rewritten as tables (their
    inline comments are lost; everything else in the file is kept). Raises
    :class:`ConfigError` when ``command_policy`` is not a table or ``rules`` is not an
    array of tables: the file needs fixing by hand first.
    """
    policy = document.get("command_policy")
    if policy is None:
        policy = tomlkit.table()
        policy["enabled"] = True
        document.append("command_policy", policy)
    elif isinstance(policy, InlineTable):
        table = tomlkit.table()
        for key, value in policy.unwrap().items():
            table[key] = value
        document["command_policy"] = table
        policy = document["command_policy"]
    if not isinstance(policy, Table):
        raise ConfigError(
            "expected a table ([command_policy]); fix it by hand, then edit the rules",
            path,
            field="command_policy",
        )
    blank_after = followed_by_more(document, "command_policy")
    rules = policy.get("rules")
    if rules is None:
        policy["rules"] = _rules_array(default_rules, blank_after=blank_after)
    elif isinstance(rules, Array):
        entries = rules.unwrap()
        if not all(isinstance(entry, dict) for entry in entries):
            raise ConfigError(
                "expected an array of tables ([[command_policy.rules]]); fix it by hand, "
                "then edit the rules",
                path,
                field="command_policy.rules",
            )
        array = tomlkit.aot()
        for entry in entries:
            table = tomlkit.table()
            table.update(entry)
            array.append(table)
        policy["rules"] = array
    elif not isinstance(rules, AoT):
        raise ConfigError(
            "expected an array of tables ([[command_policy.rules]]); fix it by hand, "
            "then edit the rules",
            path,
            field="command_policy.rules",
        )
    found: AoT = policy["rules"]
    return found


def rule_index(rules: AoT, name: str) -> int | None:
    """The position of the first rule named ``name`` in ``rules``, or ``None``."""
    for index, table in enumerate(rules):
        if table.get("name") == name:
            return index
    return None
