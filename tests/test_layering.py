"""The one map of the layers (with docs/architecture.md, which draws the same picture).

Imports point down the layers, and no modules import each other in a circle. Every
import of every module under ``penguin/`` is read from the source with ``ast``: the
module-level ones, the ones inside functions, and the ones under ``if TYPE_CHECKING:``.
The layers, lowest first::

    0  penguin._concurrency, penguin._log, ... (top-level private helpers)
    1  protocol
    2  config
    3  environment | approval | trace | llm       (siblings: none imports another;
                                                  approval may read config types)
    4  engine (tools only through its ToolRunner protocol: it never imports environment)
    5  agent
    6  batch
    7  server
    8  cli (``penguin server`` starts the server, so the command line sits above it)
    9  penguin itself (the facade that re-exports them all; nothing inside imports it)

A module may import anything in its own unit (``environment`` with its plug-in folders
``tools/``, ``supervisor/`` and ``mcp/``, say) and anything in a lower layer; an import
of a higher layer is *upward*, one of a sibling is *sideways*, an import the map rules
out although it points down (the engine reaching the Environment) is *forbidden*. No
imports may form a circle, inside a unit or across.

A module imports another unit only through that unit's public names: an import of a
private module (a ``_name`` part) of another unit is *private*; the top-level helpers of
layer 0 are there for every layer and are exempt. The same holds for third-party
packages: no import of a library's private module (``mcp.shared._httpx_utils``, say).

``TYPE_CHECKING`` imports count. They are not executed, but they are dependencies all the
same: the module's signatures name the other layer's types, a reader and the type checker
have to load that layer to follow it, and the layering could otherwise be bypassed by
annotating with an upper layer's classes.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import attrs
import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "penguin"

# unit -> layer; a unit is a top-level subpackage or module of penguin.
LAYERS: Mapping[str, int] = {
    "<helpers>": 0,
    "protocol": 1,
    "config": 2,
    "environment": 3,
    "approval": 3,
    "trace": 3,
    "llm": 3,
    "engine": 4,
    "agent": 5,
    "batch": 6,
    "server": 7,
    "cli": 8,
    "<facade>": 9,
}


@attrs.frozen(order=True)
class Edge:
    """``importer`` imports ``imported`` (both dotted module names) at ``line``."""

    importer: str
    imported: str
    line: int = attrs.field(eq=False, order=False)


@attrs.frozen
class Violation:
    """An import that breaks the layering, or a circle of imports.

    ``kind`` is ``upward`` or ``sideways`` with ``modules`` the importer and the imported
    module, or ``circle`` with ``modules`` every module of the circle, sorted.
    """

    kind: str
    modules: tuple[str, ...]
    detail: str

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        return self.kind, self.modules


# Imports that point down but that the map rules out: importer unit -> imported units.
FORBIDDEN: Mapping[str, frozenset[str]] = {
    "engine": frozenset({"environment"}),  # tools only through engine/_runner.py's ToolRunner
}

# Each existing violation, with why it is there and which change removes it. An entry
# that no longer occurs fails the test too, so the list only ever shrinks. The keys are
# Violation.key.
ALLOWED: Mapping[tuple[str, tuple[str, ...]], str] = {}


def unit_of(module: str) -> str:
    """The layering unit of a dotted module name under ``penguin``."""
    parts = module.split(".")
    assert parts[0] == "penguin", module
    if len(parts) == 1:
        return "<facade>"
    if parts[1] == "__main__":
        return "cli"
    if parts[1].startswith("_"):
        return "<helpers>"
    return parts[1]


def discover(package_dir: Path = PACKAGE_DIR) -> dict[str, tuple[str, bool]]:
    """Every module under ``package_dir``: dotted name -> (source, is_package)."""
    modules: dict[str, tuple[str, bool]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        relative = path.relative_to(package_dir.parent).with_suffix("")
        parts = list(relative.parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        modules[".".join(parts)] = (path.read_text(encoding="utf-8"), is_package)
    return modules


def imports_of(name: str, source: str, is_package: bool, known: set[str]) -> Iterator[Edge]:
    """Every import of a penguin module in ``source``, anywhere in it, resolved to a module.

    ``from a import b`` is an import of the module ``a.b`` when there is one, else of
    ``a``. Relative imports resolve against the module's package.
    """
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "penguin":
                    yield Edge(name, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            if base.split(".")[0] != "penguin":
                continue
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                yield Edge(name, candidate if candidate in known else base, node.lineno)


def check(modules: Mapping[str, tuple[str, bool]]) -> list[Violation]:
    """The layering violations and import circles among ``modules``."""
    known = set(modules)
    edges = sorted(
        {
            edge
            for name, (source, is_package) in modules.items()
            for edge in imports_of(name, source, is_package, known)
            if edge.imported != name
        }
    )
    found: list[Violation] = []
    for edge in edges:
        source_unit, target_unit = unit_of(edge.importer), unit_of(edge.imported)
        for unit in (source_unit, target_unit):
            if unit not in LAYERS:
                raise AssertionError(f"penguin.{unit} has no layer: add it to LAYERS")
        if source_unit == target_unit:
            continue
        source_layer, target_layer = LAYERS[source_unit], LAYERS[target_unit]
        where = (
            f"{edge.importer}, line {edge.line}, imports {edge.imported}: "
            f"{source_unit} (layer {source_layer})"
        )
        if target_unit != "<helpers>" and _is_private(edge.imported):
            detail = f"{where} reaches into a private module of {target_unit}"
            found.append(Violation("private", (edge.importer, edge.imported), detail))
        if target_unit in FORBIDDEN.get(source_unit, ()):
            detail = f"{where} may not depend on {target_unit} at all"
            found.append(Violation("forbidden", (edge.importer, edge.imported), detail))
        if target_layer > source_layer:
            detail = f"{where} depends on {target_unit} (layer {target_layer}), above it"
            found.append(Violation("upward", (edge.importer, edge.imported), detail))
        elif target_layer == source_layer:
            detail = f"{where} depends on its sibling {target_unit}"
            found.append(Violation("sideways", (edge.importer, edge.imported), detail))
    found.extend(_circles(edges))
    return found


def _is_private(module: str) -> bool:
    """Whether the dotted module name has a private part below ``penguin``."""
    return any(part.startswith("_") for part in module.split(".")[1:])


def third_party_private_imports(
    modules: Mapping[str, tuple[str, bool]],
) -> list[tuple[str, int, str]]:
    """Imports of another package's private module: (importer, line, imported)."""
    found = []
    for name, (source, _) in modules.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                targets = [node.module]
            else:
                continue
            for target in targets:
                parts = target.split(".")
                if parts[0] != "penguin" and any(part.startswith("_") for part in parts[1:]):
                    found.append((name, node.lineno, target))
    return sorted(found)


def _circles(edges: list[Edge]) -> Iterator[Violation]:
    """One violation per import circle: a strongly connected group of modules (Tarjan).

    The group is sorted, so it names the circle whatever order the modules are visited in.
    """
    graph: dict[str, list[str]] = {}
    for edge in edges:
        graph.setdefault(edge.importer, []).append(edge.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    for group in sorted(groups):
        yield Violation("circle", tuple(group), " <-> ".join(group))


def test_10_7_imports_point_down_the_layers() -> None:
    found = check(discover())
    unexpected = [v for v in found if v.key not in ALLOWED]
    assert not unexpected, "\n".join(f"{v.kind}: {v.detail}" for v in unexpected)
    occurring = {v.key for v in found}
    stale = [key for key in ALLOWED if key not in occurring]
    assert not stale, f"ALLOWED lists violations that are gone; remove them: {stale}"


def test_17_5_no_import_of_a_third_party_private_module() -> None:
    assert third_party_private_imports(discover()) == []


def test_10_7_every_unit_has_a_layer() -> None:
    for name in discover():
        assert unit_of(name) in LAYERS, name


# --- the checker itself, on synthetic trees -----------------------------------------


def tree(**sources: str) -> dict[str, tuple[str, bool]]:
    """Modules named with ``__`` for dots; a trailing ``__init`` marks a package."""
    modules: dict[str, tuple[str, bool]] = {}
    for key, source in sources.items():
        name = key.replace("__", ".")
        is_package = name.endswith(".init")
        modules[name.removesuffix(".init")] = (source, is_package)
    return modules


def kinds(found: list[Violation]) -> set[tuple[str, tuple[str, ...]]]:
    return {v.key for v in found}


def test_10_7_the_checker_accepts_downward_and_internal_imports() -> None:
    modules = tree(
        penguin__init="from penguin.agent import Agent as Agent\n",
        penguin___log="import logging\n",
        penguin__protocol__init="from ._types import X as X\nfrom penguin import _log\n",
        penguin__protocol___types="import attrs\n",
        penguin__config__init="from penguin.protocol import X\n",
        penguin__llm__init="from . import _client\n",
        penguin__llm___client="from ..config import thing\nimport penguin.protocol\n",
        penguin__agent="from penguin import llm, config\n",
    )
    assert check(modules) == []


@pytest.mark.parametrize(
    ("importer_source", "expected"),
    [
        # a module-level import of a higher layer
        (
            "from penguin.engine import Engine\n",
            ("upward", ("penguin.protocol._x", "penguin.engine")),
        ),
        # the same inside a function
        (
            "def f():\n    import penguin.agent\n",
            ("upward", ("penguin.protocol._x", "penguin.agent")),
        ),
        # and under TYPE_CHECKING
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from penguin.config import ToolDefinitionConfig\n",
            ("upward", ("penguin.protocol._x", "penguin.config")),
        ),
        # the root facade is the top: nothing inside penguin imports it
        ("from penguin import Agent\n", ("upward", ("penguin.protocol._x", "penguin"))),
    ],
)
def test_10_7_the_checker_fails_on_an_upward_import(
    importer_source: str, expected: tuple[str, tuple[str, ...]]
) -> None:
    modules = tree(
        penguin__init="",
        penguin__protocol__init="",
        penguin__protocol___x=importer_source,
        penguin__config__init="",
        penguin__engine__init="",
        penguin__agent="",
    )
    assert kinds(check(modules)) == {expected}


def test_10_7_the_checker_fails_on_a_sideways_import() -> None:
    modules = tree(
        penguin__llm__init="",
        penguin__llm___client="from ..trace import TraceWriter\n",
        penguin__trace__init="",
        penguin__approval__init="import penguin.environment\n",
        penguin__environment__init="",
    )
    assert kinds(check(modules)) == {
        ("sideways", ("penguin.llm._client", "penguin.trace")),
        ("sideways", ("penguin.approval", "penguin.environment")),
    }


def test_10_7_the_checker_fails_on_a_circle_inside_a_package() -> None:
    modules = tree(
        penguin__environment__init="from ._a import A as A\n",
        penguin__environment___a="from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ._b import B\n",
        penguin__environment___b="from ._a import A\n",
    )
    assert kinds(check(modules)) == {
        ("circle", ("penguin.environment._a", "penguin.environment._b")),
    }


def test_10_7_the_checker_asks_for_a_layer_for_a_new_package() -> None:
    modules = tree(penguin__chat__init="import penguin.agent\n", penguin__agent="")
    with pytest.raises(AssertionError, match=r"penguin\.chat has no layer"):
        check(modules)


def test_17_5_the_checker_fails_on_a_private_module_of_another_unit() -> None:
    modules = tree(
        penguin__protocol__init="",
        penguin__protocol___approve="",
        penguin__approval__init="from penguin.protocol._approve import consult\n",
        penguin__environment__init="from penguin.protocol import consult\n",
        penguin___log="",
        penguin__trace__init="from penguin._log import warn\nfrom ._writer import W\n",
        penguin__trace___writer="",
    )
    assert kinds(check(modules)) == {
        ("private", ("penguin.approval", "penguin.protocol._approve")),
    }


def test_17_5_the_checker_fails_on_the_engine_reaching_the_environment() -> None:
    modules = tree(
        penguin__engine__init="from penguin.environment import Environment\n",
        penguin__environment__init="",
    )
    assert kinds(check(modules)) == {("forbidden", ("penguin.engine", "penguin.environment"))}


def test_17_5_the_checker_sees_a_third_party_private_module() -> None:
    modules = tree(
        penguin__environment__init="import mcp.types\nfrom mcp.shared._httpx_utils import f\n",
    )
    assert third_party_private_imports(modules) == [
        ("penguin.environment", 2, "mcp.shared._httpx_utils")
    ]


# --- surfaces stand on Session (issue 17 item 1) ------------------------------------

_ENGINE_OWNERS = ("penguin.engine", "penguin.agent")


def engine_reaches(modules: Mapping[str, tuple[str, bool]]) -> list[tuple[str, int, str]]:
    """Every ``x.engine`` / ``x._engine`` outside the engine and agent.py: (module, line, attr)."""
    found = []
    for name, (source, _) in modules.items():
        if any(name == owner or name.startswith(owner + ".") for owner in _ENGINE_OWNERS):
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Attribute) and node.attr in ("engine", "_engine"):
                found.append((name, node.lineno, node.attr))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "setattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in ("engine", "_engine")
            ):
                found.append((name, node.lineno, str(node.args[1].value)))
    return sorted(found)


def test_17_1_no_surface_touches_the_session_engine() -> None:
    assert engine_reaches(discover()) == []


def test_17_1_the_checker_sees_every_way_to_the_engine() -> None:
    modules = tree(
        penguin__cli___chat="session.engine.llm = x\n",
        penguin__batch___runner="s._engine.max_turns = 3\n",
        penguin__server___sessions="getattr(session, 'engine')\n",
        penguin__agent="self._engine.run()\n",
        penguin__engine___engine="self.engine = 1\n",
    )
    assert engine_reaches(modules) == [
        ("penguin.batch._runner", 1, "_engine"),
        ("penguin.cli._chat", 1, "engine"),
        ("penguin.server._sessions", 1, "engine"),
    ]
