"""Classes are final by default (DESIGN §7): one that nothing extends says so.

An AST walk over penguin/: every class that no class of penguin/, tests/ or
benchmarks/ names as a base must be decorated ``@final`` — unless it is a Protocol,
an Enum, a TypedDict or a NamedTuple (which cannot be, or need not be), or declares a
metaclass. mypy --strict then refuses any subclass of a final one.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_EXEMPT_BASES = {"Protocol", "Enum", "IntEnum", "StrEnum", "TypedDict", "NamedTuple", "ABC"}


def _bare(node: ast.expr) -> str:
    return ast.unparse(node).split("[")[0].split(".")[-1]


def _classes(folder: str) -> list[tuple[Path, ast.ClassDef]]:
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                found.append((path, node))
    return found


def test_every_class_nothing_extends_is_final() -> None:
    extended = {
        _bare(base)
        for folder in ("penguin", "tests", "benchmarks")
        for _, node in _classes(folder)
        for base in node.bases
    }
    missing = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
        for path, node in _classes("penguin")
        if node.name not in extended
        and not {_bare(base) for base in node.bases} & _EXEMPT_BASES
        and not any(keyword.arg == "metaclass" for keyword in node.keywords)
        and not any(_bare(d) == "final" for d in node.decorator_list)
    ]
    assert missing == [], f"classes that nothing extends should be @final: {missing}"
