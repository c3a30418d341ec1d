"""The engine's public surface is deliberate: every exported name exists and is documented."""

from __future__ import annotations

import inspect

import penguin.engine


def test_every_exported_name_exists_and_is_documented() -> None:
    names = penguin.engine.__all__
    assert len(names) == len(set(names))
    for name in names:
        obj = getattr(penguin.engine, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"penguin.engine.{name} has no docstring"
