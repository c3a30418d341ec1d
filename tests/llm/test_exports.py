"""The public surface of penguin.llm is deliberate: names exist, are documented, fit LLM."""

from __future__ import annotations

import importlib
import inspect

import pytest

from penguin.llm import LLM, OpenAIChatLLM, ScriptedLLM

MODULES = ["penguin.llm", "penguin.llm.testing"]


@pytest.mark.parametrize("module_name", MODULES)
def test_all_names_exist_and_are_documented(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert module.__doc__
    names = module.__all__
    assert len(names) == len(set(names))
    for name in names:
        obj = getattr(module, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"{module_name}.{name} has no docstring"


def test_private_modules_have_design_notes() -> None:
    for name in (
        "_interface",
        "_response",
        "_assemble",
        "_sse",
        "_chat_request",
        "_chat_stream",
        "_openai",
        "_scripted",
        "_errors",
    ):
        module = importlib.import_module(f"penguin.llm.{name}")
        assert len(module.__doc__ or "") > 200, name


async def test_both_clients_are_llms() -> None:
    scripted: LLM = ScriptedLLM()
    async with OpenAIChatLLM(base_url="http://127.0.0.1:9/v1", model_id="m") as client:
        wire: LLM = client
        assert wire.model.model_id == "m"
    assert scripted.context_window is None
