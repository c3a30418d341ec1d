"""The system prompt: default template, rendering, AGENTS.md, its place in system_config.yaml."""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import sys
import textwrap
from pathlib import Path

import pytest

from penguin.config import (
    DEFAULT_SYSTEM_PROMPT,
    SECRET_FILE_NAMES,
    ConfigError,
    agents_md_block,
    default_tools,
    dump_default_system_config,
    load_system_config,
    render_system_prompt,
    system_prompt_values,
    write_system_config,
)
from penguin.config._prompt import AGENTS_MD_LIMIT, AGENTS_MD_READ_LIMIT

PLACEHOLDERS = {
    "CWD",
    "DATE",
    "PLATFORM",
    "OS",
    "ARCH",
    "SHELL",
    "MODEL_ID",
    "AGENT_ID",
    "SESSION_ID",
    "AGENTS_MD",
}


# ------------------------------------------------------------------ rendering


def test_render_replaces_known_placeholders_and_leaves_the_rest() -> None:
    template = "at {{CWD}} on {{DATE}}; {{UNKNOWN}} {{ CWD }} {{cwd}} {CWD} {{CWD}}"
    rendered = render_system_prompt(template, {"CWD": "/w", "DATE": "2025-01-02"})
    assert rendered == "at /w on 2025-01-02; {{UNKNOWN}} {{ CWD }} {{cwd}} {CWD} /w"


def test_render_inserts_values_verbatim_in_one_pass() -> None:
    rendered = render_system_prompt("{{A}}|{{B}}", {"A": "{{B}}", "B": "\\1 $x"})
    assert rendered == "{{B}}|\\1 $x"


def test_render_of_an_empty_mapping_is_the_identity() -> None:
    assert render_system_prompt(DEFAULT_SYSTEM_PROMPT, {}) == DEFAULT_SYSTEM_PROMPT


# ------------------------------------------------------------------ the default template


def test_default_template_uses_every_placeholder_and_no_other() -> None:
    found = set(re.findall(r"\{\{([A-Z_]+)\}\}", DEFAULT_SYSTEM_PROMPT))
    assert found == PLACEHOLDERS


@pytest.mark.parametrize(
    "marker",
    [
        "[turn_aborted]",
        "[turn_retried]",
        "[context_summary]",
        "[user_steering]",
        "[background_task_done]",
        "[developer_instructions]",
    ],
)
def test_default_template_explains_the_harness_markers(marker: str) -> None:
    assert marker in DEFAULT_SYSTEM_PROMPT


def test_default_template_names_the_tools_it_explains() -> None:
    for tool in default_tools():
        assert tool.name in DEFAULT_SYSTEM_PROMPT, tool.name
    for argument in ("run_in_background", "yield_time_ms", "process_id", "replace_all"):
        assert argument in DEFAULT_SYSTEM_PROMPT


def test_default_template_tells_not_to_rerun_aborted_calls() -> None:
    aborted = DEFAULT_SYSTEM_PROMPT.split("[turn_aborted]", 1)[1].split("\n- [", 1)[0]
    assert "do not run them again" in aborted


# ------------------------------------------------------------------ AGENTS.md


def test_agents_md_block_wraps_the_file(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("\n# Rules\nUse tabs.\n\n")
    assert agents_md_block(tmp_path) == (
        "\n[developer_instructions]\n# Rules\nUse tabs.\n[/developer_instructions]\n"
    )


def test_agents_md_block_is_empty_without_a_file(tmp_path: Path) -> None:
    assert agents_md_block(tmp_path) == ""
    (tmp_path / "AGENTS.md").write_text("  \n\n")
    assert agents_md_block(tmp_path) == ""
    assert agents_md_block(tmp_path / "missing-dir") == ""


def test_agents_md_block_cuts_a_huge_file_and_replaces_bad_bytes(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_bytes(b"caf\xe9 " + b"x" * 40_000)
    block = agents_md_block(tmp_path)
    assert block.startswith("\n[developer_instructions]\ncaf\ufffd x")
    assert "[AGENTS.md truncated: 8005 more characters not shown]" in block
    assert block.endswith("\n[/developer_instructions]\n")


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "penguin"]


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_agents_md_block_leaves_out_what_is_not_a_regular_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A link to a device reads without end; a named pipe waits for a writer."""
    caplog.set_level(logging.WARNING, logger="penguin")
    agents = tmp_path / "AGENTS.md"
    agents.symlink_to("/dev/zero")
    assert agents_md_block(tmp_path) == ""  # returned at all: nothing was read
    agents.unlink()
    os.mkfifo(agents)
    assert agents_md_block(tmp_path) == ""  # returned at once: no writer was waited for
    agents.unlink()
    agents.mkdir()
    assert agents_md_block(tmp_path) == ""
    assert (
        _warnings(caplog)
        == [f"[penguin] {agents} is not a regular file: left out of the system prompt"] * 3
    )


@pytest.mark.parametrize("store", sorted(SECRET_FILE_NAMES))
def test_agents_md_block_never_carries_a_secret_store(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, store: str
) -> None:
    """A cloned repository's AGENTS.md may be a link to the user's keys: 3.5.3's guard."""
    caplog.set_level(logging.WARNING, logger="penguin")
    kept = tmp_path / "state"
    kept.mkdir()
    (kept / store.upper()).write_text('OPENAI_API_KEY = "sk-secret"\n')
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "AGENTS.md").symlink_to(kept / store.upper())
    assert agents_md_block(workspace) == ""
    assert _warnings(caplog) == [
        f"[penguin] {workspace / 'AGENTS.md'} leads to {store}, which holds the user's"
        " secrets: left out of the system prompt"
    ]
    (workspace / "AGENTS.md").unlink()
    (workspace / "AGENTS.md").symlink_to(tmp_path / "state" / "notes.md")
    (kept / "notes.md").write_text("Use tabs.\n")
    assert "Use tabs." in agents_md_block(workspace)  # a link elsewhere is read


def test_agents_md_block_reads_at_most_its_limit_of_a_huge_file(tmp_path: Path) -> None:
    size = AGENTS_MD_READ_LIMIT + 1000
    with (tmp_path / "AGENTS.md").open("wb") as file:
        file.write(b"x" * 10)
        file.truncate(size)  # the rest reads as NUL characters
    block = agents_md_block(tmp_path)
    shown = AGENTS_MD_READ_LIMIT - AGENTS_MD_LIMIT
    assert block.endswith(
        f"\n[AGENTS.md truncated: {shown} more characters not shown,"
        " and 1000 more bytes not read]\n[/developer_instructions]\n"
    )


# ------------------------------------------------------------------ values


def test_system_prompt_values(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Be terse.\n")
    values = system_prompt_values(
        workspace_dir=tmp_path,
        model_id="gpt-4o",
        session_id="session-2025-01-02-03-04-05-abcdef01",
        agent_id="reviewer",
        shell="zsh",
        now=dt.datetime(2025, 1, 2, 3, 4, 5),
    )
    assert set(values) == PLACEHOLDERS
    assert values["CWD"] == str(tmp_path.absolute())
    assert values["DATE"] == "2025-01-02"
    assert values["PLATFORM"] == sys.platform
    assert values["SHELL"] == "zsh"
    assert values["MODEL_ID"] == "gpt-4o"
    assert values["AGENT_ID"] == "reviewer"
    assert values["SESSION_ID"] == "session-2025-01-02-03-04-05-abcdef01"
    assert values["OS"]
    assert values["ARCH"]
    assert "Be terse." in values["AGENTS_MD"]

    prompt = render_system_prompt(DEFAULT_SYSTEM_PROMPT, values)
    assert "{{" not in prompt
    assert f"Workspace (the current directory; relative paths resolve here): {tmp_path}" in prompt
    assert 'Begin the prompt with the line "Caller agent: reviewer".' in prompt
    assert prompt.endswith("[developer_instructions]\nBe terse.\n[/developer_instructions]\n")


def test_rendered_default_without_agents_md_ends_cleanly(tmp_path: Path) -> None:
    values = system_prompt_values(workspace_dir=tmp_path, model_id="m", session_id="s")
    assert values["AGENTS_MD"] == ""
    assert values["SHELL"] == "bash"
    assert values["AGENT_ID"] == "default_agent"
    prompt = render_system_prompt(DEFAULT_SYSTEM_PROMPT, values)
    assert prompt.endswith("and commands.\n")


# ------------------------------------------------------------------ system_config.yaml


def test_default_system_config_holds_the_template_as_a_literal_block(tmp_path: Path) -> None:
    path = tmp_path / "system_config.yaml"
    dump_default_system_config(path)
    text = path.read_text(encoding="utf-8")
    assert "\nsystem_prompt: |-\n  You are a software engineering and operations agent." in text
    assert "{{AGENTS_MD}}" in text
    config = load_system_config(path)
    assert config.system_prompt == DEFAULT_SYSTEM_PROMPT
    assert config.builtin_tools == tuple(default_tools())


def test_absent_or_null_system_prompt_means_the_built_in_one(tmp_path: Path) -> None:
    path = tmp_path / "system_config.yaml"
    for text in ("tools: {builtin: []}\n", "system_prompt:\n"):
        path.write_text(text)
        config = load_system_config(path)
        assert config.system_prompt == DEFAULT_SYSTEM_PROMPT


def test_a_custom_system_prompt_is_read_and_edits_keep_comments(tmp_path: Path) -> None:
    path = tmp_path / "system_config.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            # mine
            system_prompt: |  # short and sweet
              You review code in {{CWD}}.
            """
        )
    )
    config = load_system_config(path)
    assert config.system_prompt == "You review code in {{CWD}}.\n"
    config.document["tools"] = {"builtin": []}
    write_system_config(path, config.document)
    assert path.read_text().startswith("# mine\nsystem_prompt: |  # short and sweet\n")


def test_an_empty_system_prompt_is_allowed(tmp_path: Path) -> None:
    path = tmp_path / "system_config.yaml"
    path.write_text('system_prompt: ""\n')
    assert load_system_config(path).system_prompt == ""


def test_a_non_string_system_prompt_is_an_error_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "system_config.yaml"
    path.write_text("# x\nsystem_prompt:\n  - a list\n")
    with pytest.raises(ConfigError) as caught:
        load_system_config(path)
    assert (caught.value.line, caught.value.field) == (2, "system_prompt")
    assert "expected a string" in str(caught.value)
