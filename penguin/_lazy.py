"""Public facades that load their heavier modules on first use (PEP 562).

``penguin``, ``penguin.protocol`` and ``penguin.config`` re-export names whose modules
cost more to import than most callers need: the whole agent stack, the cattrs codec,
the TOML editing of agent state. A facade lists those names with the module each comes
from and installs the pair this module builds as its ``__getattr__`` and ``__dir__``;
the first access imports the module and stores the value in the facade, so later
accesses are plain attribute reads. ``from package import name`` goes through the same
path. Type checkers see the names through ``TYPE_CHECKING`` imports in the facade,
which installs the pair under ``if not TYPE_CHECKING`` so that a misspelt name stays an
error for them.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A ``__getattr__`` and a ``__dir__`` for the facade ``package``.

    ``names`` maps each lazily loaded name to the module it is read from, relative to
    ``package`` (``"._codec"``); a name that is that module's own name (``"approval":
    ".approval"``) is the submodule itself. Any other name raises ``AttributeError`` as
    a missing attribute does.
    """

    def __getattr__(name: str) -> Any:
        module_name = names.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(module_name, package)
        value = module if module.__name__ == f"{package}.{name}" else getattr(module, name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__
