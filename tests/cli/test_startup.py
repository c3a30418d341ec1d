"""Issue 9 item 7: the ``penguin`` command loads only what the subcommand it runs needs.

The times themselves are measured by ``benchmarks/startup.py``; these tests pin the
cause, which is deterministic: which modules a fresh interpreter has loaded after
``penguin --version`` and after one ``penguin tool`` call, and that loading the
subcommands lazily leaves every help text complete and unchanged.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from penguin.cli import COMMANDS, build_parser, main

# Runs main(argv) in a fresh interpreter and prints the names of the loaded modules.
_PROBE = """
import json, sys
from penguin.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
print("\\n" + json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def loaded_after(*argv: str, cwd: Path) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    report = json.loads(done.stdout.rsplit("\n", 2)[-2])
    assert report["code"] in (0, None), done.stderr
    return set(report["modules"])


def top_level(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


def test_9_7_version_loads_no_library_and_no_dependency(tmp_path: Path) -> None:
    modules = loaded_after("--version", cwd=tmp_path)
    assert {m for m in modules if m.startswith("penguin")} == {
        "penguin",
        "penguin._errors",  # the exception root: a module with no imports
        "penguin._lazy",
        "penguin._version",
        "penguin.cli",
    }
    for dependency in ("trio", "attrs", "attr", "cattrs", "httpx", "ruamel", "tomlkit", "psutil"):
        assert dependency not in top_level(modules), dependency


def test_9_7_a_tool_call_loads_neither_the_model_client_nor_the_agent_stack(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    modules = loaded_after("tool", "read_file", '{"file_path": "a.txt"}', cwd=tmp_path)
    assert "penguin.environment" in modules  # the call did run through an Environment
    for name in (
        "penguin.agent",
        "penguin.engine",
        "penguin.llm",
        "penguin.trace",
        "penguin.approval",
        "penguin.protocol._codec",
        "penguin.config._project",
        "penguin.config._project_edits",
        "penguin.config._toml",
        "penguin.config._vault",
        "penguin.cli._run",
        "penguin.cli._demo",
        "penguin.cli._config",
        "penguin.environment.mcp._connection",
    ):
        assert name not in modules, name
    for dependency in ("httpx", "h11", "cattrs", "tomlkit", "mcp", "mcp_types", "anyio"):
        assert dependency not in top_level(modules), dependency


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit:
        main(argv)
    assert exit.value.code == 0
    return capsys.readouterr().out


def test_9_7_top_level_help_lists_every_subcommand_without_loading_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shown = _help(["--help"], capsys)
    for name, (_, summary) in COMMANDS.items():
        assert f"    {name:<9} {summary}" in shown
    complete = build_parser().format_help()
    assert shown == complete


@pytest.mark.parametrize(
    "argv",
    [
        ["run"],
        ["chat"],
        ["demo"],
        ["tool"],
        ["config"],
        ["config", "model"],
        ["config", "model", "add"],
        ["config", "policy"],
        ["config", "policy", "add"],
        ["config", "vault"],
        ["config", "vault", "set"],
        ["batch"],
        ["config", "mcp"],
        ["config", "mcp", "add"],
    ],
)
def test_9_7_each_subcommand_help_is_complete(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    shown = _help([*argv, "--help"], capsys)
    parser = build_parser()  # every subcommand filled in
    with pytest.raises(SystemExit):
        parser.parse_args([*argv, "--help"])
    assert shown == capsys.readouterr().out
    assert "usage: penguin " + " ".join(argv) in shown
