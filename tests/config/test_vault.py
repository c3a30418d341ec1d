"""An agent's vault, ``agent_state/.vault.toml``: private, atomic, comment-keeping."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from penguin.config import ConfigError, list_vault_keys, load_vault, remove_vault, set_vault


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_missing_vault_is_empty(tmp_path: Path) -> None:
    assert load_vault(tmp_path / ".vault.toml") == {}
    assert list_vault_keys(tmp_path / ".vault.toml") == []


def test_set_creates_a_private_file_and_its_directories(tmp_path: Path) -> None:
    path = tmp_path / "agent_state" / ".vault.toml"
    set_vault(path, "GITHUB_TOKEN", "ghp_secret")
    assert mode(path) == 0o600
    assert load_vault(path) == {"GITHUB_TOKEN": "ghp_secret"}
    assert path.read_text().startswith("#")  # a header explains the file
    assert sorted(os.listdir(path.parent)) == [".vault.toml"]  # no temporary left


def test_set_replaces_and_keeps_order_and_comments(tmp_path: Path) -> None:
    path = tmp_path / ".vault.toml"
    path.write_text('# my secrets\nA = "1"  # first\nB = "2"\n')
    path.chmod(0o600)
    set_vault(path, "A", "one")
    set_vault(path, "C", "three")
    text = path.read_text()
    assert text.startswith("# my secrets\n")
    assert 'A = "one"  # first' in text
    assert list_vault_keys(path) == ["A", "B", "C"]
    assert load_vault(path) == {"A": "one", "B": "2", "C": "three"}


def test_values_with_quotes_newlines_and_unicode_round_trip(tmp_path: Path) -> None:
    path = tmp_path / ".vault.toml"
    tricky = 'multi\nline "quoted" \\ back — ünïcode\t'
    set_vault(path, "PEM", tricky)
    assert load_vault(path) == {"PEM": tricky}


def test_remove(tmp_path: Path) -> None:
    path = tmp_path / ".vault.toml"
    set_vault(path, "A", "1")
    set_vault(path, "B", "2")
    assert remove_vault(path, "A") is True
    assert load_vault(path) == {"B": "2"}
    assert remove_vault(path, "A") is False
    assert remove_vault(tmp_path / "missing.toml", "A") is False
    assert not (tmp_path / "missing.toml").exists()


@pytest.mark.parametrize("bad", ["", "1ABC", "A-B", "A B", "A.B", "é"])
def test_keys_must_be_environment_variable_names(tmp_path: Path, bad: str) -> None:
    path = tmp_path / ".vault.toml"
    with pytest.raises(ValueError, match="environment variable name"):
        set_vault(path, bad, "x")
    assert not path.exists()
    with pytest.raises(ValueError, match="environment variable name"):
        remove_vault(path, bad)


def test_nul_in_a_value_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="NUL"):
        set_vault(tmp_path / ".vault.toml", "A", "x\x00y")


def test_a_looser_mode_is_tightened_on_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / ".vault.toml"
    path.write_text('A = "1"\n')
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="penguin"):
        assert load_vault(path) == {"A": "1"}
    assert mode(path) == 0o600
    assert "0644" in caplog.text
    assert "set it to 0600" in caplog.text


def test_a_looser_mode_is_tightened_on_write(tmp_path: Path) -> None:
    path = tmp_path / ".vault.toml"
    path.write_text('A = "1"\n')
    path.chmod(0o666)
    set_vault(path, "B", "2")
    assert mode(path) == 0o600


def test_broken_toml_names_file_and_line_and_is_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / ".vault.toml"
    broken = 'A = "1"\nB = \n'
    path.write_text(broken)
    with pytest.raises(ConfigError) as caught:
        load_vault(path)
    assert caught.value.line == 2
    assert str(caught.value).startswith(f"{path}:2: invalid TOML")
    with pytest.raises(ConfigError):
        set_vault(path, "C", "3")
    assert path.read_text() == broken


def test_non_string_values_are_errors_that_never_show_the_value(tmp_path: Path) -> None:
    path = tmp_path / ".vault.toml"
    path.write_text('A = "1"\nPIN = 918273\n')
    with pytest.raises(ConfigError) as caught:
        load_vault(path)
    error = caught.value
    assert (error.line, error.field) == (2, "PIN")
    assert "expected a string" in str(error)
    assert "918273" not in str(error)


def test_tables_and_bad_names_in_the_file_are_errors(tmp_path: Path) -> None:
    path = tmp_path / ".vault.toml"
    path.write_text('A = "1"\n\n[section]\nB = "2"\n')
    with pytest.raises(ConfigError) as caught:
        load_vault(path)
    assert (caught.value.line, caught.value.field) == (3, "section")
    path.write_text('"NOT-A-NAME" = "x"\n')
    with pytest.raises(ConfigError, match="not an environment variable name") as caught:
        load_vault(path)
    assert caught.value.line == 1
