"""The public surface is deliberate: found by walking the package, the way trio tests its own.

A module is public when no part of its dotted name starts with an underscore; the list is
not written by hand, so a new public module is checked the day it appears. For each one:
every name in ``__all__`` exists (also the facades' lazily loaded ones), ``__all__`` is
unique and in the order ``ruff``'s RUF022 keeps it, and every public name the module
defines — read from its source, so ``TYPE_CHECKING`` imports and constants count — is in
``__all__`` or listed in :data:`NOT_EXPORTED` with the reason.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

import penguin

ROOT = Path(__file__).resolve().parents[1]


def _public_modules() -> list[tuple[str, bool]]:
    found = [("penguin", True)]
    for info in pkgutil.walk_packages(penguin.__path__, "penguin."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            found.append((info.name, info.ispkg))
    return found


PUBLIC = _public_modules()
PUBLIC_MODULES = [name for name, _ in PUBLIC]

# module -> {public name it defines but does not export: why}. Empty today; an entry
# must name a name the module still defines and does not export (see the test below).
NOT_EXPORTED: dict[str, dict[str, str]] = {}


def defined_public_names(module: ModuleType, is_package: bool) -> set[str]:
    """The public names a module binds at its top level, read from its source.

    Counted: functions, classes and assigned names; ``import X as X`` re-exports; and
    for a package, whatever it imports from its own subpackages. Branches (``if
    TYPE_CHECKING:``, ``try``) are read too. A plain ``from elsewhere import X`` is a
    module using X, not defining it, and does not count.
    """
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    name = module.__name__
    names: set[str] = set()

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
                source = node.module or ""
                own = is_package and (
                    node.level > 0 or source == name or source.startswith(f"{name}.")
                )
                for alias in node.names:
                    if own or alias.asname == alias.name:
                        names.add(alias.asname or alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname is not None and alias.asname == alias.name.split(".")[-1]:
                        names.add(alias.asname)
            elif isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)

    visit(tree.body)
    return {n for n in names if not n.startswith("_")}


def ruff_order(name: str) -> tuple[int, list[int | str]]:
    """RUF022's isort-style key: CONSTANTS, then Classes, then the rest; natural order."""
    if name.upper() == name and any(c.isalpha() for c in name) and not name.startswith("_"):
        group = 0
    elif name[:1].isupper():
        group = 1
    else:
        group = 2
    return group, [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def exported(module: ModuleType) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        return []
    return list(names)


def test_10_7_the_walk_finds_the_public_packages() -> None:
    for name in (
        "penguin",
        "penguin.protocol",
        "penguin.config",
        "penguin.environment",
        "penguin.approval",
        "penguin.trace",
        "penguin.llm",
        "penguin.llm.testing",
        "penguin.engine",
        "penguin.agent",
        "penguin.cli",
        "penguin.server",
    ):
        assert name in PUBLIC_MODULES, name
    assert not [name for name in PUBLIC_MODULES if "._" in name]


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_all_names_exist_and_are_sorted(module_name: str) -> None:
    module = importlib.import_module(module_name)
    names = exported(module)
    assert len(names) == len(set(names)), f"{module_name}.__all__ repeats a name"
    assert names == sorted(names, key=ruff_order), f"{module_name}.__all__ is out of order"
    for name in names:
        assert hasattr(module, name), f"{module_name}.{name} is in __all__ but missing"
    shown = set(dir(module))
    assert set(names) <= shown, f"dir({module_name}) leaves out {set(names) - shown}"
    # A lazily loaded name (dir() shows it before it is loaded) must be a public one.
    lazy = shown - set(vars(module)) - {"__getattr__", "__dir__"}
    assert lazy <= set(names), f"{module_name} loads {lazy - set(names)} lazily"


@pytest.mark.parametrize(("module_name", "is_package"), PUBLIC)
def test_10_7_every_public_name_is_exported_or_excluded(module_name: str, is_package: bool) -> None:
    module = importlib.import_module(module_name)
    defined = defined_public_names(module, is_package)
    excluded = NOT_EXPORTED.get(module_name, {})
    missing = defined - set(exported(module)) - set(excluded)
    assert not missing, f"{module_name} defines {sorted(missing)} but does not export them"
    stale = {n for n in excluded if n not in defined or n in exported(module)}
    assert not stale, f"NOT_EXPORTED[{module_name!r}] lists {sorted(stale)}, which needs no entry"


def test_10_7_the_checker_sees_each_kind_of_definition(tmp_path: Path) -> None:
    source = tmp_path / "sample.py"
    source.write_text(
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "import os\n"
        "import json as json\n"
        "from os import path\n"
        "from os import sep as sep\n"
        "if TYPE_CHECKING:\n"
        "    from collections import OrderedDict as OrderedDict\n"
        "try:\n"
        "    LIMIT = 1\n"
        "except ImportError:\n"
        "    LIMIT = 2\n"
        "NAME: str = 'x'\n"
        "first, second = 1, 2\n"
        "_private = 3\n"
        "def function(): ...\n"
        "async def coroutine(): ...\n"
        "class Thing: ...\n"
    )
    module = ModuleType("sample")
    module.__file__ = str(source)
    assert defined_public_names(module, is_package=False) == {
        "json",
        "sep",
        "OrderedDict",
        "LIMIT",
        "NAME",
        "first",
        "second",
        "function",
        "coroutine",
        "Thing",
    }


def test_10_7_a_fresh_interpreter_imports_every_public_name() -> None:
    # The facades load names on first use; a star import in a clean process proves that
    # `from penguin import X` works for every X, with nothing imported beforehand.
    lines = [
        f"from {name} import *"
        for name in PUBLIC_MODULES
        if exported(importlib.import_module(name))
    ]
    lines += [f"import {name}" for name in PUBLIC_MODULES]
    done = subprocess.run(
        [sys.executable, "-c", "\n".join(lines)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_public_classes_and_functions_have_docstrings(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert module.__doc__
    for name in exported(module):
        obj = getattr(module, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"{module_name}.{name} has no docstring"


def test_design_surface() -> None:
    from penguin import protocol as om

    for name in (
        "Environment",
        "EnvironmentConfig",
        "ToolDefinitionConfig",
        "ToolContext",
        "ToolResult",
    ):
        assert name in penguin.__all__
    for name in (
        "tool_call",
        "tool_call_output",
        "partial_tool_call_output",
        "user_text",
        "assistant_text",
        "with_origin",
        "is_partial",
        "is_complete_model_message",
        "is_event",
        "dumps",
        "loads",
        "to_dict",
        "from_dict",
        "OmniMessage",
        "ProtocolError",
        "ToolDefinition",
    ):
        assert name in om.__all__
    for name in ("default_tools", "load_system_config", "select_tools"):
        assert name in penguin.config.__all__


def test_every_module_opens_with_a_docstring() -> None:
    for info in pkgutil.walk_packages(penguin.__path__, "penguin."):
        module = importlib.import_module(info.name)
        assert (module.__doc__ or "").strip(), f"{info.name} has no module docstring"


def test_10_7_the_version_is_written_once() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["hatch"]["version"]["path"] == "penguin/_version.py"
    written = re.findall(
        r'^__version__ = "([^"]+)"$',
        (ROOT / "penguin" / "_version.py").read_text(encoding="utf-8"),
        flags=re.MULTILINE,
    )
    assert written == [penguin.__version__]
