"""Issue 9.3: the command policy's rules in ``.project_config.toml`` — seeded, read, edited."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from penguin.approval import FACTORY_RULES, CommandPolicy
from penguin.config import (
    ConfigError,
    ModelEntry,
    PolicyRuleConfig,
    ProjectConfig,
    add_model,
    add_policy_rule,
    load_project_config,
    remove_policy_rule,
    save_project_config,
    set_policy_rule_enabled,
)

FACTORY = tuple(PolicyRuleConfig(r.name, r.pattern, r.description) for r in FACTORY_RULES)
GPT = ModelEntry(provider="openai", model_id="gpt-4o", base_url="https://api.openai.com/v1")


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    path.chmod(0o600)
    return path


def names(path: Path) -> list[str] | None:
    rules = load_project_config(path).policy_rules()
    return None if rules is None else [rule.name for rule in rules]


# ------------------------------------------------------------------ seeding


def test_9_3_a_new_file_lists_the_default_rules_and_they_are_the_factory_policy(
    tmp_path: Path,
) -> None:
    path = tmp_path / ".project_config.toml"
    save_project_config(path, add_model(ProjectConfig(path=path), GPT), default_rules=FACTORY)
    text = path.read_text()
    assert text.count("\n[[command_policy.rules]]\n") == len(FACTORY_RULES)
    assert "\n[command_policy]\nenabled = true\n" in text
    project = load_project_config(path)
    assert project.policy_rules() == FACTORY
    assert CommandPolicy.from_config(project.command_policy) == CommandPolicy()
    assert os.listdir(tmp_path) == [".project_config.toml"]


def test_9_3_an_existing_file_is_never_seeded(tmp_path: Path) -> None:
    path = write(
        tmp_path / ".project_config.toml",
        """\
        [[models]]
        provider = "openai"
        model_id = "gpt-4o"
        """,
    )
    save_project_config(path, load_project_config(path), default_rules=FACTORY)
    assert "command_policy" not in path.read_text()
    assert load_project_config(path).policy_rules() is None


def test_9_3_a_new_file_keeps_a_given_policy_and_seeds_nothing_without_default_rules(
    tmp_path: Path,
) -> None:
    given_policy = tmp_path / "a.toml"
    config = ProjectConfig(path=given_policy, command_policy={"enabled": False})
    save_project_config(given_policy, config, default_rules=FACTORY)
    assert load_project_config(given_policy).command_policy == {"enabled": False}
    plain = tmp_path / "b.toml"
    save_project_config(plain, add_model(ProjectConfig(path=plain), GPT))
    assert load_project_config(plain).command_policy is None


# ------------------------------------------------------------------ reading


def test_9_3_policy_rules_as_written() -> None:
    assert ProjectConfig(path="x").policy_rules() is None
    assert ProjectConfig(path="x", command_policy={"enabled": True}).policy_rules() is None
    assert ProjectConfig(path="x", command_policy={"rules": "no"}).policy_rules() is None
    assert ProjectConfig(path="x", command_policy={"rules": []}).policy_rules() == ()
    table = {
        "rules": [
            {"name": "a", "pattern": "x", "description": "d", "enabled": False},
            {"name": "b", "pattern": "y", "description": 3, "enabled": "yes"},
            {"name": "", "pattern": "z"},
            {"pattern": "z"},
            "not a table",
        ]
    }
    assert ProjectConfig(path="x", command_policy=table).policy_rules() == (
        PolicyRuleConfig("a", "x", "d", enabled=False),
        PolicyRuleConfig("b", "y"),
    )


def test_9_3_policy_rule_config_checks_its_fields() -> None:
    with pytest.raises(ValueError, match="non-blank name"):
        PolicyRuleConfig(" ", "x")
    with pytest.raises(ValueError, match="pattern must be a string"):
        PolicyRuleConfig("a", 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="enabled must be true or false"):
        PolicyRuleConfig("a", "x", enabled="yes")  # type: ignore[arg-type]


# ------------------------------------------------------------------ edits


HAND_WRITTEN = """\
    # my project
    [[models]]
    provider = "openai"
    model_id = "gpt-4o"

    [command_policy]
    enabled = true  # on, please

    [[command_policy.rules]]
    name = "no-force-push"  # the team's rule
    pattern = 'git push\\s.*--force'

    [[command_policy.rules]]
    name = "no-drop"
    pattern = '(?i)drop table'
    enabled = false
    """


def test_9_3_edits_keep_comments_and_change_only_their_rule(tmp_path: Path) -> None:
    path = write(tmp_path / ".project_config.toml", HAND_WRITTEN)
    assert set_policy_rule_enabled(path, "no-drop", True, default_rules=FACTORY)
    assert not set_policy_rule_enabled(path, "no-drop", True, default_rules=FACTORY)
    assert not set_policy_rule_enabled(path, "no-force-push", True, default_rules=FACTORY)
    assert set_policy_rule_enabled(path, "no-force-push", False, default_rules=FACTORY)
    add_policy_rule(path, PolicyRuleConfig("no-curl-sh", r"curl\s.*\|\s*sh", "no piping to sh"))
    text = path.read_text()
    for kept in ("# my project\n", "enabled = true  # on, please", '"no-force-push"  # the team'):
        assert kept in text, kept
    assert "name = \"no-force-push\"  # the team's rule\npattern = 'git push\\s.*--force'\n" in text
    assert "'git push\\s.*--force'\nenabled = false\n" in text
    assert "pattern = '(?i)drop table'\nenabled = true\n" in text
    assert "pattern = 'curl\\s.*\\|\\s*sh'\ndescription = \"no piping to sh\"\n" in text
    assert names(path) == ["no-force-push", "no-drop", "no-curl-sh"]
    remove_policy_rule(path, "no-drop")
    assert names(path) == ["no-force-push", "no-curl-sh"]
    assert load_project_config(path).find_model("openai", "gpt-4o") is not None
    assert os.listdir(tmp_path) == [".project_config.toml"]


def test_9_3_an_edit_first_writes_out_the_rules_an_absent_key_means(tmp_path: Path) -> None:
    path = write(
        tmp_path / ".project_config.toml",
        """\
        # hand-written, no policy yet
        [[models]]
        provider = "openai"
        model_id = "gpt-4o"
        """,
    )
    assert set_policy_rule_enabled(path, "mkfs", False, default_rules=FACTORY)
    rules = load_project_config(path).policy_rules()
    assert rules is not None
    assert [rule.name for rule in rules] == [rule.name for rule in FACTORY_RULES]
    assert [rule.enabled for rule in rules] == [rule.name != "mkfs" for rule in FACTORY_RULES]
    assert path.read_text().startswith("# hand-written, no policy yet\n")
    # A missing file is created, with its header, the default rules and the edit.
    missing = tmp_path / "new" / ".project_config.toml"
    remove_policy_rule(missing, "windows-fork-bomb", default_rules=FACTORY)
    assert missing.read_text().startswith("# penguin project configuration")
    assert names(missing) == [rule.name for rule in FACTORY_RULES][:-1]


def test_9_3_a_failed_edit_leaves_the_file_untouched(tmp_path: Path) -> None:
    path = write(tmp_path / ".project_config.toml", HAND_WRITTEN)
    before = path.read_bytes()
    with pytest.raises(ConfigError, match=r'no rule named "nope".*no-force-push, no-drop'):
        set_policy_rule_enabled(path, "nope", False)
    with pytest.raises(ConfigError, match='no rule named "nope"'):
        remove_policy_rule(path, "nope")
    with pytest.raises(ConfigError, match='a rule named "no-drop" is already'):
        add_policy_rule(path, PolicyRuleConfig("no-drop", "x"))
    assert path.read_bytes() == before
    # ... and a file without rules is not materialised by an edit that fails.
    bare = write(tmp_path / "bare.toml", "# nothing yet\n")
    with pytest.raises(ConfigError):
        remove_policy_rule(bare, "nope", default_rules=FACTORY)
    assert bare.read_text() == "# nothing yet\n"


def test_9_3_removing_the_last_rule_leaves_none_not_the_factory_set(tmp_path: Path) -> None:
    path = write(
        tmp_path / ".project_config.toml",
        """\
        [[command_policy.rules]]
        name = "only"
        pattern = "x"
        """,
    )
    remove_policy_rule(path, "only", default_rules=FACTORY)
    project = load_project_config(path)
    assert project.policy_rules() == ()
    assert CommandPolicy.from_config(project.command_policy).rules == ()


def test_9_3_inline_tables_are_rewritten_as_tables(tmp_path: Path) -> None:
    path = write(
        tmp_path / ".project_config.toml",
        """\
        command_policy = { enabled = true, rules = [{ name = "a", pattern = "x" }] }
        """,
    )
    add_policy_rule(path, PolicyRuleConfig("b", "y"))
    assert names(path) == ["a", "b"]
    empty = write(tmp_path / "empty.toml", "[command_policy]\nrules = []\n")
    add_policy_rule(empty, PolicyRuleConfig("b", "y"), default_rules=FACTORY)
    assert names(empty) == ["b"]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('[command_policy]\nrules = "none"\n', "command_policy.rules"),
        ("[command_policy]\nrules = [1, 2]\n", "command_policy.rules"),
    ],
)
def test_9_3_rules_penguin_cannot_edit_are_a_config_error(
    tmp_path: Path, text: str, field: str
) -> None:
    path = write(tmp_path / ".project_config.toml", text)
    with pytest.raises(ConfigError) as caught:
        add_policy_rule(path, PolicyRuleConfig("b", "y"))
    assert caught.value.field == field
    assert "fix it by hand" in str(caught.value)
    assert path.read_text() == text


@settings(max_examples=60, deadline=None)
@given(
    pattern=st.text(st.characters(exclude_categories=["Cs"]), max_size=40),
    description=st.text(st.characters(exclude_categories=["Cs"]), max_size=20),
)
def test_9_3_any_pattern_and_description_survive_the_file(
    tmp_path_factory: pytest.TempPathFactory, pattern: str, description: str
) -> None:
    path = tmp_path_factory.mktemp("p") / ".project_config.toml"
    add_policy_rule(path, PolicyRuleConfig("r", pattern, description), default_rules=())
    assert load_project_config(path).policy_rules() == (
        PolicyRuleConfig("r", pattern, description),
    )
