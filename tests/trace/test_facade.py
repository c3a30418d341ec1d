"""The public surface of penguin.trace is deliberate and documented."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import penguin.trace


def test_all_names_exist_are_unique_and_documented() -> None:
    names = penguin.trace.__all__
    assert len(names) == len(set(names))
    for name in names:
        obj = getattr(penguin.trace, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"penguin.trace.{name} has no docstring"


def test_every_trace_module_opens_with_a_docstring() -> None:
    assert (penguin.trace.__doc__ or "").strip()
    for info in pkgutil.walk_packages(penguin.trace.__path__, "penguin.trace."):
        module = importlib.import_module(info.name)
        assert (module.__doc__ or "").strip(), f"{info.name} has no module docstring"


def test_the_errors_module_draws_its_tree() -> None:
    from penguin.trace import _errors

    doc = _errors.__doc__ or ""
    for name in _errors.__all__:
        assert name in doc


def test_trace_imports_only_lower_layers() -> None:
    import sys

    for name in [m for m in sys.modules if m.startswith("penguin.trace")]:
        module = sys.modules[name]
        source = inspect.getsource(module)
        for upper in ("environment", "approval", "llm", "engine", "agent", "cli", "server"):
            assert f"from ..{upper}" not in source
            assert f"penguin.{upper}" not in source
