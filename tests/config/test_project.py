"""A project's ``.project_config.toml``: models, references, command policy, edits, errors."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from penguin.approval import CommandPolicy
from penguin.config import (
    ConfigError,
    ModelEntry,
    ModelKey,
    ProjectConfig,
    add_model,
    clear_vision_model,
    load_project_config,
    remove_model,
    resolve_model,
    save_project_config,
    set_default_model,
    set_vision_model,
)

NO_MODEL = (
    "No model is configured. Add one with: penguin config model add --provider P "
    "--model-id M --base-url URL --api-key KEY --set-default"
)

GPT = ModelEntry(
    provider="openai",
    model_id="gpt-4o",
    base_url="https://api.openai.com/v1",
    api_key_env="OPENAI_API_KEY",
    context_window=128000,
)
QWEN = ModelEntry(
    provider="local",
    model_id="qwen",
    base_url="http://localhost:8000/v1",
    api_key="sk-very-secret",
    vision=False,
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / ".project_config.toml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    path.chmod(0o600)
    return path


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def two_models(path: Path) -> ProjectConfig:
    config = add_model(ProjectConfig(path=path), GPT, set_default=True)
    return add_model(config, QWEN)


# ------------------------------------------------------------------ load and save


def test_missing_file_is_an_empty_configuration(tmp_path: Path) -> None:
    path = tmp_path / ".project_config.toml"
    config = load_project_config(path)
    assert config == ProjectConfig(path=path)
    assert config.models == ()
    assert config.default_model is None
    assert config.command_policy is None
    assert not path.exists()


def test_save_then_load_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "proj" / ".project_config.toml"
    config = set_vision_model(two_models(path), "openai", "gpt-4o")
    save_project_config(path, config)
    assert load_project_config(path) == config
    assert mode(path) == 0o600
    assert os.listdir(path.parent) == [".project_config.toml"]  # no temporary left behind


def test_new_file_has_a_header_and_the_documented_shape(tmp_path: Path) -> None:
    path = tmp_path / ".project_config.toml"
    save_project_config(path, set_vision_model(two_models(path), "openai", "gpt-4o"))
    text = path.read_text()
    assert text.startswith("# penguin project configuration")
    assert 'default_model = {provider = "openai", model_id = "gpt-4o"}' in text
    assert 'vision_model = {provider = "openai", model_id = "gpt-4o"}' in text
    assert text.count("\n[[models]]\n") == 2
    assert 'api_key_env = "OPENAI_API_KEY"' in text
    assert "vision = false" in text
    assert "context_window = 128000" in text
    assert all(line == line.rstrip() for line in text.splitlines())


def test_edits_keep_comments_unknown_keys_and_layout(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        # my project — hand-written
        default_model = { provider = "openai", model_id = "gpt-4o" }  # the main one

        [[models]]  # production
        provider = "openai"
        model_id = "gpt-4o"
        api_key_env = "OPENAI_API_KEY"  # from my shell
        organisation = "acme"

        # a local model for experiments
        [[models]]
        provider = "local"
        model_id = "qwen"
        base_url = "http://localhost:8000/v1"

        [command_policy]
        enabled = true  # keep the factory rules
        """,
    )
    config = load_project_config(path)
    config = add_model(config, QWEN)  # update local/qwen: api key, vision
    config = add_model(
        config,
        ModelEntry(provider="ollama", model_id="llava", base_url="http://localhost:11434/v1"),
    )
    config = set_default_model(config, "local", "qwen")
    save_project_config(path, config)
    text = path.read_text()
    for kept in (
        "# my project — hand-written\n",
        "# the main one",
        "[[models]]  # production",
        'api_key_env = "OPENAI_API_KEY"  # from my shell',
        'organisation = "acme"',
        "# a local model for experiments",
        "enabled = true  # keep the factory rules",
    ):
        assert kept in text, kept
    assert 'default_model = {provider = "local", model_id = "qwen"}  # the main one' in text
    # The openai entry gave no base_url (implied for known providers): it stays absent.
    assert text.count("base_url =") == 2  # local/qwen and the new ollama entry
    # New keys of an existing entry go next to their neighbours, not after the comments.
    assert (
        'base_url = "http://localhost:8000/v1"\napi_key = "sk-very-secret"\nvision = false\n'
        in text
    )
    reloaded = load_project_config(path)
    assert reloaded.default_model == ModelKey("local", "qwen")
    assert [entry.key for entry in reloaded.models] == [
        ModelKey("openai", "gpt-4o"),
        ModelKey("local", "qwen"),
        ModelKey("ollama", "llava"),
    ]
    assert reloaded.find_model("local", "qwen") == QWEN
    assert reloaded.command_policy == {"enabled": True}


def test_saving_an_unchanged_file_changes_nothing(tmp_path: Path) -> None:
    original = """\
    # notes
    default_model = {provider = "openai", model_id = "gpt-4o"}

    [[models]]
    provider = "openai"   # odd spacing is kept
    model_id = "gpt-4o"

    [command_policy]
    enabled = false
    """
    path = write(tmp_path, original)
    save_project_config(path, load_project_config(path))
    assert path.read_text() == textwrap.dedent(original)


def test_switching_between_api_key_and_api_key_env(tmp_path: Path) -> None:
    path = tmp_path / ".project_config.toml"
    save_project_config(path, two_models(path))
    env_keyed = ModelEntry(
        provider="local",
        model_id="qwen",
        base_url="http://localhost:8000/v1",
        api_key_env="LOCAL_KEY",
    )
    save_project_config(path, add_model(load_project_config(path), env_keyed))
    text = path.read_text()
    assert "sk-very-secret" not in text
    assert 'api_key_env = "LOCAL_KEY"' in text
    assert load_project_config(path).find_model("local", "qwen") == env_keyed


def test_removing_every_model_removes_the_array(tmp_path: Path) -> None:
    path = tmp_path / ".project_config.toml"
    save_project_config(path, two_models(path))
    config, _ = remove_model(load_project_config(path), "openai", "gpt-4o")
    config, _ = remove_model(config, "local", "qwen")
    save_project_config(path, config)
    text = path.read_text()
    assert "models" not in text.replace("# [[models]]", "").split("# default_model")[-1]
    assert load_project_config(path) == ProjectConfig(path=path)


def test_a_looser_mode_is_tightened(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / ".project_config.toml"
    save_project_config(path, two_models(path))
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="penguin"):
        load_project_config(path)
    assert mode(path) == 0o600
    assert "readable by others" in caplog.text
    path.chmod(0o640)
    save_project_config(path, two_models(path))
    assert mode(path) == 0o600


def test_command_policy_table_feeds_the_approval_policy(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        r"""
        [command_policy]
        enabled = true

        [[command_policy.rules]]
        name = "no-force-push"
        pattern = 'git push\s.*(--force|-f)\b'

        [[command_policy.rules]]
        name = "off"
        pattern = "ls"
        enabled = false
        """,
    )
    config = load_project_config(path)
    policy = CommandPolicy.from_config(config.command_policy)
    assert [rule.name for rule in policy.rules if rule.enabled] == ["no-force-push"]
    rule = policy.match_command("git push origin main --force")
    assert rule is not None
    assert rule.name == "no-force-push"
    assert policy.match_command("ls -la") is None
    assert CommandPolicy.from_config(ProjectConfig(path=path).command_policy) == CommandPolicy()


def test_api_key_never_appears_in_repr() -> None:
    assert "sk-very-secret" not in repr(QWEN)
    assert "sk-very-secret" not in repr(add_model(ProjectConfig(path="x"), QWEN))


# ------------------------------------------------------------------ keys from the environment


def test_api_key_resolution_and_status() -> None:
    assert QWEN.resolved_api_key() == "sk-very-secret"
    assert QWEN.api_key_status() == "set"
    assert GPT.resolved_api_key({"OPENAI_API_KEY": "sk-env"}) == "sk-env"
    assert GPT.api_key_status({"OPENAI_API_KEY": "sk-env"}) == "from $OPENAI_API_KEY"
    assert GPT.resolved_api_key({}) is None
    assert GPT.resolved_api_key({"OPENAI_API_KEY": ""}) is None
    assert GPT.api_key_status({}) == "from $OPENAI_API_KEY (unset)"
    keyless = ModelEntry(provider="ollama", model_id="llama3", base_url="http://localhost:11434/v1")
    assert keyless.resolved_api_key() is None
    assert keyless.api_key_status() == "missing"


def test_api_key_env_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-os")
    assert GPT.resolved_api_key() == "sk-from-os"


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"provider": " "}, "provider must be a non-empty string"),
        ({"base_url": "localhost:8000"}, "base_url must be an http:// or https:// URL"),
        ({"api_key": "k"}, "either api_key or api_key_env"),
        ({"api_key_env": "NOT-A-NAME"}, "api_key_env must be an environment variable name"),
        ({"context_window": 0}, "context_window must be a positive"),
    ],
)
def test_model_entry_checks_its_fields(changes: dict[str, object], fragment: str) -> None:
    fields: dict[str, object] = {
        "provider": "openai",
        "model_id": "gpt-4o",
        "base_url": "https://api.openai.com/v1",
        "api_key_env": "OPENAI_API_KEY",
    }
    with pytest.raises(ValueError, match=fragment):
        ModelEntry(**{**fields, **changes})  # type: ignore[arg-type]


# ------------------------------------------------------------------ edits


def test_add_model_appends_updates_in_place_and_sets_default(tmp_path: Path) -> None:
    config = two_models(tmp_path / "p.toml")
    assert config.default_model == GPT.key
    updated_gpt = ModelEntry(provider="openai", model_id="gpt-4o", base_url="https://proxy/v1")
    config = add_model(config, updated_gpt)
    assert config.models == (updated_gpt, QWEN)
    assert config.default_model == GPT.key  # untouched without set_default
    config = add_model(config, QWEN, set_default=True)
    assert config.default_model == QWEN.key


def test_set_default_and_vision_need_a_configured_model(tmp_path: Path) -> None:
    config = two_models(tmp_path / "p.toml")
    with pytest.raises(ConfigError, match=r"no model openai/gpt-5 is configured \(configured: "):
        set_default_model(config, "openai", "gpt-5")
    with pytest.raises(ConfigError, match="vision = false"):
        set_vision_model(config, "local", "qwen")
    config = set_vision_model(config, "openai", "gpt-4o")
    assert config.vision_entry() == GPT
    assert clear_vision_model(config).vision_model is None


def test_turning_vision_off_clears_the_vision_reference(tmp_path: Path) -> None:
    config = set_vision_model(two_models(tmp_path / "p.toml"), "openai", "gpt-4o")
    blind = ModelEntry(provider="openai", model_id="gpt-4o", base_url=GPT.base_url, vision=False)
    assert add_model(config, blind).vision_model is None


def test_removing_the_default_and_vision_model_clears_and_reports_them(tmp_path: Path) -> None:
    config = set_vision_model(two_models(tmp_path / "p.toml"), "openai", "gpt-4o")
    removed, cleared = remove_model(config, "openai", "gpt-4o")
    assert cleared == ("default_model", "vision_model")
    assert removed.models == (QWEN,)
    assert removed.default_model is None
    assert removed.vision_model is None
    removed, cleared = remove_model(config, "local", "qwen")
    assert cleared == ()
    assert removed.default_model == GPT.key
    with pytest.raises(ConfigError, match="no model local/qwen is configured"):
        remove_model(removed, "local", "qwen")


# ------------------------------------------------------------------ resolve_model


def test_resolve_with_no_model_names_the_command_to_run(tmp_path: Path) -> None:
    path = tmp_path / ".project_config.toml"
    with pytest.raises(ConfigError) as caught:
        resolve_model(load_project_config(path))
    assert str(caught.value) == f"{path}: {NO_MODEL}"


def test_resolve_prefers_the_explicit_pair_then_the_default(tmp_path: Path) -> None:
    config = two_models(tmp_path / "p.toml")
    assert resolve_model(config) == GPT
    assert resolve_model(config, "local", "qwen") == QWEN


def test_resolve_an_unknown_pair_lists_the_configured_ones(tmp_path: Path) -> None:
    config = two_models(tmp_path / "p.toml")
    with pytest.raises(ConfigError) as caught:
        resolve_model(config, "openai", "gpt-5")
    message = str(caught.value)
    assert "no model openai/gpt-5 is configured (configured: openai/gpt-4o, local/qwen)" in message
    assert "penguin config model add --provider openai --model-id gpt-5" in message


def test_resolve_without_a_default(tmp_path: Path) -> None:
    one = add_model(ProjectConfig(path=tmp_path / "p.toml"), QWEN)
    assert resolve_model(one) == QWEN  # the only model needs no default
    two = add_model(one, GPT)
    with pytest.raises(ConfigError, match="no default model is set and 2 models") as caught:
        resolve_model(two)
    assert "penguin config model default PROVIDER MODEL_ID" in str(caught.value)


def test_resolve_a_dangling_default(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        default_model = { provider = "gone", model_id = "away" }
        vision_model = { provider = "gone", model_id = "away" }

        [[models]]
        provider = "openai"
        model_id = "gpt-4o"
        """,
    )
    config = load_project_config(path)  # loads: penguin config can repair it
    assert config.vision_entry() is None
    with pytest.raises(ConfigError) as caught:
        resolve_model(config)
    assert caught.value.field == "default_model"
    assert "default_model names gone/away, which is not configured" in str(caught.value)
    assert resolve_model(config, "openai", "gpt-4o").base_url == "https://api.openai.com/v1"


def test_resolve_needs_provider_and_model_id_together(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="together"):
        resolve_model(two_models(tmp_path / "p.toml"), provider="openai")


# ------------------------------------------------------------------ errors


def test_broken_toml_names_the_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, '[[models]]\nprovider = "openai"\nmodel_id = gpt-4o\n')
    with pytest.raises(ConfigError) as caught:
        load_project_config(path)
    assert caught.value.line == 3
    assert str(caught.value).startswith(f"{path}:3: invalid TOML")


BAD_ENTRY = """\
# line 1
[[models]]
provider = "openai"
model_id = "gpt-4o"

[[models]]
provider = "local"
model_id = "qwen"
base_url = "http://localhost:8000/v1"
{line_10}
"""


@pytest.mark.parametrize(
    ("line_10", "field", "fragment"),
    [
        ('vision = "yes"', "models[1].vision", "expected true or false, got 'yes'"),
        ("context_window = -5", "models[1].context_window", "expected a positive integer"),
        ("context_window = 1.5", "models[1].context_window", "expected a positive integer"),
        ("api_key_env = 'no way'", "models[1].api_key_env", "environment variable name"),
        ("model_id = 'again'", "models[1].model_id", "invalid TOML: defined twice"),
    ],
)
def test_a_bad_entry_names_file_line_and_field(
    tmp_path: Path, line_10: str, field: str | None, fragment: str
) -> None:
    path = write(tmp_path, BAD_ENTRY.format(line_10=line_10))
    with pytest.raises(ConfigError) as caught:
        load_project_config(path)
    error = caught.value
    assert error.path == str(path)
    assert error.line == 10
    assert error.field == field
    prefix = f"{path}:10: {field}: " if field else f"{path}:10: "
    assert str(error).startswith(prefix), str(error)
    assert fragment in str(error)


@pytest.mark.parametrize(
    ("text", "line", "field", "fragment"),
    [
        ("[[models]]\nmodel_id = 'm'\n", 1, "models[0]", 'missing "provider"'),
        (
            "\n[[models]]\nprovider = 'vllm'\nmodel_id = 'm'\n",
            2,
            "models[0].base_url",
            'missing; give the API root of provider "vllm"',
        ),
        (
            "[[models]]\nprovider = 'p'\nmodel_id = 'm'\nbase_url = 'ftp://x'\n",
            4,
            "models[0].base_url",
            "expected an http:// or https:// URL",
        ),
        (
            "[[models]]\nprovider = 'openai'\nmodel_id = 'm'\napi_key = 'k'\napi_key_env = 'K'\n",
            5,
            "models[0].api_key_env",
            "either api_key or api_key_env",
        ),
        (
            "[[models]]\nprovider = 'openai'\nmodel_id = 'm'\n\n"
            "[[models]]\nprovider = 'openai'\nmodel_id = 'm'\n",
            5,
            "models[1]",
            "duplicate model openai/m (first defined at models[0])",
        ),
        ("default_model = 'openai/gpt-4o'\n", 1, "default_model", "expected a table such as"),
        ("vision_model = { provider = 'p' }\n", 1, "vision_model", 'missing "model_id"'),
        (
            "default_model = { provider = 'p', model_id = 'm', x = 1 }\n",
            1,
            "default_model.x",
            "unknown key",
        ),
        ("models = 3\n", 1, "models", "expected [[models]] tables, got 3"),
        ("models = [1]\n", 1, "models[0]", "expected a table"),
        ("command_policy = true\n", 1, "command_policy", "expected a table"),
        ("[[models]]\nprovider = 'openai'\nmodel_id = ''\n", 3, "models[0].model_id", "empty"),
    ],
)
def test_structural_errors(tmp_path: Path, text: str, line: int, field: str, fragment: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_project_config(path)
    error = caught.value
    assert (error.line, error.field) == (line, field), str(error)
    assert str(error).startswith(f"{path}:{line}: {field}: ")
    assert fragment in str(error)


def test_a_bad_api_key_is_reported_without_its_value(tmp_path: Path) -> None:
    path = write(tmp_path, "[[models]]\nprovider = 'openai'\nmodel_id = 'm'\napi_key = 31415926\n")
    with pytest.raises(ConfigError) as caught:
        load_project_config(path)
    assert caught.value.field == "models[0].api_key"
    assert "expected a string, got an integer" in str(caught.value)
    assert "31415926" not in str(caught.value)


def test_unknown_keys_are_kept_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(
        tmp_path,
        """\
        default-model = { provider = "openai", model_id = "gpt-4o" }

        [[models]]
        provider = "openai"
        model_id = "gpt-4o"
        visoin = false
        """,
    )
    with caplog.at_level(logging.WARNING, logger="penguin"):
        config = load_project_config(path)
    assert config.default_model is None
    assert f"{path}:1: default-model: unknown key" in caplog.text
    assert 'did you mean "default_model"?' in caplog.text
    assert f"{path}:6: models[0].visoin: unknown key" in caplog.text
    assert 'did you mean "vision"?' in caplog.text
    save_project_config(path, config)
    assert "visoin = false" in path.read_text()


def test_line_numbers_survive_multi_line_strings_and_quoted_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '''\
        [[models]]
        provider = "openai"
        model_id = "a"
        notes = """
        [[models]]
        vision = "not this one"
        """
        "context_window" = 8

        [[models]]
        provider = "openai"
        model_id = "b"
        vision = "this one"
        ''',
    )
    with pytest.raises(ConfigError) as caught:
        load_project_config(path)
    assert (caught.value.line, caught.value.field) == (13, "models[1].vision")


def test_10_3_a_session_reads_its_project_without_loading_the_edits(tmp_path: Path) -> None:
    path = tmp_path / ".project_config.toml"
    save_project_config(path, add_model(ProjectConfig(path=path), GPT, set_default=True))
    probe = (
        "import sys\n"
        "import penguin.config as config\n"
        "project = config.load_project_config(sys.argv[1])\n"
        "print(config.resolve_model(project).key)\n"
        "print(sorted(name for name in sys.modules if name.startswith('penguin.config.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    resolved, modules = done.stdout.splitlines()
    assert resolved == "openai/gpt-4o"
    assert "'penguin.config._project'" in modules
    assert "'penguin.config._project_edits'" not in modules
