"""The public surface is deliberate: every exported name exists and is documented."""

from __future__ import annotations

import importlib
import inspect

import pytest

PUBLIC_MODULES = [
    "penguin",
    "penguin.protocol",
    "penguin.config",
    "penguin.environment",
    "penguin.approval",
    "penguin.trace",
    "penguin.llm",
    "penguin.llm.testing",
    "penguin.server",
]


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_all_names_exist_and_are_sorted(module_name: str) -> None:
    module = importlib.import_module(module_name)
    names = module.__all__
    assert len(names) == len(set(names))
    for name in names:
        assert hasattr(module, name), f"{module_name}.{name} is in __all__ but missing"


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_public_classes_and_functions_have_docstrings(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert module.__doc__
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"{module_name}.{name} has no docstring"


def test_design_surface() -> None:
    import penguin
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
    import pkgutil

    import penguin

    for info in pkgutil.walk_packages(penguin.__path__, "penguin."):
        module = importlib.import_module(info.name)
        assert (module.__doc__ or "").strip(), f"{info.name} has no module docstring"
