"""The install surfaces agree: the ``dev`` extra is the union of the dependency groups.

``pip install -e '.[dev]'`` (the README's test command, .ci/run) and the nox sessions
(which install the PEP 735 groups) must hand a developer the same tools; an extra cannot
name a group, so the list is written twice and this test keeps the two in step.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _group(groups: dict[str, list[object]], name: str) -> set[str]:
    found: set[str] = set()
    for entry in groups[name]:
        if isinstance(entry, dict):
            found |= _group(groups, str(entry["include-group"]))
        else:
            found.add(str(Requirement(str(entry))))
    return found


def test_the_dev_extra_is_the_union_of_the_dependency_groups() -> None:
    data = tomllib.loads(PYPROJECT.read_text())
    groups = data["dependency-groups"]
    extra = {str(Requirement(r)) for r in data["project"]["optional-dependencies"]["dev"]}
    assert extra == _group(groups, "dev")
    assert _group(groups, "dev") == _group(groups, "tests") | _group(groups, "lint") | _group(
        groups, "typecheck"
    )
