"""``penguin config`` writes the same bytes for the same edits (issue 10 item 3).

Each case starts from a fixed file (or none), runs a fixed sequence of real ``penguin
config`` commands and compares the file with a golden copy under ``golden/``. The golden
copies were written by the code as it was before ``config/_project.py`` was split, so a
refactoring of how the project file and the vault are edited must leave them unchanged.
The sequences cover what the rewriting code decides: entries updated in place, removed
and appended, references added, changed and cleared, an inline ``models`` array and an
inline ``rules`` array rewritten as tables, the factory rules written out, new tables
before and after other tables (blank lines), patterns in literal and multi-line literal
strings, and the headers of new files.

A deliberate change of the format regenerates them: ``python -m tests.cli.test_config_files``.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Final

import attrs
import pytest

GOLDEN: Final = Path(__file__).parent / "golden"


@attrs.frozen
class Case:
    name: str
    file: str  # relative to the data root
    start: str | None  # the file's text before the first command; None: no file
    commands: tuple[tuple[str, ...], ...]
    stdin: tuple[str, ...] = ()  # one per command that reads one; "" for the others


PROJECT = "default_project/.project_config.toml"
VAULT = "default_project/agents/default_agent/agent_state/.vault.toml"

HAND_WRITTEN = """\
# my project: hand-written
default_model = { provider = "openai", model_id = "gpt-4o" }  # the usual one
mystery = "kept"

[[models]]  # the first
provider = "openai"
model_id = "gpt-4o"
api_key_env = "OPENAI_API_KEY"
note = "unknown to penguin"  # stays

[[models]]
provider = "local"
model_id = "old"
base_url = "http://localhost:9000/v1"
vision = false

[command_policy]
enabled = true  # on
rules = [ { name = "inline-rule", pattern = 'rm\\s', description = "an inline one" } ]

[other]
x = 1
"""

INLINE_MODELS = """\
models = [ { provider = "ollama", model_id = "llama3" } ]

[command_policy]
enabled = true

[[models_notes]]
text = "a table after the policy"
"""

CASES: Final = (
    Case(
        "hand_written",
        PROJECT,
        HAND_WRITTEN,
        (
            (
                "model", "add", "--provider", "local", "--model-id", "qwen",
                "--base-url", "http://localhost:8000/v1", "--api-key-env", "QWEN_KEY",
                "--context-window", "32768", "--no-vision",
            ),
            ("model", "add", "--provider", "ollama", "--model-id", "llama3", "--set-default"),
            ("model", "vision", "openai", "gpt-4o"),
            ("model", "add", "--provider", "openai", "--model-id", "gpt-4o",
             "--context-window", "128000"),
            ("model", "remove", "local", "old"),
            ("policy", "add", "no-force-push", r"git push\s.*(--force|-f)\b",
             "--description", "no force pushes"),
            ("policy", "add", "quoted", "echo 'hi'", "--description", "it's 'quoted'"),
            ("policy", "disable", "inline-rule"),
            ("policy", "enable", "inline-rule"),
            ("policy", "disable", "no-force-push"),
            ("policy", "remove", "inline-rule"),
            ("model", "vision", "--clear"),
            ("model", "default", "local", "qwen"),
            ("model", "add", "--provider", "openai", "--model-id", "gpt-4o", "--no-vision"),
        ),
    ),
    Case(
        "new_file",
        PROJECT,
        None,
        (
            ("model", "add", "--provider", "openai", "--model-id", "gpt-4o", "--api-key", "-",
             "--set-default"),
            ("model", "add", "--provider", "deepseek", "--model-id", "deepseek-chat",
             "--api-key-env", "DEEPSEEK_KEY"),
            ("policy", "disable", "mkfs"),
            ("policy", "add", "no-sudo", r"^\s*sudo\b", "--description", "no sudo"),
            ("policy", "remove", "fork-bomb"),
            ("model", "remove", "openai", "gpt-4o"),
        ),
        ("sk-stand-in-key\n",),
    ),
    Case(
        "policy_first",
        PROJECT,
        None,
        (
            ("policy", "add", "a", "a b", "--description", "first"),
            ("model", "add", "--provider", "openrouter", "--model-id", "x/y", "--set-default"),
            ("policy", "remove", "a"),
        ),
    ),
    Case(
        "inline_models",
        PROJECT,
        INLINE_MODELS,
        (
            ("policy", "disable", "dd-to-block-device"),
            ("model", "add", "--provider", "ollama", "--model-id", "qwen3", "--set-default"),
            ("model", "add", "--provider", "ollama", "--model-id", "llama3", "--no-vision"),
        ),
    ),
    Case(
        "vault",
        VAULT,
        '# my secrets\nB = "2"  # second\nA = "1"\n',
        (
            ("vault", "set", "C", "three"),
            ("vault", "set", "A", "-"),
            ("vault", "set", "PEM", "-"),
            ("vault", "remove", "B"),
        ),
        ("", "one\n", "line1\nline2\n", ""),
    ),
    Case(
        "new_vault",
        VAULT,
        None,
        (("vault", "set", "GITHUB_TOKEN", "ghp_stand_in"), ("vault", "set", "X", "y")),
    ),
)  # fmt: skip


def replay(case: Case, root: Path) -> Path:
    """Run the case's commands against a fresh data root; the file they edited."""
    path = root / case.file
    if case.start is not None:
        path.parent.mkdir(parents=True)
        path.write_text(case.start)
        path.chmod(0o644)
    environment = {**os.environ, "PENGUIN_HOME": str(root / "not-used")}
    for index, command in enumerate(case.commands):
        done = subprocess.run(
            [sys.executable, "-m", "penguin", "config", *command, "--root", str(root)],
            input=case.stdin[index] if index < len(case.stdin) else "",
            capture_output=True,
            text=True,
            env=environment,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, (command, done.stderr)
    return path


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_10_3_the_files_penguin_config_writes_are_byte_identical(
    case: Case, tmp_path: Path
) -> None:
    path = replay(case, tmp_path)
    assert path.read_bytes() == (GOLDEN / f"{case.name}.toml").read_bytes()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert os.listdir(path.parent) == [path.name]  # no temporary left behind


if __name__ == "__main__":
    import tempfile

    GOLDEN.mkdir(exist_ok=True)
    for case in CASES:
        with tempfile.TemporaryDirectory() as root:
            written = replay(case, Path(root))
            (GOLDEN / f"{case.name}.toml").write_bytes(written.read_bytes())
            print(f"wrote {GOLDEN / case.name}.toml")
