"""Reference 5.5: what the command policy evaluates, how it reads commands, how it is configured."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from penguin import protocol as om
from penguin.approval import (
    EVALUATED_ARGUMENTS,
    FACTORY_RULES,
    CommandPolicy,
    PolicyPatternError,
    PolicyRule,
    command_of,
    command_variants,
)

POLICY = CommandPolicy()


def call(name: str, arguments: str | dict[str, Any]) -> om.OmniMessage[om.ToolCallPayload]:
    return om.tool_call(name, arguments, "call_1")


def exec_call(cmd: object) -> om.OmniMessage[om.ToolCallPayload]:
    return call("exec_command", {"description": "d", "cmd": cmd})


def penguin_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "penguin"]


# ------------------------------------------------------------------ what is evaluated


def test_5_5_evaluates_exec_command_cmd_and_input_command_chars() -> None:
    assert dict(EVALUATED_ARGUMENTS) == {"exec_command": "cmd", "input_command": "chars"}
    assert command_of(exec_call("ls")) == "ls"
    chars = call("input_command", {"description": "d", "process_id": "7", "chars": "rm -rf /\n"})
    assert command_of(chars) == "rm -rf /\n"
    rule = POLICY.match(chars)
    assert rule is not None
    assert rule.name == "rm-recursive-force"


@pytest.mark.parametrize(
    "tool_call",
    [
        # other tools, even with a "cmd" argument
        call("write_file", {"file_path": "x.sh", "content": "rm -rf /"}),
        call("write_file", {"file_path": "x.sh", "cmd": "rm -rf /"}),
        call("mcp__shell__exec_command", {"cmd": "rm -rf /"}),
        call("run_subagent", {"description": "d", "prompt": "rm -rf /"}),
        call("kill_command", {"description": "d", "process_id": "rm -rf /"}),
        # unparsable or non-object arguments
        call("exec_command", '{"cmd": "rm -rf /"'),
        call("exec_command", ""),
        call("exec_command", '"rm -rf /"'),
        call("exec_command", '["rm -rf /"]'),
        call("exec_command", "null"),
        call("exec_command", "42"),
        # missing or non-string argument
        call("exec_command", {"description": "rm -rf /"}),
        call("exec_command", {"cmd": ["rm", "-rf", "/"]}),
        call("exec_command", {"cmd": None}),
        call("exec_command", {"cmd": 1}),
        call("input_command", {"process_id": "1", "cmd": "rm -rf /"}),
        # exactly Ctrl-C, and empty commands
        call("input_command", {"process_id": "1", "chars": "\x03"}),
        call("input_command", {"process_id": "1", "chars": ""}),
        call("exec_command", {"cmd": ""}),
        call("exec_command", {"cmd": " \n\t "}),
    ],
)
def test_5_5_not_evaluated_cases(tool_call: om.OmniMessage[om.ToolCallPayload]) -> None:
    assert command_of(tool_call) is None
    assert POLICY.match(tool_call) is None
    catch_all = CommandPolicy(rules=[PolicyRule("anything", "")])
    assert catch_all.match(tool_call) is None


def test_5_5_ctrl_c_is_exempt_only_when_it_is_all_of_chars() -> None:
    catch_all = CommandPolicy(rules=[PolicyRule("anything", "")])
    rule = catch_all.match(call("input_command", {"process_id": "1", "chars": "\x03\n"}))
    assert rule is not None


def test_5_5_evaluation_ignores_origin() -> None:
    child_call = om.with_origin(exec_call("rm -rf /"), "session-child")
    assert POLICY.match(child_call) is not None


# ------------------------------------------------------------------------ normalization


def test_5_5_normalization_collapses_whitespace_and_trims() -> None:
    assert command_variants("  ls \t -la\n\n  /tmp  ") == ("ls -la /tmp",)
    assert command_variants("") == ()
    assert command_variants(" \n ") == ()


def test_5_5_normalization_unquoted_variant() -> None:
    assert command_variants('rm -rf "/"') == ('rm -rf "/"', "rm -rf /")
    assert command_variants("r'm' -rf '/'") == ("r'm' -rf '/'", "rm -rf /")
    # escapes are undone first, then every quote goes, escaped or not
    assert command_variants('\\r\\m -rf \\"/\\"') == ('\\r\\m -rf \\"/\\"', "rm -rf /")
    assert command_variants("a\\\\b") == ("a\\\\b", "a\\b")
    # the unquoted form is derived from the normalized literal
    assert command_variants("'rm'  \n -rf   /") == ("'rm' -rf /", "rm -rf /")
    # a trailing lone backslash stays
    assert command_variants("echo \\") == ("echo \\",)
    # no second variant when nothing changes, or when nothing would be left
    assert command_variants("ls") == ("ls",)
    assert command_variants("''") == ("''",)


def test_5_5_a_rule_matches_either_variant() -> None:
    literal_only = CommandPolicy(rules=[PolicyRule("quoted-slash", '"/"')])
    unquoted_only = CommandPolicy(rules=[PolicyRule("bare-slash", "-rf /$")])
    assert literal_only.match_command('rm -rf "/"') is not None
    assert unquoted_only.match_command('rm -rf "/"') is not None


@given(st.text())
def test_5_5_normalized_variants_have_no_whitespace_runs(text: str) -> None:
    for variant in command_variants(text):
        assert variant
        assert variant == variant.strip()
        assert "  " not in variant
        assert not any(char.isspace() and char != " " for char in variant)


@given(st.text())
def test_5_5_matching_never_raises(text: str) -> None:
    POLICY.match_command(text)
    POLICY.match(exec_call(text))
    POLICY.match(call("exec_command", text))


def test_5_5_no_expansion_runtime_computed_commands_are_not_matched() -> None:
    # (Issue 9.2: "echo rm -rf / | sh" is forbidden now, for the words it mentions.)
    for command in ("$(printf rm) -rf /", 'x="rm -rf /"; eval "$x"', "printf 'r%s -rf /' m | sh"):
        assert POLICY.match_command(command) is None


# ---------------------------------------------------------------------------- matching


def test_5_5_first_enabled_matching_rule_wins() -> None:
    policy = CommandPolicy(
        rules=[
            PolicyRule("off", "danger", enabled=False),
            PolicyRule("first", "dang"),
            PolicyRule("second", "danger"),
        ]
    )
    rule = policy.match_command("run danger now")
    assert rule is not None
    assert rule.name == "first"


def test_5_5_rules_are_searched_not_fully_matched() -> None:
    policy = CommandPolicy(rules=[PolicyRule("push-force", r"git push\s.*--force\b")])
    assert policy.match_command("cd repo && git push origin main --force") is not None
    assert policy.match_command("git push origin main") is None


def test_5_5_disabled_policy_matches_nothing() -> None:
    off = CommandPolicy(enabled=False)
    assert off.rules == FACTORY_RULES
    assert off.match(exec_call("rm -rf /")) is None
    assert off.match_command("rm -rf /") is None


def test_5_5_policy_rule_with_invalid_pattern_raises_naming_the_rule() -> None:
    with pytest.raises(PolicyPatternError) as caught:
        PolicyRule("broken", "rm (")
    assert caught.value.rule == "broken"
    assert caught.value.pattern == "rm ("
    assert isinstance(caught.value, ValueError)
    assert '"broken"' in str(caught.value)


def test_5_5_policy_rules_compare_by_value() -> None:
    assert PolicyRule("a", "x") == PolicyRule("a", "x")
    assert hash(PolicyRule("a", "x")) == hash(PolicyRule("a", "x"))
    assert PolicyRule("a", "x") != PolicyRule("a", "x", enabled=False)


# ------------------------------------------------------------------------ configuration


def test_5_5_config_semantics(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="penguin")
    # no table, or no rules key: the factory set
    assert CommandPolicy.from_config(None) == CommandPolicy(enabled=True, rules=FACTORY_RULES)
    assert CommandPolicy.from_config({}) == CommandPolicy(enabled=True, rules=FACTORY_RULES)
    assert CommandPolicy.from_config({"enabled": True}).rules == FACTORY_RULES
    # enabled: false -> off
    off = CommandPolicy.from_config({"enabled": False, "rules": [{"name": "x", "pattern": "x"}]})
    assert not off.enabled
    assert off.match(exec_call("rm -rf /")) is None
    # rules: [] -> no rules
    empty = CommandPolicy.from_config({"rules": []})
    assert empty.enabled
    assert empty.rules == ()
    assert empty.match(exec_call("rm -rf /")) is None
    # custom rules replace the factory set; a disabled rule is skipped
    custom = CommandPolicy.from_config(
        {
            "rules": [
                {"name": "no-push", "pattern": r"git push", "enabled": True},
                {"name": "skipped", "pattern": "ls", "enabled": False},
                {"name": "no-curl-sh", "pattern": r"curl .*\| *sh"},
            ]
        }
    )
    assert [rule.name for rule in custom.rules] == ["no-push", "no-curl-sh"]
    assert custom.match(exec_call("ls")) is None
    assert custom.match(exec_call("rm -rf /")) is None
    pushed = custom.match(exec_call("git push"))
    assert pushed is not None
    assert pushed.name == "no-push"
    assert penguin_warnings(caplog) == []


def test_5_5_config_uncompilable_pattern_is_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="penguin")
    policy = CommandPolicy.from_config(
        {"rules": [{"name": "broken", "pattern": "rm ("}, {"name": "ok", "pattern": "rm"}]}
    )
    assert [rule.name for rule in policy.rules] == ["ok"]
    [line] = penguin_warnings(caplog)
    assert line.startswith('[penguin] command policy rule "broken" skipped: ')
    assert "not a valid Python regular expression" in line


@pytest.mark.parametrize(
    ("entry", "label"),
    [
        ("rm", "#1"),
        ({"pattern": "rm"}, "#1"),
        ({"name": "", "pattern": "rm"}, "#1"),
        ({"name": "no-pattern"}, '"no-pattern"'),
        ({"name": "bad-pattern", "pattern": 3}, '"bad-pattern"'),
    ],
)
def test_5_5_config_malformed_rule_is_skipped_with_a_warning(
    entry: object, label: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="penguin")
    policy = CommandPolicy.from_config({"rules": [entry]})
    assert policy.rules == ()
    [line] = penguin_warnings(caplog)
    assert line.startswith(f"[penguin] command policy rule {label} skipped: ")


def test_5_5_config_mistakes_fail_safe(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="penguin")
    # a non-boolean "enabled" keeps the policy (or the rule) on
    assert CommandPolicy.from_config({"enabled": "false"}).enabled
    kept = CommandPolicy.from_config({"rules": [{"name": "r", "pattern": "x", "enabled": "no"}]})
    assert [rule.name for rule in kept.rules] == ["r"]
    # "rules" that is not a list keeps the factory rules
    assert CommandPolicy.from_config({"rules": "rm"}).rules == FACTORY_RULES
    assert CommandPolicy.from_config({"rules": {"name": "r"}}).rules == FACTORY_RULES
    assert len(penguin_warnings(caplog)) == 4
    # unknown keys are ignored silently
    caplog.clear()
    assert CommandPolicy.from_config({"mode": "strict"}).rules == FACTORY_RULES
    assert penguin_warnings(caplog) == []


def test_5_5_config_accepts_rules_as_tuple() -> None:
    policy = CommandPolicy.from_config({"rules": ({"name": "a", "pattern": "a"},)})
    assert [rule.name for rule in policy.rules] == ["a"]


def test_5_5_the_unquoted_variant_is_normalized_again() -> None:
    assert command_variants('a " " b') == ('a " " b', "a b")
    assert command_variants('0\x85"') == ('0 "', "0")
