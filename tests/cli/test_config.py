"""``penguin config``: models and vault edited through the real command, in a temporary root."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from penguin.approval import FACTORY_RULES, CommandPolicy
from penguin.config import AgentPaths, PolicyRuleConfig, load_project_config, load_vault

SECRET = "sk-do-not-print-me-123"


def penguin(
    root: Path,
    *args: str,
    stdin: str = "",
    env: dict[str, str] | None = None,
    with_root: bool = True,
) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PENGUIN_HOME": str(root / "not-used"), **(env or {})}
    environment.pop("OPENAI_API_KEY", None)
    location = ["--root", str(root)] if with_root else []
    return subprocess.run(
        [sys.executable, "-m", "penguin", "config", *args, *location],
        input=stdin,
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    return done.stdout


def fails(done: subprocess.CompletedProcess[str], fragment: str) -> str:
    assert done.returncode == 1, (done.stdout, done.stderr)
    message = done.stderr.strip()
    assert message.startswith("penguin config: "), message
    assert "\n" not in message, message  # one line
    assert "Traceback" not in done.stderr
    assert fragment in message, message
    return message


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def project_file(root: Path, project: str = "default_project") -> Path:
    return root / project / ".project_config.toml"


# ------------------------------------------------------------------ model


def test_add_list_and_default(tmp_path: Path) -> None:
    out = ok(
        penguin(
            tmp_path,
            "model",
            "add",
            "--provider",
            "openai",
            "--model-id",
            "gpt-4o",
            "--api-key-env",
            "OPENAI_API_KEY",
            "--context-window",
            "128000",
            "--set-default",
        )
    )
    path = project_file(tmp_path)
    assert f"Added model openai/gpt-4o in {path}." in out
    assert "openai/gpt-4o is the default model." in out
    assert mode(path) == 0o600
    assert not (tmp_path / "not-used").exists()  # --root wins over $PENGUIN_HOME

    ok(
        penguin(
            tmp_path,
            "model",
            "add",
            "--provider",
            "local",
            "--model-id",
            "qwen",
            "--base-url",
            "http://localhost:8000/v1",
            "--api-key",
            SECRET,
            "--no-vision",
        )
    )
    listing = ok(penguin(tmp_path, "model", "list")).splitlines()
    assert listing[0].split() == [
        "PROVIDER",
        "MODEL",
        "ID",
        "ROLE",
        "API",
        "KEY",
        "VISION",
        "CONTEXT",
        "BASE",
        "URL",
    ]
    assert listing[1].split() == [
        "openai",
        "gpt-4o",
        "default",
        "from",
        "$OPENAI_API_KEY",
        "(unset)",
        "yes",
        "128000",
        "https://api.openai.com/v1",
    ]
    assert listing[2].split() == [
        "local",
        "qwen",
        "-",
        "set",
        "no",
        "-",
        "http://localhost:8000/v1",
    ]
    config = load_project_config(path)
    entry = config.find_model("local", "qwen")
    assert entry is not None
    assert entry.api_key == SECRET


def test_edits_at_once_all_land(tmp_path: Path) -> None:
    # Each reads its file, changes it and replaces it; one at a time, none is lost
    # (before, twenty model adds at once left two models in the file).
    environment = {**os.environ, "PENGUIN_HOME": str(tmp_path / "not-used")}
    edits = [
        *(
            ["model", "add", "--provider", "ollama", "--model-id", f"m{i}", "--no-vision"]
            for i in range(8)
        ),
        *(["vault", "set", f"KEY_{i}", f"value {i}"] for i in range(4)),
        *(["policy", "add", f"rule-{i}", f"forbidden-{i}"] for i in range(4)),
    ]
    running = [
        subprocess.Popen(
            [sys.executable, "-m", "penguin", "config", *edit, "--root", str(tmp_path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=environment,
        )
        for edit in edits
    ]
    ended = [(process.communicate(timeout=60)[1], process.returncode) for process in running]
    assert [stderr for stderr, code in ended if code != 0] == []
    project = load_project_config(project_file(tmp_path))
    assert sorted(m.model_id for m in project.models) == [f"m{i}" for i in range(8)]
    rules = {rule.name for rule in project.policy_rules() or ()}
    assert {f"rule-{i}" for i in range(4)} <= rules
    assert {rule.name for rule in FACTORY_RULES} <= rules
    vault = load_vault(AgentPaths(tmp_path).vault)
    assert vault == {f"KEY_{i}": f"value {i}" for i in range(4)}


def test_list_shows_a_key_from_the_environment_as_available(tmp_path: Path) -> None:
    ok(
        penguin(
            tmp_path,
            "model",
            "add",
            "--provider",
            "openai",
            "--model-id",
            "m",
            "--api-key-env",
            "MY_KEY",
        )
    )
    listing = ok(penguin(tmp_path, "model", "list", env={"MY_KEY": SECRET}))
    assert "from $MY_KEY " in listing
    assert "(unset)" not in listing


def test_api_key_from_stdin(tmp_path: Path) -> None:
    ok(
        penguin(
            tmp_path,
            "model",
            "add",
            "--provider",
            "deepseek",
            "--model-id",
            "deepseek-chat",
            "--api-key",
            "-",
            stdin=SECRET + "\n",
        )
    )
    entry = load_project_config(project_file(tmp_path)).find_model("deepseek", "deepseek-chat")
    assert entry is not None
    assert entry.api_key == SECRET
    assert entry.base_url == "https://api.deepseek.com/v1"
    fails(
        penguin(
            tmp_path, "model", "add", "--provider", "openai", "--model-id", "x", "--api-key", "-"
        ),
        "no API key was given on standard input",
    )


def test_adding_again_updates_only_what_is_given(tmp_path: Path) -> None:
    base = ("model", "add", "--provider", "local", "--model-id", "qwen")
    ok(penguin(tmp_path, *base, "--base-url", "http://h:1/v1", "--api-key", SECRET, "--no-vision"))
    out = ok(penguin(tmp_path, *base, "--context-window", "4096"))
    assert "Updated model local/qwen" in out
    entry = load_project_config(project_file(tmp_path)).find_model("local", "qwen")
    assert entry is not None
    assert (entry.base_url, entry.api_key, entry.vision, entry.context_window) == (
        "http://h:1/v1",
        SECRET,
        False,
        4096,
    )
    ok(penguin(tmp_path, *base, "--api-key-env", "QWEN_KEY"))
    entry = load_project_config(project_file(tmp_path)).find_model("local", "qwen")
    assert entry is not None
    assert (entry.api_key, entry.api_key_env) == (None, "QWEN_KEY")
    assert SECRET not in project_file(tmp_path).read_text()


def test_cli_edits_keep_hand_written_comments(tmp_path: Path) -> None:
    path = project_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(
        "# keep me\n"
        "[[models]]  # the first\n"
        'provider = "openai"\n'
        'model_id = "gpt-4o"\n'
        "mystery = 42  # unknown to penguin\n"
        "\n"
        "[command_policy]\n"
        "enabled = false  # trust me\n"
    )
    path.chmod(0o644)
    ok(penguin(tmp_path, "model", "add", "--provider", "ollama", "--model-id", "llama3"))
    ok(penguin(tmp_path, "model", "default", "openai", "gpt-4o"))
    ok(penguin(tmp_path, "model", "vision", "openai", "gpt-4o"))
    text = path.read_text()
    for kept in (
        "# keep me\n",
        "[[models]]  # the first\n",
        "mystery = 42  # unknown to penguin\n",
        "enabled = false  # trust me\n",
    ):
        assert kept in text, text
    assert mode(path) == 0o600  # tightened
    config = load_project_config(path)
    assert [str(entry.key) for entry in config.models] == ["openai/gpt-4o", "ollama/llama3"]
    assert str(config.default_model) == "openai/gpt-4o"
    assert str(config.vision_model) == "openai/gpt-4o"


def test_default_vision_and_remove(tmp_path: Path) -> None:
    ok(penguin(tmp_path, "model", "add", "--provider", "openai", "--model-id", "a"))
    ok(penguin(tmp_path, "model", "add", "--provider", "openai", "--model-id", "b", "--no-vision"))
    assert "openai/a is the default model." in ok(
        penguin(tmp_path, "model", "default", "openai", "a")
    )
    fails(penguin(tmp_path, "model", "default", "openai", "zzz"), "no model openai/zzz")
    fails(penguin(tmp_path, "model", "vision", "openai", "b"), "vision = false")
    fails(penguin(tmp_path, "model", "vision"), "give PROVIDER MODEL_ID, or --clear")
    fails(penguin(tmp_path, "model", "vision", "openai"), "give PROVIDER MODEL_ID, or --clear")
    fails(penguin(tmp_path, "model", "vision", "openai", "a", "--clear"), "or --clear")
    assert "openai/a is the vision model." in ok(
        penguin(tmp_path, "model", "vision", "openai", "a")
    )
    assert "unset" in ok(penguin(tmp_path, "model", "vision", "--clear"))
    assert load_project_config(project_file(tmp_path)).vision_model is None
    ok(penguin(tmp_path, "model", "vision", "openai", "a"))

    out = ok(penguin(tmp_path, "model", "remove", "openai", "a"))
    assert "Removed model openai/a" in out
    assert "openai/a was the default model; no default is set now" in out
    assert "penguin config model default PROVIDER MODEL_ID --root" in out
    assert "openai/a was the vision model; no vision model is set now." in out
    config = load_project_config(project_file(tmp_path))
    assert (config.default_model, config.vision_model) == (None, None)
    fails(penguin(tmp_path, "model", "remove", "openai", "a"), "no model openai/a is configured")


def test_empty_list_says_how_to_add_a_model(tmp_path: Path) -> None:
    out = ok(penguin(tmp_path, "model", "list"))
    assert "No models are configured" in out
    assert (
        "penguin config model add --provider P --model-id M --base-url URL --api-key KEY "
        "--set-default" in out
    )
    assert not project_file(tmp_path).exists()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (
            ("model", "add", "--provider", "vllm", "--model-id", "m"),
            'give --base-url for provider "vllm"',
        ),
        (
            ("model", "add", "--provider", "p", "--model-id", "m", "--base-url", "localhost"),
            "base_url must be an http:// or https:// URL",
        ),
        (
            ("model", "add", "--provider", "openai", "--model-id", "m", "--api-key-env", "A-B"),
            "api_key_env must be an environment variable name",
        ),
        (("model", "list", "--project-id", "../escape"), "invalid project id '../escape'"),
        (("vault", "list", "--agent-id", "a/b"), "invalid agent id 'a/b'"),
    ],
)
def test_bad_input_exits_1_with_one_line(
    tmp_path: Path, args: tuple[str, ...], fragment: str
) -> None:
    fails(penguin(tmp_path, *args), fragment)


def test_a_broken_file_is_reported_with_file_line_and_field(tmp_path: Path) -> None:
    path = project_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(
        '[[models]]\nprovider = "p"\nmodel_id = "m"\nbase_url = "http://x"\nvision = 1\n'
    )
    path.chmod(0o600)
    message = fails(penguin(tmp_path, "model", "list"), "expected true or false")
    assert message.startswith(f"penguin config: {path}:5: models[0].vision: ")


def test_argparse_usage_errors_exit_2(tmp_path: Path) -> None:
    done = penguin(tmp_path, "model", "add", "--provider", "p")
    assert done.returncode == 2
    assert "--model-id" in done.stderr
    done = penguin(
        tmp_path,
        "model",
        "add",
        "--provider",
        "p",
        "--model-id",
        "m",
        "--api-key",
        "k",
        "--api-key-env",
        "K",
    )
    assert done.returncode == 2
    assert "not allowed with" in done.stderr


def test_sections_without_an_action_print_help_and_exit_1(tmp_path: Path) -> None:
    for args in ((), ("model",), ("vault",)):
        done = penguin(tmp_path, *args, with_root=False)
        assert done.returncode == 1
        assert "usage: penguin config" in done.stderr


def test_help_has_examples(tmp_path: Path) -> None:
    for args in (("model", "add"), ("vault", "set"), ("model",), ()):
        done = penguin(tmp_path, *args, "--help", with_root=False)
        assert done.returncode == 0
        assert "examples:" in done.stdout


def test_project_id_selects_another_file(tmp_path: Path) -> None:
    ok(
        penguin(
            tmp_path,
            "model",
            "add",
            "--provider",
            "openai",
            "--model-id",
            "m",
            "--project-id",
            "web",
        )
    )
    assert project_file(tmp_path, "web").exists()
    assert not project_file(tmp_path).exists()


# ------------------------------------------------------------------ vault


def test_vault_set_from_argument_stdin_and_dash(tmp_path: Path) -> None:
    paths = AgentPaths(tmp_path)
    out = ok(penguin(tmp_path, "vault", "set", "LOG_LEVEL", "debug"))
    assert f"Set LOG_LEVEL in the vault of agent default_agent ({paths.vault})." in out
    ok(penguin(tmp_path, "vault", "set", "GITHUB_TOKEN", stdin=SECRET + "\n"))
    ok(penguin(tmp_path, "vault", "set", "PEM", "-", stdin="line1\nline2\n"))
    assert load_vault(paths.vault) == {
        "LOG_LEVEL": "debug",
        "GITHUB_TOKEN": SECRET,
        "PEM": "line1\nline2",
    }
    assert mode(paths.vault) == 0o600
    assert ok(penguin(tmp_path, "vault", "list")) == "LOG_LEVEL\nGITHUB_TOKEN\nPEM\n"


def test_vault_remove_and_errors(tmp_path: Path) -> None:
    ok(penguin(tmp_path, "vault", "set", "A", stdin=SECRET))
    assert "Removed A from the vault of agent default_agent." in ok(
        penguin(tmp_path, "vault", "remove", "A")
    )
    fails(penguin(tmp_path, "vault", "remove", "A"), "A is not in the vault of agent default_agent")
    fails(penguin(tmp_path, "vault", "set", "1BAD", "x"), "invalid vault key '1BAD'")
    fails(penguin(tmp_path, "vault", "set", "EMPTY", stdin=""), "no value for EMPTY was given")
    done = penguin(tmp_path, "vault", "list")
    assert done.returncode == 0
    assert done.stdout == ""
    assert "is empty" in done.stderr


def test_vault_is_per_agent(tmp_path: Path) -> None:
    ok(penguin(tmp_path, "vault", "set", "TOKEN", "x", "--agent-id", "reviewer"))
    assert load_vault(AgentPaths(tmp_path, agent_id="reviewer").vault) == {"TOKEN": "x"}
    assert ok(penguin(tmp_path, "vault", "list")) == ""


# ------------------------------------------------------------------ policy (issue 9.3)

FACTORY_NAMES = [rule.name for rule in FACTORY_RULES]


def verdict(root: Path, command: str) -> tuple[int, str]:
    done = penguin(root, "policy", "test", command)
    assert "Traceback" not in done.stderr
    return done.returncode, done.stdout.strip()


def add_a_model(root: Path) -> None:
    ok(penguin(root, "model", "add", "--provider", "openai", "--model-id", "gpt-4o"))


def test_9_3_a_new_project_file_lists_the_factory_rules(tmp_path: Path) -> None:
    add_a_model(tmp_path)
    path = project_file(tmp_path)
    assert mode(path) == 0o600
    text = path.read_text()
    assert text.count("\n[[command_policy.rules]]\n") == len(FACTORY_RULES)
    for rule in FACTORY_RULES:
        assert f'name = "{rule.name}"\n' in text
    project = load_project_config(path)
    rules = project.policy_rules()
    assert rules is not None
    assert [(r.name, r.pattern, r.description, r.enabled) for r in rules] == [
        (r.name, r.pattern, r.description, True) for r in FACTORY_RULES
    ]
    assert CommandPolicy.from_config(project.command_policy) == CommandPolicy()
    # Later edits of the models leave the rules as they are.
    ok(penguin(tmp_path, "model", "add", "--provider", "openai", "--model-id", "gpt-4o-mini"))
    assert path.read_text().count("\n[[command_policy.rules]]\n") == len(FACTORY_RULES)


def test_9_3_an_existing_project_file_is_not_rewritten_with_rules(tmp_path: Path) -> None:
    path = project_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text('# mine\n[[models]]\nprovider = "openai"\nmodel_id = "gpt-4o"\n')
    path.chmod(0o600)
    add_a_model(tmp_path)
    assert "command_policy" not in path.read_text()
    assert load_project_config(path).policy_rules() is None


def test_9_3_policy_list_without_a_file_shows_the_factory_rules_and_writes_nothing(
    tmp_path: Path,
) -> None:
    out = ok(penguin(tmp_path, "policy", "list")).splitlines()
    path = project_file(tmp_path)
    assert out[0] == f"The command policy of {path} is on."
    assert out[1].startswith("The file lists no rules, so the factory rules apply")
    assert out[2].split() == ["NAME", "ENABLED", "DESCRIPTION"]
    assert [line.split()[:2] for line in out[3:]] == [[name, "yes"] for name in FACTORY_NAMES]
    assert not path.exists()


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("rm -rf build", (1, "forbidden by rm-recursive-force")),
        ("sudo /sbin/mkfs.ext4 /dev/sdb1", (1, "forbidden by mkfs")),
        ("grep -rf p .", (0, "allowed")),
        ("ls -la", (0, "allowed")),
    ],
)
def test_9_3_policy_test_prints_the_rule_or_allowed(
    tmp_path: Path, command: str, expected: tuple[int, str]
) -> None:
    assert verdict(tmp_path, command) == expected
    assert not project_file(tmp_path).exists()


def test_9_3_disable_and_enable_materialise_the_factory_rules_and_keep_comments(
    tmp_path: Path,
) -> None:
    path = project_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text('# my notes\n[[models]]  # prod\nprovider = "openai"\nmodel_id = "gpt-4o"\n')
    path.chmod(0o600)
    out = ok(penguin(tmp_path, "policy", "disable", "mkfs"))
    assert "the factory rules were written into" in out
    assert "Disabled rule mkfs." in out
    text = path.read_text()
    assert text.startswith("# my notes\n[[models]]  # prod\n")
    assert text.count("\n[[command_policy.rules]]\n") == len(FACTORY_RULES)
    assert verdict(tmp_path, "mkfs.ext4 disk.img") == (0, "allowed")
    listing = ok(penguin(tmp_path, "policy", "list"))
    assert "mkfs                      no" in listing
    assert "The file lists no rules" not in listing
    assert ok(penguin(tmp_path, "policy", "disable", "mkfs")).strip() == (
        "Rule mkfs is already disabled."
    )
    assert ok(penguin(tmp_path, "policy", "enable", "mkfs")).strip() == "Enabled rule mkfs."
    assert verdict(tmp_path, "mkfs.ext4 disk.img") == (1, "forbidden by mkfs")
    assert os.listdir(path.parent) == [".project_config.toml"]  # no temporary left behind


def test_9_3_add_and_remove(tmp_path: Path) -> None:
    out = ok(
        penguin(
            tmp_path,
            "policy",
            "add",
            "no-force-push",
            r"git push\s.*(--force|-f)\b",
            "--description",
            "no force pushes",
        )
    )
    path = project_file(tmp_path)
    assert f"Added rule no-force-push to the command policy of {path}." in out
    assert verdict(tmp_path, "git push origin main --force") == (1, "forbidden by no-force-push")
    assert verdict(tmp_path, "rm -rf build") == (1, "forbidden by rm-recursive-force")
    assert "pattern = 'git push\\s.*(--force|-f)\\b'\n" in path.read_text()
    rules = load_project_config(path).policy_rules()
    assert rules is not None
    assert rules[-1] == PolicyRuleConfig(
        "no-force-push", r"git push\s.*(--force|-f)\b", "no force pushes"
    )
    fails(
        penguin(tmp_path, "policy", "add", "no-force-push", "x"),
        'a rule named "no-force-push" is already in the command policy',
    )
    assert "Removed rule rm-recursive-force" in ok(
        penguin(tmp_path, "policy", "remove", "rm-recursive-force")
    )
    assert verdict(tmp_path, "rm -rf build") == (0, "allowed")
    for name in [*FACTORY_NAMES[1:], "no-force-push"]:
        out = ok(penguin(tmp_path, "policy", "remove", name))
    assert "No rules are left: the command policy forbids nothing." in out
    assert load_project_config(path).policy_rules() == ()  # rules = [], not the factory set
    assert verdict(tmp_path, "mkfs.ext4 /dev/sda") == (0, "allowed")


def test_9_3_add_refuses_an_uncompilable_pattern_and_leaves_the_file(tmp_path: Path) -> None:
    message = fails(
        penguin(tmp_path, "policy", "add", "broken", "rm ("),
        "the pattern of rule 'broken' is not a valid Python regular expression "
        "(missing ), unterminated subpattern at position 3); nothing was changed",
    )
    assert message
    assert not project_file(tmp_path).exists()
    add_a_model(tmp_path)
    before = project_file(tmp_path).read_bytes()
    fails(penguin(tmp_path, "policy", "add", "broken", "[a-"), "unterminated character set")
    assert project_file(tmp_path).read_bytes() == before


def test_9_3_unknown_names_are_a_clear_error_and_change_nothing(tmp_path: Path) -> None:
    add_a_model(tmp_path)
    before = project_file(tmp_path).read_bytes()
    for action in ("enable", "disable", "remove"):
        fails(
            penguin(tmp_path, "policy", action, "rm-rf"),
            'no rule named "rm-rf" in the command policy (its rules: rm-recursive-force, mkfs,',
        )
    assert project_file(tmp_path).read_bytes() == before
    # Without a file there is nothing to materialise either.
    fails(penguin(tmp_path, "policy", "remove", "x", "--project-id", "other"), 'no rule named "x"')
    assert not project_file(tmp_path, "other").exists()


def test_9_3_a_hand_edited_uncompilable_pattern_is_skipped_with_a_warning(tmp_path: Path) -> None:
    path = project_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(
        "[command_policy]\n"
        '[[command_policy.rules]]\nname = "broken"\npattern = "rm ("\n'
        '[[command_policy.rules]]\nname = "danger"\npattern = "danger"\n'
    )
    path.chmod(0o600)
    done = penguin(tmp_path, "policy", "list")
    assert done.returncode == 0
    assert "broken  skipped" in done.stdout
    assert "danger  yes" in done.stdout
    warning = '[penguin] command policy rule "broken" skipped: its pattern is not a valid'
    assert warning in done.stderr
    done = penguin(tmp_path, "policy", "test", "run danger now")
    assert (done.returncode, done.stdout) == (1, "forbidden by danger\n")
    assert warning in done.stderr


def test_9_3_a_policy_that_is_off_allows_everything_and_says_so(tmp_path: Path) -> None:
    path = project_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("[command_policy]\nenabled = false\n")
    path.chmod(0o600)
    done = penguin(tmp_path, "policy", "test", "rm -rf /")
    assert (done.returncode, done.stdout) == (0, "allowed\n")
    assert "the command policy is off" in done.stderr
    assert "is off (command_policy.enabled = false)." in ok(penguin(tmp_path, "policy", "list"))


def test_9_3_policy_help_and_usage(tmp_path: Path) -> None:
    done = penguin(tmp_path, "policy", with_root=False)
    assert done.returncode == 1
    assert "usage: penguin config policy" in done.stderr
    for action in ("list", "enable", "disable", "add", "remove", "test"):
        done = penguin(tmp_path, "policy", action, "--help", with_root=False)
        assert done.returncode == 0
        assert "examples:" in done.stdout
    assert penguin(tmp_path, "policy", "add", "only-a-name").returncode == 2
