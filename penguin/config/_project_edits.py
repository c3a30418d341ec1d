"""The edits ``penguin config`` makes to a project's ``.project_config.toml``.

Two kinds, both keeping the user's comments, layout and unknown keys:

- *the models* (``penguin config model``): :func:`add_model`,
  :func:`set_default_model`, :func:`set_vision_model`, :func:`clear_vision_model` and
  :func:`remove_model` are pure functions returning a new :class:`ProjectConfig`;
  :func:`save_project_config` writes one to the file, changing only what differs from
  what the file holds (entries updated in place, removed ones dropped, new ones
  appended);
- *the command policy's rules* (``penguin config policy``): :func:`add_policy_rule`,
  :func:`set_policy_rule_enabled` and :func:`remove_policy_rule` read the file, edit
  its ``[[command_policy.rules]]`` in place and write it back, with the patterns in
  literal strings so that a regular expression reads as it was typed.

Both write atomically (mode 0600). A new file starts with a comment explaining its
keys and is seeded with the rules its writer names as the default (the CLI names the
factory rules), so they can be read and edited where the policy lives; an existing
file is never seeded, but the first edit of the rules of a file that lists none
writes those default rules out first, so the rules that applied are the ones it
shows.

Does not own: the types, loading and choosing a model (``_project``: what a session
needs), the stored form of a rule (``_command_policy``), the private-file and tomlkit
plumbing (``_toml``), or which rules are the factory set and whether a pattern
compiles (``penguin.approval``, which this layer must not import: the caller hands
``default_rules`` in and checks patterns first). Blocking functions; async callers
use a worker thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import tomlkit
from tomlkit.items import AoT, Array, InlineTable, Table
from tomlkit.toml_document import TOMLDocument

from ._command_policy import PolicyRuleConfig
from ._errors import ConfigError
from ._files import editing
from ._project import (
    KNOWN_BASE_URLS,
    MODEL_KEYS,
    ModelEntry,
    ModelKey,
    ProjectConfig,
    unknown_model,
)
from ._toml import (
    followed_by_more,
    header_document,
    read_private_toml,
    same_value,
    set_key,
    unescaped_string,
    write_private_toml,
)

__all__ = [
    "add_model",
    "add_policy_rule",
    "clear_vision_model",
    "remove_model",
    "remove_policy_rule",
    "save_project_config",
    "set_default_model",
    "set_policy_rule_enabled",
    "set_vision_model",
]

_PROJECT_HEADER: Final = (
    "penguin project configuration: the models this project's agents use, and its",
    "command policy. `penguin config model ...` edits it; hand edits and comments are kept.",
    "It may hold API keys: keep it private (mode 0600).",
    "",
    "[[models]] keys: provider and model_id (together they name the entry), base_url",
    "(the API root, e.g. http://localhost:8000/v1; optional for deepseek, ollama, openai,",
    "openrouter), api_key or api_key_env (the name of an environment variable holding",
    "the key), vision (accepts images; default true), context_window (tokens, optional).",
    'default_model and vision_model name an entry: { provider = "...", model_id = "..." }.',
    "",
    "[command_policy] forbids every exec_command/input_command whose command matches an",
    "enabled rule, before any approval (enabled = false turns it off). Each",
    "[[command_policy.rules]] has a name, a pattern (a Python regular expression searched",
    "in the command), a description and enabled. No rules key means penguin's factory",
    "rules; rules = [] means none. Try and edit them with `penguin config policy ...`.",
)


# ------------------------------------------------------------------ the models


def _require(config: ProjectConfig, provider: str, model_id: str) -> ModelEntry:
    entry = config.find_model(provider, model_id)
    if entry is None:
        raise ConfigError(unknown_model(config, provider, model_id), config.path)
    return entry


def add_model(
    config: ProjectConfig, entry: ModelEntry, *, set_default: bool = False
) -> ProjectConfig:
    """``config`` with ``entry`` added, or replacing the entry with the same provider and model id.

    A replaced entry keeps its position. ``set_default`` also makes it the
    ``default_model``. References are otherwise untouched; a ``vision_model``
    that names an entry replaced by one with ``vision = false`` is cleared.
    """
    models = list(config.models)
    for index, current in enumerate(models):
        if current.key == entry.key:
            models[index] = entry
            break
    else:
        models.append(entry)
    vision = config.vision_model
    if vision == entry.key and not entry.vision:
        vision = None
    return attrs.evolve(
        config,
        models=tuple(models),
        default_model=entry.key if set_default else config.default_model,
        vision_model=vision,
    )


def set_default_model(config: ProjectConfig, provider: str, model_id: str) -> ProjectConfig:
    """``config`` with ``default_model`` naming this entry (:class:`ConfigError` if none)."""
    return attrs.evolve(config, default_model=_require(config, provider, model_id).key)


def set_vision_model(config: ProjectConfig, provider: str, model_id: str) -> ProjectConfig:
    """``config`` with ``vision_model`` naming this entry, which must accept images.

    Raises :class:`ConfigError` when there is no such entry or it has ``vision = false``.
    """
    entry = _require(config, provider, model_id)
    if not entry.vision:
        raise ConfigError(
            f"{entry.key} is configured with vision = false, so it cannot describe images; "
            f"add it again with --vision if it accepts images",
            config.path,
        )
    return attrs.evolve(config, vision_model=entry.key)


def clear_vision_model(config: ProjectConfig) -> ProjectConfig:
    """``config`` without a ``vision_model`` (describe_image then has no model to ask)."""
    return attrs.evolve(config, vision_model=None)


def remove_model(
    config: ProjectConfig, provider: str, model_id: str
) -> tuple[ProjectConfig, tuple[str, ...]]:
    """``config`` without this entry, and the references that were cleared because they named it.

    The second item lists ``"default_model"`` and/or ``"vision_model"`` when they
    named the removed entry (they are unset in the result). Raises
    :class:`ConfigError` when there is no such entry.
    """
    removed = _require(config, provider, model_id).key
    cleared = tuple(
        name
        for name, ref in (
            ("default_model", config.default_model),
            ("vision_model", config.vision_model),
        )
        if ref == removed
    )
    result = attrs.evolve(
        config,
        models=tuple(entry for entry in config.models if entry.key != removed),
        default_model=None if config.default_model == removed else config.default_model,
        vision_model=None if config.vision_model == removed else config.vision_model,
    )
    return result, cleared


# ------------------------------------------------------------------ saving


def _model_fields(entry: ModelEntry) -> dict[str, object]:
    """The entry's keys in file order; None means "absent"."""
    return {key: getattr(entry, key) for key in MODEL_KEYS}


def _implied(entry: ModelEntry) -> dict[str, object]:
    """Values an absent key already means, so syncing does not add them to a hand-written entry."""
    implied: dict[str, object] = {"vision": True}
    if entry.provider in KNOWN_BASE_URLS:
        implied["base_url"] = KNOWN_BASE_URLS[entry.provider]
    return implied


def _sync_entry(table: Table, entry: ModelEntry) -> None:
    implied = _implied(entry)
    fields = _model_fields(entry)
    for position, (key, value) in enumerate(fields.items()):
        if value is None:
            if key in table:
                del table[key]
        elif key in table or implied.get(key, ...) != value:
            set_key(table, key, value, after=tuple(fields)[:position])


def _new_entry_table(entry: ModelEntry, *, blank_after: bool) -> Table:
    table = tomlkit.table()
    for key, value in _model_fields(entry).items():
        if value is not None:
            table[key] = value
    if blank_after:
        table.add(tomlkit.nl())
    return table


def _table_key(table: Table) -> ModelKey:
    return ModelKey(str(table.get("provider")), str(table.get("model_id")))


def _sync_models(document: TOMLDocument, models: tuple[ModelEntry, ...]) -> None:
    wanted = {entry.key: entry for entry in models}
    existing = document.get("models")
    if existing is not None and not isinstance(existing, AoT):
        del document["models"]  # an inline array: rewritten as [[models]] tables
        existing = None
    kept: set[ModelKey] = set()
    if existing is not None:
        for index in reversed(range(len(existing))):
            table = existing[index]
            key = _table_key(table)
            if key in wanted and key not in kept:
                _sync_entry(table, wanted[key])
                kept.add(key)
            else:
                del existing[index]
    new = [entry for entry in models if entry.key not in kept]
    if existing is None:
        if new:
            tables = tomlkit.aot()
            for entry in new:
                tables.append(_new_entry_table(entry, blank_after=False))
            document.append("models", tables)
        return
    blank_after = followed_by_more(document, "models")
    for entry in new:
        existing.append(_new_entry_table(entry, blank_after=blank_after))
    if len(existing) == 0:
        del document["models"]


def _reference_fields(key: ModelKey) -> dict[str, str]:
    return {"provider": key.provider, "model_id": key.model_id}


def _reference_table(key: ModelKey) -> Any:
    table = tomlkit.inline_table()
    table.update(_reference_fields(key))
    return table


def _sync_reference(document: TOMLDocument, name: str, key: ModelKey | None) -> None:
    if key is None:
        if name in document:
            del document[name]
        return
    if name not in document or not same_value(document[name], _reference_fields(key)):
        document[name] = _reference_table(key)


def _sync_policy(document: TOMLDocument, policy: dict[str, Any] | None) -> None:
    if "command_policy" in document and same_value(document["command_policy"], policy):
        return
    if policy is None:
        if "command_policy" in document:
            del document["command_policy"]
        return
    document["command_policy"] = policy


def save_project_config(
    path: str | os.PathLike[str],
    config: ProjectConfig,
    *,
    default_rules: Sequence[PolicyRuleConfig] = (),
) -> None:
    """Write ``config`` to ``path`` (atomically, mode 0600), keeping what the file had.

    The file currently at ``path`` is the starting point: entries are updated in
    place (their comments, key order and unknown keys stay), removed entries are
    dropped, new ones appended; ``default_model``, ``vision_model`` and
    ``[command_policy]`` are changed only when they differ; unknown keys and
    comments elsewhere are untouched. A new file starts with a comment explaining
    its keys and, when ``config`` has no ``command_policy``, a ``[command_policy]``
    listing ``default_rules`` (the rules its absence would mean; the CLI passes the
    factory rules) as ``[[command_policy.rules]]``. An existing file is never seeded.
    Raises :class:`ConfigError` when the existing file is not valid TOML (it is not
    overwritten) and :class:`OSError` when it cannot be written.
    """
    file = Path(path)
    document = read_private_toml(file)
    new = document is None
    if document is None:
        document = header_document(_PROJECT_HEADER)
    _sync_reference(document, "default_model", config.default_model)
    _sync_reference(document, "vision_model", config.vision_model)
    _sync_models(document, config.models)
    _sync_policy(document, config.command_policy)
    if new and config.command_policy is None and default_rules:
        _editable_rules(document, default_rules, str(file))
    write_private_toml(file, document)


# ------------------------------------------------------------------ command policy rules


def _rule_table(rule: PolicyRuleConfig, *, blank_after: bool = False) -> Table:
    """``rule`` as a ``[[command_policy.rules]]`` table (an empty description is left out)."""
    table = tomlkit.table()
    table["name"] = rule.name
    table["pattern"] = unescaped_string(rule.pattern, prefer_literal=True)
    if rule.description:
        table["description"] = unescaped_string(rule.description, prefer_literal=False)
    table["enabled"] = rule.enabled
    if blank_after:
        table.add(tomlkit.nl())
    return table


def _rules_array(rules: Sequence[PolicyRuleConfig], *, blank_after: bool) -> AoT:
    array = tomlkit.aot()
    for index, rule in enumerate(rules):
        array.append(_rule_table(rule, blank_after=blank_after and index == len(rules) - 1))
    return array


def _editable_rules(
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


def _rule_index(rules: AoT, name: str) -> int | None:
    """The position of the first rule named ``name`` in ``rules``, or ``None``."""
    for index, table in enumerate(rules):
        if table.get("name") == name:
            return index
    return None


def _edit_rules(
    path: str | os.PathLike[str],
    default_rules: Sequence[PolicyRuleConfig],
    edit: Callable[[AoT, str, bool], bool],
) -> bool:
    """Apply ``edit`` to the file's rules array; write the file if anything changed.

    ``edit(rules, path, blank_after)`` changes the array in place and says whether it
    changed anything (``blank_after``: whether a new table needs a blank line after
    it); it raises to leave the file untouched. The rules a missing ``rules`` key
    stands for (``default_rules``) are written out first, which counts as a change; a
    missing file is created, with its header.
    """
    file = Path(path)
    with editing(file):
        document = read_private_toml(file)
        if document is None:
            document = header_document(_PROJECT_HEADER)
        before = document.as_string()
        rules = _editable_rules(document, default_rules, str(file))
        materialised = document.as_string() != before
        changed = edit(rules, str(file), followed_by_more(document, "command_policy"))
        if changed or materialised:
            write_private_toml(file, document)
    return changed


def _rule_at(rules: AoT, name: str, path: str) -> int:
    index = _rule_index(rules, name)
    if index is None:
        names = [str(table["name"]) for table in rules if isinstance(table.get("name"), str)]
        raise ConfigError(
            f'no rule named "{name}" in the command policy '
            f"(its rules: {', '.join(names) or 'none'})",
            path,
            field="command_policy.rules",
        )
    return index


def add_policy_rule(
    path: str | os.PathLike[str],
    rule: PolicyRuleConfig,
    *,
    default_rules: Sequence[PolicyRuleConfig] = (),
) -> None:
    """Append ``rule`` to the command policy of the project file at ``path``.

    The pattern is stored as given: whether it compiles is the caller's check
    (``penguin.approval.PolicyRule``); a pattern that does not is skipped, with a
    warning, when a session loads the policy. A file without a ``rules`` key first
    gets ``default_rules`` written out (see :func:`save_project_config`), so the
    new rule joins the rules that applied. Comments and everything else in the file
    are kept; the file is replaced atomically. Raises :class:`ConfigError` (file
    untouched) when a rule of that name exists.
    """

    def edit(rules: AoT, where: str, blank_after: bool) -> bool:
        if _rule_index(rules, rule.name) is not None:
            raise ConfigError(
                f'a rule named "{rule.name}" is already in the command policy; '
                "remove it first or choose another name",
                where,
                field="command_policy.rules",
            )
        rules.append(_rule_table(rule, blank_after=blank_after))
        return True

    _edit_rules(path, default_rules, edit)


def set_policy_rule_enabled(
    path: str | os.PathLike[str],
    name: str,
    enabled: bool,
    *,
    default_rules: Sequence[PolicyRuleConfig] = (),
) -> bool:
    """Turn the rule ``name`` on or off in place; False when it already was.

    A rule without an ``enabled`` key is on; ``enabled = true`` is written only
    over a value that says otherwise. A file without a ``rules`` key first gets
    ``default_rules`` written out. Raises :class:`ConfigError` (file untouched)
    when no rule has that name.
    """

    def edit(rules: AoT, where: str, blank_after: bool) -> bool:
        table = rules[_rule_at(rules, name, where)]
        current = table.get("enabled", True)
        if current is enabled:
            return False
        set_key(table, "enabled", enabled, after=("name", "pattern", "description"))
        return True

    return _edit_rules(path, default_rules, edit)


def remove_policy_rule(
    path: str | os.PathLike[str],
    name: str,
    *,
    default_rules: Sequence[PolicyRuleConfig] = (),
) -> None:
    """Remove the rule ``name`` (the first of that name) from the command policy.

    A file without a ``rules`` key first gets ``default_rules`` written out, so
    removing one factory rule keeps the others. Removing the last rule leaves
    ``rules = []`` (no rules at all), never an absent key. Raises
    :class:`ConfigError` (file untouched) when no rule has that name.
    """

    def edit(rules: AoT, where: str, blank_after: bool) -> bool:
        del rules[_rule_at(rules, name, where)]
        return True

    _edit_rules(path, default_rules, edit)
